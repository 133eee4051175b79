"""Problems in the target's Prometheus history, each with the time it started (`since`).

Reads `prometheus/timeline` (parsers/prometheus_timeline.py). Scope `history` (diagnose, probe).
Silent when no Prometheus was given (`--prometheus`, or a bundle with `prometheus/`); skipped with the reason when Prometheus could not be read or holds no
series of a layer (no DCGM exporter, no kube-state-metrics): absent history is never healthy.
"""

from __future__ import annotations

from typing import Any

from llmdoctor.engine.facts import FactMissing, Facts
from llmdoctor.engine.findings import Finding, Severity, evidence
from llmdoctor.engine.registry import check
from llmdoctor.timeline.view import age, clock, since_text

QUERY_KEY = "prometheus/query.json"
SERIES_KEY = "prometheus/series.json"
TIMELINE_KEY = "prometheus/timeline"
SOURCE = "prometheus"
CRASH_LOOP_RESTARTS = 3
LAYER_SERIES = {
    "gpu": ("xid", "throttle_reasons", "gpu_temp_c", "fb_used_mib"),
    "engine": ("running", "waiting", "kv_cache_usage", "engine_last_seen"),
    "latency": ("ttft_p95", "itl_p95", "finished_rate"),
    "k8s": ("restarts", "last_terminated"),
}
CAUSE_RUNBOOK = {
    "engine_down": "engine-dead",
    "stalled": "engine-wedged",
    "kv_full": "kv-cache-preemption",
    "preemptions": "kv-cache-preemption",
    "queue": "queue-saturation",
}
LAYER_NAMES = {
    "gpu": "DCGM exporter (DCGM_FI_DEV_*)",
    "engine": "vLLM (vllm:*)",
    "latency": "vLLM latency histograms",
    "k8s": "kube-state-metrics (kube_pod_container_*)",
}


def _xid_runbooks() -> tuple[str, ...]:
    from llmdoctor.gpus.xid_policy import load_table

    codes = load_table("xid_catalog")["codes"].values()
    return tuple(sorted({c["runbook"] for c in codes if c.get("runbook")}))


def history(facts: Facts, layer: str) -> dict[str, Any] | None:
    """The timeline, None when no Prometheus was asked; FactMissing when the layer is absent."""
    if not facts.has(QUERY_KEY):
        return None
    timeline = facts.require(TIMELINE_KEY)
    series = timeline["series"]  # validated: only what the timeline could read
    if not any(series.get(name) for name in LAYER_SERIES[layer]):
        query = facts.get(QUERY_KEY) or {}
        failed = [series.get("failed", {}).get(n) for n in LAYER_SERIES[layer]]
        dropped = timeline.get("dropped") or 0
        unread = f" ({dropped} points or series of the wrong shape not read)" if dropped else ""
        why = next((f for f in failed if f), None) or (
            f"no {LAYER_NAMES[layer]} series for {{{query.get('selector')}}}{unread}"
        )
        raise FactMissing(SERIES_KEY, f"Prometheus: {why}")
    return timeline


def _events(timeline: dict, *whats: str) -> list[dict]:
    return [e for e in timeline["events"] if e["what"] in whats]


def _finding(check_id: str, severity: Severity, event: dict, summary: str, now: float, runbooks=()):
    subject = event.get("subject") or None
    items = [evidence(f"{clock(event['since'])} UTC  {event['text']}", SOURCE)]
    return Finding(
        check_id,
        severity,
        f"{summary} {since_text(event, now)}",
        items,
        list(runbooks),
        subject,
        since=event["since"],
    )


def _window_ok(check_id: str, title: str, timeline: dict) -> Finding:
    span = age(timeline["end"] - timeline["start"])
    return Finding(check_id, Severity.OK, f"{title}: nothing in the last {span} of history")


def _add_followers(finding: Finding, event: dict, later: list[dict]) -> None:
    for after in later:
        if after["since"] >= event["since"] and after is not event:
            finding.evidence.append(evidence(f"{clock(after['since'])} UTC  then: {after['text']}"))


@check(
    "history-gpu",
    title="GPU events in the Prometheus history (Xid, slowdown, heat)",
    scope="history",
    runbooks=_xid_runbooks(),
)
def history_gpu(facts: Facts) -> list[Finding] | None:
    """Xids (with what followed), clock slowdowns and heat, each since its start."""
    timeline = history(facts, "gpu")
    if timeline is None:
        return []
    from llmdoctor.gpus.xid_policy import catalog_entry

    now = timeline["end"]
    later = _events(timeline, "engine_down", "terminated", "restart")
    out = []
    for e in _events(timeline, "xid"):
        entry = catalog_entry(e["code"]) or {}
        severity = Severity.CRITICAL if entry.get("severity") == "critical" else Severity.WARNING
        meaning = entry.get("meaning", "a code not in NVIDIA's catalog")
        f = _finding(
            "history-gpu",
            severity,
            e,
            f"Xid {e['code']} ({meaning})",
            now,
            [entry["runbook"]] if entry.get("runbook") else [],
        )
        if entry.get("action"):
            f.evidence.append(evidence(f"action: {entry['action']}"))
        _add_followers(f, e, later)
        out.append(f)
    for e in _events(timeline, "gpu_slowdown", "gpu_hot"):
        out.append(_finding("history-gpu", Severity.WARNING, e, e["text"], now))
    return out or [_window_ok("history-gpu", "GPU (DCGM)", timeline)]


@check(
    "history-engine",
    title="vLLM engine history: down, KV cache full, preemptions, queue",
    scope="history",
    runbooks=("engine-dead", "engine-wedged", "kv-cache-preemption", "queue-saturation"),
)
def history_engine(facts: Facts) -> list[Finding] | None:
    """Engine down or wedged, KV cache full and preemptions, a queue, each since its start."""
    timeline = history(facts, "engine")
    if timeline is None:
        return []
    now = timeline["end"]
    out = []
    for e in _events(timeline, "engine_down"):
        severity = Severity.CRITICAL if e["ongoing"] else Severity.WARNING
        f = _finding("history-engine", severity, e, "vLLM stopped answering", now, ["engine-dead"])
        causes = [c for c in _events(timeline, "xid") if c["since"] <= e["since"]]
        for c in causes:
            f.evidence.append(evidence(f"{clock(c['since'])} UTC  before it: {c['text']}"))
        out.append(f)
    for e in _events(timeline, "stalled"):
        severity = Severity.CRITICAL if e["ongoing"] else Severity.WARNING
        summary = "engine wedged: requests running, no token generated"
        out.append(_finding("history-engine", severity, e, summary, now, ["engine-wedged"]))
    kv = _events(timeline, "kv_full")
    pre = _events(timeline, "preemptions")
    if kv or pre:
        first = min(kv + pre, key=lambda e: e["since"])
        what = "KV cache full" if kv else "requests preempted"
        f = _finding("history-engine", Severity.WARNING, first, what, now, ["kv-cache-preemption"])
        for e in kv + pre:
            if e is not first:
                f.evidence.append(evidence(f"{clock(e['since'])} UTC  {e['text']}", SOURCE))
        out.append(f)
    for e in _events(timeline, "queue"):
        # a queue under the running ceiling follows a full KV cache when one was seen
        kv_bound = "running_ceiling" not in e and (kv or pre)
        runbook = "kv-cache-preemption" if kv_bound else "queue-saturation"
        out.append(
            _finding("history-engine", Severity.WARNING, e, "requests queueing", now, [runbook])
        )
    return out or [_window_ok("history-engine", "vLLM engine", timeline)]


@check(
    "history-latency",
    title="Latency and failed requests history: TTFT and inter-token p95, aborted requests",
    scope="history",
    runbooks=("queue-saturation", "kv-cache-preemption", "engine-wedged", "engine-dead"),
    kind="symptom",
)
def history_latency(facts: Facts) -> list[Finding] | None:
    """Slow first tokens or token stream, aborted requests, with the causes before them."""
    timeline = history(facts, "latency")
    if timeline is None:
        return []
    now = timeline["end"]
    causes = _events(timeline, "engine_down", "stalled", "kv_full", "preemptions", "queue")
    out = []
    names = {
        "ttft_slow": "slow first tokens",
        "itl_slow": "slow token stream",
        "aborted": "requests aborted or failed",
    }
    for e in _events(timeline, *names):
        name = names[e["what"]]
        runbooks = []
        earlier = [c for c in causes if c["since"] <= e["since"]]
        if earlier:
            first = min(earlier, key=lambda c: (c["since"], c["what"] != "stalled"))
            runbooks = [CAUSE_RUNBOOK[first["what"]]]
        f = _finding("history-latency", Severity.WARNING, e, name, now, runbooks)
        for c in earlier:
            f.evidence.append(evidence(f"{clock(c['since'])} UTC  before it: {c['text']}"))
        out.append(f)
    return out or [_window_ok("history-latency", "Latency", timeline)]


@check(
    "history-restarts",
    title="Container restarts in the Prometheus history (kube-state-metrics)",
    scope="history",
    runbooks=("k8s-oomkilled", "engine-dead"),
)
def history_restarts(facts: Facts) -> list[Finding] | None:
    """Container restarts in the window and the last terminated reason."""
    timeline = history(facts, "k8s")
    if timeline is None:
        return []
    now = timeline["end"]
    out = []
    reasons = {e["subject"]: e for e in _events(timeline, "terminated")}
    for e in _events(timeline, "restart"):
        many = e.get("restarts", 0) >= CRASH_LOOP_RESTARTS
        severity = Severity.CRITICAL if many else Severity.WARNING
        summary = f"restarted {e.get('restarts', 0):.0f} time(s), first"
        reason = reasons.get(e["subject"])
        runbooks = []
        if reason is not None:
            runbooks = ["k8s-oomkilled"] if reason["reason"] == "OOMKilled" else ["engine-dead"]
        f = _finding("history-restarts", severity, e, summary, now, runbooks)
        if reason is not None:
            f.evidence.append(evidence(f"{clock(reason['since'])} UTC  {reason['text']}", SOURCE))
        causes = _events(timeline, "xid", "engine_down")
        for c in causes:
            if c["since"] <= e["since"]:
                f.evidence.append(evidence(f"{clock(c['since'])} UTC  before it: {c['text']}"))
        out.append(f)
    return out or [_window_ok("history-restarts", "Restarts", timeline)]
