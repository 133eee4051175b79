"""NVIDIA reference tables shipped in llmdoctor/data/ (sources in llmdoctor/data/SOURCES.md).

CUDA toolkit -> minimum driver, the Xid catalog, compute capability by GPU name, and the
capability that vLLM's dtypes and quantization methods need. Plain lookups; no I/O beyond
reading the package's own JSON files once.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parents[1] / "data"


@cache
def load_table(name: str) -> dict[str, Any]:
    """One of the JSON tables in llmdoctor/data/, parsed (cached)."""
    with open(DATA / f"{name}.json", encoding="utf-8") as fh:
        return json.load(fh)


def version_tuple(text: str | None) -> tuple[int, ...]:
    """'535.86.05' -> (535, 86, 5); '12.8' -> (12, 8); unparsable parts are dropped."""
    if not text:
        return ()
    parts = []
    for piece in re.split(r"[.\-+]", str(text).strip()):
        if not piece.isdigit():
            break
        parts.append(int(piece))
    return tuple(parts)


def cuda_text(value: Any) -> str | None:
    """A CUDA version as 'major.minor' from '12.2', 12.2, or NVML's integer 12020."""
    if value is None or value == "":
        return None
    if isinstance(value, int) or (isinstance(value, str) and value.isdigit() and len(value) >= 4):
        number = int(value)
        return f"{number // 1000}.{(number % 1000) // 10}"
    parts = version_tuple(str(value))
    if len(parts) >= 2:
        return f"{parts[0]}.{parts[1]}"
    return f"{parts[0]}.0" if parts else None


def toolkit_driver(cuda: str) -> str | None:
    """The driver that fully supports CUDA `cuda` (bundled with its GA release), if known."""
    table = load_table("cuda_drivers")["toolkit_driver"]
    return table.get(cuda_text(cuda) or "")


def family_min_driver(cuda: str) -> str | None:
    """The minimum driver for any CUDA <major>.x under minor-version compatibility."""
    table = load_table("cuda_drivers")["minor_version_compatibility"]
    major = (cuda_text(cuda) or "").split(".")[0]
    return table.get(major)


def max_cuda_for_driver(driver: str) -> str | None:
    """The newest CUDA whose GA driver is not newer than `driver` (when the driver is all we know)."""
    have = version_tuple(driver)
    if not have:
        return None
    best = None
    for cuda, needed in load_table("cuda_drivers")["toolkit_driver"].items():
        if cuda == "about":
            continue
        if version_tuple(needed) <= have and (best is None or version_tuple(cuda) > best):
            best = version_tuple(cuda)
    return ".".join(str(p) for p in best) if best else None


def compute_capability_for(name: str | None, architecture: str | None = None) -> str | None:
    """Compute capability ('8.9') for a GPU product name, else for an unambiguous architecture."""
    table = load_table("gpu_compute_capability")
    for pattern, cc in table["by_name"]:
        if name and re.search(pattern, name, re.IGNORECASE):
            return cc
    if architecture:
        return table["by_architecture"].get(architecture.strip())
    return None


def xid_entry(code: int) -> dict[str, Any] | None:
    """The catalog entry for an Xid code, or None for a code the catalog does not list."""
    return load_table("xid_catalog")["codes"].get(str(code))


def recovery_action(value: int) -> tuple[str, str, str] | None:
    """(name, severity, action) for an NVML / Xid 154 GPU recovery action value."""
    entry = load_table("xid_catalog")["recovery_actions"].get(str(value))
    return tuple(entry) if entry else None
