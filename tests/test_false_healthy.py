"""States that looked healthy and were not (issue 24, "False healthy"): each is now a finding.

The pods and the Deployment are the real-shaped objects of tests/fixtures/k8s served by the
local API server (tests/k8s_server.py), changed only in the fields the case is about; the
streams are vLLM's chunk shape (tests/vllm_server.py). Assertions are on check ids, severities,
runbook ids and exit codes, not on wording.
"""

from __future__ import annotations

import copy
import json
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from k8s_server import Running, load, scenario_healthy
from vllm_server import FakeVllmServer, Scenario, Stream

from llmdoctor.cli import run as cli_run

POD = "vllm-7b-7d9f8c6b5-x2kqp"
ROOT = Path(__file__).resolve().parents[1]
CAPACITY = ROOT / "tests" / "fixtures" / "capacity"


@pytest.fixture
def cluster(tmp_path, monkeypatch):
    started = []

    def start(scenario) -> Running:
        running = Running(scenario, tmp_path / "kubeconfig").__enter__()
        started.append(running)
        monkeypatch.setenv("KUBECONFIG", str(running.kubeconfig))
        monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
        return running

    yield start
    for running in started:
        running.__exit__(None, None, None)


def run(capsys, *argv: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as done:
        cli_run(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err and "internal error" not in err
    return int(done.value.code or 0), out, err


def diagnose_pod(capsys) -> tuple[int, dict]:
    code, out, _ = run(
        capsys, "diagnose", f"pod/{POD}", "-n", "serving", "--json", "--window", "0", "--no-exec"
    )
    return code, json.loads(out)


def by_check(report: dict, check: str) -> list[dict]:
    return [f for f in report["findings"] if f["check"] == check]


def rfc3339(seconds_ago: float) -> str:
    return datetime.fromtimestamp(time.time() - seconds_ago, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def healthy_with(change) -> object:
    scenario = scenario_healthy(nvidia_smi=False)
    change(scenario.cluster.pods[("serving", POD)])
    return scenario


# --- the pod ----------------------------------------------------------------------------------


def test_a_healthy_pod_stays_healthy(cluster, capsys):
    # the control: none of the new findings fires on the unchanged fixture
    cluster(scenario_healthy(nvidia_smi=False))
    _, report = diagnose_pod(capsys)
    assert [f["severity"] for f in by_check(report, "pod-readiness")] == ["ok"]
    assert [f["severity"] for f in by_check(report, "workload-replicas")] == ["ok"]


def test_a_pod_stuck_terminating_for_30_minutes_is_critical(cluster, capsys):
    # deletion was due 30 min ago (a finalizer, or a node that no longer answers); Ready=True
    # and phase Running are what the kubelet last wrote, before it went away
    def stuck(pod):
        pod["metadata"]["deletionTimestamp"] = rfc3339(30 * 60)
        pod["metadata"]["deletionGracePeriodSeconds"] = 30

    cluster(healthy_with(stuck))
    code, report = diagnose_pod(capsys)
    (finding,) = by_check(report, "pod-readiness")
    assert finding["severity"] == "critical" and finding["runbooks"] == ["pod-not-ready"]
    assert code == 2


def test_a_pod_just_asked_to_terminate_is_a_warning(cluster, capsys):
    # within its grace period: going away as asked, but already out of the Service
    def deleting(pod):
        pod["metadata"]["deletionTimestamp"] = rfc3339(-20)
        pod["metadata"]["deletionGracePeriodSeconds"] = 30

    cluster(healthy_with(deleting))
    _, report = diagnose_pod(capsys)
    assert [f["severity"] for f in by_check(report, "pod-readiness")] == ["warning"]


def test_phase_unknown_is_critical_whatever_ready_says(cluster, capsys):
    # the node stopped reporting: the Ready=True condition is stale
    def unknown(pod):
        pod["status"]["phase"] = "Unknown"

    cluster(healthy_with(unknown))
    code, report = diagnose_pod(capsys)
    (finding,) = by_check(report, "pod-readiness")
    assert finding["severity"] == "critical" and code == 2


def test_a_container_not_ready_under_ready_true_is_a_warning(cluster, capsys):
    # the containerStatuses say the vllm container is not ready; the condition still says Ready
    def stale(pod):
        pod["status"]["containerStatuses"][0]["ready"] = False

    cluster(healthy_with(stale))
    _, report = diagnose_pod(capsys)
    (finding,) = by_check(report, "pod-readiness")
    assert finding["severity"] == "warning" and finding["subject"] == "container vllm"


# --- the Deployment ---------------------------------------------------------------------------

# The ReplicaSet controller's refusal as the API server words it, in the shape of a real one
# (github.com/ministryofjustice/cloud-platform/issues/590: `pods "allocation-manager-6597bc46dc-
# 2wm8j" is forbidden: exceeded quota: namespace-quota, requested: limits.cpu=1,...`) with a GPU
# quota; the deployment controller copies the ReplicaSet's ReplicaFailure condition onto the
# Deployment (kubernetes pkg/controller/deployment/progress.go, syncRolloutStatus).
QUOTA_REFUSAL = (
    'pods "vllm-7b-7d9f8c6b5-q5mll" is forbidden: exceeded quota: gpu-quota, requested: '
    "requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=1, limited: "
    "requests.nvidia.com/gpu=1"
)


def test_one_of_three_replicas_available_names_the_replicaset_failure(cluster, capsys):
    # the fixture Deployment as exported: 3 asked for, 1 available; plus the quota refusal
    scenario = scenario_healthy(nvidia_smi=False)
    deployment = load("deployment-vllm-7b.json")
    deployment["status"]["conditions"].append(
        {
            "type": "ReplicaFailure",
            "status": "True",
            "reason": "FailedCreate",
            "message": QUOTA_REFUSAL,
            "lastTransitionTime": rfc3339(600),
            "lastUpdateTime": rfc3339(600),
        }
    )
    scenario.cluster.add_app(deployment)
    cluster(scenario)
    _, report = diagnose_pod(capsys)
    (finding,) = by_check(report, "workload-replicas")
    assert finding["severity"] == "warning"
    assert finding["runbooks"] == ["k8s-gpu-unschedulable"]
    assert any("exceeded quota: gpu-quota" in e["text"] for e in finding["evidence"])
    # the pod itself is fine: the finding is about its siblings
    assert [f["severity"] for f in by_check(report, "pod-readiness")] == ["ok"]


def test_no_replica_available_is_critical(cluster, capsys):
    scenario = scenario_healthy(nvidia_smi=False)
    deployment = load("deployment-vllm-7b.json")
    deployment["status"].pop("availableReplicas")  # omitted at 0, as the API server does
    scenario.cluster.add_app(deployment)
    cluster(scenario)
    code, report = diagnose_pod(capsys)
    (finding,) = by_check(report, "workload-replicas")
    assert finding["severity"] == "critical" and finding["runbooks"] == ["pod-not-ready"]
    assert code == 2


def test_a_statefulset_before_kubernetes_1_22_counts_ready_replicas(capsys, tmp_path):
    # no availableReplicas field then: readyReplicas (1 of 2 in the AKS fixture) is the count
    from llmdoctor.engine.facts import Facts
    from llmdoctor.engine.registry import all_checks

    owner = load("statefulset-vllm-aks.json")
    owner["status"].pop("availableReplicas", None)
    spec = next(c for c in all_checks() if c.id == "workload-replicas")
    finding = spec.fn(Facts({"k8s/owner.json": owner}))
    assert finding.severity.value == "warning"


@pytest.mark.parametrize(
    ("spec", "status", "severity"),
    [
        ({"replicas": "nan"}, {"availableReplicas": 1}, "ok"),  # no count asked: nothing missing
        ({"replicas": 3}, {"availableReplicas": -2}, "critical"),  # a negative count is none
        ({"replicas": 3}, {"availableReplicas": "3"}, "ok"),  # a number as text still counts
        ({}, {}, "critical"),  # spec.replicas defaults to 1; none available
    ],
)
def test_odd_replica_counts_are_read_not_raised(spec, status, severity):
    from llmdoctor.engine.facts import Facts
    from llmdoctor.engine.registry import all_checks

    owner = load("deployment-vllm-7b.json")
    owner["spec"] = {k: v for k, v in owner["spec"].items() if k != "replicas"} | spec
    owner["status"] = status
    check = next(c for c in all_checks() if c.id == "workload-replicas")
    assert check.fn(Facts({"k8s/owner.json": owner})).severity.value == severity


def test_finalizers_that_are_not_a_list_are_ignored(cluster, capsys):
    # a hand-written object: the string is not read letter by letter as finalizer names
    def odd(pod):
        pod["metadata"]["deletionTimestamp"] = rfc3339(30 * 60)
        pod["metadata"]["finalizers"] = "example.com/protect"

    cluster(healthy_with(odd))
    _, report = diagnose_pod(capsys)
    (finding,) = by_check(report, "pod-readiness")
    assert finding["severity"] == "critical"
    assert not any("finalizers" in e["text"] for e in finding["evidence"])


# --- the generation probe ---------------------------------------------------------------------


def probe_json(capsys, url: str) -> tuple[int, dict]:
    code, out, _ = run(capsys, "probe", url, "--json", "--window", "0", "--timeout", "5")
    return code, json.loads(out)


def test_a_stream_of_exclamation_marks_fails_the_generation_probe(capsys):
    # NaN logits: the sampler falls back to token 0, `!` in Qwen and Llama-3; HTTP 200 throughout
    nan_stream = Stream(tokens=["!"] * 16, finish_reason="length")
    routes = {"POST /v1/completions": nan_stream}
    with FakeVllmServer(Scenario(routes=routes)) as vllm:
        code, report = probe_json(capsys, vllm.url)
    (finding,) = by_check(report, "vllm-generation")
    assert finding["severity"] == "critical"
    assert finding["runbooks"] == ["nan-or-garbage-output"]
    assert code == 2


def test_a_run_of_g_from_a_llama_cpp_server_fails_too(capsys):
    # the same failure as llama.cpp prints it, in multi-character tokens
    routes = {"POST /v1/completions": Stream(tokens=["GGGG"] * 4, finish_reason="length")}
    with FakeVllmServer(Scenario(routes=routes)) as vllm:
        _, report = probe_json(capsys, vllm.url)
    (finding,) = by_check(report, "vllm-generation")
    assert finding["severity"] == "critical"


def test_a_real_answer_still_passes(capsys):
    # the control: vLLM's usual answer to the probe's prompt
    routes = {"POST /v1/completions": Stream(tokens=[" Paris", ".", " The", " capital"])}
    with FakeVllmServer(Scenario(routes=routes)) as vllm:
        _, report = probe_json(capsys, vllm.url)
    assert [f["severity"] for f in by_check(report, "vllm-generation")] == ["ok"]


def test_the_probes_first_token_never_comes_after_its_end():
    # CI on a fast, loaded host: a 4-chunk answer sent at once read its first chunk "after" the
    # request's end (TTFT was timed from before the call, latency inside it), and the check said
    # the timings could not be read. Both are timed from the same start now
    import time as clock

    import requests

    from llmdoctor.collectors.vllm_generation_probe import generation_probe

    routes = {"POST /v1/completions": Stream(tokens=[" Paris", ".", " The", " capital"])}
    with FakeVllmServer(Scenario(routes=routes)) as vllm, requests.Session() as session:
        for _ in range(20):
            probe = generation_probe(
                session, vllm.url, "m", chat=False, timeout=5, deadline=clock.monotonic() + 5
            )
            assert probe["chunks"] and 0 < probe["ttft_ms"] <= probe["latency_ms"], probe


@pytest.mark.parametrize(
    ("text", "degenerate"),
    [
        ("!!!!!!!!!!!!!!!!", True),  # 16 tokens of `!`
        ("GGGGGGGGGGGGGGGG", True),
        ("\ufffd\ufffd\ufffd", True),  # bytes that decode to nothing
        (" Paris. The capital of France is Paris.", False),
        ("!!!", False),  # too short to tell from an exclamation
        ("Wow!!!!!!!!", False),  # a word before them: language
        ("1111111", False),  # under the run length: a number
    ],
)
def test_degenerate_text_is_one_character_repeated_or_no_text(text, degenerate):
    from llmdoctor.parsers.generated_text import degenerate as check

    assert (check(text) is not None) is degenerate


def test_a_bundle_recorded_before_the_probe_refused_it_is_still_critical(capsys, tmp_path):
    # old bundles hold text "!!!!" with no error: the check reads the text itself
    import shutil

    bundle = tmp_path / "b"
    shutil.copytree(ROOT / "examples" / "bundles" / "saturated-queue", bundle)
    probe_path = bundle / "vllm" / "probe.json"
    probe = json.loads(probe_path.read_text())
    probe.update(text="!" * 16, error=None, error_kind=None, latency_ms=300.0, ttft_ms=40.0)
    probe_path.write_text(json.dumps(probe))
    code, out, _ = run(capsys, "diagnose", "--bundle", str(bundle), "--json")
    (finding,) = by_check(json.loads(out), "vllm-generation")
    assert finding["severity"] == "critical" and code == 2
    assert finding["runbooks"] == ["nan-or-garbage-output"]  # not the slow-probe finding


# --- thresholds and ratios --------------------------------------------------------------------


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_alert_thresholds_that_can_never_fire_are_refused(capsys, value):
    # `> nan` is false for every sample: the rule would be written and never fire
    code, out, err = run(
        capsys, "alerts", "--wiki-url", "https://wiki.example.com", "--ttft-p95", value
    )
    assert code == 3 and out == "" and len(err.strip().splitlines()) == 1


def test_kv_usage_above_one_is_bad_data_not_500_percent(capsys, tmp_path):
    # vllm:gpu_cache_usage_perc is a fraction; a 5 comes from another exporter or a rescaled
    # series: a warning that KV pressure is not judged, never "KV cache at 500 %" (the bundle's
    # own reading is 41.7 %, ok, with no preemptions)
    import shutil

    bundle = tmp_path / "b"
    shutil.copytree(ROOT / "examples" / "bundles" / "saturated-queue", bundle)
    for page in (bundle / "vllm").glob("metrics-*.txt"):
        lines = page.read_text().splitlines()
        out = [
            line.rsplit(" ", 1)[0] + " 5.0"
            if line.startswith(("vllm:gpu_cache_usage_perc{", "vllm:kv_cache_usage_perc{"))
            else line
            for line in lines
        ]
        assert out != lines, "the fixture has a KV usage gauge"
        page.write_text("\n".join(out) + "\n")
    _, report_text, _ = run(capsys, "diagnose", "--bundle", str(bundle), "--json")
    report = json.loads(report_text)
    (finding,) = by_check(report, "vllm-kv-cache")
    assert finding["severity"] == "warning" and finding["runbooks"] == []
    assert "500" not in json.dumps(finding)


def test_kv_usage_above_one_in_the_history_is_dropped_not_a_full_cache():
    # the Prometheus history: a point of 5 is not "KV cache at 500 %"
    from llmdoctor.parsers.prometheus_timeline import timeline_from_series

    start = 1_800_000_000.0
    points = [[start + 15 * i, 5.0] for i in range(10)]
    series = {"kv_cache_usage": [{"labels": {"engine": "0"}, "points": points}]}
    timeline = timeline_from_series(series, {"start": start, "end": start + 150, "step": 15.0})
    assert [e["what"] for e in timeline["events"]] == []
    assert timeline["dropped"] == 10


# --- impossible model configs -----------------------------------------------------------------


def test_more_kv_heads_than_attention_heads_is_refused(capsys, tmp_path):
    # Qwen2-7B's config with num_key_value_heads 64 over 28 attention heads: no such model
    config = json.loads((CAPACITY / "qwen2-7b-instruct-config.json").read_text())
    config["num_key_value_heads"] = 64
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    code, out, err = run(capsys, "capacity", "--model-config", str(path), "--gpu", "A100-80GB")
    assert code == 3 and "key/value heads" in err and "FITS" not in out


def test_the_unchanged_config_is_accepted(capsys):
    # the control: Qwen2-7B's 4 KV heads over 28 attention heads (GQA)
    config = copy.deepcopy(json.loads((CAPACITY / "qwen2-7b-instruct-config.json").read_text()))
    assert config["num_key_value_heads"] == 4
    path = CAPACITY / "qwen2-7b-instruct-config.json"
    code, _, _ = run(capsys, "capacity", "--model-config", str(path), "--gpu", "A100-80GB")
    assert code in (0, 1, 2)
