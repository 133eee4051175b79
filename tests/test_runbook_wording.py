"""The report prints the first lines of an entry's Fix alone: they must stand alone."""

from __future__ import annotations

import re

import pytest

from llmdoctor.wiki.library import load_library

ENTRIES = load_library([]).entries
ELSEWHERE = re.compile(r"\b(table|list|section|steps?) (above|below)\b|\bsee above\b", re.I)


@pytest.mark.parametrize("entry_id", sorted(ENTRIES))
def test_fix_excerpt_does_not_point_at_text_the_report_does_not_show(entry_id):
    # issue 12: engine-dead's Fix began "Fix the root cause from the table above"
    excerpt = " ".join(ENTRIES[entry_id].fix_excerpt())
    assert not ELSEWHERE.search(excerpt), excerpt


def test_engine_dead_fix_names_where_to_go():
    excerpt = " ".join(ENTRIES["engine-dead"].fix_excerpt())
    assert "cuda-oom-runtime" in excerpt and "nccl-failure" in excerpt
