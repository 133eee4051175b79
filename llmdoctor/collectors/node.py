"""Live facts for the `node` target: NVML, nvidia-smi, the serving python, the kernel log.

Each source is its own Collector, run concurrently with a timeout, so one that fails or hangs
never hides the others; each failure is recorded as the reason its facts are missing.
"""

from __future__ import annotations

from llmdoctor.engine.collect import CollectContext, Collector, run_collectors
from llmdoctor.engine.facts import Facts


def node_collectors() -> list[Collector]:
    from llmdoctor.collectors.kernel_log import collect_kernel_log
    from llmdoctor.collectors.nvidia_smi import collect_nvidia_smi
    from llmdoctor.collectors.nvml import collect_nvml
    from llmdoctor.collectors.serving_env import collect_serving_env

    return [
        Collector("nvml", ("node/nvml.json", "node/gpus.json"), collect_nvml),
        Collector("nvidia-smi", ("node/nvidia-smi.xml",), collect_nvidia_smi),
        Collector("serving-python", ("node/versions.json",), collect_serving_env),
        Collector("kernel-log", ("node/kernel.log",), collect_kernel_log),
    ]


def collect(target, ctx: CollectContext) -> Facts:
    """Facts about this machine's GPUs, driver, serving stack and kernel log."""
    facts = run_collectors(node_collectors(), ctx, Facts())
    facts.mark_missing(
        "logs/",
        "llmdoctor node reads no container logs (use diagnose pod/NAME, or explain FILE)",
    )
    return facts
