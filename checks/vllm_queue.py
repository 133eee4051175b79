"""The request queue: saturation at the running ceiling, and a stuck engine.

From `vllm/window` (vllm:num_requests_running and vllm:num_requests_waiting in each scrape),
per model. Requests waiting in both scrapes while running sits at its ceiling (max_num_seqs
when known, else a plateau) is queue saturation; requests waiting with nothing running and no
token generated is a stuck engine.
"""

from __future__ import annotations

from typing import Any

from llmdoctor.facts import FactMissing, Facts
from llmdoctor.findings import Finding, critical, evidence, info, ok, warning
from llmdoctor.parsers.vllm_serving import (
    fmt_count,
    fmt_pct,
    max_num_seqs,
    model_subject,
    scrape_sources,
    series_text,
    threshold,
    window_text,
)
from llmdoctor.registry import check

CHECK = "vllm-queue"
AT_CEILING = 0.95  # running at >= 95% of max_num_seqs counts as "at the ceiling"
VLLM_DEFAULT_MAX_NUM_SEQS = (128, 256, 1024)


def _plateau(running: list[float]) -> bool:
    first, last = running[0], running[-1]
    return first > 0 and abs(last - first) <= max(2.0, 0.05 * max(first, last))


def _trend(waiting: list[float], seconds: float | None) -> str:
    first, last = waiting[0], waiting[-1]
    if last == first:
        return "steady"
    word = "growing" if last > first else "draining"
    rate = f" at {abs(last - first) / seconds:.1f}/s" if seconds else ""
    return f"{word}{rate}"


def _evidence(data: dict, window: dict, ceiling: int | None, source: str) -> list[dict]:
    gauges, counters = data["gauges"], data["counters"]
    where = scrape_sources(window)
    items = [
        evidence(
            f"{gauges['running']['metric']}: {series_text(gauges['running']['values'])}", where
        ),
        evidence(
            f"{gauges['waiting']['metric']}: {series_text(gauges['waiting']['values'])}", where
        ),
    ]
    kv = gauges.get("kv_cache_usage")
    if kv:
        items.append(evidence(f"{kv['metric']}: {series_text(kv['values'], fmt_pct)}", where))
    generated = counters.get("generation_tokens", {})
    if generated.get("delta") is not None:
        items.append(
            evidence(
                f"{generated['metric']}: +{fmt_count(generated['delta'])} {window_text(window)}",
                where,
            )
        )
    if ceiling is not None:
        items.append(evidence(f"max_num_seqs: {ceiling} (from {source})"))
    else:
        items.append(evidence("max_num_seqs: unknown (not in the pod spec; --max-num-seqs N)"))
    return items


def _model_finding(
    model: str, data: dict, window: dict, ceiling: int | None, source: str, kv_full: float
) -> Finding | None:
    gauges = data["gauges"]
    if "running" not in gauges or "waiting" not in gauges:
        return None
    running = [v or 0.0 for v in gauges["running"]["values"]]
    waiting = [v or 0.0 for v in gauges["waiting"]["values"]]
    subject = model_subject(model)
    items = _evidence(data, window, ceiling, source)
    last_r, last_w = fmt_count(running[-1]), fmt_count(waiting[-1])
    if not any(waiting):
        return ok(
            CHECK, f"no queue: {last_r} running, 0 waiting {window_text(window)}", items, subject
        )
    queued_in_all = all(w > 0 for w in waiting)
    generated = data["counters"].get("generation_tokens", {}).get("delta")
    if queued_in_all and not any(running) and not generated:
        if len(running) < 2:
            return warning(
                CHECK,
                f"{last_w} requests waiting and none running in a single scrape: the engine may "
                "be stuck; scrape twice (--window) to confirm",
                items,
                ["engine-dead"],
                subject,
            )
        no_tokens = ", and no token was generated" if generated == 0 else ""
        return critical(
            CHECK,
            f"engine looks stuck: {series_text(waiting)} requests waiting, none running"
            f"{no_tokens} {window_text(window)}",
            items,
            ["engine-dead"],
            subject,
        )
    if not queued_in_all:
        return info(
            CHECK,
            f"a short queue in one scrape only (waiting {series_text(waiting)}); not sustained",
            items,
            ["queue-saturation"],
            subject,
        )
    if len(running) < 2:
        return warning(
            CHECK,
            f"{last_w} requests waiting with {last_r} running in a single scrape; scrape twice "
            "(--window) to tell a burst from saturation",
            items,
            ["queue-saturation"],
            subject,
        )
    trend = _trend(waiting, window.get("seconds"))
    kv_values = [v for v in (gauges.get("kv_cache_usage") or {}).get("values", []) if v is not None]
    kv_bound = bool(kv_values) and max(kv_values) >= kv_full
    if ceiling is not None and min(running) >= AT_CEILING * ceiling:
        limit = f"at max_num_seqs {ceiling}"
    elif ceiling is None and _plateau(running):
        hint = (
            f"; {fmt_count(max(running))} is vLLM's default --max-num-seqs on many GPUs"
            if int(max(running)) in VLLM_DEFAULT_MAX_NUM_SEQS
            else ""
        )
        limit = f"on a plateau (max_num_seqs unknown{hint})"
    else:
        limit = None
    if limit is not None:
        kv_note = f"; the KV cache is also full ({fmt_pct(max(kv_values))})" if kv_bound else ""
        return critical(
            CHECK,
            f"queue saturated: running {series_text(running)} {limit}, waiting "
            f"{series_text(waiting)} ({trend}){kv_note}",
            items,
            ["queue-saturation", *(["kv-cache-preemption"] if kv_bound else [])],
            subject,
        )
    below = f"below max_num_seqs {ceiling}" if ceiling is not None else "not on a plateau"
    if kv_bound:
        return warning(
            CHECK,
            f"requests waiting ({series_text(waiting)}, {trend}) while running "
            f"({series_text(running)}) is {below}: the KV cache ({fmt_pct(max(kv_values))}) is "
            "the limit",
            items,
            ["kv-cache-preemption", "queue-saturation"],
            subject,
        )
    return warning(
        CHECK,
        f"requests waiting in both scrapes ({series_text(waiting)}, {trend}) while running "
        f"({series_text(running)}) is {below}: admission is limited by the per-step token "
        "budget (max_num_batched_tokens) or by bursts of arrivals",
        items,
        ["queue-saturation"],
        subject,
    )


@check(
    CHECK,
    title="vLLM request queue (saturation, stuck engine)",
    scope="vllm",
    needs=("vllm/window",),
    runbooks=("queue-saturation", "engine-dead", "kv-cache-preemption"),
    supersedes=("log-signatures",),
)
def vllm_queue(facts: Facts) -> list[Finding]:
    window: dict[str, Any] = facts.require("vllm/window")
    ceiling, source = max_num_seqs(facts)
    kv_full = threshold(facts, "kv_cache_full")
    findings = []
    for model, data in sorted(window["models"].items()):
        finding = _model_finding(model, data, window, ceiling, source, kv_full)
        if finding is not None:
            findings.append(finding)
    if not findings:
        raise FactMissing(
            "vllm/window", "no vllm:num_requests_running / num_requests_waiting in /metrics"
        )
    return findings
