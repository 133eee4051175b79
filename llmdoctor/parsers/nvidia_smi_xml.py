"""`nvidia-smi -q -x` XML -> the normalized GPU list (fact `node/gpus`).

Real input (an RTX 4090, driver 535.86.05; most elements left out):

    <nvidia_smi_log>
        <driver_version>535.86.05</driver_version>
        <cuda_version>12.2</cuda_version>
        <gpu id="00000000:84:00.0">
            <product_name>NVIDIA GeForce RTX 4090</product_name>
            <persistence_mode>Enabled</persistence_mode>
            <uuid>GPU-71d1acc2-662d-2166-bf9f-65272d2fc437</uuid>
            <fb_memory_usage><total>24564 MiB</total><reserved>346 MiB</reserved>
                <used>2 MiB</used><free>24214 MiB</free></fb_memory_usage>
            <processes></processes>
        </gpu>
    </nvidia_smi_log>

Element names changed across drivers (`clocks_throttle_reasons` -> `clocks_event_reasons`,
`power_readings` -> `gpu_power_readings`, per-location ECC counters); both forms are read.
The shape of the result, and the derivation of `node/gpus`, are in llmdoctor.parsers.gpus_json.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Any

from llmdoctor.gpus.tables import compute_capability_for, cuda_text
from llmdoctor.parsers.pci import pci_display

_ABSENT = {"", "n/a", "[n/a]", "none", "requested functionality has been deprecated"}


def _text(el: ET.Element | None, path: str) -> str | None:
    if el is None:
        return None
    node = el.find(path)
    if node is None or node.text is None:
        return None
    value = " ".join(node.text.split())
    return None if value.lower() in _ABSENT else value


def _number(value: str | None) -> float | None:
    """'23034 MiB' -> 23034.0, '27.22 W' -> 27.22, '16x' -> 16.0; None when absent."""
    if value is None:
        return None
    m = re.match(r"\s*(-?\d+(?:\.\d+)?)", value)
    return float(m.group(1)) if m else None


def _int(value: str | None) -> int | None:
    number = _number(value)
    return int(number) if number is not None else None


def _flag(value: str | None) -> bool | None:
    if value is None:
        return None
    low = value.lower()
    if low in ("enabled", "yes", "active"):
        return True
    if low in ("disabled", "no", "not active"):
        return False
    return None


def _sum(values: list[int | None]) -> int | None:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def _ecc(gpu: ET.Element) -> dict[str, Any]:
    out: dict[str, Any] = {"enabled": _flag(_text(gpu, "ecc_mode/current_ecc"))}
    for scope in ("volatile", "aggregate"):
        block = gpu.find(f"ecc_errors/{scope}")
        if block is None:
            out[f"{scope}_uncorrected"] = out[f"{scope}_corrected"] = None
            continue
        if block.find("double_bit") is not None:  # pre-Ampere layout
            out[f"{scope}_uncorrected"] = _int(_text(block, "double_bit/total"))
            out[f"{scope}_corrected"] = _int(_text(block, "single_bit/total"))
            continue
        unc = [
            _int(_text(block, name))
            for name in (
                "dram_uncorrectable",
                "sram_uncorrectable",
                "sram_uncorrectable_parity",
                "sram_uncorrectable_secded",
            )
        ]
        cor = [_int(_text(block, n)) for n in ("dram_correctable", "sram_correctable")]
        out[f"{scope}_uncorrected"] = _sum(unc)
        out[f"{scope}_corrected"] = _sum(cor)
    return out


def _remapped_rows(gpu: ET.Element) -> dict[str, Any] | None:
    block = gpu.find("remapped_rows")
    if block is None or block.find("remapped_row_pending") is None:
        return None
    return {
        "correctable": _int(_text(block, "remapped_row_corr")),
        "uncorrectable": _int(_text(block, "remapped_row_unc")),
        "pending": _flag(_text(block, "remapped_row_pending")),
        "failure": _flag(_text(block, "remapped_row_failure")),
    }


def _retired_pages(gpu: ET.Element) -> dict[str, Any] | None:
    block = gpu.find("retired_pages")
    if block is None:
        return None
    out = {
        "single_bit": _int(_text(block, "multiple_single_bit_retirement/retired_count")),
        "double_bit": _int(_text(block, "double_bit_retirement/retired_count")),
        "pending": _flag(_text(block, "pending_retirement")),
    }
    return out if any(v is not None for v in out.values()) else None


def _clock_event_reasons(gpu: ET.Element) -> list[str] | None:
    block = gpu.find("clocks_event_reasons")
    prefix = "clocks_event_reason_"
    if block is None:
        block = gpu.find("clocks_throttle_reasons")
        prefix = "clocks_throttle_reason_"
    if block is None:
        return None
    active = []
    for child in block:
        if child.tag.startswith(prefix) and _flag(" ".join((child.text or "").split())):
            active.append(child.tag[len(prefix) :])
    return active


def _pcie(gpu: ET.Element) -> dict[str, int | None] | None:
    link = gpu.find("pci/pci_gpu_link_info")
    if link is None:
        return None
    return {
        "current_gen": _int(_text(link, "pcie_gen/current_link_gen")),
        "max_gen": _int(_text(link, "pcie_gen/max_link_gen")),
        "current_width": _int(_text(link, "link_widths/current_link_width")),
        "max_width": _int(_text(link, "link_widths/max_link_width")),
    }


def _power(gpu: ET.Element) -> tuple[float | None, float | None]:
    for block in ("gpu_power_readings", "power_readings"):
        el = gpu.find(block)
        if el is None:
            continue
        draw = _number(_text(el, "power_draw") or _text(el, "instant_power_draw"))
        if draw is None:
            draw = _number(_text(el, "average_power_draw"))
        limit = _number(
            _text(el, "current_power_limit")
            or _text(el, "enforced_power_limit")
            or _text(el, "power_limit")
        )
        return draw, limit
    return None, None


def _processes(gpu: ET.Element) -> list[dict[str, Any]]:
    out = []
    for p in gpu.findall("processes/process_info"):
        out.append(
            {
                "pid": _int(_text(p, "pid")),
                "name": _text(p, "process_name"),
                "used_mib": _int(_text(p, "used_memory")),
                "type": _text(p, "type"),
            }
        )
    return out


def _fabric(gpu: ET.Element) -> dict[str, Any] | None:
    """NVLink fabric registration (HGX/NVSwitch and NVL systems); None where it is N/A."""
    state = _text(gpu, "fabric/state")
    if state is None:
        return None
    return {
        "state": state,
        "status": _text(gpu, "fabric/status"),
        "health_summary": _text(gpu, "fabric/health/summary"),
    }


def _gpu(index: int, gpu: ET.Element) -> dict[str, Any]:
    name = _text(gpu, "product_name")
    arch = _text(gpu, "product_architecture")
    power_draw, power_limit = _power(gpu)
    return {
        "index": index,
        "name": name,
        "uuid": _text(gpu, "uuid"),
        "pci_bus_id": pci_display(_text(gpu, "pci/pci_bus_id") or gpu.get("id")),
        "architecture": arch,
        "compute_capability": _text(gpu, "compute_cap") or compute_capability_for(name, arch),
        "memory_mib": {
            "total": _int(_text(gpu, "fb_memory_usage/total")),
            "reserved": _int(_text(gpu, "fb_memory_usage/reserved")),
            "used": _int(_text(gpu, "fb_memory_usage/used")),
            "free": _int(_text(gpu, "fb_memory_usage/free")),
        },
        "processes": _processes(gpu),
        "processes_visible": True,
        "ecc": _ecc(gpu),
        "remapped_rows": _remapped_rows(gpu),
        "retired_pages": _retired_pages(gpu),
        "clock_event_reasons": _clock_event_reasons(gpu),
        "performance_state": _text(gpu, "performance_state"),
        "temperature_c": _int(_text(gpu, "temperature/gpu_temp")),
        "power_draw_w": power_draw,
        "power_limit_w": power_limit,
        "pcie": _pcie(gpu),
        "persistence_mode": _flag(_text(gpu, "persistence_mode")),
        "mig_mode": _flag(_text(gpu, "mig_mode/current_mig")),
        "reset_required": _flag(_text(gpu, "gpu_reset_status/reset_required")),
        "drain_and_reset_recommended": _flag(
            _text(gpu, "gpu_reset_status/drain_and_reset_recommended")
        ),
        "recovery_action": _text(gpu, "gpu_recovery_action"),
        "fabric": _fabric(gpu),
        "errors": {},
    }


def parse_nvidia_smi_xml(text: str) -> dict[str, Any]:
    """The normalized GPU list of one `nvidia-smi -q -x` document; ValueError if it is not one."""
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise ValueError(f"not valid XML ({exc})") from None
    if root.tag != "nvidia_smi_log":
        raise ValueError(f"root element is <{root.tag}>, expected <nvidia_smi_log>")
    return {
        "source": "nvidia-smi",
        "driver_version": _text(root, "driver_version"),
        "cuda_driver_version": cuda_text(_text(root, "cuda_version")),
        "gpus": [_gpu(i, g) for i, g in enumerate(root.findall("gpu"))],
    }
