"""Plain readers of Kubernetes objects for the pod checks: quantities, containers, events, probes.

Pure functions over the JSON that `kubectl get pod/events/node -o json` prints, e.g. an event:

    {"kind": "Event", "type": "Warning", "reason": "FailedScheduling", "count": 2,
     "message": "0/2 nodes are available: 2 Insufficient nvidia.com/gpu. preemption: ...",
     "involvedObject": {"kind": "Pod", "name": "vllm-1"}, "lastTimestamp": "2023-08-21T05:39:46Z"}
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

GPU = "nvidia.com/gpu"
BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
DECIMAL = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18, "m": 1e-3}
QUANTITY = re.compile(r"^([+-]?\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E|m)?$")
GO_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(h|ms|us|µs|ns|m|s)")
GO_SCALE = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


def quantity(value: Any) -> float | None:
    """A Kubernetes resource quantity as a number: '1Gi' -> 1073741824, '500m' -> 0.5, 2 -> 2."""
    if isinstance(value, int | float):
        return float(value)
    if not isinstance(value, str):
        return None
    match = QUANTITY.match(value.strip())
    if not match:
        return None
    number, suffix = match.groups()
    scale = BINARY.get(suffix or "") or DECIMAL.get(suffix or "", 1)
    return float(number) * scale


def go_duration(text: str) -> float | None:
    """Seconds in a Go duration as kubelet prints it: '4m32.5s', '568.498558ms', '1h2m'."""
    parts = GO_DURATION_PART.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return sum(float(n) * GO_SCALE[u] for n, u in parts)


def parse_time(value: Any) -> float | None:
    """Unix seconds of an RFC3339 timestamp ('2025-09-04T00:58:12Z'), or None."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def containers(pod: dict) -> list[dict]:
    return [c for c in ((pod.get("spec") or {}).get("containers") or []) if isinstance(c, dict)]


def container_named(pod: dict, name: str | None) -> dict | None:
    for c in containers(pod):
        if c.get("name") == name:
            return c
    return None


def container_status(pod: dict, name: str | None) -> dict:
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        if cs.get("name") == name:
            return cs
    return {}


def gpu_limit(container: dict) -> float | None:
    """nvidia.com/gpu in the container's limits (requests must equal limits for GPUs)."""
    resources = container.get("resources") or {}
    for kind in ("limits", "requests"):
        value = (resources.get(kind) or {}).get(GPU)
        if value is not None:
            return quantity(value)
    return None


def gpus_requested(pod: dict) -> int:
    """GPUs the pod asks the scheduler for: the sum over containers (init containers: the max)."""
    total = sum(gpu_limit(c) or 0 for c in containers(pod))
    init = [gpu_limit(c) or 0 for c in ((pod.get("spec") or {}).get("initContainers") or []) if c]
    return int(max([total, *init]))


def event_items(events: Any) -> list[dict]:
    """The events of an EventList/List (or a plain list), oldest first."""
    items = events.get("items") if isinstance(events, dict) else events
    items = [e for e in (items or []) if isinstance(e, dict)]
    return sorted(items, key=lambda e: event_time(e, first=True) or 0.0)


def event_time(event: dict, first: bool = False) -> float | None:
    """When the event (first or last) happened: lastTimestamp, eventTime or series time."""
    keys = ("firstTimestamp", "eventTime", "lastTimestamp") if first else ()
    keys += ("lastTimestamp", "eventTime")
    series = event.get("series") or {}
    if not first and series.get("lastObservedTime"):
        keys = ("lastObservedTime", *keys)
    for key in keys:
        value = series.get(key) if key == "lastObservedTime" else event.get(key)
        t = parse_time(value)
        if t is not None:
            return t
    return parse_time((event.get("metadata") or {}).get("creationTimestamp"))


def event_count(event: dict) -> int:
    series = event.get("series") or {}
    return int(event.get("count") or series.get("count") or 1)


def event_line(event: dict) -> str:
    """An event as `kubectl get events` shows it: type, reason, (xN), message."""
    count = event_count(event)
    times = f" (x{count})" if count > 1 else ""
    return f"{event.get('type', '')} {event.get('reason', '')}{times}: {event.get('message', '')}"


def probe_budget(probe: dict | None) -> float | None:
    """Seconds a probe lets a container fail before it acts: delay + failures x period."""
    if not isinstance(probe, dict):
        return None
    delay = float(probe.get("initialDelaySeconds") or 0)
    period = float(probe.get("periodSeconds") or 10)
    failures = float(probe.get("failureThreshold") or 3)
    return delay + failures * period


def image_tag(image: str) -> tuple[str, str | None, str | None]:
    """(repository, tag, digest) of an image reference; tag None when absent."""
    ref, _, digest = image.partition("@")
    last = ref.rsplit("/", 1)[-1]
    if ":" in last:
        repo, tag = ref.rsplit(":", 1)
        return repo, tag, digest or None
    return ref, None, digest or None
