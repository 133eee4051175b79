"""wiki search on questions people really typed (tests/fixtures/typed_questions/): the entry that
explains each thread's conclusion among the first results, held at its first measurement."""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import pytest

from llmdoctor.wiki.search import search

HERE = Path(__file__).resolve().parent
QUESTIONS = HERE / "fixtures" / "typed_questions" / "questions.tsv"
RUNBOOKS = HERE.parent / "runbooks"
sys.path.insert(0, str(HERE.parent / "benchmarks"))

from explain_accuracy import reports, runbook_reports  # noqa: E402


def questions() -> list[dict]:
    with QUESTIONS.open(encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))


def test_every_row_names_an_entry_or_none_and_a_thread():
    ids = {path.stem for path in RUNBOOKS.glob("*.md")}
    rows = questions()
    assert len(rows) == 61
    for row in rows:
        assert row["entry"] == "none" or row["entry"] in ids, row
        assert row["url"].startswith("https://") and row["question"].strip(), row


def test_no_runbook_cites_a_thread_of_the_set():
    # a thread the knowledge was written from measures recall, not what a new question gets
    # (the runbook sources and report identity of benchmarks/explain_accuracy.py's independence)
    cited = runbook_reports()
    for row in questions():
        assert not reports(row["url"]) & cited, row["url"]


@pytest.fixture(scope="module")
def ranked() -> list[tuple[str, list[str]]]:
    return [
        (row["entry"], [r.id for r in search(row["question"], limit=3)])
        for row in questions()
        if row["entry"] != "none"
    ]


def test_first_measurement_is_held(ranked):
    # 2026-12-05, first measured: top-1 23 of 47 (49 %), top-3 33 of 47 (70 %). Many titles
    # say too little to tell ("pod is crashing" for a gated model's 401); the misses are ranking
    # on long titles, where one rare incidental word outweighs the symptom (a pod "stuck in
    # `Pending`" among 17 words)
    assert len(ranked) == 47
    assert sum(got[:1] == [want] for want, got in ranked) >= 23
    assert sum(want in got for want, got in ranked) >= 33
