"""The serving container asks for the GPUs vLLM will use: nvidia.com/gpu in its limits.

Without the limit the NVIDIA device plugin gives the container no GPU ("No CUDA GPUs are
available"); with fewer GPUs than tensor_parallel_size x pipeline_parallel_size, vLLM cannot
start its workers.
"""

from __future__ import annotations

from llmdoctor.engine.facts import Facts
from llmdoctor.engine.findings import Finding, critical, evidence, info, ok, warning
from llmdoctor.engine.registry import check
from llmdoctor.parsers.k8s_pod import gpu_limit, serving_container

NO_DEVICES = {"", "void", "none"}


@check(
    "pod-gpu-request",
    title="GPUs requested by the serving container",
    scope="k8s",
    needs=("k8s/pod.json", "serving/args"),
    runbooks=("gpu-not-visible",),
    before_start=True,
)
def pod_gpu_request(facts: Facts) -> Finding:
    _, args, container = serving_container(facts)
    subject = f"container {container.get('name')}"
    limit = gpu_limit(container)
    resources = container.get("resources") or {}
    limits_text = f"resources.limits: {resources.get('limits') or {}}"
    wanted = (args.get("tensor_parallel_size") or 1) * (args.get("pipeline_parallel_size") or 1)
    if not limit:
        claims = [c.get("name") for c in resources.get("claims") or []]
        if claims:
            return info(
                "pod-gpu-request",
                f"GPUs come from DRA resource claim(s) {', '.join(map(str, claims))}; the count "
                "is not in the pod spec",
                [evidence(f"resources.claims: {claims}", source="k8s/pod.json")],
                subject=subject,
            )
        env = {e.get("name"): e.get("value") for e in container.get("env") or []}
        visible = env.get("NVIDIA_VISIBLE_DEVICES")
        if visible is not None and str(visible).lower() not in NO_DEVICES:
            return warning(
                "pod-gpu-request",
                f"no nvidia.com/gpu limit: GPUs come from NVIDIA_VISIBLE_DEVICES={visible}, "
                "outside the scheduler's accounting (other pods may be given the same GPUs)",
                [evidence(limits_text, source="k8s/pod.json")],
                ["gpu-not-visible"],
                subject,
            )
        return critical(
            "pod-gpu-request",
            "no nvidia.com/gpu in the container's limits: the device plugin gives it no GPU, "
            "so vLLM finds no CUDA device",
            [evidence(limits_text, source="k8s/pod.json")],
            ["gpu-not-visible"],
            subject,
        )
    if wanted > limit:
        return critical(
            "pod-gpu-request",
            f"vLLM needs {wanted} GPUs (tensor_parallel_size x pipeline_parallel_size) but the "
            f"container is given {limit:g}",
            [
                evidence(limits_text, source="k8s/pod.json"),
                evidence(f"vLLM args: {' '.join(args.get('argv') or [])}", source="k8s/pod.json"),
            ],
            ["gpu-not-visible"],
            subject,
        )
    return ok(
        "pod-gpu-request",
        f"requests {limit:g} nvidia.com/gpu for {wanted} vLLM GPU worker(s)",
        [evidence(limits_text, source="k8s/pod.json")],
        subject,
    )
