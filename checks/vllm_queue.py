"""The request queue: saturation, judged per data-parallel engine against its own ceiling.

From `vllm/window` (vllm:num_requests_running and vllm:num_requests_waiting in each scrape,
per model and `engine`). `--max-num-seqs` bounds each engine on its own, so an engine whose
running requests sit at that ceiling while requests wait in both scrapes is saturated; engines
are never summed against it. With the ceiling unknown, a plateau is only called saturation
when it sits at one of vLLM's default ceilings. Requests vLLM labels `deferred` (0.11+: KV
transfer, LoRA budget) are not capacity waiting and are reported apart. Engines that sleep or
make no progress are left to `vllm-engine`.
"""

from __future__ import annotations

from typing import Any

from llmdoctor.engine.facts import FactMissing, Facts
from llmdoctor.engine.findings import Finding, Severity, evidence, info
from llmdoctor.engine.registry import check
from llmdoctor.parsers.k8s_pod import counter_reset_text
from llmdoctor.parsers.vllm_engines import (
    EngineView,
    data_parallel_size,
    engine_name,
    engine_views,
)
from llmdoctor.parsers.vllm_refusals import ADMISSION_RUNBOOK
from llmdoctor.parsers.vllm_serving import (
    fmt_count,
    fmt_pct,
    frozen_gauges,
    max_num_seqs,
    model_subject,
    scrape_sources,
    series_text,
    since_start_text,
    threshold,
    went_down_text,
    window_text,
)

CHECK = "vllm-queue"
AT_CEILING = 0.95  # running at >= 95% of max_num_seqs counts as "at the ceiling"
VLLM_DEFAULT_MAX_NUM_SEQS = (128, 256, 1024)


def _default_ceiling(running: list[float]) -> int | None:
    """The vLLM default max_num_seqs that running sits at in every scrape, if any."""
    for default in VLLM_DEFAULT_MAX_NUM_SEQS:
        if all(AT_CEILING * default <= r <= default for r in running):
            return default
    return None


def _trend(waiting: list[float], seconds: float | None) -> str:
    first, last = waiting[0], waiting[-1]
    if last == first:
        return "steady"
    word = "growing" if last > first else "draining"
    rate = f" at {abs(last - first) / seconds:.1f}/s" if seconds else ""
    return f"{word}{rate}"


def _counter_line(entry: dict, window: dict, reset_text: str) -> str:
    """'vllm:…_total: +N over the window', or 'A → B (why)' when the counter went down (a
    restart, or scrapes that reached another server)."""
    if entry.get("reset"):
        return f"{entry['metric']}: {went_down_text(entry, reset_text)}"
    return f"{entry['metric']}: +{fmt_count(entry['delta'])} {window_text(window)}"


def _evidence(
    data: dict, views: list[EngineView], window: dict, ceiling, source, dp, reset_text: str
) -> list:
    gauges, counters = data["gauges"], data["counters"]
    where = scrape_sources(window)
    items = []
    for concept in ("running", "waiting", "waiting_capacity", "waiting_deferred"):
        entry = gauges.get(concept)
        if entry:
            items.append(evidence(f"{entry['metric']}: {series_text(entry['values'])}", where))
    kv = gauges.get("kv_cache_usage")
    if kv:
        items.append(evidence(f"{kv['metric']}: {series_text(kv['values'], fmt_pct)}", where))
    generated = counters.get("generation_tokens", {})
    if generated.get("delta") is not None:
        items.append(evidence(_counter_line(generated, window, reset_text), where))
    engines, dp_source = dp
    if engines > 1 or len(views) > 1:
        per = "; ".join(
            f"engine {v.engine}: running {series_text(v.running)}, waiting {series_text(v.queued)}"
            for v in views
        )
        items.append(evidence(f"data-parallel size {engines} (from {dp_source}): {per}", where))
    if ceiling is not None:
        items.append(evidence(f"max_num_seqs: {ceiling} per engine (from {source})"))
    else:
        items.append(evidence("max_num_seqs: unknown (not in the pod spec; --max-num-seqs N)"))
    return items


def _verdict(
    view: EngineView, window: dict, ceiling: int | None, kv_full: float
) -> tuple[Severity, str, list[str]]:
    """(severity, summary, runbooks) for one engine's queue."""
    running, waiting = view.running, view.queued
    last_r, last_w = fmt_count(running[-1]), fmt_count(waiting[-1])
    if not any(waiting):
        return Severity.OK, f"no queue: {last_r} running, 0 waiting {window_text(window)}", []
    if not all(w > 0 for w in waiting):
        return (
            Severity.INFO,
            f"a short queue in one scrape only (waiting {series_text(waiting)}); not sustained",
            ["queue-saturation"],
        )
    if not any(running):
        return (
            Severity.INFO,
            f"{series_text(waiting)} waiting with none running: not a capacity queue (whether "
            "the engine works is vllm-engine's finding)",
            [],
        )
    if len(running) < 2:
        if _at_ceiling_once(view, ceiling):
            return (
                Severity.WARNING,
                f"{last_w} requests waiting with {last_r} running at max_num_seqs {ceiling} in a "
                "single scrape; scrape twice (--window) to see whether it lasts",
                ["queue-saturation"],
            )
        return (
            Severity.WARNING,
            f"{last_w} requests waiting with {last_r} running in a single scrape; scrape twice "
            "(--window) to tell a burst from saturation",
            ["queue-saturation"],
        )
    trend = _trend(waiting, window.get("seconds"))
    kv_values = [v for v in view.kv if v is not None]
    kv_bound = bool(kv_values) and max(kv_values) >= kv_full
    default = _default_ceiling(running) if ceiling is None else None
    if ceiling is not None and min(running) >= AT_CEILING * ceiling:
        limit = f"at max_num_seqs {ceiling}"
    elif ceiling is not None and max(running) >= AT_CEILING * ceiling:
        # 3 → 4 at --max-num-seqs 4 with requests waiting throughout is no batch "below" it
        limit = f"reaching max_num_seqs {ceiling}"
    elif default is not None:
        limit = (
            f"on a plateau (max_num_seqs unknown; {default} is vLLM's default --max-num-seqs "
            "on many GPUs)"
        )
    else:
        limit = None
    if limit is not None:
        kv_note = f"; the KV cache is also full ({fmt_pct(max(kv_values))})" if kv_bound else ""
        return (
            Severity.CRITICAL,
            f"queue saturated: running {series_text(running)} {limit}, waiting "
            f"{series_text(waiting)} ({trend}){kv_note}",
            ["queue-saturation", *(["kv-cache-preemption"] if kv_bound else [])],
        )
    if ceiling is not None:
        below = f"below max_num_seqs {ceiling}"
    else:
        below = "not at a known ceiling (max_num_seqs unknown; give --max-num-seqs)"
    if kv_bound:
        return (
            Severity.WARNING,
            f"requests waiting ({series_text(waiting)}, {trend}) while running "
            f"({series_text(running)}) is {below}: the KV cache ({fmt_pct(max(kv_values))}) is "
            "the limit",
            ["kv-cache-preemption", "queue-saturation"],
        )
    return (
        Severity.WARNING,
        f"requests waiting in both scrapes ({series_text(waiting)}, {trend}) while running "
        f"({series_text(running)}) is {below}: admission is limited by the per-step token "
        "budget (max_num_batched_tokens) or by bursts of arrivals",
        ["queue-saturation"],
    )


def _at_ceiling_once(view: EngineView, ceiling: int | None) -> bool:
    """A single scrape with requests waiting while the batch is at a known max_num_seqs: what
    queue-saturation says ("running at max_num_seqs, many waiting"), seen once."""
    return ceiling is not None and bool(view.running) and view.running[-1] >= AT_CEILING * ceiling


def _deferred_note(views: list[EngineView]) -> str:
    deferred = [v.waiting_deferred[-1] for v in views if v.waiting_deferred]
    if not deferred or not sum(deferred):
        return ""
    return (
        f"; {fmt_count(sum(deferred))} more deferred (KV transfer, LoRA budget): not waiting "
        "for capacity"
    )


def _model_finding(
    model: str, data: dict, window: dict, facts: Facts, ceiling, source, kv_full, reset_text
) -> Finding | None:
    views = engine_views(model, data)
    if not views:
        return None
    dp = data_parallel_size(facts, data)
    engines = max(dp[0], len(views))
    items = _evidence(data, views, window, ceiling, source, dp, reset_text)
    above = max((r for v in views for r in v.running if r is not None), default=0)
    if ceiling is not None and above > ceiling:
        # an engine never runs more than its max_num_seqs: the value is not this server's
        items.append(
            evidence(
                f"max_num_seqs {ceiling} (from {source}) is contradicted: {fmt_count(above)} "
                "requests ran on one engine; it is not this server's setting, so no ceiling "
                "is judged"
            )
        )
        ceiling = None
    subject = model_subject(model)
    seconds = window.get("seconds")
    judged = [
        v
        for v in views
        if not v.asleep and not v.surely_stalled(seconds) and not v.not_scheduling()
    ]
    left_out = [v for v in views if v not in judged]
    aside = ""
    if left_out:
        names = ", ".join(engine_name(v, engines) or "the engine" for v in left_out)
        aside = f"; {names} not judged (asleep or making no progress: see vllm-engine)"
    if judged and (unanswered := frozen_gauges(facts, data)):
        return info(
            CHECK,
            "queue not judged: the gauges look frozen (no token counted while the generation "
            f"probe hung: {unanswered}; see vllm-engine)",
            items,
            [],
            subject,
        )
    if not judged:
        who = "the engines are" if len(left_out) > 1 else "the engine is"
        return info(
            CHECK,
            f"queue not judged: {who} asleep or making no progress (see vllm-engine)",
            items,
            [],
            subject,
        )
    verdicts = [(v, *_verdict(v, window, ceiling, kv_full)) for v in judged]
    worst = max(verdicts, key=lambda x: x[1].rank)
    view, severity, summary, runbooks = worst
    if engines > 1:
        same = [v for v, s, *_ in verdicts if s is severity]
        if severity is Severity.OK:
            running = "/".join(fmt_count(v.running[-1]) for v in judged)
            summary = (
                f"no queue on any of {len(judged)} engines (running {running}, 0 waiting) "
                f"{window_text(window)}"
            )
        elif len(same) > 1:
            names = ", ".join(v.engine for v in same)
            summary = f"engines {names} of {engines}: {summary} (engine {view.engine})"
        else:
            summary = f"engine {view.engine} of {engines}: {summary}"
    summary += _deferred_note(views) + aside
    found = Finding(CHECK, severity, summary, items, runbooks if severity.rank else [], subject)
    # one scrape cannot tell a burst from saturation: the runbook is a place to look, and the
    # story's headline must not say "saturated" over a finding that asks for a second scrape
    found.runbooks_unproven = (
        len(view.running) < 2 and bool(found.runbooks) and not _at_ceiling_once(view, ceiling)
    )
    return found


def _admission_finding(model: str, data: dict, window: dict, reset_text: str) -> Finding | None:
    """Requests vLLM's admission control refused with a 503 (0.32+), in the window or ever."""
    entry = data["counters"].get("admission_rejections")
    if not entry or not entry.get("last"):
        return None
    where = scrape_sources(window)
    what = "admission control (--max-num-queued-reqs / --max-num-queued-tokens) answered 503"
    delta = entry.get("delta")
    if delta:
        severity = Severity.WARNING
        summary = (
            f"vLLM turned {fmt_count(delta)} requests away {window_text(window)}: {what}; the "
            "server works and is full"
        )
        items = [evidence(_counter_line(entry, window, reset_text), where)]
    else:
        severity = Severity.INFO
        summary = (
            f"vLLM has turned {fmt_count(entry['last'])} requests away "
            f"{since_start_text(window)} ({what}), none {window_text(window)}"
        )
        items = [evidence(f"{entry['metric']}: {fmt_count(entry['last'])}", where)]
    return Finding(CHECK, severity, summary, items, [ADMISSION_RUNBOOK], model_subject(model))


@check(
    CHECK,
    title="vLLM request queue (saturation per engine)",
    scope="vllm",
    needs=("vllm/window",),
    runbooks=("queue-saturation", "kv-cache-preemption", ADMISSION_RUNBOOK),
    supersedes=("log-signatures",),
    follows=("vllm-kv-cache",),
)
def vllm_queue(facts: Facts) -> list[Finding]:
    window: dict[str, Any] = facts.require("vllm/window")
    ceiling, source = max_num_seqs(facts)
    kv_full = threshold(facts, "kv_cache_full")
    reset_text = counter_reset_text(facts, bool(window.get("restarted")))
    findings = []
    for model, data in sorted(window["models"].items()):
        finding = _model_finding(model, data, window, facts, ceiling, source, kv_full, reset_text)
        if finding is not None:
            findings.append(finding)
        refused = _admission_finding(model, data, window, reset_text)
        if refused is not None:
            findings.append(refused)
    if not findings:
        raise FactMissing(
            "vllm/window",
            "no usable vllm:num_requests_running and num_requests_waiting in /metrics (absent, "
            "or a value ignored: see vllm-health)",
        )
    return findings
