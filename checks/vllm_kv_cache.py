"""KV cache pressure: usage at or above 95% and/or preemptions rising in the window.

A full cache is a warning only when something suffers from it: requests waiting, swapped or
preempted. vLLM fills the cache with its running requests by design, so a full cache with
nothing waiting and no preemption in the window is a note (no headroom left), not a problem.

From `vllm/window`, per model: vllm:kv_cache_usage_perc (V1; V0 vllm:gpu_cache_usage_perc), the
vllm:num_preemptions_total delta and rate between the scrapes, and V0's swapped requests.
A usage outside 0..1 is bad data (another exporter, a rescaled series), never "500 %".
"""

from __future__ import annotations

from typing import Any

from llmdoctor.engine.facts import FactMissing, Facts
from llmdoctor.engine.findings import Finding, critical, evidence, info, ok, warning
from llmdoctor.engine.registry import check
from llmdoctor.parsers.k8s_pod import counter_reset_text
from llmdoctor.parsers.vllm_engines import is_fraction
from llmdoctor.parsers.vllm_serving import (
    fmt_count,
    fmt_pct,
    frozen_gauges,
    model_subject,
    scrape_sources,
    series_text,
    since_start_text,
    threshold,
    went_down_text,
    window_text,
)

CHECK = "vllm-kv-cache"
PREEMPTIONS = "vllm:num_preemptions_total"


def _rate(counter: dict) -> str:
    rate = counter.get("rate_per_s")
    if rate is None:
        return ""
    return f" ({rate:.2f}/s)" if abs(rate) < 1e6 else f" ({fmt_count(rate)}/s)"


def cache_text(cache: dict) -> str:
    """'KV cache: 5517 blocks × 16 tokens = 88,272 tokens, cache_dtype auto, ...'."""
    parts = []
    blocks, size = cache.get("num_gpu_blocks"), cache.get("block_size")
    if isinstance(blocks, int) and isinstance(size, int):
        parts.append(f"{blocks} blocks × {size} tokens = {blocks * size:,} tokens per engine")
    elif isinstance(size, int):
        parts.append(f"block_size {size}")
    for name in ("cache_dtype", "gpu_memory_utilization"):
        if cache.get(name) is not None:
            parts.append(f"{name} {cache[name]}")
    return "KV cache (vllm:cache_config_info): " + ", ".join(parts)


def _waiting(gauges: dict) -> list[float] | None:
    """The requests waiting for capacity in each scrape (vLLM 0.11+ tells them from deferred
    ones), or None when /metrics does not say."""
    return _gauge_values(gauges, ("waiting_capacity", "waiting"))


def _gauge_values(gauges: dict, concepts: tuple[str, ...]) -> list[float] | None:
    """The first of these gauges read in every scrape, or None when /metrics does not say."""
    for concept in concepts:
        values = (gauges.get(concept) or {}).get("values")
        if values and all(isinstance(v, int | float) for v in values):
            return list(values)
    return None


def _model_finding(
    model: str,
    data: dict,
    window: dict,
    full_at: float,
    reset_text: str,
    frozen: str | None,
) -> Finding | None:
    gauges, counters = data["gauges"], data["counters"]
    kv = gauges.get("kv_cache_usage")
    pre = counters.get("preemptions")
    if kv is None and pre is None:
        return None
    where = scrape_sources(window)
    items = []
    values = [v for v in (kv or {}).get("values", []) if v is not None]
    usage = [v for v in values if is_fraction(v)]
    bad = [v for v in values if not is_fraction(v)]
    peak = max(usage) if usage else None
    if bad:
        items.append(
            evidence(
                f"{kv['metric']}: {series_text(kv['values'])}: not a fraction between 0 and 1, "
                "so not read as KV usage",
                where,
            )
        )
    elif kv is not None:
        items.append(evidence(f"{kv['metric']}: {series_text(kv['values'], fmt_pct)}", where))
        engines = [e for e in kv.get("per_engine") or [] if e]
        if engines and len(engines[-1]) > 1:
            per = ", ".join(f"engine {k}: {fmt_pct(v)}" for k, v in sorted(engines[-1].items()))
            items.append(evidence(f"per engine (last scrape): {per}", where))
    rising = False
    delta_text = ""
    if pre is not None:
        if pre.get("delta") is not None:
            rising = pre["delta"] > 0
            delta_text = f"+{fmt_count(pre['delta'])} {window_text(window)}{_rate(pre)}"
            shown = went_down_text(pre, reset_text) if pre.get("reset") else delta_text
            items.append(evidence(f"{pre['metric']}: {shown}", where))
        else:
            since = since_start_text(window)
            items.append(evidence(f"{pre['metric']}: {fmt_count(pre.get('last'))} {since}", where))
    per_engine = (pre or {}).get("per_engine") or {}
    if len(per_engine) > 1 and rising:
        moved = ", ".join(
            f"engine {e}: +{fmt_count(d['delta'])}"
            for e, d in sorted(per_engine.items())
            if d.get("delta")
        )
        items.append(evidence(f"preemptions per engine: {moved}", where))
    cache = window.get("cache") or {}
    if cache:
        items.append(evidence(cache_text(cache), "vllm:cache_config_info"))
    swapped = gauges.get("swapped")
    swapped_now = (swapped or {}).get("values", [None])[-1]
    if swapped_now:
        items.append(evidence(f"{swapped['metric']}: {series_text(swapped['values'])}", where))
    full = peak is not None and peak >= full_at
    subject = model_subject(model)
    last = next((e for e in reversed((kv or {}).get("per_engine") or []) if e), {})
    last = {e: v for e, v in last.items() if is_fraction(v)}
    if len(last) > 1 and full:
        # with data parallelism, name the engine that is full: the others may have room
        fullest = max(last, key=lambda e: last[e])
        full_engines = sorted(e for e, v in last.items() if v >= full_at)
        which = (
            "engines " + ", ".join(full_engines) if len(full_engines) > 1 else f"engine {fullest}"
        )
        subject = f"{subject} ({which} of {len(last)})"
    runbooks = ["kv-cache-preemption"]
    if full and rising:
        return critical(
            CHECK,
            f"KV cache full ({fmt_pct(peak)}) and preemptions rising ({delta_text}): requests "
            "are evicted and recomputed, so latency climbs",
            items,
            runbooks,
            subject,
        )
    if rising:
        # vLLM preempts only when no block is free: the cache was full between the scrapes,
        # whatever the gauge read at them
        where_kv = f" (it read {fmt_pct(peak)} at most when scraped)" if peak is not None else ""
        return warning(
            CHECK,
            f"preemptions rising ({delta_text}): the KV cache ran out of free blocks between "
            f"the scrapes{where_kv}",
            items,
            runbooks,
            subject,
        )
    if full:
        waiting = _waiting(gauges)
        running = _gauge_values(gauges, ("running",))
        unpreempted = pre is not None and 0 in (pre.get("delta"), pre.get("last"))
        if waiting is not None and not any(waiting) and not swapped_now and unpreempted:
            if running is not None and not any(running):
                return warning(
                    CHECK,
                    f"KV cache at {fmt_pct(peak)} (>= {fmt_pct(full_at)}) with no request "
                    f"running or waiting {window_text(window)}: the blocks are held by nothing "
                    "that runs (blocks not freed, or a stale series); new requests will wait "
                    "for free blocks",
                    items,
                    runbooks,
                    subject,
                )
            # vLLM fills the cache with the requests it runs, by design: full is not yet short
            return info(
                CHECK,
                f"KV cache at {fmt_pct(peak)} (>= {fmt_pct(full_at)}) with 0 waiting "
                f"{window_text(window)} and no preemptions in it: the running requests fill it, "
                "nothing waits for blocks yet; the headroom is gone, so the next burst will "
                "queue or preempt",
                items,
                runbooks,
                subject,
            )
        swap = f"; {fmt_count(swapped_now)} requests swapped to CPU" if swapped_now else ""
        waits = f"; waiting {series_text(waiting)}" if waiting and any(waiting) else ""
        return warning(
            CHECK,
            f"KV cache at {fmt_pct(peak)} (>= {fmt_pct(full_at)}): new requests wait for free "
            f"blocks, and preemptions follow if it stays full{waits}{swap}",
            items,
            runbooks,
            subject,
        )
    if bad and not usage:
        return warning(
            CHECK,
            f"KV-cache usage reads {max(bad, key=abs):g}, not a fraction between 0 and 1: bad "
            "data (another exporter on the port, or a rescaled series), so KV pressure is not "
            "judged",
            items,
            [],
            subject,
        )
    if frozen:
        return info(
            CHECK,
            "KV cache not judged: the gauges look frozen (no token counted while the generation "
            f"probe hung: {frozen}; see vllm-engine)",
            items,
            [],
            subject,
        )
    at = f"KV cache at {fmt_pct(peak)}, " if peak is not None else ""
    earlier = (pre or {}).get("last")
    if pre is None:
        unreadable = [e for e in window.get("parse_errors") or [] if PREEMPTIONS in e]
        if unreadable:  # exposed, but not a count: not the same as a server that never preempted
            return info(CHECK, f"{at}preemptions not judged: {unreadable[0]}", items, [], subject)
        preempted = "preemption counter not exposed"
    elif pre.get("delta") == 0:  # a rise was judged above
        preempted = f"no preemptions {window_text(window)}"
    elif earlier == 0:  # one scrape, or the counter in one of two: its total still tells
        preempted = f"no preemptions {since_start_text(window)}"
    elif len(window.get("scrapes") or []) > 1:
        preempted = "no rate of preemptions (the counter is missing from one scrape)"
    else:
        preempted = "no rate of preemptions (one scrape)"
    if earlier:
        # quiet now, or not measured, but the cache has run out before: pressure that comes and
        # goes in bursts
        if pre.get("delta") is not None:  # else the evidence above says it already
            items.append(
                evidence(f"{pre['metric']}: {fmt_count(earlier)} {since_start_text(window)}", where)
            )
        return info(
            CHECK,
            f"{at}{preempted}, but {fmt_count(earlier)} {since_start_text(window)}: the cache has "
            "run full before (scrape again over a longer window to see whether it comes back)",
            items,
            runbooks,
            subject,
        )
    if peak is None:
        # exposed but not a reading (NaN, a percent): said so, not "not exposed"
        ignored = [e for e in window.get("parse_errors") or [] if "cache_usage_perc" in e]
        usage = f"KV usage not read: {ignored[0]}" if ignored else "KV usage not exposed"
        return ok(CHECK, f"{preempted} ({usage})", items, subject)
    return ok(CHECK, f"{at}{preempted}", items, subject)


@check(
    CHECK,
    title="vLLM KV cache usage and preemptions",
    scope="vllm",
    needs=("vllm/window",),
    runbooks=("kv-cache-preemption",),
)
def vllm_kv_cache(facts: Facts) -> list[Finding]:
    window: dict[str, Any] = facts.require("vllm/window")
    full_at = threshold(facts, "kv_cache_full")
    findings = [
        f
        for model, data in sorted(window["models"].items())
        if (
            f := _model_finding(
                model,
                data,
                window,
                full_at,
                counter_reset_text(facts, bool(window.get("restarted"))),
                frozen_gauges(facts, data),
            )
        )
        is not None
    ]
    if not findings:
        raise FactMissing("vllm/window", "no KV-cache usage or preemption counter in /metrics")
    return findings
