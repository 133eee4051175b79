"""The vLLM checks as pure functions of facts: the branches the HTTP scenarios do not reach."""

from __future__ import annotations

import json

import pytest
from vllm_server import fixture_text, v0_metrics, v1_metrics

from llmdoctor.derive import derive_all
from llmdoctor.facts import Facts
from llmdoctor.findings import Severity
from llmdoctor.registry import all_checks
from llmdoctor.runner import run_checks

VLLM_CHECKS = [c for c in all_checks() if c.scope == "vllm"]


def facts_with(*metrics: str, seconds: float = 5.0, **extra) -> Facts:
    facts = Facts()
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


def test_queue_in_a_single_scrape_asks_for_a_second():
    # one scrape cannot tell a burst from saturation
    f = one(facts_with(v1_metrics("m", running=256, waiting=40)), "vllm-queue")
    assert f.severity is Severity.WARNING and "--window" in f.summary


def test_waiting_with_nothing_running_in_one_scrape_is_a_warning_not_a_verdict():
    # engine-dead needs two scrapes and no generated tokens
    f = one(facts_with(v1_metrics("m", running=0, waiting=9)), "vllm-queue")
    assert f.severity is Severity.WARNING and f.runbooks == ["engine-dead"]


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


def test_queue_below_the_ceiling_without_kv_pressure_names_the_token_budget():
    # running 120 of 256, KV at 30%, a steady queue: prefill budget or bursts
    f = one(
        facts_with(
            v1_metrics("m", running=120, waiting=50, kv=0.3),
            v1_metrics("m", running=90, waiting=50, kv=0.3),
            settings__max_num_seqs=256,
        ),
        "vllm-queue",
    )
    assert f.severity is Severity.WARNING and "max_num_batched_tokens" in f.summary


def test_max_num_seqs_from_the_pod_spec_is_used_and_settings_win():
    # serving/args (from the pod spec) gives 128; --max-num-seqs 256 overrides it
    metrics = [v1_metrics("m", running=128, waiting=10), v1_metrics("m", running=128, waiting=20)]
    spec = {"max_num_seqs": 128}
    f = one(facts_with(*metrics, serving__args=spec), "vllm-queue")
    assert f.severity is Severity.CRITICAL and "max_num_seqs 128" in f.summary
    f = one(facts_with(*metrics, serving__args=spec, settings__max_num_seqs=256), "vllm-queue")
    assert f.severity is Severity.WARNING  # 128 running is below 256


def test_kv_full_without_preemptions_is_a_warning():
    # 97% used but nobody evicted yet
    f = one(
        facts_with(
            v1_metrics("m", kv=0.97, preemptions=5), v1_metrics("m", kv=0.96, preemptions=5)
        ),
        "vllm-kv-cache",
    )
    assert f.severity is Severity.WARNING and "97.0%" in f.summary


def test_preemptions_rising_with_room_in_the_cache_is_a_warning():
    # preemptions happened in the window even though usage now reads 60%
    f = one(
        facts_with(v1_metrics("m", kv=0.6, preemptions=5), v1_metrics("m", kv=0.6, preemptions=9)),
        "vllm-kv-cache",
    )
    assert f.severity is Severity.WARNING and "+4" in f.summary and "0.80/s" in f.summary


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
    facts = facts_with(fixture_text("metrics_v1-early_vllmdocs-design_llama31-8b_elided.txt"))
    f = one(facts, "vllm-latency")
    assert f.severity is Severity.OK and "time to first token p95" in f.summary


def health_facts(health: dict, extra: dict | None = None) -> Facts:
    facts = Facts()
    facts.set("vllm/health.json", health)
    for key, value in (extra or {}).items():
        facts.set(key, value)
    return facts


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
