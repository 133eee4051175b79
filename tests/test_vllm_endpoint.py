"""The vLLM endpoint collector and checks, driven through the real requests client against the
scripted fake server of tests/vllm_server.py (real captured /metrics, real error bodies)."""

from __future__ import annotations

import json
import time

import pytest
import requests
from vllm_server import (
    V0_MODEL,
    Blackhole,
    Drip,
    FakeVllmServer,
    Reply,
    ResetNow,
    Scenario,
    SilentServer,
    Stream,
    by_check,
    deferred_scenario,
    dp_scenario,
    fixture_text,
    free_port,
    no_vllm_series_scenario,
    probe_report,
    sleeping_scenario,
    v0_metrics,
    v1_metrics,
    wedged_scenario,
)

from llmdoctor.collectors import vllm_endpoint
from llmdoctor.collectors.vllm_endpoint import collect_endpoint
from llmdoctor.engine.facts import Missing
from llmdoctor.engine.findings import Severity
from llmdoctor.parsers.vllm_metrics import requests_waiting

HTML_LOGIN = "<!DOCTYPE html><html><head><title>Sign in</title></head><body>SSO</body></html>"


def error_fixture(name: str) -> str:
    return fixture_text(f"errors/{name}")


def only(report, check_id: str, subject_part: str = ""):
    found = [f for f in by_check(report, check_id) if subject_part in (f.subject or "")]
    assert len(found) == 1, [(f.subject, f.summary) for f in by_check(report, check_id)]
    return found[0]


def no_ok_claims(report) -> None:
    """Checks that could not look must be skipped or failing, never 'ok'."""
    for f in report.findings:
        if f.check in ("vllm-queue", "vllm-kv-cache", "vllm-latency", "vllm-generation"):
            assert f.severity is not Severity.OK, f.summary


def test_idle_real_v0_server_is_healthy():
    # the real aibrix V0 capture (idle) + a working probe: every vLLM check ok
    with FakeVllmServer() as srv:
        report = probe_report(srv.url)
    assert report.status == "ok", [(f.check, f.summary) for f in report.findings]
    assert {f.check for f in report.findings} >= {
        "vllm-health",
        "vllm-queue",
        "vllm-kv-cache",
        "vllm-generation",
    }
    assert "'Paris. The'" in only(report, "vllm-generation").summary
    assert report.errors == []


def test_queue_building_between_scrapes_at_max_num_seqs_is_critical():
    # running pinned at max_num_seqs 256 while waiting grows 240 -> 603 (real stats-line values)
    scenario = Scenario(
        metrics=[
            v0_metrics(running=256, waiting=240, kv=0.417, generation_tokens=955),
            v0_metrics(running=256, waiting=603, kv=0.21, generation_tokens=1400),
        ]
    )
    with FakeVllmServer(scenario) as srv:
        report = probe_report(srv.url, settings={"max_num_seqs": 256})
    f = only(report, "vllm-queue")
    assert f.severity is Severity.CRITICAL and f.runbooks == ["queue-saturation"]
    assert "max_num_seqs 256" in f.summary and "240 → 603" in f.summary
    assert "growing" in f.summary
    assert f.subject == f"model {V0_MODEL}"
    assert any(
        "max_num_seqs: 256 per engine (from --max-num-seqs)" in e["text"] for e in f.evidence
    )


def test_queue_on_a_plateau_without_known_max_num_seqs_names_the_default():
    # no --max-num-seqs: running flat at 256 with a queue is a plateau; 256 is vLLM's default
    scenario = Scenario(
        metrics=[
            v1_metrics(
                "Qwen2-7B-Instruct", running=256, waiting=240, kv=0.417, generation_tokens=9
            ),
            v1_metrics(
                "Qwen2-7B-Instruct", running=250, waiting=184, kv=0.378, generation_tokens=444
            ),
        ],
        models=("Qwen2-7B-Instruct",),
    )
    with FakeVllmServer(scenario) as srv:
        report = probe_report(srv.url)
    f = only(report, "vllm-queue")
    assert f.severity is Severity.CRITICAL
    assert "plateau" in f.summary and "256 is vLLM's default" in f.summary
    assert "draining" in f.summary


def test_kv_cache_full_with_preemptions_rising_is_critical():
    # KV at 99% and 60 preemptions in the window: kv-cache-preemption, with the rate
    scenario = Scenario(
        metrics=[
            v1_metrics("m", running=40, waiting=30, kv=0.99, preemptions=120, generation_tokens=1),
            v1_metrics("m", running=41, waiting=35, kv=0.99, preemptions=180, generation_tokens=90),
        ],
        models=("m",),
    )
    with FakeVllmServer(scenario) as srv:
        report = probe_report(srv.url, settings={"max_num_seqs": 256})
    kv = only(report, "vllm-kv-cache")
    assert kv.severity is Severity.CRITICAL and kv.runbooks == ["kv-cache-preemption"]
    assert "99.0%" in kv.summary and "+60" in kv.summary and "/s)" in kv.summary
    queue = only(report, "vllm-queue")
    # waiting while running is far below max_num_seqs: the KV cache is the limit
    assert queue.severity is Severity.WARNING and queue.runbooks[0] == "kv-cache-preemption"


def test_dead_engine_health_500_probe_500_and_stuck_queue():
    # V1 up to 0.10: /health and requests answer 500 with an empty body once the engine died
    stuck = v1_metrics("m", running=0, waiting=12, generation_tokens=5000)
    scenario = Scenario(
        metrics=[stuck, stuck],
        models=("m",),
        routes={
            "GET /health": Reply(500, b"", ""),
            "POST /v1/completions": Reply(500, b"", ""),
        },
    )
    with FakeVllmServer(scenario) as srv:
        report = probe_report(srv.url)
    health = only(report, "vllm-health", "/health")
    assert health.severity is Severity.CRITICAL and health.runbooks == ["engine-dead"]
    gen = only(report, "vllm-generation")
    assert gen.severity is Severity.CRITICAL and gen.runbooks == ["engine-dead"]
    engine = only(report, "vllm-engine")
    assert engine.severity is Severity.CRITICAL and engine.runbooks == ["engine-dead"]
    assert "none running" in engine.summary and "no token was generated" in engine.summary
    assert "GET /health answers 500" in engine.summary
    assert only(report, "vllm-queue").severity is Severity.INFO  # not a capacity queue


def test_health_503_of_newer_vllm_is_engine_dead():
    # vLLM >= 0.11 answers 503 on /health when the engine is dead (PR #24897), and every
    # generation fails with it
    dead = {"GET /health": Reply(503, b"", ""), "POST /v1/completions": Reply(500, b"", "")}
    with FakeVllmServer(Scenario(routes=dead)) as srv:
        report = probe_report(srv.url)
    health = only(report, "vllm-health", "/health")
    assert health.severity is Severity.CRITICAL and "503" in health.summary
    assert health.runbooks == ["engine-dead"]
    # a 503 on /health while the generation is answered is not the engine's health
    with FakeVllmServer(Scenario(routes={"GET /health": Reply(503, b"", "")})) as srv:
        report = probe_report(srv.url)
    health = only(report, "vllm-health", "/health")
    assert health.severity is Severity.WARNING and health.runbooks == [], health.summary


def test_slow_generation_fails_business_health_even_when_health_is_200():
    # the first token takes 1.2 s: over --max-latency-ms 1000 although /health is fine
    scenario = Scenario(routes={"POST /v1/completions": Stream(first_delay=1.2)})
    with FakeVllmServer(scenario) as srv:
        report = probe_report(srv.url, timeout=4, max_latency_ms=1000)
    gen = only(report, "vllm-generation")
    assert gen.severity is Severity.CRITICAL
    assert gen.summary.startswith("business-level health failed")
    assert "while /health says 200" in gen.summary and "first token" in gen.summary
    # the idle capture's scrapes show 0 waiting: a slow first token, but not behind a queue
    assert "0 waiting" in gen.summary and "not a queue" in gen.summary
    assert "queue-saturation" not in gen.runbooks and gen.runbooks_unproven
    assert only(report, "vllm-health", "/health").severity is Severity.OK


def test_slow_health_endpoint_is_a_warning():
    # /health answers, but after 1.2 s (> 1000 ms)
    scenario = Scenario(routes={"GET /health": Reply(200, b"", "", delay=1.2)})
    with FakeVllmServer(scenario) as srv:
        report = probe_report(srv.url, timeout=4)
    health = only(report, "vllm-health", "/health")
    assert health.severity is Severity.WARNING and "slow" in health.summary
    # it answered: a dead engine answers 500/503 at once, so no engine-dead (a loaded server's
    # /health was this slow in the real KV-full drill)
    assert "engine-dead" not in health.runbooks


def test_blackholed_port_finishes_within_timeout_and_says_why():
    # accepts TCP and never answers: one critical finding, everything else skipped with reasons
    timeout = 1.5
    with SilentServer() as srv:
        start = time.monotonic()
        report = probe_report(srv.url, timeout=timeout, window=0.1)
        elapsed = time.monotonic() - start
    assert elapsed < timeout + 1.0, elapsed
    health = only(report, "vllm-health", "/health")
    assert health.severity is Severity.CRITICAL
    assert "no answer within 1.5s" in health.summary
    skipped = {s["check"]: s["reason"] for s in report.skipped}
    assert "no answer within" in skipped["vllm-queue"]
    assert "no answer within" in skipped["vllm-generation"]
    no_ok_claims(report)


def test_a_request_whose_thread_ran_late_is_still_sent_within_its_task():
    # t0 = 0, timeout 20: a request that starts on time has until 20; one whose thread a loaded
    # machine ran 19.99 s late gets half a timeout (on CI it was "not sent: no time left"), never
    # past 30, when its task is given up
    deadline = vllm_endpoint.request_deadline
    assert deadline(0.3, 20.0, 30.0, 20.0) == 20.0
    assert deadline(19.99, 20.0, 30.0, 20.0) == 29.99
    assert deadline(25.0, 20.0, 30.0, 20.0) == 30.0


def test_blackholed_port_with_model_given_times_the_probe_out():
    # --model skips /v1/models, so the probe itself hits the silent port and times out
    timeout = 1.0
    with SilentServer() as srv:
        start = time.monotonic()
        report = probe_report(srv.url, timeout=timeout, window=0.1, model="m")
        elapsed = time.monotonic() - start
    assert elapsed < timeout + 1.0, elapsed
    gen = only(report, "vllm-generation")
    assert gen.severity is Severity.CRITICAL and "no first token in time" in gen.summary


def test_only_the_completion_route_hangs():
    # health and metrics answer, the generation never does: business-level failure in ~timeout
    timeout = 1.0
    scenario = Scenario(routes={"POST /v1/completions": Blackhole()})
    with FakeVllmServer(scenario) as srv:
        start = time.monotonic()
        report = probe_report(srv.url, timeout=timeout, window=0.1)
        elapsed = time.monotonic() - start
    assert elapsed < timeout + 1.0, elapsed
    gen = only(report, "vllm-generation")
    assert gen.severity is Severity.CRITICAL and "(while /health says 200)" in gen.summary


def test_empty_generation_is_critical():
    # 200 and [DONE], but no text: the server is not useful to anyone
    scenario = Scenario(
        routes={"POST /v1/completions": Stream(tokens=["", ""], finish_reason="stop")}
    )
    with FakeVllmServer(scenario) as srv:
        report = probe_report(srv.url)
    gen = only(report, "vllm-generation")
    assert gen.severity is Severity.CRITICAL and "generated no text" in gen.summary
    assert "nan-or-garbage-output" in gen.runbooks


@pytest.mark.parametrize(
    "body",
    ["400-context-length-flat-vllm-issue12886.json", "400-context-length-nested-vllm-pr33425.json"],
)
def test_context_length_400_is_classified_from_the_error_body(body):
    # vLLM's real 400 bodies, flat (<= 0.10.0) and nested (>= 0.10.1)
    scenario = Scenario(routes={"POST /v1/completions": Reply(400, error_fixture(body))})
    with FakeVllmServer(scenario) as srv:
        report = probe_report(srv.url)
    gen = only(report, "vllm-generation")
    assert gen.severity is Severity.CRITICAL and gen.runbooks == ["context-length-exceeded"]
    assert any("maximum context length" in e["text"] for e in gen.evidence)


def test_model_name_not_served_is_reported_by_models_and_probe():
    # the client's model name is not in /v1/models and the completion answers vLLM's real 404
    scenario = Scenario(
        routes={
            "POST /v1/completions": Reply(
                404, error_fixture("404-model-not-found-flat-vllm-issue3486.json")
            )
        }
    )
    with FakeVllmServer(scenario) as srv:
        report = probe_report(srv.url, model="Qwen1.5-14B-Chat-GPTQ-Int8")
    models = only(report, "vllm-health", "/v1/models")
    assert models.severity is Severity.CRITICAL and models.runbooks == ["model-name-not-found"]
    assert "Qwen1.5-14B-Chat-GPTQ-Int8" in models.summary and V0_MODEL in models.summary
    gen = only(report, "vllm-generation")
    assert gen.runbooks == ["model-name-not-found"]


def test_chat_probe_without_chat_template_links_the_runbook():
    # --chat against a base model: vLLM's real 400 about the missing chat template
    body = error_fixture("400-chat-template-flat-agent-lightning-issue57.json")
    scenario = Scenario(routes={"POST /v1/chat/completions": Reply(400, body)})
    with FakeVllmServer(scenario) as srv:
        report = probe_report(srv.url, chat=True)
    gen = only(report, "vllm-generation")
    assert gen.runbooks == ["chat-template-missing"]
    assert srv.requests[-1][1] == "/v1/chat/completions" or any(
        r[1] == "/v1/chat/completions" for r in srv.requests
    )


def test_chat_probe_reads_streamed_deltas():
    # chat chunks carry text in choices[].delta.content after a role-only first chunk
    with FakeVllmServer() as srv:
        report = probe_report(srv.url, chat=True)
        sent = [body for method, path, body in srv.requests if path == "/v1/chat/completions"]
    gen = only(report, "vllm-generation")
    assert gen.severity is Severity.OK and "Paris" in gen.summary
    assert sent[0]["messages"][0]["role"] == "user" and sent[0]["temperature"] == 0


def test_html_200_everywhere_is_a_clear_finding_not_a_crash():
    # an SSO page answers every path with 200 text/html
    page = Reply(200, HTML_LOGIN, "text/html; charset=utf-8")
    routes = {
        "GET /health": page,
        "GET /metrics": page,
        "GET /v1/models": page,
        "GET /version": page,
        "POST /v1/completions": page,
    }
    with FakeVllmServer(Scenario(routes=routes)) as srv:
        report = probe_report(srv.url, model="m")
    health = only(report, "vllm-health", "/health")
    assert health.severity is Severity.WARNING and "HTML page" in health.summary
    metrics = only(report, "vllm-health", "/metrics")
    assert "HTML page" in metrics.summary
    gen = only(report, "vllm-generation")
    assert gen.severity is Severity.CRITICAL and gen.runbooks == []  # a login page: no timeout
    assert "Sign in" in gen.summary
    no_ok_claims(report)


def test_proxy_504_html_on_the_completion_is_a_gateway_timeout():
    # the real HAProxy 504 page in front of the server
    page = error_fixture("504-gateway-timeout-html-anything-llm-issue1722.html")
    scenario = Scenario(routes={"POST /v1/completions": Reply(504, page, "text/html")})
    with FakeVllmServer(scenario) as srv:
        report = probe_report(srv.url)
    gen = only(report, "vllm-generation")
    assert gen.runbooks == ["gateway-timeout"] and "504 Gateway Time-out" in gen.summary


def test_reset_in_the_middle_of_the_stream():
    # two tokens arrive, then a TCP reset: partial text kept; with /health at 200 a dead
    # engine and a proxy's cut are places to look, neither proven
    scenario = Scenario(routes={"POST /v1/completions": Stream(reset_after=2)})
    with FakeVllmServer(scenario) as srv:
        report = probe_report(srv.url)
    gen = only(report, "vllm-generation")
    assert gen.severity is Severity.CRITICAL and "broke off mid-stream" in gen.summary
    assert gen.runbooks == ["engine-dead", "gateway-timeout"] and gen.runbooks_unproven
    assert any("' Paris.'" in e["text"] for e in gen.evidence)


def test_reset_before_any_answer_on_health():
    # the connection is reset before a status line: unreachable, not a traceback
    with FakeVllmServer(Scenario(routes={"GET /health": ResetNow()})) as srv:
        report = probe_report(srv.url)
    health = only(report, "vllm-health", "/health")
    assert health.severity is Severity.CRITICAL and "reset" in health.summary


def test_dripping_metrics_stop_at_the_deadline():
    # /metrics sends one byte every 0.1 s: reading stops at the deadline
    timeout = 1.0
    scenario = Scenario(routes={"GET /metrics": Drip(interval=0.1)})
    with FakeVllmServer(scenario) as srv:
        start = time.monotonic()
        report = probe_report(srv.url, timeout=timeout, window=0.1)
        elapsed = time.monotonic() - start
    assert elapsed < timeout + 1.0, elapsed
    metrics = only(report, "vllm-health", "/metrics")
    assert "still arriving" in metrics.summary


def test_garbage_instead_of_an_event_stream():
    # 200 text/event-stream but no `data:` lines
    garbage = Reply(200, "hello\nworld\n", "text/event-stream")
    with FakeVllmServer(Scenario(routes={"POST /v1/completions": garbage})) as srv:
        report = probe_report(srv.url)
    gen = only(report, "vllm-generation")
    assert gen.severity is Severity.CRITICAL and "not an OpenAI" in gen.summary


def test_non_streamed_json_answer_is_still_read():
    # a proxy that drops "stream": the plain CompletionResponse still counts as a generation
    body = {
        "id": "cmpl-1",
        "object": "text_completion",
        "model": V0_MODEL,
        "choices": [{"index": 0, "text": " Paris.", "finish_reason": "stop"}],
    }
    scenario = Scenario(routes={"POST /v1/completions": Reply(200, json.dumps(body))})
    with FakeVllmServer(scenario) as srv:
        report = probe_report(srv.url)
    assert only(report, "vllm-generation").severity is Severity.OK


def test_json_that_is_no_completion_is_not_called_an_empty_generation():
    # another server answering the same JSON on every path: before, "the probe generated no
    # text" and the NaN-logits runbook
    other = Reply(200, json.dumps({"data": [{"id": V0_MODEL}]}))
    with FakeVllmServer(Scenario(routes={"POST /v1/completions": other})) as srv:
        report = probe_report(srv.url)
    gen = only(report, "vllm-generation")
    assert gen.severity is Severity.CRITICAL and "JSON that is not a completion" in gen.summary
    assert "nan-or-garbage-output" not in gen.runbooks, gen.runbooks


def test_connection_refused():
    # nothing listens: vLLM exited (or wrong port)
    report = probe_report(f"http://127.0.0.1:{free_port()}", timeout=1)
    health = only(report, "vllm-health", "/health")
    assert health.severity is Severity.CRITICAL and "connection refused" in health.summary
    no_ok_claims(report)


def test_api_key_required_gets_a_hint():
    # --api-key guards /v1/*: 401 {"error": "Unauthorized"}
    denied = Reply(401, json.dumps({"error": "Unauthorized"}))
    routes = {"GET /v1/models": denied, "POST /v1/completions": denied}
    with FakeVllmServer(Scenario(routes=routes)) as srv:
        report = probe_report(srv.url)
    models = only(report, "vllm-health", "/v1/models")
    assert "LLMDOCTOR_API_KEY" in models.summary


def test_two_models_are_judged_separately():
    # one server (or router) exposing two model_name series: findings per model
    m0 = v1_metrics("busy", running=256, waiting=50) + v1_metrics("idle", help_lines=False)
    m1 = v1_metrics("busy", running=256, waiting=80) + v1_metrics("idle", help_lines=False)
    scenario = Scenario(metrics=[m0, m1], models=("busy", "idle"))
    with FakeVllmServer(scenario) as srv:
        report = probe_report(srv.url, settings={"max_num_seqs": 256})
    assert only(report, "vllm-queue", "busy").severity is Severity.CRITICAL
    assert only(report, "vllm-queue", "idle").severity is Severity.OK


def test_latency_by_phase_blames_prefill_when_queueing_is_fast():
    # queue p95 ~20 ms but TTFT p95 ~4 s: prefill, not the queue
    before = {
        "vllm:request_queue_time_seconds": [0.01] * 50,
        "vllm:time_to_first_token_seconds": [0.1] * 50,
        "vllm:inter_token_latency_seconds": [0.02] * 50,
    }
    inside = {
        "vllm:request_queue_time_seconds": [0.02] * 20,
        "vllm:time_to_first_token_seconds": [4.0] * 20,
        "vllm:inter_token_latency_seconds": [0.03] * 20,
    }
    after = {k: before[k] + inside[k] for k in before}
    scenario = Scenario(
        metrics=[v1_metrics("m", histograms=before), v1_metrics("m", histograms=after)],
        models=("m",),
    )
    with FakeVllmServer(scenario) as srv:
        report = probe_report(srv.url)
    lat = only(report, "vllm-latency")
    assert lat.severity is Severity.WARNING
    assert lat.summary.startswith("slow time to first token") and "prefill" in lat.summary


def test_latency_by_phase_looks_at_queueing_first():
    # both queue time and TTFT are slow: the queue is named first
    inside = {
        "vllm:request_queue_time_seconds": [12.0] * 20,
        "vllm:time_to_first_token_seconds": [12.5] * 20,
    }
    scenario = Scenario(
        metrics=[v1_metrics("m"), v1_metrics("m", histograms=inside)], models=("m",)
    )
    with FakeVllmServer(scenario) as srv:
        report = probe_report(srv.url)
    lat = only(report, "vllm-latency")
    assert lat.summary.startswith("slow queue time") and lat.runbooks == ["queue-saturation"]
    assert lat.severity is Severity.CRITICAL  # p95 >= 5x the 1 s threshold


def test_metrics_over_the_size_cap_are_refused(monkeypatch):
    # a /metrics page larger than the cap is not read whole
    monkeypatch.setattr(vllm_endpoint, "METRICS_CAP", 1000)
    with FakeVllmServer() as srv:
        values = collect_endpoint(srv.url, requests.Session(), timeout=2, window=0)
    assert isinstance(values["vllm/metrics-0.txt"], Missing)
    assert "cap" in values["vllm/metrics-0.txt"].reason


def test_collect_endpoint_through_a_pod_proxy_path_prefix():
    # the Kubernetes collector passes a pod-proxy base URL; paths are appended to it
    prefix = "/api/v1/namespaces/serving/pods/vllm-0:8000/proxy"
    with FakeVllmServer(Scenario(prefix=prefix)) as srv:
        values = collect_endpoint(
            srv.url + prefix, requests.Session(), timeout=2, window=0.1, max_latency_ms=500
        )
    assert values["vllm/health.json"]["status"] == 200
    assert values["vllm/metrics-0.txt"].startswith("# TYPE vllm:cache_config_info gauge")
    assert isinstance(values["vllm/metrics-1.txt"], str)
    assert [s["file"] for s in values["vllm/scrapes.json"]] == ["metrics-0.txt", "metrics-1.txt"]
    assert values["vllm/probe.json"]["max_latency_ms"] == 500
    assert values["vllm/version.json"] == {"version": "0.7.1"}


def test_window_zero_takes_a_single_scrape():
    # --window 0: one scrape, the second is recorded as not taken
    with FakeVllmServer() as srv:
        values = collect_endpoint(srv.url, requests.Session(), timeout=2, window=0)
    assert isinstance(values["vllm/metrics-1.txt"], Missing)
    assert len(values["vllm/scrapes.json"]) == 1


def test_second_scrape_waits_for_the_probe_so_an_idle_window_holds_a_request():
    # the generation takes 1.2 s, the window is 0.2 s: the second scrape follows the probe's
    # answer (on a loaded real server the probe outlived the window and latency went unmeasured)
    scenario = Scenario(routes={"POST /v1/completions": Stream(first_delay=1.2)})
    with FakeVllmServer(scenario) as srv:
        values = collect_endpoint(srv.url, requests.Session(), timeout=4, window=0.2)
    first, second = values["vllm/scrapes.json"]
    assert second["at"] - first["at"] >= 1.0, values["vllm/scrapes.json"]
    assert values["vllm/probe.json"]["status"] == 200


def test_second_scrape_keeps_the_window_when_requests_wait():
    # a queue in the first scrape: our request would answer only once the queue ahead of it
    # drained, so the second scrape is taken at the window and still sees the queue
    queued = v1_metrics("m", running=4, waiting=12, generation_tokens=100)
    scenario = Scenario(
        metrics=[queued, queued],
        models=("m",),
        routes={"POST /v1/completions": Stream(first_delay=1.5)},
    )
    with FakeVllmServer(scenario) as srv:
        values = collect_endpoint(srv.url, requests.Session(), timeout=4, window=0.2)
    first, second = values["vllm/scrapes.json"]
    assert second["at"] - first["at"] < 1.0, values["vllm/scrapes.json"]
    assert values["vllm/probe.json"]["status"] == 200


def test_requests_waiting_adds_every_model_and_engine():
    page = v1_metrics("a", waiting=3) + v1_metrics("b", engine="1", waiting=2, help_lines=False)
    assert requests_waiting(page) == 5
    assert requests_waiting(v1_metrics("a", running=4)) == 0
    assert requests_waiting("not prometheus {") == 0


def test_second_scrape_gives_up_on_a_hung_probe_at_the_timeout():
    timeout = 1.0
    scenario = Scenario(routes={"POST /v1/completions": Blackhole()})
    with FakeVllmServer(scenario) as srv:
        start = time.monotonic()
        values = collect_endpoint(srv.url, requests.Session(), timeout=timeout, window=0.1)
        elapsed = time.monotonic() - start
    assert len(values["vllm/scrapes.json"]) == 2 and elapsed < 1.5 * timeout + 0.5, elapsed


def test_metrics_with_gauges_only_say_there_is_no_token_counter_not_a_reset():
    # a proxy or an old build exposing the queue gauges alone: nothing "went down"
    page = (
        'vllm:num_requests_running{model_name="m"} 0.0\n'
        'vllm:num_requests_waiting{model_name="m"} 0.0\n'
        'vllm:gpu_cache_usage_perc{model_name="m"} 0.1\n'
    )
    with FakeVllmServer(Scenario(metrics=[page, page], models=("m",))) as srv:
        report = probe_report(srv.url)
    (engine,) = by_check(report, "vllm-engine")
    assert "no generated-token counter" in engine.summary, engine.summary
    assert "went down" not in engine.summary and "restarted" not in engine.summary


def test_probe_request_is_deterministic_and_small():
    # temperature 0, a small max_tokens, streamed
    with FakeVllmServer() as srv:
        collect_endpoint(srv.url, requests.Session(), timeout=2, window=0)
        sent = next(b for m, p, b in srv.requests if p == "/v1/completions")
    assert sent["temperature"] == 0 and sent["max_tokens"] <= 16 and sent["stream"] is True
    assert sent["model"] == V0_MODEL  # the first id of the real /v1/models capture


def test_redirect_to_another_host_is_reported_not_followed():
    # an SSO proxy bounces /v1/models to a login host: said, not visited
    login = Reply(302, b"", "", headers={"Location": "https://sso.example.invalid/login"})
    with FakeVllmServer(Scenario(routes={"GET /v1/models": login})) as srv:
        report = probe_report(srv.url)
    models = only(report, "vllm-health", "/v1/models")
    assert "redirect to https://sso.example.invalid/login" in models.summary
    assert "not followed" in models.summary


def test_same_origin_redirect_is_followed():
    # old vLLM builds redirected /metrics with a 307; same host, so follow it
    moved = Reply(307, b"", "", headers={"Location": "/prometheus"})
    text = v0_metrics(running=3)
    metrics = Reply(200, text, "text/plain; version=0.0.4")
    routes = {"GET /metrics": moved, "GET /prometheus": metrics}
    with FakeVllmServer(Scenario(routes=routes)) as srv:
        values = collect_endpoint(srv.url, requests.Session(), timeout=2, window=0)
    assert values["vllm/metrics-0.txt"] == text


def test_a_same_origin_redirect_to_a_login_page_says_where_it_led():
    # a hostile pass: /metrics 302 → /login (HTML) read "answered 200 with an HTML page", the
    # redirect unsaid; the query of the Location (a token) is not repeated
    moved = Reply(302, b"", "", headers={"Location": "/login?next=/metrics&token=s3cret"})
    page = Reply(200, "<html><title>Sign in</title></html>", "text/html")
    routes = {"GET /metrics": moved, "GET /login": page}
    with FakeVllmServer(Scenario(routes=routes)) as srv:
        report = probe_report(srv.url)
    metrics = only(report, "vllm-health", "/metrics")
    assert "HTML page after a redirect to /login?…" in metrics.summary, metrics.summary
    assert "s3cret" not in metrics.summary


def test_garbage_metrics_are_reported_as_unusable():
    # 200 text/plain that is not Prometheus text: the /metrics finding says why
    junk = Reply(200, "\x00\x01 not metrics at all {{{\n", "text/plain")
    with FakeVllmServer(Scenario(routes={"GET /metrics": junk})) as srv:
        report = probe_report(srv.url)
    metrics = only(report, "vllm-health", "/metrics")
    assert metrics.severity is Severity.WARNING and "not usable" in metrics.summary
    assert "vllm-queue" in {s["check"] for s in report.skipped}


# --- scripted scenarios of issue 13 over HTTP: DP=4, sleep, deferred, wedged, no vllm series ---


def test_dp4_healthy_server_is_not_critical():
    with FakeVllmServer(dp_scenario()) as srv:
        report = probe_report(srv.url, settings={"max_num_seqs": 256})
    assert report.status == "ok", [(f.check, f.summary) for f in report.findings]
    assert "4 engines" in only(report, "vllm-queue").summary


def test_dp4_with_one_engine_saturated_is_critical_for_that_engine():
    with FakeVllmServer(dp_scenario(saturated="3")) as srv:
        report = probe_report(srv.url, settings={"max_num_seqs": 256})
    queue = only(report, "vllm-queue")
    assert queue.severity is Severity.CRITICAL
    assert queue.summary.startswith("engine 3 of 4: queue saturated: running 256 → 256")


def test_sleeping_server_is_reported_as_asleep_not_stuck():
    # RL rollout pause: sleep level 1, two requests waiting; the probe hangs until woken
    with FakeVllmServer(sleeping_scenario()) as srv:
        report = probe_report(srv.url, timeout=1.0)
    assert report.status != "critical", [(f.check, f.summary) for f in report.findings]
    engine = only(report, "vllm-engine")
    assert engine.severity is Severity.INFO and "asleep" in engine.summary
    assert "stuck" not in " ".join(f.summary for f in report.findings)


def test_deferred_waiting_server_is_not_blamed_on_capacity():
    with FakeVllmServer(deferred_scenario()) as srv:
        report = probe_report(srv.url, settings={"max_num_seqs": 256})
    queue = only(report, "vllm-queue")
    assert queue.severity is Severity.OK and "25 more deferred" in queue.summary


def test_wedged_engine_health_200_counters_frozen_probe_times_out():
    # /health 200 throughout; 6 running, tokens and steps frozen; the probe gets nothing
    with FakeVllmServer(wedged_scenario()) as srv:
        report = probe_report(srv.url, timeout=1.0)
    engine = only(report, "vllm-engine")
    assert engine.severity is Severity.CRITICAL and engine.runbooks == ["engine-wedged"]
    gen = only(report, "vllm-generation")
    assert gen.severity is Severity.CRITICAL and gen.runbooks == ["engine-wedged"]
    assert "while /health says 200" in gen.summary
    assert only(report, "vllm-health", "/health").severity is Severity.OK
    assert report.findings[0].check == "vllm-engine"  # the cause before the symptom


def test_metrics_without_any_vllm_series_says_so():
    # another exporter answers on the port: python_* series only
    with FakeVllmServer(no_vllm_series_scenario()) as srv:
        report = probe_report(srv.url)
    f = only(report, "vllm-health", "/metrics")
    assert (
        f.severity is Severity.WARNING
        and "no vllm: series in /metrics: it answers with" in f.summary
    )
    skipped = {s["check"] for s in report.skipped}
    assert {"vllm-queue", "vllm-engine", "vllm-kv-cache"} <= skipped
