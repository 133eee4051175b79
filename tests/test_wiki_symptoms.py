"""Symptom words typed at 3 a.m. reach the entries that explain them (wiki/query.py SYMPTOMS)."""

from __future__ import annotations

import pytest

from llmdoctor.wiki.query import parse_query
from llmdoctor.wiki.search import search

LATENCY_CAUSES = {"queue-saturation", "kv-cache-preemption"}


@pytest.mark.parametrize(
    "query", ["requests are slow", "slow", "high latency", "latency", "very slow", "TTFT is high"]
)
def test_slowness_reaches_queue_saturation_and_kv_cache_preemption(query):
    # issue 12: none of these brought up either entry
    top = [r.id for r in search(query, limit=5)]
    assert set(top) >= LATENCY_CAUSES, top


@pytest.mark.parametrize(
    ("query", "entry_id"),
    [("requests are slow", "queue-saturation"), ("high latency", "queue-saturation")],
)
def test_latency_phrasings_put_a_latency_cause_first(query, entry_id):
    assert search(query, limit=3)[0].id == entry_id


@pytest.mark.parametrize(
    ("query", "entry_id"),
    [("gibberish", "nan-or-garbage-output"), ("crashed", "engine-dead"), ("hangs", "gsp-timeout")],
)
def test_other_symptom_words(query, entry_id):
    assert entry_id in [r.id for r in search(query, limit=3)]


def test_a_symptom_group_is_one_term_so_covering_every_word_still_means_something():
    query = parse_query("requests are slow")
    assert query.terms == ["requests", "slow"]
    assert query.term_expressions()[1].startswith('("slow" OR "latency"')


def test_pasted_logs_are_not_expanded():
    query = parse_query("INFO engine slow\nWARNING something slow happened here again and again")
    assert query.alternatives == {}
