"""Is each engine making progress? Asleep (sleep mode), wedged, not scheduling, or working.

From `vllm/window`, per model and data-parallel engine. vLLM can answer `/health` 200 for
hours while its engine makes no progress, so progress is read from the counters: requests
running in both scrapes while the generated-token, prompt-token and engine-step counters
(`vllm:iteration_tokens_total` observations) stand still is a wedged engine; requests waiting
with none running and nothing generated is an engine that does not schedule. An engine put to
sleep (`vllm:engine_sleep_state{sleep_state="awake"} 0`, vLLM 0.11+ sleep mode, used between
RL rollouts) is a state, not a fault.
"""

from __future__ import annotations

from typing import Any

from llmdoctor.engine.facts import FactMissing, Facts
from llmdoctor.engine.findings import Finding, Severity, evidence
from llmdoctor.engine.registry import check
from llmdoctor.parsers.k8s_pod import counter_reset_text
from llmdoctor.parsers.vllm_engines import (
    EngineView,
    data_parallel_size,
    engine_name,
    engine_views,
)
from llmdoctor.parsers.vllm_serving import (
    fmt_count,
    frozen_gauges,
    generation_answered,
    model_subject,
    scrape_sources,
    second_scrape_error,
    series_text,
    window_text,
)

CHECK = "vllm-engine"
WAKE_HINT = (
    "wake it with `curl -X POST $URL/wake_up` (the sleep endpoints exist when the server runs "
    "with VLLM_SERVER_DEV_MODE=1; check with GET /is_sleeping), or let the RL trainer that put "
    "it to sleep wake it"
)


def _health(facts: Facts) -> tuple[int | None, str]:
    """(/health status, ' while /health says 200' style text)."""
    health = facts.get("vllm/health.json")
    status = health.get("status") if isinstance(health, dict) else None
    if status == 200:
        return status, " while GET /health says 200"
    if status is not None:
        return status, f" and GET /health answers {status}"
    return None, ""


def _counters_text(view: EngineView) -> str:
    parts = [f"generated tokens +{fmt_count(view.generated)}"]
    if view.prompted is not None:
        parts.append(f"prompt tokens +{fmt_count(view.prompted)}")
    if view.iterations is not None:
        parts.append(f"engine steps +{fmt_count(view.iterations)}")
    return ", ".join(parts)


def _view_evidence(view: EngineView, where: str, window: dict) -> list[dict]:
    name = f"engine {view.engine}"
    items = [
        evidence(
            f"{name}: running {series_text(view.running)}, waiting {series_text(view.waiting)}",
            where,
        )
    ]
    if view.awake:
        items.append(
            evidence(
                f'{name}: vllm:engine_sleep_state{{sleep_state="awake"}} '
                f"{series_text(view.awake)}"
                + (f" ({view.sleep_level})" if view.sleep_level else ""),
                where,
            )
        )
    if view.generated is not None:
        items.append(evidence(f"{name}: {_counters_text(view)} {window_text(window)}", where))
    return items


def _engine_verdict(view: EngineView, facts: Facts, window: dict, engines: int):
    """(severity, summary, runbooks[, whether they are only places to look]) for one engine,
    or None when it simply works."""
    who = engine_name(view, engines) or "the engine"
    status, health_text = _health(facts)
    dead = status in (500, 503)
    if view.asleep:
        level = f" ({view.sleep_level})" if view.sleep_level else ""
        return (
            Severity.INFO,
            f"{who} is asleep{level}: vLLM sleep mode, not a fault; requests wait until it is "
            f"woken: {WAKE_HINT}",
            [],
        )
    if view.stalled():
        seconds = window.get("seconds")
        span = f"{seconds:.0f} s" if seconds else "the window"
        books = ["engine-dead"] if dead else ["engine-wedged"]
        answered = generation_answered(facts)
        if answered:
            # one server cannot stand still and answer: the scrapes and the probe reached
            # different servers (replicas behind one address), or the counters are stale
            return (
                Severity.WARNING,
                f"{who} counted no token in {span} with {series_text(view.running)} requests "
                f"running, yet the generation probe was answered ({answered}) in that time: "
                "the scrapes and the probe reached different servers (one of the replicas "
                "behind this address may be wedged), or /metrics is stale",
                books,
                True,
            )
        if not view.surely_stalled(seconds):
            # without the step counter a long chunked prefill could look the same for seconds
            return (
                Severity.WARNING,
                f"{who} may be wedged: {series_text(view.running)} requests running but no token "
                f"counted in {span}{health_text}; scrape over a longer window (--window 30) to "
                "confirm",
                books,
            )
        steps = " and no engine step" if view.iterations is not None else ""
        return (
            Severity.CRITICAL,
            f"{who} is wedged: {series_text(view.running)} requests running but no token generated"
            f"{steps} in {span}{health_text}",
            books,
        )
    if view.not_scheduling():
        no_tokens = ", and no token was generated" if view.generated == 0 else ""
        return (
            Severity.CRITICAL,
            f"{who} makes no progress: {series_text(view.queued)} requests waiting, none running"
            f"{no_tokens} {window_text(window)}{health_text}",
            ["engine-dead"] if dead else ["engine-wedged"],
        )
    if view.scrapes < 2 and all(view.queued) and not any(view.running):
        return (
            Severity.WARNING,
            f"{fmt_count(view.queued[-1])} requests waiting and none running in a single scrape: "
            f"{who} may be stuck; scrape twice (--window) to confirm",
            ["engine-dead"] if dead else ["engine-wedged"],
        )
    return None


def _progress_text(views: list[EngineView], window: dict) -> str:
    generated = sum(v.generated or 0.0 for v in views)
    if not any(v.running[-1] or v.queued[-1] for v in views) and not generated:
        return f"idle: nothing running or waiting {window_text(window)}"
    prompted = sum(v.prompted or 0.0 for v in views)
    steps = sum(v.iterations or 0.0 for v in views)
    if not generated and (prompted or steps):  # progress, but no "+0 tokens" called progress
        moved = f"+{fmt_count(prompted)} prompt tokens prefilled" if prompted else ""
        moved = moved or f"+{fmt_count(steps)} engine steps"
        return f"{moved}, no token generated yet {window_text(window)}"
    return f"+{fmt_count(generated)} tokens generated {window_text(window)}"


def _model_findings(model: str, data: dict, window: dict, facts: Facts) -> list[Finding]:
    views = engine_views(model, data)
    if not views:
        return []
    declared, dp_source = data_parallel_size(facts, data)
    engines = max(declared, len(views))
    where = scrape_sources(window)
    subject = model_subject(model)
    findings = []
    working = []
    for view in views:
        verdict = _engine_verdict(view, facts, window, engines)
        if verdict is None:
            working.append(view)
            continue
        severity, summary, runbooks, *unproven = verdict
        items = _view_evidence(view, where, window)
        finding = Finding(CHECK, severity, summary, items, runbooks, subject)
        finding.runbooks_unproven = bool(unproven and unproven[0])
        findings.append(finding)
    if working and not findings:
        count = f"{len(working)} engines" if len(working) > 1 else "the engine"
        items = [e for v in working for e in _view_evidence(v, where, window)]
        if engines > 1:
            items.append(evidence(f"data-parallel size {engines} (from {dp_source})"))
        books: list[str] = []
        if any(v.generated is None for v in working):
            # one scrape, a counter reset, or no token counter: progress was not seen
            if not (data.get("counters") or {}).get("generation_tokens"):
                why = "/metrics has no generated-token counter"
            elif any(v.scrapes > 1 for v in working):
                why = counter_reset_text(facts, bool(window.get("restarted")))
            elif second := second_scrape_error(facts):
                why = f"the second scrape failed: {second}"
            elif window.get("rejected"):
                why = (
                    f"one usable scrape: {', '.join(window['rejected'])} rejected (see vllm-health)"
                )
            else:
                why = "scrape twice: --window"
            summary = f"progress of {count} not measured ({why})"
            severity = Severity.INFO
            if window.get("restarted"):
                # proven by the process start time: in an incident that is news (a crash
                # loop, an OOM kill), not a footnote
                severity = Severity.WARNING
        elif unanswered := frozen_gauges(facts, data):
            items.append(evidence(f"generation probe: {unanswered}", "vllm/probe.json"))
            summary = (
                f"progress of {count} cannot be told: /metrics shows "
                f"{_progress_text(working, window)}, yet the generation probe got no answer "
                "in time; the gauges look frozen (a stopped or wedged engine stops updating them)"
            )
            severity, books = Severity.WARNING, ["engine-wedged"]
        else:
            summary = f"{count} awake and making progress: {_progress_text(working, window)}"
            severity = Severity.OK
        findings.append(Finding(CHECK, severity, summary, items, books, subject))
    seen = len(data.get("engines") or [])
    if "pod spec" in dp_source and declared > seen > 0:
        findings.append(
            Finding(
                CHECK,
                Severity.INFO,
                f"the pod asks for --data-parallel-size {declared} but /metrics shows {seen} "
                "engine series: the other engines report elsewhere (multi-node data "
                "parallelism) or have not started",
                [evidence(f"engine labels seen: {', '.join(data.get('engines') or [])}", where)],
                [],
                subject,
            )
        )
    return findings


@check(
    CHECK,
    title="vLLM engine progress (asleep, wedged, not scheduling)",
    scope="vllm",
    needs=("vllm/window",),
    runbooks=("engine-wedged", "engine-dead"),
    follows=("xid", "gpu-health", "pod-restarts"),
)
def vllm_engine(facts: Facts) -> list[Finding]:
    window: dict[str, Any] = facts.require("vllm/window")
    findings = []
    for model, data in sorted(window["models"].items()):
        findings.extend(_model_findings(model, data, window, facts))
    if not findings:
        raise FactMissing(
            "vllm/window",
            "no usable vllm:num_requests_running and num_requests_waiting in /metrics (absent, "
            "or a value ignored: see vllm-health)",
        )
    return findings
