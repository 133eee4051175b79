"""NVLink fabric registration of each GPU (HGX/NVSwitch and NVL systems): is fabric manager done?

On NVSwitch systems a GPU takes no CUDA work until the fabric manager has registered it with the
fabric: until then CUDA fails with error 802 "system not yet initialized". nvidia-smi shows it
as `<fabric><state>` (Not Started / In Progress / Completed) and `<status>`; NVML as
nvmlDeviceGetGpuFabricInfoV. GPUs without a fabric (PCIe cards, single GPUs in a VM) report N/A
or Not Supported and are not judged here.
"""

from __future__ import annotations

from llmdoctor.engine.facts import Facts
from llmdoctor.engine.findings import Finding, critical, evidence, info, ok, warning
from llmdoctor.engine.registry import check
from llmdoctor.parsers.gpus_json import gpu_label

CHECK = "gpu-fabric"
GPUS = "node/gpus"
RUNBOOK = "fabric-manager-not-running"


def _judge(gpu: dict, fabric: dict) -> Finding:
    subject = gpu_label(gpu)
    state, status = fabric.get("state") or "", fabric.get("status") or ""
    health = fabric.get("health_summary")
    items = [
        evidence(
            f"fabric state: {state}, status: {status or 'N/A'}"
            + (f", health: {health}" if health else ""),
            GPUS,
        )
    ]
    if state.lower() != "completed":
        return critical(
            CHECK,
            f"NVLink fabric registration is {state!r}, not Completed: CUDA on this GPU fails "
            "with error 802 'system not yet initialized' until the fabric manager finishes; "
            "start or fix nvidia-fabricmanager and drain the node meanwhile",
            items,
            [RUNBOOK],
            subject,
        )
    if status.lower() not in ("success", ""):
        return critical(
            CHECK,
            f"NVLink fabric registration completed with status {status!r}: the GPU is not part "
            "of the fabric; check the fabric manager log and the NVSwitch/NVLink state",
            items,
            [RUNBOOK, "xid-nvlink-error"],
            subject,
        )
    if (health or "").lower() == "unhealthy":
        return warning(
            CHECK,
            "the NVLink fabric reports this GPU unhealthy (degraded bandwidth or routes): "
            "multi-GPU traffic may be slow or fail",
            items,
            ["xid-nvlink-error"],
            subject,
        )
    return ok(CHECK, "NVLink fabric registration completed", items, subject)


@check(
    CHECK,
    title="NVLink fabric registered (fabric manager on NVSwitch systems)",
    scope="node",
    needs=(GPUS,),
    runbooks=(RUNBOOK, "xid-nvlink-error"),
)
def gpu_fabric(facts: Facts) -> list[Finding]:
    doc = facts.require(GPUS)
    gpus = doc.get("gpus") or []
    found = [_judge(g, g["fabric"]) for g in gpus if g.get("fabric")]
    if found:
        return found
    if not gpus:
        return [info(CHECK, "no GPU listed, so no NVLink fabric to judge")]
    source = doc.get("source") or "the GPU list"
    return [
        ok(
            CHECK,
            f"no GPU here has an NVLink fabric to register ({source} reports N/A or Not "
            f"Supported for all {len(gpus)}): fabric manager is not needed",
        )
    ]
