"""GPU state through NVML (nvidia-ml-py, imported as `pynvml` inside the collector).

Produces `node/nvml.json` (NVML's own status: driver and NVML versions, or the error that stopped
it) and `node/gpus.json` (the normalized GPU list, shape in llmdoctor.parsers.gpus_json). Every
NVML error becomes a sentence a person can act on; a field a GPU does not support is None.
"""

from __future__ import annotations

import contextlib
import ctypes
from typing import Any

from llmdoctor.engine.collect import CollectContext
from llmdoctor.engine.facts import Missing
from llmdoctor.gpus.tables import cuda_text, recovery_action
from llmdoctor.parsers.pci import pci_display

MIB = 1024 * 1024

# pynvml exception class name -> what it means for the person running llmdoctor
INIT_ERRORS = {
    "NVMLError_LibraryNotFound": "NVML library not found (no NVIDIA driver on this machine?)",
    "NVMLError_DriverNotLoaded": (
        "NVIDIA driver not loaded (NVML: Driver Not Loaded): the nvidia kernel module is not "
        "running; check `lsmod | grep nvidia` and the kernel log"
    ),
    "NVMLError_NoPermission": (
        "no permission to use NVML (Insufficient Permissions): run as root or with access to "
        "/dev/nvidiactl and /dev/nvidia*"
    ),
    "NVMLError_LibRmVersionMismatch": (
        "Driver/library version mismatch: the NVIDIA user-space library (libnvidia-ml) and the "
        "loaded kernel module are different versions (driver updated without a reboot?)"
    ),
}

# bit -> name, as nvidia-smi names the same reasons (clocks_event_reason_<name>)
CLOCK_EVENT_BITS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clocks_setting",
}


def describe_nvml_error(exc: BaseException) -> str:
    """A one-line explanation of an NVML exception."""
    name = type(exc).__name__
    if name in INIT_ERRORS:
        return INIT_ERRORS[name]
    try:
        text = str(exc)
    except Exception:  # pynvml looks the text up in the library, which may be the problem
        text = ""
    return f"NVML error: {text or name}"


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


class _Device:
    """Reads one GPU's fields; a failing field is None and its error is kept."""

    def __init__(self, nvml, handle):
        self.nvml = nvml
        self.handle = handle
        self.errors: dict[str, str] = {}

    def get(self, field: str, fn_name: str, *args, **kwargs):
        fn = getattr(self.nvml, fn_name, None)
        if fn is None:
            return None
        try:
            return fn(self.handle, *args, **kwargs)
        except self.nvml.NVMLError_NotSupported:
            return None
        except self.nvml.NVMLError as exc:
            self.errors[field] = describe_nvml_error(exc)
            return None


def _memory(dev: _Device) -> dict[str, int | None]:
    nvml = dev.nvml
    try:
        info = nvml.nvmlDeviceGetMemoryInfo(dev.handle, version=nvml.nvmlMemory_v2)
        reserved = int(info.reserved)
        # v2 counts reserved memory as used; nvidia-smi shows them apart
        used = int(info.used) - reserved
    except (nvml.NVMLError, TypeError, AttributeError):
        info = dev.get("memory", "nvmlDeviceGetMemoryInfo")
        if info is None:
            return {"total": None, "reserved": None, "used": None, "free": None}
        reserved, used = None, int(info.used)
    return {
        "total": int(info.total) // MIB,
        "reserved": None if reserved is None else reserved // MIB,
        "used": max(used, 0) // MIB,
        "free": int(info.free) // MIB,
    }


def _processes(dev: _Device) -> tuple[list[dict[str, Any]], bool]:
    """Compute and graphics processes with their memory; False when the list could not be read."""
    nvml = dev.nvml
    out: list[dict[str, Any]] = []
    for kind, fn_name in (
        ("C", "nvmlDeviceGetComputeRunningProcesses"),
        ("G", "nvmlDeviceGetGraphicsRunningProcesses"),
    ):
        for p in dev.get(f"processes {kind}", fn_name) or []:
            used = getattr(p, "usedGpuMemory", None)
            try:
                name = _text(nvml.nvmlSystemGetProcessName(p.pid))
            except nvml.NVMLError:
                name = None  # NVML reports host pids; this one is not visible from here
            out.append(
                {
                    "pid": int(p.pid),
                    "name": name,
                    "used_mib": None if used is None else int(used) // MIB,
                    "type": kind,
                }
            )
    return out, "processes C" not in dev.errors


def _ecc(dev: _Device) -> dict[str, Any]:
    nvml = dev.nvml
    mode = dev.get("ecc_mode", "nvmlDeviceGetEccMode")
    enabled = None if mode is None else bool(mode[0])
    out: dict[str, Any] = {"enabled": enabled}
    for scope, counter in (("volatile", "NVML_VOLATILE_ECC"), ("aggregate", "NVML_AGGREGATE_ECC")):
        for kind, err in (
            ("uncorrected", "NVML_MEMORY_ERROR_TYPE_UNCORRECTED"),
            ("corrected", "NVML_MEMORY_ERROR_TYPE_CORRECTED"),
        ):
            value = None
            if enabled:
                value = dev.get(
                    f"ecc {scope} {kind}",
                    "nvmlDeviceGetTotalEccErrors",
                    getattr(nvml, err),
                    getattr(nvml, counter),
                )
            out[f"{scope}_{kind}"] = None if value is None else int(value)
    return out


def _remapped_rows(dev: _Device) -> dict[str, Any] | None:
    rows = dev.get("remapped_rows", "nvmlDeviceGetRemappedRows")
    if rows is None:
        return None
    corr, unc, pending, failure = rows
    return {
        "correctable": int(corr),
        "uncorrectable": int(unc),
        "pending": bool(pending),
        "failure": bool(failure),
    }


def _retired_pages(dev: _Device) -> dict[str, Any] | None:
    nvml = dev.nvml
    single = dev.get(
        "retired_pages",
        "nvmlDeviceGetRetiredPages",
        getattr(nvml, "NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS", 0),
    )
    double = dev.get(
        "retired_pages",
        "nvmlDeviceGetRetiredPages",
        getattr(nvml, "NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR", 1),
    )
    pending = dev.get("retired_pages", "nvmlDeviceGetRetiredPagesPendingStatus")
    if single is None and double is None and pending is None:
        return None
    return {
        "single_bit": None if single is None else len(single),
        "double_bit": None if double is None else len(double),
        "pending": None if pending is None else bool(pending),
    }


def _clock_event_reasons(dev: _Device) -> list[str] | None:
    mask = dev.get("clock_event_reasons", "nvmlDeviceGetCurrentClocksEventReasons")
    if mask is None:
        mask = dev.get("clock_event_reasons", "nvmlDeviceGetCurrentClocksThrottleReasons")
    if mask is None:
        return None
    return [name for bit, name in CLOCK_EVENT_BITS.items() if int(mask) & bit]


def _recovery_action(dev: _Device) -> str | None:
    nvml = dev.nvml
    field_id = getattr(nvml, "NVML_FI_DEV_GET_GPU_RECOVERY_ACTION", None)
    if field_id is None:
        return None
    values = dev.get("recovery_action", "nvmlDeviceGetFieldValues", [field_id])
    try:
        value = values[0]
        if value.nvmlReturn != 0:
            return None
        known = recovery_action(int(value.value.uiVal))
    except (TypeError, IndexError, AttributeError, ValueError):
        return None
    return known[0] if known else None


def _reset_flags(dev: _Device) -> tuple[bool | None, bool | None]:
    """(reset required, drain and reset recommended): NVML fields 226/227 (older than 230)."""
    nvml = dev.nvml
    ids = [
        getattr(nvml, n, None)
        for n in ("NVML_FI_DEV_RESET_STATUS", "NVML_FI_DEV_DRAIN_AND_RESET_STATUS")
    ]
    if None in ids:
        return None, None
    values = dev.get("reset_status", "nvmlDeviceGetFieldValues", ids) or []
    flags: list[bool | None] = []
    for value in list(values)[:2]:
        try:
            flags.append(bool(value.value.uiVal) if value.nvmlReturn == 0 else None)
        except (AttributeError, TypeError, ValueError):
            flags.append(None)
    flags += [None] * (2 - len(flags))
    return flags[0], flags[1]


# NVML_GPU_FABRIC_STATE_* -> nvidia-smi's words for them
FABRIC_STATES = {0: "Not Supported", 1: "Not Started", 2: "In Progress", 3: "Completed"}
FABRIC_HEALTH = {0: "Not Supported", 1: "Healthy", 2: "Unhealthy"}


def _fabric(dev: _Device) -> dict[str, Any] | None:
    """NVLink fabric registration; None where the GPU has none (NVML: Not Supported)."""
    nvml = dev.nvml
    for struct, fn_name in (
        ("c_nvmlGpuFabricInfo_v3_t", "nvmlDeviceGetGpuFabricInfoV"),
        ("c_nvmlGpuFabricInfo_t", "nvmlDeviceGetGpuFabricInfo"),
    ):
        cls = getattr(nvml, struct, None)
        if cls is None or getattr(nvml, fn_name, None) is None:
            continue
        info = cls()
        try:
            # pynvml hands the struct to C as given: by value it crashes the process (seen with
            # nvidia-ml-py 13.610.43 on an H200, driver 580.159.04); NVML expects a pointer
            getattr(nvml, fn_name)(dev.handle, ctypes.byref(info))
        except nvml.NVMLError_FunctionNotFound:
            continue  # a driver older than this call: try the older one
        except nvml.NVMLError_NotSupported:
            return None
        except nvml.NVMLError as exc:
            dev.errors["fabric"] = describe_nvml_error(exc)
            return None
        state = FABRIC_STATES.get(int(info.state), f"state {int(info.state)}")
        if state == "Not Supported":
            return None
        status = int(info.status)
        health = getattr(info, "healthSummary", None)  # v3 and newer only
        return {
            "state": state,
            "status": "Success" if status == 0 else f"NVML error {status}",
            "health_summary": None if health is None else FABRIC_HEALTH.get(int(health)),
        }
    return None


def _scaled(value: Any, divisor: float) -> float | None:
    return None if value is None else round(float(value) / divisor, 2)


def read_device(nvml, index: int) -> dict[str, Any]:
    """Every field of GPU `index` in the node/gpus shape."""
    handle = nvml.nvmlDeviceGetHandleByIndex(index)
    dev = _Device(nvml, handle)
    cc = dev.get("compute_capability", "nvmlDeviceGetCudaComputeCapability")
    pci = dev.get("pci", "nvmlDeviceGetPciInfo")
    processes, visible = _processes(dev)
    mig = dev.get("mig_mode", "nvmlDeviceGetMigMode")
    persistence = dev.get("persistence_mode", "nvmlDeviceGetPersistenceMode")
    pstate = dev.get("performance_state", "nvmlDeviceGetPerformanceState")
    reset_required, drain_and_reset = _reset_flags(dev)

    return {
        "index": index,
        "name": _text(dev.get("name", "nvmlDeviceGetName")),
        "uuid": _text(dev.get("uuid", "nvmlDeviceGetUUID")),
        "pci_bus_id": pci_display(_text(getattr(pci, "busId", None))),
        "architecture": None,
        "compute_capability": f"{cc[0]}.{cc[1]}" if cc else None,
        "memory_mib": _memory(dev),
        "processes": processes,
        "processes_visible": visible,
        "ecc": _ecc(dev),
        "remapped_rows": _remapped_rows(dev),
        "retired_pages": _retired_pages(dev),
        "clock_event_reasons": _clock_event_reasons(dev),
        "performance_state": None if pstate is None else f"P{int(pstate)}",
        "temperature_c": dev.get(
            "temperature", "nvmlDeviceGetTemperature", getattr(nvml, "NVML_TEMPERATURE_GPU", 0)
        ),
        "power_draw_w": _scaled(dev.get("power", "nvmlDeviceGetPowerUsage"), 1000),
        "power_limit_w": _scaled(dev.get("power", "nvmlDeviceGetEnforcedPowerLimit"), 1000),
        "pcie": {
            "current_gen": dev.get("pcie", "nvmlDeviceGetCurrPcieLinkGeneration"),
            "max_gen": dev.get("pcie", "nvmlDeviceGetMaxPcieLinkGeneration"),
            "current_width": dev.get("pcie", "nvmlDeviceGetCurrPcieLinkWidth"),
            "max_width": dev.get("pcie", "nvmlDeviceGetMaxPcieLinkWidth"),
        },
        "persistence_mode": None if persistence is None else bool(persistence),
        "mig_mode": None if mig is None else bool(mig[0]),
        "reset_required": reset_required,
        "drain_and_reset_recommended": drain_and_reset,
        "recovery_action": _recovery_action(dev),
        "fabric": _fabric(dev),
        "errors": dev.errors,
    }


def _system(nvml, name: str) -> Any:
    fn = getattr(nvml, name, None)
    if fn is None:
        return None
    try:
        return fn()
    except nvml.NVMLError:
        return None


def collect_nvml(ctx: CollectContext) -> dict[str, Any]:
    """NVML status and every GPU's state; an NVML failure is recorded, never raised."""
    try:
        import pynvml
    except ImportError:
        why = "nvidia-ml-py (pynvml) is not installed: pip install nvidia-ml-py"
        return {
            "node/nvml.json": {"ok": False, "error": {"type": "ImportError", "message": why}},
            "node/gpus.json": Missing(why),
        }
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        why = describe_nvml_error(exc)
        status = {"ok": False, "error": {"type": type(exc).__name__, "message": why}}
        return {"node/nvml.json": status, "node/gpus.json": Missing(why)}
    try:
        driver = _text(_system(pynvml, "nvmlSystemGetDriverVersion"))
        cuda = _system(pynvml, "nvmlSystemGetCudaDriverVersion_v2")
        if cuda is None:
            cuda = _system(pynvml, "nvmlSystemGetCudaDriverVersion")
        status: dict[str, Any] = {
            "ok": True,
            "driver_version": driver,
            "nvml_version": _text(_system(pynvml, "nvmlSystemGetNVMLVersion")),
            "cuda_driver_version": cuda_text(cuda),
            "device_count": None,
            "device_errors": {},
        }
        try:
            count = pynvml.nvmlDeviceGetCount()
        except pynvml.NVMLError as exc:
            why = describe_nvml_error(exc)
            status["ok"] = False
            status["error"] = {"type": type(exc).__name__, "message": why}
            return {"node/nvml.json": status, "node/gpus.json": Missing(f"NVML: {why}")}
        status["device_count"] = count
        gpus = []
        for i in range(count):
            try:
                gpus.append(read_device(pynvml, i))
            except pynvml.NVMLError as exc:
                status["device_errors"][str(i)] = {
                    "type": type(exc).__name__,
                    "message": describe_nvml_error(exc),
                }
        doc = {
            "source": "nvml",
            "driver_version": driver,
            "cuda_driver_version": cuda_text(cuda),
            "gpus": gpus,
        }
        return {"node/nvml.json": status, "node/gpus.json": doc}
    finally:
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()
