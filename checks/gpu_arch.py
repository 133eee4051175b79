"""Does the serving torch carry kernels for this GPU's architecture?

A cubin built for sm_XY runs on a GPU of compute capability X.Z with Z >= Y (same major);
PTX (compute_XY) is JIT-compiled for any GPU of capability X.Y or newer. A GPU that neither
matches gets "no kernel image is available for execution on the device" (e.g. an RTX 5090,
sm_120, with a CUDA 12.4 torch whose list ends at sm_90).
"""

from __future__ import annotations

import re

from llmdoctor.engine.facts import FactMissing, Facts
from llmdoctor.engine.findings import critical, evidence, info, ok
from llmdoctor.engine.registry import check
from llmdoctor.gpus.tables import version_tuple
from llmdoctor.parsers.serving_settings import require_torch

CHECK = "gpu-arch"
VERSIONS = "node/versions.json"
_ARCH = re.compile(r"^(sm|compute)_(\d+)([a-z]?)$")


def _device_capabilities(facts: Facts, versions: dict) -> dict[str, list[str]]:
    """capability ('8.9') -> GPU names, from torch's own view, else from node/gpus."""
    found: dict[str, list[str]] = {}
    for dev in versions.get("devices") or []:
        if dev.get("capability"):
            found.setdefault(dev["capability"], []).append(
                f"GPU {dev.get('index')} {dev.get('name')}"
            )
    if found:
        return found
    gpus = facts.get("node/gpus")
    if not gpus:
        raise FactMissing("node/gpus", facts.missing_reason("node/gpus"))
    for gpu in gpus.get("gpus") or []:
        if gpu.get("compute_capability"):
            label = f"GPU {gpu.get('index')} {gpu.get('name')}"
            found.setdefault(gpu["compute_capability"], []).append(label)
    if not found:
        raise FactMissing("node/gpus", "the GPUs' compute capability is unknown")
    return found


def kernel_support(capability: str, arch_list: list[str]) -> tuple[str, str | None]:
    """('cubin' | 'ptx' | 'none', the list entry that serves it) for one GPU capability."""
    major, minor = (*version_tuple(capability), 0, 0)[:2]
    ptx = None
    cubin: tuple[int, str] | None = None
    for entry in arch_list:
        m = _ARCH.match(entry.strip())
        if not m:
            continue
        kind, number, suffix = m.group(1), int(m.group(2)), m.group(3)
        a_major, a_minor = number // 10, number % 10
        if kind == "sm":
            if suffix == "a" and (a_major, a_minor) != (major, minor):
                continue  # arch-specific cubins run on exactly that capability
            if a_major == major and a_minor <= minor and (cubin is None or a_minor > cubin[0]):
                cubin = (a_minor, entry)  # the closest one is what CUDA loads
        elif (a_major, a_minor) <= (major, minor):
            ptx = entry
    if cubin:
        return "cubin", cubin[1]
    return ("ptx", ptx) if ptx else ("none", None)


@check(
    CHECK,
    title="torch has kernels for this GPU architecture",
    scope="node",
    needs=(VERSIONS,),
    runbooks=("no-kernel-image",),
)
def gpu_arch(facts: Facts):
    versions = require_torch(facts)
    arch_list = versions.get("torch_arch_list") or []
    if not arch_list:
        raise FactMissing(VERSIONS, f"torch {versions['torch']} reported no CUDA arch list")
    if not any(_ARCH.match(a.strip()) for a in arch_list):
        raise FactMissing(VERSIONS, f"torch_arch_list has no sm_/compute_ entry: {arch_list}")
    listed = " ".join(arch_list)
    findings = []
    for capability, names in sorted(_device_capabilities(facts, versions).items()):
        sm = "sm_" + capability.replace(".", "")
        items = [
            evidence(f"{', '.join(names)}: compute capability {capability} ({sm})"),
            evidence(f"torch {versions['torch']} arch list: {listed}", VERSIONS),
        ]
        how, entry = kernel_support(capability, arch_list)
        subject = f"{sm} ({names[0].split(' ', 2)[-1]})"
        if how == "cubin":
            findings.append(ok(CHECK, f"torch has {entry} kernels for {sm}", items, subject))
        elif how == "ptx":
            findings.append(
                info(
                    CHECK,
                    f"torch has no {sm} cubin; it runs through {entry} PTX, JIT-compiled at "
                    "start (slower first start; vLLM's own kernels may still lack the arch)",
                    items,
                    ["no-kernel-image"],
                    subject,
                )
            )
        else:
            findings.append(
                critical(
                    CHECK,
                    f"torch {versions['torch']} has no kernels for {sm}: CUDA calls fail with "
                    "'no kernel image is available for execution on the device'; install a "
                    f"torch (and vLLM) build whose arch list includes {sm}",
                    items,
                    ["no-kernel-image"],
                    subject,
                )
            )
    return findings
