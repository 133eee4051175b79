"""Is the installed torch the one the installed vLLM was built against?

vLLM wheels pin torch exactly (e.g. `torch==2.7.0`); its compiled kernels link against that
torch's ABI. Another torch (often pulled in by a later `pip install`) gives undefined-symbol
errors at import or subtle kernel failures. The requirement is read from vLLM's package metadata
by the probe, without importing vLLM. Versions are compared as PEP 440 says (`packaging`): a
nightly `2.9.0.dev20250715` is not `==2.9.0.dev20250801`, and `2.8.0rc1` is not `==2.8.0`.
"""

from __future__ import annotations

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from llmdoctor.engine.facts import FactMissing, Facts
from llmdoctor.engine.findings import evidence, ok, warning
from llmdoctor.engine.registry import check
from llmdoctor.parsers.serving_settings import VERSIONS, require_torch

CHECK = "torch-vllm-versions"


def satisfies(version: str, specifier: str) -> bool:
    """Whether `version` meets a specifier such as '==2.7.0' or '>=2.4,<2.6' (PEP 440).

    The installed version is what it is, so a pre-release or nightly is compared as such
    rather than excluded; a local part (`+cu128`) does not count against `==2.7.0`.
    ValueError when either cannot be read.
    """
    try:
        wanted = SpecifierSet(specifier)
    except InvalidSpecifier:
        raise ValueError(f"cannot read the requirement {specifier!r}") from None
    try:
        have = Version(version)
    except InvalidVersion:
        raise ValueError(f"cannot read the torch version {version!r}") from None
    return wanted.contains(have, prereleases=True)


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
