"""Tensor/pipeline parallel vLLM needs a memory-backed /dev/shm for NCCL and its workers.

A container's own /dev/shm is 64 MiB; NCCL's shared-memory transport fails in it ("Error while
creating shared memory segment ... No space left on device"). Fixed by an emptyDir with
medium: Memory mounted at /dev/shm, or hostIPC.
"""

from __future__ import annotations

from llmdoctor.engine.facts import Facts
from llmdoctor.engine.findings import Finding, critical, evidence, ok, warning
from llmdoctor.engine.registry import check
from llmdoctor.parsers.k8s_pod import dicts, quantity, serving_container

MIN_SHM_BYTES = 1024**3


def _shm_volume(pod: dict, container: dict) -> tuple[dict | None, dict | None]:
    """(the volumeMount at /dev/shm, its volume) for the container, or Nones."""
    for mount in dicts(container.get("volumeMounts")):
        if str(mount.get("mountPath") or "").rstrip("/") == "/dev/shm":
            for volume in dicts((pod.get("spec") or {}).get("volumes")):
                if volume.get("name") == mount.get("name"):
                    return mount, volume
            return mount, None
    return None, None


@check(
    "pod-shm",
    title="Shared memory (/dev/shm) for multi-GPU vLLM",
    scope="k8s",
    needs=("k8s/pod.json", "serving/args"),
    runbooks=("shm-too-small",),
    before_start=True,
)
def pod_shm(facts: Facts) -> Finding:
    pod, args, container = serving_container(facts)
    subject = f"container {container.get('name')}"
    tp = args.get("tensor_parallel_size") or 1
    pp = args.get("pipeline_parallel_size") or 1
    workers = f"tensor_parallel_size {tp}, pipeline_parallel_size {pp}"
    if (pod.get("spec") or {}).get("hostIPC"):
        return ok("pod-shm", f"hostIPC: the host's /dev/shm is shared ({workers})", (), subject)
    mount, volume = _shm_volume(pod, container)
    if tp * pp <= 1:
        return ok(
            "pod-shm", f"single GPU worker ({workers}): /dev/shm size is not critical", (), subject
        )
    if mount is None or volume is None:
        return critical(
            "pod-shm",
            f"{workers} but no memory-backed volume at /dev/shm: the container's default is "
            "64 MiB and NCCL fails to create its shared memory segments",
            [evidence("no volumeMount at /dev/shm; spec.hostIPC not set", source="k8s/pod.json")],
            ["shm-too-small"],
            subject,
        )
    empty_dir = volume.get("emptyDir") if isinstance(volume.get("emptyDir"), dict) else None
    if volume.get("hostPath"):
        return ok("pod-shm", f"/dev/shm is the host's ({workers})", (), subject)
    items = [evidence(f"volume {volume.get('name')}: {volume}", source="k8s/pod.json")]
    if empty_dir is None or empty_dir.get("medium") != "Memory":
        return warning(
            "pod-shm",
            f"/dev/shm is not memory-backed (volume {volume.get('name')}); set emptyDir "
            "medium: Memory for NCCL",
            items,
            ["shm-too-small"],
            subject,
        )
    size = quantity(empty_dir.get("sizeLimit"))
    if size is not None and size < MIN_SHM_BYTES:
        return warning(
            "pod-shm",
            f"/dev/shm is limited to {empty_dir.get('sizeLimit')} with {workers}; give it at "
            "least 1Gi (NCCL buffers grow with the number of GPUs)",
            items,
            ["shm-too-small"],
            subject,
        )
    limit = empty_dir.get("sizeLimit") or "no size limit"
    return ok("pod-shm", f"memory-backed /dev/shm ({limit}) for {workers}", items, subject)
