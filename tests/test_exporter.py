"""`llmdoctor exporter`: /probe against the scripted vLLM servers, the concurrency bound, the
exporter's own /metrics, and the command itself."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from exporter_running import Running
from prometheus_client.parser import text_string_to_metric_families
from vllm_server import (
    Blackhole,
    FakeVllmServer,
    Scenario,
    SilentServer,
    Stream,
    free_port,
    v0_metrics,
    wait_until,
)

from llmdoctor.fleet.exporter import ProbeSettings, parse_listen

LLMDOCTOR = str(Path(sys.executable).parent / "llmdoctor")
FAST = ProbeSettings(timeout=1.0, window=0.1, max_latency_ms=1000.0)


def values(text: str) -> dict[str, float]:
    """'name{k="v",...}' -> value for every sample."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
            out[f"{s.name}{{{labels}}}" if labels else s.name] = s.value
    return out


def test_a_healthy_server_is_success_1_with_its_timings():
    with FakeVllmServer() as srv, Running(FAST) as ex:
        status, body = ex.probe(srv.url)
    got = values(body)
    assert status == 200
    assert got["llmdoctor_probe_success"] == 1 and got["llmdoctor_probe_health_up"] == 1
    assert got["llmdoctor_probe_generation_ok"] == 1
    assert 0 < got["llmdoctor_probe_ttft_seconds"] <= got["llmdoctor_probe_generation_seconds"]
    assert got['llmdoctor_probe_findings{severity="critical"}'] == 0
    # the figures come from the real V0 capture the fake server serves
    assert any(k.startswith("llmdoctor_probe_requests_waiting{") for k in got)
    assert any(k.startswith("llmdoctor_probe_kv_cache_usage_ratio{") for k in got)


def test_a_saturated_slow_server_is_success_0_with_its_queue():
    scenario = Scenario(
        metrics=[v0_metrics(running=256, waiting=240), v0_metrics(running=256, waiting=603)],
        routes={"POST /v1/completions": Stream(first_delay=0.6)},
    )
    settings = ProbeSettings(timeout=2.0, window=0.1, max_latency_ms=300.0)
    with FakeVllmServer(scenario) as srv, Running(settings) as ex:
        status, body = ex.probe(srv.url)
    got = values(body)
    assert status == 200 and got["llmdoctor_probe_success"] == 0
    assert got["llmdoctor_probe_generation_ok"] == 1  # text came back, only too late
    assert got["llmdoctor_probe_generation_seconds"] >= 0.6
    waiting = [v for k, v in got.items() if k.startswith("llmdoctor_probe_requests_waiting{")]
    assert waiting == [603]
    assert got['llmdoctor_probe_findings{severity="critical"}'] >= 1
    assert any(
        'check="vllm-generation"' in k for k in got if k.startswith("llmdoctor_probe_finding{")
    )


def test_an_empty_generation_is_success_0_although_health_is_200():
    scenario = Scenario(routes={"POST /v1/completions": Stream(tokens=[])})
    with FakeVllmServer(scenario) as srv, Running(FAST) as ex:
        status, body = ex.probe(srv.url)
    got = values(body)
    assert status == 200 and got["llmdoctor_probe_health_up"] == 1
    assert got["llmdoctor_probe_success"] == 0 and got["llmdoctor_probe_generation_ok"] == 0


def test_a_blackholed_target_answers_success_0_within_the_probe_budget():
    settings = ProbeSettings(timeout=1.0, window=0.1)
    with SilentServer() as srv, Running(settings) as ex:
        started = time.monotonic()
        status, body = ex.probe(srv.url)
        took = time.monotonic() - started
    got = values(body)
    assert status == 200 and got["llmdoctor_probe_success"] == 0
    assert got["llmdoctor_probe_health_up"] == 0
    assert "llmdoctor_probe_generation_seconds" not in got  # never answered: absent, not 0
    # window + 1.5 x timeout is the documented worst case; a hang would take the 30 s urlopen
    assert took < 0.1 + 1.5 * 1.0 + 3.0


def test_twenty_concurrent_scrapes_neither_hang_nor_exceed_the_bound():
    # /health answers, the completion never does: every probe holds its slot for ~timeout
    scenario = Scenario(routes={"POST /v1/completions": Blackhole()})
    settings = ProbeSettings(timeout=0.5, window=0.05, max_concurrent=3, queue_wait=30.0)
    with FakeVllmServer(scenario) as srv, Running(settings) as ex:
        with ThreadPoolExecutor(20) as pool:
            results = list(pool.map(lambda _: ex.probe(srv.url), range(20)))
        assert ex.exporter.in_flight == 0
        peak = ex.exporter.peak_in_flight
        own = values(ex.get("/metrics")[1])
    assert [s for s, _ in results] == [200] * 20
    assert all(values(b)["llmdoctor_probe_success"] == 0 for _, b in results)
    assert 1 <= peak <= 3
    assert own['llmdoctor_exporter_probes_total{result="failure"}'] == 20
    assert own["llmdoctor_exporter_max_concurrent_probes"] == 3


def test_scrapes_that_find_no_free_slot_in_time_get_503_not_a_pile_up():
    scenario = Scenario(routes={"POST /v1/completions": Blackhole()})
    settings = ProbeSettings(timeout=1.0, window=0.05, max_concurrent=1, queue_wait=0.2)
    with FakeVllmServer(scenario) as srv, Running(settings) as ex:
        with ThreadPoolExecutor(4) as pool:
            results = list(pool.map(lambda _: ex.probe(srv.url), range(4)))
        own = values(ex.get("/metrics")[1])
    codes = sorted(s for s, _ in results)
    assert codes[0] == 200 and 503 in codes and ex.exporter.peak_in_flight == 1
    assert own['llmdoctor_exporter_probes_refused_total{reason="busy"}'] == codes.count(503)


def test_a_scrape_waits_for_a_slot_no_longer_than_its_own_timeout_allows():
    # Prometheus' 2 s scrape timeout leaves no time to queue behind a probe of ~1.5 s
    scenario = Scenario(routes={"POST /v1/completions": Blackhole()})
    settings = ProbeSettings(timeout=1.0, window=0.05, max_concurrent=1, queue_wait=30.0)
    with FakeVllmServer(scenario) as srv, Running(settings) as ex:
        query = urllib.parse.urlencode({"target": srv.url})
        exporter = ex.exporter
        with ThreadPoolExecutor(2) as pool:
            results = list(pool.map(lambda _: exporter.probe(query, 2.0), range(2)))
    assert sorted(status for status, _ in results) == [200, 503]


@pytest.mark.parametrize("query", ["", "target=", "target=ftp://vllm:21", "target=pod/vllm-0"])
def test_a_probe_without_a_usable_target_is_400(query):
    with Running(FAST) as ex:
        status, body = ex.get(f"/probe?{query}")
    assert status == 400 and body.strip()


def test_the_scrape_timeout_header_shrinks_the_probe_budget():
    timeout, window = ProbeSettings(timeout=10.0, window=5.0).budget(4.0)
    assert window + 1.5 * timeout <= 3.5 + 1e-9
    assert ProbeSettings(timeout=3.0, window=2.0).budget(None) == (3.0, 2.0)


@pytest.mark.parametrize(
    ("text", "address"),
    [
        (":9808", ("127.0.0.1", 9808)),  # loopback unless a wider bind is written out
        ("0.0.0.0:9808", ("0.0.0.0", 9808)),
        ("127.0.0.1:1", ("127.0.0.1", 1)),
        ("[::1]:9808", ("::1", 9808)),
    ],
)
def test_listen_addresses(text, address):
    assert parse_listen(text) == address


def test_the_command_serves_probes_and_refuses_a_bad_listen_address():
    bad = subprocess.run(
        [LLMDOCTOR, "exporter", "--listen", "nowhere"], capture_output=True, text=True
    )
    assert bad.returncode == 3 and bad.stderr.count("\n") == 1 and "--listen" in bad.stderr
    port = free_port()
    proc = subprocess.Popen(
        [
            LLMDOCTOR,
            "exporter",
            "--listen",
            f"127.0.0.1:{port}",
            "--timeout",
            "1",
            "--window",
            "0.1",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        with FakeVllmServer() as srv:
            body = {}

            def probed() -> bool:
                query = urllib.parse.urlencode({"target": srv.url})
                try:
                    with urllib.request.urlopen(
                        f"http://127.0.0.1:{port}/probe?{query}", timeout=10
                    ) as r:
                        body["text"] = r.read().decode()
                    return True
                except OSError:
                    return False

            assert wait_until(probed, timeout=20)
    finally:
        proc.terminate()
        proc.wait(10)
    assert values(body["text"])["llmdoctor_probe_success"] == 1
