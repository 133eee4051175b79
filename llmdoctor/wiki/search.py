"""Search the runbook wiki: bm25 over the FTS5 index, plus a bonus for a matching log signature.

A query is cut into quoted words (llmdoctor.wiki.query), so any text is safe. When the text is a
pasted error message, the entries whose signatures (per-line regexes) match one of its lines are
ranked above every entry that only shares words with it.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from llmdoctor.wiki.index import FTS_COLUMNS, FTS_WEIGHTS, with_index
from llmdoctor.wiki.query import Query, parse_query

MIN_CANDIDATES = 20  # entries ranked by bm25 whose signatures are tried on the query
SNIPPET_TOKENS = 24
SNIPPET_CHARS = 220
SNIPPET_COLUMNS = ("symptom", "cause", "fix", "aliases", "signatures", "title")
OPEN, CLOSE = "\x02", "\x03"
_ESCAPE = re.compile(r"\\.")
_LITERAL_WORD = re.compile(r"[A-Za-z]{4,}")


@dataclass
class SearchResult:
    """One ranked entry. `score`: higher is better; `highlights`: [start, end) spans in snippet."""

    id: str
    title: str
    score: float
    snippet: str
    highlights: list[tuple[int, int]] = field(default_factory=list)
    severity: str = ""
    path: str = ""
    signature_matched: bool = False
    rowid: int = field(default=0, repr=False, compare=False)

    def to_json(self) -> dict:
        return {
            "id": self.id,
            "title": self.title,
            "score": self.score,
            "snippet": self.snippet,
            "highlights": [list(span) for span in self.highlights],
        }


def search(
    query: str,
    *,
    limit: int = 10,
    tag: str | None = None,
    wiki_dirs: list[str | Path] | None = None,
) -> list[SearchResult]:
    """Entries matching `query` (any text: words, Chinese, a pasted log), best first."""
    parsed = parse_query(query)
    expression = parsed.match_expression()
    if expression is None or limit <= 0:
        return []
    return with_index(wiki_dirs, lambda conn: _rank(conn, parsed, expression, limit, tag))


def _rank(
    conn: sqlite3.Connection, query: Query, expression: str, limit: int, tag: str | None
) -> list[SearchResult]:
    weights = ", ".join(str(w) for w in FTS_WEIGHTS.values())
    tag_clause = ""
    params: list = [expression]
    if tag:
        tag_clause = (
            "AND rowid IN (SELECT docs.rowid FROM docs, json_each(docs.tags_json) "
            "WHERE lower(json_each.value) = ?)"
        )
        params.append(tag.strip().lower())
    params.append(max(limit * 2, MIN_CANDIDATES))
    # rank inside FTS5 alone (a join here costs more than the ranking), then fetch the few rows
    ranked = conn.execute(
        f"""SELECT rowid, bm25(docs_fts, {weights}) AS rank FROM docs_fts
            WHERE docs_fts MATCH ? {tag_clause} ORDER BY rank LIMIT ?""",
        params,
    ).fetchall()
    if not ranked:
        return []
    marks = ", ".join("?" for _ in ranked)
    docs = {
        row[0]: row[1:]
        for row in conn.execute(
            "SELECT rowid, id, heading, severity, path, signature_lines FROM docs "
            f"WHERE rowid IN ({marks})",
            [rowid for rowid, _ in ranked],
        )
    }
    rows = [(rowid, *docs[rowid], rank) for rowid, rank in ranked if rowid in docs]
    matched = _signature_matches(query, [(r[1], r[5] or "") for r in rows])
    top = max(-r[6] for r in rows)
    results = []
    for rowid, entry_id, title, severity, path, _, rank in rows:
        hit = entry_id in matched
        score = -rank + (top + 1.0 if hit else 0.0)
        results.append(
            SearchResult(entry_id, title, round(score, 3), "", [], severity, path, hit, rowid)
        )
    results.sort(key=lambda r: (-r.score, r.id))
    results = results[:limit]
    _add_snippets(conn, query, expression, results)
    return results


def _signature_matches(query: Query, candidates: list[tuple[str, str]]) -> set[str]:
    """Ids of the candidates with a signature that matches a line of the query text.

    A signature is compiled only when one of its literal words occurs in the text: most
    candidates share no such word with a short query, and compiling is the cost here.
    """
    lines = query.lines()
    if not lines:
        return set()
    lowered = query.text.lower()
    found: set[str] = set()
    for entry_id, signature_lines in candidates:
        for signature in signature_lines.splitlines():
            words = _LITERAL_WORD.findall(_ESCAPE.sub(" ", signature))
            if words and not any(w.lower() in lowered for w in words):
                continue
            try:
                pattern = re.compile(signature)
            except re.error:
                continue  # `wiki lint` reports it
            if any(pattern.search(line) for line in lines):
                found.add(entry_id)
                break
    return found


def _add_snippets(
    conn: sqlite3.Connection, query: Query, expression: str, results: list[SearchResult]
) -> None:
    if not results:
        return
    by_rowid = {r.rowid: r for r in results}
    columns = ", ".join(
        f"snippet(docs_fts, {FTS_COLUMNS.index(c)}, char(2), char(3), '…', {SNIPPET_TOKENS})"
        for c in SNIPPET_COLUMNS
    )
    marks = ", ".join("?" for _ in by_rowid)
    rows = conn.execute(
        f"SELECT rowid, {columns} FROM docs_fts WHERE docs_fts MATCH ? AND rowid IN ({marks})",
        [expression, *by_rowid],
    ).fetchall()
    for rowid, *snippets in rows:
        marked = next((s for s in snippets if s and OPEN in s), None)
        if marked is None:
            marked = _plain_snippet(conn, rowid, query)
        by_rowid[rowid].snippet, by_rowid[rowid].highlights = split_marks(marked)


def _plain_snippet(conn: sqlite3.Connection, rowid: int, query: Query) -> str:
    """A snippet when FTS5 highlighted nothing: Chinese found by substring, else the symptom."""
    row = conn.execute(
        "SELECT symptom, cause, fix, aliases, heading FROM docs WHERE rowid = ?", (rowid,)
    ).fetchone()
    texts = [t for t in (row or ()) if t]
    needles = sorted(set(query.cjk_runs) | set(query.grams), key=len, reverse=True)
    if needles:
        pattern = re.compile("|".join(re.escape(n) for n in needles))
        for text in texts:
            m = pattern.search(text)
            if m:
                start = max(0, m.start() - SNIPPET_CHARS // 3)
                window = text[start : start + SNIPPET_CHARS]
                marked = pattern.sub(lambda x: OPEN + x.group(0) + CLOSE, window)
                prefix = "…" if start else ""
                suffix = "…" if start + SNIPPET_CHARS < len(text) else ""
                return prefix + marked + suffix
    first = texts[0] if texts else ""
    return first[:SNIPPET_CHARS] + ("…" if len(first) > SNIPPET_CHARS else "")


def split_marks(marked: str) -> tuple[str, list[tuple[int, int]]]:
    """Text with \\x02..\\x03 marks -> (one-line plain text, highlighted spans)."""
    marked = re.sub(r"\s+", " ", marked).strip()
    plain: list[str] = []
    spans: list[tuple[int, int]] = []
    length = 0
    start = None
    for part in re.split(f"([{OPEN}{CLOSE}])", marked):
        if part == OPEN:
            start = length
        elif part == CLOSE:
            if start is not None and length > start:
                spans.append((start, length))
            start = None
        else:
            plain.append(part)
            length += len(part)
    return "".join(plain), spans
