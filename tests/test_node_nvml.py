"""The NVML collector at the pynvml boundary: pynvml's functions return what NVML reported for real
GPUs (values copied from real nvidia-smi captures, tests/fixtures/nvml/SOURCES.md), or raise the
NVML errors a broken node raises. Our collector, parsers and checks run unchanged.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pynvml
import pytest

from llmdoctor.collectors.nvml import collect_nvml
from llmdoctor.engine.collect import CollectContext
from llmdoctor.engine.facts import Facts, Missing
from llmdoctor.usecases.diagnose import diagnose

NVML = Path(__file__).parent / "fixtures" / "nvml"
MIB = 1024 * 1024


def install_gpus(monkeypatch, name: str) -> dict:
    """Make pynvml answer with the values of one real node (see the fixture's SOURCES.md)."""
    node = json.loads((NVML / name).read_text())
    devices = node["devices"]

    def dev(handle):
        return devices[handle]

    def not_supported(*_args, **_kwargs):
        raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)

    def memory(handle, version=None):
        m = dev(handle)["memory_mib"]
        if version is None:  # v1: used includes reserved on current drivers
            return SimpleNamespace(
                total=m["total"] * MIB, free=m["free"] * MIB, used=(m["used"] + m["reserved"]) * MIB
            )
        return SimpleNamespace(
            total=m["total"] * MIB,
            reserved=m["reserved"] * MIB,
            free=m["free"] * MIB,
            used=(m["used"] + m["reserved"]) * MIB,
        )

    def processes(handle):
        return [
            SimpleNamespace(pid=p["pid"], usedGpuMemory=p["used_mib"] * MIB)
            for p in dev(handle)["processes"]
            if p["type"] == "C"
        ]

    def graphics(handle):
        return [
            SimpleNamespace(pid=p["pid"], usedGpuMemory=p["used_mib"] * MIB)
            for p in dev(handle)["processes"]
            if p["type"] == "G"
        ]

    names = {p["pid"]: p["name"] for d in devices for p in d["processes"]}

    def ecc_errors(handle, error_type, counter):
        ecc = dev(handle)["ecc"]
        kind = (
            "uncorrected"
            if error_type == pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
            else "corrected"
        )
        scope = "volatile" if counter == pynvml.NVML_VOLATILE_ECC else "aggregate"
        value = ecc[f"{scope}_{kind}"]
        if value is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return value

    def optional(key):
        def read(handle, *_args):
            value = dev(handle)[key]
            if value is None:
                raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
            return value

        return read

    patches = {
        "nvmlInit": lambda: None,
        "nvmlShutdown": lambda: None,
        "nvmlSystemGetDriverVersion": lambda: node["driver_version"],
        "nvmlSystemGetNVMLVersion": lambda: node["nvml_version"],
        "nvmlSystemGetCudaDriverVersion_v2": lambda: node["cuda_driver_version"],
        "nvmlDeviceGetCount": lambda: len(devices),
        "nvmlDeviceGetHandleByIndex": lambda i: i,
        "nvmlDeviceGetName": lambda h: dev(h)["name"],
        "nvmlDeviceGetUUID": optional("uuid"),
        "nvmlDeviceGetPciInfo": lambda h: SimpleNamespace(busId=dev(h)["bus_id"]),
        "nvmlDeviceGetCudaComputeCapability": lambda h: tuple(dev(h)["compute_capability"]),
        "nvmlDeviceGetMemoryInfo": memory,
        "nvmlDeviceGetComputeRunningProcesses": processes,
        "nvmlDeviceGetGraphicsRunningProcesses": graphics,
        "nvmlSystemGetProcessName": lambda pid: names[pid],
        "nvmlDeviceGetEccMode": lambda h: dev(h)["ecc_mode"],
        "nvmlDeviceGetTotalEccErrors": ecc_errors,
        "nvmlDeviceGetRemappedRows": optional("remapped_rows"),
        "nvmlDeviceGetRetiredPages": not_supported,  # Ampere and newer remap rows instead
        "nvmlDeviceGetRetiredPagesPendingStatus": not_supported,
        "nvmlDeviceGetCurrentClocksEventReasons": lambda h: dev(h)["clock_event_reasons"],
        "nvmlDeviceGetPerformanceState": lambda h: dev(h)["performance_state"],
        "nvmlDeviceGetTemperature": optional("temperature_c"),
        "nvmlDeviceGetPowerUsage": optional("power_mw"),
        "nvmlDeviceGetEnforcedPowerLimit": optional("power_limit_mw"),
        "nvmlDeviceGetCurrPcieLinkGeneration": lambda h: dev(h)["pcie"]["current_gen"],
        "nvmlDeviceGetMaxPcieLinkGeneration": lambda h: dev(h)["pcie"]["max_gen"],
        "nvmlDeviceGetCurrPcieLinkWidth": lambda h: dev(h)["pcie"]["current_width"],
        "nvmlDeviceGetMaxPcieLinkWidth": lambda h: dev(h)["pcie"]["max_width"],
        "nvmlDeviceGetPersistenceMode": lambda h: dev(h)["persistence_mode"],
        "nvmlDeviceGetMigMode": optional("mig_mode"),
        "nvmlDeviceGetFieldValues": not_supported,
        "nvmlDeviceGetGpuFabricInfoV": not_supported,
        "nvmlDeviceGetGpuFabricInfo": not_supported,
    }
    for attr, fn in patches.items():
        monkeypatch.setattr(pynvml, attr, fn)
    return node


def nvml_facts(monkeypatch=None) -> Facts:
    facts = Facts({"time/now": 0, "target": "node"})
    for key, value in collect_nvml(CollectContext(None, 5.0, {})).items():
        if isinstance(value, Missing):
            facts.mark_missing(key, value.reason)
        else:
            facts.set(key, value)
    return facts


def run(facts: Facts, **settings):
    return diagnose([facts], "node", scopes=("node",), settings=settings)


def by_check(report, check_id):
    return [f for f in report.findings if f.check == check_id]


# --- healthy reads ----------------------------------------------------------------------------


def test_l4_pair_reads_every_field_without_errors(monkeypatch):
    # a healthy 2x L4 node: everything NVML reports lands in node/gpus.json, no field error
    install_gpus(monkeypatch, "l4x2-555.42.06.json")
    facts = nvml_facts()
    status, doc = facts.get("node/nvml.json"), facts.get("node/gpus.json")
    assert status["ok"] and status["driver_version"] == "555.42.06"
    assert status["cuda_driver_version"] == "12.5"
    first, second = doc["gpus"]
    assert first["errors"] == {} and second["errors"] == {}
    assert first["memory_mib"] == {"total": 23034, "reserved": 434, "used": 1, "free": 22601}
    assert first["compute_capability"] == "8.9"
    assert first["pci_bus_id"] == "0000:01:00.0"
    assert second["pcie"]["current_width"] == 1
    assert first["clock_event_reasons"] == ["gpu_idle"]


def test_nvml_and_nvidia_smi_give_the_same_normalized_gpus(monkeypatch):
    # the same node read two ways must give the same facts, so checks do not care which
    from llmdoctor.parsers.nvidia_smi_xml import parse_nvidia_smi_xml

    install_gpus(monkeypatch, "l4x2-555.42.06.json")
    from_nvml = nvml_facts().get("node/gpus.json")["gpus"]
    xml = (Path(__file__).parent / "fixtures/nvidia-smi/l4x2-555.42.06.xml").read_text()
    from_xml = parse_nvidia_smi_xml(xml)["gpus"]
    for a, b in zip(from_nvml, from_xml, strict=True):
        for key in ("name", "uuid", "pci_bus_id", "memory_mib", "pcie", "remapped_rows"):
            assert a[key] == b[key], key
        assert a["ecc"]["volatile_uncorrected"] == b["ecc"]["volatile_uncorrected"]


def test_healthy_l4_node_checks_ok_through_nvml(monkeypatch):
    # nvml-status ok; gpu-health flags only the real x1 link of GPU 1
    install_gpus(monkeypatch, "l4x2-555.42.06.json")
    report = run(nvml_facts())
    assert [f.severity for f in by_check(report, "nvml-status")] == ["ok"]
    warnings = [f for f in by_check(report, "gpu-health") if f.severity == "warning"]
    assert [f.subject for f in warnings] == ["GPU 1 (0000:c1:00.0)"]
    assert "x1 of x16" in warnings[0].summary


def test_llama_server_on_blackwell_is_named_and_blocks_a_vllm_start(monkeypatch):
    # NVML names the other process; 0.9 x 97250 MiB does not fit in 31531 MiB free
    install_gpus(monkeypatch, "rtx-pro-6000-blackwell-590.44.01-llama-server.json")
    report = run(nvml_facts(), gpu_memory_utilization=0.9)
    memory = by_check(report, "gpu-memory")
    taken = [f for f in memory if "not vLLM hold" in f.summary]
    assert "pid 116860 /root/src/llama.cpp/build/bin/llama-server: 65710 MiB" in taken[0].summary
    startup = next(f for f in memory if "would refuse to start" in f.summary)
    assert startup.severity == "critical"
    assert "would refuse to start" in startup.summary and "lower it to 0.32" in startup.summary


def test_pcie_gen1_on_an_idle_p8_gpu_is_not_a_warning(monkeypatch):
    # the RTX 4090 idles at P8 with the link trained down to gen 1: power saving, not a fault
    install_gpus(monkeypatch, "rtx4090-535.86.05.json")
    report = run(nvml_facts())
    assert [f.severity for f in by_check(report, "gpu-health")] == ["ok"]


def test_pending_row_remap_is_a_warning_and_the_xid63_maps_to_that_gpu(monkeypatch):
    # stas00's A100: Xid 63 on PCI:0000:10:1c, NVML says a remap is pending -> reset soon
    from llmdoctor.engine.textsource import TextSource

    install_gpus(monkeypatch, "a100-row-remap-pending-510.73.08.json")
    facts = nvml_facts()
    log = Path(__file__).parent / "fixtures/kernel/xid63-row-remapper-stas00.log"
    facts.set("node/kernel.log", TextSource.from_file("node/kernel.log", log))
    report = run(facts)
    (health,) = [f for f in by_check(report, "gpu-health") if f.severity == "warning"]
    assert "remap is pending" in health.summary and health.runbooks == ["xid-ecc-memory"]
    (xid63,) = by_check(report, "xid")
    assert xid63.subject == "GPU 0 (0000:10:1c.0)" and xid63.severity == "warning"


def test_gpu_lost_while_reading_a_field_is_a_critical_finding(monkeypatch):
    # the GPU answered the handle but then stopped answering: it fell off the bus
    install_gpus(monkeypatch, "rtx4090-535.86.05.json")

    def lost(*_args, **_kwargs):
        raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)

    monkeypatch.setattr(pynvml, "nvmlDeviceGetTemperature", lost)
    report = run(nvml_facts())
    (finding,) = by_check(report, "nvml-status")
    assert finding.severity == "critical" and finding.runbooks == ["xid-fallen-off-bus"]


def test_gpu_lost_on_its_handle_is_critical_and_the_other_gpu_is_still_read(monkeypatch):
    # one dead GPU must not hide the healthy one
    install_gpus(monkeypatch, "l4x2-555.42.06.json")
    real = pynvml.nvmlDeviceGetHandleByIndex

    def handle(i):
        if i == 1:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)
        return real(i)

    monkeypatch.setattr(pynvml, "nvmlDeviceGetHandleByIndex", handle)
    facts = nvml_facts()
    assert [g["index"] for g in facts.get("node/gpus.json")["gpus"]] == [0]
    (finding,) = by_check(run(facts), "nvml-status")
    assert finding.severity == "critical" and finding.subject == "GPU 1"


# --- NVML cannot start --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "text"),
    [
        (
            pynvml.NVML_ERROR_LIBRARY_NOT_FOUND,
            "NVML library not found (no NVIDIA driver on this machine?)",
        ),
        (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, "NVIDIA driver not loaded"),
        (pynvml.NVML_ERROR_NO_PERMISSION, "no permission to use NVML"),
        (pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH, "Driver/library version mismatch"),
    ],
)
def test_every_nvml_start_error_becomes_a_clear_reason(monkeypatch, code, text):
    # the GPU checks are skipped *because of* this sentence, not "not collected"
    def fail():
        raise pynvml.NVMLError(code)

    monkeypatch.setattr(pynvml, "nvmlInit", fail)
    facts = nvml_facts()
    assert text in facts.missing_reason("node/gpus.json")
    assert text in facts.get("node/nvml.json")["error"]["message"]


def test_driver_library_mismatch_is_a_critical_finding(monkeypatch):
    # nvidia-smi: "Failed to initialize NVML: Driver/library version mismatch" -> reboot needed
    def fail():
        raise pynvml.NVMLError(pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH)

    monkeypatch.setattr(pynvml, "nvmlInit", fail)
    report = run(nvml_facts())
    (finding,) = by_check(report, "nvml-status")
    assert finding.severity == "critical"
    assert finding.runbooks == ["nvml-driver-library-mismatch"]
    skipped = {s["check"]: s["reason"] for s in report.skipped}
    assert "Driver/library version mismatch" in skipped["gpu-health"]


def test_no_driver_skips_the_gpu_checks_with_the_reason_and_warns(monkeypatch):
    # this machine's situation: nothing about GPUs may be called healthy, and a "GPU node"
    # without any NVIDIA driver (operator's driver pod failing, no NVIDIA runtime) is a problem
    def fail():
        raise pynvml.NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)

    monkeypatch.setattr(pynvml, "nvmlInit", fail)
    facts = nvml_facts()
    facts.mark_missing("node/nvidia-smi.xml", "nvidia-smi not found on PATH")
    report = run(facts)
    (finding,) = by_check(report, "nvml-status")
    assert finding.severity == "warning" and finding.runbooks == ["gpu-not-visible"]
    assert report.status == "warning"
    skipped = {s["check"]: s["reason"] for s in report.skipped}
    for check_id in ("gpu-health", "gpu-memory"):
        assert "NVML library not found" in skipped[check_id]


def test_no_nvml_library_but_nvidia_smi_works_is_only_a_skip(monkeypatch):
    # nvidia-smi sees the GPUs, only the python NVML binding finds no library: not a GPU problem
    def fail():
        raise pynvml.NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)

    monkeypatch.setattr(pynvml, "nvmlInit", fail)
    facts = nvml_facts()
    facts.set("node/nvidia-smi.xml", "<nvidia_smi_log></nvidia_smi_log>")
    report = run(facts)
    assert by_check(report, "nvml-status") == []
    skipped = {s["check"]: s["reason"] for s in report.skipped}
    assert "NVML library not found" in skipped["nvml-status"]


def test_driver_not_loaded_is_a_warning_that_no_gpu_is_usable(monkeypatch):
    # the NVIDIA library is installed but the kernel module is not running
    def fail():
        raise pynvml.NVMLError(pynvml.NVML_ERROR_DRIVER_NOT_LOADED)

    monkeypatch.setattr(pynvml, "nvmlInit", fail)
    (finding,) = by_check(run(nvml_facts()), "nvml-status")
    assert finding.severity == "warning" and finding.runbooks == ["gpu-not-visible"]
