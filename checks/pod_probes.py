"""A liveness (or startup) probe that kills vLLM before the model has finished loading.

vLLM's port refuses connections until the model is loaded and CUDA graphs are captured, often
minutes. The probe's budget (initialDelaySeconds + failureThreshold x periodSeconds; the
startupProbe's when there is one, since it holds the liveness probe back) is compared with the
load time seen in the logs (first vLLM line to "Starting vLLM API server" / "Application
startup complete") and with the kubelet's Killing / Unhealthy events.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from llmdoctor.engine.facts import Facts
from llmdoctor.engine.findings import Finding, critical, evidence, info, ok, warning
from llmdoctor.engine.registry import check
from llmdoctor.engine.textsource import TextSource
from llmdoctor.parsers.k8s_pod import (
    container_named,
    container_status,
    containers,
    event_items,
    event_line,
    parse_time,
    probe_budget,
    require_pod,
)

VLLM_TIME = re.compile(
    r"\b(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) (\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)"
)
READY = re.compile(r"Application startup complete|Starting vLLM API server")
# the first lines of a vLLM start: a log tail without them cannot tell how long loading took
STARTED = re.compile(
    r"vLLM API server version|Automatically detected platform|non-default args|"
    r"Initializing an? (?:V1 )?LLM engine"
)
INTERRUPTED = re.compile(r"KeyboardInterrupt: terminated")
PROBE_KILL = re.compile(r"failed (liveness|startup) probe, will be restarted")
PROBE_FAIL = re.compile(r"^(Liveness|Startup) probe failed")
MAX_SPAN = 2 * 86400  # a longer span means a spliced or wrapped log: timing unknown
MARGIN = 1.5


@dataclass
class StartupTiming:
    """How far one container log got: seconds from its first vLLM line to ready (or to its end)."""

    source: str
    seconds: float | None = None
    ready: bool = False
    interrupted: bool = False
    last_line: tuple[int, str] | None = None
    ready_line: tuple[int, str] | None = None


def _stamp(match: re.Match) -> float:
    month, day, hour, minute, second = (int(g) for g in match.groups())
    return datetime(2000, month, day, hour, minute, second).timestamp()  # leap year: 02-29 ok


def startup_timing(log: TextSource) -> StartupTiming:
    """Read a vLLM log once: load duration, whether it became ready, whether SIGTERM hit it."""
    timing = StartupTiming(log.name)
    first = latest = None
    started = False
    for number, line in enumerate(log.lines(), 1):
        started = started or bool(STARTED.search(line))
        m = VLLM_TIME.search(line)
        if m and started:
            try:
                stamp = _stamp(m)
            except ValueError:
                continue
            first = stamp if first is None else first
            latest = stamp
            timing.last_line = (number, line)
        if INTERRUPTED.search(line):
            timing.interrupted = True
        if not timing.ready and READY.search(line):
            timing.ready = True
            timing.ready_line = (number, line)
            if first is not None and latest is not None:
                timing.seconds = latest - first
    if not timing.ready and first is not None and latest is not None:
        timing.seconds = latest - first
    if timing.seconds is not None and not 0 <= timing.seconds <= MAX_SPAN:
        timing.seconds = None
    return timing


def _probe_text(name: str, probe: dict, budget: float) -> str:
    fields = ("initialDelaySeconds", "periodSeconds", "failureThreshold")
    parts = ", ".join(f"{f}={probe.get(f)}" for f in fields if probe.get(f) is not None)
    return f"{name}: {parts or 'defaults'} -> budget {budget:.0f}s"


def _ran_seconds(status: dict) -> float | None:
    term = (status.get("lastState") or {}).get("terminated") or {}
    start, end = parse_time(term.get("startedAt")), parse_time(term.get("finishedAt"))
    return end - start if start is not None and end is not None else None


@check(
    "pod-probes",
    title="Probes give vLLM time to load the model",
    scope="k8s",
    needs=("k8s/pod.json",),
    runbooks=("probe-killed-during-load", "engine-dead"),
)
def pod_probes(facts: Facts) -> Finding:
    pod = require_pod(facts)
    name = (facts.get("serving/args") or {}).get("container")
    c = container_named(pod, name) or (containers(pod) or [{}])[0]
    name, subject = c.get("name"), f"container {c.get('name')}"
    liveness, startup = c.get("livenessProbe"), c.get("startupProbe")
    if not liveness and not startup:
        return ok("pod-probes", "no liveness or startup probe can restart it while loading")
    kind, probe = ("startupProbe", startup) if startup else ("livenessProbe", liveness)
    budget = probe_budget(probe) or 0.0
    items = [evidence(_probe_text(kind, probe, budget), source="k8s/pod.json")]
    events = [e for e in event_items(facts.get("k8s/events.json")) if _about(e, name)]
    kills = [e for e in events if e.get("reason") == "Killing" and PROBE_KILL.search(e["message"])]
    fails = [e for e in events if PROBE_FAIL.search(e.get("message") or "")]
    items += [evidence(event_line(e), source="k8s/events.json") for e in (fails[-2:] + kills[-1:])]
    now = _timing(facts, f"logs/{name}.log")
    before = _timing(facts, f"logs/{name}.previous.log")
    for t in (now, before):
        if t and t.seconds is not None:
            state = "ready after" if t.ready else ("killed after" if t.interrupted else "ran")
            number, text = t.ready_line or t.last_line or (None, "")
            items.append(evidence(f"{state} {t.seconds:.0f}s: {text[:200]}", t.source, number))
    ran = _ran_seconds(container_status(pod, name))
    if ran is not None:
        items.append(evidence(f"previous container ran {ran:.0f}s", source="k8s/pod.json"))
    load = now.seconds if now and now.ready else None
    # killed after it had served: its previous log reached ready, or it ran far past the budget
    after_load = (before.ready if before else ran is not None and ran > budget * 3) or False
    if kills and not after_load:
        no_startup = "" if startup else " and there is no startupProbe"
        return critical(
            "pod-probes",
            f"the {kind} restarted the container before the model finished loading: its budget "
            f"is {budget:.0f}s{no_startup}; {_seen_load(now, before)}",
            items,
            ["probe-killed-during-load"],
            subject,
        )
    if kills:
        return warning(
            "pod-probes",
            f"the {kind} restarted the container after it had finished loading (engine hung?)",
            items,
            ["engine-dead"],
            subject,
        )
    if load is not None and not startup and load * MARGIN > budget:
        return warning(
            "pod-probes",
            f"the model took {load:.0f}s to load and the livenessProbe allows {budget:.0f}s with "
            "no startupProbe: a slower start (new node, cold cache) will be killed",
            items,
            ["probe-killed-during-load"],
            subject,
        )
    if load is None:
        return info(
            "pod-probes",
            f"{kind} budget {budget:.0f}s; the load time was not seen in the logs to compare",
            items,
            subject=subject,
        )
    return ok(
        "pod-probes", f"{kind} budget {budget:.0f}s covers the {load:.0f}s load", items, subject
    )


def _about(event: dict, container: str | None) -> bool:
    """Whether a pod event concerns this container (events name it in fieldPath)."""
    path = (event.get("involvedObject") or {}).get("fieldPath") or ""
    return not path or path == f"spec.containers{{{container}}}"


def _timing(facts: Facts, key: str) -> StartupTiming | None:
    log = facts.get(key)
    return startup_timing(log) if isinstance(log, TextSource) else None


def _seen_load(now: StartupTiming | None, before: StartupTiming | None) -> str:
    if now and now.ready and now.seconds is not None:
        return f"a successful start took {now.seconds:.0f}s"
    if before and before.seconds is not None:
        return f"the previous container was still loading after {before.seconds:.0f}s"
    return "the load never completed"
