"""The normalized GPU list `node/gpus`, from `node/gpus.json` (NVML) or `node/nvidia-smi.xml`.

NVML has no native document, so the collector stores the normalized list itself; this module
documents that shape and validates it when it comes back from a bundle. A real sample (values of
an NVIDIA L4, driver 555.42.06, most fields left out):

    {"source": "nvml", "driver_version": "555.42.06", "cuda_driver_version": "12.5",
     "gpus": [{"index": 0, "name": "NVIDIA L4", "pci_bus_id": "0000:01:00.0",
               "compute_capability": "8.9",
               "memory_mib": {"total": 23034, "reserved": 434, "used": 1, "free": 22601},
               "processes": [], "processes_visible": true}]}

Every GPU has: index, name, uuid, pci_bus_id ('0000:3b:00.0'), architecture, compute_capability
('8.9'), memory_mib {total, reserved, used, free} (used excludes reserved, as nvidia-smi shows it),
processes [{pid, name, used_mib, type}], processes_visible, ecc {enabled, volatile_uncorrected,
aggregate_uncorrected, volatile_corrected, aggregate_corrected}, remapped_rows {correctable,
uncorrectable, pending, failure} | None, retired_pages {single_bit, double_bit, pending} | None,
clock_event_reasons [active reason names] | None, performance_state, temperature_c,
power_draw_w, power_limit_w, pcie {current_gen, max_gen, current_width, max_width} | None,
persistence_mode, mig_mode, reset_required, drain_and_reset_recommended, recovery_action,
fabric {state, status, health_summary} | None (NVLink fabric registration; None where the GPU has
none), and errors {field: NVML error}. Unknown values are None. Parsed from the nvidia-smi XML by
llmdoctor.parsers.nvidia_smi_xml into the same shape.
"""

from __future__ import annotations

from typing import Any

from llmdoctor.engine.derive import derived_fact
from llmdoctor.engine.facts import FactMissing, Facts

GPU_DEFAULTS: dict[str, Any] = {
    "name": None,
    "uuid": None,
    "pci_bus_id": None,
    "architecture": None,
    "compute_capability": None,
    "memory_mib": {},
    "processes": [],
    "processes_visible": True,
    "ecc": {},
    "remapped_rows": None,
    "retired_pages": None,
    "clock_event_reasons": None,
    "performance_state": None,
    "temperature_c": None,
    "power_draw_w": None,
    "power_limit_w": None,
    "pcie": None,
    "persistence_mode": None,
    "mig_mode": None,
    "reset_required": None,
    "drain_and_reset_recommended": None,
    "recovery_action": None,
    "fabric": None,
    "errors": {},
}


_NUMBER = (int, float)
# field -> the types its non-null value may have; objects list the types of their own fields
FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "index": (int,),
    "name": (str,),
    "pci_bus_id": (str,),
    "compute_capability": (str,),
    "processes": (list,),
    "clock_event_reasons": (list,),
    "temperature_c": _NUMBER,
    "power_draw_w": _NUMBER,
    "power_limit_w": _NUMBER,
    "errors": (dict,),
    "fabric": (dict,),
}
OBJECT_FIELDS = {
    "memory_mib": ("total", "reserved", "used", "free"),
    "ecc": (
        "volatile_uncorrected",
        "aggregate_uncorrected",
        "volatile_corrected",
        "aggregate_corrected",
    ),
    "remapped_rows": ("correctable", "uncorrectable"),
    "retired_pages": ("single_bit", "double_bit"),
    "pcie": ("current_gen", "max_gen", "current_width", "max_width"),
}


def _check_types(where: str, gpu: dict[str, Any]) -> None:
    """ValueError naming the first field whose value has the wrong JSON type."""

    def bad(name: str, value: Any, types: tuple[type, ...]) -> bool:
        return value is not None and (isinstance(value, bool) or not isinstance(value, types))

    for name, types in FIELD_TYPES.items():
        if bad(name, gpu.get(name), types):
            raise ValueError(f"{where}.{name} has the wrong type: {str(gpu[name])[:40]!r}")
    for name, numbers in OBJECT_FIELDS.items():
        value = gpu.get(name)
        if value is None:
            continue
        if not isinstance(value, dict):
            raise ValueError(f"{where}.{name} is not an object: {str(value)[:40]!r}")
        for part in numbers:
            if bad(part, value.get(part), _NUMBER):
                raise ValueError(f"{where}.{name}.{part} is not a number: {value[part]!r:.40}")
    for n, proc in enumerate(gpu.get("processes") or []):
        if not isinstance(proc, dict) or bad("used_mib", proc.get("used_mib"), _NUMBER):
            raise ValueError(f"{where}.processes[{n}] is not a process object")


def normalize_gpus(doc: Any) -> dict[str, Any]:
    """Check the shape of a node/gpus.json document and fill absent GPU fields with None."""
    if not isinstance(doc, dict) or not isinstance(doc.get("gpus"), list):
        raise ValueError("expected an object with a 'gpus' list")
    gpus = []
    for i, gpu in enumerate(doc["gpus"]):
        if not isinstance(gpu, dict):
            raise ValueError(f"gpus[{i}] is not an object")
        _check_types(f"gpus[{i}]", gpu)
        gpus.append({"index": i, **GPU_DEFAULTS, **gpu})
    return {
        "source": doc.get("source", "nvml"),
        "driver_version": doc.get("driver_version"),
        "cuda_driver_version": doc.get("cuda_driver_version"),
        "gpus": gpus,
    }


@derived_fact("node/gpus")
def node_gpus(facts: Facts) -> dict[str, Any]:
    """From NVML's node/gpus.json when present (it has compute capability), else nvidia-smi XML."""
    from llmdoctor.parsers.nvidia_smi_xml import parse_nvidia_smi_xml

    if facts.has("node/gpus.json"):
        try:
            return normalize_gpus(facts.get("node/gpus.json"))
        except ValueError:
            if not facts.has("node/nvidia-smi.xml"):
                raise
    if facts.has("node/nvidia-smi.xml"):
        return parse_nvidia_smi_xml(facts.get("node/nvidia-smi.xml"))
    reasons = []
    for key, label in (("node/gpus.json", ""), ("node/nvidia-smi.xml", "nvidia-smi: ")):
        reason = facts.missing_reason(key)
        if not any(reason in r for r in reasons):
            reasons.append(label + reason)
    raise FactMissing("node/gpus", "; ".join(reasons))


def gpu_label(gpu: dict[str, Any]) -> str:
    """How findings name a GPU: 'GPU 1 (0000:3b:00.0)'."""
    where = gpu.get("pci_bus_id")
    return f"GPU {gpu.get('index')} ({where})" if where else f"GPU {gpu.get('index')}"


def gpus_by_pci(doc: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """The GPUs of a node/gpus value keyed by PCI key ('0000:3b:00')."""
    from llmdoctor.parsers.pci import pci_key

    out = {}
    for gpu in (doc or {}).get("gpus") or []:
        key = pci_key(gpu.get("pci_bus_id"))
        if key:
            out[key] = gpu
    return out
