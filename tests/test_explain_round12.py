"""What round 12's blind measurement found explain telling wrongly, on the real excerpt that
showed it (tests/fixtures/explain_fresh/round12, sources in SOURCES-round12.md)."""

from __future__ import annotations

from pathlib import Path

from llmdoctor.engine.textsource import TextSource
from llmdoctor.triage.explain import PROSE_ONLY, SALIENT_PATTERNS, explain

ROUND12 = Path(__file__).parent / "fixtures" / "explain_fresh" / "round12"
GAUDI = ROUND12 / "_healthy" / "r12-c6-vllm-gaudi-plugin-startup.log"


def run_text(text: str, entries):
    return explain(TextSource.from_text("paste", text), entries)


def test_an_info_line_that_only_says_error_in_words_is_no_error_line(entries):
    # vLLM-Gaudi's healthy start-up: `INFO … Triton is installed but 0 active driver(s) found
    # (expected 1). Disabling Triton to prevent runtime errors.` named gpu-not-visible (MAYBE)
    text = GAUDI.read_text()
    assert "to prevent runtime errors" in text
    result = explain(TextSource.from_file(GAUDI.name, GAUDI), entries)
    assert result.matches == [] and result.salient == []
    # the same words logged at WARNING or ERROR are an error line still
    line = next(t for t in text.splitlines() if "runtime errors" in t)
    for level in ("WARNING", "ERROR"):
        assert run_text(line.replace("INFO", level), entries).salient, level


def test_an_info_line_that_states_a_status_or_a_kill_is_still_an_error_line(entries):
    # uvicorn logs its access lines at INFO: a 500 is an error line whatever the level
    access = (
        'INFO:     10.0.0.7:51234 - "POST /v1/chat/completions HTTP/1.1" 500 Internal Server Error'
    )
    assert run_text(access + "\n", entries).salient
    killed = "INFO 12-02 00:53:02 [multiproc_executor.py:315] Worker proc VllmWorker-0 was Killed"
    assert run_text(killed + "\n", entries).salient


def test_the_prose_words_are_salient_patterns():
    # one that is no salient pattern (a typo) would never apply, without a word
    assert set(SALIENT_PATTERNS) >= PROSE_ONLY
