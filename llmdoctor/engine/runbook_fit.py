"""Which runbooks a finding keeps: those whose Fix fits its subject, less those another of its
runbooks explains.

A runbook may declare the subjects its Fix acts on (`applies_to: [pod]` in its front matter: it
changes the pod or the server in it); a finding about a node or a GPU never carries such a fix
(a pod-spec fix under a GPU that fell off the bus). And when a finding links a cause and what
follows from it (a CUDA OOM at start-up, then the engine's death), the consequence's runbook adds
nothing to do: the cause's Fix is the one to act on (the cause graph, `explains:`). Checks list
their runbooks first what they found; only a runbook after its cause is dropped, unless the
finding's runbooks are alternatives none of which is proven (a slow first token with no queue:
a slow tokenizer, or a proxy in front), where one leading to another says nothing.
"""

from __future__ import annotations

from collections.abc import Mapping

from llmdoctor.engine.findings import Finding
from llmdoctor.wiki.cause_graph import CauseGraph

# the kind of subject a check's findings are about, by its scope; logs and history name either
SCOPE_KIND = {"node": "node", "k8s": "pod", "vllm": "pod", "capacity": "pod"}


def fits(entry, scope: str | None) -> bool:
    """Whether the entry's Fix applies to a finding of a check of this scope."""
    kinds = getattr(entry, "applies_to", None) or []
    kind = SCOPE_KIND.get(scope or "")
    return not kinds or kind is None or kind in kinds


def fitting_runbooks(
    runbooks: list[str],
    scope: str | None,
    entries: Mapping,
    graph: CauseGraph,
    alternatives: bool = False,
) -> list[str]:
    """The runbook ids a finding of this scope keeps, in their order; `alternatives`: they are
    places to look, none proven (Finding.runbooks_unproven), so none is what another led to."""
    kept = [rid for rid in runbooks if rid not in entries or fits(entries[rid], scope)]
    if alternatives:
        return kept
    # a check lists what it found first; a runbook after one that explains it is what followed
    # (CUDA OOM, then engine death), while one before it is the check's own answer with a
    # possible cause beside it (an OOM that may be fragmentation): that pair stays
    return [rid for n, rid in enumerate(kept) if not any(graph.explains(c, rid) for c in kept[:n])]


def keep_fitting_runbooks(findings: list[Finding], scopes: Mapping[str, str], entries) -> None:
    """Drop, in place, the runbooks that do not fit each finding (see the module docstring)."""
    if not entries:
        return
    graph = CauseGraph.from_entries(entries)
    for f in findings:
        f.runbooks = fitting_runbooks(
            f.runbooks, scopes.get(f.check), entries, graph, f.runbooks_unproven
        )
