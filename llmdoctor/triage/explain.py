"""Triage any log: which runbook entries explain it, best first, each with a confidence.

The input (a pasted stack trace, a `kubectl describe` block, dmesg, or a 2 GB log) is streamed
once through the entries' signatures and the salient-line patterns (llmdoctor.wiki.signatures, RE2),
keeping per entry only a count, the most specific signature that fired and a few first and last
matching lines, so memory stays flat whatever the size. A paste or small file is cleaned first
(llmdoctor.triage.pasted: colour codes, HTML entities, compose prefixes, hard wraps).

One ranking fuses the evidence (`fuse`), as data rather than special cases:

* a signature hit, weighted by how specific the signature is (literal text it pins down); an
  entry's hints and a signature that is one short word (`^Killed$`) are weak evidence, never a
  signature match alone;
* the text relevance of the salient lines to each entry (`text_relevance`: the wiki search's
  ranking and the share of the error's informative words the entry holds);
* the cause graph (every entry's `explains:` front matter, llmdoctor.wiki.cause_graph): a
  consequence ranks just below its cause;
* recency: the later of two otherwise equal entries first.

A signature hit always ranks above a text-only match; text-only matches keep the wiki search's
order, so explain never ranks worse than `wiki search` of the same text. A text-only match is at
most a warning and at most TEXT_ONLY confident; when no match reaches CONFIDENT explain abstains:
it returns the salient lines, and names the closest entries only as too weak to be sure of
(`below_threshold`). No typer or rich here: the command renders.
"""

from __future__ import annotations

import math
import re
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any, BinaryIO

from llmdoctor.engine.textsource import TextSource
from llmdoctor.triage.pasted import RecordLines, clean_lines, looks_like_records
from llmdoctor.wiki.cause_graph import CauseGraph
from llmdoctor.wiki.links import page_url
from llmdoctor.wiki.signatures import SignatureSet, literal_weight

# Lines worth reading: errors, and also what people paste that says why without "error" in it
# (capability warnings, kills and exit codes, kubectl describe's Events and Last State).
SALIENT_PATTERNS = (
    r"Traceback \(most recent call last\)",
    r"[A-Za-z](Error|Exception|Interrupt|Exit)(:|$| )",
    r"(FATAL|CRITICAL|ERROR|PANIC)",
    r"[Ff]atal",
    r"[Pp]anic",
    r" error",
    r"error:",
    r"[Ff]ailed",
    r"[Ff]ailure",
    r"[Kk]illed",
    r"[Tt]imed out",
    r"[Tt]imeout",
    r"[Rr]efused",
    r"[Dd]enied",
    r"[Uu]nable to",
    r"[Cc]annot ",
    r"[Cc]ould not",
    r"[Cc]ouldn't",
    r"not found",
    r"not supported",
    r"(doesn't|does not|don't|do not) support",
    r"[Uu]nsupported",
    r"[Ff]alling back",
    r"[Ii]nsufficient",
    r"[Ii]nvalid",
    r"BackOff",
    r"Back-off",
    r"Warning  ",
    r"Xid",
    r"Segmentation fault",
    r"[Bb]us error",
    r"core dumped",
    r"[Ee]xit [Cc]ode",
    r"exit code",
    r"exited with",
    r"[Ss]ignal [0-9]+",
    r"SIG(KILL|SEGV|TERM|BUS|ABRT|ILL|FPE)",
    r"(Reason|State): +[A-Z][A-Za-z]+",
    r"[Ee]xpired",
    r"[Cc]rash",
    r"[Aa]borted",
    r"[Ss]tuck",
    r"OOM",
    r"oom[-_]kill",
    r"[Oo]ut of memory",
    r"#queue-req: [1-9]",
    r"token usage: 0\.9",
    # limits and stalls said without an error word (HTTP error bodies, NCCL warnings, queues)
    r"[Ee]xceed",
    r"(longer|larger|greater) than",
    r"[Tt]oo (long|large|many|old)",
    r"Bad Request",
    r"\"object\": ?\"error\"",
    r" WARN ",
    r"[Nn]o available",
    r"(Status|Phase): +Pending",
    r"FailedScheduling",
    r"[0-9]+/[0-9]+ nodes are available",  # the scheduler's message, pasted without its event
    r"Waiting: [1-9][0-9]+ reqs",
    r"KV cache usage: (8[5-9]|9[0-9]|100)\.",
)
# a line that gives advice ("If you are running out of memory, consider ...") is not an error
ADVICE = re.compile(r"\b[Ii]f you\b.*\b(consider|try|please|set|use)\b")
# nor is a status field that says "nothing": nvidia-smi -q's `Remapping Failure Occurred : No`,
# -q -x's `<sram_threshold_exceeded>N/A</sram_threshold_exceeded>`, describe's `Exit Code: 0`
NOTHING = r"(No|None|N/A|0|False|Disabled)"
NEGATIVE_FIELD = re.compile(
    rf"^\s*(<[A-Za-z_]+>\s*{NOTHING}\s*</[A-Za-z_]+>|[A-Za-z][A-Za-z0-9 _()/-]*:\s*{NOTHING})\s*$"
)
SALIENT_ID = "\x00salient"
FIRST, LAST = 3, 2  # evidence lines kept per entry
SALIENT_KEPT = 40  # salient lines kept (the last ones: the end of a log explains it)
QUERY_LINES = 16  # salient lines used as the search query
WHOLE_QUERY_CHARS = 32 * 1024  # a paste this short is searched whole, as `wiki search` would
CLEAN_BYTES = 8 * 1024 * 1024  # a file this small is read whole and cleaned like a paste
SNIFF = 64 * 1024  # a bigger log whose first lines here are JSON records is read as records
MAX_TEXT = 2000  # characters of one evidence line kept
SEVERITY_RANK = {"critical": 3, "warning": 2, "info": 1}

# How the evidence is fused into one confidence in [0, 1] (tuned on the `tune` half only).
# A signature hit always ranks above a text-only match: [SIGNATURE_BASE, 1] against
# [0, TEXT_ONLY], TEXT_ONLY <= SIGNATURE_BASE.
SPECIFIC_CHARS = 30  # a signature pinning this many literal characters is fully specific
SIGNATURE_BASE = 0.5  # a signature hit, however weak
SIGNATURE_SPECIFIC = 0.3  # ... plus this much for a fully specific signature
SIGNATURE_TEXT = 0.15  # ... plus this much for text that agrees
RECENCY = 0.05  # the later of two otherwise equal entries ranks first
TEXT_ONLY = 0.5  # the most a text-only match can reach
# A text-only match is confident only when the entry holds most of the error's informative
# words (coverage, rarity-weighted) AND the search found much of its text (its score, times its
# lead over the runner-up for the first entry): coverage x score at TEXT_EVIDENCE counts as
# full. Generic errors ("Connection refused") that an entry merely mentions score low on all.
TEXT_EVIDENCE = 30.0
LEAD_POWER = 1.0  # how much the first entry's lead over the second adds to its score
LEAD_CAP = 3.0  # ... counted up to this ratio
# A paste of fewer informative words than this (a bare `Exit Code: 137`, which a liveness-probe
# kill prints as well as an OOM kill) scales its text-only evidence down: a guess, not a match.
FEW_WORDS = 4
PLACE_POWER = 0.5  # a text-only match lower in the search's ranking is less likely
CONFIDENT = 0.3  # below this, explain abstains ("no entry explains this")
NO_ERROR_GUESS = 0.1  # the most a text-only match gets when no line of the input looks wrong
MAYBE_SEVERITY = "warning"  # a text-only match is at most a warning, shown as MAYBE
# A weak signature (an entry's hint, or one short word: SignatureSet.weak) fires on lines that do
# not prove the cause (`exited with code 137` follows any SIGKILL). Its hit is no signature
# match: it adds WEAK_HIT to the entry's text-only confidence, up to WEAK_CEILING, below
# CONFIDENT: the closest guess, never named on its word (the text that agrees with it is mostly
# the very line it matched).
WEAK_HIT = 0.2
WEAK_CEILING = 0.29
HINT_OFF_ERROR = 0.5  # a hint on a line that is no error line (a pasted command) counts half


@dataclass(frozen=True)
class Evidence:
    line: int
    text: str

    def to_json(self) -> dict[str, Any]:
        return {"line": self.line, "text": self.text}


@dataclass
class Match:
    """One runbook entry that explains the input, with how sure explain is of it."""

    id: str
    title: str
    severity: str
    how: str  # "signature" or "search"
    score: float = 0.0
    confidence: float = 0.0
    count: int = 0  # matching lines
    evidence: list[Evidence] = field(default_factory=list)
    explained_by: list[str] = field(default_factory=list)
    fix: list[str] = field(default_factory=list)
    snippet: str = ""
    path: str = ""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "title": self.title,
            "score": self.score,
            "confidence": self.confidence,
            "severity": self.severity,
            "how": self.how,
            "count": self.count,
            "evidence": [e.to_json() for e in self.evidence],
            "explained_by": self.explained_by,
            "fix": self.fix,
        }
        if self.snippet:
            out["snippet"] = self.snippet
        if url := page_url(self.id):
            out["url"] = url
        return out


@dataclass
class Explanation:
    """What `explain` found: confident matches best first, or an abstention with the salient
    lines it read.
    """

    source: str
    matches: list[Match]
    how: str  # "signatures" (a signature match leads), "search" (text only) or "none"
    salient: list[Evidence] = field(default_factory=list)
    matched_lines: int = 0
    total_matches: int = 0  # confident entries before --limit
    warnings: list[str] = field(default_factory=list)  # unusable signatures, file:line
    below_threshold: list[Match] = field(default_factory=list)  # weak guesses not shown

    @property
    def exit_code(self) -> int:
        """0 nothing explains it, 1 warnings (or text-only guesses), 2 a critical signature match."""
        if not self.matches:
            return 0
        if any(m.how == "signature" and m.severity == "critical" for m in self.matches):
            return 2
        return 1

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "how": self.how,
            "matched_lines": self.matched_lines,
            "total_matches": self.total_matches,
            "threshold": CONFIDENT,
            "matches": [m.to_json() for m in self.matches],
            "salient": [e.to_json() for e in self.salient],
            "warnings": self.warnings,
            # the closest entries below the threshold (named, never asserted)
            "below_threshold": [
                {"id": m.id, "confidence": m.confidence, "how": m.how} for m in self.below_threshold
            ],
        }


@dataclass
class _Hits:
    count: int = 0
    first: list[Evidence] = field(default_factory=list)
    last: deque = field(default_factory=lambda: deque(maxlen=LAST))
    last_line: int = 0
    weight: int = 0  # literal characters of the most specific signature that fired
    strong: bool = False  # a signature other than a weak one (SignatureSet.weak) fired
    on_error_line: bool = False  # one of its lines is also a salient (error) line

    def add(
        self, line: int, text: str, weight: int, strong: bool = True, salient: bool = False
    ) -> None:
        self.count += 1
        self.last_line = line
        self.weight = max(self.weight, weight)
        self.strong = self.strong or strong
        self.on_error_line = self.on_error_line or salient
        item = Evidence(line, text[:MAX_TEXT])
        if len(self.first) < FIRST:
            self.first.append(item)
        else:
            self.last.append(item)

    def evidence(self) -> list[Evidence]:
        return [*self.first, *self.last]


@dataclass
class _Reading:
    """What one pass over the input gathered."""

    hits: dict[str, _Hits]
    salient: list[Evidence]
    matched_lines: int
    text: str | None  # the cleaned text of a small input (searched whole)
    invalid: list


def read_input(
    source: TextSource | BinaryIO, entries: dict, workers: int = 1
) -> tuple[_Reading, SignatureSet]:
    """One pass over the input: signature hits per entry and the salient lines."""
    scanner = SignatureSet(
        [*entries.values(), _salient_entry()], tail_ids=[SALIENT_ID], tail_keep=SALIENT_KEPT
    )
    weights = [literal_weight(sig) for _, sig in scanner.patterns]
    hits: dict[str, _Hits] = {}
    salient: deque[Evidence] = deque(maxlen=SALIENT_KEPT)
    matched_lines = 0
    text, numbers, rest = _small_text(source)
    if text is not None:
        found = scanner.scan_text(text)
    elif rest is None:
        found = scanner.scan(source, workers=workers)
    else:
        found = scanner.scan_stream(rest)
    try:
        for m in found:
            line = numbers[m.line - 1] if numbers else m.line
            ids = m.entry_ids
            is_salient = False
            if SALIENT_ID in ids:
                if not ADVICE.search(m.text) and not NEGATIVE_FIELD.match(m.text):
                    salient.append(Evidence(line, m.text[:MAX_TEXT]))
                    is_salient = True
                ids = tuple(i for i in ids if i != SALIENT_ID)
                if not ids:
                    continue
            fired = [i for i in scanner.matching(m.text) if scanner.patterns[i][0] in ids]
            weight = max((weights[i] for i in fired), default=0)
            strong = scanner.strong_ids(fired)
            matched_lines += bool(strong)  # lines a signature matched (not only a hint)
            for entry_id in ids:
                hits.setdefault(entry_id, _Hits()).add(
                    line, m.text, weight, entry_id in strong, is_salient
                )
    finally:
        if isinstance(rest, RecordLines):
            rest.close()
    invalid = [w for w in scanner.invalid if w.entry_id != SALIENT_ID]
    return _Reading(hits, list(salient), matched_lines, text, invalid), scanner


def _small_text(source) -> tuple[str | None, list[int], BinaryIO | None]:
    """A paste, a small file or a short stream (stdin) as text cleaned by pasted.clean_lines,
    with each line's number in the input; a big file as (None, [], None) and a long stream as
    (None, [], the whole stream again), both scanned as they are, except that a big log of
    JSON records comes back as a stream of their messages (RecordLines).
    """
    if isinstance(source, TextSource):
        if source.text is not None:
            raw = source.text
        elif source.path is not None and source.size_bytes() <= CLEAN_BYTES:
            raw = source.path.read_bytes().decode("utf-8", errors="replace")
        elif source.path is not None and _records_file(source.path):
            return None, [], RecordLines(source.path.open("rb"), owned=True)
        else:
            return None, [], None
    else:
        parts, size = [], 0
        while size <= CLEAN_BYTES:  # a stream may answer in short reads (pipes, LogStream)
            chunk = source.read(CLEAN_BYTES + 1 - size)
            if not chunk:
                break
            parts.append(chunk)
            size += len(chunk)
        head = b"".join(parts)
        if len(head) > CLEAN_BYTES:
            rejoined = _Rejoined(head, source)
            return None, [], RecordLines(rejoined) if looks_like_records(head[:SNIFF]) else rejoined
        raw = head.decode("utf-8", errors="replace")
    pairs = clean_lines(raw)
    return "\n".join(t for _, t in pairs), [n for n, _ in pairs], None


def _records_file(path: Path) -> bool:
    with path.open("rb") as fh:
        return looks_like_records(fh.read(SNIFF))


class _Rejoined:
    """A stream whose first bytes were already read: those, then the rest."""

    def __init__(self, head: bytes, rest: BinaryIO):
        self._head, self._rest = head, rest

    def read(self, size: int = -1) -> bytes:
        if self._head:
            chunk = self._head if size < 0 else self._head[:size]
            self._head = self._head[len(chunk) :]
            return chunk
        return self._rest.read(size)


def explain(
    source: TextSource | BinaryIO,
    entries: dict,
    *,
    limit: int = 5,
    wiki_dirs: list[str] | None = None,
    workers: int = 1,
    name: str | None = None,
) -> Explanation:
    """Which entries explain the input, best first, each with a confidence; an abstention
    (`how` "none") when no entry is confident enough.

    Every piece of evidence is fused into one ranking: signature hits (weighted by how
    specific the signature is), the text relevance of the salient lines to each entry (the
    wiki search), the cause -> consequence table, and recency.
    """
    label = name or getattr(source, "name", None) or "<input>"
    reading, _ = read_input(source, entries, workers)
    warnings = [str(w) for w in reading.invalid]
    query = _query(reading)
    searched = _search_text(reading, query)
    results = _search(searched, max(limit, 10) * 2, wiki_dirs) if searched else []
    ranked = fuse(reading, entries, results, query or searched)
    if not (query or reading.salient):  # no line looks wrong: text alone names guesses only
        for m in ranked:
            if m.how == "search" and m.confidence > NO_ERROR_GUESS:
                m.confidence, m.score = NO_ERROR_GUESS, round(100 * NO_ERROR_GUESS, 1)
    confident = [m for m in ranked if m.confidence >= CONFIDENT]
    weak = [m for m in ranked if m.confidence < CONFIDENT]
    how = "none"
    if confident:
        how = "signatures" if confident[0].how == "signature" else "search"
    salient = reading.salient if how != "signatures" else []
    return Explanation(
        label,
        confident[:limit],
        how,
        salient,
        reading.matched_lines,
        total_matches=len(confident),
        warnings=warnings,
        below_threshold=weak[:limit],
    )


def _query(reading: _Reading) -> str:
    """The lines that say something is wrong: the salient lines and the lines a signature
    fired on (never the healthy rest of the log), without "Traceback (most recent call last)".
    """
    lines = {e.line: e for e in reading.salient}
    for h in reading.hits.values():
        lines.update((e.line, e) for e in h.evidence())
    kept = [lines[n] for n in sorted(lines) if not lines[n].text.lstrip().startswith("Traceback")]
    return search_query(kept)


def _search_text(reading: _Reading, query: str) -> str:
    """What the wiki search ranks: a short paste whole, exactly as `wiki search -` would get
    it (even when no line of it looks wrong), so explain never ranks worse than that search; a
    long log by its salient lines.
    """
    if reading.text is not None and len(reading.text) <= WHOLE_QUERY_CHARS:
        return reading.text
    return query


def fuse(reading: _Reading, entries: dict, results: list, query: str) -> list[Match]:
    """One ranking of every entry with any evidence, best first (see the module docstring)."""
    hits = reading.hits
    text = text_relevance(query, entries, results)
    by_last = sorted(hits, key=lambda i: hits[i].last_line)
    lateness = {i: (n + 1) / len(by_last) for n, i in enumerate(by_last)}
    snippets = {r.id: getattr(r, "snippet", "") for r in results}
    matches: list[Match] = []
    for entry_id in {*hits, *text}:
        entry = entries.get(entry_id)
        if entry is None:
            continue
        coverage, place, found, few = text.get(entry_id, (0.0, 0.0, 0.0, 0.0))
        h = hits.get(entry_id)
        if h is not None and h.strong:
            specific = min(h.weight, SPECIFIC_CHARS) / SPECIFIC_CHARS
            confidence = (
                SIGNATURE_BASE
                + SIGNATURE_SPECIFIC * specific
                + SIGNATURE_TEXT * min(coverage * found / TEXT_EVIDENCE, 1.0)
                + RECENCY * lateness[entry_id]
            )
            severity, how = entry.severity, "signature"
        else:
            evidence = min(coverage * found / TEXT_EVIDENCE, 1.0) * few
            confidence = TEXT_ONLY * evidence * place**PLACE_POWER
            if h is not None:
                # only weak signatures fired: a closer guess, never named on their word (the
                # text that agrees is mostly the very line the hint matched); a hint on a line
                # that is no error (a pasted command line) says less than one on an error line
                hint = WEAK_HIT if h.on_error_line else WEAK_HIT * HINT_OFF_ERROR
                confidence = min(confidence + hint, WEAK_CEILING)
            severity = _at_most_warning(entry.severity)
            how = "search"
        matches.append(
            Match(
                id=entry_id,
                title=entry.title,
                severity=severity,
                how=how,
                confidence=round(min(confidence, 1.0), 3),
                count=h.count if h else 0,
                evidence=h.evidence() if h else [],
                fix=fix_lines(entry, (e.text for e in h.evidence()) if h else ()),
                snippet="" if h is not None and h.strong else snippets.get(entry_id, ""),
                path=getattr(entry, "path", ""),
            )
        )
    _causes_first(matches, CauseGraph.from_entries(entries))
    _search_order(matches, {entry_id: t[1] for entry_id, t in text.items()})
    for m in matches:
        m.score = round(100 * m.confidence, 1)
    matches.sort(key=lambda m: (-m.confidence, -text.get(m.id, (0, 0))[1], m.id))
    return matches


def _search_order(matches: list[Match], places: dict[str, float]) -> None:
    """Text-only matches keep the wiki search's order (explain never ranks them worse than the
    search does): each is at most as confident as the one the search put before it. A guess a
    hint also points at (weak hits: `count`) is not held to that order: the hint is evidence
    the search does not weigh.
    """
    ceiling = 1.0
    search = (m for m in matches if m.how == "search" and not m.count)
    for m in sorted(search, key=lambda m: -places.get(m.id, 0.0)):
        m.confidence = round(max(min(m.confidence, ceiling), 0.0), 3)
        ceiling = m.confidence


def _at_most_warning(severity: str) -> str:
    return MAYBE_SEVERITY if SEVERITY_RANK.get(severity, 2) > 2 else severity


def _causes_first(matches: list[Match], graph: CauseGraph) -> None:
    """A consequence whose cause also matched by signature ranks just below that cause, and
    names it in `explained_by` (cycles in the graph are cut, never looped).
    """
    signed = {m.id: m for m in matches if m.how == "signature"}
    causes = {
        effect: sorted(c for c in signed if c != effect and effect in graph.effects(c))
        for effect in signed
    }
    for m in signed.values():
        m.explained_by = causes.get(m.id, [])
    settled: dict[str, float] = {}

    def capped(entry_id: str, path: frozenset[str]) -> float:
        if entry_id in settled:
            return settled[entry_id]
        m = signed[entry_id]
        value = m.confidence
        for cause in causes.get(entry_id, ()):
            if cause not in path:
                value = min(value, capped(cause, path | {entry_id}) - 0.001)
        settled[entry_id] = value
        return value

    for entry_id in sorted(signed):
        signed[entry_id].confidence = round(max(capped(entry_id, frozenset()), 0.0), 3)


WORD = re.compile(r"[A-Za-z][A-Za-z0-9]+")
STEM = 6  # words are compared on their first characters (preempted ~ preemption)


def _stems(text: str) -> set[str]:
    return {w.lower()[:STEM] for w in WORD.findall(text)}


def text_relevance(
    query: str, entries: dict, results: list
) -> dict[str, tuple[float, float, float, float]]:
    """Per entry found by the wiki search: (coverage, place, score, few). Coverage, in [0, 1],
    is the share of the salient lines' informative words (weighted by rarity in the wiki, words the
    wiki does not know included) that the entry holds: an error no entry knows covers little
    of any entry. Place is 1 / (1 + its rank in the wiki search's results); score is the
    search's own (how much matching text it found); few is the share of FEW_WORDS informative
    words the query has, up to 1.
    """
    if not query or not results:
        return {}
    from llmdoctor.wiki.query import parse_query

    words = {w[:STEM] for w in parse_query(query).words if len(w) >= 3 and w.isalpha()}
    if not words:
        return {}
    few = min(len(words) / FEW_WORDS, 1.0)
    vocab = {entry_id: _entry_stems(entry) for entry_id, entry in entries.items()}
    total = len(vocab) or 1
    known = {w: sum(1 for v in vocab.values() if w in v) for w in words}
    rarity = {
        w: math.log((total + 1) / (n + 0.5)) if n else math.log((total + 1) / 0.5)
        for w, n in known.items()
    }
    mass = sum(rarity.values()) or 1.0
    out: dict[str, tuple[float, float, float, float]] = {}
    for rank, result in enumerate(results):
        stems = vocab.get(result.id)
        if stems is None:
            continue
        coverage = sum(r for w, r in rarity.items() if w in stems) / mass
        # the search's score without its signature tier: explain weighs signature hits itself
        # (a hint's hit would otherwise count twice, as a weak hit and as a first-tier score)
        found = max(float(result.text_score), 0.0)
        runner_up = results[1].text_score if len(results) > 1 else 0.0
        if rank == 0 and runner_up > 0:
            found *= min(found / runner_up, LEAD_CAP) ** LEAD_POWER
        out[result.id] = (coverage, 1 / (1 + rank), found, few)
    return out


_STEMS: dict[tuple[str, str], set[str]] = {}


def _entry_stems(entry) -> set[str]:
    key = (entry.id, getattr(entry, "path", ""))
    found = _STEMS.get(key)
    if found is None:
        parts = [entry.id, entry.title, " ".join(entry.aliases), " ".join(entry.tags)]
        parts += [entry.symptom, entry.cause, " ".join(entry.signatures)]  # not hints: weak
        found = _STEMS[key] = _stems(" ".join(parts))
    return found


def fix_lines(entry, matched: Iterable[str] = ()) -> list[str]:
    """The leading whole steps of an entry's Fix (code kept as written), its parameters
    filled from the lines that matched (vLLM's "estimated maximum model length is 5632")."""
    from llmdoctor.parsers.fix_values import fix_values
    from llmdoctor.render.fix_text import terminal_lines

    return terminal_lines(entry, params=fix_values(entry.id, matched))


def _salient_entry():
    return SimpleNamespace(id=SALIENT_ID, signatures=list(SALIENT_PATTERNS), path="")


def search_query(lines: Iterable[Evidence]) -> str:
    """The text searched for a long log: the last exception lines when there are any (a
    traceback's last line names the error; its frames only add noise), else the last salient
    lines.
    """
    lines = list(lines)
    exceptions = [e.text for e in lines if _looks_like_exception(e.text)]
    chosen = exceptions or [e.text for e in lines]
    return "\n".join(chosen[-QUERY_LINES:])


def _looks_like_exception(text: str) -> bool:
    head = text.split(": ", 1)[0].rsplit(" ", 1)[-1]
    return head.endswith(("Error", "Exception", "Interrupt"))


def _search(query: str, limit: int, wiki_dirs: list[str] | None) -> list:
    from llmdoctor.wiki.search import search

    return search(query, limit=limit, wiki_dirs=wiki_dirs)


GZIP_MAGIC = b"\x1f\x8b"
SNIFF_BYTES = 64 * 1024
BINARY_SHARE = 0.3  # above this share of non-text characters a file is not a log
TEXT_CONTROLS = frozenset("\t\n\r\x0c\x1b\x08")


def looks_binary(sample: bytes) -> bool:
    """True when a file's first bytes are not text: many control bytes or invalid UTF-8.

    NUL bytes are ignored: a log rotated with copytruncate often starts with a run of them.
    """
    text = sample.replace(b"\x00", b"").decode("utf-8", errors="replace")
    if not text:
        return False
    bad = sum(1 for c in text if c == "\ufffd" or (c < " " and c not in TEXT_CONTROLS))
    return bad / len(text) > BINARY_SHARE


def open_input(path: str) -> TextSource | BinaryIO:
    """A file to explain, checked to be a readable text log (BadInput otherwise).

    A gzip file (a rotated `vllm.log.1.gz`) comes back as a decompressing binary stream.
    """
    from llmdoctor.errors import BadInput

    p = Path(path)
    if not p.exists():
        raise BadInput(f"{path}: no such file")
    if p.is_dir():
        raise BadInput(f"{path}: is a directory, not a log file")
    try:
        with open(p, "rb") as fh:
            head = fh.read(SNIFF_BYTES)
    except OSError as exc:
        raise BadInput(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if head.startswith(GZIP_MAGIC):
        import gzip

        return gzip.open(p, "rb")
    if looks_binary(head):
        raise BadInput(f"{path}: looks like a binary file, not a text log")
    return TextSource.from_file(p.name, p)


def open_stdin(stream: BinaryIO | None) -> BinaryIO:
    """Standard input as a binary stream, decompressed when gzip is piped in."""
    from llmdoctor.errors import BadInput

    if stream is None:
        raise BadInput("standard input is closed: give a FILE, or pipe a log into `explain -`")
    peek = getattr(stream, "peek", None)
    if peek is not None and peek(2)[:2] == GZIP_MAGIC:
        import gzip

        return gzip.GzipFile(fileobj=stream, mode="rb")
    return stream
