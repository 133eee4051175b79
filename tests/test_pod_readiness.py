"""pod-readiness: a Running pod that is not Ready is never reported healthy."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from llmdoctor.cli import run
from llmdoctor.engine.facts import Facts
from llmdoctor.parsers.k8s_pod import parse_time
from llmdoctor.usecases.diagnose import diagnose

K8S = Path(__file__).parent / "fixtures" / "k8s"
NOT_READY_SINCE = "2025-09-04T01:01:50Z"  # the probe-killed pod's Ready=False transition


def load(name: str) -> dict:
    return json.loads((K8S / name).read_text())


def readiness_only() -> tuple[dict, dict]:
    """The probe-killed vLLM pod (tests/fixtures/k8s/SOURCES.md) without its liveness probe and
    restarts: Running, not Ready, 41 'Readiness probe failed' events and nothing else wrong."""
    pod = load("pod-vllm-qwen2-7b-probe-killed.json")
    for container in pod["spec"]["containers"]:
        container.pop("livenessProbe", None)
    for status in pod["status"]["containerStatuses"]:
        status.update(restartCount=0, lastState={})
    events = load("events-vllm-qwen2-7b-probe-killed.json")
    events["items"] = [
        e
        for e in events["items"]
        if e["message"].startswith(("Readiness probe failed", "Scheduled"))
    ]
    return pod, events


def check(pod: dict, events: dict | None, now: str, only=("pod-readiness",)):
    facts = Facts({"time/now": parse_time(now), "target": "pod/vllm-qwen2-7b"})
    facts.set("k8s/pod.json", copy.deepcopy(pod))
    if events is not None:
        facts.set("k8s/events.json", events)
    report = diagnose([facts], "pod/vllm-qwen2-7b", scopes=("k8s", "logs"), only=list(only))
    return report


def test_not_ready_for_25_minutes_is_critical_with_the_probe_failures():
    report = check(*readiness_only(), "2025-09-04T01:26:50Z")
    (f,) = report.findings
    assert f.severity == "critical" and f.runbooks == ["pod-not-ready"]
    assert "not been Ready for 25 min" in f.summary and "41 readiness probe failures" in f.summary
    assert f.subject == "container vllm"
    assert any("Readiness probe failed: Get" in e["text"] for e in f.evidence)


def test_the_whole_k8s_report_is_no_longer_ok():
    # issue 12: every k8s check passed on this pod, so the report said OK
    report = check(*readiness_only(), "2025-09-04T01:26:50Z", only=())
    assert report.status == "critical"
    assert [f.check for f in report.findings if f.severity == "critical"] == ["pod-readiness"]


def test_a_few_minutes_not_ready_is_a_warning_while_vllm_loads():
    (f,) = check(*readiness_only(), "2025-09-04T01:04:50Z").findings
    assert f.severity == "warning" and "3 min" in f.summary and "loads the model" in f.summary


def test_a_startup_probe_budget_longer_than_ten_minutes_is_waited_for():
    pod, events = readiness_only()
    pod["spec"]["containers"][0]["startupProbe"] = {
        "httpGet": {"path": "/health", "port": 8081},
        "periodSeconds": 10,
        "failureThreshold": 180,
    }
    (f,) = check(pod, events, "2025-09-04T01:26:50Z").findings
    assert f.severity == "warning"


def test_without_events_the_containers_state_is_the_reason():
    pod = load("pod-vllm-7b-crashloop.json")
    (f,) = check(pod, None, "2025-09-04T01:30:00Z").findings
    assert f.severity == "critical" and "waiting: CrashLoopBackOff" in f.summary


def test_a_ready_pod_is_ok():
    (f,) = check(load("pod-vllm-7b-healthy.json"), None, "2025-09-04T01:30:00Z").findings
    assert f.severity == "ok" and "Ready since 2025-09-04T01:05:02Z" in f.summary


@pytest.mark.parametrize(
    ("now", "severity", "spell"),
    [("2023-08-21T05:40:05Z", "warning", "7 min"), ("2023-08-21T06:00:06Z", "critical", "27 min")],
)
def test_a_pending_pod_serves_nothing_either(now, severity, spell):
    # the AKS pod the scheduler cannot place (2 Insufficient nvidia.com/gpu), created 05:33:06
    (f,) = check(load("pod-vllm-1-pending-aks.json"), None, now).findings
    assert f.severity == severity and f"Pending for {spell}" in f.summary
    assert "not scheduled: Unschedulable" in f.summary


def test_a_pod_without_a_ready_condition_is_skipped_not_ok():
    pod = load("pod-vllm-7b-healthy.json")
    pod["status"]["conditions"] = [c for c in pod["status"]["conditions"] if c["type"] != "Ready"]
    report = check(pod, None, "2025-09-04T01:30:00Z")
    assert report.findings == []
    assert (
        "no Ready condition" in {s["check"]: s["reason"] for s in report.skipped}["pod-readiness"]
    )


def test_bundle_end_to_end_exits_2(tmp_path, capsys):
    pod, events = readiness_only()
    (tmp_path / "k8s").mkdir()
    (tmp_path / "k8s" / "pod.json").write_text(json.dumps(pod))
    (tmp_path / "k8s" / "events.json").write_text(json.dumps(events))
    manifest = {
        "format": "llmdoctor-bundle/1",
        "target": "pod/vllm-qwen2-7b-6c9d8f7b4-kx2vq",
        "namespace": "serving",
        "collected_at": "2025-09-04T01:26:50Z",
    }
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(SystemExit) as exc:
        run(["diagnose", "--bundle", str(tmp_path), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert exc.value.code == 2
    (f,) = [f for f in doc["findings"] if f["check"] == "pod-readiness"]
    assert f["severity"] == "critical" and f["runbooks"] == ["pod-not-ready"]
