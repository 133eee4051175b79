"""Search the runbook wiki over its FTS5 index: entries by tier first, then by relevance (bm25).

A query is cut into quoted words (llmdoctor.wiki.query), so any text is safe.

* Tier 1, any query: entries whose signatures (per-line regexes) match a line of the text, as
  when an error message is pasted, come above every entry that only shares words with it.
* A few typed words ("CUDA out of memory", "tokenizer", "排队"): entries holding every word come
  next; among them an entry whose id, title or an alias IS the query ("OOM"), then those whose
  id, title, aliases or tags hold the words as typed (in more of these four, first); relevance
  is a bm25 whose IDF does not collapse on a small wiki.
* Pasted text (more words, or lines): relevance is FTS5's bm25 of all its words at once.
"""

from __future__ import annotations

from llmdoctor.wiki.cjk import run_grams
from llmdoctor.wiki.index import FTS_COLUMNS, FTS_WEIGHTS, index_problems, with_index
from llmdoctor.wiki.query import Query, parse_query
from llmdoctor.wiki.signature_text import literal_words, plain_text, required_texts

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3
    from pathlib import Path

MIN_CANDIDATES = 20  # entries ranked by bm25 whose signatures are tried on the query
MAX_WORD_BY_WORD_TERMS = 12  # a short query with up to this many terms is ranked word by word
MAX_WORD_BY_WORD_HITS = 20_000  # ... unless its terms are in more entries than this, summed
HEAD_COLUMNS = ("name", "title", "aliases", "tags")  # where a phrase names the entry
SNIPPET_TOKENS = 24
SNIPPET_CHARS = 220
SNIPPET_COLUMNS = ("symptom", "cause", "fix", "aliases", "signatures", "title")
OPEN, CLOSE = "\x02", "\x03"


class SearchResult:
    """One ranked entry. `score`: higher is better; `highlights`: [start, end) spans in snippet.

    (Plain classes here and in query.py: importing dataclasses costs `wiki search` ~7 ms.)
    """

    __slots__ = (
        "highlights", "id", "path", "rowid", "score", "severity", "signature_matched", "snippet",
        "text_score", "title",
    )  # fmt: skip

    def __init__(
        self,
        id: str,
        title: str,
        score: float,
        snippet: str,
        highlights: list[tuple[int, int]] | None = None,
        severity: str = "",
        path: str = "",
        signature_matched: bool = False,
        rowid: int = 0,
    ):
        self.id, self.title, self.score, self.snippet = id, title, score, snippet
        self.highlights = highlights if highlights is not None else []
        self.severity, self.path = severity, path
        self.signature_matched, self.rowid = signature_matched, rowid
        self.text_score = score  # the score without the signature tier (explain's text evidence)

    def __repr__(self) -> str:
        return f"SearchResult({self.id!r}, score={self.score})"

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
    unreadable: list[tuple[str, str]] | None = None,
) -> list[SearchResult]:
    """Entries matching `query` (any text: words, Chinese, a pasted log), best first.

    `unreadable`, when given, receives (path, 'line: message') of each entry file the index
    could not parse: those entries are not searched, and the caller says so.
    """
    parsed = parse_query(query)
    expression = parsed.match_expression()
    if expression is None or limit <= 0:
        return []

    def run(conn: sqlite3.Connection) -> list[SearchResult]:
        if unreadable is not None:
            unreadable.extend(index_problems(conn))
        return _rank(conn, parsed, expression, limit, tag)

    return with_index(wiki_dirs, run)


def _rank(
    conn: sqlite3.Connection, query: Query, expression: str, limit: int, tag: str | None
) -> list[SearchResult]:
    wanted = max(limit * 2, MIN_CANDIDATES)
    if query.short and len(query.terms) <= MAX_WORD_BY_WORD_TERMS:
        ranked = _rank_word_by_word(conn, query, tag, wanted)
    else:
        ranked = _rank_all_words(conn, query, expression, tag, wanted)
    marks = ", ".join("?" for _ in ranked)
    docs = {
        row[0]: row[1:]
        for row in conn.execute(
            "SELECT rowid, id, heading, severity, path, signature_lines, exact_names FROM docs "
            f"WHERE rowid IN ({marks})",
            [c.rowid for c in ranked],
        )
    }
    ranked = [c for c in ranked if c.rowid in docs]
    if not ranked:
        return []
    signatures = [(docs[c.rowid][0], docs[c.rowid][4] or "") for c in ranked]
    matched = _signature_matches(query, signatures)
    typed = query.named if query.short else ()
    if query.frames_only:  # a frame's words alone (`main`, `run`, `module`) name nothing
        ranked = [c for c in ranked if docs[c.rowid][0] in matched]
        if not ranked:
            return []
    for c in ranked:
        c.signature_matched = docs[c.rowid][0] in matched
        if typed:
            names = (docs[c.rowid][5] or "").split("\n")
            c.exact = any(name in names for name in typed)
    ranked.sort(key=lambda c: docs[c.rowid][0])  # equals stay in id order: the sorts are stable
    ranked.sort(key=lambda c: (c.tier, c.relevance), reverse=True)
    # the score keeps that order: each tier above the lowest adds more than any relevance
    levels = sorted({c.tier for c in ranked})
    text_levels = sorted({c.tier[1:] for c in ranked})
    step = max(c.relevance for c in ranked) + 1.0
    results = []
    for c in ranked[:limit]:
        entry_id, title, severity, path, *_ = docs[c.rowid]
        score = round(c.relevance + levels.index(c.tier) * step, 3)
        hit = c.signature_matched
        result = SearchResult(entry_id, title, score, "", [], severity, path, hit, c.rowid)
        result.text_score = round(c.relevance + text_levels.index(c.tier[1:]) * step, 3)
        results.append(result)
    made = {c.rowid: c.snippet for c in ranked if c.snippet is not None}
    _add_snippets(conn, query, expression, results, made)
    return results


class _Candidate:
    """An entry being ranked: by tier (signature, every term, naming), then by relevance."""

    __slots__ = (
        "covers_all", "exact", "names", "relevance", "rowid", "signature_matched", "snippet",
    )  # fmt: skip

    def __init__(self, rowid: int, relevance: float, covers_all: bool = False, names: int = 0):
        self.rowid = rowid
        self.relevance = relevance  # bm25, higher is better
        self.covers_all = covers_all  # holds every term of the query
        self.names = names  # how many of its id, title, aliases, tags hold the query as typed
        self.signature_matched = False
        self.exact = False  # the typed query IS its id, title or one of its aliases ("OOM")
        self.snippet: str | None = None  # its highlighted snippet, when already made ("": none)

    @property
    def tier(self) -> tuple[bool, bool, bool, int]:
        return (self.signature_matched, bool(self.covers_all), self.exact, self.names)


def _rank_all_words(
    conn: sqlite3.Connection, query: Query, expression: str, tag: str | None, wanted: int
) -> list[_Candidate]:
    """A pasted text: FTS5's bm25 over all its words at once (OR-ed), the best `wanted`."""
    ranked = _rank_skipping_common_words(conn, query, expression, tag, wanted)
    if ranked is None:
        ranked = _rank_every_match(conn, expression, tag, wanted)
    return ranked


def _tag_filter(tag: str | None) -> tuple[str, dict]:
    """A WHERE clause (and its parameter) keeping the entries tagged `tag`."""
    if not tag:
        return "", {}
    return f"AND {_TAGGED.replace('?', ':tag')}", {"tag": tag.strip().lower()}


def _rank_every_match(
    conn: sqlite3.Connection, expression: str, tag: str | None, wanted: int
) -> list[_Candidate]:
    """The best `wanted` by FTS5's bm25 of `expression`, computed for every entry it matches."""
    weights = ", ".join(str(w) for w in FTS_WEIGHTS.values())
    tag_clause, tag_params = _tag_filter(tag)
    # rank inside FTS5 alone (a join here costs more than the ranking), then fetch the few rows
    rows = conn.execute(
        f"""SELECT rowid, bm25(docs_fts, {weights}) AS score FROM docs_fts
            WHERE docs_fts MATCH :all {tag_clause} ORDER BY score LIMIT :wanted""",
        {"all": expression, "wanted": wanted, **tag_params},
    )
    return [_Candidate(rowid, -score) for rowid, score in rows]


def _rank_skipping_common_words(
    conn: sqlite3.Connection,
    query: Query,
    expression: str,
    tag: str | None,
    wanted: int,
) -> list[_Candidate] | None:
    """What _rank_every_match gives, at a fraction of the cost when some words of the text are
    in many entries; None when that cannot be told for sure this way.

    A word in half of the entries or more adds nothing to bm25 (FTS5 clamps its IDF to 1e-6)
    but makes the OR match most of the wiki, and bm25 is computed for every entry matched: most
    of a pasted text's cost on a large wiki. So the entries are first ranked on the other words
    alone; every entry that could still reach the best `wanted` once the skipped words are added
    back is then scored by the very bm25 of all the words, which alone orders them: same
    entries, same scores, same order. The first try skips also the most frequent of the other
    words (a word adds at most (k1 + 1) * IDF to bm25): fewer entries to score.
    """
    terms = query.term_expressions()
    entries, *holding = _entry_counts(conn, terms, half=True)
    # FTS5 clamps a phrase's IDF when log((N - n + 0.5) / (n + 0.5)) <= 0, i.e. 2n >= N; a term
    # with alternatives ("slow" OR "latency" ...) is several phrases, each with its own n: kept
    kept = [(t, n) for t, n in zip(terms, holding, strict=True) if 2 * n < entries or t[0] == "("]
    margin = (len(terms) - len(kept)) * COMMON_WORD_SCORE
    tries = [([t for t, _ in kept], margin)] if margin and kept else []
    rare, bound = _without_frequent_words(kept, entries, wanted)
    if bound:
        tries.insert(0, (rare, margin + bound))
    for informative, most in tries:
        ranked = _rank_without(conn, informative, most, expression, tag, wanted)
        if ranked is not None:
            return ranked
    return None


# What a word in half of the entries or more adds to FTS5's bm25 at most: its clamped IDF (1e-6)
# times (k1 + 1) = 2.2, padded for rounding.
COMMON_WORD_SCORE = 2.5e-6


# the entries a try without the frequent words must spare bm25 for (~1 µs each), to be worth
# what it costs when it fails (~0.3 ms: the rare words' entries ranked for nothing)
MIN_SKIPPED_ENTRIES = 500


def _without_frequent_words(
    kept: list[tuple[str, int]], entries: int, wanted: int
) -> tuple[list[str], float]:
    """The kept terms less their most frequent ones, and what those add to bm25 at most
    (([], 0.0): none worth skipping).

    A phrase in n of the N entries adds at most IDF * (k1 + 1) = 2.2 * log((N - n + 0.5) /
    (n + 0.5)) (the term frequency part stays under k1 + 1). The most frequent are skipped while
    they add at most what the rarest one alone may add, and the others are in `wanted` entries
    or more: the best entries usually score above that, and when they do not the caller tries
    again with them.
    """
    bounds = {}
    for term, n in kept:
        if term[0] != "(":  # several phrases: kept whole
            odds = (entries - n + 0.5) / (n + 0.5)
            bounds[term] = 2.2 * _log_at_most(odds) * (1 + 1e-9) + 1e-9
    if len(bounds) < 2:
        return [], 0.0
    limit = max(bounds.values())
    skipped: set[str] = set()
    total = 0.0
    for term, _ in sorted(kept, key=lambda k: -k[1]):
        if term not in bounds or total + bounds[term] > limit:
            break
        skipped.add(term)
        total += bounds[term]
    rare = [(t, n) for t, n in kept if t not in skipped]
    saved = sum(n for t, n in kept if t in skipped)
    if saved < MIN_SKIPPED_ENTRIES or sum(n for _, n in rare) < wanted:
        return [], 0.0
    return [t for t, _ in rare], total


def _log_at_most(x: float) -> float:
    """A little more than log(x), x > 1 (by under 1% up to x = 1e6), without loading `math`
    (~0.2 ms of a search): log(x) = k log(x ** (1/k)) <= k (x ** (1/k) - 1); the rounding of
    x ** (1/k) moves it by ~1e-13 at most, under the caller's padding."""
    return 1024.0 * (x ** (1 / 1024) - 1.0)


def _rank_without(
    conn: sqlite3.Connection,
    informative: list[str],
    margin: float,
    expression: str,
    tag: str | None,
    wanted: int,
) -> list[_Candidate] | None:
    """The best `wanted` by bm25 of `expression`, found by ranking the entries on the terms
    `informative` alone: the others add at most `margin` to an entry's score."""
    weights = ", ".join(str(w) for w in FTS_WEIGHTS.values())
    tag_clause, tag_params = _tag_filter(tag)
    # bm25() is negative, lower is better; `nth` is the wanted-th best score without the
    # skipped words, and every entry within `margin` of it is scored in full: "+rowid", a
    # filter on what FTS5 matched (handed the rowids, FTS5 would recount every word's entries
    # for each). The snippets of the likely results are made on the way, while FTS5 is on
    # their rows.
    rows = conn.execute(
        f"""WITH pruned AS MATERIALIZED (
                SELECT rowid AS id, bm25(docs_fts, {weights}) AS score FROM docs_fts
                WHERE docs_fts MATCH :informative {tag_clause}),
            cut AS MATERIALIZED (
                SELECT score AS nth FROM pruned ORDER BY score LIMIT 1 OFFSET :wanted - 1),
            likely AS MATERIALIZED (SELECT id FROM pruned ORDER BY score LIMIT :wanted)
            SELECT rowid, bm25(docs_fts, {weights}) AS score,
                   CASE WHEN rowid IN likely THEN {_FIRST_MARKED} END AS snippet
            FROM docs_fts
            WHERE (SELECT nth FROM cut) < -:margin AND docs_fts MATCH :all
              AND +rowid IN (SELECT id FROM pruned
                             WHERE score <= (SELECT nth FROM cut) + :margin)
            ORDER BY score LIMIT :wanted""",
        {
            "informative": " OR ".join(informative),
            "all": expression,
            "margin": margin,
            "wanted": wanted,
            **tag_params,
        },
    ).fetchall()
    # no rows when an entry holding only skipped words (at most `margin`) might be among the
    # best: that is checked once, before FTS5 reads the words' entries; fewer than `wanted`
    # when fewer entries hold an informative word
    if len(rows) < wanted:
        return None
    ranked = []
    for rowid, score, snippet in rows:
        ranked.append(_Candidate(rowid, -score))
        ranked[-1].snippet = snippet
    return ranked


def _entry_counts(conn: sqlite3.Connection, terms: list[str], *, half: bool = False) -> list[int]:
    """[entries in the wiki, then how many hold each term], in one statement.

    `half`: a term in half of the entries or more is counted only that far (all that tells
    whether FTS5 clamps its IDF): its entries are most of what counting reads.
    """
    if half:
        one = f"SELECT 1 FROM docs_fts WHERE docs_fts MATCH ? LIMIT ({_ENTRIES} + 1) / 2"
        counts = ", ".join(f"(SELECT count(*) FROM ({one}))" for _ in terms)
    else:
        counts = ", ".join("(SELECT count(*) FROM docs_fts WHERE docs_fts MATCH ?)" for _ in terms)
    return list(conn.execute(f"SELECT {_ENTRIES}, {counts}", terms).fetchone())


# the number the index stores (an index written before it did is counted)
_ENTRIES = (
    "coalesce((SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'entries'), "
    "(SELECT count(*) FROM docs))"
)


def _rank_word_by_word(
    conn: sqlite3.Connection,
    query: Query,
    tag: str | None,
    wanted: int,
    *,
    shortcut: bool = True,
) -> list[_Candidate]:
    """A few typed words, the best `wanted`: entries holding all the terms first, then those
    naming the query in more of their id, title, aliases and tags, then by relevance.

    Relevance is the sum of each term's own bm25 in FTS5, with the term's IDF
    log((N - n + 0.5) / (n + 0.5)) replaced by log(1 + (N - n + 0.5) / (n + 0.5)): FTS5 clamps
    the first to ~0 for a word in half of the N entries or more, which on a wiki of a few
    dozen entries is every common word (cuda, memory, tokenizer); the second stays positive.
    Only when the terms' hits add up to more than MAX_WORD_BY_WORD_HITS (thousands of entries,
    where the IDF seldom collapses) is relevance one bm25 of all the terms, as for pasted text.

    When `wanted` entries or more hold every term, the best are among them, and (`shortcut`)
    only their relevance is computed: the same rows in the same order at a fraction of the cost.
    """
    weights = ", ".join(str(w) for w in FTS_WEIGHTS.values())
    terms = query.term_expressions()
    every = " AND ".join(terms)
    entries, *holding, covering = _entry_counts(conn, [*terms, every])
    if sum(holding) <= MAX_WORD_BY_WORD_HITS:
        import math  # (a shared library to load: only this ranking needs it)

        scaled = []  # (factor, term): FTS5's bm25 of the term times factor
        for term, n in zip(terms, holding, strict=True):
            odds = (entries - n + 0.5) / (n + 0.5)
            fts_idf = math.log(odds) if odds > 1.0 else 1e-6  # what FTS5's bm25 multiplied by
            scaled.append((-math.log1p(odds) / fts_idf, term))
    else:
        scaled = [(-1.0, " OR ".join(terms))]
    naming = _naming_expressions(query)
    # each naming set is looked up, not joined: a join (and its grouping) cost more than the
    # ranking when a word names thousands of entries (显存 in their aliases)
    names = " + ".join(f"(rowid IN ({_MATCHING}))" for _ in naming)
    tags = [tag.strip().lower()] if tag else []
    tag_clause = f"AND {_TAGGED}" if tag else ""
    if len(terms) == 1:
        # one term: each entry is one hit, and every hit holds all the terms
        [(factor, term)] = scaled
        rows = conn.execute(
            f"""SELECT rowid, bm25(docs_fts, {weights}) * ? AS relevance, 1 AS covers_all,
                       {names} AS names
                FROM docs_fts WHERE docs_fts MATCH ? {tag_clause}
                ORDER BY covers_all DESC, names DESC, relevance DESC LIMIT ?""",
            [factor, *naming, term, *tags, wanted],
        )
        return [_Candidate(*row) for row in rows]
    score = f"bm25(docs_fts, {weights}) * ?"
    hits, params = [], []
    only_covering = shortcut and covering >= wanted and not tag
    for factor, term in scaled:
        if only_covering:
            # bm25 only for the entries holding every term (each term's hits are still read in
            # FTS5's rowid order, so equal scores keep their order)
            hits.append(
                f"SELECT rowid, CASE WHEN rowid IN ({_MATCHING}) THEN {score} END AS s "
                "FROM docs_fts WHERE docs_fts MATCH ?"
            )
            params += [every, factor, term]
        else:
            hits.append(f"SELECT rowid, {score} AS s FROM docs_fts WHERE docs_fts MATCH ?")
            params += [factor, term]
    # LIMIT -1 keeps SQLite from flattening a subquery into the GROUP BY, where bm25() cannot run
    rows = conn.execute(
        f"""SELECT rowid, sum(s) AS relevance, rowid IN ({_MATCHING}) AS covers_all,
                   {names} AS names
            FROM ({" UNION ALL ".join(hits)} LIMIT -1) WHERE s IS NOT NULL {tag_clause}
            GROUP BY rowid ORDER BY covers_all DESC, names DESC, relevance DESC LIMIT ?""",
        [every, *naming, *params, *tags, wanted],
    )
    return [_Candidate(*row) for row in rows]


_MATCHING = "SELECT rowid FROM docs_fts WHERE docs_fts MATCH ?"
TAGGED_ROWIDS = (
    "SELECT docs.rowid FROM docs, json_each(docs.tags_json) WHERE lower(json_each.value) = ?"
)
# "+rowid": a filter applied to what FTS5 matched, not a rowid lookup FTS5 is given; given one,
# FTS5 starts the whole MATCH over for every tagged entry (1 s for a pasted text, 10,000 entries)
_TAGGED = f"+rowid IN ({TAGGED_ROWIDS})"


def _quoted(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def _naming_expressions(query: Query) -> list[str]:
    """MATCH expressions, one per column of the entry's names (id, title, aliases, tags), that
    hold the query as typed: its words as one phrase (stopwords too: "fallen off the bus"), and
    its Chinese runs (as the grams the index holds for them, in a row).
    """
    found = []
    if query.phrase:
        phrase = _quoted(" ".join(query.phrase))
        found += [f"{{{column}}} : {phrase}" for column in HEAD_COLUMNS]
    if query.cjk_runs:
        runs = " AND ".join(_quoted(" ".join(run_grams(run))) for run in query.cjk_runs)
        found.append(f"{{cjk_title}} : ({runs})")
    return found or ['""']  # (never: a short query's terms come from its words or runs)


def _signature_matches(query: Query, candidates: list[tuple[str, str]]) -> set[str]:
    """Ids of the candidates with a signature that matches a line of the query text.

    A signature that is plain text (most are: a quoted message, its punctuation escaped) is
    looked for as a substring, exactly what RE2 would find, without loading RE2 (~2.5 ms).
    Any other is compiled only when the text holds every text it requires and one of its
    literal words (llmdoctor.wiki.signature_text): most candidates share no such word with a
    short query, and loading RE2 and compiling are the cost here.
    """
    lines = query.lines()
    if not lines:
        return set()
    text = query.text
    lowered = text.lower()
    found: set[str] = set()
    written = [(entry_id, signature_lines.splitlines()) for entry_id, signature_lines in candidates]
    texts = _signature_texts([s for _, signatures in written for s in signatures])
    start = 0
    for entry_id, signatures in written:
        start += len(signatures)
        for signature, (literal, required, words) in zip(
            signatures, texts[start - len(signatures) : start], strict=True
        ):
            if literal is not None:
                if literal in text and any(literal in line for line in lines):
                    found.add(entry_id)
                    break
                continue
            if not all(needed in text for needed in required):
                continue
            if words and not any(w.lower() in lowered for w in words):
                continue
            from llmdoctor.wiki.re2_patterns import (
                line_pattern,  # RE2: a signature cannot hang a search
            )

            compiled = line_pattern(signature)
            if compiled is None:
                continue  # `wiki lint` reports it
            if any(compiled.search(line) for line in lines):
                found.add(entry_id)
                break
    return found


def _signature_texts(signatures: list[str]) -> list[tuple]:
    """(plain text or None, the texts it requires, its literal words) of each signature, read
    back from llmdoctor.wiki.derived_cache when an earlier run worked them out (~400 signatures
    read character by character cost a search ~6 ms)."""
    from llmdoctor.wiki import signature_text
    from llmdoctor.wiki.derived_cache import kept_values

    return kept_values(
        "signature-search-texts",
        signatures,
        _work_out_texts,
        [signature_text.__file__, __file__],
        _is_texts,
    )


def _work_out_texts(signatures: list[str]) -> list[tuple]:
    return [(plain_text(s), tuple(required_texts(s)), tuple(literal_words(s))) for s in signatures]


def _is_texts(value: object) -> bool:
    """Whether a value read back has the shape `_work_out_texts` gives."""
    return (
        isinstance(value, tuple)
        and len(value) == 3
        and (value[0] is None or isinstance(value[0], str))
        and all(isinstance(v, tuple) and all(isinstance(t, str) for t in v) for v in value[1:])
    )


def _add_snippets(
    conn: sqlite3.Connection,
    query: Query,
    expression: str,
    results: list[SearchResult],
    made: dict[int, str] | None = None,
) -> None:
    """Each result's snippet: the first of SNIPPET_COLUMNS where FTS5 highlights a word
    (`made`: those already made, by rowid), else a plain one."""
    if not results:
        return
    made = made or {}
    by_rowid = {r.rowid: r for r in results}
    rows = [(rowid, made[rowid]) for rowid in by_rowid if rowid in made]
    todo = [rowid for rowid in by_rowid if rowid not in made]
    if todo:
        marks = ", ".join("?" for _ in todo)
        # "+rowid", as in _TAGGED: one MATCH filtered, not a MATCH started over for each rowid
        # (16 ms of a pasted line's 57 results, 0.3 ms a result)
        rows += conn.execute(
            f"SELECT rowid, {_FIRST_MARKED} FROM docs_fts "
            f"WHERE docs_fts MATCH ? AND +rowid IN ({marks})",
            [expression, *todo],
        ).fetchall()
    for rowid, marked in rows:
        if not marked:
            marked = _plain_snippet(conn, rowid, query)
        by_rowid[rowid].snippet, by_rowid[rowid].highlights = split_marks(marked)


_SNIPPETS = [
    f"snippet(docs_fts, {FTS_COLUMNS.index(c)}, char(2), char(3), '…', {SNIPPET_TOKENS})"
    for c in SNIPPET_COLUMNS
]
# the first snippet with a highlighted word ('' when none has one); CASE stops at the first
# (a pasted message is usually highlighted in the symptom: 1-2 snippets a row, not 6)
_FIRST_MARKED = (
    "coalesce(CASE "
    + " ".join(f"WHEN instr({s}, char(2)) THEN {s}" for s in _SNIPPETS)
    + " END, '')"
)


def _plain_snippet(conn: sqlite3.Connection, rowid: int, query: Query) -> str:
    """A snippet when FTS5 highlighted nothing: Chinese found by substring, else the symptom."""
    row = conn.execute(
        "SELECT symptom, cause, fix, aliases, heading FROM docs WHERE rowid = ?", (rowid,)
    ).fetchone()
    texts = [t for t in (row or ()) if t]
    needles = sorted(set(query.cjk_runs) | set(query.grams), key=len, reverse=True)
    if needles:
        for text in texts:
            found = first_needle(text, needles)
            if found:
                start = max(0, found[0] - SNIPPET_CHARS // 3)
                window = text[start : start + SNIPPET_CHARS]
                marked = mark_needles(window, needles)
                prefix = "…" if start else ""
                suffix = "…" if start + SNIPPET_CHARS < len(text) else ""
                return prefix + marked + suffix
    first = texts[0] if texts else ""
    return first[:SNIPPET_CHARS] + ("…" if len(first) > SNIPPET_CHARS else "")


def first_needle(text: str, needles: list[str], start: int = 0) -> tuple[int, str] | None:
    """Where the first of `needles` (non-empty, longest first) is found in `text` from `start`:
    what the regex `needle1|needle2|...` finds, the earlier needle winning at one position."""
    best: tuple[int, str] | None = None
    for needle in needles:
        at = text.find(needle, start)
        if at >= 0 and (best is None or at < best[0]):
            best = (at, needle)
    return best


def mark_needles(text: str, needles: list[str]) -> str:
    """`text` with every needle found (as by first_needle, left to right) between OPEN, CLOSE."""
    out: list[str] = []
    pos = 0
    while found := first_needle(text, needles, pos):
        at, needle = found
        out += [text[pos:at], OPEN, needle, CLOSE]
        pos = at + len(needle)
    return "".join(out) + text[pos:]


def split_marks(marked: str) -> tuple[str, list[tuple[int, int]]]:
    """Text with \\x02..\\x03 marks -> (one-line plain text, highlighted spans)."""
    marked = " ".join(marked.split())  # (str.split's whitespace is the \\s of `re`)
    plain: list[str] = []
    spans: list[tuple[int, int]] = []
    length = 0
    start = None
    for n, opened in enumerate(marked.split(OPEN)):
        if n:
            start = length
        for m, part in enumerate(opened.split(CLOSE)):
            if m:
                if start is not None and length > start:
                    spans.append((start, length))
                start = None
            plain.append(part)
            length += len(part)
    return "".join(plain), spans
