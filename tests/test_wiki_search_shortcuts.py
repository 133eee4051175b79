"""The shortcuts that keep `wiki search` fast on a large wiki rank exactly as the long way does.

* A pasted text skips, at first, its words found in half of the entries or more, and first of
  all also its most frequent other words (`_rank_skipping_common_words`): the entries, scores
  and order must equal FTS5's bm25 of all its words computed for every entry matched
  (`_rank_every_match`).
* A few typed words, when enough entries hold them all, get relevance only for those entries
  (`_rank_word_by_word`, shortcut): equal to computing it for every entry holding any of them.

Checked on the shipped runbooks with the real excerpts under tests/fixtures/runbooks/ as pasted
text, and on a generated wiki of 1,200 entries (benchmarks/wiki_search.py's generator: the many
near-identical entries there make ties and near-ties, where an inexact shortcut shows).
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

from llmdoctor.wiki import search as search_module
from llmdoctor.wiki.index import with_index
from llmdoctor.wiki.query import parse_query

# every shortcut against the long way on a generated 1,200-entry wiki (benchmarks/wiki_search.py):
# minutes; `pytest -m slow` runs it
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
GENERATED_ENTRIES = 1200


def excerpts() -> list[str]:
    found = []
    for path in sorted((REPO / "tests" / "fixtures" / "runbooks").glob("*/*")):
        if path.is_file() and path.name != "SOURCES.md":
            text = path.read_text(encoding="utf-8", errors="replace")
            lines = [line for line in text.splitlines() if line.strip()]
            found += [text, *lines[:1]]
    return found


@pytest.fixture(scope="module")
def generated_wiki(tmp_path_factory) -> Path:
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        from wiki_search import generate_wiki
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    folder = tmp_path_factory.mktemp("generated-wiki")
    generate_wiki(folder, GENERATED_ENTRIES)
    return folder


def pasted_queries() -> list[str]:
    """Real excerpts, and runs of words from them (longer than a typed query)."""
    texts = excerpts()
    rng = random.Random(5)
    words = " ".join(texts).split()
    texts += [" ".join(rng.choices(words, k=rng.randint(9, 30))) for _ in range(80)]
    return [t for t in texts if not parse_query(t).short]


def parsed_pasted_queries():
    """(text, parsed query, its MATCH expression) of each pasted query that has one."""
    for text in pasted_queries():
        query = parse_query(text)
        expression = query.match_expression()
        if expression is not None:
            yield text, query, expression


def typed_queries() -> list[str]:
    rng = random.Random(9)
    vocabulary = (  # noqa: SIM905
        "cuda out of memory nccl timeout gpu driver pod node engine worker cache kv request the "
        "restarts crashes stalls slow queue model error failed scheduler gateway peak load "
        "reboot tensor parallelism long prompts 显存 超时 排队"
    ).split()
    return [" ".join(rng.sample(vocabulary, rng.randint(2, 6))) for _ in range(150)]


def rows(candidates) -> list[tuple]:
    return [(c.rowid, c.relevance, bool(c.covers_all), c.names) for c in candidates]


@pytest.mark.parametrize("tag", [None, "vllm"])
@pytest.mark.parametrize("wiki", ["shipped", "generated"])
def test_skipping_common_words_ranks_as_every_match(wiki, tag, generated_wiki):
    dirs = None if wiki == "shipped" else [generated_wiki]
    used = 0

    def compare(conn):
        nonlocal used
        for text, query, expression in parsed_pasted_queries():
            for wanted in (5, 20):
                fast = search_module._rank_skipping_common_words(
                    conn, query, expression, tag, wanted
                )
                if fast is None:
                    continue
                used += 1
                full = search_module._rank_every_match(conn, expression, tag, wanted)
                assert rows(fast) == rows(full), text[:200]

    with_index(dirs, compare)
    assert used > 50  # the shortcut is taken, not only declined


@pytest.mark.parametrize("tag", [None, "vllm"])
def test_skipping_frequent_words_too_ranks_as_every_match(tag, generated_wiki, monkeypatch):
    """The first try also skips the most frequent of the other words, each bounded by what it
    can add to bm25 at most: the same rows and scores whenever that try answers."""
    monkeypatch.setattr(search_module, "MIN_SKIPPED_ENTRIES", 0)  # tried on every text here
    used = declined = 0

    def compare(conn):
        nonlocal used, declined
        for text, query, expression in parsed_pasted_queries():
            terms = query.term_expressions()
            entries, *holding = search_module._entry_counts(conn, terms)
            kept = [(t, n) for t, n in zip(terms, holding, strict=True) if 2 * n < entries]
            common = len(terms) - len(kept)
            for wanted in (5, 20):
                rare, bound = search_module._without_frequent_words(kept, entries, wanted)
                if not bound:
                    continue
                margin = bound + common * search_module.COMMON_WORD_SCORE
                fast = search_module._rank_without(conn, rare, margin, expression, tag, wanted)
                if fast is None:
                    declined += 1
                    continue
                used += 1
                full = search_module._rank_every_match(conn, expression, tag, wanted)
                assert rows(fast) == rows(full), text[:200]

    with_index([generated_wiki], compare)
    assert used > 50 and declined > 0  # taken, and declined when it cannot tell


@pytest.mark.parametrize("wiki", ["shipped", "generated"])
def test_a_symptom_word_with_its_alternatives_is_never_skipped(wiki, generated_wiki):
    """A typed query of more than MAX_WORD_BY_WORD_TERMS terms (long Chinese runs) is ranked as
    a pasted one, and its symptom word is a group of phrases ("slow" OR "latency" OR ...): the
    group may be in half of the entries while one of its phrases is rare and weighs a lot."""
    dirs = None if wiki == "shipped" else [generated_wiki]
    runs = [
        "显存不足排队超时请求",
        "驱动版本不匹配调度失败",
        "首字延迟高网关超时卡死",
        "爆显存掉卡重启循环",
    ]
    runs = [a + b for a in runs for b in runs if a != b][:6]  # 13 grams and more
    texts = [f"{word} {run}" for word in ("slow", "hangs", "crashed", "gibberish") for run in runs]

    def compare(conn):
        for text in texts:
            query = parse_query(text)
            assert query.short and query.alternatives
            assert len(query.terms) > search_module.MAX_WORD_BY_WORD_TERMS
            expression = query.match_expression()
            for wanted in (5, 20):
                ranked = search_module._rank_all_words(conn, query, expression, None, wanted)
                full = search_module._rank_every_match(conn, expression, None, wanted)
                assert rows(ranked) == rows(full), text

    with_index(dirs, compare)


@pytest.mark.parametrize("wiki", ["shipped", "generated"])
def test_word_by_word_shortcut_ranks_as_the_long_way(wiki, generated_wiki):
    dirs = None if wiki == "shipped" else [generated_wiki]
    differs = 0

    def compare(conn):
        nonlocal differs
        for text in typed_queries():
            query = parse_query(text)
            if not query.short or not query.terms:
                continue
            for wanted in (20, 40):
                fast = search_module._rank_word_by_word(conn, query, None, wanted)
                slow = search_module._rank_word_by_word(conn, query, None, wanted, shortcut=False)
                assert rows(fast) == rows(slow), text
                differs += len(query.terms) > 1

    with_index(dirs, compare)
    assert differs > 50


def test_the_stored_entry_count_follows_every_change(tmp_path):
    """The ranking reads the number of entries (bm25's N) from the index: it must stay exact."""
    from llmdoctor.wiki.index import ensure_index

    wiki = tmp_path / "wiki"
    wiki.mkdir()

    def entry(name: str) -> str:
        return (
            f"---\nid: {name}\ntitle: Entry {name}\nseverity: info\n---\n"
            "## Symptom\nkestrel\n\n## Cause\nc\n\n## Fix\nf\n"
        )

    def counts() -> tuple[int, int, int]:
        def read(conn):
            stored = conn.execute("SELECT value FROM meta WHERE key = 'entries'").fetchone()[0]
            docs = conn.execute("SELECT count(*) FROM docs").fetchone()[0]
            fts = conn.execute("SELECT count(*) FROM docs_fts").fetchone()[0]
            return int(stored), docs, fts

        return with_index([wiki], read)

    for name in ("alpha", "beta", "gamma"):
        (wiki / f"{name}.md").write_text(entry(name), encoding="utf-8")
    ensure_index([wiki])
    first = counts()
    assert first[0] == first[1] == first[2]
    (wiki / "beta.md").unlink()
    (wiki / "delta.md").write_text(entry("delta"), encoding="utf-8")
    (wiki / "epsilon.md").write_text(entry("epsilon"), encoding="utf-8")
    stored, docs, fts = counts()
    assert stored == docs == fts == first[0] + 1


def test_the_bound_on_a_word_s_idf_is_never_below_it():
    """What a skipped word may add is bounded with _log_at_most (no `math` import on the
    pasted-text path): never under log, and close to it for any odds a wiki can have."""
    import math

    rng = random.Random(3)
    odds = [1 + 1e-12, 1.0000001, 1.5, 2.0, 27.1, 20001.0, 1e6]
    odds += [1 + rng.random() * 10 ** rng.randint(-6, 6) for _ in range(2000)]
    for x in odds:
        bound = search_module._log_at_most(x)
        # (rounding: ~1e-13 under log(x) at most where x is next to 1; the caller pads 1e-9)
        assert math.log(x) - 1e-12 <= bound <= math.log(x) * 1.01 + 1e-12, x
