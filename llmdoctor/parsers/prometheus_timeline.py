"""`prometheus/series.json` -> `prometheus/timeline`: when each problem first showed, in order.

Pure: reads the series the Prometheus collector fetched (or a bundle kept) and finds, per
series, the first point where a condition holds (the onset), whether it still holds at the end
(ongoing), and whether it already held when the window opened (before_window: the onset is then
only "at least since"). Onsets are exact to the query step, which is the scrape interval for
windows up to MAX_POINTS scrapes. Events are ordered by onset; ties go to the cause
(CAUSE_ORDER: Xid before engine death before restarts; KV full before preemptions before the
queue before slow first tokens).
"""

from __future__ import annotations

import itertools
import statistics
from typing import Any

from llmdoctor.engine.derive import derived_fact
from llmdoctor.engine.facts import Facts
from llmdoctor.parsers.prometheus_series import clean_series, valid_window

KV_FULL = 0.95
QUEUE_SUSTAIN_POINTS = 3  # a queue counts once requests wait in this many consecutive points
SLOW_SUSTAIN_POINTS = 3
TTFT_FLOOR_S = 1.0  # slow first token: over this and 3x the window's usual p95
ITL_FLOOR_S = 0.2
HOT_C = 87.0  # above the usual slowdown-free range of data-centre GPUs
# DCGM clock throttle / clock event reason bits that are not the GPU idling or an app setting
SLOWDOWN_BITS = {0x8: "HW slowdown", 0x20: "SW thermal", 0x40: "HW thermal", 0x80: "power brake"}
ABORTED_SHARE = 0.10  # of finished requests, for SLOW_SUSTAIN_POINTS points
CAUSE_ORDER = (
    "xid",
    "gpu_slowdown",
    "gpu_hot",
    "engine_down",
    "stalled",
    "terminated",
    "restart",
    "kv_full",
    "preemptions",
    "queue",
    "ttft_slow",
    "itl_slow",
    "aborted",
)


def _subject(labels: dict[str, str]) -> str:
    parts = []
    if labels.get("gpu") is not None:
        parts.append(f"GPU {labels['gpu']}")
    if labels.get("container"):
        parts.append(f"container {labels['container']}")
    if labels.get("model_name"):
        parts.append(labels["model_name"])
    if labels.get("engine"):
        parts.append(f"engine {labels['engine']}")
    return " ".join(parts)


def first_run(points: list[list[float]], holds, sustain: int = 1) -> tuple[int, bool] | None:
    """(index where `holds` first held for `sustain` consecutive points, still holds at the end)."""
    run_start, length = None, 0
    found = None
    for i, (_, value) in enumerate(points):
        if holds(value):
            if length == 0:
                run_start = i
            length += 1
            if length >= sustain and found is None:
                found = run_start
        else:
            length = 0
    if found is None:
        return None
    return found, bool(points) and holds(points[-1][1])


def _event(what, layer, item, index, ongoing, text, start, step, **extra) -> dict[str, Any]:
    points = item["points"]
    since = points[index][0]
    return {
        "what": what,
        "layer": layer,
        "subject": _subject(item.get("labels") or {}),
        "since": since,
        "ongoing": ongoing,
        "before_window": since <= start + step / 2,
        "text": text,
        **extra,
    }


def _baseline(points: list[list[float]]) -> float:
    values = sorted(v for _, v in points)
    return values[len(values) // 4] if values else 0.0


def _gpu_events(series: dict, start: float, step: float) -> list[dict]:
    events = []
    for item in series.get("xid", []):
        hit = first_run(item["points"], lambda v: v > 0)
        if hit:
            i, ongoing = hit
            code = int(item["points"][i][1])
            text = f"Xid {code} (DCGM_FI_DEV_XID_ERRORS)"
            events.append(_event("xid", "gpu", item, i, ongoing, text, start, step, code=code))
    for item in series.get("throttle_reasons", []):
        hit = first_run(item["points"], lambda v: int(v) & sum(SLOWDOWN_BITS) != 0)
        if hit:
            i, ongoing = hit
            bits = int(item["points"][i][1])
            names = ", ".join(n for b, n in SLOWDOWN_BITS.items() if bits & b)
            text = f"clocks slowed: {names} (reasons 0x{bits:x})"
            events.append(_event("gpu_slowdown", "gpu", item, i, ongoing, text, start, step))
    for item in series.get("gpu_temp_c", []):
        hit = first_run(item["points"], lambda v: v >= HOT_C, SLOW_SUSTAIN_POINTS)
        if hit:
            i, ongoing = hit
            peak = max(v for _, v in item["points"][i:])
            text = f"GPU at {item['points'][i][1]:.0f} C (peak {peak:.0f} C)"
            events.append(_event("gpu_hot", "gpu", item, i, ongoing, text, start, step))
    return events


def _scrape_interval(points: list[list[float]], step: float) -> float:
    diffs = [b[1] - a[1] for a, b in itertools.pairwise(points) if b[1] > a[1]]
    return statistics.median(diffs) if diffs else step


def _frontier(series: dict, end: float) -> float:
    """How far the store's data reaches: the newest sample of the pod's other exporters (a
    Thanos or Mimir behind real time must not make every engine look dead), else `end`."""
    newest = [v for item in series.get("exporters_last_seen", []) for _, v in item["points"]]
    return max(newest) if newest else end


def _engine_down(series: dict, start: float, end: float, step: float) -> list[dict]:
    """The engine stops being scraped: its samples stop while the other exporters' go on, or a
    gap in them (it came back)."""
    events = []
    frontier = _frontier(series, end)
    for item in series.get("engine_last_seen", []):
        points = item["points"]
        interval = _scrape_interval(points, step)
        late = 3 * max(interval, step)
        newest = max(v for _, v in points)
        down_at = next(
            (t_v for t_v in points if t_v[0] - t_v[1] > late and t_v[0] <= frontier), None
        )
        if down_at is None and frontier - newest > late:
            down_at = [newest + late, newest]  # gone past Prometheus' lookback
        if down_at is None:
            continue
        last_seen = down_at[1]
        back = any(t - v <= late and t > down_at[0] for t, v in points)
        events.append(
            {
                "what": "engine_down",
                "layer": "engine",
                "subject": _subject(item.get("labels") or {}),
                "since": last_seen + interval,
                "ongoing": not back,
                "before_window": False,
                "text": "vLLM stopped answering its scrapes (engine down or restarting)",
            }
        )
    return events


def _k8s_events(series: dict, start: float, step: float) -> list[dict]:
    events = []
    for item in series.get("restarts", []):
        points = item["points"]
        first = points[0][1]
        hit = first_run(points, lambda v, first=first: v > first)
        if hit:
            i, _ = hit
            added = points[-1][1] - first
            text = f"restarted {added:.0f} time(s) in the window ({points[-1][1]:.0f} in all)"
            events.append(
                _event("restart", "k8s", item, i, True, text, start, step, restarts=added)
            )
    for item in series.get("last_terminated", []):
        hit = first_run(item["points"], lambda v: v > 0)
        if hit:
            i, ongoing = hit
            reason = (item.get("labels") or {}).get("reason", "?")
            text = f"last terminated: {reason}"
            events.append(
                _event("terminated", "k8s", item, i, ongoing, text, start, step, reason=reason)
            )
    return events


def _engine_events(series: dict, start: float, step: float) -> list[dict]:
    events = []
    for item in series.get("kv_cache_usage", []):
        hit = first_run(item["points"], lambda v: v >= KV_FULL)
        if hit:
            i, ongoing = hit
            text = f"KV cache at {item['points'][i][1]:.0%} (full from {KV_FULL:.0%})"
            events.append(_event("kv_full", "engine", item, i, ongoing, text, start, step))
    for item in series.get("preemption_rate", []):
        hit = first_run(item["points"], lambda v: v > 0)
        if hit:
            i, ongoing = hit
            peak = max(v for _, v in item["points"])
            text = f"requests preempted (up to {peak:.2f}/s)"
            events.append(_event("preemptions", "engine", item, i, ongoing, text, start, step))
    running = {_subject(r.get("labels") or {}): r["points"] for r in series.get("running", [])}
    for item in series.get("waiting", []):
        hit = first_run(item["points"], lambda v: v >= 1, QUEUE_SUSTAIN_POINTS)
        if hit:
            i, ongoing = hit
            peak = max(v for _, v in item["points"][i:])
            text = f"requests waiting (up to {peak:.0f})"
            extra: dict[str, Any] = {"peak_waiting": peak}
            run = running.get(_subject(item.get("labels") or {}))
            if run:
                ceiling = max(v for _, v in run)
                held = [v for t, v in run if t >= item["points"][i][0]]
                if held and min(held) >= ceiling:
                    text += f", running held at {ceiling:.0f}"
                    extra["running_ceiling"] = ceiling
            events.append(_event("queue", "engine", item, i, ongoing, text, start, step, **extra))
    for name, what, floor in (
        ("ttft_p95", "ttft_slow", TTFT_FLOOR_S),
        ("itl_p95", "itl_slow", ITL_FLOOR_S),
    ):
        label = "time to first token" if what == "ttft_slow" else "inter-token latency"
        for item in series.get(name, []):
            limit = max(floor, 3 * _baseline(item["points"]))
            hit = first_run(item["points"], lambda v, limit=limit: v > limit, SLOW_SUSTAIN_POINTS)
            if hit:
                i, ongoing = hit
                peak = max(v for _, v in item["points"][i:])
                text = (
                    f"{label} p95 {item['points'][i][1]:.2f}s (peak {peak:.2f}s, over {limit:.2f}s)"
                )
                events.append(_event(what, "engine", item, i, ongoing, text, start, step))
    return events


def _at(points: list[list[float]]) -> dict[float, float]:
    return {t: v for t, v in points}


def _stalls(series: dict, start: float, step: float, rate_range: float) -> list[dict]:
    """Requests running while no token is generated: a wedged engine. The rate is over
    `rate_range`, so it reads 0 only that long after the last token; the onset is moved back."""
    events = []
    tokens = {_subject(i.get("labels") or {}): i for i in series.get("generation_tokens_rate", [])}
    for item in series.get("running", []):
        rate = tokens.get(_subject(item.get("labels") or {}))
        if rate is None:
            continue
        by_time = _at(rate["points"])
        joined = [[t, v if by_time.get(t) == 0 else 0.0] for t, v in item["points"] if t in by_time]
        hit = first_run(joined, lambda v: v >= 1, SLOW_SUSTAIN_POINTS)
        if hit:
            i, ongoing = hit
            text = f"{joined[i][1]:.0f} requests running, no token generated"
            event = _event(
                "stalled", "engine", item | {"points": joined}, i, ongoing, text, start, step
            )
            # rate reads 0 once the window no longer holds the sample before the last increase:
            # that is rate_range after it; the first sample without progress is 2 steps later
            event["since"] = max(start, joined[i][0] - rate_range + 2 * step)
            events.append(event)
    return events


def _aborted(series: dict, start: float, step: float) -> list[dict]:
    """A share of finished requests ending aborted (or in error) over ABORTED_SHARE."""
    totals: dict[float, float] = {}
    bad: dict[float, float] = {}
    for item in series.get("finished_rate", []):
        reason = (item.get("labels") or {}).get("finished_reason", "")
        for t, v in item["points"]:
            totals[t] = totals.get(t, 0.0) + v
            if reason in ("abort", "error"):
                bad[t] = bad.get(t, 0.0) + v
    shares = [[t, bad.get(t, 0.0) / total] for t, total in sorted(totals.items()) if total > 0]
    hit = first_run(shares, lambda v: v >= ABORTED_SHARE, SLOW_SUSTAIN_POINTS)
    if not hit:
        return []
    i, ongoing = hit
    peak = max(v for _, v in shares[i:])
    text = f"{shares[i][1]:.0%} of finished requests aborted or failed (up to {peak:.0%})"
    return [
        _event("aborted", "engine", {"labels": {}, "points": shares}, i, ongoing, text, start, step)
    ]


def timeline_from_series(series: dict[str, Any], query: dict[str, Any]) -> dict[str, Any]:
    """Onsets of every problem the series show, first first (ties: the cause first)."""
    start, end, step, rate_range = valid_window(query)
    series = clean_series(series, start, end, step)
    events = (
        _gpu_events(series, start, step)
        + _engine_down(series, start, end, step)
        + _k8s_events(series, start, step)
        + _engine_events(series, start, step)
        + _stalls(series, start, step, rate_range)
        + _aborted(series, start, step)
    )
    events.sort(key=lambda e: (e["since"], CAUSE_ORDER.index(e["what"]), e["subject"]))
    return {
        "start": start,
        "end": end,
        "step": step,
        "events": events,
        "absent": list(series.get("absent") or []),
        "failed": series["failed"],
        "dropped": series["dropped"],  # points and series of the wrong shape, not read
        "series": series,  # what the events were read from, for the sparklines and charts
    }


@derived_fact("prometheus/timeline", needs=("prometheus/series.json", "prometheus/query.json"))
def prometheus_timeline(facts: Facts) -> dict[str, Any]:
    """The timeline of the fetched (or bundled) series."""
    return timeline_from_series(
        facts.get("prometheus/series.json"), facts.get("prometheus/query.json")
    )
