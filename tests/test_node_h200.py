"""Every node check on the project's own H200 capture (2026-11-30, driver 580.159.04).

The machine was healthy: one H200 in a microVM, no fabric (single GPU: fabric state N/A),
recovery action None, a clean driver load in dmesg, torch 2.11.0+cu130. Sources in the SOURCES.md
of each fixture folder.
"""

from __future__ import annotations

import ctypes
import json
from pathlib import Path

import pynvml
from test_node_checks import facts_with, findings
from test_node_nvml import install_gpus, nvml_facts, run

from llmdoctor.parsers.nvidia_smi_xml import parse_nvidia_smi_xml
from llmdoctor.usecases.diagnose import diagnose

FIXTURES = Path(__file__).parent / "fixtures"
XML = "h200-580.159.04.xml"
NVML_JSON = "h200-580.159.04.json"
VERSIONS = "h200-torch2.11.0-cu130-driver580.159.04.json"
DMESG = "h200-clean-driver-load-580.159.04.log"


def h200_facts():
    return facts_with(smi=XML, versions=VERSIONS, kernel=DMESG)


def test_the_h200_xml_parses_with_no_fabric_and_no_recovery_action():
    doc = parse_nvidia_smi_xml((FIXTURES / "nvidia-smi" / XML).read_text())
    assert doc["driver_version"] == "580.159.04" and doc["cuda_driver_version"] == "13.0"
    (gpu,) = doc["gpus"]
    assert gpu["name"] == "NVIDIA H200" and gpu["compute_capability"] == "9.0"
    assert gpu["pci_bus_id"] == "0000:00:06.0"
    assert gpu["memory_mib"]["total"] == 143771
    assert gpu["fabric"] is None  # <state>N/A</state>: a single GPU has no NVLink fabric
    assert gpu["recovery_action"] is None  # <gpu_recovery_action>None</gpu_recovery_action>


def test_every_node_check_on_the_healthy_h200_finds_nothing_critical():
    report = diagnose([h200_facts()], "node", scopes=("node", "logs"))
    assert [f for f in report.findings if f.severity == "critical"] == []
    assert {f.check for f in report.findings} >= {"xid", "gpu-health", "gpu-fabric", "gpu-arch"}
    (xid,) = [f for f in report.findings if f.check == "xid"]
    assert xid.severity == "ok" and "358 lines" in xid.summary
    (fabric,) = [f for f in report.findings if f.check == "gpu-fabric"]
    assert fabric.severity == "ok" and "not needed" in fabric.summary


def test_the_h200_nvml_read_matches_its_xml_and_reads_the_recovery_action_field(monkeypatch):
    node = install_gpus(monkeypatch, NVML_JSON)
    device = node["devices"][0]

    def field_values(handle, ids):
        # the real answers: field 230 (recovery action) and the older 226/227 (reset required,
        # drain and reset recommended) all read fine (nvmlReturn 0) with value 0
        raw = device["recovery_action_field"]
        out = []
        for field_id in ids:
            assert field_id in (230, 226, 227)
            value = pynvml.c_nvmlFieldValue_t()
            value.fieldId, value.nvmlReturn, value.valueType = field_id, raw["nvmlReturn"], 1
            value.value.uiVal = raw["value_ui"]
            out.append(value)
        return out

    def fabric_info(handle, pointer):
        # NVML fills the struct it is pointed at; by value the real call crashes the process
        assert isinstance(pointer, type(ctypes.byref(ctypes.c_int())))
        pointer._obj.state = device["fabric"]["state"]  # 0 = NVML_GPU_FABRIC_STATE_NOT_SUPPORTED
        pointer._obj.status = device["fabric"]["status"]
        return pynvml.NVML_SUCCESS

    monkeypatch.setattr(pynvml, "nvmlDeviceGetFieldValues", field_values)
    monkeypatch.setattr(pynvml, "nvmlDeviceGetGpuFabricInfoV", fabric_info)
    facts = nvml_facts()
    (gpu,) = facts.get("node/gpus.json")["gpus"]
    assert gpu["errors"] == {}
    assert gpu["recovery_action"] == "None" and gpu["fabric"] is None
    assert gpu["reset_required"] is False and gpu["drain_and_reset_recommended"] is False
    xml = parse_nvidia_smi_xml((FIXTURES / "nvidia-smi" / XML).read_text())["gpus"][0]
    for key in ("name", "pci_bus_id", "compute_capability", "pcie", "remapped_rows"):
        assert gpu[key] == xml[key], key
    report = run(facts)
    assert [f for f in report.findings if f.severity == "critical"] == []


def test_a_fabric_that_never_completes_is_critical_through_nvml(monkeypatch):
    # the H200 values with the fabric state of huggingface_hub#4134 ("fabric manager never
    # reported Completed"): NVML_GPU_FABRIC_STATE_IN_PROGRESS = 2
    install_gpus(monkeypatch, NVML_JSON)

    def in_progress(handle, pointer):
        pointer._obj.state, pointer._obj.status = 2, 0
        return pynvml.NVML_SUCCESS

    monkeypatch.setattr(pynvml, "nvmlDeviceGetGpuFabricInfoV", in_progress)
    facts = nvml_facts()
    assert facts.get("node/gpus.json")["gpus"][0]["fabric"]["state"] == "In Progress"
    (f,) = findings(facts, "gpu-fabric")[0]
    assert f.severity == "critical" and f.runbooks == ["fabric-manager-not-running"]
    assert "error 802" in f.summary and f.subject == "GPU 0 (0000:00:06.0)"


def test_fabric_states_from_nvidia_smi_are_judged_per_gpu():
    # the <fabric> elements of the real H200 XML with the values public reports show:
    # Azure azhpc-images#506 (Completed / Insufficient Resources) and dra-driver#626 (Unhealthy)
    xml = (FIXTURES / "nvidia-smi" / XML).read_text()
    cases = {
        ("Completed", "Insufficient Resources", "N/A"): "critical",
        ("Completed", "Success", "Unhealthy"): "warning",
        ("Completed", "Success", "Healthy"): "ok",
        ("Not Started", "N/A", "N/A"): "critical",
    }
    for (state, status, summary), expected in cases.items():
        text = (
            xml.replace("<state>N/A</state>", f"<state>{state}</state>", 1)
            .replace("<status>N/A</status>", f"<status>{status}</status>", 1)
            .replace("<summary>N/A</summary>", f"<summary>{summary}</summary>", 1)
        )
        facts = facts_with()
        facts.set("node/nvidia-smi.xml", text)
        (f,) = findings(facts, "gpu-fabric")[0]
        assert f.severity == expected, (state, status, summary)


def test_the_h200_oom_captures_tell_fragmentation_from_a_real_shortage():
    fragmented = findings(
        facts_with(logs={"vllm": "h200-oom-fragmented-torch2.11.log"}), "memory-fragmentation"
    )[0]
    exhausted = findings(
        facts_with(logs={"vllm": "h200-oom-exhaust-torch2.11.log"}), "memory-fragmentation"
    )[0]
    assert any("57.55 GiB" in f.summary for f in fragmented), [f.summary for f in fragmented]
    assert not any("57.55 GiB" in f.summary for f in exhausted)
    assert {f.runbooks[0] for f in fragmented if f.runbooks} == {"gpu-memory-fragmentation"}


def test_the_h200_versions_probe_matches_the_driver():
    versions = json.loads((FIXTURES / "versions" / VERSIONS).read_text())
    assert versions["torch"] == "2.11.0+cu130" and versions["libcuda_version"] == 13000
    (f,) = findings(h200_facts(), "driver-cuda")[0]
    assert f.severity == "ok"


def test_a_driver_without_the_versioned_fabric_call_falls_back_to_the_older_one(monkeypatch):
    # drivers before nvmlDeviceGetGpuFabricInfoV answer Function Not Found; the v1 call remains
    install_gpus(monkeypatch, NVML_JSON)

    def missing(handle, pointer):
        raise pynvml.NVMLError(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)

    def completed(handle, pointer):
        pointer._obj.state, pointer._obj.status = 3, 0  # NVML_GPU_FABRIC_STATE_COMPLETED
        return pynvml.NVML_SUCCESS

    monkeypatch.setattr(pynvml, "nvmlDeviceGetGpuFabricInfoV", missing)
    monkeypatch.setattr(pynvml, "nvmlDeviceGetGpuFabricInfo", completed)
    facts = nvml_facts()
    (gpu,) = facts.get("node/gpus.json")["gpus"]
    assert gpu["errors"] == {}
    assert gpu["fabric"] == {"state": "Completed", "status": "Success", "health_summary": None}
    (f,) = findings(facts, "gpu-fabric")[0]
    assert f.severity == "ok" and "completed" in f.summary


def test_the_replayed_h200_reaches_the_verdicts_of_the_live_run(monkeypatch):
    # tests/fixtures/nvml/h200-node-report-live.json is `llmdoctor node --json` run live on the
    # H200; the replay of that machine (its NVML answers at the pynvml boundary, its XML, dmesg
    # and versions) must give every check the verdict the live run printed
    live = json.loads((FIXTURES / "nvml" / "h200-node-report-live.json").read_text())
    install_gpus(monkeypatch, NVML_JSON)
    facts = nvml_facts()
    for key, value in h200_facts().items():
        facts.set(key, value)
    report = diagnose([facts], "node", scopes=("node", "logs"))
    replayed = {f.check: str(f.severity) for f in report.findings}
    assert live["status"] == "ok"
    for finding in live["findings"]:
        assert replayed.get(finding["check"]) == finding["severity"], finding["check"]
    assert {s["check"] for s in live["skipped"]} <= {s["check"] for s in report.skipped}


def test_the_live_h200_textfile_is_valid_prometheus_text_with_every_node_check():
    from prometheus_client.parser import text_string_to_metric_families

    text = (FIXTURES / "nvml" / "h200-node-textfile-live.prom").read_text()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    status = {
        s.labels["check"]: s.labels["status"]
        for s in families["llmdoctor_check_status"].samples
        if s.value == 1.0
    }
    assert status["xid"] == "ok" and status["gpu-fabric"] == "ok"
    assert status["dtype-support"] == "not_checked"
    assert not [s for s in families["llmdoctor_finding"].samples]  # a healthy machine
