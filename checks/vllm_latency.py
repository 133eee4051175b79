"""Latency by phase from the window's histograms: queueing first, then prefill, then decode.

From `vllm/window`, per model: p50/p95 of the requests that finished between the two scrapes
(bucket deltas) for queue time, time to first token, inter-token latency and end to end,
against thresholds (settings/max_queue_ms, max_ttft_ms, max_itl_ms, max_e2e_ms). Queueing is
looked at first, because queue time is part of TTFT and of end-to-end latency.
"""

from __future__ import annotations

from typing import Any

from llmdoctor.engine.facts import FactMissing, Facts
from llmdoctor.engine.findings import Finding, Severity, evidence, info, ok
from llmdoctor.engine.registry import check
from llmdoctor.parsers.vllm_engines import queue_seen
from llmdoctor.parsers.vllm_serving import (
    fmt_count,
    fmt_seconds,
    model_subject,
    serving_arg,
    threshold,
    window_text,
)

CHECK = "vllm-latency"
# (histogram concept, what it measures, threshold setting)
PHASES = (
    ("queue_time", "queue time", "max_queue_ms"),
    ("ttft", "time to first token", "max_ttft_ms"),
    ("itl", "inter-token latency", "max_itl_ms"),
    ("e2e", "end-to-end latency", "max_e2e_ms"),
)
CRITICAL_FACTOR = 5.0  # a phase's p95 at 5x its threshold is critical
# what one observation of each histogram is: inter-token latency counts the gaps between tokens
_OBSERVED = {"queue_time": "requests", "ttft": "requests", "itl": "token gaps", "e2e": "requests"}


def _p95_text(entry: dict) -> str:
    more = "+" if entry.get("p95_beyond_last_bucket") else ""
    return f"{fmt_seconds(entry.get('p95'))}{more}"


def _preempted(data: dict) -> bool:
    return bool((data["counters"].get("preemptions") or {}).get("delta"))


def _decode_runbooks(facts: Facts, data: dict) -> list[str]:
    books = []
    if _preempted(data):
        books.append("kv-cache-preemption")
    if serving_arg(facts, "enforce_eager"):
        books.append("enforce-eager-in-production")
    return books or ["queue-saturation"]


def _explain(phase: str, hist: dict, facts: Facts, model: str, data: dict) -> tuple[str, list[str]]:
    queue = hist.get("queue_time") or {}
    if phase == "queue_time":
        ttft = hist.get("ttft") or {}
        tail = f"; TTFT p95 {_p95_text(ttft)} includes it" if ttft.get("p95") is not None else ""
        return f"requests wait in the queue before they are scheduled{tail}", ["queue-saturation"]
    if phase == "ttft":
        q = f" while queue time p95 is {_p95_text(queue)}" if queue.get("p95") is not None else ""
        seen = queue_seen(facts, model, threshold(facts, "max_queue_ms"))
        if seen.queued:
            # the real vLLM 0.32 saturation drill: 10-14 waiting in both scrapes, TTFT p95 4.9 s,
            # and a queue-time histogram whose whole sum is 0.4 ms: the gauges are the evidence
            waited = seen.text.removesuffix(" " + window_text(facts.get("vllm/window") or {}))
            own = f" (vLLM's own queue-time p95 reads {_p95_text(queue)})" if q else ""
            return f"{waited} and the first token waits behind them{own}", ["queue-saturation"]
        # queue time within its threshold (it would be the first slow phase otherwise) and no
        # sustained waiting: the time goes to prefill itself, not to a queue
        if seen.queued is False:
            books = ["kv-cache-preemption"] if _preempted(data) else []
        else:
            books = ["queue-saturation"]
        return (
            f"prefill is slow{q}: long prompts, or prefill competing with decode in each step "
            "(max_num_batched_tokens, chunked prefill)",
            books,
        )
    if phase == "itl":
        return "decode is slow: each output token takes long", _decode_runbooks(facts, data)
    return "requests are long (many output tokens) though each phase is within bounds", []


def _model_finding(model: str, data: dict, window: dict, facts: Facts) -> Finding | None:
    hist = data["histograms"]
    measured = {c: h for c, h in hist.items() if h.get("count", 0) > 0 and h.get("p95") is not None}
    subject = model_subject(model)
    if not hist:
        return None
    if not measured:
        return info(
            CHECK,
            f"no request finished {window_text(window)}; phase latencies not measured",
            [evidence(f"{h['metric']}: 0 new observations") for h in hist.values()],
            [],
            subject,
        )
    since_start = any(h.get("since_start") for h in measured.values())
    scope = "since the server started" if since_start else window_text(window)
    items, slow = [], []
    last_scrape = (window.get("scrapes") or [{"key": "vllm/window"}])[-1]["key"]
    for concept, label, setting in PHASES:
        entry = measured.get(concept)
        if entry is None:
            continue
        limit_ms = threshold(facts, setting)
        # a figure of one scrape (or since a restart) is no window's: said where it was read
        source = (
            f"{last_scrape} (since the server started)"
            if entry.get("since_start")
            else "vllm/window"
        )
        items.append(
            evidence(
                f"{label} ({entry['metric']}): p50 {fmt_seconds(entry['p50'])}, p95 "
                f"{_p95_text(entry)} over {fmt_count(entry['count'])} {_OBSERVED[concept]}; "
                "threshold p95 "
                f"{fmt_seconds(limit_ms / 1000)}",
                source,
            )
        )
        per_engine = entry.get("per_engine") or {}
        if per_engine:
            per = ", ".join(
                f"engine {e}: {fmt_seconds(q['p95'])}"
                for e, q in sorted(per_engine.items(), key=lambda kv: (len(kv[0]), kv[0]))
            )
            items.append(evidence(f"{label} p95 per engine: {per}", source))
        # p95 past the last finite bucket is a lower bound: at the threshold it is over it
        beyond = entry.get("p95_beyond_last_bucket") and entry["p95"] * 1000 >= limit_ms
        if entry["p95"] * 1000 > limit_ms or beyond:
            slow.append((concept, label, entry, limit_ms))
    if not slow:
        parts = ", ".join(
            f"{label} p95 {_p95_text(measured[c])}" for c, label, _ in PHASES if c in measured
        )
        unmeasured = ", ".join(label for c, label, _ in PHASES if c in hist and c not in measured)
        if not unmeasured:
            return ok(CHECK, f"latency within thresholds {scope}: {parts}", items, subject)
        if queue_seen(facts, model, threshold(facts, "max_queue_ms")).queued is False:
            # nothing waits: a phase no request reached in a few seconds is no blind spot (on
            # a loaded CI machine the real healthy drill's probe was answered before vLLM
            # recorded its first token)
            return ok(
                CHECK,
                f"latency within thresholds {scope}: {parts}; {unmeasured} not measured (no "
                "new observations)",
                items,
                subject,
            )
        # requests wait and none reached its first token or its end in the window (20 waiting
        # behind a full cache, the real admission drill): what was not measured is no ✓
        return info(
            CHECK,
            f"{unmeasured} not measured (no new observations {scope}); within thresholds: {parts}",
            items,
            [],
            subject,
        )
    concept, label, entry, limit_ms = slow[0]
    why, runbooks = _explain(concept, hist, facts, model, data)
    others = "".join(
        f"; {lab} p95 {_p95_text(e)} also over"
        + (" (it includes the queue time)" if c == "ttft" and concept == "queue_time" else "")
        for c, lab, e, _ in slow[1:]
    )
    if concept == "queue_time" and any(c == "ttft" for c, *_ in slow[1:]):
        why = "requests wait in the queue before they are scheduled"
    summary = (
        f"slow {label}: p95 {_p95_text(entry)} > {fmt_seconds(limit_ms / 1000)} {scope} — "
        f"{why}{others}"
    )
    if concept == "e2e" or since_start:
        severity = Severity.INFO
    elif entry["p95"] * 1000 >= CRITICAL_FACTOR * limit_ms:
        severity = Severity.CRITICAL
    else:
        severity = Severity.WARNING
    return Finding(CHECK, severity, summary, items, runbooks, subject)


@check(
    CHECK,
    title="vLLM latency by phase (queue, prefill, decode)",
    scope="vllm",
    needs=("vllm/window",),
    runbooks=(
        "queue-saturation",
        "kv-cache-preemption",
        "enforce-eager-in-production",
    ),
    kind="symptom",
    follows=("vllm-kv-cache", "vllm-queue", "vllm-engine"),
)
def vllm_latency(facts: Facts) -> list[Finding]:
    window: dict[str, Any] = facts.require("vllm/window")
    findings = [
        f
        for model, data in sorted(window["models"].items())
        if (f := _model_finding(model, data, window, facts)) is not None
    ]
    if not findings:
        raise FactMissing("vllm/window", "no latency histograms in /metrics")
    return findings
