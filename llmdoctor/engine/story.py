"""One story per incident: link each finding to the finding that causes it.

Runs once every check has run. A finding is explained by another when both are about the same
subject (the same pod, container, GPU, model; a subject that names none of these is the whole
target) and one of these holds:

* the cause's runbook explains the effect's runbook in the cause graph (runbook front matter
  `explains:`, directly or through a chain: xid-fallen-off-bus -> engine-dead -> pod-not-ready);
* the effect's check declares it `follows` the cause's check (pod-readiness follows
  pod-restarts: a crash loop is why the pod is not Ready);
* both name the same runbook: one problem seen by two checks (the queue, the slow probe and
  the latency percentiles of one saturated server); the first in report order tells it.

A cause dated after its effect, both on one clock (`Finding.began`: the Xid lines' kernel-log
times), explains nothing: an Xid 79 at 19:03 is not why an application faulted at 18:45. Nor
does a cause the running container logged explain what only the run before the restart logged.

The same check naming the same runbook on several subjects (one SXid per NVSwitch, one Xid 45
per GPU, one crash loop per replica) is one problem too, whatever the subjects.

A finding nothing explains is a root: the report leads with it and lists what it explains
under it. An ok finding is contradicted when a problem on its subject is the one its check exists
to catch (its first runbook); for what a live request to vLLM saw, when a critical problem its
check follows; or when a critical problem seen now (the running container's log, a live
request) is of an entry that directly explains the check's first runbook (an engine dead in the
current log beside "the pod is Ready"). The report then gives it no check mark.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from llmdoctor.engine.findings import Finding, Severity
from llmdoctor.engine.registry import check_spec
from llmdoctor.wiki.cause_graph import CauseGraph

_PCI = re.compile(r"\b(?:[0-9a-fA-F]{4,8}:)?([0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-9a-fA-F])\b")
_POD = re.compile(r"^((?:pod|node)/\S+)")
_CONTAINER = re.compile(r"\bcontainer (\S+)")
_MODEL = re.compile(r"\bmodel (\S+)")

# how strongly one finding is tied to another; stronger ties are kept first, so a weaker one
# that would close a circle is dropped
_DECLARED, _SAME_RUNBOOK, _SAME_CHECK = 0, 1, 2


@dataclass
class Chapter:
    """A root finding and every finding it explains, directly or through others."""

    root: Finding
    folded: list[Finding] = field(default_factory=list)
    runbook: str | None = None  # the runbook of the story's cause (see root_runbook)

    @property
    def severity(self) -> Severity:
        """The worst severity of the story: a warning cause of a critical effect is critical."""
        return max((f.severity for f in (self.root, *self.folded)), key=lambda s: s.rank)


def subject_keys(subject: str | None) -> dict[str, str]:
    """What a subject names: pod (a merged report's prefix), gpu (PCI bus), container, model."""
    text = subject or ""
    keys = {}
    for name, pattern in (("pod", _POD), ("gpu", _PCI), ("container", _CONTAINER)):
        if m := pattern.search(text):
            keys[name] = m.group(1).lower()
    if m := _MODEL.search(text):
        keys["model"] = m.group(1)
    return keys


def same_subject(a: str | None, b: str | None) -> bool:
    """Whether two subjects can be the same thing: nothing they both name differs."""
    ka, kb = subject_keys(a), subject_keys(b)
    return all(ka[k] == kb[k] for k in ka.keys() & kb.keys())


def _follows(effect_check: str, cause_check: str) -> bool:
    spec = check_spec(effect_check)
    return spec is not None and cause_check in spec.follows


def _explains(graph: CauseGraph, causes: list[str], effects: list[str]) -> bool:
    return any(graph.explains(c, e) for c in causes for e in effects if c != e)


def _tie(graph: CauseGraph, cause: Finding, effect: Finding, cause_first: bool) -> int | None:
    """How `cause` explains `effect`, or None; `cause_first`: cause comes earlier in order."""
    shared = set(cause.runbooks) & set(effect.runbooks)
    if cause.check == effect.check and shared:
        return _SAME_CHECK if cause_first else None
    if not same_subject(cause.subject, effect.subject):
        return None
    if _began_after(cause, effect) or _later_run(cause, effect):
        return None
    if _follows(effect.check, cause.check):
        return _DECLARED
    if shared:  # one problem seen by two checks: the first in report order tells it
        return _SAME_RUNBOOK if cause_first else None
    forward = _explains(graph, cause.runbooks, effect.runbooks)
    if forward and not _explains(graph, effect.runbooks, cause.runbooks):
        return _DECLARED
    return None


# how much later than its effect a cause may be dated and still explain it (clocks of one kind,
# logged a line or a scrape apart)
LATE_CAUSE_S = 60


def _began_after(cause: Finding, effect: Finding) -> bool:
    """Whether `cause` began after `effect` did, both dated on one clock (an Xid 79 at 19:03
    explains no application fault of 18:45: those came first)."""
    if cause.began is None or effect.began is None or cause.began[0] != effect.began[0]:
        return False
    return cause.began[1] > effect.began[1] + LATE_CAUSE_S


def _sources(finding: Finding) -> list[str]:
    """Where the finding's evidence was read (`logs/vllm.previous.log`, `vllm/metrics.txt`)."""
    return [str(item.get("source") or "") for item in finding.evidence if isinstance(item, dict)]


def _log_runs(finding: Finding) -> set[str]:
    """Which runs of the container the finding's log lines come from: "previous" (the log of
    the run before the restart), "current"."""
    return {
        "previous" if source.endswith(".previous.log") else "current"
        for source in _sources(finding)
        if source.startswith("logs/")
    }


def _later_run(cause: Finding, effect: Finding) -> bool:
    """Whether `cause` was logged only by the running container and `effect` only by the run
    before it: what fails now did not end the previous run (fabric manager's error 802 in
    today's log explains no engine that died before the restart)."""
    return _log_runs(cause) == {"current"} and _log_runs(effect) == {"previous"}


def _reaches(start: Finding, goal: Finding, parents: dict[int, list[Finding]]) -> bool:
    """Whether `goal` is already among the causes of `start` (an edge start -> goal would
    then close a circle)."""
    todo, seen = [start], set()
    while todo:
        current = todo.pop()
        if current is goal:
            return True
        if id(current) in seen:
            continue
        seen.add(id(current))
        todo.extend(parents.get(id(current), []))
    return False


def link_findings(findings: list[Finding], entries: Mapping) -> None:
    """Set every finding's explained_by / explains / contradicted_by (findings in report order)."""
    graph = CauseGraph.from_entries(entries)
    for f in findings:
        f.explained_by, f.explains, f.contradicted_by = [], [], []
    problems = [f for f in findings if f.severity is not Severity.OK]
    # an info finding (a note, a measurement not taken) explains nothing and contradicts
    # nothing; nor does a warning no runbook covers (a /metrics scrape rejected as damaged):
    # it says what could not be read, not why the service is unwell
    causes = [
        f
        for f in problems
        if f.severity is Severity.CRITICAL or (f.severity is Severity.WARNING and f.runbooks)
    ]
    can_cause = {id(f) for f in causes}
    ties = []
    for i, cause in enumerate(problems):
        if id(cause) not in can_cause:
            continue
        for j, effect in enumerate(problems):
            if i != j and (tie := _tie(graph, cause, effect, i < j)) is not None:
                ties.append((tie, i, j))
    parents: dict[int, list[Finding]] = {}
    for _, i, j in sorted(ties):
        cause, effect = problems[i], problems[j]
        if _reaches(cause, effect, parents):
            continue
        parents.setdefault(id(effect), []).append(cause)
        effect.explained_by.append(cause)
        cause.explains.append(effect)
    for f in findings:
        if f.severity is Severity.OK:
            f.contradicted_by = [p for p in causes if _contradicts(p, f, graph)]


def _contradicts(problem: Finding, fine: Finding, graph: CauseGraph) -> bool:
    if not same_subject(problem.subject, fine.subject):
        return False
    spec = check_spec(fine.check)
    if spec is None:
        return False
    # what a live request saw cannot stand beside a critical failure upstream of it (a Pending
    # pod "serves qwen7b"): the answer came from elsewhere, or from before the failure
    upstream = problem.severity is Severity.CRITICAL and _follows(fine.check, problem.check)
    if upstream and spec.scope == "vllm":
        return True
    if not spec.runbooks:
        return False
    # the problem the check exists to catch is its first runbook (the others it may link)
    if spec.runbooks[0] in problem.runbooks:
        return True
    # a critical failure seen now (the running container's log, a live request) whose entry
    # directly causes what the check watches: "the pod is Ready" beside an engine that died in
    # the current log was read before the kubelet noticed, or the probe does not look
    # (proven causes only: a slow first token's "places to look" prove nothing)
    # (never of what was settled before the container started: its image, its scheduling); a
    # consequence made milder because its cause was found is as much a failure seen now (the
    # engine died of an illegal memory access: still dead)
    if spec.before_start:
        return False
    failed = problem.severity is Severity.CRITICAL or any(
        cause.severity is Severity.CRITICAL for cause in problem.explained_by
    )
    if not failed or problem.runbooks_unproven:
        return False
    direct = any(spec.runbooks[0] in graph.effects(r) for r in problem.runbooks)
    return direct and _seen_now(problem)


def _seen_now(finding: Finding) -> bool:
    """Whether the finding quotes the running container's log or a live request to vLLM (not
    a previous run's log, the cluster's record of a past restart, or history)."""
    runs = _log_runs(finding)
    return "current" in runs or any(s.startswith("vllm/") for s in _sources(finding))


def previous_run_only(finding: Finding) -> bool:
    """Whether the finding's log evidence is the previous container's log alone (a crash that
    restarted), with nothing from the running container or a live request."""
    return "previous" in _log_runs(finding) and not _seen_now(finding)


def root_of(finding: Finding) -> Finding:
    """The finding at the start of the first chain of causes."""
    seen = set()
    while finding.explained_by and id(finding) not in seen:
        seen.add(id(finding))
        finding = finding.explained_by[0]
    return finding


def root_runbook(chapter: Chapter, graph: CauseGraph) -> str | None:
    """The runbook of the story's cause: the root's first runbook that none of its other
    runbooks explains (cuda-oom-runtime, not the engine-dead it leads to). None when the root
    has none: a consequence's runbook (pod-not-ready) does not name the cause, nor does one
    of several places to look (`runbooks_unproven`), unless a finding folded under it proves
    one of them (a queue seen in one scrape, and vLLM's queue time p95 at 9.7 s)."""
    ids = list(dict.fromkeys(chapter.root.runbooks))
    if chapter.root.runbooks_unproven:
        proven = {r for f in chapter.folded if not f.runbooks_unproven for r in f.runbooks}
        ids = [rid for rid in ids if rid in proven]
        if not ids:
            return None
    for rid in ids:
        if not any(other != rid and graph.explains(other, rid) for other in ids):
            return rid
    return ids[0] if ids else None


def chapters(findings: list[Finding], entries: Mapping | None = None) -> list[Chapter]:
    """The problems as stories: each root with what it explains, worst story first (in the
    findings' own order within a severity, except that a story told by the previous container's
    log alone comes after one the running container shows: the pod fails now for that one);
    `entries` (the wiki) names each story's runbook."""
    problems = [f for f in findings if f.severity is not Severity.OK]
    order = [Chapter(f) for f in problems if root_of(f) is f]
    by_root = {id(c.root): c for c in order}
    for f in problems:
        root = root_of(f)
        if root is not f:
            by_root[id(root)].folded.append(f)
    graph = CauseGraph.from_entries(entries or {})
    for chapter in order:
        chapter.runbook = root_runbook(chapter, graph)
    return sorted(order, key=lambda c: (-c.severity.rank, previous_run_only(c.root)))
