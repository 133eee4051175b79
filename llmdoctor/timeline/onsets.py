"""Give the live checks' findings the start that the Prometheus history shows.

A live check sees now (a full queue, a restart count); the timeline (`prometheus/timeline`) knows
since when. A problem finding of a check in LIVE_TO_EVENTS gets `since` from the earliest
matching event that still holds at the end of the window, and one evidence line saying so; the
findings are then ordered again (causes first, then by start). Pure: reads the report's facts.
"""

from __future__ import annotations

from llmdoctor.engine.findings import Severity, evidence

# live check -> the timeline events that date its problem
LIVE_TO_EVENTS = {
    "vllm-queue": ("queue",),
    "vllm-kv-cache": ("kv_full", "preemptions"),
    "vllm-latency": ("ttft_slow", "itl_slow"),
    "vllm-engine": ("stalled",),
    "vllm-health": ("engine_down", "stalled"),
    "vllm-generation": ("engine_down", "stalled"),
    "pod-restarts": ("restart",),
    "xid": ("xid",),
    "gpu-health": ("gpu_slowdown", "gpu_hot"),
}


def date_live_findings(report) -> None:
    """Set `since` on the report's live problem findings from its pod's history (in place)."""
    from llmdoctor.engine.report import finding_order
    from llmdoctor.timeline.view import clock, since_text

    timeline = report.facts.get("prometheus/timeline") if report.facts is not None else None
    if not isinstance(timeline, dict):
        return
    ongoing = [e for e in timeline.get("events") or [] if e.get("ongoing")]
    for f in report.findings:
        whats = LIVE_TO_EVENTS.get(f.check)
        if not whats or f.since is not None or f.severity in (Severity.OK, Severity.INFO):
            continue
        matching = [e for e in ongoing if e["what"] in whats]
        if not matching:
            continue
        first = min(matching, key=lambda e: e["since"])
        f.since = first["since"]
        text = f"{clock(first['since'])} UTC  Prometheus history: {first['text']}, "
        f.evidence.append(evidence(text + since_text(first, timeline["end"]), "prometheus"))
    report.findings.sort(key=finding_order)
