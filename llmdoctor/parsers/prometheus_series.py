"""What Prometheus answered (`prometheus/query.json`, `prometheus/series.json`), validated.

Everything here came from a server or a bundle someone else wrote: a NaN or out-of-range
timestamp, a string where a list belongs, a label that is a number. The window must be usable
(finite, ordered, a positive step, dates a calendar can show) or the history is missing with
the reason; a point, series or label of the wrong shape is dropped and counted, never raised.

A real point as the API answers it: `[1796073128.138, "0.73"]`; as a bundle keeps it:
`[1796073128.138, 0.73]`.
"""

from __future__ import annotations

import math
from typing import Any

from llmdoctor.engine.facts import FactMissing

SERIES_KEY = "prometheus/series.json"
QUERY_KEY = "prometheus/query.json"
LAST_TIMESTAMP = 253402300799.0  # 9999-12-31T23:59:59Z, the last second a datetime can show
META = ("absent", "failed", "layers")
# values a series cannot take: vLLM's KV usage is a fraction, so 5 is bad data, not "500 %"
VALUE_RANGES = {"kv_cache_usage": (0.0, 1.0)}


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        number = float(value)
    except (ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None


def valid_window(query: Any) -> tuple[float, float, float, float]:
    """(start, end, step, rate range) of the query; FactMissing when they cannot date anything."""
    if not isinstance(query, dict):
        raise FactMissing(QUERY_KEY, "is not a JSON object")
    start, end, step = (_number(query.get(k)) for k in ("start", "end", "step"))
    if start is None or end is None or step is None:
        raise FactMissing(QUERY_KEY, "start, end and step must be finite numbers")
    if not (0 <= start <= end <= LAST_TIMESTAMP) or step <= 0:
        raise FactMissing(
            QUERY_KEY, f"window {start:g} to {end:g} (step {step:g}) is not a time range"
        )
    rate_range = _number(query.get("range"))
    return start, end, step, rate_range if rate_range and rate_range > 0 else 4 * step


def valid_points(values: Any, start: float, end: float, step: float) -> list[list[float]]:
    """The [t, v] pairs with a finite value and a time inside the window (a step of slack)."""
    if not isinstance(values, list):
        return []
    out = []
    for pair in values:
        if not isinstance(pair, list | tuple) or len(pair) != 2:
            continue
        t, v = _number(pair[0]), _number(pair[1])
        if t is not None and v is not None and start - step <= t <= end + step:
            out.append([t, v])
    return out


def valid_labels(labels: Any) -> dict[str, str]:
    if not isinstance(labels, dict):
        return {}
    return {k: str(v) for k, v in labels.items() if isinstance(k, str) and isinstance(v, str | int)}


def clean_series(series: Any, start: float, end: float, step: float) -> dict[str, Any]:
    """The series with every point, series and label of the wrong shape dropped; `dropped`
    counts the points and series that were (0 for a clean answer)."""
    if not isinstance(series, dict):
        raise FactMissing(SERIES_KEY, "is not a JSON object")
    absent = series.get("absent")
    failed = series.get("failed")
    layers = series.get("layers")
    out: dict[str, Any] = {
        "absent": [a for a in absent if isinstance(a, str)] if isinstance(absent, list) else [],
        "failed": {k: str(v) for k, v in failed.items()} if isinstance(failed, dict) else {},
        "layers": {k: str(v) for k, v in layers.items()} if isinstance(layers, dict) else {},
    }
    dropped = 0
    for name, items in series.items():
        if name in META:
            continue
        kept = []
        low, high = VALUE_RANGES.get(name, (-math.inf, math.inf))
        for item in items if isinstance(items, list) else [items]:
            raw = item.get("points") if isinstance(item, dict) else None
            points = [p for p in valid_points(raw, start, end, step) if low <= p[1] <= high]
            dropped += (len(raw) if isinstance(raw, list) else 1) - len(points)
            if points:
                points.sort(key=lambda p: p[0])
                kept.append({"labels": valid_labels(item.get("labels")), "points": points})
        if kept:
            out[name] = kept
    out["dropped"] = dropped
    return out
