"""Image pulls that fail (ErrImagePull, ImagePullBackOff) or take minutes (multi-GB vLLM images).

Durations come from the kubelet's Pulled events ('Successfully pulled image "x" in 4m12.5s');
a Pulling event with no result yet counts from its timestamp to the collection time.
"""

from __future__ import annotations

import re

from llmdoctor.engine.facts import Facts
from llmdoctor.engine.findings import Finding, critical, evidence, ok, warning
from llmdoctor.engine.registry import check
from llmdoctor.parsers.k8s_pod import (
    container_statuses,
    event_items,
    event_line,
    event_time,
    field_dict,
    go_duration,
    require_pod,
)
from llmdoctor.parsers.vllm_serving import threshold

PULL_ERRORS = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull")
PULLED = re.compile(r'Successfully pulled image "([^"]+)" in (\S+?)(?:\s|$)')
PULLING = re.compile(r'Pulling image "([^"]+)"')
FAILED = re.compile(r'Failed to pull image "([^"]+)"')


def _minutes(seconds: float) -> str:
    return f"{seconds:.0f}s" if seconds < 120 else f"{seconds / 60:.1f} min"


def _status_failures(pod: dict, events: list[dict]) -> list[Finding]:
    findings = []
    for cs in container_statuses(pod):
        waiting = field_dict(field_dict(cs, "state"), "waiting")
        if waiting.get("reason") not in PULL_ERRORS:
            continue
        image = cs.get("image", "?")
        items = [evidence(f"state.waiting: {waiting.get('reason')}", source="k8s/pod.json")]
        if waiting.get("message"):
            items.append(evidence(waiting["message"], source="k8s/pod.json"))
        items += [
            evidence(event_line(e), source="k8s/events.json")
            for e in events
            if FAILED.search(e.get("message") or "") or e.get("reason") == "BackOff"
        ][-3:]
        findings.append(
            critical(
                "pod-image-pull",
                f"cannot pull image {image}: {waiting.get('reason')}",
                items,
                ["image-pull-slow"],
                f"container {cs.get('name', '?')}",
            )
        )
    return findings


@check(
    "pod-image-pull",
    title="Image pulls: failures and slow pulls",
    scope="k8s",
    needs=("k8s/pod.json",),
    runbooks=("image-pull-slow",),
    before_start=True,
)
def pod_image_pull(facts: Facts) -> list[Finding]:
    pod = require_pod(facts)
    events = event_items(facts.get("k8s/events.json"))
    findings = _status_failures(pod, events)
    if findings:
        return findings
    events = event_items(facts.require("k8s/events.json"))
    slow = threshold(facts, "image_pull_slow_seconds")
    now = facts.get("time/now")
    pulled: dict[str, float] = {}
    pending: dict[str, dict] = {}
    for e in events:
        message = e.get("message") or ""
        if m := PULLED.search(message):
            pulled[m.group(1)] = go_duration(m.group(2)) or 0.0
            pending.pop(m.group(1), None)
        elif m := PULLING.search(message):
            pending[m.group(1)] = e
        elif m := FAILED.search(message):
            pending.pop(m.group(1), None)
    for image, seconds in pulled.items():
        if seconds >= slow:
            line = next(
                e
                for e in reversed(events)
                if (m := PULLED.search(e.get("message") or "")) and m.group(1) == image
            )
            findings.append(
                warning(
                    "pod-image-pull",
                    f"pulling {image} took {_minutes(seconds)}; every restart on a new node "
                    "waits this long",
                    [evidence(event_line(line), source="k8s/events.json")],
                    ["image-pull-slow"],
                )
            )
    for image, e in pending.items():
        started = event_time(e)
        if now is None or started is None or now - started < slow:
            continue
        findings.append(
            warning(
                "pod-image-pull",
                f"still pulling {image} after {_minutes(now - started)}",
                [evidence(event_line(e), source="k8s/events.json")],
                ["image-pull-slow"],
            )
        )
    if findings:
        return findings
    done = ", ".join(f"{i} in {_minutes(s)}" for i, s in pulled.items())
    summary = f"images pulled quickly ({done})" if done else "no image pull failed or is slow"
    return [ok("pod-image-pull", summary)]
