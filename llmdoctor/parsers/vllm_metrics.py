"""vLLM /metrics scrapes -> `vllm/window`: per-(model, engine) gauges, counter deltas, quantiles.

Reads every `vllm/metrics-<n>.txt` (Prometheus text) with the times in `vllm/scrapes.json`,
and compares the first and the last usable scrape: gauges as seen in each scrape, counters as
delta and rate over the window, histograms as p50/p95 of the observations made inside the
window (bucket deltas). Every generation still in use is understood (V0 0.4-0.10
`gpu_cache_usage_perc`, `time_per_output_token_seconds`; V1 `kv_cache_usage_perc`,
`inter_token_latency_seconds`, and from 0.11 `engine_sleep_state` and
`num_requests_waiting_by_reason`). Series are grouped by `model_name`, and each data-parallel
engine (`engine` label) keeps its own values beside the model's totals, so that checks can
judge every engine against its own ceiling.

A scrape that is not valid Prometheus text is rejected whole, with the line that is wrong: a
truncated or corrupt page must not be read as a smaller, healthier server.

Real input (vLLM V0 ~0.7, vllm-project/aibrix docs/source/features/runtime.rst):

    # HELP vllm:num_requests_waiting Number of requests waiting to be processed.
    # TYPE vllm:num_requests_waiting gauge
    vllm:num_requests_waiting{model_name="Qwen/Qwen2.5-Coder-1.5B-Instruct"} 0.0

and V1 0.10.0 (https://github.com/vllm-project/production-stack/issues/617):

    vllm:kv_cache_usage_perc{engine="0",model_name="zai-org/GLM-4.5"} 9.75010481363281e-06
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from llmdoctor.engine.derive import derived_fact
from llmdoctor.engine.facts import FactMissing, Facts

METRICS_KEY = re.compile(r"^vllm/metrics-(\d+)\.txt$")
# one sample line of the text format: name{labels} value [timestamp]
SAMPLE_LINE = re.compile(
    r'^[A-Za-z_:][A-Za-z0-9_:]*(\{([^"}]|"([^"\\]|\\.)*")*\})?[ \t]+\S+([ \t]+-?[0-9]+)?[ \t]*$'
)
# series whose extra label is a state or a reason, kept apart as "<name>/<value>"
SPLIT_BY_LABEL = {
    "vllm:num_requests_waiting_by_reason": "reason",
    "vllm:engine_sleep_state": "sleep_state",
}

# concept -> exposed series names, preferred first (see vllm_reference.md §1.4)
GAUGES = {
    "running": ("vllm:num_requests_running",),
    "waiting": ("vllm:num_requests_waiting",),
    "waiting_capacity": ("vllm:num_requests_waiting_by_reason/capacity",),
    "waiting_deferred": ("vllm:num_requests_waiting_by_reason/deferred",),
    "swapped": ("vllm:num_requests_swapped",),
    "kv_cache_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
    "cpu_cache_usage": ("vllm:cpu_cache_usage_perc",),
    "awake": ("vllm:engine_sleep_state/awake",),
    "sleep_weights_offloaded": ("vllm:engine_sleep_state/weights_offloaded",),
    "sleep_discard_all": ("vllm:engine_sleep_state/discard_all",),
}
MAX_OVER_ENGINES = {"kv_cache_usage", "cpu_cache_usage"}
MIN_OVER_ENGINES = {"awake"}
COUNTERS = {
    "preemptions": ("vllm:num_preemptions_total",),
    "generation_tokens": ("vllm:generation_tokens_total",),
    "prompt_tokens": ("vllm:prompt_tokens_total",),
    "requests_finished": ("vllm:request_success_total",),
    "prefix_cache_hits": ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
    "prefix_cache_queries": (
        "vllm:prefix_cache_queries_total",
        "vllm:gpu_prefix_cache_queries_total",
    ),
    # engine steps: the observation count of the tokens-per-step histogram
    "iterations": ("vllm:iteration_tokens_total_count",),
    # 0.32+: requests admission control refused (--max-num-queued-reqs/-tokens), all reasons
    "admission_rejections": ("vllm:admission_rejections_total",),
}
HISTOGRAMS = {
    "queue_time": ("vllm:request_queue_time_seconds", "vllm:time_in_queue_requests"),
    "ttft": ("vllm:time_to_first_token_seconds",),
    "itl": ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
    "e2e": ("vllm:e2e_request_latency_seconds",),
    "prefill_time": ("vllm:request_prefill_time_seconds",),
    "decode_time": ("vllm:request_decode_time_seconds",),
}
V0_ONLY = {
    "vllm:num_requests_swapped",
    "vllm:cpu_cache_usage_perc",
    "vllm:gpu_prefix_cache_hit_rate",
}
V1_ONLY = {"vllm:kv_cache_usage_perc", "vllm:inter_token_latency_seconds_bucket"}
# names that only vLLM 0.11 and later expose by default
CURRENT_ONLY = {
    "vllm:engine_sleep_state/awake",
    "vllm:num_requests_waiting_by_reason/capacity",
    "vllm:prompt_tokens_cached_total",
}
V0_RUNNING_HELP = "Number of requests currently running on GPU."
V1_RUNNING_HELP = "Number of requests in model execution batches."
UNNAMED = "(no model_name)"
MAX_UPTIME_S = 3 * 365 * 86400.0  # a server age beyond this is a wrong clock or series
GENERATIONS = {
    "v0": "V0 engine (vLLM 0.4-0.10)",
    "v1-early": "V1 engine, vLLM 0.8-0.10",
    "v1": "V1 engine, vLLM 0.11 or later",
    "unknown": "vLLM generation not recognised",
}
CACHE_CONFIG_FIELDS = ("block_size", "cache_dtype", "gpu_memory_utilization", "num_gpu_blocks")


@dataclass
class Scrape:
    """One parsed /metrics text, indexed by series name -> model -> engine."""

    key: str
    at: float | None
    values: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)
    buckets: dict[str, dict[str, dict[str, dict[float, float]]]] = field(default_factory=dict)
    cache_config: dict[str, str] = field(default_factory=dict)
    help: dict[str, str] = field(default_factory=dict)
    engine_label: bool = False
    other_series: int = 0  # samples that are not vLLM's (python_*, process_*, http_*, ...)
    renamed: str | None = None  # the first non-`vllm:` series whose name has "vllm" in it
    # every process_start_time_seconds given (prometheus_client's process collector)
    process_starts: set[float] = field(default_factory=set)
    error: str | None = None

    @property
    def process_start(self) -> float | None:
        """The serving process's start: vLLM's counters count from it, so "since start" can
        say how long that was, and a new value in the later scrape is a restart between the
        two. None when absent, not a time, or given twice with different values."""
        return next(iter(self.process_starts)) if len(self.process_starts) == 1 else None

    def models(self) -> set[str]:
        found = {m for series in self.values.values() for m in series}
        found |= {m for series in self.buckets.values() for m in series}
        return found


def first_bad_line(text: str) -> tuple[int, str] | None:
    """(line number, line) of the first line that is neither a comment nor a sample."""
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if not SAMPLE_LINE.match(stripped):
            return number, stripped
    return None


def parse_scrape(key: str, text: str, at: float | None = None) -> Scrape:
    """Parse one Prometheus text; a page that is not valid is rejected whole (`error` says where)."""
    from prometheus_client.parser import text_string_to_metric_families

    scrape = Scrape(key=key, at=at)
    bad = first_bad_line(text)
    if bad is not None:
        number, line = bad
        scrape.error = f"{key} line {number} is not Prometheus text: {line[:120]!r}"
        return scrape
    seen: set[tuple[str, frozenset]] = set()
    try:
        for family in text_string_to_metric_families(text):
            if family.documentation:
                scrape.help[family.name] = family.documentation
            for sample in family.samples:
                if sample.name.startswith("vllm:"):
                    # Prometheus rejects such a page; summed, a vLLM series reads a number
                    # the server never reported (other series are only counted, _add_sample)
                    series = (sample.name, frozenset(sample.labels.items()))
                    if series in seen:
                        shown = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
                        raise ValueError(f"duplicate sample {sample.name}{{{shown}}}")
                    seen.add(series)
                _add_sample(scrape, sample.name, dict(sample.labels), float(sample.value))
    except ValueError as exc:  # raised mid-iteration on a bad line
        first = str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
        rejected = Scrape(key=key, at=at)
        rejected.error = f"{key}: not valid Prometheus text ({first})"
        return rejected
    return scrape


def requests_waiting(text: str) -> float:
    """How many requests wait in one /metrics page, every model and engine together (0 when
    the page is not valid or has no queue gauge)."""
    scrape = parse_scrape("metrics", text)
    return sum(
        value
        for name in GAUGES["waiting"]
        for engines in scrape.values.get(name, {}).values()
        for value in engines.values()
    )


def _add_sample(scrape: Scrape, name: str, labels: dict[str, str], value: float) -> None:
    if not name.startswith("vllm:"):
        scrape.other_series += 1
        if name == "process_start_time_seconds" and math.isfinite(value) and value > 0:
            scrape.process_starts.add(value)
        if scrape.renamed is None and "vllm" in name.lower():
            scrape.renamed = name
        return
    if name.endswith("_created"):
        return
    if not math.isfinite(value):  # NaN/+Inf/-Inf: the value is unknown, not a number to report
        scrape.error = scrape.error or f"{scrape.key}: {name} is {value} (ignored)"
        return
    if value < 0 and (name.endswith("_total") or name.startswith("vllm:num_")):
        # a counter, or a count of requests, never goes below 0
        scrape.error = scrape.error or f"{scrape.key}: {name} is {value}, below 0 (ignored)"
        return
    if name == "vllm:cache_config_info":
        engine = labels.get("engine")
        if not scrape.cache_config or engine in (None, "0"):
            scrape.cache_config = {k: v for k, v in labels.items() if k != "engine"}
        return
    if name.endswith("_info"):
        return  # info gauges (lora_requests_info: a timestamp, no model_name)
    split = SPLIT_BY_LABEL.get(name)
    if split is not None:
        name = f"{name}/{labels.get(split, '')}"
    model = labels.get("model_name", UNNAMED)
    engine = labels.get("engine", "0")
    scrape.engine_label = scrape.engine_label or "engine" in labels
    if name.endswith("_bucket") and "le" in labels:
        le = math.inf if labels["le"] in ("+Inf", "Inf") else float(labels["le"])
        per_engine = scrape.buckets.setdefault(name[: -len("_bucket")], {}).setdefault(model, {})
        bucket = per_engine.setdefault(engine, {})
        bucket[le] = bucket.get(le, 0.0) + value
        return
    # other labels (finished_reason, source, ...) are summed into the (model, engine) series
    per_model = scrape.values.setdefault(name, {}).setdefault(model, {})
    per_model[engine] = per_model.get(engine, 0.0) + value


def engine_generation(scrapes: list[Scrape]) -> str:
    """'v0', 'v1' or 'unknown', from HELP texts, the engine label and generation-only names."""
    return {"v1-early": "v1"}.get(release_line(scrapes), release_line(scrapes))


def release_line(scrapes: list[Scrape]) -> str:
    """'v0' (0.4-0.10), 'v1-early' (0.8-0.10), 'v1' (0.11+) or 'unknown' (see GENERATIONS)."""
    names: set[str] = set()
    help_texts: dict[str, str] = {}
    engine_label = False
    for s in scrapes:
        names |= set(s.values) | {f"{b}_bucket" for b in s.buckets}
        help_texts.update(s.help)
        engine_label = engine_label or s.engine_label
    running_help = help_texts.get("vllm:num_requests_running", "")
    if running_help.startswith(V0_RUNNING_HELP) or (names & V0_ONLY and not names & V1_ONLY):
        return "v0"
    if names & CURRENT_ONLY:
        return "v1"
    kv_names = {"vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"} & names
    if kv_names == {"vllm:kv_cache_usage_perc"} and "vllm:num_requests_running" in names:
        return "v1"  # 0.11 hides the deprecated gpu_cache_usage_perc
    if running_help.startswith(V1_RUNNING_HELP) or engine_label or names & V1_ONLY:
        return "v1-early"
    return "unknown"


def histogram_quantile(q: float, buckets: dict[float, float]) -> float | None:
    """Prometheus-style quantile from cumulative bucket counts (linear inside a bucket).

    A quantile that falls in the +Inf bucket is reported as the highest finite bound.
    """
    bounds = sorted(buckets)
    if not bounds:
        return None
    total = buckets[bounds[-1]]
    if total <= 0:
        return None
    rank = q * total
    prev_bound, prev_count = 0.0, 0.0
    for bound in bounds:
        count = buckets[bound]
        if count >= rank:
            if math.isinf(bound):
                finite = [b for b in bounds if not math.isinf(b)]
                return finite[-1] if finite else None
            if count == prev_count:
                return bound
            lower = prev_bound if prev_bound < bound else 0.0
            return lower + (bound - lower) * (rank - prev_count) / (count - prev_count)
        prev_bound, prev_count = bound, count
    return bounds[-1] if not math.isinf(bounds[-1]) else None


def bucket_floor(buckets: dict[float, float]) -> float:
    """The least sum the observations of cumulative `buckets` can have: each at the lower bound
    of its bucket."""
    floor, lower, below = 0.0, 0.0, 0.0
    for bound in sorted(buckets):
        floor += (buckets[bound] - below) * lower
        below = buckets[bound]
        if not math.isinf(bound):
            lower = bound
    return floor


def quantile_within_sum(estimate: float | None, q: float, total: float, n: float) -> float | None:
    """The q-quantile estimate, no larger than the histogram's sum allows. Of n observations
    sorted, the q-quantile is the k-th (k = ceil(q n)) and the n - k + 1 from it on are all at
    least as large, so it is at most total / (n - k + 1); one observation is the sum itself.
    Linear interpolation inside a wide first bucket (vLLM's request latencies start at 0.3 s)
    says p95 285 ms for 40 requests that waited 27 µs on average; the sum says at most 360 µs."""
    if estimate is None:
        return None
    if n == 1:
        return total
    above = n - math.ceil(q * n - 1e-9) + 1
    return min(estimate, total / max(1.0, above))


def _engine_sum(series: dict[str, float] | None) -> float | None:
    return sum(series.values()) if series else None


def _pick(names: tuple[str, ...], tables: list[dict], model: str) -> str | None:
    """The first name present for the model in every scrape, else in any scrape."""
    for name in names:
        if all(model in table.get(name, {}) for table in tables):
            return name
    for name in names:
        if any(model in table.get(name, {}) for table in tables):
            return name
    return None


def _gauges(model: str, scrapes: list[Scrape]) -> dict[str, Any]:
    """Per concept: the metric, the model's value in each scrape, and each engine's value."""
    out: dict[str, Any] = {}
    tables = [s.values for s in scrapes]
    for concept, names in GAUGES.items():
        name = _pick(names, tables, model)
        if name is None:
            continue
        values, per_engine = [], []
        for s in scrapes:
            series = s.values.get(name, {}).get(model)
            per_engine.append(dict(series) if series else None)
            if not series:
                values.append(None)
            elif concept in MAX_OVER_ENGINES:
                values.append(max(series.values()))
            elif concept in MIN_OVER_ENGINES:
                values.append(min(series.values()))
            else:
                values.append(sum(series.values()))
        out[concept] = {"metric": name, "values": values, "per_engine": per_engine}
    return out


def _delta(
    a: float | None, b: float | None, seconds: float | None, same: bool, restarted: bool
) -> dict:
    entry: dict[str, Any] = {"first": a, "last": b}
    if a is not None and b is not None and not same:
        reset = restarted or b < a  # the server restarted between the scrapes
        delta = b if reset else b - a
        entry.update(delta=delta, reset=reset)
        entry["rate_per_s"] = delta / seconds if seconds else None
    return entry


def _counters(
    model: str, first: Scrape, last: Scrape, seconds: float | None, restarted: bool
) -> dict:
    out: dict[str, Any] = {}
    same = first is last
    for concept, names in COUNTERS.items():
        name = _pick(names, [first.values, last.values], model)
        if name is None:
            continue
        start = first.values.get(name, {}).get(model) or {}
        end = last.values.get(name, {}).get(model) or {}
        total = _delta(_engine_sum(start), _engine_sum(end), seconds, same, restarted)
        entry = {"metric": name, **total}
        entry["per_engine"] = {
            engine: _delta(start.get(engine), end.get(engine), seconds, same, restarted)
            for engine in sorted(set(start) | set(end))
        }
        out[concept] = entry
    return out


def _merged_buckets(scrape: Scrape, name: str, model: str) -> dict[float, float]:
    merged: dict[float, float] = {}
    for buckets in scrape.buckets.get(name, {}).get(model, {}).values():
        for le, count in buckets.items():
            merged[le] = merged.get(le, 0.0) + count
    return merged


def _histogram_sum_count(scrape: Scrape, name: str, model: str) -> tuple[float, float] | None:
    total = _engine_sum(scrape.values.get(f"{name}_sum", {}).get(model))
    count = _engine_sum(scrape.values.get(f"{name}_count", {}).get(model))
    if total is None or count is None:
        return None
    return total, count


def _histograms(model: str, first: Scrape, last: Scrape, restarted: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    tables = [first.buckets, last.buckets]
    for concept, names in HISTOGRAMS.items():
        name = _pick(names, tables, model)
        if name is None:
            continue
        end = _merged_buckets(last, name, model)
        since_start = first is last
        start = {} if since_start else _merged_buckets(first, name, model)
        if restarted or any(end.get(le, 0.0) < count for le, count in start.items()):
            start, since_start = {}, True  # counter reset: use everything since the restart
        window = {le: end[le] - start.get(le, 0.0) for le in end}
        count = max(window.values()) if window else 0.0
        entry: dict[str, Any] = {"metric": name, "count": count, "since_start": since_start}
        if count > 0:
            entry["p50"] = histogram_quantile(0.5, window)
            entry["p95"] = histogram_quantile(0.95, window)
            finite = sorted(le for le in window if not math.isinf(le))
            # the p95 lies past the highest finite bucket: the true value is only a lower bound
            entry["p95_beyond_last_bucket"] = bool(finite) and window[finite[-1]] < 0.95 * count
            sums = [_histogram_sum_count(s, name, model) for s in (first, last)]
            if sums[1] is not None:
                total, n = sums[1]
                if not since_start and sums[0] is not None:
                    total, n = total - sums[0][0], n - sums[0][1]
                entry["mean"] = total / n if n > 0 else None
                # the sum bounds the quantiles only where it agrees with the buckets: _count
                # theirs, and no less than each observation's bucket floor adds up to
                consistent = (
                    n > 0 and abs(n - count) < 0.5 and total >= bucket_floor(window) * (1 - 1e-9)
                )
                if consistent and not entry["p95_beyond_last_bucket"]:
                    for key, q in (("p50", 0.5), ("p95", 0.95)):
                        entry[key] = quantile_within_sum(entry[key], q, total, n)
            per_engine = _engine_quantiles(first, last, name, model, since_start)
            if len(per_engine) > 1:
                entry["per_engine"] = per_engine
        out[concept] = entry
    return out


def _engine_quantiles(first: Scrape, last: Scrape, name: str, model: str, since_start: bool):
    """{engine: {"count", "p95"}} of the window's observations, engine by engine."""
    out = {}
    start_engines = {} if since_start else first.buckets.get(name, {}).get(model, {})
    for engine, end in last.buckets.get(name, {}).get(model, {}).items():
        start = start_engines.get(engine, {})
        window = {le: end[le] - start.get(le, 0.0) for le in end}
        count = max(window.values()) if window else 0.0
        if count > 0:
            out[engine] = {"count": count, "p95": histogram_quantile(0.95, window)}
    return out


def _scrape_times(facts: Facts) -> dict[str, float]:
    times: dict[str, float] = {}
    for item in facts.get("vllm/scrapes.json") or []:
        if not isinstance(item, dict) or not item.get("file") or item.get("at") is None:
            continue
        name = str(item["file"])
        key = name if name.startswith("vllm/") else f"vllm/{name}"
        try:
            at = float(item["at"])
        except (TypeError, ValueError):
            continue
        if math.isfinite(at):
            times[key] = at
    return times


def cache_config(labels: dict[str, str]) -> dict[str, Any]:
    """The fields of `vllm:cache_config_info` the checks use, as numbers where they are numbers."""
    out: dict[str, Any] = {}
    for name in CACHE_CONFIG_FIELDS:
        raw = labels.get(name)
        if raw is None or raw in ("None", ""):
            continue
        try:
            number = float(raw)
            out[name] = (
                int(number) if number.is_integer() and name != "gpu_memory_utilization" else number
            )
        except ValueError:
            out[name] = raw
    return out


def _no_vllm_series(scrapes: list[Scrape]) -> str:
    others = max((s.other_series for s in scrapes), default=0)
    renamed = next((s.renamed for s in scrapes if s.renamed), None)
    if renamed:
        return (
            f"no vllm: series in /metrics: vLLM's metrics appear renamed ({renamed}; Ray's "
            "metrics agent, for one, exports them as ray_vllm_*), and llmdoctor reads only the "
            "vllm:* names vLLM serves itself: scrape the vLLM server's own /metrics"
        )
    if others:
        return (
            f"no vllm: series in /metrics: it answers with {others} other Prometheus series "
            "(another server on this port, a proxy's own metrics, or metric names this "
            "llmdoctor does not know)"
        )
    return "no vllm: series in /metrics: the page has no series at all (is this a vLLM server?)"


def window_from_scrapes(scrapes: list[Scrape]) -> dict[str, Any]:
    """The `vllm/window` value for already parsed scrapes (in time order)."""
    usable = [s for s in scrapes if s.values or s.buckets]
    if not usable:
        reasons = [s.error for s in scrapes if s.error]
        raise ValueError(reasons[0] if reasons else _no_vllm_series(scrapes))
    first, last = usable[0], usable[-1]
    seconds = None
    if first is not last and first.at is not None and last.at is not None:
        seconds = last.at - first.at if last.at > first.at else None
    uptime = None
    if last.at is not None and last.process_start is not None:
        uptime = last.at - last.process_start
        if not 0 <= uptime <= MAX_UPTIME_S:  # a clock or a series that is wrong
            uptime = None
    starts = (first.process_start, last.process_start)
    # a new start time in the later scrape: the server restarted in between (also when its
    # counters happen to have grown past their old values again)
    restarted = first is not last and None not in starts and abs(starts[1] - starts[0]) > 1.0
    models = sorted(set().union(*(s.models() for s in usable)))
    line = release_line(usable)
    raw_config = last.cache_config or first.cache_config
    result: dict[str, Any] = {
        "generation": engine_generation(usable),
        "release": line,
        "release_text": GENERATIONS[line],
        "scrapes": [{"key": s.key, "at": s.at} for s in usable],
        "seconds": seconds,
        "uptime_s": uptime,
        "restarted": restarted,
        "cache_config": raw_config,
        "cache": cache_config(raw_config),
        "parse_errors": [s.error for s in scrapes if s.error],
        "rejected": [s.key for s in scrapes if s not in usable],
        "models": {},
    }
    for model in models:
        engines = sorted(
            {e for s in usable for t in s.values.values() for e in t.get(model, {})}
            | {e for s in usable for t in s.buckets.values() for e in t.get(model, {})},
            key=lambda e: (len(e), e),
        )
        result["models"][model] = {
            "engines": engines,
            "gauges": _gauges(model, usable),
            "counters": _counters(model, first, last, seconds, restarted),
            "histograms": _histograms(model, first, last, restarted),
        }
    return result


def engine_values(gauge: dict | None, engine: str) -> list[float | None]:
    """One engine's value of a gauge entry in each scrape (None where it was not exposed)."""
    if not gauge:
        return []
    return [(series or {}).get(engine) for series in gauge.get("per_engine") or []]


def engine_delta(counter: dict | None, engine: str) -> float | None:
    """One engine's counter delta over the window, or None when it cannot be known (one
    scrape, the series missing, or a reset: the server restarted in between)."""
    if not counter:
        return None
    entry = (counter.get("per_engine") or {}).get(engine) or {}
    return None if entry.get("reset") else entry.get("delta")


@derived_fact("vllm/window", needs=("vllm/metrics-0.txt",))
def vllm_window(facts: Facts) -> dict[str, Any]:
    """Parse every scrape in the facts and summarise the window between the first and last."""
    times = _scrape_times(facts)
    keys = sorted(
        (k for k in facts.keys("vllm/") if METRICS_KEY.match(k)),
        key=lambda k: int(METRICS_KEY.match(k).group(1)),
    )
    scrapes = []
    for key in keys:
        text = facts.get(key)
        if isinstance(text, str):
            scrapes.append(parse_scrape(key, text, times.get(key)))
    try:
        return window_from_scrapes(scrapes)
    except ValueError as exc:  # a finding for vllm-health, not a parser crash
        raise FactMissing("vllm/window", str(exc)) from None
