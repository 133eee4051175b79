"""`llmdoctor alerts`: promtool accepts every format, and each alert fires on series named as
vLLM, dcgm-exporter, kube-state-metrics and llmdoctor export them, and stays silent on healthy
ones (`promtool test rules`)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml
from prom_tools import require_tool
from vllm_server import V1_ITL, V1_TTFT

from llmdoctor.cli import run
from llmdoctor.fleet.alert_rules import DYNAMIC_RUNBOOK, build_rules

ROOT = Path(__file__).resolve().parents[1]
WIKI = "https://wiki.example.com/llmdoctor"
MINUTES = 30

# the labels Prometheus and vLLM V1 put on a vLLM series (engine: one per data-parallel engine)
VLLM = {
    "job": "vllm",
    "instance": "10.0.0.5:8000",
    "namespace": "serving",
    "pod": "vllm-0",
    "model_name": "m",
    "engine": "0",
}
PROBE = {"job": "llmdoctor-probe", "instance": "http://vllm.serving:8000"}
NODE = {"job": "node-exporter", "instance": "gpu-node-1:9100"}
# the labels dcgm-exporter puts on DCGM_FI_DEV_XID_ERRORS ("Value of the last XID error
# encountered.", a gauge), as in its published /metrics pages; the values here are made up
DCGM = {
    "job": "dcgm-exporter",
    "instance": "10.0.1.7:9400",
    "gpu": "0",
    "UUID": "GPU-5c2e6b51-7b3e-2b7c-1d8f-6f1c2d7e9a10",
    "pci_bus_id": "00000000:18:00.0",
    "device": "nvidia0",
    "modelName": "NVIDIA H100 80GB HBM3",
    "Hostname": "gpu-node-1",
    "DCGM_FI_DRIVER_VERSION": "550.90.07",
}
KSM = {"job": "kube-state-metrics", "instance": "10.0.2.3:8080"}


def cli(argv: list[str], capsys) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        run(argv)
    out, err = capsys.readouterr()
    return int(exc.value.code or 0), out, err


def series(name: str, labels: dict, values: str) -> dict:
    body = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return {"series": f"{name}{{{body}}}", "values": values}


def flat(value: float) -> str:
    return f"{value}x{MINUTES}"


def rising(per_minute: float, start: float = 0) -> str:
    return f"{start}+{per_minute}x{MINUTES}"


def histogram(name: str, buckets: list[float], observed: float, per_minute: float = 60) -> list:
    """Cumulative bucket counters of a histogram whose every observation is `observed`."""
    out = []
    for le in [*buckets, "+Inf"]:
        hit = le == "+Inf" or observed <= le
        out.append(
            series(f"{name}_bucket", {**VLLM, "le": str(le)}, rising(per_minute if hit else 0))
        )
    return out


def vllm_alert(runbook: str) -> dict:
    return {**VLLM, "runbook": runbook}


# (alert, input series that must fire it, labels of the alert without alertname/severity,
#  runbook id, input series on which it must stay silent)
CASES = [
    (
        "VllmQueueSaturated",
        [series("vllm:num_requests_waiting", VLLM, flat(12))],
        vllm_alert("queue-saturation"),
        # a queue that drains every other minute is busy, not saturated
        [series("vllm:num_requests_waiting", VLLM, " ".join(["12", "0"] * (MINUTES // 2)))],
    ),
    (
        "VllmKvCacheFullPreempting",
        [
            series("vllm:kv_cache_usage_perc", VLLM, flat(0.98)),
            series("vllm:num_preemptions_total", VLLM, rising(4)),
        ],
        vllm_alert("kv-cache-preemption"),
        # vLLM fills its KV cache by design: full without preemptions is healthy
        [
            series("vllm:kv_cache_usage_perc", VLLM, flat(0.98)),
            series("vllm:num_preemptions_total", VLLM, flat(7)),
        ],
    ),
    (
        "VllmKvCacheFullPreempting",  # vLLM 0.8-0.9.1: the deprecated name only
        [
            series("vllm:gpu_cache_usage_perc", VLLM, flat(0.99)),
            series("vllm:num_preemptions_total", VLLM, rising(2)),
        ],
        vllm_alert("kv-cache-preemption"),
        [
            series("vllm:gpu_cache_usage_perc", VLLM, flat(0.5)),
            series("vllm:num_preemptions_total", VLLM, rising(2)),
        ],
    ),
    (
        "VllmTimeToFirstTokenHigh",
        histogram("vllm:time_to_first_token_seconds", V1_TTFT, observed=4.0),
        vllm_alert("queue-saturation"),
        histogram("vllm:time_to_first_token_seconds", V1_TTFT, observed=0.2),
    ),
    (
        "VllmInterTokenLatencyHigh",
        histogram("vllm:inter_token_latency_seconds", V1_ITL, observed=0.7),
        vllm_alert("kv-cache-preemption"),
        histogram("vllm:inter_token_latency_seconds", V1_ITL, observed=0.02),
    ),
    (
        "VllmInterTokenLatencyHigh",  # before 0.11: time_per_output_token_seconds
        histogram("vllm:time_per_output_token_seconds", V1_ITL, observed=0.7),
        vllm_alert("kv-cache-preemption"),
        histogram("vllm:time_per_output_token_seconds", V1_ITL, observed=0.02),
    ),
    (
        "LlmdoctorEngineDown",
        [series("llmdoctor_probe_health_up", PROBE, flat(0))],
        {**PROBE, "runbook": "engine-dead"},
        [series("llmdoctor_probe_health_up", PROBE, flat(1))],
    ),
    (
        "LlmdoctorGenerationProbeFailing",
        [
            series("llmdoctor_probe_health_up", PROBE, flat(1)),
            series("llmdoctor_probe_generation_ok", PROBE, flat(0)),
        ],
        {**PROBE, "runbook": "engine-wedged"},
        # /health down too: LlmdoctorEngineDown says it, this one stays silent
        [
            series("llmdoctor_probe_health_up", PROBE, flat(0)),
            series("llmdoctor_probe_generation_ok", PROBE, flat(0)),
        ],
    ),
    (
        "LlmdoctorGenerationProbeSlow",
        [
            series("llmdoctor_probe_generation_ok", PROBE, flat(1)),
            series("llmdoctor_probe_success", PROBE, flat(0)),
        ],
        {**PROBE, "runbook": "queue-saturation"},
        [
            series("llmdoctor_probe_generation_ok", PROBE, flat(1)),
            series("llmdoctor_probe_success", PROBE, flat(1)),
        ],
    ),
]
XID_FINDING = {**NODE, "check": "xid", "subject": "GPU 0", "runbook": "xid-fallen-off-bus"}
CASES += [
    (
        "LlmdoctorNodeXidCritical",
        [series("llmdoctor_finding", {**XID_FINDING, "severity": "critical"}, flat(1))],
        {**XID_FINDING, "severity": "critical"},
        [series("llmdoctor_finding", {**XID_FINDING, "severity": "warning"}, flat(1))],
    ),
    (
        "LlmdoctorNodeCritical",
        [
            series(
                "llmdoctor_finding",
                {
                    **NODE,
                    "check": "driver-cuda",
                    "subject": "",
                    "runbook": "driver-cuda-mismatch",
                    "severity": "critical",
                },
                flat(1),
            )
        ],
        {
            **NODE,
            "check": "driver-cuda",
            # an empty label is no label
            "runbook": "driver-cuda-mismatch",
            "severity": "critical",
        },
        [
            series(
                "llmdoctor_check_status", {**NODE, "check": "driver-cuda", "status": "ok"}, flat(1)
            )
        ],
    ),
    (
        # the DaemonSet died 50 minutes before: the file still says its last (old) result
        "LlmdoctorNodeCheckStale",
        [series("llmdoctor_node_last_run_timestamp_seconds", NODE, flat(-1500))],
        {**NODE, "runbook": "node-check-not-reporting"},
        # a run every 15 minutes (at 0, 15m): 10 minutes old at 25m
        [series("llmdoctor_node_last_run_timestamp_seconds", NODE, "0x14 900x15")],
    ),
    (
        "LlmdoctorNodeCheckCouldNotCheck",
        [series("llmdoctor_node_status", NODE, flat(3))],
        {**NODE, "runbook": "node-check-not-reporting"},
        [series("llmdoctor_node_status", NODE, flat(2))],  # critical: other rules say why
    ),
    (
        "GpuPodUnschedulable",
        [
            series(
                "kube_pod_status_unschedulable",
                {**KSM, "namespace": "serving", "pod": "vllm-0"},
                flat(1),
            ),
            series(
                "kube_pod_container_resource_requests",
                {
                    **KSM,
                    "namespace": "serving",
                    "pod": "vllm-0",
                    "container": "vllm",
                    "node": "",
                    "resource": "nvidia_com_gpu",
                    "unit": "integer",
                },
                flat(1),
            ),
        ],
        {"namespace": "serving", "pod": "vllm-0", "runbook": "k8s-gpu-unschedulable"},
        # an unschedulable pod that asks for no GPU is not this alert's business
        [
            series(
                "kube_pod_status_unschedulable",
                {**KSM, "namespace": "serving", "pod": "web-0"},
                flat(1),
            ),
            series(
                "kube_pod_container_resource_requests",
                {
                    **KSM,
                    "namespace": "serving",
                    "pod": "web-0",
                    "container": "web",
                    "node": "",
                    "resource": "cpu",
                    "unit": "core",
                },
                flat(2),
            ),
        ],
    ),
]


def dcgm_cases() -> list:
    cases = []
    for rule in build_rules():
        if not rule.name.startswith("DcgmXidCritical"):
            continue
        code = int(rule.expr.split("== ")[1].split()[0])
        cases.append(
            (
                rule.name,
                [series("DCGM_FI_DEV_XID_ERRORS", DCGM, flat(code))],
                {**DCGM, "runbook": rule.runbook},
                # Xid 13 (graphics engine exception) is the application's error, not the GPU's
                [series("DCGM_FI_DEV_XID_ERRORS", DCGM, flat(13))],
            )
        )
    return cases


ALL_CASES = CASES + dcgm_cases()


def rules_file(tmp_path: Path, capsys) -> Path:
    code, out, _ = cli(["alerts", "--wiki-url", WIKI, "--format", "rules"], capsys)
    assert code == 0
    path = tmp_path / "llmdoctor.rules.yml"
    path.write_text(out)
    return path


def test_every_format_passes_promtool_check_rules(tmp_path, capsys):
    promtool = require_tool("promtool")
    path = rules_file(tmp_path, capsys)
    code, out, _ = cli(["alerts", "--wiki-url", WIKI], capsys)  # default: PrometheusRule
    doc = yaml.safe_load(out)
    assert code == 0 and doc["kind"] == "PrometheusRule"
    spec = tmp_path / "prometheusrule-spec.yml"
    spec.write_text(yaml.safe_dump(doc["spec"]))
    for f in (path, spec):
        done = subprocess.run([promtool, "check", "rules", str(f)], capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr
        assert f"SUCCESS: {len(build_rules())} rules found" in done.stdout


def test_every_rule_links_an_existing_runbook_entry(capsys):
    code, out, _ = cli(["alerts", "--wiki-url", WIKI + "/", "--format", "rules"], capsys)
    entries = {p.stem for p in (ROOT / "runbooks").glob("*.md")}
    rules = [r for g in yaml.safe_load(out)["groups"] for r in g["rules"]]
    assert code == 0 and len(rules) == len(build_rules())
    for rule in rules:
        url = rule["annotations"]["runbook_url"]
        if "runbook" in rule["labels"]:
            assert rule["labels"]["runbook"] in entries
            assert url == f"{WIKI}/{rule['labels']['runbook']}.html"
        else:  # the llmdoctor_finding series carries the entry id itself
            assert url == f"{WIKI}/{DYNAMIC_RUNBOOK}.html"
        assert rule["labels"]["severity"] in ("warning", "critical")


def test_every_rule_has_a_firing_and_a_healthy_case():
    assert {c[0] for c in ALL_CASES} == {r.name for r in build_rules()}


def test_alerts_without_a_wiki_address_is_one_line_and_exit_3(capsys, monkeypatch):
    monkeypatch.delenv("LLMDOCTOR_WIKI_URL", raising=False)
    code, out, err = cli(["alerts"], capsys)
    assert code == 3 and out == "" and "--wiki-url" in err and len(err.strip().splitlines()) == 1


def _labels_and_url(alert: str, labels: dict, runbook: str) -> dict:
    severity = next(r.severity for r in build_rules() if r.name == alert)
    return {
        "exp_labels": {**labels, "severity": severity},
        "exp_annotations": {"runbook_url": f"{WIKI}/{runbook}.html"},
    }


def _rules_under_test(tmp_path: Path, capsys) -> None:
    """under-test.yml: the rules as `alerts` writes them, each annotation but runbook_url dropped
    (promtool compares every annotation: keep the rendered runbook_url, not the prose)."""
    doc = yaml.safe_load(rules_file(tmp_path, capsys).read_text())
    for group in doc["groups"]:
        for rule in group["rules"]:
            rule["annotations"] = {"runbook_url": rule["annotations"]["runbook_url"]}
    (tmp_path / "under-test.yml").write_text(yaml.safe_dump(doc))


def _promtool_test_rules(promtool: str, unit: Path, tests: list) -> subprocess.CompletedProcess:
    """`promtool test rules` of these unit tests against under-test.yml (beside `unit`)."""
    unit.write_text(
        yaml.safe_dump(
            {"rule_files": ["under-test.yml"], "evaluation_interval": "1m", "tests": tests}
        )
    )
    return subprocess.run(
        [promtool, "test", "rules", str(unit)], capture_output=True, text=True, cwd=unit.parent
    )


def test_promtool_fires_each_alert_on_failing_series_and_not_on_healthy_ones(tmp_path, capsys):
    promtool = require_tool("promtool")
    _rules_under_test(tmp_path, capsys)
    tests = []
    for alert, failing, labels, healthy in ALL_CASES:
        runbook = labels["runbook"]
        tests.append(
            {
                "interval": "1m",
                "input_series": failing,
                "alert_rule_test": [
                    {
                        "eval_time": "25m",
                        "alertname": alert,
                        "exp_alerts": [_labels_and_url(alert, labels, runbook)],
                    }
                ],
            }
        )
        tests.append(
            {
                "interval": "1m",
                "input_series": healthy,
                "alert_rule_test": [{"eval_time": "25m", "alertname": alert, "exp_alerts": []}],
            }
        )
    done = _promtool_test_rules(promtool, tmp_path / "tests.yml", tests)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert "SUCCESS" in done.stdout


def test_an_unknown_format_is_one_line_and_exit_3(capsys):
    code, out, err = cli(["alerts", "--wiki-url", WIKI, "--format", "json"], capsys)
    assert code == 3 and out == "" and "expected one of prometheusrule, rules" in err


def test_promtool_stale_node_check_fires_after_three_missed_runs_only(tmp_path, capsys):
    promtool = require_tool("promtool")
    _rules_under_test(tmp_path, capsys)
    stale = _labels_and_url(
        "LlmdoctorNodeCheckStale",
        {**NODE, "runbook": "node-check-not-reporting"},
        "node-check-not-reporting",
    )

    def at(minute: int, firing: bool) -> dict:
        alerts = [stale] if firing else []
        return {
            "eval_time": f"{minute}m",
            "alertname": "LlmdoctorNodeCheckStale",
            "exp_alerts": alerts,
        }

    tests = [
        {
            # runs at 0, 15m, 30m, then the DaemonSet dies: node-exporter serves 30m's result
            "interval": "1m",
            "input_series": [
                series("llmdoctor_node_last_run_timestamp_seconds", NODE, "0x14 900x14 1800x100")
            ],
            "alert_rule_test": [
                at(44, False),
                at(60, False),
                at(74, False),
                at(76, True),
                at(120, True),
            ],
        },
        {
            # a DaemonSet that keeps running every 15 minutes never goes stale
            "interval": "1m",
            "input_series": [
                series(
                    "llmdoctor_node_last_run_timestamp_seconds",
                    NODE,
                    " ".join(f"{900 * run}x14" for run in range(12)),
                )
            ],
            "alert_rule_test": [at(m, False) for m in (44, 76, 120, 179)],
        },
    ]
    done = _promtool_test_rules(promtool, tmp_path / "stale.yml", tests)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
