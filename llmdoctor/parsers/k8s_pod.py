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

from llmdoctor.engine.facts import FactMissing, Facts

GPU = "nvidia.com/gpu"
BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
DECIMAL = {
    "n": 1e-9,
    "u": 1e-6,
    "m": 1e-3,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
}
# apimachinery's resource.Quantity: a signed decimal ("5", "5.", ".5") then a binary suffix, a
# decimal exponent ("1e3", "1E-3") or a decimal SI suffix (n u m k M G T P E)
QUANTITY = re.compile(
    r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(Ki|Mi|Gi|Ti|Pi|Ei|[eE][+-]?[0-9]+|[numkMGTPE])?$"
)
GO_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(h|ms|us|µs|ns|m|s)")
GO_SCALE = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


def number(value: Any, default: float) -> float:
    """A numeric field of a Kubernetes object, or `default` when absent or not a number."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return default
    try:
        return float(value)
    except ValueError:
        return default


def quantity(value: Any) -> float | None:
    """A Kubernetes resource quantity as a number: '1Gi' -> 1073741824, '500m' -> 0.5, 2 -> 2,
    '1e3' -> 1000, '.5' -> 0.5, '100n' -> 1e-07; None when it is not one."""
    if isinstance(value, int | float):
        return float(value)
    if not isinstance(value, str):
        return None
    match = QUANTITY.match(value.strip())
    if not match:
        return None
    number, suffix = match.groups()
    if suffix and suffix[0] in "eE" and suffix not in BINARY and len(suffix) > 1:
        return float(number + suffix)
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


def _shape(value: Any) -> str:
    if isinstance(value, dict):
        return f"a {value.get('kind') or 'JSON object'} with no spec.containers"
    return "null" if value is None else f"a JSON {type(value).__name__.replace('str', 'string')}"


def require_pod(facts: Facts) -> dict:
    """k8s/pod.json if it is a Pod with named containers; else FactMissing saying what it is.

    A `kubectl get pods -o json` List, a null-filled or truncated object would otherwise read as
    a pod with no containers, and checks would call healthy what they never saw.
    """
    pod = facts.require("k8s/pod.json")
    if isinstance(pod, dict) and pod.get("kind") == "List":
        count = len(pod.get("items") or [])
        raise FactMissing(
            "k8s/pod.json",
            f"is a List of {count} object(s), not one Pod (save `kubectl get pod NAME -o json`)",
        )
    spec = pod.get("spec") if isinstance(pod, dict) else None
    items = spec.get("containers") if isinstance(spec, dict) else None
    named = (
        [c for c in items if isinstance(c, dict) and c.get("name")]
        if isinstance(items, list)
        else []
    )
    if not named or len(named) != len(items) or pod.get("kind") not in (None, "Pod"):
        raise FactMissing("k8s/pod.json", f"is not a Pod object ({_shape(pod)})")
    return pod


def serving_container(facts: Facts) -> tuple[dict, dict, dict]:
    """(pod, serving/args, the serving container's spec); FactMissing when there is none."""
    pod = require_pod(facts)
    args = facts.require("serving/args")
    container = container_named(pod, args.get("container"))
    if container is None:
        raise FactMissing("serving/args", "no serving container found in the pod spec")
    return pod, args, container


def counter_reset_text(facts: Facts, restarted: bool = False) -> str:
    """Why a vLLM counter went down between two scrapes, as far as the facts tell: a new
    process start time in the later scrape (`restarted`), a restart the pod shows, or (the pod
    never restarted) scrapes that reached different servers."""
    if restarted:
        return (
            "the server restarted between the scrapes, its process_start_time_seconds changed; "
            "counted from the restart"
        )
    pod = facts.get("k8s/pod.json")
    statuses = dicts(field_dict(pod, "status").get("containerStatuses")) if pod else []
    if statuses:
        restarts = sum(int(number(cs.get("restartCount"), 0)) for cs in statuses)
        if restarts == 0:
            return (
                "the counter went down though the pod never restarted: the scrapes reached "
                "different vLLM servers"
            )
        return "counter reset: the container restarted"
    return "the counter went down: the server restarted or the scrapes reached another server"


def dicts(value: Any) -> list[dict]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def field_dict(obj: Any, name: str) -> dict:
    """obj[name] when obj is a dict and that value is a dict, else {} (null-safe field access)."""
    value = obj.get(name) if isinstance(obj, dict) else None
    return value if isinstance(value, dict) else {}


def containers(pod: dict) -> list[dict]:
    return dicts(field_dict(pod, "spec").get("containers"))


def init_containers(pod: dict) -> list[dict]:
    return dicts(field_dict(pod, "spec").get("initContainers"))


def container_statuses(pod: dict) -> list[dict]:
    """Init containers' then containers' statuses (the dict entries only)."""
    status = field_dict(pod, "status")
    return dicts(status.get("initContainerStatuses")) + dicts(status.get("containerStatuses"))


def restarted(status: dict) -> bool:
    """Whether a container status says it restarted: its previous run's log is wanted."""
    return number(status.get("restartCount"), 0) > 0


def previous_logs_wanted(pod: Any) -> list[str]:
    """logs/<c>.previous.log of every container that restarted (a pod.json of any shape)."""
    return [
        f"logs/{cs.get('name')}.previous.log"
        for cs in container_statuses(pod)
        if isinstance(cs.get("name"), str) and restarted(cs)
    ]


def container_named(pod: dict, name: str | None) -> dict | None:
    for c in containers(pod):
        if c.get("name") == name:
            return c
    return None


def container_status(pod: dict, name: str | None) -> dict:
    for cs in dicts(field_dict(pod, "status").get("containerStatuses")):
        if cs.get("name") == name:
            return cs
    return {}


def gpu_limit(container: dict) -> float | None:
    """nvidia.com/gpu in the container's limits (requests must equal limits for GPUs)."""
    resources = field_dict(container, "resources")
    for kind in ("limits", "requests"):
        value = field_dict(resources, kind).get(GPU)
        if value is not None:
            return quantity(value)
    return None


def gpus_requested(pod: dict) -> int:
    """GPUs the pod asks the scheduler for: the sum over containers (init containers: the max)."""
    total = sum(gpu_limit(c) or 0 for c in containers(pod))
    init = [gpu_limit(c) or 0 for c in init_containers(pod)]
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
    series = field_dict(event, "series")
    if not first and series.get("lastObservedTime"):
        keys = ("lastObservedTime", *keys)
    for key in keys:
        value = series.get(key) if key == "lastObservedTime" else event.get(key)
        t = parse_time(value)
        if t is not None:
            return t
    return parse_time(field_dict(event, "metadata").get("creationTimestamp"))


def event_count(event: dict) -> int:
    series = field_dict(event, "series")
    return int(number(event.get("count"), 0.0) or number(series.get("count"), 1.0) or 1)


def event_line(event: dict) -> str:
    """An event as `kubectl get events` shows it: type, reason, (xN), message."""
    count = event_count(event)
    times = f" (x{count})" if count > 1 else ""
    return f"{event.get('type', '')} {event.get('reason', '')}{times}: {event.get('message', '')}"


def probe_budget(probe: dict | None) -> float | None:
    """Seconds a probe lets a container fail before it acts: delay + failures x period."""
    if not isinstance(probe, dict):
        return None
    delay = number(probe.get("initialDelaySeconds"), 0.0)
    period = number(probe.get("periodSeconds"), 10.0)
    failures = number(probe.get("failureThreshold"), 3.0)
    return delay + failures * period


def image_tag(image: str) -> tuple[str, str | None, str | None]:
    """(repository, tag, digest) of an image reference; tag None when absent."""
    ref, _, digest = image.partition("@")
    last = ref.rsplit("/", 1)[-1]
    if ":" in last:
        repo, tag = ref.rsplit(":", 1)
        return repo, tag, digest or None
    return ref, None, digest or None
