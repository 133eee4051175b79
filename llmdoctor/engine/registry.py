"""The check registry: `@check(...)` on a pure function `facts -> findings`.

Built-in checks live in checks/ (imported as llmdoctor.checks); a site's own checks are loaded
from `--checks-dir DIR`. Adding a check is one file; nothing else needs an edit.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from llmdoctor.engine.fact_keys import require_declared
from llmdoctor.errors import BadInput

SCOPES = ("k8s", "node", "vllm", "logs", "capacity", "history")
KINDS = ("cause", "symptom", "generic")


@dataclass(frozen=True)
class CheckSpec:
    id: str
    fn: Callable
    title: str
    scope: str
    needs: tuple[str, ...]
    runbooks: tuple[str, ...]
    supersedes: tuple[str, ...] = ()
    kind: str = "cause"
    follows: tuple[str, ...] = ()
    before_start: bool = False


_CHECKS: dict[str, CheckSpec] = {}


class DuplicateCheck(BadInput):
    """Two check functions claim the same id."""


def _origin(fn: Callable) -> tuple[str, str]:
    return (getattr(fn, "__module__", ""), _source_file(fn))


def _source_file(fn: Callable) -> str:
    code = getattr(fn, "__code__", None)
    return code.co_filename if code is not None else repr(fn)


def check(
    id: str,
    *,
    title: str,
    scope: str,
    needs: tuple[str, ...] | list[str] = (),
    runbooks: tuple[str, ...] | list[str] = (),
    supersedes: tuple[str, ...] | list[str] = (),
    kind: str = "cause",
    follows: tuple[str, ...] | list[str] = (),
    before_start: bool = False,
):
    """Register a check.

    `needs` lists fact keys that must all be present (else the check is skipped with the reason
    they are missing); a check can also call `facts.require(...)` for optional paths.
    `runbooks` lists every runbook id the check may link to (a test verifies they exist).
    `supersedes` names generic checks (e.g. log-signatures) whose finding for the same runbook
    this check's finding replaces, so one problem is reported once, by the check that knows most.
    `kind` orders findings of equal severity: "cause" (what is wrong: a full queue, an Xid), then
    "symptom" (how users feel it: slow or failed requests), then "generic" (raw log matches).
    `follows` names checks whose problem, on the same subject, explains this check's finding
    (pod-readiness follows pod-restarts: a crash loop is why the pod is not Ready); the report
    folds the finding under that cause and never puts a check mark beside it.
    `before_start` says that what the check watches is settled before the container starts (its
    spec, its image, its scheduling): a failure the running container logs comes after it and
    cannot put its check mark in doubt (a full model cache says nothing of the image pull).
    The function returns a Finding, a list of Findings, or None (= ok, nothing found).
    """
    if scope not in SCOPES:
        raise ValueError(f"check {id}: scope must be one of {SCOPES}")
    if kind not in KINDS:
        raise ValueError(f"check {id}: kind must be one of {KINDS}")
    require_declared(needs, f"check {id}")

    def register(fn: Callable) -> Callable:
        existing = _CHECKS.get(id)
        if existing is not None and _origin(existing.fn) != _origin(fn):
            # the same module imported again (a second --checks-dir of one folder) re-registers;
            # another file claiming the id is the user's mistake, named with both files
            raise DuplicateCheck(
                f"check id {id!r} is defined twice: in {_source_file(existing.fn)} and in "
                f"{_source_file(fn)}; rename one of them"
            )
        _CHECKS[id] = CheckSpec(
            id,
            fn,
            title,
            scope,
            tuple(needs),
            tuple(runbooks),
            tuple(supersedes),
            kind,
            tuple(follows),
            before_start,
        )
        return fn

    return register


def load_builtin_checks() -> None:
    """Import every module of llmdoctor.checks so their @check decorators run."""
    import llmdoctor.checks as package

    for info in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{package.__name__}.{info.name}")


def load_checks_dir(directory: str | Path) -> None:
    """Import every *.py file in a site's own checks folder."""
    folder = Path(directory)
    if not folder.is_dir():
        raise BadInput(f"--checks-dir {folder}: not a directory")
    for path in sorted(folder.glob("*.py")):
        name = f"llmdoctor_site_checks.{path.stem}"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise BadInput(f"{path}: cannot be imported as a check module")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except DuplicateCheck:
            raise
        except Exception as exc:
            raise BadInput(f"{path}: failed to import: {type(exc).__name__}: {exc}") from None


def check_kind(check_id: str) -> str:
    """The kind of a registered check ("cause" for one the registry does not know)."""
    spec = _CHECKS.get(check_id)
    return spec.kind if spec is not None else "cause"


def check_spec(check_id: str) -> CheckSpec | None:
    """The registered check of this id (the built-in checks loaded first), or None (a finding
    from a check that is not loaded)."""
    if check_id not in _CHECKS:
        load_builtin_checks()
    return _CHECKS.get(check_id)


def all_checks() -> list[CheckSpec]:
    load_builtin_checks()
    return sorted(_CHECKS.values(), key=lambda c: (c.scope, c.id))


def checks_for_scopes(scopes: tuple[str, ...] | list[str]) -> list[CheckSpec]:
    return [c for c in all_checks() if c.scope in scopes]
