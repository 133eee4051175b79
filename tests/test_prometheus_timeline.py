"""`--prometheus`: the incident timeline from a real Prometheus over scripted incident hours.

tests/prometheus_scenarios.py writes OpenMetrics with timestamps (real vLLM, DCGM exporter and
kube-state-metrics names), promtool turns it into TSDB blocks, and `prometheus` serves them on
127.0.0.1 (tests/prometheus_server.py; skipped without Debian's prometheus package unless
LLMDOCTOR_REQUIRE_PROMETHEUS=1). diagnose/probe/collect run end to end against it.
"""

from __future__ import annotations

import json
import shutil
import time
from datetime import UTC, datetime
from pathlib import Path

import prometheus_scenarios as ps
import pytest
from k8s_server import Running, scenario_saturated
from prometheus_server import Prometheus, create_blocks, free_port, tools
from vllm_server import FakeVllmServer

from llmdoctor.cli import run as cli_run

SATURATED_POD = "vllm-7b-tp2-5b8d9c7f6-w4nzp"  # tests/k8s_server.py scenario_saturated
STEP = ps.SCRAPE  # onsets must be right to the scrape interval


@pytest.fixture(scope="module")
def hour(tmp_path_factory):
    """A Prometheus holding the last hour of every scenario; its start time."""
    tools()
    folder = tmp_path_factory.mktemp("prometheus")
    start = time.time() // ps.SCRAPE * ps.SCRAPE - 3600
    pods = [ps.healthy(), ps.queue_builds(), ps.kv_storm(), ps.xid_then_death(), ps.wedged()]
    pods.append(ps.queue_builds(SATURATED_POD))
    data = create_blocks(ps.openmetrics_hour(start, pods), folder)
    auth_data = folder / "auth-data"
    shutil.copytree(data, auth_data)
    server = Prometheus(data, folder)
    guarded = Prometheus(auth_data, folder, basic_auth=True)
    yield {"url": server.url, "auth_url": guarded.url, "start": start}
    server.stop()
    guarded.stop()


@pytest.fixture
def vllm():
    with FakeVllmServer() as server:
        yield server


@pytest.fixture(autouse=True)
def no_prometheus_env(monkeypatch):
    for name in ("URL", "TOKEN", "USER", "PASSWORD", "CA"):
        monkeypatch.delenv(f"LLMDOCTOR_PROMETHEUS_{name}", raising=False)


def run_cli(capsys, *args: str) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exit_info:
        cli_run(list(args))
    return exit_info.value.code, capsys.readouterr().out


def probe_json(capsys, vllm, url: str, pod: str, *extra: str) -> tuple[int, dict]:
    code, out = run_cli(
        capsys,
        "probe",
        vllm.url,
        "--prometheus",
        url,
        "--prometheus-selector",
        f'namespace="serving",pod="{pod}"',
        "--json",
        "--timeout",
        "5",
        *extra,
    )
    return code, json.loads(out)


def seconds(rfc3339: str) -> float:
    return datetime.strptime(rfc3339, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()


def onsets(report: dict) -> dict[str, float]:
    return {e["what"]: seconds(e["since"]) for e in report["timeline"]["events"]}


def history_findings(report: dict) -> list[dict]:
    return [f for f in report["findings"] if f["check"].startswith("history-")]


def assert_onset(found: float, start: float, minute: float) -> None:
    expected = start + minute * 60
    assert expected <= found < expected + STEP + 1, (found - start) / 60


def test_kv_storm_v0_names_onsets_and_order(hour, vllm, capsys):
    _, report = probe_json(capsys, vllm, hour["url"], "vllm-kvstorm-0")
    times = onsets(report)
    start = hour["start"]
    assert_onset(times["kv_full"], start, 10)
    assert_onset(times["preemptions"], start, 12)
    assert_onset(times["queue"], start, 14)
    assert_onset(times["ttft_slow"], start, 16)
    order = [e["what"] for e in report["timeline"]["events"]]
    assert order == ["kv_full", "preemptions", "queue", "ttft_slow"]
    (kv,) = [f for f in history_findings(report) if "kv-cache-preemption" in f["runbooks"]][:1]
    assert kv["summary"].startswith("KV cache full since ")
    assert seconds(kv["since"]) == pytest.approx(times["kv_full"])
    # cause before consequence among equal severities: KV, then the queue it makes, then TTFT
    warnings = [f for f in history_findings(report) if f["severity"] == "warning"]
    assert [f["check"] for f in warnings][-1] == "history-latency"


def test_prometheus_given_means_one_live_scrape(hour, vllm, capsys):
    probe_json(capsys, vllm, hour["url"], "vllm-kvstorm-0")
    assert len([r for r in vllm.requests if r[1] == "/metrics"]) == 1


def test_queue_building_while_running_sits_at_max_num_seqs(hour, vllm, capsys):
    _, report = probe_json(capsys, vllm, hour["url"], "vllm-queue-0")
    times = onsets(report)
    assert_onset(times["queue"], hour["start"], 31)
    assert times["queue"] < times["ttft_slow"]
    (queue,) = [f for f in history_findings(report) if f["summary"].startswith("requests queue")]
    assert queue["runbooks"] == ["queue-saturation"]
    assert "running held at 256" in queue["evidence"][0]["text"]
    assert "kv_full" not in times


def test_xid_then_engine_death_then_restarts(hour, vllm, capsys):
    code, report = probe_json(capsys, vllm, hour["url"], "vllm-xid-0")
    times = onsets(report)
    start = hour["start"]
    assert_onset(times["xid"], start, 20)
    assert_onset(times["restart"], start, 21.5)
    assert times["xid"] < times["engine_down"] < times["restart"]
    order = [e["what"] for e in report["timeline"]["events"]]
    assert order == ["xid", "engine_down", "terminated", "restart"]
    gpu = [f for f in history_findings(report) if f["check"] == "history-gpu"]
    assert gpu[0]["severity"] == "critical" and gpu[0]["runbooks"] == ["xid-fallen-off-bus"]
    restarts = [f for f in history_findings(report) if f["check"] == "history-restarts"]
    assert restarts[0]["severity"] == "critical"  # 3 restarts in the hour
    assert code == 2


def test_wedged_engine_then_queue_then_aborted_requests(hour, vllm, capsys):
    code, report = probe_json(capsys, vllm, hour["url"], "vllm-wedged-0")
    times = onsets(report)
    assert_onset(times["stalled"], hour["start"], 40)
    assert_onset(times["queue"], hour["start"], 41)
    assert times["stalled"] < times["queue"] < times["aborted"]
    (wedged,) = [f for f in history_findings(report) if "engine-wedged" in f["runbooks"]][:1]
    assert wedged["severity"] == "critical" and wedged["check"] == "history-engine"
    (aborted,) = [f for f in history_findings(report) if f["summary"].startswith("requests abort")]
    assert aborted["runbooks"] == ["engine-wedged"]  # the cause that came first
    assert code == 2


def test_healthy_hour_has_nothing_critical(hour, vllm, capsys):
    _, report = probe_json(capsys, vllm, hour["url"], "vllm-healthy-0")
    assert report["timeline"]["events"] == []
    found = history_findings(report)
    assert {f["check"] for f in found} == {
        "history-gpu",
        "history-engine",
        "history-latency",
        "history-restarts",
    }
    assert all(f["severity"] == "ok" for f in found)
    assert "since" not in json.dumps(found)


def test_prometheus_down_is_not_checked_and_the_rest_runs(vllm, capsys):
    closed = f"http://127.0.0.1:{free_port()}"
    code, report = probe_json(capsys, vllm, closed, "vllm-kvstorm-0")
    skipped = [s for s in report["skipped"] if s["check"].startswith("history-")]
    assert len(skipped) == 4
    assert all(f"Prometheus at {closed}" in s["reason"] for s in skipped)
    assert "refused" in skipped[0]["reason"]
    assert any(f["check"] == "vllm-health" for f in report["findings"])
    assert code != 3 and "timeline" not in report


def test_auth_refused_then_basic_auth_from_the_environment(hour, vllm, capsys, monkeypatch):
    _, report = probe_json(capsys, vllm, hour["auth_url"], "vllm-kvstorm-0")
    reasons = [s["reason"] for s in report["skipped"] if s["check"].startswith("history-")]
    assert reasons and all("HTTP 401: Prometheus refused the credentials" in r for r in reasons)
    monkeypatch.setenv("LLMDOCTOR_PROMETHEUS_USER", "admin")
    monkeypatch.setenv("LLMDOCTOR_PROMETHEUS_PASSWORD", "test")
    _, report = probe_json(capsys, vllm, hour["auth_url"], "vllm-kvstorm-0")
    assert "kv_full" in onsets(report)


def test_series_absent_for_the_selector_is_said(hour, vllm, capsys):
    _, report = probe_json(capsys, vllm, hour["url"], "no-such-pod")
    reasons = [s["reason"] for s in report["skipped"] if s["check"].startswith("history-")]
    assert reasons and all(
        'has no series for {namespace="serving",pod="no-such-pod"}' in r for r in reasons
    )


@pytest.fixture
def cluster(tmp_path, monkeypatch):
    running = Running(scenario_saturated(), tmp_path / "kubeconfig").__enter__()
    monkeypatch.setenv("KUBECONFIG", str(running.kubeconfig))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    yield running
    running.__exit__(None, None, None)


def test_pod_diagnose_matches_namespace_and_pod_and_the_bundle_keeps_it(
    hour, cluster, capsys, tmp_path
):
    base = ("pod/" + SATURATED_POD, "-n", "serving", "--no-exec", "--timeout", "5")
    _, out = run_cli(capsys, "diagnose", *base, "--prometheus", hour["url"], "--json")
    live = json.loads(out)
    assert_onset(onsets(live)["queue"], hour["start"], 31)
    (queue,) = [f for f in live["findings"] if f["check"] == "vllm-queue"]
    assert queue["since"] == live["timeline"]["events"][0]["since"]  # the live finding, dated
    assert "Prometheus history: requests waiting" in queue["evidence"][-1]["text"]
    proxied = [r for r in cluster.server.requests if ":8081/proxy/metrics" in r[1]]
    assert len(proxied) == 1  # the history gives the rates: one live scrape, no 5 s wait

    deploy = ("deploy/vllm-7b-tp2", *base[1:])
    _, out = run_cli(capsys, "diagnose", *deploy, "--prometheus", hour["url"], "--no-color")
    assert f"Timeline of pod/{SATURATED_POD} (UTC" in out  # a deployment: whose timeline it is

    bundle = tmp_path / "incident"  # the selector is known once the deployment's pod is found
    run_cli(capsys, "collect", *deploy, "--prometheus", hour["url"], "-o", str(bundle))
    assert (bundle / "prometheus" / "series.json").is_file()
    assert (bundle / "prometheus" / "query.json").is_file()
    _, out = run_cli(capsys, "diagnose", "--bundle", str(bundle), "--json")
    offline = json.loads(out)
    assert [e["what"] for e in offline["timeline"]["events"]] == [
        e["what"] for e in live["timeline"]["events"]
    ]
    assert_onset(onsets(offline)["queue"], hour["start"], 31)  # collect queried a second later
    assert [f["check"] for f in history_findings(offline)] == [
        f["check"] for f in history_findings(live)
    ]


def test_terminal_timeline_sparklines_and_markdown_chart(hour, vllm, capsys, tmp_path):
    selector = 'namespace="serving",pod="vllm-kvstorm-0"'
    common = ("--prometheus", hour["url"], "--prometheus-selector", selector, "--timeout", "5")
    _, out = run_cli(capsys, "probe", vllm.url, *common, "--no-color")
    assert "Timeline (UTC" in out
    assert "KV cache full since " in " ".join(out.split())  # however rich wrapped it
    kv_row = next(line for line in out.splitlines() if line.strip().startswith("KV cache "))
    assert "█" in kv_row and "max 100%" in kv_row
    charts = tmp_path / "charts"
    _, md = run_cli(capsys, "probe", vllm.url, *common, "--markdown", "--charts", str(charts))
    (svg,) = charts.glob("*.svg")
    assert "<svg" in svg.read_text()[:2000]
    assert f"]({svg})" in md and "| time | layer | what |" in md
    first = svg.read_bytes()
    time.sleep(1.1)  # a later run ends its window later: a new name beside the first chart
    run_cli(capsys, "probe", vllm.url, *common, "--markdown", "--charts", str(charts))
    assert len(list(charts.glob("*.svg"))) == 2 and svg.read_bytes() == first


def test_bad_prometheus_options_are_one_line_errors(capsys):
    for args in (
        ("--prometheus", "ftp://prom:9090"),
        ("--prometheus", "http://prom:9090", "--since", "an hour"),
        ("--prometheus", "http://prom:9090", "--prometheus-selector", "{}"),
    ):
        with pytest.raises(SystemExit) as exit_info:
            cli_run(["probe", "http://127.0.0.1:9", *args])
        assert exit_info.value.code == 3
        assert "Traceback" not in capsys.readouterr().err


def test_a_deployment_shows_the_timeline_of_every_pod_with_history():
    # two pods replayed from the example bundle's Prometheus history: the report (terminal,
    # markdown, JSON) carries both timelines, each headed by its pod
    import io

    from rich.console import Console

    from llmdoctor.collectors.bundle import Bundle
    from llmdoctor.render.report import render_markdown, render_terminal, to_json
    from llmdoctor.usecases.diagnose import diagnose

    example = Path(__file__).resolve().parent.parent / "examples/bundles/saturated-queue-history"
    facts_list = []
    for pod in ("pod/vllm-a", "pod/vllm-b"):
        facts = Bundle(str(example)).to_facts()
        facts.set("target", pod)
        facts_list.append(facts)
    report = diagnose(facts_list, "deploy/vllm")
    data = to_json(report)
    assert set(data["timelines"]) == {"pod/vllm-a", "pod/vllm-b"}
    assert data["timeline"] == data["timelines"]["pod/vllm-a"]  # the first pod, as before
    markdown = render_markdown(report)
    assert "### Timeline of pod/vllm-a" in markdown and "### Timeline of pod/vllm-b" in markdown
    buffer = io.StringIO()
    render_terminal(report, Console(file=buffer, no_color=True, width=200))
    text = buffer.getvalue()
    assert "Timeline of pod/vllm-a" in text and "Timeline of pod/vllm-b" in text
