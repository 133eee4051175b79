"""explain's accuracy on real error excerpts from public bug reports must not regress.

tests/fixtures/explain_corpus/<entry-id>/*.log: whole lines from public issues (SOURCES.md), the
folder naming the entry that should rank first. benchmarks/explain_accuracy.py prints the same
figures with the misses.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from explain_accuracy import corpus_files, evaluate  # noqa: E402

REQUIRED = 60


@pytest.fixture(scope="module")
def report():
    return evaluate()


def test_corpus_has_enough_real_excerpts_with_sources():
    # At least ~60 excerpts, each listed with its source URL in SOURCES.md.
    files = corpus_files()
    assert len(files) >= REQUIRED
    sources = (ROOT / "tests/fixtures/explain_corpus/SOURCES.md").read_text(encoding="utf-8")
    for expected, path in files:
        row = next((ln for ln in sources.splitlines() if f"{expected}/{path.name}" in ln), "")
        assert "https://github.com/" in row, path


def test_corpus_expected_ids_are_runbook_entries():
    from llmdoctor.wiki.library import load_library

    entries = load_library().entries
    assert {expected for expected, _ in corpus_files()} <= set(entries)


def test_top1_accuracy_is_at_least_90_percent(report):
    # The bar from issue 7; misses are listed in the assertion message.
    misses = [f"{m['file']}: {m['ranked'][:3]}" for m in report["misses"]]
    assert report["top1"] >= 0.9, "\n".join(misses)


def test_top3_accuracy_is_at_least_top1(report):
    assert report["top3"] >= report["top1"]
