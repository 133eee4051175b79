"""docs/architecture.md is the repository's own design document, and it stays current."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
from pathlib import Path

from llmdoctor.engine import derive, fact_keys
from llmdoctor.engine.registry import KINDS, SCOPES, check

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")


def test_nothing_cites_a_design_document_the_clone_does_not_have():
    # issue 12: code and README cited DESIGN.md, which lives outside the repository
    tracked = subprocess.run(
        ["git", "ls-files", "*.py", "*.md", "*.toml", "*.yaml"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    citing = [
        name
        for name in tracked
        if name != "tests/test_architecture_doc.py"
        and (ROOT / name).is_file()
        and "DESIGN.md" in (ROOT / name).read_text(encoding="utf-8", errors="replace")
    ]
    assert citing == []
    assert "docs/architecture.md" in (ROOT / "README.md").read_text(encoding="utf-8")


def test_every_derived_fact_key_is_documented():
    derive.load_parsers()
    keys = {d.key for d in derive._DERIVATIONS}
    assert keys and {k for k in keys if f"`{k}`" not in DOC} == set()


def test_the_check_contract_names_every_decorator_argument_scope_and_kind():
    arguments = [p for p in inspect.signature(check).parameters if p not in ("id", "title")]
    for name in (*arguments, *SCOPES, *KINDS):
        assert f"`{name}" in DOC, name


def test_sections_the_issue_asks_for():
    for heading in (
        "flow of data",
        "Fact keys",
        "check contract",
        "Bundle format",
        "Runbook entries",
    ):
        assert heading.lower() in DOC.lower(), heading
    assert "Where the design changed" in DOC


def _repo_files() -> list[str]:
    return subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()


def test_every_file_the_doc_names_exists():
    # a renamed or moved module must take its mention in the design document with it
    files = _repo_files()
    basenames = {Path(f).name for f in files}
    named = set(re.findall(r"`([\w/.-]+\.(?:py|json|yaml|md))\b", DOC))
    assert named
    missing = [
        n
        for n in named
        if "<" not in n
        and not (
            ((ROOT / n).exists() or (ROOT / "llmdoctor" / n).exists())
            if "/" in n
            else n in basenames
        )
        and fact_keys.declared(n) is None
        and n not in ("manifest.json", "config.json")
    ]
    assert sorted(missing) == []


def test_every_module_function_the_doc_names_exists():
    # `module.function` in the doc is a promise that the function lives there
    modules: dict[str, list[Path]] = {}
    for f in _repo_files():
        if f.endswith(".py"):
            modules.setdefault(Path(f).stem, []).append(ROOT / f)
    packages = {p.name for p in (ROOT / "llmdoctor").iterdir() if p.is_dir()} | {"llmdoctor"}
    wrong = []
    for module, name in set(re.findall(r"`(\w+)\.(\w+)[`(]", DOC)):
        if name in ("py", "md", "json", "yaml", "log", "txt", "marshal") or module in packages:
            continue
        if module in sys.stdlib_module_names:
            continue
        paths = modules.get(module)
        if paths is None:
            if module[0].islower() and module not in ("facts", "self"):
                wrong.append(f"{module}.{name} (no module {module})")
            continue
        texts = [p.read_text(encoding="utf-8") for p in paths]
        if not any(re.search(rf"^\s*(def|class) {name}\b|^{name}\s*[:=]", t, re.M) for t in texts):
            wrong.append(f"{module}.{name}")
    assert sorted(wrong) == []


def test_the_doc_covers_every_command_family():
    # issue 23: explain, capacity, fleet, the site and from_log were missing from the design
    for part in ("explain", "capacity", "fleet", "wiki site", "from_log", "use cases"):
        assert re.search(rf"^## .*{re.escape(part)}", DOC, re.M | re.I), part
