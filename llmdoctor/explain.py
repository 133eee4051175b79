"""Triage any log: which runbook entries explain it, best first, with the lines that say so.

The input (a pasted stack trace, a `kubectl describe` block, dmesg, or a 2 GB log) is streamed
once through the entries' signatures (llmdoctor.signatures), keeping per entry only a count and
a few first and last matching lines, so memory stays flat whatever the size.

Ranking, as data rather than special cases:

* signature matches come first; among them an entry's *depth* in the "X explains Y" table
  (`EXPLAINS` plus any entry's own `explains:` front matter) orders root causes before the
  consequences they explain (an Xid 79 before the EngineDeadError after it);
* then the score: how specific the matching signature is (fixed text it pins down), how often
  and how late the entry matched, and its severity.

When no signature matches, the salient lines (exceptions, tracebacks' last lines, FATAL/ERROR
lines, failed/killed/timeout lines) are searched in the wiki's bm25 index, so unseen wording
still lands near the right entry. No typer or rich here: the command renders the result.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any, BinaryIO

from llmdoctor.signatures import LineMatch, SignatureSet, literal_weight
from llmdoctor.textsource import TextSource
from llmdoctor.wiki.links import page_url

# cause -> the entries it explains when both match (the consequence ranks below its cause)
EXPLAINS: dict[str, tuple[str, ...]] = {
    "xid-fallen-off-bus": (
        "engine-dead",
        "nccl-failure",
        "illegal-memory-access",
        "gpu-not-visible",
        "nvml-driver-library-mismatch",
        "gateway-timeout",
    ),
    "xid-ecc-memory": (
        "engine-dead",
        "nccl-failure",
        "illegal-memory-access",
        "nan-or-garbage-output",
    ),
    "gsp-timeout": ("engine-dead", "nccl-failure", "gpu-not-visible", "illegal-memory-access"),
    "illegal-memory-access": ("engine-dead", "nccl-failure"),
    "shm-too-small": ("nccl-failure", "engine-dead"),
    "nccl-failure": ("engine-dead", "gateway-timeout"),
    "gpu-memory-fragmentation": ("cuda-oom-runtime", "engine-dead"),
    "gpu-memory-taken-by-other-process": (
        "cuda-oom-runtime",
        "vllm-startup-memory-insufficient",
        "kv-cache-too-small-for-max-model-len",
        "engine-dead",
    ),
    "cuda-oom-runtime": ("engine-dead", "gateway-timeout"),
    "vllm-startup-memory-insufficient": ("engine-dead", "probe-killed-during-load"),
    "kv-cache-too-small-for-max-model-len": ("engine-dead",),
    "driver-cuda-mismatch": ("engine-dead", "gpu-not-visible"),
    "nvml-driver-library-mismatch": ("gpu-not-visible", "k8s-gpu-unschedulable", "engine-dead"),
    "gpu-not-visible": ("engine-dead", "k8s-gpu-unschedulable"),
    "no-kernel-image": ("engine-dead",),
    "unsupported-quantization-or-dtype": ("engine-dead",),
    "trust-remote-code": ("engine-dead", "tokenizer-problem"),
    "model-download-failure": ("engine-dead", "tokenizer-problem", "probe-killed-during-load"),
    "tokenizer-problem": ("engine-dead",),
    "k8s-oomkilled": ("engine-dead", "probe-killed-during-load"),
    "kv-cache-preemption": ("queue-saturation", "gateway-timeout"),
    "queue-saturation": ("gateway-timeout",),
    "engine-dead": ("gateway-timeout",),
}

# Lines worth reading when no signature matched (one-line regexes, same engine as signatures)
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
    r"not found",
    r"not supported",
    r"[Ii]nvalid",
    r"BackOff",
    r"Back-off",
    r"Warning  ",
    r"NVRM: ",
    r"Segmentation fault",
    r"core dumped",
    r"exit code",
    r"[Ee]xpired",
    r"[Cc]rash",
    r"[Aa]borted",
    r"[Ss]tuck",
    r"OOM",
    r"oom[-_]kill",
)
SALIENT_ID = "\x00salient"
FIRST, LAST = 3, 2  # evidence lines kept per entry
SALIENT_KEPT = 40  # salient lines kept (the last ones: the end of a log explains it)
QUERY_LINES = 12  # salient lines used as the search query
MAX_TEXT = 2000  # characters of one evidence line kept
SEVERITY_RANK = {"critical": 3, "warning": 2, "info": 1}


@dataclass(frozen=True)
class Evidence:
    line: int
    text: str

    def to_json(self) -> dict[str, Any]:
        return {"line": self.line, "text": self.text}


@dataclass
class Match:
    """One runbook entry that explains the input."""

    id: str
    title: str
    severity: str
    how: str  # "signature" or "search"
    score: float = 0.0
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
    """What `explain` found: matches best first, or the salient lines it searched with."""

    source: str
    matches: list[Match]
    how: str  # "signatures", "search" or "none"
    salient: list[Evidence] = field(default_factory=list)
    matched_lines: int = 0
    total_matches: int = 0  # entries matched before --limit

    @property
    def exit_code(self) -> int:
        """0 nothing matched, 1 only warnings (or search guesses), 2 a critical entry matched."""
        if not self.matches:
            return 0
        if self.how == "signatures" and any(m.severity == "critical" for m in self.matches):
            return 2
        return 1

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "how": self.how,
            "matched_lines": self.matched_lines,
            "total_matches": self.total_matches,
            "matches": [m.to_json() for m in self.matches],
            "salient": [e.to_json() for e in self.salient],
        }


@dataclass
class _Hits:
    count: int = 0
    first: list[Evidence] = field(default_factory=list)
    last: deque = field(default_factory=lambda: deque(maxlen=LAST))
    last_line: int = 0

    def add(self, line: int, text: str) -> None:
        self.count += 1
        self.last_line = line
        item = Evidence(line, text[:MAX_TEXT])
        if len(self.first) < FIRST:
            self.first.append(item)
        else:
            self.last.append(item)

    def evidence(self) -> list[Evidence]:
        return [*self.first, *self.last]


def explains_table(entries: dict) -> dict[str, set[str]]:
    """EXPLAINS merged with each entry's own `explains: [ids]` front matter."""
    table = {cause: set(effects) for cause, effects in EXPLAINS.items()}
    for entry in entries.values():
        extra = (getattr(entry, "front_matter", None) or {}).get("explains") or []
        if isinstance(extra, str):
            extra = [extra]
        table.setdefault(entry.id, set()).update(str(e) for e in extra)
    return table


def consequences(ids: list[str], table: dict[str, set[str]]) -> dict[str, list[str]]:
    """For each matched id that another matched id explains: the ids that explain it."""
    return {
        effect: [cause for cause in ids if effect in table.get(cause, ())]
        for effect in ids
        if any(effect in table.get(cause, ()) for cause in ids if cause != effect)
    }


def explain(
    source: TextSource | BinaryIO,
    entries: dict,
    *,
    limit: int = 5,
    wiki_dirs: list[str] | None = None,
    workers: int = 1,
    name: str | None = None,
) -> Explanation:
    """Match the input against every entry's signatures; fall back to a wiki search.

    `source` is a TextSource (file or text) or a binary stream (stdin); a stream is read once,
    so its salient lines are collected in the same pass.
    """
    label = name or getattr(source, "name", None) or "<input>"
    signatures = SignatureSet(entries.values())
    hits: dict[str, _Hits] = {}
    salient: deque[Evidence] = deque(maxlen=SALIENT_KEPT)
    matched_lines = 0
    single_pass = not (isinstance(source, TextSource) and source.path is not None)
    scanner = SignatureSet([*entries.values(), _salient_entry()]) if single_pass else signatures
    for m in _scan(scanner, source, workers):
        ids = m.entry_ids
        if SALIENT_ID in ids:
            salient.append(Evidence(m.line, m.text[:MAX_TEXT]))
            ids = tuple(i for i in ids if i != SALIENT_ID)
            if not ids:
                continue
        matched_lines += 1
        for entry_id in ids:
            hits.setdefault(entry_id, _Hits()).add(m.line, m.text)
    if hits:
        matches = rank(hits, entries, signatures)
        return Explanation(
            label, matches[:limit], "signatures", [], matched_lines, total_matches=len(matches)
        )
    if not single_pass:
        salient_set = SignatureSet([_salient_entry()])
        for m in _scan(salient_set, source, workers):
            salient.append(Evidence(m.line, m.text[:MAX_TEXT]))
    lines = list(salient)
    query = search_query(lines)
    results = _search(query, limit, wiki_dirs) if query else []
    matches = [_search_match(r, entries) for r in results]
    return Explanation(
        label, matches, "search" if matches else "none", lines, 0, total_matches=len(matches)
    )


def fix_lines(entry, max_lines: int = 4) -> list[str]:
    """The first lines of an entry's Fix, without markdown code fences."""
    lines = [ln.rstrip() for ln in entry.fix.splitlines() if ln.strip()]
    return [ln for ln in lines if not ln.lstrip().startswith("```")][:max_lines]


def _salient_entry():
    return SimpleNamespace(id=SALIENT_ID, signatures=list(SALIENT_PATTERNS))


def _scan(signatures: SignatureSet, source, workers: int) -> Iterator[LineMatch]:
    if isinstance(source, TextSource):
        return signatures.scan(source, workers=workers)
    return signatures.scan_stream(source)


def rank(hits: dict[str, _Hits], entries: dict, signatures: SignatureSet) -> list[Match]:
    """Order matched entries: root causes before what they explain, then by score."""
    weights = _entry_weights(hits, signatures)
    most = max(h.count for h in hits.values())
    by_last = sorted(hits, key=lambda i: hits[i].last_line)
    lateness = {
        i: (n / (len(by_last) - 1) if len(by_last) > 1 else 1.0) for n, i in enumerate(by_last)
    }
    causes = _causes(set(hits), explains_table(entries))
    depth = _depths(set(hits), causes)
    matches = []
    for entry_id, h in hits.items():
        entry = entries.get(entry_id)
        severity = getattr(entry, "severity", "warning")
        specificity = min(weights.get(entry_id, 0), 60) / 60
        frequency = math.log1p(h.count) / math.log1p(most) if most > 1 else 1.0
        score = (
            100
            + 30 * specificity
            + 10 * frequency
            + 10 * lateness[entry_id]
            + 5 * SEVERITY_RANK.get(severity, 2)
        )
        matches.append(
            Match(
                id=entry_id,
                title=getattr(entry, "title", entry_id),
                severity=severity,
                how="signature",
                score=round(score, 2),
                count=h.count,
                evidence=h.evidence(),
                explained_by=sorted(causes.get(entry_id, ())),
                fix=fix_lines(entry) if entry is not None else [],
                path=getattr(entry, "path", ""),
            )
        )
    matches.sort(key=lambda m: (depth[m.id], -m.score, m.id))
    return matches


def _entry_weights(hits: dict[str, _Hits], signatures: SignatureSet) -> dict[str, int]:
    """Per entry: the most specific of its signatures that fired on a kept evidence line."""
    weights: dict[str, int] = {}
    for entry_id, pattern in signatures.patterns:
        h = hits.get(entry_id)
        if h is None:
            continue
        if any(pattern.search(e.text) for e in h.evidence()):
            weights[entry_id] = max(weights.get(entry_id, 0), literal_weight(pattern))
    return weights


def _causes(matched: set[str], table: dict[str, set[str]]) -> dict[str, set[str]]:
    """For each matched entry, the other matched entries that explain it."""
    out: dict[str, set[str]] = {}
    for cause in matched:
        for effect in table.get(cause, ()):
            if effect in matched and effect != cause:
                out.setdefault(effect, set()).add(cause)
    return out


def _depths(matched: set[str], causes: dict[str, set[str]]) -> dict[str, int]:
    """How many explaining causes stand above each entry (cycles are cut, never looped)."""
    depth: dict[str, int] = {}

    def visit(entry_id: str, path: frozenset[str]) -> int:
        if entry_id in depth:
            return depth[entry_id]
        above = [c for c in causes.get(entry_id, ()) if c not in path]
        value = 1 + max((visit(c, path | {entry_id}) for c in above), default=-1)
        depth[entry_id] = value
        return value

    for entry_id in sorted(matched):
        visit(entry_id, frozenset())
    return depth


def search_query(lines: Iterable[Evidence]) -> str:
    """The text searched when no signature matched: the last exception lines when there are
    any (a traceback's last line names the error; its frames only add noise), else the last
    salient lines.
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


def _search_match(result, entries: dict) -> Match:
    entry = entries.get(result.id)
    return Match(
        id=result.id,
        title=result.title,
        severity=getattr(entry, "severity", "") or getattr(result, "severity", "") or "warning",
        how="search",
        score=round(float(result.score), 2),
        fix=fix_lines(entry) if entry is not None else [],
        snippet=getattr(result, "snippet", ""),
        path=getattr(entry, "path", ""),
    )


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
