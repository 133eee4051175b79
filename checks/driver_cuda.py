"""Is the NVIDIA driver new enough for the CUDA that the serving torch was built with?

A torch built for a newer CUDA major than the driver supports cannot start CUDA at all ("The
NVIDIA driver on your system is too old"). Within one major, minor-version compatibility lets it
start on an older driver, but PTX built by the newer toolchain cannot be JIT-compiled there
("the provided PTX was compiled with an unsupported toolchain"). Forward compatibility
(cuda-compat libraries) lifts the limit on data-center GPUs only (error 804 elsewhere).
"""

from __future__ import annotations

from llmdoctor.engine.facts import FactMissing, Facts
from llmdoctor.engine.findings import critical, evidence, info, ok, warning
from llmdoctor.engine.registry import check
from llmdoctor.gpus.tables import (
    cuda_text,
    family_min_driver,
    max_cuda_for_driver,
    toolkit_driver,
    version_tuple,
)
from llmdoctor.parsers.serving_settings import require_torch

CHECK = "driver-cuda"
RUNBOOK = "driver-cuda-mismatch"
VERSIONS = "node/versions.json"
DRIVER_TOO_OLD = ("driver on your system is too old", "driver version is insufficient")
FORWARD_COMPAT_UNSUPPORTED = (
    "forward compatibility was attempted on non supported hw",
    "error 804",
)
LIBRARY_MISMATCH = ("unsupported display driver / cuda driver combination", "error 803")


def _consumer_gpu(gpus: dict | None) -> bool:
    names = [g.get("name") or "" for g in (gpus or {}).get("gpus") or []]
    return any("GeForce" in n or "TITAN" in n for n in names)


@check(
    CHECK,
    title="Driver supports the CUDA version torch was built for",
    scope="node",
    needs=(VERSIONS,),
    runbooks=(RUNBOOK, "gpu-not-visible"),
)
def driver_cuda(facts: Facts):
    versions = require_torch(facts)
    torch = versions["torch"]
    torch_cuda = cuda_text(versions.get("torch_cuda"))
    if versions.get("torch_cuda") not in (None, "") and torch_cuda is None:
        raise FactMissing(VERSIONS, f"torch_cuda {versions['torch_cuda']!r} is not a CUDA version")
    items = [evidence(f"torch {torch}, torch.version.cuda = {torch_cuda}", VERSIONS)]
    if torch_cuda is None:
        return critical(
            CHECK,
            f"torch {torch} is a CPU-only build (torch.version.cuda is None): vLLM cannot use "
            "the GPU; install a CUDA build of torch",
            items,
            ["gpu-not-visible"],
        )
    gpus = facts.get("node/gpus")
    driver = (gpus or {}).get("driver_version")
    driver_cuda = cuda_text((gpus or {}).get("cuda_driver_version")) or (
        max_cuda_for_driver(driver) if driver else None
    )
    seen_cuda = cuda_text(versions.get("libcuda_version"))
    libcuda_path = versions.get("libcuda_path") or ""
    error = versions.get("cuda_error") or ""
    if error:
        items.append(evidence(f"torch.cuda.is_available(): {error}", VERSIONS))
    if driver:
        items.append(evidence(f"driver {driver}, supports CUDA {driver_cuda}", "node/gpus"))
    if seen_cuda and seen_cuda != driver_cuda:
        items.append(evidence(f"libcuda in the serving process: CUDA {seen_cuda} ({libcuda_path})"))
    host_cuda = driver_cuda or seen_cuda
    needed = toolkit_driver(torch_cuda)
    family = family_min_driver(torch_cuda)
    need_text = f"driver >= {needed}" if needed else f"a driver for CUDA {torch_cuda}"

    if any(s in error.lower() for s in FORWARD_COMPAT_UNSUPPORTED):
        return critical(
            CHECK,
            "CUDA forward-compatibility libraries (cuda-compat) are in use on a GPU that does not "
            f"support them (error 804): remove them from the library path and use a driver "
            f"that supports CUDA {torch_cuda} ({need_text})",
            items,
            [RUNBOOK],
        )
    if any(s in error.lower() for s in LIBRARY_MISMATCH):
        return critical(
            CHECK,
            "CUDA cannot start: the libcuda the serving process loads does not match the "
            "kernel driver (error 803); remove stray libcuda / cuda-compat copies from the "
            "container's library path so the driver's own libcuda is used",
            items,
            [RUNBOOK],
        )
    if any(s in error.lower() for s in DRIVER_TOO_OLD):
        return critical(
            CHECK,
            f"CUDA cannot start: torch {torch} is built for CUDA {torch_cuda} and the driver "
            f"{driver or ''} is too old; it needs {need_text}",
            items,
            [RUNBOOK],
        )
    if host_cuda is None:
        raise FactMissing("node/gpus", facts.missing_reason("node/gpus"))
    t_major, t_minor = version_tuple(torch_cuda)[:2]
    d_major, d_minor = version_tuple(host_cuda)[:2]
    if (t_major, t_minor) <= (d_major, d_minor):
        return ok(
            CHECK,
            f"torch {torch} (CUDA {torch_cuda}) runs on driver {driver or '?'} (CUDA {host_cuda})",
            items,
        )
    forward = (seen_cuda and version_tuple(seen_cuda) >= (t_major, t_minor)) or (
        "compat" in libcuda_path
    )
    if forward:
        if _consumer_gpu(gpus):
            return critical(
                CHECK,
                f"torch needs CUDA {torch_cuda} and relies on cuda-compat libraries, which do not "
                "work on GeForce GPUs (error 804); upgrade the driver instead",
                items,
                [RUNBOOK],
            )
        return info(
            CHECK,
            f"torch {torch} (CUDA {torch_cuda}) runs on driver {driver} (CUDA {host_cuda}) "
            "through CUDA forward-compatibility libraries (data-center GPUs only)",
            items,
            [RUNBOOK],
        )
    if t_major > d_major:
        return critical(
            CHECK,
            f"torch {torch} is built for CUDA {torch_cuda}, but driver {driver or '?'} supports "
            f"CUDA {host_cuda} at most: CUDA cannot start. Needs {need_text} (at least {family} "
            f"for any CUDA {t_major}.x), or a torch/vLLM build for CUDA {d_major}.x",
            items,
            [RUNBOOK],
        )
    if family and driver and version_tuple(driver) < version_tuple(family):
        return critical(
            CHECK,
            f"driver {driver} is older than {family}, the minimum for any CUDA {t_major}.x "
            f"program: torch {torch} (CUDA {torch_cuda}) cannot start; needs {need_text}",
            items,
            [RUNBOOK],
        )
    return warning(
        CHECK,
        f"torch {torch} is built for CUDA {torch_cuda}, newer than driver {driver or '?'} "
        f"(CUDA {host_cuda}): it starts through minor-version compatibility, but PTX from the "
        f"newer toolchain cannot be JIT-compiled ('the provided PTX was compiled with an "
        f"unsupported toolchain'), which breaks some vLLM/Triton kernels, and images that "
        f"set NVIDIA_REQUIRE_CUDA=cuda>={torch_cuda} will not start; {need_text} supports "
        f"CUDA {torch_cuda} fully",
        items,
        [RUNBOOK],
    )
