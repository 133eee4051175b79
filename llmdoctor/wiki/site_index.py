"""The static site's search index, read out of the wiki's SQLite FTS5 index.

Documents are tokenized and stemmed by SQLite itself (FTS5's `fts5vocab` table lists every token
of every entry), so the browser ranks on exactly the terms `llmdoctor wiki search` ranks on. What
the page needs, per stemmed term: the entries holding it and the bm25 frequency there (each
column's count times the column's weight, as FTS5's bm25 adds them up); per entry: its total
token count, the token sequence of its id, title, aliases, tags and Chinese title grams (for the
"names the entry" tier), its names as an exact typed query compares them, its signatures and a
short snippet. The symptom words' spellings of several words ("first token") are phrases, which
FTS5 finds only with their words adjacent: their frequencies are counted here from the token
offsets, since the page keeps no positions.
"""

from __future__ import annotations

import json
import sqlite3
from collections import defaultdict

from llmdoctor.wiki.index import FTS_COLUMNS, FTS_WEIGHTS, TOKENIZER
from llmdoctor.wiki.query import HANG_WORDS, POD_STATES, STOPWORDS, SYMPTOMS, TYPED_FILLER
from llmdoctor.wiki.site_regex import signature_program

HEAD_COLUMNS = ("name", "title", "aliases", "tags", "cjk_title")
SNIPPET_CHARS = 220


def build_search_data(conn: sqlite3.Connection, published: set[str] | None = None) -> dict:
    """The index as plain data (JSON-able): docs, postings, sizes, heads, signatures; only of
    the `published` entry ids when given (an entry left off the site leaves no trace in it)."""
    rows = conn.execute(
        "SELECT rowid, id, heading, severity, signature_lines, symptom, exact_names FROM docs "
        "ORDER BY id"
    ).fetchall()
    if published is not None:
        rows = [r for r in rows if r[1] in published]
    position = {row[0]: n for n, row in enumerate(rows)}
    docs = [[r[1], r[2], r[3], _snippet(r[5] or "")] for r in rows]
    signatures = [[s for s in (r[4] or "").splitlines() if s.strip()] for r in rows]
    programs = [[signature_program(s) for s in sigs] for sigs in signatures]
    names = [(r[6] or "").split("\n") for r in rows]
    conn.execute("DROP TABLE IF EXISTS temp.llmdoctor_vocab")
    conn.execute(
        "CREATE VIRTUAL TABLE temp.llmdoctor_vocab USING fts5vocab(main, 'docs_fts', 'instance')"
    )
    weights = {name: FTS_WEIGHTS[name] for name in FTS_COLUMNS}
    postings: dict[str, dict[int, float]] = defaultdict(dict)
    sizes = [0] * len(rows)
    for term, doc, col, count in conn.execute(
        "SELECT term, doc, col, count(*) FROM temp.llmdoctor_vocab GROUP BY term, doc, col"
    ):
        d = position.get(doc)
        if d is None:
            continue
        sizes[d] += count
        per_doc = postings[term]
        per_doc[d] = per_doc.get(d, 0.0) + weights[col] * count
    phrases = _phrase_postings(conn, position, weights)
    heads: list[list[list[str]]] = [[[] for _ in HEAD_COLUMNS] for _ in rows]
    marks = ", ".join("?" for _ in HEAD_COLUMNS)
    for doc, col, term in conn.execute(
        f"SELECT doc, col, term FROM temp.llmdoctor_vocab WHERE col IN ({marks}) "
        "ORDER BY doc, col, offset",
        HEAD_COLUMNS,
    ):
        d = position.get(doc)
        if d is not None:
            heads[d][HEAD_COLUMNS.index(col)].append(term)
    conn.execute("DROP TABLE temp.llmdoctor_vocab")
    flat = {
        term: [x for d, f in sorted(per_doc.items()) for x in (d, _number(f))]
        for term, per_doc in postings.items()
    }
    return {
        "version": 1,
        "docs": docs,
        "sizes": sizes,
        "total_tokens": sum(sizes),
        "postings": flat,
        "phrases": phrases,
        "heads": heads,
        "signatures": signatures,
        "programs": programs,
        "names": names,
        "symptoms": {word: list(spellings) for word, spellings in SYMPTOMS.items()},
        "stopwords": sorted(STOPWORDS),
        "typed_filler": sorted(TYPED_FILLER),
        "pod_states": sorted(POD_STATES),
        "hang_words": sorted(HANG_WORDS),
    }


def _phrase_postings(conn: sqlite3.Connection, position: dict, weights: dict) -> dict:
    """Each SYMPTOMS spelling of several words -> [doc, weighted frequency, ...]: how often its
    stemmed tokens stand next to each other in each column, as FTS5 counts a phrase."""
    spellings = sorted({s for spelled in SYMPTOMS.values() for s in spelled if " " in s})
    if not spellings:
        return {}
    conn.execute("DROP TABLE IF EXISTS temp.llmdoctor_phrase")
    conn.execute(
        f"CREATE VIRTUAL TABLE temp.llmdoctor_phrase USING fts5(x, tokenize={TOKENIZER!r})"
    )
    conn.execute("DROP TABLE IF EXISTS temp.llmdoctor_phrase_vocab")
    conn.execute(
        "CREATE VIRTUAL TABLE temp.llmdoctor_phrase_vocab "
        "USING fts5vocab(temp, 'llmdoctor_phrase', 'instance')"
    )
    conn.executemany(
        "INSERT INTO temp.llmdoctor_phrase(rowid, x) VALUES (?, ?)", enumerate(spellings, 1)
    )
    tokens: dict[int, list[str]] = defaultdict(list)
    for doc, term in conn.execute(
        "SELECT doc, term FROM temp.llmdoctor_phrase_vocab ORDER BY doc, offset"
    ):
        tokens[doc].append(term)
    out: dict[str, list] = {}
    for n, spelling in enumerate(spellings, 1):
        words = tokens[n]
        counts: dict[int, float] = defaultdict(float)
        marks = ", ".join("?" for _ in words)
        found = defaultdict(set)  # (doc, col) -> {(term index, offset)}
        for term, doc, col, offset in conn.execute(
            f"SELECT term, doc, col, offset FROM temp.llmdoctor_vocab WHERE term IN ({marks})",
            words,
        ):
            for i, word in enumerate(words):
                if word == term:
                    found[(doc, col)].add((i, offset))
        for (doc, col), hits in found.items():
            d = position.get(doc)
            starts = sum(
                1
                for i, offset in hits
                if i == 0 and all((k, offset + k) in hits for k in range(1, len(words)))
            )
            if d is not None and starts:
                counts[d] += weights[col] * starts
        out[spelling] = [x for d, f in sorted(counts.items()) for x in (d, _number(f))]
    conn.execute("DROP TABLE temp.llmdoctor_phrase_vocab")
    conn.execute("DROP TABLE temp.llmdoctor_phrase")
    return out


def search_data_script(data: dict) -> str:
    """The index as a script (a JSON fetch is refused on file:// pages; a script is not)."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    # "</" must not end the script element early, whatever an entry holds
    return "window.LLMDOCTOR_INDEX=" + text.replace("</", "<\\/") + ";\n"


def _snippet(symptom: str) -> str:
    text = " ".join(symptom.split())
    return text[:SNIPPET_CHARS] + ("…" if len(text) > SNIPPET_CHARS else "")


def _number(value: float) -> float | int:
    return int(value) if value == int(value) else round(value, 3)
