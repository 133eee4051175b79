"""The vLLM checks as pure functions of facts: the branches the HTTP scenarios do not reach."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from example_bundles import bundle, bundle_report, by_check, check_errors, diagnose_json, skipped
from vllm_server import (
    EngineState,
    fixture_text,
    v0_early_text,
    v0_metrics,
    v1_metrics,
    v1_text,
)

from llmdoctor.collectors.network_errors import NOT_SENT
from llmdoctor.engine.derive import derive_all
from llmdoctor.engine.facts import Facts
from llmdoctor.engine.findings import Finding, Severity
from llmdoctor.engine.registry import all_checks
from llmdoctor.engine.runner import run_checks

VLLM_CHECKS = [c for c in all_checks() if c.scope == "vllm"]
EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "bundles"


def facts_with(*metrics: str, seconds: float = 5.0, docs: dict | None = None, **extra) -> Facts:
    """Facts of the scrapes, `seconds` apart; `docs` by fact key, `extra` as a__b -> a/b."""
    facts = Facts()
    for key, value in (docs or {}).items():
        facts.set(key, value)
    for i, text in enumerate(metrics):
        facts.set(f"vllm/metrics-{i}.txt", text)
    facts.set(
        "vllm/scrapes.json",
        [{"file": f"metrics-{i}.txt", "at": 100.0 + i * seconds} for i in range(len(metrics))],
    )
    for key, value in extra.items():
        facts.set(key.replace("__", "/"), value)
    derive_all(facts)
    return facts


def findings(facts: Facts, check_id: str) -> list:
    report = run_checks(facts, [c for c in VLLM_CHECKS if c.id == check_id], "t")
    assert not report.errors, report.errors
    return report.findings


def one(facts: Facts, check_id: str):
    (f,) = findings(facts, check_id)
    return f


def _health(**doc) -> Finding:
    facts = Facts()
    facts.set("vllm/health.json", {"status": 200, "latency_ms": 2.0, "error": None, **doc})
    return next(f for f in findings(facts, "vllm-health") if f.subject == "endpoint /health")


def test_a_health_200_with_binary_data_is_not_a_healthy_vllm():
    # a hostile pass pointed probe at a port answering bytes: it read "GET /health 200 ✓"
    f = _health(body="\x00\x01\ufffd\ufffdPK\x03\x04\x14\x00")
    assert f.severity is Severity.WARNING and "binary data" in f.summary, f.summary
    assert "\\x00\\x01" in f.summary  # shown escaped, never raw control bytes
    # a text body (a proxy's "OK", TGI's JSON) stays a 200; an empty one is vLLM's
    assert _health(body="OK").severity is Severity.OK
    assert _health().severity is Severity.OK


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        ("the response was still arriving after 3.0s; stopped reading", "timeout"),
        ("connection reset", "reset"),
    ],
)
def test_a_health_200_whose_answer_did_not_complete_is_no_check_mark(error, kind):
    # a server dripping one byte every 0.5 s read "GET /health is slow: 3008 ms" (a warning)
    f = _health(error=error, error_kind=kind, latency_ms=3008.0)
    assert f.severity is Severity.CRITICAL and "did not complete" in f.summary, f.summary
    assert f.runbooks == ["engine-wedged", "gateway-timeout"] and f.runbooks_unproven


def test_queue_in_a_single_scrape_asks_for_a_second():
    # one scrape cannot tell a burst from saturation
    f = one(facts_with(v1_metrics("m", running=256, waiting=40)), "vllm-queue")
    assert f.severity is Severity.WARNING and "--window" in f.summary
    # a place to look, not a proven saturation: no "Request queue saturated" headline over it
    assert f.runbooks == ["queue-saturation"] and f.runbooks_unproven


def test_waiting_with_nothing_running_in_one_scrape_is_a_warning_not_a_verdict():
    # a stuck engine needs two scrapes and no generated tokens; the queue check leaves it alone
    facts = facts_with(v1_metrics("m", running=0, waiting=9))
    f = one(facts, "vllm-engine")
    assert f.severity is Severity.WARNING and f.runbooks == ["engine-wedged"]
    assert one(facts, "vllm-queue").severity is Severity.INFO


def test_waiting_with_nothing_running_but_tokens_generated_is_not_stuck():
    # tokens advanced between the scrapes: requests came and went, the engine works
    f = one(
        facts_with(
            v1_metrics("m", running=0, waiting=3, generation_tokens=100),
            v1_metrics("m", running=0, waiting=2, generation_tokens=900),
        ),
        "vllm-queue",
    )
    assert f.runbooks != ["engine-dead"]


def test_a_queue_seen_in_one_scrape_of_two_is_info():
    # 0 -> 5 waiting: a burst, not sustained
    f = one(
        facts_with(v1_metrics("m", running=10, waiting=0), v1_metrics("m", running=12, waiting=5)),
        "vllm-queue",
    )
    assert f.severity is Severity.INFO


def queue_between(*scrapes: tuple[int, int, float], max_num_seqs: int):
    """vllm-queue's finding for scrapes of (running, waiting, KV usage) of model m."""
    texts = [v1_metrics("m", running=r, waiting=w, kv=kv) for r, w, kv in scrapes]
    return one(facts_with(*texts, settings__max_num_seqs=max_num_seqs), "vllm-queue")


def test_queue_below_the_ceiling_without_kv_pressure_names_the_token_budget():
    # running 120 of 256, KV at 30%, a steady queue: prefill budget or bursts
    f = queue_between((120, 50, 0.3), (90, 50, 0.3), max_num_seqs=256)
    assert f.severity is Severity.WARNING and "max_num_batched_tokens" in f.summary


def test_a_batch_reaching_the_ceiling_while_requests_wait_is_saturation_not_below_it():
    # before: "running (3 → 4) is below max_num_seqs 4"
    f = queue_between((3, 14, 0.3), (4, 10, 0.3), max_num_seqs=4)
    assert f.severity is Severity.CRITICAL and "running 3 → 4 reaching max_num_seqs 4" in f.summary
    assert "below" not in f.summary and f.runbooks == ["queue-saturation"]


def test_a_kv_usage_outside_0_to_1_is_no_reading_for_the_queue_either():
    # vllm-kv-cache ignores 1.5 as "not read as KV usage"; the queue finding said "the KV cache
    # is also full (150.0%)"
    f = queue_between((4, 14, 0.4), (4, 10, 1.5), max_num_seqs=4)
    assert "150" not in f.summary and "KV cache is also full" not in f.summary, f.summary


def test_max_num_seqs_from_the_pod_spec_is_used_and_settings_win():
    # serving/args (from the pod spec) gives 128; --max-num-seqs 256 overrides it
    metrics = [v1_metrics("m", running=128, waiting=10), v1_metrics("m", running=128, waiting=20)]
    spec = {"max_num_seqs": 128}
    f = one(facts_with(*metrics, serving__args=spec), "vllm-queue")
    assert f.severity is Severity.CRITICAL and "max_num_seqs 128" in f.summary
    f = one(facts_with(*metrics, serving__args=spec, settings__max_num_seqs=256), "vllm-queue")
    assert f.severity is Severity.WARNING  # 128 running is below 256


def kv_between(first: dict, second: dict, also: str = ""):
    """vllm-kv-cache's finding on two scrapes of model m, 5 s apart (`also`: more series)."""
    return one(
        facts_with(v1_metrics("m", **first) + also, v1_metrics("m", **second) + also),
        "vllm-kv-cache",
    )


def test_kv_full_without_preemptions_is_a_warning_only_when_requests_wait():
    # 97% used, nobody evicted in the window: with requests waiting for blocks, a warning
    f = kv_between(
        {"kv": 0.97, "preemptions": 5, "waiting": 3}, {"kv": 0.96, "preemptions": 5, "waiting": 2}
    )
    assert f.severity is Severity.WARNING and "97.0%" in f.summary and "3 → 2" in f.summary
    # with nothing waiting, the running requests fill it as vLLM means them to: a note
    f = kv_between(
        {"kv": 0.97, "preemptions": 5, "running": 4}, {"kv": 0.96, "preemptions": 5, "running": 3}
    )
    assert f.severity is Severity.INFO and f.runbooks == ["kv-cache-preemption"]
    assert "0 waiting" in f.summary and "headroom is gone" in f.summary
    # ... but nothing running holds it either: blocks not freed
    f = kv_between({"kv": 0.97, "preemptions": 5}, {"kv": 0.96, "preemptions": 5})
    assert f.severity is Severity.WARNING and "no request running or waiting" in f.summary


def test_preemptions_rising_with_room_in_the_cache_is_a_warning():
    # preemptions happened in the window even though usage now reads 60%
    f = kv_between({"kv": 0.6, "preemptions": 5}, {"kv": 0.6, "preemptions": 9})
    assert f.severity is Severity.WARNING and "+4" in f.summary and "0.80/s" in f.summary
    # the headline names a full cache: the finding says why that holds at 60 %
    assert "ran out of free blocks between the scrapes (it read 60.0% at most" in f.summary


def test_preemptions_before_a_quiet_window_are_told_with_the_server_age():
    # no preemption between the scrapes, but 5 since start: the cache has run full before; a
    # quiet 5 s is no proof the pressure is gone (a real drill's window missed a burst)
    started = "process_start_time_seconds 40.0\n"
    f = kv_between({"kv": 0.6, "preemptions": 5}, {"kv": 0.7, "preemptions": 5}, started)
    assert f.severity is Severity.INFO and f.runbooks == ["kv-cache-preemption"]
    assert "no preemptions over the 5.0 s" in f.summary
    assert "5 since the server started 65 s ago" in f.summary
    # without the process's start time, the count alone
    f = kv_between({"kv": 0.6, "preemptions": 5}, {"kv": 0.6, "preemptions": 5})
    assert f.severity is Severity.INFO and "5 since the server started:" in f.summary


def without_preemptions(text: str) -> str:
    return "".join(line for line in text.splitlines(True) if "num_preemptions_total" not in line)


def test_preemptions_seen_in_one_scrape_only_are_told_the_same_way():
    # one scrape: the same INFO as a quiet window (not a check mark for "4 since start")
    f = one(facts_with(v1_metrics("m", kv=0.5, preemptions=4)), "vllm-kv-cache")
    assert f.severity is Severity.INFO and "no rate of preemptions (one scrape)" in f.summary
    # two scrapes, the counter only in the second: say so, not "a rate needs two scrapes"
    f = one(
        facts_with(
            without_preemptions(v1_metrics("m", kv=0.5)), v1_metrics("m", kv=0.5, preemptions=4)
        ),
        "vllm-kv-cache",
    )
    assert f.severity is Severity.INFO and "missing from one scrape" in f.summary


def test_an_unreadable_preemption_counter_is_no_check_mark():
    # NaN or below 0: exposed, yet no count; never "counter not exposed" under a check mark
    for value in ("NaN", "-3"):
        text = without_preemptions(v1_metrics("m", kv=0.5))
        text += f'vllm:num_preemptions_total{{engine="0",model_name="m"}} {value}\n'
        f = one(facts_with(text, text), "vllm-kv-cache")
        assert f.severity is Severity.INFO and "preemptions not judged" in f.summary, value


def test_a_server_that_never_preempted_is_ok():
    f = kv_between({"kv": 0.6, "preemptions": 0}, {"kv": 0.6, "preemptions": 0})
    assert f.severity is Severity.OK and f.summary.startswith("KV cache at 60.0%, no preemptions")


def test_v0_swapped_requests_are_mentioned():
    # V0 swaps preempted sequences to CPU: num_requests_swapped
    f = one(
        facts_with(v0_metrics(kv=0.99, swapped=7), v0_metrics(kv=0.99, swapped=7)),
        "vllm-kv-cache",
    )
    assert "7 requests swapped to CPU" in f.summary


def test_no_request_finished_in_the_window_is_info_not_ok():
    # histograms exist but nothing new was observed: latency is unknown, not fine
    hist = {"vllm:time_to_first_token_seconds": [0.1] * 5}
    f = one(
        facts_with(v1_metrics("m", histograms=hist), v1_metrics("m", histograms=hist)),
        "vllm-latency",
    )
    assert f.severity is Severity.INFO and "not measured" in f.summary


def test_latency_from_a_single_scrape_is_since_start_and_only_info():
    # one scrape: quantiles cover the server's whole life, so they only inform
    hist = {"vllm:request_queue_time_seconds": [30.0] * 5}
    f = one(facts_with(v1_metrics("m", histograms=hist)), "vllm-latency")
    assert f.severity is Severity.INFO and "since the server started" in f.summary
    # ... and its evidence says where it was read: one scrape, no window (it said vllm/window)
    sources = [e["source"] for e in f.evidence]
    assert sources and all(s == "vllm/metrics-0.txt (since the server started)" for s in sources)


def test_slow_decode_with_enforce_eager_links_that_runbook():
    # ITL p95 ~0.9 s with --enforce-eager in the pod spec
    inside = {"vllm:inter_token_latency_seconds": [0.9] * 20}
    f = one(
        facts_with(
            v1_metrics("m"),
            v1_metrics("m", histograms=inside),
            serving__args={"enforce_eager": True},
        ),
        "vllm-latency",
    )
    assert f.summary.startswith("slow inter-token latency")
    assert "enforce-eager-in-production" in f.runbooks


def test_real_docs_capture_ttft_is_within_thresholds():
    # the design doc's 140 requests, TTFT p95 ~70 ms (since start)
    facts = facts_with(fixture_text("metrics_v1-early_vllmdocs-design_llama31-8b_trimmed.txt"))
    f = one(facts, "vllm-latency")
    assert f.severity is Severity.OK and "time to first token p95" in f.summary


def test_slow_first_token_reads_the_waiting_gauges_before_blaming_prefill():
    slow_ttft = {"vllm:time_to_first_token_seconds": [4.0] * 10}
    # nothing waits in either scrape: the first token's time goes to prefill
    idle = facts_with(
        v1_metrics("m", running=2, waiting=0),
        v1_metrics("m", running=2, waiting=0, histograms=slow_ttft),
    )
    f = one(idle, "vllm-latency")
    assert "prefill is slow" in f.summary and "queue-saturation" not in f.runbooks
    # requests wait in both scrapes and vLLM's queue time holds most of the wait
    queued = {**slow_ttft, "vllm:request_queue_time_seconds": [3.5] * 10}
    busy = facts_with(
        v1_metrics("m", running=4, waiting=9),
        v1_metrics("m", running=4, waiting=7, histograms=queued),
    )
    f = one(busy, "vllm-latency")
    assert f.summary.startswith("slow queue time"), f.summary
    # the gauges show the queue while the queue-time histogram is near zero (vLLM 0.32)
    hidden = {**slow_ttft, "vllm:request_queue_time_seconds": [0.00003] * 10}
    busy = facts_with(
        v1_metrics("m", running=4, waiting=9),
        v1_metrics("m", running=4, waiting=7, histograms=hidden),
    )
    f = one(busy, "vllm-latency")
    assert "requests waited in every scrape (waiting 9 → 7)" in f.summary, f.summary
    assert "(vLLM's own queue-time p95 reads < 1 ms)" in f.summary
    assert f.runbooks == ["queue-saturation"] and "prefill is slow" not in f.summary


def test_a_phase_not_measured_is_named_and_ticked_only_when_nothing_waits():
    # a request finished in the window, none got its first token in it
    before = {"vllm:time_to_first_token_seconds": [0.05], "vllm:e2e_request_latency_seconds": []}
    after = {"vllm:time_to_first_token_seconds": [0.05], "vllm:e2e_request_latency_seconds": [0.4]}
    idle = facts_with(
        v1_metrics("m", running=1, waiting=0, histograms=before),
        v1_metrics("m", running=0, waiting=0, histograms=after),
    )
    f = one(idle, "vllm-latency")
    assert f.severity is Severity.OK, f.summary
    assert f.summary.endswith("; time to first token not measured (no new observations)")
    busy = facts_with(
        v1_metrics("m", running=4, waiting=20, histograms=before),
        v1_metrics("m", running=4, waiting=20, histograms=after),
    )
    f = one(busy, "vllm-latency")
    assert f.severity is Severity.INFO and f.summary.startswith("time to first token not measured")


def health_facts(health: dict, extra: dict | None = None) -> Facts:
    facts = Facts()
    facts.set("vllm/health.json", health)
    for key, value in (extra or {}).items():
        facts.set(key, value)
    return facts


def test_requests_llmdoctor_never_sent_say_nothing_of_the_server():
    # `probe --timeout 0.1` on a loaded machine: the budget ran out before /health, /v1/models
    # and /metrics were sent; before, "Root cause vLLM engine died" with "after None ms"
    health = {"status": None, "latency_ms": None, "error": NOT_SENT, "error_kind": "not-sent"}
    facts = health_facts(health)
    facts.mark_missing("vllm/models.json", f"GET /v1/models: {NOT_SENT}")
    facts.mark_missing("vllm/metrics-0.txt", f"GET /metrics: {NOT_SENT}")
    found = findings(facts, "vllm-health")
    assert [f.severity for f in found] == [Severity.INFO] * 3, [f.summary for f in found]
    assert not any(f.runbooks for f in found)
    assert found[0].summary.startswith("/health not checked: not sent: llmdoctor's --timeout")
    assert found[0].evidence[0]["text"].startswith("GET /health: no status; not sent")


@pytest.mark.parametrize(
    "health,severity,runbook",
    [
        (
            {"status": 502, "latency_ms": 3.0, "error": "HTTP 502"},
            Severity.CRITICAL,
            "gateway-timeout",
        ),
        (
            {"status": 404, "latency_ms": 3.0, "error": "HTTP 404: Not Found"},
            Severity.WARNING,
            None,
        ),
        (
            {
                "status": None,
                "latency_ms": 1.0,
                "error": "connection refused",
                "error_kind": "connect",
            },
            Severity.CRITICAL,
            "engine-dead",
        ),
    ],
)
def test_health_status_table(health, severity, runbook):
    # proxy errors, wrong path, nothing listening
    f = next(
        f for f in findings(health_facts(health), "vllm-health") if f.subject == "endpoint /health"
    )
    assert f.severity is severity
    assert (runbook in f.runbooks) if runbook else f.runbooks == []


def test_expected_model_from_the_pod_spec_served_model_name():
    # --served-model-name in the pod spec, /v1/models lists something else
    models = json.loads(fixture_text("models_v0-0.7_aibrix_lora.json"))
    facts = health_facts(
        {"status": 200, "latency_ms": 2.0, "error": None},
        {"vllm/models.json": models, "serving/args": {"served_model_names": ["qwen-coder"]}},
    )
    f = next(f for f in findings(facts, "vllm-health") if f.subject == "endpoint /v1/models")
    assert f.severity is Severity.CRITICAL and "--served-model-name in the pod spec" in f.summary


def test_lora_adapter_name_counts_as_served():
    # the real capture lists lora-1: asking for it is fine
    models = json.loads(fixture_text("models_v0-0.7_aibrix_lora.json"))
    facts = health_facts(
        {"status": 200, "latency_ms": 2.0, "error": None},
        {"vllm/models.json": models, "settings/model": "lora-1"},
    )
    f = next(f for f in findings(facts, "vllm-health") if f.subject == "endpoint /v1/models")
    assert f.severity is Severity.OK and "max_model_len 32768" in f.evidence[0]["text"]


def test_a_bundle_without_vllm_files_skips_every_vllm_check():
    # the crash-loop bundles have no vllm/ folder: skipped, never ok
    facts = Facts()
    facts.mark_missing("vllm/", "not in the bundle")
    derive_all(facts)
    report = run_checks(facts, VLLM_CHECKS, "bundle")
    assert report.findings == [] and len(report.skipped) == len(VLLM_CHECKS)


@pytest.mark.parametrize(
    "probe,runbook",
    [
        (
            {
                "status": 500,
                "error": "HTTP 500: ",
                "error_body": {
                    "error": {
                        "message": "EngineCore encountered an issue. See stack trace (above) for the root cause.",
                        "type": "InternalServerError",
                        "code": 500,
                    }
                },
            },
            "engine-dead",
        ),
        (
            {
                "status": 200,
                "error": "error event in the stream",
                "error_kind": "stream-error",
                "error_body": {
                    "error": {
                        "message": "The decoder prompt (length 44) is longer than the maximum model length of 16."
                    }
                },
            },
            "context-length-exceeded",
        ),
        ({"status": None, "error": "connection refused", "error_kind": "connect"}, "engine-dead"),
    ],
)
def test_generation_error_classification(probe, runbook):
    # error text and body decide the runbook, whatever the transport said
    probe = {"request": {"path": "/v1/completions", "model": "m", "max_tokens": 16}, **probe}
    facts = Facts()
    facts.set("vllm/probe.json", probe)
    f = one(facts, "vllm-generation")
    assert f.severity is Severity.CRITICAL and runbook in f.runbooks


# --- per engine, sleep, deferred waiting, wedged: each check on each vLLM generation ----------

GENERATIONS = ["v0-0.4", "v0", "0.8", "0.10", "0.11+"]
HEALTH_200 = {"status": 200, "latency_ms": 2.0, "error": None}


def scrape(release: str, engines: dict[str, EngineState], **kw) -> str:
    """One /metrics page of the given generation (V0: the real aibrix capture, one engine)."""
    if release == "v0-0.4":
        (state,) = engines.values()
        return v0_early_text("m", state)
    if release == "v0":
        (state,) = engines.values()
        return v0_metrics(
            running=state.running,
            waiting=state.waiting,
            kv=state.kv,
            preemptions=state.preemptions,
            prompt_tokens=state.prompt_tokens,
            generation_tokens=state.generation_tokens,
            histograms=state.histograms,
        )
    return v1_text("m", engines, release=release, **kw)


def two_scrapes(release: str, before: dict, after: dict, docs=None, **extra) -> Facts:
    return facts_with(scrape(release, before), scrape(release, after), docs=docs, **extra)


def dp4(running: float, waiting: float, tokens: float, saturated: str | None = None) -> dict:
    """Four engines at `running` each; `saturated` names one engine pinned at 256 with a queue."""
    out = {}
    for e in "0123":
        if e == saturated:
            out[e] = EngineState(
                running=256, waiting=40, generation_tokens=tokens, iterations=tokens
            )
        else:
            out[e] = EngineState(
                running=running, waiting=waiting, generation_tokens=tokens, iterations=tokens
            )
    return out


@pytest.mark.parametrize("release", ["0.10", "0.11+"])
def test_dp4_healthy_is_not_critical(release):
    # issue 13: every engine at 100 of max_num_seqs 256 was summed to "running 400" and critical
    facts = facts_with(
        scrape(release, dp4(100, 0, 1000)),
        scrape(release, dp4(100, 0, 5000)),
        serving__args={"max_num_seqs": 256, "data_parallel_size": 4},
    )
    queue = one(facts, "vllm-queue")
    assert queue.severity is Severity.OK and "4 engines" in queue.summary
    assert any(
        "data-parallel size 4 (from --data-parallel-size" in e["text"] for e in queue.evidence
    )
    engine = one(facts, "vllm-engine")
    assert engine.severity is Severity.OK and "4 engines" in engine.summary


@pytest.mark.parametrize("release", ["0.10", "0.11+"])
def test_dp4_with_a_short_queue_everywhere_is_a_warning_not_saturation(release):
    # 100 running of 256 on each engine with a few waiting: below the ceiling, not saturated
    facts = facts_with(
        scrape(release, dp4(100, 3, 1000)),
        scrape(release, dp4(100, 4, 5000)),
    )
    queue = one(facts, "vllm-queue")
    assert queue.severity is Severity.WARNING and "400" not in queue.summary


@pytest.mark.parametrize("release", ["0.10", "0.11+"])
def test_dp4_with_one_engine_at_its_ceiling_is_critical_and_names_it(release):
    facts = facts_with(
        scrape(release, dp4(100, 0, 1000, saturated="2")),
        scrape(release, dp4(100, 0, 5000, saturated="2")),
        settings__max_num_seqs=256,
    )
    queue = one(facts, "vllm-queue")
    assert queue.severity is Severity.CRITICAL and queue.runbooks == ["queue-saturation"]
    assert queue.summary.startswith("engine 2 of 4: queue saturated: running 256 → 256")


def test_dp_size_counted_from_engine_series_without_a_pod_spec():
    facts = facts_with(scrape("0.11+", dp4(100, 0, 1000)), scrape("0.11+", dp4(100, 0, 2000)))
    queue = one(facts, "vllm-queue")
    assert any("from 4 engine series in /metrics" in e["text"] for e in queue.evidence)


def test_pod_dp_size_larger_than_the_engine_series_is_said():
    facts = facts_with(
        scrape("0.11+", dp4(10, 0, 1000)),
        scrape("0.11+", dp4(10, 0, 2000)),
        serving__args={"data_parallel_size": 8},
    )
    notes = [f for f in findings(facts, "vllm-engine") if f.severity is Severity.INFO]
    assert notes and "--data-parallel-size 8 but /metrics shows 4" in notes[0].summary


@pytest.mark.parametrize("level,text", [(1, "weights offloaded"), (2, "weights and KV cache")])
def test_sleeping_engine_is_info_with_how_to_wake_it_never_stuck(level, text):
    # 0.11+ sleep mode: awake=0, requests waiting, nothing running or generated
    asleep = {"0": EngineState(waiting=5, sleep_level=level, generation_tokens=100)}
    facts = facts_with(scrape("0.11+", asleep), scrape("0.11+", asleep))
    engine = one(facts, "vllm-engine")
    assert engine.severity is Severity.INFO and "asleep" in engine.summary
    assert text in engine.summary and "/wake_up" in engine.summary
    queue = one(facts, "vllm-queue")
    assert queue.severity is Severity.INFO and "not judged" in queue.summary
    report = run_checks(facts, VLLM_CHECKS, "t")
    assert report.status != "critical", [(f.check, f.summary) for f in report.findings]


def test_sleeping_engine_with_a_timed_out_probe_is_not_critical():
    asleep = {"0": EngineState(waiting=1, sleep_level=1)}
    probe = {
        "request": {"path": "/v1/completions", "model": "m", "max_tokens": 16},
        "status": None,
        "error": "no answer within 2.0s (the server accepted the connection)",
        "error_kind": "timeout",
    }
    facts = facts_with(
        scrape("0.11+", asleep),
        scrape("0.11+", asleep),
        docs={"vllm/probe.json": probe, "vllm/health.json": HEALTH_200},
    )
    gen = one(facts, "vllm-generation")
    assert gen.severity is Severity.INFO and "asleep" in gen.summary


def test_deferred_waiting_is_not_blamed_on_the_token_budget():
    # 0.11+: 30 requests deferred (KV transfer, LoRA budget), none waiting for capacity
    state = {"0": EngineState(running=20, deferred=30, generation_tokens=1000, iterations=50)}
    later = {"0": EngineState(running=20, deferred=30, generation_tokens=3000, iterations=90)}
    facts = facts_with(scrape("0.11+", state), scrape("0.11+", later), settings__max_num_seqs=256)
    queue = one(facts, "vllm-queue")
    assert queue.severity is Severity.OK
    assert "max_num_batched_tokens" not in queue.summary and "30 more deferred" in queue.summary


def test_capacity_waiting_beside_deferred_is_still_judged():
    state = {"0": EngineState(running=256, waiting=12, deferred=30, generation_tokens=10)}
    later = {"0": EngineState(running=256, waiting=20, deferred=30, generation_tokens=900)}
    facts = facts_with(scrape("0.11+", state), scrape("0.11+", later), settings__max_num_seqs=256)
    queue = one(facts, "vllm-queue")
    assert queue.severity is Severity.CRITICAL and "waiting 12 → 20" in queue.summary


@pytest.mark.parametrize("release", ["0.10", "0.11+"])
def test_running_with_frozen_counters_is_a_wedged_engine(release):
    # 8 running, tokens and engine steps frozen across the window, /health 200
    frozen = {"0": EngineState(running=8, waiting=3, generation_tokens=5000, iterations=700)}
    facts = two_scrapes(
        release,
        frozen,
        frozen,
        docs={"vllm/health.json": HEALTH_200},
    )
    engine = one(facts, "vllm-engine")
    assert engine.severity is Severity.CRITICAL and engine.runbooks == ["engine-wedged"]
    assert "wedged" in engine.summary and "/health says 200" in engine.summary
    assert one(facts, "vllm-queue").severity is Severity.INFO  # not blamed on saturation


@pytest.mark.parametrize("release", ["v0-0.4", "v0", "0.8"])
def test_frozen_counters_without_a_step_counter_need_a_longer_window(release):
    # no iteration_tokens_total count: 5 s of no tokens could be one long prefill
    frozen = {"0": EngineState(running=8, waiting=3, generation_tokens=5000, prompt_tokens=9)}
    short = one(two_scrapes(release, frozen, frozen), "vllm-engine")
    assert short.severity is Severity.WARNING and "--window 30" in short.summary
    long = one(
        facts_with(scrape(release, frozen), scrape(release, frozen), seconds=60.0), "vllm-engine"
    )
    assert long.severity is Severity.CRITICAL and long.runbooks == ["engine-wedged"]


@pytest.mark.parametrize("release", GENERATIONS)
def test_saturated_and_preempting_is_critical_on_every_generation(release):
    # running at max_num_seqs, queue growing, KV full and preemptions rising
    before = {
        "0": EngineState(running=256, waiting=40, kv=0.99, preemptions=10, generation_tokens=10)
    }
    after = {
        "0": EngineState(running=256, waiting=90, kv=0.99, preemptions=70, generation_tokens=900)
    }
    facts = two_scrapes(release, before, after, settings__max_num_seqs=256)
    queue = one(facts, "vllm-queue")
    assert queue.severity is Severity.CRITICAL and "kv-cache-preemption" in queue.runbooks
    kv = one(facts, "vllm-kv-cache")
    assert kv.severity is Severity.CRITICAL and kv.runbooks == ["kv-cache-preemption"]
    assert one(facts, "vllm-engine").severity is Severity.OK


@pytest.mark.parametrize("release", GENERATIONS)
def test_idle_server_is_ok_on_every_generation(release):
    idle = {"0": EngineState(generation_tokens=10)}
    facts = two_scrapes(release, idle, idle)
    for check_id in ("vllm-queue", "vllm-kv-cache", "vllm-engine"):
        assert one(facts, check_id).severity is Severity.OK, check_id


@pytest.mark.parametrize(
    "release,expected",
    [("v0-0.4", "v0"), ("v0", "v0"), ("0.8", "v1-early"), ("0.10", "v1-early"), ("0.11+", "v1")],
)
def test_the_generation_is_recognised(release, expected):
    facts = facts_with(scrape(release, {"0": EngineState()}))
    assert facts.get("vllm/window")["release"] == expected


def test_cache_config_info_is_read_not_guessed():
    cache = {
        "block_size": "16",
        "cache_dtype": "fp8",
        "gpu_memory_utilization": "0.9",
        "num_gpu_blocks": "5517",
    }
    full = {"0": EngineState(running=30, waiting=5, kv=0.97, generation_tokens=1)}
    facts = facts_with(scrape("0.11+", full, cache_config=cache))
    kv = one(facts, "vllm-kv-cache")
    assert any("5517 blocks × 16 tokens = 88,272 tokens" in e["text"] for e in kv.evidence)
    assert any("cache_dtype fp8" in e["text"] for e in kv.evidence)


def test_metrics_without_vllm_series_is_a_finding_not_silence():
    text = '# TYPE python_info gauge\npython_info{version="3.11"} 1.0\n'
    facts = facts_with(text, docs={"vllm/health.json": HEALTH_200})
    f = next(f for f in findings(facts, "vllm-health") if f.subject == "endpoint /metrics")
    assert (
        f.severity is Severity.WARNING
        and "no vllm: series in /metrics: it answers with" in f.summary
    )


def test_health_silent_while_the_pod_crash_loops_is_worded_as_a_consequence():
    pod = json.loads((EXAMPLES / "crashloop-cuda-oom" / "k8s" / "pod.json").read_text())
    facts = health_facts(
        {"status": None, "latency_ms": 1.0, "error": None, "error_kind": "connect"},
        {"k8s/pod.json": pod},
    )
    f = next(f for f in findings(facts, "vllm-health") if f.subject == "endpoint /health")
    assert f.severity is Severity.WARNING and "None" not in f.summary
    assert (
        "consequence of the container restarting" in f.summary and "CrashLoopBackOff" in f.summary
    )
    assert f.runbooks == []


ITL_NAME = {"0.11+": "vllm:inter_token_latency_seconds"}


@pytest.mark.parametrize("release", GENERATIONS)
def test_slow_decode_is_found_on_every_generation(release):
    # 20 requests at 0.9 s per output token inside the window; the histogram name differs
    name = ITL_NAME.get(release, "vllm:time_per_output_token_seconds")
    before = {"0": EngineState(running=4, generation_tokens=10, histograms={name: [0.02] * 50})}
    after = {
        "0": EngineState(
            running=4, generation_tokens=90, histograms={name: [0.02] * 50 + [0.9] * 20}
        )
    }
    f = one(two_scrapes(release, before, after), "vllm-latency")
    assert f.summary.startswith("slow inter-token latency") and name in f.evidence[0]["text"]
    assert f.severity is Severity.WARNING


def test_kv_full_on_one_data_parallel_engine_names_that_engine():
    # DP=2: engine 1 at 98% and preempting, engine 0 at 40%: the finding is about engine 1
    before = {"0": EngineState(kv=0.4, preemptions=3), "1": EngineState(kv=0.98, preemptions=10)}
    after = {"0": EngineState(kv=0.4, preemptions=3), "1": EngineState(kv=0.98, preemptions=25)}
    f = one(two_scrapes("0.11+", before, after), "vllm-kv-cache")
    assert f.severity is Severity.CRITICAL and f.subject == "model m (engine 1 of 2)"
    assert any("engine 1: +15" in e["text"] for e in f.evidence)


def test_latency_of_each_data_parallel_engine_is_shown():
    # engine 1 is slow to the first token, engine 0 is fast: the evidence says which
    name = "vllm:time_to_first_token_seconds"
    before = {
        "0": EngineState(histograms={name: [0.1]}),
        "1": EngineState(histograms={name: [0.1]}),
    }
    after = {
        "0": EngineState(histograms={name: [0.1] * 21}),
        "1": EngineState(histograms={name: [0.1] + [30.0] * 20}),
    }
    f = one(two_scrapes("0.11+", before, after), "vllm-latency")
    per = next(e["text"] for e in f.evidence if "per engine" in e["text"])
    assert per.startswith("time to first token p95 per engine: engine 0: ") and "engine 1: 3" in per


def test_a_restart_between_the_scrapes_is_not_a_wedge():
    # counters fell (a restart, or scrapes that reached another server; no pod here to tell
    # which): progress is unknown, never "no token generated"
    before = {"0": EngineState(running=5, generation_tokens=9000, iterations=800)}
    after = {"0": EngineState(running=5, generation_tokens=0, iterations=0)}
    f = one(two_scrapes("0.11+", before, after), "vllm-engine")
    assert f.severity is Severity.INFO and "the counter went down" in f.summary


def test_a_counter_that_went_down_is_said_so_in_the_queue_evidence():
    # the queue's ✓ quoted "+12 over the 3.0 s" while vllm-engine said the counter went down
    before = {"0": EngineState(running=1, generation_tokens=9000)}
    after = {"0": EngineState(running=1, generation_tokens=12)}
    f = one(two_scrapes("0.11+", before, after), "vllm-queue")
    line = next(e["text"] for e in f.evidence if "generation_tokens_total" in e["text"])
    assert line.endswith(
        ": 9000 → 12 (the counter went down: the server restarted or the scrapes reached "
        "another server)"
    ), line
    # the preemption counter likewise, and a rate of 1e308 is no 300-digit number
    before = {"0": EngineState(running=1, preemptions=50, kv=0.3)}
    after = {"0": EngineState(running=1, preemptions=7, kv=0.3)}
    kv = one(two_scrapes("0.11+", before, after), "vllm-kv-cache")
    assert any(
        "num_preemptions_total: 50 → 7 (the counter went down" in e["text"] for e in kv.evidence
    )
    huge = {"0": EngineState(running=1, preemptions=1e308, kv=0.3)}
    kv = one(
        two_scrapes("0.11+", {"0": EngineState(running=1, preemptions=0, kv=0.3)}, huge),
        "vllm-kv-cache",
    )
    assert len(kv.summary) < 400 and all(len(e["text"]) < 300 for e in kv.evidence), kv.summary


def test_a_max_num_seqs_the_running_count_exceeds_is_not_judged_against():
    # `--max-num-seqs 4` on a server running 8: the ceiling given is not this server's
    facts = facts_with(
        v1_metrics("m", running=8, waiting=30, generation_tokens=10),
        v1_metrics("m", running=8, waiting=30, generation_tokens=900),
        settings__max_num_seqs=4,
    )
    f = one(facts, "vllm-queue")
    assert "at max_num_seqs 4" not in f.summary, f.summary
    assert any(
        "max_num_seqs 4 (from" in e["text"] and "contradicted" in e["text"] for e in f.evidence
    )


def test_a_plateau_off_vllm_defaults_with_the_ceiling_unknown_is_not_saturation():
    # before: any flat `running` with a queue was called saturated; 100 is no vLLM default
    facts = facts_with(
        v1_metrics("m", running=100, waiting=20, generation_tokens=10),
        v1_metrics("m", running=100, waiting=30, generation_tokens=900),
    )
    f = one(facts, "vllm-queue")
    assert f.severity is Severity.WARNING and "max_num_seqs unknown" in f.summary


def test_data_parallel_size_given_as_text_in_the_pod_args_is_read():
    facts = facts_with(
        scrape("0.11+", dp4(10, 0, 1000)),
        scrape("0.11+", dp4(10, 0, 2000)),
        serving__args={"data_parallel_size": "4"},
    )
    queue = one(facts, "vllm-queue")
    assert any("from --data-parallel-size in the pod spec" in e["text"] for e in queue.evidence)


def test_probe_refused_while_the_pod_crash_loops_is_a_consequence_too():
    pod = json.loads((EXAMPLES / "crashloop-cuda-oom" / "k8s" / "pod.json").read_text())
    probe = {
        "request": {"path": "/v1/completions", "model": "m", "max_tokens": 16},
        "status": None,
        "error": "connection refused (nothing listens on that port, or vLLM exited)",
        "error_kind": "connect",
    }
    facts = Facts()
    facts.set("vllm/probe.json", probe)
    facts.set("k8s/pod.json", pod)
    f = one(facts, "vllm-generation")
    assert f.severity is Severity.WARNING and f.runbooks == []
    assert "consequence of the container restarting" in f.summary


def test_old_restarts_of_a_ready_container_do_not_excuse_a_silent_endpoint():
    pod = json.loads((EXAMPLES / "crashloop-cuda-oom" / "k8s" / "pod.json").read_text())
    status = pod["status"]["containerStatuses"][0]
    status.update(
        ready=True, started=True, state={"running": {"startedAt": "2025-09-04T01:30:00Z"}}
    )
    facts = health_facts(
        {"status": None, "latency_ms": 1.0, "error": "connection refused", "error_kind": "connect"},
        {"k8s/pod.json": pod},
    )
    f = next(f for f in findings(facts, "vllm-health") if f.subject == "endpoint /health")
    assert f.severity is Severity.CRITICAL and f.runbooks == ["engine-dead"]


def test_saturated_queue_is_reported_once_not_again_by_log_signatures(capsys):
    # the loggers.py lines say the same as the /metrics window; vllm-queue knows more
    report = bundle_report(capsys, EXAMPLES / "saturated-queue")
    assert by_check(report, "vllm-queue")[0]["runbooks"] == ["queue-saturation"]
    assert not [
        f for f in by_check(report, "log-signatures") if "queue-saturation" in f["runbooks"]
    ]


def test_slow_queue_summary_names_ttft_once(capsys):
    # before: "...; TTFT p95 32.0 s includes it; time to first token p95 32.0 s also over"
    (latency,) = by_check(bundle_report(capsys, EXAMPLES / "saturated-queue"), "vllm-latency")
    summary = latency["summary"]
    assert summary.startswith("slow queue time: p95 23.8 s > 1.0 s")
    assert summary.count("32.0 s") == 1 and "TTFT" not in summary


def test_probe_and_health_with_wrong_types_are_skipped_not_crashed(capsys, tmp_path):
    # before: "Unknown format code 'f' for object of type 'str'" and "'list' has no 'get'"
    path = bundle(tmp_path, "saturated-queue")
    (path / "vllm" / "probe.json").write_text(
        json.dumps({"status": "two hundred", "latency_ms": "slow", "text": 5})
    )
    (path / "vllm" / "health.json").write_text("[]")
    (path / "vllm" / "models.json").write_text('{"data": "x"}')
    code, report, _ = diagnose_json(capsys, path)
    assert code == 2  # the saturated queue is still found
    reasons = skipped(report)
    assert "is not a generation probe result: status is a string" in reasons["vllm-generation"]
    assert "is not a /health result (a JSON list)" in reasons["vllm-health"]
    assert not check_errors(report)


def test_a_models_own_tokenizer_json_is_not_read_as_the_probe_result(capsys, tmp_path):
    # a Hugging Face tokenizer.json dropped into the bundle root: before, "does not load:
    # unknown error" (critical) about a tokenizer nobody probed
    path = bundle(tmp_path, "healthy-vllm-7b")
    hf = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "model": {}}
    (path / "tokenizer.json").write_text(json.dumps(hf))
    code, report, _ = diagnose_json(capsys, path)
    assert code == 0
    assert not by_check(report, "tokenizer")
    assert "is not llmdoctor's tokenizer probe result" in skipped(report)["tokenizer"]


def test_non_finite_metric_values_are_not_reported_as_numbers(capsys, tmp_path):
    # NaN/Inf samples (and a scrape of random text): before, "KV cache at inf%" and
    # "waiting -inf" were findings
    path = bundle(tmp_path, "saturated-queue")
    (path / "vllm" / "metrics-0.txt").write_text(
        'vllm:num_requests_running{model_name="m"} NaN\n'
        'vllm:num_requests_waiting{model_name="m"} -Inf\n'
        'vllm:kv_cache_usage_perc{model_name="m"} 1e400\n'
    )
    (path / "vllm" / "metrics-1.txt").write_text("}}}{{ not metrics at all\n")
    code, report, _ = diagnose_json(capsys, path)
    assert code == 2  # the slow generation probe is still critical
    assert not by_check(report, "vllm-kv-cache") and not by_check(report, "vllm-queue")
    summaries = " ".join(f["summary"] for f in report["findings"])
    assert "inf%" not in summaries and "-inf" not in summaries
    assert "is nan (ignored)" in skipped(report)["vllm-queue"]
    assert not check_errors(report)


def test_empty_metrics_files_are_a_reason_not_a_verdict(capsys, tmp_path):
    path = bundle(tmp_path, "saturated-queue")
    for name in ("metrics-0.txt", "metrics-1.txt"):
        (path / "vllm" / name).write_text("")
    code, report, _ = diagnose_json(capsys, path)
    reasons = skipped(report)
    for check_id in ("vllm-queue", "vllm-kv-cache", "vllm-latency"):
        assert "no vllm: series in /metrics" in reasons[check_id]
    assert code == 2 and not check_errors(report)


def test_one_scrape_does_not_claim_no_preemptions(capsys, tmp_path):
    # with a single scrape the preemption rate is unknown: say the total since start (here 0),
    # never "no preemptions over" a window that was not measured
    path = bundle(tmp_path, "saturated-queue")
    (path / "vllm" / "metrics-1.txt").unlink()
    _, report, _ = diagnose_json(capsys, path)
    (kv,) = by_check(report, "vllm-kv-cache")
    assert "no preemptions over" not in kv["summary"]
    assert kv["summary"].endswith("no preemptions since the server started")


def test_options_a_bundle_cannot_use_are_said_not_silently_dropped(capsys, tmp_path):
    # the KV-cache advice says "scrape again over a longer window": --window on a bundle
    # changes nothing, and says so
    path = bundle(tmp_path, "saturated-queue")
    _, plain, _ = diagnose_json(capsys, path)
    _, windowed, err = diagnose_json(capsys, path, "--window", "60")
    assert "--window has no effect with --bundle" in err
    assert [f["summary"] for f in windowed["findings"]] == [f["summary"] for f in plain["findings"]]


def test_a_restart_between_the_scrapes_is_named_from_the_process_start_time():
    # the counters grew past their old values, yet the process started again in between
    first = v1_metrics("m", generation_tokens=500) + "process_start_time_seconds 40.0\n"
    second = v1_metrics("m", generation_tokens=900) + "process_start_time_seconds 103.0\n"
    f = one(facts_with(first, second), "vllm-engine")
    # a proven restart during an incident is a warning (a hostile pass: "OK", exit 0); a
    # counter that merely went down (another server, perhaps) stays an info, above
    assert f.severity is Severity.WARNING and "not measured" in f.summary
    assert "restarted between the scrapes" in f.summary


# --- a hostile on-call pass (2026-12-03): verdicts the report's own evidence contradicted -----

ANSWERED = {
    "request": {"path": "/v1/completions", "model": "m", "max_tokens": 16},
    "status": 200,
    "latency_ms": 44.0,
    "ttft_ms": 20.0,
    "chunks": 3,
    "text": " a b c",
    "finish_reason": "length",
    "error": None,
}


def test_frozen_counters_while_the_probe_was_answered_are_no_proven_wedge():
    # one server cannot count no token and answer a generation in the same seconds: the
    # scrapes and the probe reached different replicas, or /metrics is stale
    frozen = {"0": EngineState(running=5, waiting=0, generation_tokens=5000, iterations=700)}
    facts = two_scrapes(
        "0.11+", frozen, frozen, docs={"vllm/health.json": HEALTH_200, "vllm/probe.json": ANSWERED}
    )
    engine = one(facts, "vllm-engine")
    assert engine.severity is Severity.WARNING and engine.runbooks == ["engine-wedged"]
    assert engine.runbooks_unproven and "different servers" in engine.summary


@pytest.mark.parametrize("status", [500, 503])
def test_a_health_error_while_a_generation_answered_is_no_dead_engine(status):
    facts = health_facts({"status": status, "latency_ms": 2.0, "error": None})
    facts.set("vllm/probe.json", ANSWERED)
    health = next(f for f in findings(facts, "vllm-health") if f.subject == "endpoint /health")
    assert health.severity is Severity.WARNING and health.runbooks == [], health.summary
    assert "yet a generation answered (status 200, 3 text chunks)" in health.summary
    # without the generation it is the dead engine vLLM answers so for
    alone = health_facts({"status": status, "latency_ms": 2.0, "error": None})
    assert findings(alone, "vllm-health")[0].runbooks == ["engine-dead"]


def _probe_failed(**probe) -> Finding:
    facts = Facts()
    facts.set("vllm/health.json", HEALTH_200)
    facts.set("vllm/probe.json", {**ANSWERED, "text": " a", "chunks": 1, **probe})
    return one(facts, "vllm-generation")


def test_an_error_event_naming_cuda_oom_names_its_runbook_not_the_dead_engine():
    f = _probe_failed(
        error="error event in the stream",
        error_kind="stream-error",
        error_body={"error": {"message": "CUDA out of memory. Tried to allocate 2.00 GiB"}},
    )
    assert f.runbooks == ["cuda-oom-runtime"] and not f.runbooks_unproven, f.summary
    assert "the GPU ran out of memory" in f.summary


@pytest.mark.parametrize(
    ("kind", "books"),
    [("reset", ["engine-dead", "gateway-timeout"]), ("stream-error", ["engine-dead"])],
)
def test_a_stream_cut_while_health_says_200_is_no_proven_dead_engine(kind, books):
    f = _probe_failed(error="the stream ended without [DONE]", error_kind=kind)
    assert f.runbooks == books and f.runbooks_unproven, f.summary
    # an error event that says EngineDeadError is the proof, whatever /health said before
    body = {"error": {"message": "EngineDeadError: EngineCore encountered an issue"}}
    f = _probe_failed(error="error event in the stream", error_kind=kind, error_body=body)
    assert f.runbooks == ["engine-dead"] and not f.runbooks_unproven, f.summary


def test_an_empty_completion_is_no_proven_nan_logits():
    f = _probe_failed(text="", chunks=0, finish_reason="stop")
    assert f.runbooks == ["nan-or-garbage-output"] and f.runbooks_unproven
    assert "ended at once" in f.summary


def test_a_stream_that_stalls_after_its_first_token_does_not_blame_the_tokenizer():
    moving = [
        {"0": EngineState(running=2, generation_tokens=100, iterations=50)},
        {"0": EngineState(running=2, generation_tokens=400, iterations=200)},
    ]
    stalled = {**ANSWERED, "text": " a", "chunks": 1, "ttft_ms": 48.0}
    stalled.update(error="no answer within 3.0s", error_kind="timeout")
    facts = two_scrapes(
        "0.11+", *moving, docs={"vllm/health.json": HEALTH_200, "vllm/probe.json": stalled}
    )
    f = one(facts, "vllm-generation")
    assert f.runbooks == ["gateway-timeout", "engine-wedged"] and f.runbooks_unproven
    assert "the first token came (after 48 ms)" in f.summary and "tokenizer" not in f.summary


def test_a_queue_time_past_the_last_bucket_at_its_threshold_is_the_slow_phase():
    # every request queued longer than the last bucket (60 s on V0): p95 reads "60 s+", a
    # lower bound at the 60 s threshold, and was not called slow: the report blamed prefill
    # "while queue time p95 is 60 s+"
    queue, ttft = "vllm:request_queue_time_seconds", "vllm:time_to_first_token_seconds"
    before = {"0": EngineState(running=4, waiting=0, histograms={queue: [1.0], ttft: [1.0]})}
    after = {
        "0": EngineState(
            running=4,
            waiting=9,
            histograms={queue: [1.0] + [100.0] * 20, ttft: [1.0] + [101.0] * 20},
        )
    }
    facts = two_scrapes("v0", before, after, settings__max_queue_ms=60000.0)
    f = one(facts, "vllm-latency")
    assert "wait in the queue" in f.summary and "prefill is slow" not in f.summary, f.summary


def test_a_kv_usage_exposed_as_nan_is_not_read_not_absent():
    # a hostile pass: "✓ … (KV usage not exposed)" of a gauge that was exposed, as NaN
    nan = {"0": EngineState(running=1, kv=float("nan"), preemptions=0)}
    f = one(two_scrapes("0.11+", nan, nan), "vllm-kv-cache")
    assert f.severity is Severity.OK and "KV usage not read:" in f.summary, f.summary
    assert "kv_cache_usage_perc is nan (ignored)" in f.summary


def test_progress_by_prefill_alone_is_not_called_plus_0_tokens():
    # a hostile pass: "✓ the engine awake and making progress: +0 tokens generated"
    before = {"0": EngineState(running=2, generation_tokens=100, prompt_tokens=500)}
    after = {"0": EngineState(running=2, generation_tokens=100, prompt_tokens=9000)}
    f = one(two_scrapes("0.11+", before, after), "vllm-engine")
    assert "+8500 prompt tokens prefilled, no token generated yet" in f.summary, f.summary
    assert "+0 tokens" not in f.summary


def test_progress_not_measured_for_a_rejected_scrape_says_so_not_scrape_twice():
    # a hostile pass: "(scrape twice: --window)" of a bundle whose second scrape was cut off
    good = v1_metrics("m", running=5, waiting=0, generation_tokens=10)
    cut = good[: good.index("vllm:num_requests_waiting{") + 30]
    f = one(facts_with(good, cut), "vllm-engine")
    assert "vllm/metrics-1.txt rejected" in f.summary and "--window" not in f.summary, f.summary


def test_the_probe_itself_over_the_context_length_points_at_the_server_not_a_client():
    # a hostile pass: a 400 "maximum context length" on llmdoctor's own 5-word probe read "Do
    # now: Client: set max_tokens …": no client sent it; the server's max_model_len is too low
    facts = Facts()
    facts.set(
        "vllm/probe.json",
        {
            "request": {"path": "/v1/completions", "model": "m", "max_tokens": 16},
            "status": 400,
            "error": "HTTP 400: This model's maximum context length is 8 tokens",
            "error_kind": "http",
        },
    )
    f = one(facts, "vllm-generation")
    assert f.runbooks == ["context-length-exceeded"] and "--max-model-len" in f.summary, f.summary


def test_a_second_scrape_that_failed_is_a_warning_not_an_ok_report():
    # a hostile pass: the second /metrics got HTTP 500 (or the connection dropped): the report
    # said "OK in what was checked", exit 0, and "(scrape twice: --window)"
    facts = Facts()
    facts.set("vllm/health.json", HEALTH_200)
    facts.set("vllm/metrics-0.txt", v1_metrics("m", running=1, generation_tokens=10))
    facts.mark_missing("vllm/metrics-1.txt", "GET /metrics: HTTP 500: Internal Server Error")
    facts.set("vllm/scrapes.json", [{"file": "metrics-0.txt", "at": 100.0}])
    derive_all(facts)
    metrics = next(f for f in findings(facts, "vllm-health") if f.subject == "endpoint /metrics")
    assert metrics.severity is Severity.WARNING, metrics.summary
    assert "the second /metrics scrape failed (HTTP 500: Internal Server Error)" in metrics.summary
    engine = one(facts, "vllm-engine")
    assert (
        "the second scrape failed: HTTP 500" in engine.summary and "--window" not in engine.summary
    )
    # not taken at all (--window 0) is no failure
    facts = Facts()
    facts.set("vllm/health.json", HEALTH_200)
    facts.set("vllm/metrics-0.txt", v1_metrics("m", running=1))
    facts.mark_missing("vllm/metrics-1.txt", "second /metrics scrape not taken: window is 0")
    derive_all(facts)
    assert not [f for f in findings(facts, "vllm-health") if f.subject == "endpoint /metrics"]


def test_an_engine_dead_answer_while_the_engine_generates_is_no_proven_death():
    # a hostile pass: "Root cause vLLM engine died" beside "✓ vllm-engine making progress"
    moving = [
        {"0": EngineState(running=2, generation_tokens=100, iterations=50)},
        {"0": EngineState(running=2, generation_tokens=400, iterations=200)},
    ]
    failed = {
        "request": {"path": "/v1/completions", "model": "m", "max_tokens": 16},
        "status": 500,
        "error": "HTTP 500: EngineCore encountered an issue. See stack trace for the root cause.",
        "error_kind": "http",
    }
    docs = {"vllm/health.json": HEALTH_200, "vllm/probe.json": failed}
    f = one(two_scrapes("0.11+", *moving, docs=docs), "vllm-generation")
    assert f.runbooks == ["engine-dead"] and f.runbooks_unproven, f.summary
    assert "the engine generated +300 tokens" in f.summary
    # with the counters standing still it is the death it says
    still = {"0": EngineState(running=0, generation_tokens=100, iterations=50)}
    f = one(two_scrapes("0.11+", still, still, docs=docs), "vllm-generation")
    assert f.runbooks == ["engine-dead"] and not f.runbooks_unproven, f.summary
