"""The report's Timeline: first occurrences in order, and one sparkline per key series.

Reads `prometheus/timeline` and `prometheus/series.json` from a report's facts; renders nothing
when no Prometheus history was read. Pure text: the SVG charts are in timeline_charts.py.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from llmdoctor.engine.findings import rfc3339

BARS = "▁▂▃▄▅▆▇█"
SPARK_WIDTH = 40
# (series name, label, unit): the series a postmortem looks at, cause layers first
KEY_SERIES = (
    ("xid", "Xid", ""),
    ("gpu_temp_c", "GPU temp", " C"),
    ("restarts", "restarts", ""),
    ("kv_cache_usage", "KV cache", "%"),
    ("preemption_rate", "preempt/s", "/s"),
    ("running", "running", ""),
    ("waiting", "waiting", ""),
    ("ttft_p95", "TTFT p95", " s"),
    ("itl_p95", "ITL p95", " s"),
    ("generation_tokens_rate", "tokens/s", "/s"),
)
# which onsets to mark on which series' chart
MARKS = {
    "xid": ("xid",),
    "gpu_temp_c": ("gpu_hot",),
    "restarts": ("restart", "terminated"),
    "kv_cache_usage": ("kv_full",),
    "preemption_rate": ("preemptions",),
    "running": ("engine_down",),
    "waiting": ("queue",),
    "ttft_p95": ("ttft_slow",),
    "itl_p95": ("itl_slow",),
}


def clock(seconds: float) -> str:
    """02:41 (UTC)."""
    from datetime import UTC, datetime

    return datetime.fromtimestamp(seconds, UTC).strftime("%H:%M")


def age(seconds: float) -> str:
    """38 min, 2 h 5 min, 40 s."""
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes = seconds // 60
    if minutes < 60:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60} min" if minutes % 60 else f"{minutes // 60} h"


def since_text(event: dict[str, Any], now: float) -> str:
    """'since 02:41 (38 min)', 'since before 01:41 (all 1 h of history)', 'at 02:41, over since'."""
    if event.get("before_window"):
        return f"since before {clock(event['since'])} (all {age(now - event['since'])} of history)"
    if not event.get("ongoing", True):
        return f"at {clock(event['since'])} ({age(now - event['since'])} ago), over by the end"
    return f"since {clock(event['since'])} ({age(now - event['since'])})"


def history_of(report) -> tuple[dict, dict] | None:
    """(timeline, series) of the report's (first pod's) facts, or None without history."""
    found = histories(report)
    return (found[0][1], found[0][2]) if found else None


def histories(report) -> list[tuple[Any, dict, dict]]:
    """(facts, timeline, series) of every pod of the report that has Prometheus history."""
    out = []
    for facts in report.pod_facts or ([report.facts] if report.facts is not None else []):
        timeline, series = facts.get("prometheus/timeline"), facts.get("prometheus/series.json")
        if isinstance(timeline, dict) and isinstance(series, dict):
            out.append((facts, timeline, timeline.get("series", series)))
    return out


def merged(series: dict, name: str) -> list[tuple[float, float]]:
    """One line per name: at each time, the highest of its series (the worst GPU, engine)."""
    by_time: dict[float, float] = {}
    for item in series.get(name) or []:
        for t, v in item["points"]:
            by_time[t] = max(v, by_time.get(t, v))
    return sorted(by_time.items())


def key_lines(series: dict) -> list[tuple[str, str, str, list[tuple[float, float]]]]:
    """(name, label, unit, points) of every key series Prometheus had."""
    return [(n, label, unit, pts) for n, label, unit in KEY_SERIES if (pts := merged(series, n))]


def sparkline(
    points: list[tuple[float, float]], start: float, end: float, width=SPARK_WIDTH, unit=""
) -> str:
    """The points as `width` bars over [start, end] (the highest value per column; blank: none).

    Bars go from 0 (a percentage: 0 to 100 %), or for a temperature from its lowest value."""
    if not points or end <= start:
        return ""
    columns: list[float | None] = [None] * width
    for t, v in points:
        i = min(width - 1, max(0, int((t - start) / (end - start) * width)))
        columns[i] = v if columns[i] is None else max(columns[i], v)
    values = [v for v in columns if v is not None]
    low = min(values) if unit == " C" else min(0.0, min(values))
    high = max(1.0, max(values)) if unit == "%" else max(values)
    span = high - low
    out = []
    for v in columns:
        if v is None:
            out.append(" ")
        elif span <= 0:
            out.append(BARS[0])
        else:
            out.append(BARS[min(len(BARS) - 1, int((v - low) / span * (len(BARS) - 1) + 0.5))])
    return "".join(out)


def fmt_value(value: float, unit: str) -> str:
    """42%, 4.88 s, 67 C, 256, 0.20/s."""
    if unit == "%":
        return f"{value:.0%}"
    if unit == " s":
        return f"{value:.2f} s"
    if unit == " C":
        return f"{value:.0f} C"
    if abs(value) >= 100 or value == int(value):
        return f"{value:.0f}{unit}"
    return f"{value:.2f}{unit}"


def spark_rows(timeline: dict, series: dict) -> list[str]:
    """'KV cache   ▁▁▂▅███  now 100%, max 100%' per key series."""
    rows = []
    width = max(len(label) for _, label, _ in KEY_SERIES)
    for _, label, unit, points in key_lines(series):
        bars = sparkline(points, timeline["start"], timeline["end"], unit=unit)
        last, peak = points[-1][1], max(v for _, v in points)
        rows.append(
            f"{label:<{width}}  {bars}  last {fmt_value(last, unit)}, max {fmt_value(peak, unit)}"
        )
    return rows


def hhmmss(seconds: float) -> str:
    """21:43:08 (UTC)."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%H:%M:%S")


def event_rows(timeline: dict) -> list[tuple[str, str, str, str]]:
    """(time, layer, subject, what) per first occurrence, first first."""
    rows = []
    for e in timeline.get("events") or []:
        when = ("≤ " if e.get("before_window") else "") + hhmmss(e["since"])
        state = "" if e.get("ongoing", True) else " (over by the end)"
        rows.append((when, e["layer"], e.get("subject") or "", e["text"] + state))
    return rows


def header(timeline: dict, report=None, facts=None) -> str:
    """The section title; names the pod when the report covers several (a deployment)."""
    start, end = timeline["start"], timeline["end"]
    facts = facts if facts is not None else (report.facts if report is not None else None)
    target = str(facts.get("target") or "") if facts is not None else ""
    whose = f" of {target}" if target and not report.target.startswith(target) else ""
    return (
        f"Timeline{whose} (UTC, {hhmmss(start)} to {hhmmss(end)}, "
        f"one point per {timeline['step']:g} s, from Prometheus)"
    )


def timeline_json(timeline: dict) -> dict[str, Any]:
    """The `timeline` object of the llmdoctor/2 JSON."""
    events = []
    for e in timeline.get("events") or []:
        item = {k: v for k, v in e.items() if k != "since"}
        events.append({"since": rfc3339(e["since"]), **item})
    return {
        "start": rfc3339(timeline["start"]),
        "end": rfc3339(timeline["end"]),
        "step_s": timeline["step"],
        "events": events,
        "absent": timeline.get("absent") or [],
    }


def render_terminal(report, screen) -> None:
    """Print the Timeline section, one per pod with history (nothing without history), through
    the report's screen (render/report.py `_Screen`: a row wraps under its text in a terminal,
    stays whole in a pipe)."""
    console, escape = screen.console, screen.escape
    for facts, timeline, series in histories(report):
        console.print()
        console.print(f"[bold]{escape(header(timeline, report, facts))}[/]")
        rows = event_rows(timeline)
        if not rows:
            console.print("  [dim]no problem started in this window[/]")
        for when, layer, subject, what in rows:
            who = f" [{subject}]" if subject else ""
            screen.line(f"  {escape(when)}  [dim]{layer:<6}[/] ", f"{what}{who}")
        for row in spark_rows(timeline, series):
            console.print(f"  {escape(row)}", soft_wrap=True)


def render_markdown(report, charts: list[tuple[str, str]] | None = None) -> list[str]:
    """The Timeline section as markdown lines, one per pod with history."""
    out: list[str] = []
    for n, (facts, timeline, series) in enumerate(histories(report)):
        out += [f"### {header(timeline, report, facts)}", ""]
        rows = event_rows(timeline)
        if rows:
            out += ["| time | layer | what |", "|---|---|---|"]
            for when, layer, subject, what in rows:
                who = f" [{subject}]" if subject else ""
                text = f"{what}{who}".replace("|", "\\|")
                out.append(f"| {when} | {layer} | {text} |")
        else:
            out.append("No problem started in this window.")
        out += ["", "```text", *spark_rows(timeline, series), "```", ""]
        if n == 0:  # charts are drawn for the first pod with history
            for label, path in charts or []:
                out += [f"![{label}]({path})", ""]
    return out
