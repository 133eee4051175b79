"""GPU memory: who holds it, and would vLLM start with its --gpu-memory-utilization?

vLLM V1 refuses to start when U x total GPU memory exceeds the memory free at startup ("Free
memory on device (31.44/47.38 GiB) on startup is less than desired GPU memory utilization (0.95,
45.01 GiB)"). CUDA's total is nvidia-smi's total minus the driver-reserved part. Processes that
are not the server take that memory; memory used with no visible process belongs to processes in
other PID namespaces (other containers), which this view cannot name.
"""

from __future__ import annotations

import math
import os

from llmdoctor.engine.facts import FactMissing, Facts
from llmdoctor.engine.findings import Finding, critical, evidence, info, ok, warning
from llmdoctor.engine.registry import check
from llmdoctor.parsers.gpus_json import gpu_label
from llmdoctor.parsers.serving_settings import serving_setting

CHECK = "gpu-memory"
GPUS = "node/gpus"
VLLM_DEFAULT_UTILIZATION = 0.9
TAKEN = "gpu-memory-taken-by-other-process"


def _gib(mib: float) -> str:
    return f"{mib / 1024:.2f} GiB"


def process_role(proc: dict) -> str:
    """'server' (vLLM), 'unknown' (a bare interpreter or unnamed pid) or 'other'."""
    name = (proc.get("name") or "").strip()
    if not name:
        return "unknown"
    low = name.lower()
    if "vllm" in low or "enginecore" in low:
        return "server"
    base = os.path.basename(low.split()[0])
    if base.startswith("python") or base in ("pt_main_thread",) or base.startswith("ray::"):
        return "unknown"
    return "other"


def _describe(proc: dict) -> str:
    name = proc.get("name") or "name not visible from here"
    used = proc.get("used_mib")
    return (
        f"pid {proc.get('pid')} {name}: {used} MiB"
        if used is not None
        else f"pid {proc.get('pid')} {name}"
    )


def _significant(mib: float, total: float) -> bool:
    return mib >= max(512, 0.02 * total)


def _holders(gpu: dict, subject: str) -> tuple[list[Finding], dict[str, float]]:
    """Findings about memory held by others on one GPU, and MiB per role."""
    mem = gpu.get("memory_mib") or {}
    total, used = mem.get("total") or 0, mem.get("used") or 0
    procs = gpu.get("processes") or []
    by_role = {"server": 0.0, "unknown": 0.0, "other": 0.0}
    for p in procs:
        by_role[process_role(p)] += p.get("used_mib") or 0
    findings: list[Finding] = []
    others = [p for p in procs if process_role(p) == "other"]
    if others:
        items = [evidence(_describe(p), GPUS) for p in others]
        held = by_role["other"]
        named = ", ".join(_describe(p) for p in others[:3])
        if _significant(held, total):
            found = warning(
                CHECK,
                f"{len(others)} process(es) that are not vLLM hold {_gib(held)} of "
                f"{_gib(total)}: {named}",
                items,
                [TAKEN],
                subject,
            )
            if len(others) == 1 and others[0].get("pid") is not None:
                found.params["pid"] = others[0]["pid"]
        else:  # a desktop's Xorg with 22 MiB: not what keeps vLLM from its memory
            found = info(
                CHECK,
                f"{len(others)} process(es) that are not vLLM hold {_gib(held)} of "
                f"{_gib(total)}, too little to matter: {named}",
                items,
                [],
                subject,
            )
        findings.append(found)
    unknown = [p for p in procs if process_role(p) == "unknown"]
    if unknown and by_role["server"] > 0:
        findings.append(
            warning(
                CHECK,
                f"besides vLLM, {len(unknown)} more process(es) hold {_gib(by_role['unknown'])}: "
                f"{', '.join(_describe(p) for p in unknown[:3])}",
                [evidence(_describe(p), GPUS) for p in unknown],
                [TAKEN],
                subject,
            )
        )
    elif unknown:
        findings.append(
            info(
                CHECK,
                f"{', '.join(_describe(p) for p in unknown[:3])}: llmdoctor cannot tell whether "
                "this is the vLLM server; if it is not, it takes that memory from it",
                [evidence(_describe(p), GPUS) for p in unknown],
                [TAKEN],
                subject,
            )
        )
    unseen = used - sum(p.get("used_mib") or 0 for p in procs)
    if gpu.get("processes_visible", True) and not procs and _significant(unseen, total):
        findings.append(
            info(
                CHECK,
                f"{_gib(used)} is in use but no process is visible: the holders run in other "
                "PID namespaces (containers); run llmdoctor on the host or in a hostPID pod "
                "to name them",
                [evidence(f"memory used {used} MiB, processes listed: none", GPUS)],
                [TAKEN],
                subject,
            )
        )
    by_role["unseen"] = max(unseen, 0) if not procs else 0.0
    return findings, by_role


def _fits(gpu: dict, subject: str, utilization: float, where: str | None, roles) -> Finding:
    mem = gpu.get("memory_mib") or {}
    total, free = mem.get("total"), mem.get("free")
    reserved = mem.get("reserved") or 0
    cuda_total = total - reserved
    requested = utilization * cuda_total
    available = free + roles["server"]
    where_text = (
        f"from {where}"
        if where
        else f"vLLM's default {VLLM_DEFAULT_UTILIZATION}; pass --gpu-memory-utilization"
    )
    items = [
        evidence(
            f"total {total} MiB - reserved {reserved} MiB = {cuda_total} MiB usable by CUDA; "
            f"free {free} MiB",
            GPUS,
        ),
        evidence(f"gpu_memory_utilization {utilization} ({where_text})"),
    ]
    if roles["server"]:
        items.append(
            evidence(f"the running vLLM holds {roles['server']:.0f} MiB (freed on restart)")
        )
    if requested <= available:
        return ok(
            CHECK,
            f"gpu_memory_utilization {utilization} asks {_gib(requested)} of {_gib(cuda_total)}; "
            f"{_gib(available)} would be free for it",
            items,
            subject,
        )
    missing = requested - available
    fitting = math.floor(available / cuda_total * 100) / 100 if cuda_total else 0
    held = []
    if roles["other"]:
        held.append(f"other processes {_gib(roles['other'])}")
    if roles["unknown"]:
        held.append(f"unidentified processes {_gib(roles['unknown'])}")
    if roles["unseen"]:
        held.append(f"processes not visible from here {_gib(roles['unseen'])}")
    held_text = f" (held by {', '.join(held)})" if held else ""
    summary = (
        f"vLLM would refuse to start: gpu_memory_utilization {utilization} needs "
        f"{_gib(requested)} ({utilization} x {_gib(cuda_total)}) but {_gib(available)} is free"
        f"{held_text}; {_gib(missing)} short. Free that memory or lower it to {fitting:.2f}"
    )
    # memory this view cannot attribute may be the running server itself: do not cry wolf
    ambiguous = (roles["unknown"] or roles["unseen"]) and not roles["other"]
    make = critical if where and not ambiguous else warning
    # memory held by others, not a budget too small: the fix is to free it or ask for less
    found = make(CHECK, summary, items, [TAKEN], subject)
    if fitting > 0:
        found.params["gpu_memory_utilization"] = fitting
    return found


@check(
    CHECK,
    title="GPU memory held by other processes; vLLM startup memory fits",
    scope="node",
    needs=(GPUS,),
    runbooks=(TAKEN,),
)
def gpu_memory(facts: Facts) -> list[Finding]:
    doc = facts.require(GPUS)
    if not doc.get("gpus"):
        raise FactMissing(GPUS, f"{doc.get('source') or 'the GPU list'} lists no GPU")
    value, where = serving_setting(facts, "gpu_memory_utilization")
    utilization = float(value) if value is not None else VLLM_DEFAULT_UTILIZATION
    findings: list[Finding] = []
    for gpu in doc.get("gpus") or []:
        subject = gpu_label(gpu)
        mem = gpu.get("memory_mib") or {}
        if mem.get("total") is None or mem.get("free") is None:
            findings.append(info(CHECK, "memory size not reported for this GPU", [], [], subject))
            continue
        held, roles = _holders(gpu, subject)
        findings += held
        if gpu.get("mig_mode"):
            findings.append(
                info(
                    CHECK,
                    "MIG is enabled: vLLM sees one MIG instance's memory, so the startup fit is "
                    "not judged from the whole GPU",
                    [evidence("mig_mode: Enabled", GPUS)],
                    [],
                    subject,
                )
            )
            continue
        fit = _fits(gpu, subject, utilization, where, roles)
        holder = [f.params["pid"] for f in held if "pid" in f.params]
        if holder and fit.runbooks:  # the one process to stop, for the Fix's `kill {pid}`
            fit.params["pid"] = holder[0]
        findings.append(fit)
    return findings
