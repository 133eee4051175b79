"""The package's layers hold: no import circles, a small package root, and only the command
layer knows the command-line framework (the library never imports typer or the commands)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "llmdoctor"
COMMAND_LAYER = {"llmdoctor.cli", "llmdoctor.__main__", "llmdoctor.kubectl_plugin"}


def _module_name(path: Path) -> str:
    if path.is_relative_to(ROOT / "checks"):
        parts = ["llmdoctor", "checks", *path.relative_to(ROOT / "checks").with_suffix("").parts]
    else:
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    files = [*PACKAGE.rglob("*.py"), *(ROOT / "checks").glob("*.py")]
    return {_module_name(p): p for p in files}


def _type_checking_only(tree: ast.Module) -> set[int]:
    """Ids of import nodes under `if TYPE_CHECKING:` (never run, so no circle)."""
    ids: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            ids |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return ids


def _imports(path: Path) -> set[str]:
    """Every llmdoctor module this file imports, at the top or inside a function."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _type_checking_only(tree)
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {
        name: {m for m in _imports(path) if m in modules and m != name}
        for name, path in modules.items()
    }


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            nxt = next(edges, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                members = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    members.append(member)
                    if member == node:
                        break
                if len(members) > 1:
                    circles.append(sorted(members))
    return circles


def test_no_module_imports_itself_through_others():
    # A circle makes import order matter and hides which layer owns what.
    assert _circles(_graph()) == []


def test_the_circle_finder_finds_a_circle():
    # The test above must be able to fail.
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_package_root_holds_at_most_fifteen_modules():
    # The tree shows the architecture: domains are packages, the root keeps entry points and
    # the few helpers every layer shares.
    root_modules = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(root_modules) <= 15, root_modules


def test_only_the_command_layer_imports_typer_or_the_commands():
    # The library is usable without the CLI (as sqlite-utils' db.py never imports click).
    offenders = {}
    for name, path in _modules().items():
        if name in COMMAND_LAYER or name.startswith("llmdoctor.commands"):
            continue
        bad = {
            m
            for m in _imports(path)
            if m == "typer" or m.startswith(("typer.", "llmdoctor.commands", "llmdoctor.cli"))
        }
        if bad:
            offenders[name] = sorted(bad)
    assert offenders == {}


def test_collectors_do_not_import_the_check_runner():
    # Collection and checking are separate stages: a collector needs facts, not the runner.
    for name, path in _modules().items():
        if name.startswith("llmdoctor.collectors"):
            assert "llmdoctor.engine.runner" not in _imports(path), name


def test_architecture_doc_names_every_package_and_only_real_modules():
    doc = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    packages = sorted(
        p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()
    )
    assert [p for p in packages if f"llmdoctor/{p}/" not in doc] == []
    import re

    named = set(re.findall(r"`(llmdoctor/[\w/]+\.py)`", doc))
    assert named, "the module map names modules"
    assert sorted(n for n in named if not (ROOT / n).exists()) == []


def test_every_package_is_shipped_in_the_wheel():
    # setuptools' explicit package list: a package missing there is missing from the wheel.
    import tomllib

    listed = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    packages = {
        _module_name(init)
        for init in PACKAGE.rglob("__init__.py")
        if "site_assets" not in init.parts
    }
    assert packages - listed == set()
