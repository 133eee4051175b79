"""NVML itself: could it start, and does every GPU answer?

"Driver/library version mismatch" (the user-space NVIDIA library was updated while the old kernel
module is still loaded) breaks every CUDA program on the node until a reboot. A GPU whose handle
cannot be opened ("GPU is lost") has usually fallen off the bus.
"""

from __future__ import annotations

from llmdoctor.engine.facts import FactMissing, Facts
from llmdoctor.engine.findings import Finding, critical, evidence, ok, warning
from llmdoctor.engine.registry import check
from llmdoctor.parsers.documents import NUMBER, OBJECT, TEXT, require_document

CHECK = "nvml-status"
SOURCE = "node/nvml.json"


def _device_findings(status: dict, gpus: dict | None) -> list[Finding]:
    findings = []
    for index, err in sorted((status.get("device_errors") or {}).items()):
        kind, message = err.get("type", ""), err.get("message", "")
        item = [evidence(f"GPU {index}: {kind}: {message}", SOURCE)]
        if kind in ("NVMLError_GpuIsLost", "NVMLError_ResetRequired"):
            findings.append(
                critical(
                    CHECK,
                    f"GPU {index} does not answer NVML ({message}): it has most likely fallen "
                    "off the bus; drain the node and reboot it",
                    item,
                    ["xid-fallen-off-bus"],
                    f"GPU {index}",
                )
            )
        else:
            findings.append(
                warning(
                    CHECK,
                    f"GPU {index} could not be read through NVML: {message}",
                    item,
                    ["xid-fallen-off-bus"],
                    f"GPU {index}",
                )
            )
    for gpu in (gpus or {}).get("gpus") or []:
        lost = [f for f, why in (gpu.get("errors") or {}).items() if "GPU is lost" in why]
        if lost:
            findings.append(
                critical(
                    CHECK,
                    f"GPU {gpu.get('index')} stopped answering while it was read (GPU is lost): "
                    "drain the node and reboot it",
                    [evidence(f"{f}: GPU is lost", "node/gpus.json") for f in lost[:3]],
                    ["xid-fallen-off-bus"],
                    f"GPU {gpu.get('index')}",
                )
            )
    return findings


@check(
    CHECK,
    title="NVML starts and every GPU answers",
    scope="node",
    needs=(SOURCE,),
    supersedes=("log-signatures",),
    runbooks=("nvml-driver-library-mismatch", "xid-fallen-off-bus", "gpu-not-visible"),
)
def nvml_status(facts: Facts) -> list[Finding]:
    status = require_document(
        facts,
        SOURCE,
        {
            "ok": (bool,),
            "error": OBJECT,
            "device_errors": OBJECT,
            "device_count": NUMBER,
            "driver_version": TEXT,
        },
        "an NVML status",
        marker=("ok",),
    )
    error = status.get("error") or {}
    kind, message = error.get("type", ""), error.get("message", "")
    if kind == "NVMLError_LibRmVersionMismatch":
        return [
            critical(
                CHECK,
                "NVIDIA driver/library version mismatch: no CUDA program (vLLM included) can "
                "use the GPUs until the node is rebooted (or the nvidia modules are reloaded)",
                [evidence(f"nvmlInit: {message}", SOURCE)],
                ["nvml-driver-library-mismatch"],
            )
        ]
    if kind == "NVMLError_DriverNotLoaded":
        return [
            warning(
                CHECK,
                "the NVIDIA kernel driver is not loaded, so no GPU is usable on this machine",
                [evidence(f"nvmlInit: {message}", SOURCE)],
                ["gpu-not-visible"],
            )
        ]
    if kind == "NVMLError_LibraryNotFound" and not facts.has("node/nvidia-smi.xml"):
        # a GPU node whose driver never got installed (e.g. the GPU operator's driver pod
        # failing), or a container the NVIDIA runtime did not give the GPU: not "nothing to see"
        return [
            warning(
                CHECK,
                "no NVIDIA driver on this machine: neither NVML (libnvidia-ml) nor nvidia-smi "
                "was found, so no GPU is usable here; on a GPU node the driver is not "
                "installed, in a container the NVIDIA runtime did not give it the GPU",
                [
                    evidence(f"nvmlInit: {message}", SOURCE),
                    evidence(
                        f"nvidia-smi: {facts.missing_reason('node/nvidia-smi.xml')}",
                        "node/nvidia-smi.xml",
                    ),
                ],
                ["gpu-not-visible"],
            )
        ]
    if not status.get("ok") and kind:
        raise FactMissing(SOURCE, message or kind)
    findings = _device_findings(status, facts.get("node/gpus"))
    if findings:
        return findings
    count = status.get("device_count")
    return [
        ok(
            CHECK,
            f"NVML answers: driver {status.get('driver_version')}, "
            f"CUDA {status.get('cuda_driver_version')}, {count} GPU(s)",
            [evidence(f"NVML {status.get('nvml_version')}", SOURCE)],
        )
    ]
