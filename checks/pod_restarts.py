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
    field_dict,
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


def _memory_limit(pod: dict, container: str) -> str | None:
    limit = field_dict(field_dict(container_named(pod, container), "resources"), "limits").get(
        "memory"
    )
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


def _ended_for_good(policy: str, exited: dict) -> bool:
    """Whether a container that terminated (`exited`: its state.terminated) stays down: the
    kubelet starts it again except under Never, and OnFailure after exit code 0."""
    code = number(exited.get("exitCode"), -1)
    return bool(exited) and (policy == "Never" or (policy == "OnFailure" and code == 0))


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
    if not statuses:
        phase = field_dict(pod, "status").get("phase", "unknown")
        return [ok("pod-restarts", f"no container has started yet (pod phase {phase})")]
    findings: list[Finding] = []
    entries = facts.get("wiki/entries") or {}
    for cs in statuses:
        name = cs.get("name", "?")
        restarts = int(number(cs.get("restartCount"), 0))
        waiting = field_dict(field_dict(cs, "state"), "waiting").get("reason")
        term = _terminated(cs)
        exited = field_dict(field_dict(cs, "state"), "terminated")  # not running now
        policy = _restart_policy(pod)
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
        policy_item = evidence(f"spec.restartPolicy: {policy}", source="k8s/pod.json")
        if _ended_for_good(policy, exited):
            items.append(policy_item)
            why = (
                "; vLLM exits with code 0 even when its engine died (measured on 0.32), and "
                "OnFailure takes that for success"
                if policy == "OnFailure"
                else ""
            )
            findings.append(
                critical(
                    "pod-restarts",
                    f"exited ({_describe(exited)}) and will not be restarted (restartPolicy "
                    f"{policy}): nothing serves until the pod is replaced{why}; run the server "
                    f"under restartPolicy Always (a Deployment or StatefulSet){cause_text}",
                    items,
                    causes,
                    subject,
                )
            )
        elif term.get("reason") == "OOMKilled":
            limit = _memory_limit(pod, name)
            limit_text = f"its memory limit of {limit}" if limit else "node memory (no limit set)"
            items.append(evidence(f"resources.limits.memory: {limit}", source="k8s/pod.json"))
            findings.append(
                critical(
                    "pod-restarts",
                    f"OOMKilled: exceeded {limit_text} (host RAM, not GPU memory); "
                    f"restarted {restarts} times{cause_text}",
                    items,
                    ["k8s-oomkilled", *causes],
                    subject,
                )
            )
        elif waiting == "CrashLoopBackOff":
            last = _describe(term) if term else "no termination recorded"
            hint = cause_text or _no_cause(facts, log_key)
            findings.append(
                critical(
                    "pod-restarts",
                    f"in CrashLoopBackOff: restarted {restarts} times, last {last}{hint}",
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
            findings.append(
                warning(
                    "pod-restarts",
                    f"restarted {restarts} times (last: {last}){cause_text}",
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
