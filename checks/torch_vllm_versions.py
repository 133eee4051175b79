"""Is the installed torch the one the installed vLLM was built against?

vLLM wheels pin torch exactly (e.g. `torch==2.7.0`); its compiled kernels link against that
torch's ABI. Another torch (often pulled in by a later `pip install`) gives undefined-symbol
errors at import or subtle kernel failures. The requirement is read from vLLM's package metadata
by the probe, without importing vLLM.
"""

from __future__ import annotations

import re

from llmdoctor.facts import FactMissing, Facts
from llmdoctor.findings import evidence, ok, warning
from llmdoctor.gpu_tables import version_tuple
from llmdoctor.registry import check
from llmdoctor.serving_settings import VERSIONS, require_torch

CHECK = "torch-vllm-versions"
_CLAUSE = re.compile(r"^(===|==|!=|~=|>=|<=|>|<)\s*([0-9][0-9A-Za-z.*+!-]*)$")


def _release(text: str) -> tuple[int, ...]:
    """'2.7.0+cu128' -> (2, 7, 0); '2.8.0a0' -> (2, 8, 0)."""
    return version_tuple(re.sub(r"[a-zA-Z].*$", "", text.split("+")[0]).rstrip("."))


def _pad(a: tuple[int, ...], n: int) -> tuple[int, ...]:
    return a + (0,) * (n - len(a))


def clause_holds(op: str, wanted: str, have: tuple[int, ...]) -> bool:
    """One specifier clause (PEP 440 operators, release numbers only) against a version."""
    if wanted.endswith(".*"):
        prefix = _release(wanted[:-2])
        same = have[: len(prefix)] == prefix
        return same if op == "==" else not same
    want = _release(wanted)
    n = max(len(want), len(have))
    a, b = _pad(have, n), _pad(want, n)
    if op in ("==", "==="):
        return a == b
    if op == "!=":
        return a != b
    if op == ">=":
        return a >= b
    if op == "<=":
        return a <= b
    if op == ">":
        return a > b
    if op == "<":
        return a < b
    if op == "~=":  # compatible release: >= want, == want[:-1].*
        return a >= b and have[: len(want) - 1] == want[:-1]
    raise ValueError(op)


def satisfies(version: str, specifier: str) -> bool:
    """Whether `version` meets a specifier such as '==2.7.0' or '>=2.4,<2.6'."""
    have = _release(version)
    for clause in filter(None, (c.strip() for c in specifier.split(","))):
        m = _CLAUSE.match(clause)
        if not m:
            raise ValueError(f"cannot read the requirement {clause!r}")
        if not clause_holds(m.group(1), m.group(2), have):
            return False
    return True


@check(
    CHECK,
    title="torch matches what vLLM requires",
    scope="node",
    needs=(VERSIONS,),
)
def torch_vllm_versions(facts: Facts):
    versions = require_torch(facts)
    vllm = versions.get("vllm")
    if not vllm:
        where = versions.get("python_executable") or "the probed python"
        raise FactMissing(VERSIONS, f"vLLM is not installed in {where}")
    spec = versions.get("vllm_requires_torch")
    torch = versions["torch"]
    items = [
        evidence(f"vllm {vllm} requires torch{spec or ' (no pin)'}; installed {torch}", VERSIONS)
    ]
    if not spec:
        return ok(CHECK, f"vLLM {vllm} does not pin torch; torch {torch} installed", items)
    try:
        fits = satisfies(torch, spec)
    except ValueError as exc:
        raise FactMissing(VERSIONS, str(exc)) from None
    if fits:
        return ok(CHECK, f"torch {torch} is what vLLM {vllm} requires ({spec})", items)
    return warning(
        CHECK,
        f"torch {torch} is not what vLLM {vllm} was built for (torch{spec}): expect "
        "'undefined symbol' import errors or kernel failures; reinstall the pinned torch "
        "(pip install 'torch" + spec + "') or a vLLM built for this torch",
        items,
    )
