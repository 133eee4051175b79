"""Every runbook entry's signatures over the container logs and the kernel log.

One finding per matched entry, with the matching lines (source, line number, text) as evidence.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from llmdoctor.engine.facts import FactMissing, Facts
from llmdoctor.engine.findings import Finding, Severity, evidence, info, ok, warning
from llmdoctor.engine.registry import check
from llmdoctor.engine.textsource import TextSource
from llmdoctor.parsers.fix_values import fix_values
from llmdoctor.parsers.torch_oom import RULED_OUT_BY_NUMBERS
from llmdoctor.parsers.vllm_memory_check import STARTUP_ENTRY, parse_free_memory_check
from llmdoctor.parsers.xid import not_text_reason, read_for_lines
from llmdoctor.wiki.cause_graph import CauseGraph
from llmdoctor.wiki.holding import holding_patterns
from llmdoctor.wiki.request_log import request_log
from llmdoctor.wiki.server_phase import retold_at_startup
from llmdoctor.wiki.signatures import LineMatch, SignatureSet

NODE_LOG = "node/kernel.log"
LOG_PREFIXES = ("logs/", NODE_LOG)
FIRST, LAST = 6, 4
SEVERITY = {"critical": Severity.CRITICAL, "warning": Severity.WARNING, "info": Severity.INFO}


@dataclass
class EntryHits:
    count: int = 0
    first: list[tuple[str, LineMatch]] = field(default_factory=list)
    last: list[tuple[str, LineMatch]] = field(default_factory=list)
    sources: dict[str, int] = field(default_factory=dict)
    strong: bool = False  # a signature other than a weak one (SignatureSet.weak) fired

    def add(self, source: str, m: LineMatch, strong: bool) -> None:
        self.count += 1
        self.strong = self.strong or strong
        self.sources[source] = self.sources.get(source, 0) + 1
        if len(self.first) < FIRST:
            self.first.append((source, m))
        else:
            self.last = [*self.last[-(LAST - 1) :], (source, m)]


def scan_logs(facts: Facts, keys: list[str], signatures: SignatureSet) -> dict[str, EntryHits]:
    """Matches per entry id over the given log facts (streamed)."""
    hits: dict[str, EntryHits] = {}
    for key in keys:
        for m in signatures.scan(facts.require(key)):
            if request_log(m.text):  # a prompt that quotes an error is no error
                continue
            strong = signatures.strong_ids(signatures.matching(m.text))
            for entry_id in m.entry_ids:
                hits.setdefault(entry_id, EntryHits()).add(key, m, entry_id in strong)
    return hits


@check(
    "log-signatures",
    title="Known error signatures in logs",
    scope="logs",
    needs=("wiki/entries",),
    kind="generic",
)
def log_signatures(facts: Facts) -> list[Finding]:
    keys = [k for k in facts.require_any(LOG_PREFIXES) if not k.endswith(".json")]
    entries = facts.require("wiki/entries")
    signatures = SignatureSet(entries.values())
    readable, unreadable = [], []
    for key in keys:
        log = facts.require(key)
        why = (
            not_text_reason(log, "a text log", empty=key.startswith("logs/"))
            if isinstance(log, TextSource)
            else None
        )
        (readable if read_for_lines(why) else unreadable).append((key, why))
    hits = scan_logs(facts, [k for k, _ in readable], signatures)
    # a binary log in which no signature matched was not read for what it may hold
    matched = {source for h in hits.values() for source in h.sources}
    unreadable += [(key, why) for key, why in readable if why and key not in matched]
    readable = [(key, why) for key, why in readable if not why or key in matched]
    if not readable:
        raise FactMissing(keys[0], "; ".join(f"{k} {why}" for k, why in unreadable))
    # a log that was wanted and not collected (the previous container's, refused by the API) or
    # not text was not looked at: said, so that no signature found is not read as none there
    not_read = {key: f"it {why}" for key, why in unreadable}
    not_read.update(facts.missing_under("logs/"))
    not_read_items = [evidence(f"not read: {why}", source=key) for key, why in not_read.items()]
    findings: list[Finding] = []
    if signatures.invalid:  # a team signature that cannot be matched is said, never dropped
        findings.append(
            warning(
                "log-signatures",
                f"{len(signatures.invalid)} runbook signature(s) ignored: they cannot be matched",
                [evidence(str(bad)) for bad in signatures.invalid],
            )
        )
    if not hits:
        names = ", ".join(k for k, _ in readable)
        if not_read:
            summary = f"no known error signature in {names}; not read: {', '.join(not_read)}"
            findings.append(info("log-signatures", summary, not_read_items))
        else:
            findings.append(ok("log-signatures", f"no known error signature in {names}"))
        return findings
    if not_read:
        summary = f"not read: {', '.join(not_read)}"
        findings.append(info("log-signatures", summary, not_read_items))
    _numbers_rule_out(hits)
    _overruled(entries, hits)
    retold = _retold_at_startup(facts, entries, hits)
    explained_by = _consequences_in_one_log(CauseGraph.from_entries(entries), hits)
    for entry_id, h in hits.items():
        entry = entries[entry_id]
        severity = SEVERITY.get(entry.severity, Severity.WARNING)
        follows = ""
        if entry_id in retold:  # its lines are another entry's, before the server served
            follows = f" (at start-up: the lines of {retold[entry_id]})"
        if entry_id in explained_by:
            # a consequence of something else in the same logs: the cause is the finding to act on
            causes = ", ".join(explained_by[entry_id])
            follows = f" (follows from {causes})"
            # ... unless only a hint names that cause: the consequence then keeps its severity (an
            # engine dead beside a bare `unspecified launch failure` is still a dead engine)
            if any(hits[cause].strong for cause in explained_by[entry_id] if cause in hits):
                severity = min(severity, Severity.WARNING, key=lambda s: s.rank)
        if not h.strong:
            # only a hint or a one-word signature (`exited with code 137`, a bare `Killed`: any
            # SIGKILL prints them) matched: worth a look, not a verdict (as in explain)
            follows += " (only a hint matched: weak evidence)"
            severity = min(severity, Severity.WARNING, key=lambda s: s.rank)
        where = (
            ", ".join(h.sources)
            if len(h.sources) == 1
            else ", ".join(f"{src} ({n})" for src, n in h.sources.items())
        )
        items = [evidence(m.text, source=src, line=m.line) for src, m in h.first]
        if h.count > FIRST + LAST:
            items.append(evidence(f"… {h.count - FIRST - LAST} more matching lines …"))
        items += [evidence(m.text, source=src, line=m.line) for src, m in h.last]
        lines = "line" if h.count == 1 else "lines"
        findings.append(
            Finding(
                check="log-signatures",
                severity=severity,
                summary=f"{entry.title}: {h.count} matching {lines} in {where}{follows}",
                evidence=items,
                runbooks=[entry_id, *([retold[entry_id]] if entry_id in retold else [])],
                params=fix_values(entry_id, (m.text for _, m in [*h.first, *h.last])),
            )
        )
    return findings


def _consequences_in_one_log(graph: CauseGraph, hits: dict[str, EntryHits]) -> dict[str, list[str]]:
    """For each matched entry another one explains: the causes seen in a log where it was seen,
    or in the node's kernel log. A cause only the previous run logged did not end the running
    container (a disk full before the restart is not why today's engine died)."""
    found: dict[str, list[str]] = {}
    for effect, causes in graph.consequences(hits).items():
        where = set(hits[effect].sources)
        kept = [c for c in causes if where & set(hits[c].sources) or NODE_LOG in hits[c].sources]
        if kept:
            found[effect] = kept
    return found


def _numbers_rule_out(hits: dict[str, EntryHits]) -> None:
    """Drop the hits of an entry PyTorch's own numbers on those lines contradict
    (`torch_oom.RULED_OUT_BY_NUMBERS`: the GPU short, not fragmented; no other process holding a
    GiB; vLLM's free-memory check with little in use), as explain holds it: one OOM is told one
    way. Its lines stay the OOM entry's, a check's the start-up entry's.
    """
    for entry_id, told in RULED_OUT_BY_NUMBERS.items():
        found = hits.get(entry_id)
        lines = [m.text for _, m in (*found.first, *found.last)] if found else []
        if found and told(lines):
            checked = any(parse_free_memory_check(t) for t in lines)
            hits.setdefault(STARTUP_ENTRY if checked else "cuda-oom-runtime", hits.pop(entry_id))


def _overruled(entries: dict, hits: dict[str, EntryHits]) -> None:
    """Drop the hits of an entry whose lines another line of the same log says mean another
    cause (its `overruled_by`: NGC's driver banner above the runtime's "insufficient driver"),
    as explain holds it back; the entry that signs that line tells the story."""
    for entry_id in list(hits):
        patterns = holding_patterns(entries.get(entry_id), "overruled_by")
        if not patterns:
            continue
        sources = set(hits[entry_id].sources)
        kept = [
            m.text
            for other in hits.values()
            for source, m in (*other.first, *other.last)
            if source in sources
        ]
        if any(p.search(text) for p in patterns for text in kept):
            del hits[entry_id]


def _retold_at_startup(facts: Facts, entries: dict, hits: dict[str, EntryHits]) -> dict[str, str]:
    """Move the hits of an entry whose lines came while the server started to the entry its
    `at_startup` names (wiki/server_phase.py: a start-up OOM is a model that does not fit, not a
    request too big), unless that entry matched on its own: {the story's id: the entry whose
    lines they are}.
    """
    retold: dict[str, str] = {}
    for entry_id in list(hits):
        source, first = hits[entry_id].first[0]
        # its last line in that log (another log's lines are another life's)
        kept = [m for src, m in (*hits[entry_id].first, *hits[entry_id].last) if src == source]
        log = facts.require(source)
        story = retold_at_startup(
            entries, {entry_id: first.line}, log.lines, {entry_id: kept[-1].line}
        ).get(entry_id)
        if story is not None and story not in hits:
            hits[story] = hits.pop(entry_id)
            retold[story] = entry_id
    return retold
