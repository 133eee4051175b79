"""Print the serving interpreter's GPU software stack as one JSON object (node/versions.json).

Standalone on purpose (standard library only; torch is used if it is installed): llmdoctor runs
it with the serving environment's python (`llmdoctor node --python PATH`), and the Kubernetes
collector runs the same file inside the serving container. It never imports vLLM (only reads
its package metadata), never allocates GPU memory, and always prints exactly one JSON object on
stdout, whatever fails.

Keys: python, python_executable, torch, torch_error, torch_cuda, torch_arch_list, cudnn, nccl,
cuda_available, cuda_error, device_count, devices [{index, name, capability}], vllm,
vllm_requires_torch, libcuda_version, libcuda_path, env.
"""

import contextlib
import ctypes
import importlib.metadata
import json
import platform
import re
import sys
import warnings

ENV_NAMES = (
    "CUDA_VISIBLE_DEVICES",
    "NVIDIA_VISIBLE_DEVICES",
    "PYTORCH_CUDA_ALLOC_CONF",
    "PYTORCH_ALLOC_CONF",
    "LD_LIBRARY_PATH",
    "CUDA_HOME",
)


def _error(exc):
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def _nccl_text(version):
    if version is None:
        return None
    if isinstance(version, (tuple, list)):
        return ".".join(str(p) for p in version)
    number = int(version)
    if number >= 10000:  # NCCL >= 2.9: major*10000 + minor*100 + patch
        return f"{number // 10000}.{(number % 10000) // 100}.{number % 100}"
    return f"{number // 1000}.{(number % 1000) // 100}.{number % 100}"


def _torch_facts(out):
    try:
        import torch
    except Exception as exc:
        out["torch_error"] = _error(exc)
        return
    out["torch"] = str(torch.__version__)
    out["torch_cuda"] = getattr(torch.version, "cuda", None)
    try:  # the compiled list, also when CUDA cannot start
        flags = torch._C._cuda_getArchFlags()
        out["torch_arch_list"] = flags.split() if flags else []
    except Exception:
        with contextlib.suppress(Exception):
            out["torch_arch_list"] = list(torch.cuda.get_arch_list())
    with contextlib.suppress(Exception):
        out["cudnn"] = torch.backends.cudnn.version()
    with contextlib.suppress(Exception):
        out["nccl"] = _nccl_text(torch.cuda.nccl.version())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            out["cuda_available"] = bool(torch.cuda.is_available())
            out["device_count"] = int(torch.cuda.device_count()) if out["cuda_available"] else 0
        except Exception as exc:
            out["cuda_available"] = False
            out["cuda_error"] = _error(exc)
    for w in caught:
        if out.get("cuda_error") is None and "CUDA" in str(w.message):
            out["cuda_error"] = " ".join(str(w.message).split())
    devices = []
    for i in range(out.get("device_count") or 0):
        try:
            major, minor = torch.cuda.get_device_capability(i)
            devices.append(
                {
                    "index": i,
                    "name": torch.cuda.get_device_name(i),
                    "capability": f"{major}.{minor}",
                }
            )
        except Exception as exc:
            devices.append({"index": i, "error": _error(exc)})
    out["devices"] = devices


def _vllm_facts(out):
    try:
        out["vllm"] = importlib.metadata.version("vllm")
    except importlib.metadata.PackageNotFoundError:
        return
    except Exception as exc:
        out["vllm_error"] = _error(exc)
        return
    specs = []
    for req in importlib.metadata.requires("vllm") or []:
        m = re.match(r"^\s*torch\s*(?:\[[^\]]*\])?\s*([^;]*)(;.*)?$", req)
        if m and "extra" not in (m.group(2) or ""):
            specs.append(m.group(1).strip().strip("()").replace(" ", ""))
    out["vllm_requires_torch"] = specs[0] if specs else None


def _libcuda_facts(out):
    """The CUDA driver API version this process would use (cuda-compat shows here)."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
        version = ctypes.c_int(0)
        if lib.cuDriverGetVersion(ctypes.byref(version)) == 0:
            out["libcuda_version"] = version.value
    except OSError as exc:
        out["libcuda_error"] = _error(exc)
        return
    with contextlib.suppress(OSError), open("/proc/self/maps") as maps:
        for line in maps:
            if "libcuda.so" in line:
                out["libcuda_path"] = line.split()[-1]
                break


def main():
    import os

    out = {
        "python": platform.python_version(),
        "python_executable": sys.executable,
        "torch": None,
        "torch_error": None,
        "torch_cuda": None,
        "torch_arch_list": [],
        "cudnn": None,
        "nccl": None,
        "cuda_available": None,
        "cuda_error": None,
        "device_count": None,
        "devices": [],
        "vllm": None,
        "vllm_requires_torch": None,
        "libcuda_version": None,
        "libcuda_path": None,
        "env": {name: os.environ[name] for name in ENV_NAMES if name in os.environ},
    }
    real_stdout = sys.stdout
    for step in (_torch_facts, _vllm_facts, _libcuda_facts):
        try:
            with contextlib.redirect_stdout(sys.stderr):  # keep stdout for the one JSON object
                step(out)
        except Exception as exc:
            out.setdefault("probe_errors", []).append(f"{step.__name__}: {_error(exc)}")
    real_stdout.write(json.dumps(out) + "\n")
    real_stdout.flush()


if __name__ == "__main__":
    main()
