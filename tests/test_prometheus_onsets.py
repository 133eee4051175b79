"""Onset detection and the history checks as pure functions (no Prometheus needed).

The series are the scenario hours of tests/prometheus_scenarios.py laid out the way
/api/v1/query_range returns them (one point per step); the same hours are served by a real
Prometheus in tests/test_prometheus_timeline.py.
"""

from __future__ import annotations

from pathlib import Path

import prometheus_scenarios as ps
import pytest

from llmdoctor.collectors.prometheus import default_selector, normalize_selector, plan
from llmdoctor.engine.derive import derive_all
from llmdoctor.engine.facts import FactMissing, Facts
from llmdoctor.engine.registry import all_checks
from llmdoctor.errors import BadInput
from llmdoctor.parsers.prometheus_timeline import first_run, timeline_from_series
from llmdoctor.timeline.view import sparkline

START = 1_800_000_000.0
END = START + 3600


def points(values, lookback: int = 20) -> list[list[float]]:
    """A gauge as query_range shows it: a value at every step, held for `lookback` steps after
    the last sample (Prometheus' 5 minute lookback)."""
    out, last = [], None
    for i, v in enumerate(values):
        if v is not None:
            last = (i, v)
        if last is not None and i - last[0] <= lookback:
            out.append([START + i * ps.SCRAPE, float(last[1])])
    return out


def last_seen(values, lookback: int = 20) -> list[list[float]]:
    """timestamp(vllm:num_requests_running): the time of the latest sample."""
    out, last = [], None
    for i, v in enumerate(values):
        if v is not None:
            last = i
        if last is not None and i - last <= lookback:
            out.append([START + i * ps.SCRAPE, START + last * ps.SCRAPE])
    return out


def series_of(pod: ps.Pod) -> dict:
    labels = {"model_name": ps.MODEL, "engine": "0"}
    rate = [None] + [
        (b - a) / ps.SCRAPE
        for a, b in zip(pod.preemptions, pod.preemptions[1:], strict=False)
        if a is not None and b is not None
    ]
    return {
        "running": [{"labels": labels, "points": points(pod.running)}],
        "waiting": [{"labels": labels, "points": points(pod.waiting)}],
        "kv_cache_usage": [{"labels": labels, "points": points(pod.kv)}],
        "preemption_rate": [{"labels": labels, "points": points(rate)}],
        "ttft_p95": [{"labels": {"model_name": ps.MODEL}, "points": points(pod.ttft)}],
        "engine_last_seen": [
            {"labels": {"model_name": ps.MODEL}, "points": last_seen(pod.running)}
        ],
        "xid": [{"labels": {"gpu": "0"}, "points": points(pod.xid)}],
        "restarts": [{"labels": {"container": "vllm"}, "points": points(pod.restarts)}],
    }


QUERY = {"start": START, "end": END, "step": float(ps.SCRAPE)}


def onsets(pod: ps.Pod) -> dict[str, float]:
    timeline = timeline_from_series(series_of(pod), QUERY)
    return {e["what"]: (e["since"] - START) / 60 for e in timeline["events"]}


def test_kv_storm_onsets_are_exact_to_the_step_and_in_causal_order():
    found = onsets(ps.kv_storm())
    assert found == {"kv_full": 10, "preemptions": 12, "queue": 14, "ttft_slow": 16}


def test_xid_engine_death_and_restarts():
    found = onsets(ps.xid_then_death())
    assert found["xid"] == 20
    assert found["engine_down"] == 20.75  # last scrape 20:30, plus one scrape interval
    assert found["restart"] == 21.5


def test_healthy_hour_has_no_event():
    assert onsets(ps.healthy()) == {}


def test_a_store_behind_real_time_does_not_make_the_engine_look_dead():
    pod = ps.healthy()
    cut = ps.at(50)  # Thanos/Mimir: nothing newer than minute 50 has arrived, for any exporter
    for key in ("running", "waiting", "kv", "preemptions", "ttft", "xid", "temp", "restarts"):
        values = getattr(pod, key)
        setattr(pod, key, values[:cut] + [None] * (len(values) - cut))
    series = series_of(pod)
    series["exporters_last_seen"] = [{"labels": {}, "points": last_seen(pod.temp)}]
    assert timeline_from_series(series, QUERY)["events"] == []
    del series["exporters_last_seen"]  # without the other exporters there is no frontier
    assert [e["what"] for e in timeline_from_series(series, QUERY)["events"]] == ["engine_down"]


def test_a_lone_waiting_request_is_not_a_queue():
    assert first_run([[0, 0], [15, 1], [30, 0], [45, 1], [60, 1]], lambda v: v >= 1, 3) is None
    assert first_run([[0, 0], [15, 1], [30, 1], [45, 1]], lambda v: v >= 1, 3) == (1, True)


def test_a_problem_present_when_the_window_opens_is_only_at_least_since():
    pod = ps.healthy()
    pod.kv = [1.0] * len(pod.kv)
    (event,) = timeline_from_series(series_of(pod), QUERY)["events"]
    assert event["what"] == "kv_full" and event["before_window"]


def facts_with(series) -> Facts:
    facts = Facts()
    facts.set("prometheus/query.json", {**QUERY, "selector": 'pod="p"', "url": "http://p:9090"})
    if isinstance(series, str):
        facts.mark_missing("prometheus/series.json", series)
    else:
        facts.set("prometheus/series.json", series)
    derive_all(facts)
    return facts


def run(check_id: str, facts: Facts):
    (spec,) = [c for c in all_checks() if c.id == check_id]
    return spec.fn(facts)


def test_history_checks_give_since_and_say_what_was_absent():
    series = series_of(ps.kv_storm())
    del series["xid"]
    facts = facts_with({**series, "absent": ["xid"]})
    (kv,) = run("history-engine", facts)[:1]
    assert kv.since == START + 600 and kv.summary.startswith("KV cache full since ")
    assert kv.to_json()["since"].endswith("Z")
    with pytest.raises(FactMissing, match="no DCGM exporter"):
        run("history-gpu", facts)


def test_history_checks_are_silent_without_prometheus_and_skipped_when_it_failed():
    assert run("history-engine", Facts()) == []
    facts = facts_with("Prometheus at http://p:9090: connection refused")
    with pytest.raises(FactMissing, match="connection refused"):
        run("history-engine", facts)


def test_selectors():
    assert default_selector("pod", "serving", "vllm-0", None) == 'namespace="serving",pod="vllm-0"'
    assert (
        default_selector("http", None, None, "http://10.0.3.7:8000") == 'instance="10.0.3.7:8000"'
    )
    assert normalize_selector('{job="vllm"}') == 'job="vllm"'
    for bad in ("{}", 'pod="x', ""):
        with pytest.raises(BadInput):
            normalize_selector(bad)


def test_points_are_capped_by_a_coarser_step():
    assert plan(3600, END)["step"] == 15
    assert (END - plan(30 * 86400, END)["start"]) / plan(30 * 86400, END)["step"] <= 720


def test_sparkline():
    line = sparkline([(0, 0.0), (50, 0.5), (99, 1.0)], 0, 100, width=10)
    assert len(line) == 10 and line[0] == "▁" and line[-1] == "█" and line[3] == " "


def test_example_bundle_keeps_the_timeline_offline(capsys):
    import json
    from pathlib import Path

    from llmdoctor.cli import run as cli_run

    bundle = Path(__file__).resolve().parent.parent / "examples/bundles/saturated-queue-history"
    with pytest.raises(SystemExit):
        cli_run(["diagnose", "--bundle", str(bundle), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert [e["what"] for e in report["timeline"]["events"]] == ["queue", "ttft_slow"]
    (queue,) = [f for f in report["findings"] if f["summary"].startswith("requests queueing")]
    assert queue["since"] == report["timeline"]["events"][0]["since"]
    assert queue["runbooks"] == ["queue-saturation"]


class _RecordingApi:
    """A local HTTP server answering /api/v1/query_range with an empty matrix, keeping headers."""

    def __init__(self):
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        seen = self.headers = []

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                seen.append(dict(self.headers))
                body = b'{"status":"success","data":{"resultType":"matrix","result":[]}}'
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def test_bearer_token_from_the_environment_and_no_credentials_stored(monkeypatch):
    from llmdoctor.collectors.prometheus import QUERY_KEY, SERIES_KEY, collect_history

    api = _RecordingApi()
    try:
        monkeypatch.setenv("LLMDOCTOR_PROMETHEUS_TOKEN", "s3cret-token")
        collect_history(api.url, 'pod="p"', 3600, END, 5)
        assert {h.get("Authorization") for h in api.headers} == {"Bearer s3cret-token"}
        monkeypatch.delenv("LLMDOCTOR_PROMETHEUS_TOKEN")
        got = collect_history(api.url.replace("//", "//alice:pw@"), 'pod="p"', 3600, END, 5)
    finally:
        api.close()
    assert got[QUERY_KEY]["url"] == api.url  # no user:password@ in facts or bundles
    assert "alice" not in got[SERIES_KEY].reason and "has no series" in got[SERIES_KEY].reason


def test_a_missing_ca_file_is_a_one_line_error(monkeypatch, tmp_path, capsys):
    from llmdoctor.cli import run as cli_run

    monkeypatch.setenv("LLMDOCTOR_PROMETHEUS_CA", str(tmp_path / "nope.pem"))
    with pytest.raises(SystemExit) as done:
        cli_run(["probe", "http://127.0.0.1:9", "--prometheus", "https://prom:9090"])
    assert done.value.code == 3
    assert "LLMDOCTOR_PROMETHEUS_CA" in capsys.readouterr().err


def test_a_prometheus_that_never_answers_costs_about_one_timeout():
    import socket
    import time

    from llmdoctor.collectors.prometheus import SERIES_KEY, collect_history

    with socket.socket() as silent:  # accepts connections (the backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(32)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        began = time.monotonic()
        got = collect_history(url, 'pod="p"', 3600, END, 1.0)
        took = time.monotonic() - began
    assert took < 3.0
    assert got[SERIES_KEY].reason.startswith(f"Prometheus at {url}: ")


def test_matplotlib_is_imported_only_for_charts(tmp_path):
    """--help, and a report without --charts, never load the plotting library."""
    import os
    import subprocess
    import sys

    from test_wiki_imports import PROBE

    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    bundle = str(
        Path(__file__).resolve().parent.parent / "examples/bundles/saturated-queue-history"
    )
    for args in (
        ["--help"],
        ["diagnose", "--help"],
        ["diagnose", "--bundle", bundle, "--markdown"],
    ):
        proc = subprocess.run(
            [sys.executable, "-c", PROBE, *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        loaded = [ln for ln in proc.stderr.splitlines() if ln.startswith("LOADED=")]
        assert loaded and '"matplotlib"' not in loaded[-1], args


def test_a_chart_is_never_overwritten(tmp_path):
    from llmdoctor.engine.collect import CollectContext
    from llmdoctor.engine.target import parse_target
    from llmdoctor.timeline.charts import write_charts
    from llmdoctor.usecases.diagnose import diagnose, gather

    bundle = Path(__file__).resolve().parent.parent / "examples/bundles/saturated-queue-history"
    target = parse_target(None, str(bundle))
    report = diagnose(gather(target, CollectContext(target, 5, {})), "pod/x")
    ((_, path),) = write_charts(report, str(tmp_path))
    written = Path(path).read_bytes()
    with pytest.raises(BadInput, match="already exists"):
        write_charts(report, str(tmp_path))
    assert Path(path).read_bytes() == written and b"<svg" in written[:2000]


def test_an_answer_that_stops_halfway_is_a_reason_not_a_crash():
    import socket
    import threading
    import time

    from llmdoctor.collectors.prometheus import SERIES_KEY, collect_history

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(32)
    held = []

    def serve():  # headers and the start of a body, then nothing
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            held.append(conn)
            conn.recv(65536)
            conn.sendall(b'HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n{"status":')

    threading.Thread(target=serve, daemon=True).start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    began = time.monotonic()
    try:
        got = collect_history(url, 'pod="p"', 3600, END, 1.0)
    finally:
        listener.close()
        for conn in held:
            conn.close()
    assert time.monotonic() - began < 3.0
    assert got[SERIES_KEY].reason.startswith(f"Prometheus at {url}: ")
