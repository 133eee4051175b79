"""When in the log a cause happened: an outage the engine generated again after, one stalled
stats interval, an OOM before the server ever served. Real excerpts; the stats lines added to
them are a real server's (round 11's healthy V0 log, vLLM issue text in its SOURCES)."""

from __future__ import annotations

import json
from pathlib import Path

from llmdoctor.commands.explain_cli import run_explain
from llmdoctor.engine.textsource import TextSource
from llmdoctor.triage.explain import explain

FIXTURES = Path(__file__).parent / "fixtures"
FRESH = FIXTURES / "explain_fresh"
# a V0 server generating 77 tokens/s with one request running
PROGRESS = (FRESH / "round11" / "_healthy" / "r11-c1-steady-77tps-generation.log").read_text()
GENERATING = [line for line in PROGRESS.splitlines() if "generation throughput: 7" in line]
OOM = (
    FIXTURES
    / "runbooks"
    / "cuda-oom-runtime"
    / "vllm-v0-mq-engine-oom-during-completion-echo-issue10596.log"
)
STARTUP_OOM = (
    FRESH
    / "round11"
    / "vllm-startup-memory-insufficient"
    / "r11-c1-gfx906-qwen3-32b-single-32gb.log"
)
WORKER_LOAD_OOM = (
    FRESH / "round6" / "vllm-startup-memory-insufficient" / "r6-vllm-14095-oom-load-model-14gib.log"
)
WEDGED = FIXTURES / "runbooks" / "engine-wedged"


def run_text(text: str, entries):
    return explain(TextSource.from_text("paste", text), entries)


def ids(result) -> list[str]:
    return [m.id for m in result.matches]


# vLLM 0.32 (CPU build) drills: the worker killed (SIGKILL) and the engine dead; a server's
# start-up; the same server under load. A service's journal holds one run after the other
DRILLS = FIXTURES / "real-vllm-0.32"
DEAD = (DRILLS / "dead" / "server.log").read_text()
STARTED = (DRILLS / "healthy" / "server.log").read_text()
LOADED = (DRILLS / "saturation" / "server.log").read_text()


def test_an_outage_then_a_server_started_again_and_generating_has_ended(entries):
    alone = run_text(DEAD, entries)
    assert ids(alone)[:2] == ["vllm-worker-killed", "engine-dead"] and alone.exit_code == 2
    assert all(m.resumed is None for m in alone.matches)
    result = run_text(DEAD + STARTED + LOADED, entries)
    # what is wrong now (the loaded server's full KV cache) and what happened (both ended)
    assert ids(result) == ["kv-cache-preemption", "vllm-worker-killed", "engine-dead"]
    now, first, dead = result.matches
    assert now.resumed is None and first.severity == "critical"
    assert first.resumed is not None and dead.resumed is not None
    # the generation counted is the new server's, after its start
    assert first.resumed.first.line > len((DEAD + STARTED).splitlines())
    assert first.resumed.lines == sum(
        "generation throughput: 0.0" not in line and "generation throughput:" in line
        for line in LOADED.splitlines()
    )
    # what happened is still named; what is wrong now is not said to be it
    assert not result.critical and result.exit_code == 1
    assert first.to_json()["resumed"]["lines"] == first.resumed.lines


def test_generation_without_a_restart_after_an_outage_does_not_end_it(entries):
    # another replica's stats lines (kubectl logs -l … --prefix) or a prompt that quotes one:
    # the engine that died did not come back
    replica = "\n".join(f"[pod/vllm-b/vllm] {line}" for line in LOADED.splitlines())
    dead = "\n".join(f"[pod/vllm-a/vllm] {line}" for line in DEAD.splitlines())
    result = run_text(dead + "\n" + replica + "\n", entries)
    assert ids(result)[:1] == ["vllm-worker-killed"] and result.matches[0].resumed is None
    assert result.exit_code == 2
    stats = next(line for line in LOADED.splitlines() if "generation throughput: 2" in line)
    quoted = (
        "(APIServer pid=1) INFO 12-03 03:10:01 [request_logger.py:55] Request chatcmpl-9a1 "
        f"details: prompt: 'is this fine? {stats}', prompt_token_ids: [1, 2], prompt_embeds shape: None."
    )
    result = run_text(DEAD + quoted + "\n", entries)
    assert result.matches[0].resumed is None and result.exit_code == 2


def test_stats_lines_before_the_outage_do_not_end_it(entries):
    oom = OOM.read_text()
    result = run_text("\n".join(GENERATING) + "\n" + oom, entries)
    assert ids(result)[:1] == ["cuda-oom-runtime"] and result.matches[0].resumed is None
    assert result.exit_code == 2


def explained(log: Path, capsys, code: int) -> tuple[str, dict]:
    """The terminal view and the JSON of `explain LOG`, each exiting with `code`."""
    assert run_explain(str(log), no_color=True) == code
    out = capsys.readouterr().out
    assert run_explain(str(log), as_json=True) == code
    return out, json.loads(capsys.readouterr().out)


def long_serving() -> str:
    """The loaded server's log repeated past CLEAN_BYTES: a log too big to read whole."""
    from llmdoctor.triage.explain import CLEAN_BYTES

    return LOADED * (CLEAN_BYTES // len(LOADED.encode()) + 1)


def test_the_terminal_says_it_ended_and_quotes_the_line_that_shows_it(entries, tmp_path, capsys):
    log = tmp_path / "ended.log"
    log.write_text(DEAD + STARTED + LOADED)
    out, result = explained(log, capsys, 1)
    assert "ENDED  vllm-worker-killed" in out and "ENDED  engine-dead" in out
    assert "then tokens were generated again (3 stats lines" in out
    killed = result["matches"][1]
    assert killed["id"] == "vllm-worker-killed" and killed["severity"] == "critical"
    assert "Avg generation throughput" in killed["resumed"]["first"]["text"]
    assert result["read_whole"] is True
    # what the terminal labels each, for an alert that should not page on what ended
    shown = {m["id"]: m["shown_as"] for m in result["matches"]}
    assert shown["vllm-worker-killed"] == shown["engine-dead"] == "ended"


def test_a_log_too_big_to_read_whole_ends_an_outage_by_its_last_stats_lines(
    entries, tmp_path, capsys
):
    # the same story past CLEAN_BYTES: the file is read again from the outage on for its first
    # (re)start and its last stats lines, and those say it ended (uncounted)
    log = tmp_path / "big.log"
    log.write_text(DEAD + STARTED + long_serving())
    out, result = explained(log, capsys, 1)
    assert "ENDED  vllm-worker-killed" in out
    assert "the last stats lines of a long log" in out
    assert result["read_whole"] is False
    killed = next(m for m in result["matches"] if m["id"] == "vllm-worker-killed")
    assert killed["resumed"]["lines"] is None  # not counted: only the last lines were read
    assert "Avg generation throughput" in killed["resumed"]["first"]["text"]


def test_a_log_too_big_to_read_whole_stays_critical_when_nothing_after_the_outage_generated(
    entries, tmp_path, capsys
):
    # served, then the outage at the end; whether the server was starting then is not checked
    # on a log read as a stream, which the reader is told
    log = tmp_path / "big.log"
    log.write_text(STARTED + long_serving() + DEAD)
    out, result = explained(log, capsys, 2)
    assert "ENDED" not in out
    assert "not checked whether the server was still starting then" in out
    assert result["read_whole"] is False
    assert all("resumed" not in m for m in result["matches"])


def test_a_stream_and_a_whole_reading_agree_on_whether_it_ended(entries, tmp_path):
    # the same big log read whole (given as text) and as a stream (a file): the kept stats and
    # start lines are lines the whole reading found, its last ones among them, and both say
    # the outage ended
    from llmdoctor.triage.explain import read_input

    text = DEAD + STARTED + long_serving()
    log = tmp_path / "big.log"
    log.write_text(text)
    whole, _ = read_input(TextSource.from_text("paste", text), entries)
    stream, _ = read_input(TextSource.from_file(log.name, log), entries)
    assert whole.kept_only is False and stream.kept_only is True
    assert stream.starts and set(stream.starts) <= set(whole.starts)
    assert stream.progress and set(stream.progress) <= set(whole.progress)
    assert whole.progress[-1] == stream.progress[-1]
    for source in (TextSource.from_text("paste", text), TextSource.from_file(log.name, log)):
        resumed = {m.id for m in explain(source, entries).matches if m.resumed}
        assert "vllm-worker-killed" in resumed


def test_one_stalled_interval_at_the_end_is_a_warning_several_are_critical(entries):
    # a user's "we kept seeing" line: one interval without a token with 7 requests running
    one = (
        FIXTURES
        / "explain_corpus"
        / "engine-wedged"
        / "tt-gpt-oss-evals-hang-running-7-zero-throughput.log"
    )
    result = explain(TextSource.from_file(one.name, one), entries)
    assert ids(result)[:1] == ["engine-wedged"] and result.matches[0].severity == "warning"
    assert result.exit_code == 1
    several = WEDGED / "vllm-v0-cpu-endless-loop-0-tokens-running-1-issue12795.log"
    result = explain(TextSource.from_file(several.name, several), entries)
    assert ids(result)[:1] == ["engine-wedged"] and result.matches[0].severity == "critical"
    assert result.exit_code == 2


def test_a_stall_that_ended_is_named_and_said_to_have_ended_by_the_same_engine(entries):
    # round 11's V0 server: its own stalled interval (`0.0 tokens/s, Running: 1 reqs`) held for
    # three intervals, then its own generation; another engine's generation ends nothing
    lines = PROGRESS.splitlines()
    stalled = [line for line in lines if "generation throughput: 0.0" in line][:1] * 3
    result = run_text("\n".join([*stalled, *GENERATING]) + "\n", entries)
    assert ids(result)[:1] == ["engine-wedged"] and result.matches[0].resumed is not None
    assert result.exit_code == 1
    elsewhere = (WEDGED / "vllm-v0-cpu-endless-loop-0-tokens-running-1-issue12795.log").read_text()
    result = run_text(elsewhere.rstrip("\n") + "\n" + GENERATING[0] + "\n", entries)
    assert ids(result)[:1] == ["engine-wedged"] and result.matches[0].resumed is None
    assert result.exit_code == 2


def test_an_oom_before_the_server_served_is_a_start_up_that_does_not_fit(entries):
    # `vllm serve Qwen/Qwen3-32B` on one 32 GB gfx906, and workers that OOM in load_model
    for path in (STARTUP_OOM, WORKER_LOAD_OOM):
        result = explain(TextSource.from_file(path.name, path), entries)
        assert ids(result)[:1] == ["vllm-startup-memory-insufficient"], path
        story = result.matches[0]
        # the OOM's lines, told as the start-up's story: said whose they are, never twice
        assert story.how == "signature" and story.lines_of == "cuda-oom-runtime"
        assert "out of memory" in story.evidence[0].text and "cuda-oom-runtime" not in ids(result)
        assert result.matched_lines == sum(m.count for m in result.matches)
        assert story.to_json()["lines_of"] == "cuda-oom-runtime"


def test_an_oom_after_serving_began_or_without_a_start_up_line_stays_a_runtime_oom(entries):
    text = STARTUP_OOM.read_text()
    launch, *rest = text.splitlines()
    # the same lines after the launched server served: a runtime OOM (what a request needed)
    served = run_text("\n".join([launch, GENERATING[0], *rest]) + "\n", entries)
    assert ids(served)[:1] == ["cuda-oom-runtime"]
    # ... but a server that served, then was launched again: the last start decides
    again = run_text("\n".join([GENERATING[0], launch, *rest]) + "\n", entries)
    assert ids(again)[:1] == ["vllm-startup-memory-insufficient"]
    # the OOM line alone says nothing of when it happened
    alone = [line for line in text.splitlines() if "out of memory" in line]
    assert ids(run_text("\n".join(alone) + "\n", entries))[:1] == ["cuda-oom-runtime"]
    # the runtime excerpt of vLLM issue 10596 (a 500 answered before it) stays runtime
    assert ids(run_text(OOM.read_text(), entries))[:1] == ["cuda-oom-runtime"]
