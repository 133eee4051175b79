"""Container restarts, OOMKilled, CrashLoopBackOff and servers that exited for good, from the
Pod's status (k8s/pod.json).

A crash loop is tied to its cause when the previous container's log matches a runbook signature;
a container that ended and will not be restarted, by its own (last) log.
"""

from __future__ import annotations

from llmdoctor.engine.facts import Facts
from llmdoctor.engine.findings import Finding, critical, evidence, ok, warning
from llmdoctor.engine.registry import check
from llmdoctor.engine.textsource import TextSource
from llmdoctor.parsers.fix_values import fix_values
from llmdoctor.parsers.k8s_pod import (
    container_named,
    container_statuses,
    dicts,
    field_dict,
    init_containers,
    number,
    require_pod,
)
from llmdoctor.parsers.xid import not_text_reason
from llmdoctor.wiki.cause_graph import CauseGraph
from llmdoctor.wiki.request_log import request_log
from llmdoctor.wiki.server_phase import retold_at_startup
from llmdoctor.wiki.signatures import SignatureSet


def _terminated(status: dict) -> dict:
    return field_dict(field_dict(status, "state"), "terminated") or field_dict(
        field_dict(status, "lastState"), "terminated"
    )


def _run_once_init_names(pod: dict) -> set[str]:
    """The init containers that run once before the others; a sidecar (an init container with
    its own restartPolicy Always, Kubernetes 1.29+) keeps running and is told as a container."""
    spec = {str(c.get("name")): c for c in init_containers(pod)}
    names = {
        str(s.get("name")) for s in dicts(field_dict(pod, "status").get("initContainerStatuses"))
    }
    return {n for n in names if spec.get(n, {}).get("restartPolicy") != "Always"}


def _init_container_done(status: dict, init_names: set[str]) -> bool:
    """A run-once init container that ran to exit code 0 (Completed): done as designed, the
    pod's containers start after it, so its state.terminated is no outage."""
    done = field_dict(field_dict(status, "state"), "terminated")
    if status.get("name") not in init_names or not done:
        return False
    code = done.get("exitCode")
    return number(code, -1) == 0 if code is not None else done.get("reason") == "Completed"


def _serving_now(status: dict, init_done: bool) -> bool:
    """Whether the container is past its restarts: running and ready, or an init container that
    has completed since."""
    running = bool(field_dict(field_dict(status, "state"), "running"))
    return init_done or (running and status.get("ready") is True)


def _restarted(count: int) -> str:
    return (
        "not restarted yet"
        if count < 1
        else f"restarted {'once' if count == 1 else f'{count} times'}"
    )


RECURRING_OOM_KILLS = 2  # a second kill shows the same load will kill it again


def _memory_limit(pod: dict, container: str) -> str | None:
    spec = container_named(pod, container) or next(
        (c for c in init_containers(pod) if c.get("name") == container), None
    )
    limit = field_dict(field_dict(spec, "resources"), "limits").get("memory")
    return str(limit) if limit is not None else None


def _log_causes(facts: Facts, log_key: str) -> tuple[list[str], list[str], list[dict]]:
    """Runbook ids matched in a container's log by a signature, those only a hint (weak
    evidence: SignatureSet.weak) points at, and the first evidence line of each.
    """
    log = facts.get(log_key)
    entries = facts.get("wiki/entries") or {}
    if log is None or not entries:
        return [], [], []
    signatures = SignatureSet(entries.values())
    strong: dict[str, dict] = {}  # entry id -> its first line a signature matched
    last_strong: dict[str, int] = {}  # ... and the number of its last
    weak: dict[str, dict] = {}  # ... a hint matched (kept only if no signature ever does)
    for m in signatures.scan(log):
        if request_log(m.text):  # a prompt that quotes an error is no error
            continue
        fired = signatures.strong_ids(signatures.matching(m.text))
        for entry_id in m.entry_ids:
            first = strong if entry_id in fired else weak
            if entry_id not in first:
                first[entry_id] = evidence(m.text, source=log.name, line=m.line)
            if entry_id in fired:
                last_strong[entry_id] = m.line
    hinted = {i: line for i, line in weak.items() if i not in strong}
    # an entry's lines that came while the server started tell its `at_startup` entry's story
    # (wiki/server_phase.py), as log-signatures tells it
    first_lines = {i: int(line["line"]) for i, line in strong.items()}
    retold = retold_at_startup(entries, first_lines, log.lines, last_strong)
    causes = list(dict.fromkeys(retold.get(i, i) for i in strong))
    return causes, list(hinted), [*strong.values(), *hinted.values()]


def _no_cause(facts: Facts, log_key: str) -> str:
    """What a crash loop's summary says when the previous log names no cause: that it was not
    there to read (and why), not text, or read without a known signature."""
    log = facts.get(log_key)
    if log is None:
        return f"; the previous log was not read ({facts.missing_reason(log_key)})"
    why = not_text_reason(log, "a text log", empty=True) if isinstance(log, TextSource) else None
    if why:
        return f"; the previous log was not read: it {why}"
    return "; no known signature in the previous log (read its last lines: kubectl logs --previous)"


def _fix_params(causes: list[str], lines: list[dict]) -> dict:
    """The Fix parameters the previous log's matched lines give for the causes linked."""
    params: dict = {}
    for entry_id in causes:
        params.update(fix_values(entry_id, (str(line.get("text", "")) for line in lines)))
    return params


RESTART_POLICIES = ("Always", "OnFailure", "Never")


def _restart_policy(pod: dict) -> str:
    """spec.restartPolicy; the API server's default (Always) when it is missing or unreadable."""
    policy = field_dict(pod, "spec").get("restartPolicy")
    return policy if policy in RESTART_POLICIES else "Always"


def _ended_for_good(policy: str, exited: dict, phase: object) -> bool:
    """Whether a container that terminated (`exited`: its state.terminated) stays down: the
    kubelet starts it again except under Never, OnFailure after exit code 0, or in a pod that
    has failed for good (phase Failed: evicted, its deadline passed, its node lost)."""
    code = number(exited.get("exitCode"), -1)
    ended = phase == "Failed"
    return bool(exited) and (ended or policy == "Never" or (policy == "OnFailure" and code == 0))


def _describe(term: dict) -> str:
    reason = term.get("reason") or "unknown reason"
    code = term.get("exitCode")
    when = term.get("finishedAt")
    text = f"{reason}, exit code {code}" if code is not None else reason
    return f"{text} at {when}" if when else text


@check(
    "pod-restarts",
    title="Container restarts, OOMKilled, CrashLoopBackOff, exited and not restarted",
    scope="k8s",
    needs=("k8s/pod.json",),
    runbooks=("k8s-oomkilled",),
    supersedes=("log-signatures",),
    follows=("pod-probes",),
)
def pod_restarts(facts: Facts) -> list[Finding]:
    pod = require_pod(facts)
    statuses = container_statuses(pod)
    status = field_dict(pod, "status")
    if not statuses:
        phase = status.get("phase", "unknown")
        return [ok("pod-restarts", f"no container has started yet (pod phase {phase})")]
    findings: list[Finding] = []
    entries = facts.get("wiki/entries") or {}
    init_names = _run_once_init_names(pod)
    policy = _restart_policy(pod)
    phase = status.get("phase")
    evicted = status.get("reason") == "Evicted"
    for cs in statuses:
        name = cs.get("name", "?")
        is_init = name in init_names
        restarts = int(number(cs.get("restartCount"), 0))
        waiting = field_dict(field_dict(cs, "state"), "waiting").get("reason")
        init_done = _init_container_done(cs, init_names)
        last_run = field_dict(field_dict(cs, "lastState"), "terminated")
        # a completed init container's own story is its last run before it completed
        term = last_run if init_done else _terminated(cs)
        exited = {} if init_done else field_dict(field_dict(cs, "state"), "terminated")
        # a container killed for memory, now or on its previous run (a terminated state shadows
        # the lastState _terminated reads)
        oom_killed = "OOMKilled" in (term.get("reason"), last_run.get("reason"))
        log_key = f"logs/{name}.log" if exited else f"logs/{name}.previous.log"
        causes, hinted, cause_lines = _log_causes(facts, log_key)
        which = "its last log" if exited else "the previous log"
        items = [evidence(f"restartCount: {restarts}", source="k8s/pod.json")]
        if waiting:
            items.append(evidence(f"state.waiting.reason: {waiting}", source="k8s/pod.json"))
        if term:
            items.append(evidence(f"last termination: {_describe(term)}", source="k8s/pod.json"))
        cause_text = ""
        if causes:
            follows = CauseGraph.from_entries(entries).consequences(causes)
            roots = [c for c in causes if c not in follows]
            causes = roots + [c for c in causes if c in follows]
            text = "; ".join(entries[c].title for c in roots)
            if follows:
                text += f" (then: {'; '.join(entries[c].title for c in follows)})"
            cause_text = f"; {which} shows: {text}"
        if hinted:  # lines that point at an entry without proving it (any SIGKILL prints Killed)
            named = "; ".join(entries[c].title for c in hinted)
            cause_text += f"; {which} hints at (weak evidence, check it): {named}"
            causes = [*causes, *hinted]
        items += cause_lines
        subject = f"container {name}"
        if oom_killed:
            limit = _memory_limit(pod, name)
            items.append(evidence(f"resources.limits.memory: {limit}", source="k8s/pod.json"))
            limit_text = f"its memory limit of {limit}" if limit else "node memory (no limit set)"
            oom_text = f"OOMKilled: exceeded {limit_text} (host RAM, not GPU memory)"
            causes = ["k8s-oomkilled", *causes]
        policy_item = evidence(f"spec.restartPolicy: {policy}", source="k8s/pod.json")
        if _ended_for_good(policy, exited, phase):
            items.append(policy_item)
            if evicted:
                message = status.get("message") or "no message"
                items.append(evidence(f"status.reason: Evicted ({message})", source="k8s/pod.json"))
                why = (
                    f"the pod was evicted ({message}): its containers are not started again, its "
                    "controller (Deployment, StatefulSet) creates a new pod"
                )
            elif is_init and policy == "Never":
                why = (
                    f"an init container that fails under restartPolicy {policy} fails the pod: "
                    "nothing serves until the pod is replaced"
                )
            elif policy == "Never" or (
                policy == "OnFailure" and number(exited.get("exitCode"), -1) == 0
            ):
                why = (
                    f"will not be restarted (restartPolicy {policy}): nothing serves until the "
                    "pod is replaced; run the server under restartPolicy Always (a Deployment or "
                    "StatefulSet)"
                )
                if policy == "OnFailure":
                    why += (
                        "; vLLM exits with code 0 even when its engine died (measured on 0.32), "
                        "and OnFailure takes that for success"
                    )
            else:  # a pod that failed for good under Always
                reason = status.get("reason") or "no reason given"
                why = f"the pod has failed ({reason}): its containers are not started again"
            head = f"{oom_text}; " if oom_killed else ""
            findings.append(
                critical(
                    "pod-restarts",
                    f"{head}exited ({_describe(exited)}): {why}{cause_text}",
                    items,
                    causes,
                    subject,
                )
            )
        elif oom_killed:
            serving = _serving_now(cs, init_done)
            recovered = serving and restarts < RECURRING_OOM_KILLS
            told = _restarted(restarts)
            if serving and restarts >= RECURRING_OOM_KILLS:
                told += ", the last for this kill"
            if init_done:
                told = (told + ", " if restarts else "") + "completed after the restart"
            elif serving:
                told += "; running and ready now, the same load will kill it again"
            elif exited:
                told += "; exited and not running now"
            findings.append(
                (warning if recovered else critical)(
                    "pod-restarts",
                    f"{oom_text}; {told}{cause_text}",
                    items,
                    causes,
                    subject,
                )
            )
        elif waiting == "CrashLoopBackOff" or (
            exited and restarts > 0 and number(exited.get("exitCode"), -1) != 0
        ):
            # a crash loop caught between two back-offs reads terminated, not waiting
            last = _describe(term) if term else "no termination recorded"
            hint = cause_text or _no_cause(facts, log_key)
            looping = "in CrashLoopBackOff" if waiting else "crash-looping"
            findings.append(
                critical(
                    "pod-restarts",
                    f"{looping}: {_restarted(restarts)}, last {last}{hint}",
                    items,
                    causes,
                    subject,
                )
            )
        elif exited:
            items.append(policy_item)
            findings.append(
                warning(
                    "pod-restarts",
                    f"exited ({_describe(exited)}) and is not running: restartPolicy {policy} "
                    f"starts it again, nothing serves until then{cause_text}",
                    items,
                    causes,
                    subject,
                )
            )
        elif restarts > 0:
            last = _describe(term) if term else "no termination recorded"
            done = ", completed after the restart" if init_done else ""
            findings.append(
                warning(
                    "pod-restarts",
                    f"{_restarted(restarts)} (last: {last}){done}{cause_text}",
                    items,
                    causes,
                    subject,
                )
            )
        else:
            findings.append(ok("pod-restarts", "no restarts", items, subject))
            continue
        findings[-1].params = _fix_params(causes, cause_lines)
    return findings
