"""Is the pod Ready, i.e. does its Service send it traffic?

A Running pod whose Ready condition is False gets no requests through its Service: to users it
is down, whatever its logs say. The kubelet marks it so when a container's readiness probe
fails (events `Unhealthy: Readiness probe failed: ...`), when a container is not running, or
when a readiness gate is unmet. How long it has been so comes from the condition's
lastTransitionTime against `time/now` (for a Pending pod, from its creation). A vLLM pod loads
its model for minutes, so a short spell is a warning; past LONG_NOT_READY_S (or the startup
probe's budget, if longer) it is critical. The cause is the other pod checks' to name
(pod-scheduling, pod-image-pull, pod-restarts); this check says the pod serves nothing.
A pod being deleted (stuck Terminating past its grace period: critical), a pod whose phase is
Unknown (its node stopped reporting) and a container not ready under a Ready=True condition are
not healthy either, whatever the Ready condition says.
"""

from __future__ import annotations

from llmdoctor.engine.facts import FactMissing, Facts
from llmdoctor.engine.findings import Finding, critical, evidence, ok, warning
from llmdoctor.engine.registry import check
from llmdoctor.parsers.k8s_pod import (
    dicts,
    event_count,
    event_items,
    event_line,
    event_time,
    field_dict,
    parse_time,
    probe_budget,
    require_pod,
)

CHECK = "pod-readiness"
RUNBOOK = "pod-not-ready"
LONG_NOT_READY_S = 10 * 60
STUCK_TERMINATING_S = 5 * 60  # past deletionTimestamp, which is the request plus the grace period
READINESS_FAILED = "Readiness probe failed"


def _minutes(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _condition(pod: dict, kind: str) -> dict | None:
    for condition in dicts(field_dict(pod, "status").get("conditions")):
        if condition.get("type") == kind:
            return condition
    return None


def _statuses(pod: dict) -> list[dict]:
    """The app containers' statuses (init containers have finished once the pod runs)."""
    return dicts(field_dict(pod, "status").get("containerStatuses"))


def _unready_containers(pod: dict) -> list[str]:
    """'vllm (running since 01:08:31, 3 restarts)' for each container that is not ready."""
    out = []
    for cs in _statuses(pod):
        if cs.get("ready"):
            continue
        state = field_dict(cs, "state")
        if "running" in state:
            started = field_dict(state, "running").get("startedAt")
            how = f"running since {started}" if started else "running"
        elif "waiting" in state:
            how = f"waiting: {field_dict(state, 'waiting').get('reason') or 'unknown reason'}"
        elif "terminated" in state:
            how = f"terminated: {field_dict(state, 'terminated').get('reason') or 'exited'}"
        else:
            how = "state unknown"
        restarts = cs.get("restartCount") or 0
        more = f", {restarts} restart{'s' if restarts != 1 else ''}" if restarts else ""
        out.append(f"{cs.get('name')} ({how}{more})")
    return out


def _readiness_events(facts: Facts) -> tuple[list[dict], int]:
    """The Unhealthy events of failed readiness probes (newest last) and their total count."""
    events = facts.get("k8s/events.json")
    found = [
        e for e in event_items(events) if str(e.get("message") or "").startswith(READINESS_FAILED)
    ]
    found.sort(key=lambda e: event_time(e) or 0.0)
    return found, sum(event_count(e) for e in found)


def _patience(pod: dict) -> float:
    """How long a not-Ready pod may still be starting: the longest startup probe budget."""
    budgets = [
        probe_budget(c.get("startupProbe")) or 0.0
        for c in dicts(field_dict(pod, "spec").get("containers"))
    ]
    return max([LONG_NOT_READY_S, *budgets])


def _pending(facts: Facts, pod: dict) -> Finding:
    """A pod not started yet serves nothing either: a warning while it may still start."""
    created = field_dict(pod, "metadata").get("creationTimestamp")
    since_text = f"since {created}" if created else "(creation time not in the pod object)"
    items = [evidence(f"status.phase: Pending {since_text}", "k8s/pod.json")]
    scheduled = _condition(pod, "PodScheduled") or {}
    if scheduled.get("status") == "False":
        why = f"not scheduled: {scheduled.get('reason') or 'no reason given'}"
        items.append(evidence(f"PodScheduled=False: {scheduled.get('message') or ''}".strip()))
    else:
        waiting = [u for u in _unready_containers(pod) if "waiting" in u]
        why = "; ".join(waiting) or "containers not started"
    now, since = facts.get("time/now"), parse_time(created)
    spell = (now - since) if isinstance(now, int | float) and since is not None else None
    for_how_long = f" for {_minutes(spell)}" if spell is not None else ""
    summary = f"the pod has been Pending{for_how_long} ({why}): it serves nothing"
    if spell is None or spell > _patience(pod):
        return critical(CHECK, summary, items, [RUNBOOK])
    return warning(CHECK, f"{summary} yet", items, [RUNBOOK])


def _terminating(facts: Facts, pod: dict) -> Finding | None:
    """A pod being deleted leaves its Service's endpoints; one still there well past the time
    its deletion was due is stuck (a finalizer, or a node that no longer answers)."""
    meta = field_dict(pod, "metadata")
    deleting = meta.get("deletionTimestamp")
    if not deleting:
        return None
    items = [evidence(f"metadata.deletionTimestamp: {deleting}", "k8s/pod.json")]
    listed = meta.get("finalizers")
    finalizers = [f for f in listed if isinstance(f, str)] if isinstance(listed, list) else []
    if finalizers:
        items.append(evidence(f"metadata.finalizers: {', '.join(finalizers)}", "k8s/pod.json"))
    node = field_dict(pod, "spec").get("nodeName")
    now, due = facts.get("time/now"), parse_time(deleting)
    overdue = (now - due) if isinstance(now, int | float) and due is not None else None
    if overdue is not None and overdue > STUCK_TERMINATING_S:
        why = (
            f"finalizers {', '.join(finalizers)} not removed"
            if finalizers
            else f"the kubelet on {node or 'its node'} has not confirmed the containers stopped"
        )
        return critical(
            CHECK,
            f"the pod has been stuck Terminating for {_minutes(overdue)} past its grace period "
            f"({why}): it serves nothing and holds its GPU and name",
            items,
            [RUNBOOK],
        )
    return warning(
        CHECK,
        "the pod is being deleted (Terminating): its Service no longer sends it traffic",
        items,
        [RUNBOOK],
    )


@check(
    CHECK,
    title="Pod is Ready and receives Service traffic",
    scope="k8s",
    needs=("k8s/pod.json",),
    runbooks=(RUNBOOK,),
    kind="symptom",
    follows=(
        "pod-restarts",
        "pod-scheduling",
        "pod-image-pull",
        "pod-probes",
        "vllm-health",
        "vllm-engine",
    ),
)
def pod_readiness(facts: Facts) -> Finding:
    pod = require_pod(facts)
    status = field_dict(pod, "status")
    phase = status.get("phase") or "unknown"
    terminating = _terminating(facts, pod)
    if terminating is not None:
        return terminating
    if phase == "Pending":
        return _pending(facts, pod)
    if phase in ("Succeeded", "Failed"):
        return critical(
            CHECK,
            f"the pod has ended (phase {phase}): it serves nothing",
            [evidence(f"status.phase: {phase}", "k8s/pod.json")],
            [RUNBOOK],
        )
    if phase == "Unknown":  # the kubelet stopped reporting: every other field is stale
        return critical(
            CHECK,
            "the pod's phase is Unknown: its node stopped reporting (kubelet or node down), so "
            "nothing in its status can be trusted and its Service cannot count on it",
            [evidence("status.phase: Unknown", "k8s/pod.json")],
            [RUNBOOK],
        )
    ready = _condition(pod, "Ready")
    if ready is None:
        raise FactMissing("k8s/pod.json", "the pod status has no Ready condition")
    since = ready.get("lastTransitionTime")
    if ready.get("status") == "True":
        when = f" since {since}" if since else ""
        items = [evidence(f"condition Ready=True{when}", "k8s/pod.json")]
        unready = _unready_containers(pod)
        if unready:  # the kubelet updates the two separately: one of them is stale
            items.append(evidence("not ready: " + "; ".join(unready), "k8s/pod.json"))
            names = [c.get("name") for c in _statuses(pod) if not c.get("ready")]
            return warning(
                CHECK,
                f"the pod says Ready{when} but {'; '.join(unready)} is not ready: the status is "
                "stale or changing, so Service traffic may reach a container that cannot serve",
                items,
                [RUNBOOK],
                f"container {names[0]}" if len(names) == 1 else None,
            )
        return ok(CHECK, f"the pod is Ready{when}", items)
    items = [
        evidence(
            f"condition Ready={ready.get('status')} "
            f"{f'since {since}' if since else '(the time it changed is not in the pod status)'}: "
            f"{ready.get('reason') or ''} {ready.get('message') or ''}".strip(),
            "k8s/pod.json",
        )
    ]
    unready = _unready_containers(pod)
    if unready:
        items.append(evidence("not ready: " + "; ".join(unready), "k8s/pod.json"))
    failures, count = _readiness_events(facts)
    if failures:
        items.append(evidence(event_line(failures[-1]), "k8s/events.json"))
    now, changed = facts.get("time/now"), parse_time(since)
    spell = (now - changed) if isinstance(now, int | float) and changed is not None else None
    if failures:
        why = f"{count} readiness probe failure{'s' if count != 1 else ''}"
    elif unready:
        why = "not ready: " + "; ".join(unready)
    else:
        why = str(ready.get("reason") or "the kubelet gives no reason")
    if ready.get("reason") == "ReadinessGatesNotReady":
        gates = [
            g.get("conditionType") for g in dicts(field_dict(pod, "spec").get("readinessGates"))
        ]
        why = f"readiness gate(s) {', '.join(str(g) for g in gates) or '(unnamed)'} not met"
    runbooks = [RUNBOOK]
    for_how_long = f" for {_minutes(spell)}" if spell is not None else ""
    summary = (
        f"the pod has not been Ready{for_how_long} (phase {phase}; {why}): its Service sends it "
        "no traffic"
    )
    names = [c.get("name") for c in _statuses(pod) if not c.get("ready")]
    subject = f"container {names[0]}" if len(names) == 1 else None
    if spell is None or spell > _patience(pod):
        return critical(CHECK, summary, items, runbooks, subject)
    return warning(
        CHECK,
        f"{summary}; a vLLM pod is not Ready while it loads the model, so this may pass",
        items,
        runbooks,
        subject,
    )
