"""An OOM before the server ever served is a start-up that does not fit: the shared reading of
when a line came (llmdoctor/wiki/server_phase.py) and the three places that tell it alike
(explain, log-signatures, pod-restarts). Real logs: the example crash loop's previous log (a V1
start-up, then vLLM issue 12529's OOM), round 11's gfx906 start-up and a V0 server's stats lines.
"""

from __future__ import annotations

from pathlib import Path

from llmdoctor.engine.facts import Facts
from llmdoctor.engine.registry import all_checks
from llmdoctor.engine.runner import run_checks
from llmdoctor.engine.textsource import TextSource
from llmdoctor.wiki.library import load_library
from llmdoctor.wiki.server_phase import during_startup, retold_at_startup, startup_story

ROOT = Path(__file__).resolve().parents[1]
CRASH_LOOP = ROOT / "examples" / "bundles" / "crashloop-cuda-oom" / "logs" / "vllm.previous.log"
FRESH = ROOT / "tests" / "fixtures" / "explain_fresh"
SERVING = (FRESH / "round11" / "_healthy" / "r11-c1-steady-77tps-generation.log").read_text()
ENTRIES = load_library().entries
STORY = "vllm-startup-memory-insufficient"


def numbered(text: str) -> list[tuple[int, str]]:
    return list(enumerate(text.splitlines(), 1))


def oom_line(text: str) -> int:
    return next(n for n, line in numbered(text) if "CUDA out of memory. Tried" in line)


def test_cuda_oom_runtime_names_its_start_up_story():
    assert startup_story(ENTRIES, "cuda-oom-runtime") == STORY
    assert startup_story(ENTRIES, "engine-dead") is None  # no at_startup
    assert (
        startup_story({"cuda-oom-runtime": ENTRIES["cuda-oom-runtime"]}, "cuda-oom-runtime") is None
    )


def test_an_oom_after_the_weights_loaded_and_before_any_request_is_at_start_up():
    text = CRASH_LOOP.read_text()
    assert "Loading weights took" in text and during_startup(numbered(text), oom_line(text))


def test_a_line_after_the_server_served_is_not_at_start_up():
    text = CRASH_LOOP.read_text()
    lines = text.splitlines()
    at = oom_line(text)
    served = "\n".join([*lines[: at - 1], *SERVING.splitlines(), *lines[at - 1 :]])
    assert not during_startup(numbered(served), oom_line(served))
    # without any start-up line the log says nothing of when: not at start-up
    alone = "\n".join(lines[at - 1 :])
    assert not during_startup(numbered(alone), 1)


def test_a_start_up_line_long_after_is_the_next_start_not_this_one():
    text = CRASH_LOOP.read_text()
    lines = text.splitlines()
    at = oom_line(text)
    later = "\n".join([*lines[at - 1 :], *["x"] * 60, *lines[: at - 1]])  # the restart's lines
    assert not during_startup(numbered(later), 1)


def test_retold_reads_the_log_again_only_as_far_as_it_needs():
    read = []

    def lines():
        for line in SERVING.splitlines() + ["never read"] * 1000:
            read.append(line)
            yield line

    assert retold_at_startup(ENTRIES, {"cuda-oom-runtime": 5000}, lines) == {}
    assert len(read) < 100  # stopped at the first line that says it served


def _facts(log: str) -> Facts:
    return Facts(
        {
            "wiki/entries": ENTRIES,
            "target": "t",
            "logs/vllm.previous.log": TextSource.from_text("logs/vllm.previous.log", log),
        }
    )


def _findings(facts: Facts, check_id: str) -> list:
    report = run_checks(facts, [c for c in all_checks() if c.id == check_id], "t")
    assert not report.errors, report.errors
    return report.findings


def test_log_signatures_and_memory_fragmentation_tell_the_start_up_story():
    text = CRASH_LOOP.read_text()
    (sig,) = [f for f in _findings(_facts(text), "log-signatures") if STORY in f.runbooks]
    assert sig.runbooks == [STORY, "cuda-oom-runtime"]
    assert "at start-up: the lines of cuda-oom-runtime" in sig.summary
    assert not [
        f for f in _findings(_facts(text), "log-signatures") if f.runbooks == ["cuda-oom-runtime"]
    ]
    (frag,) = _findings(_facts(text), "memory-fragmentation")
    assert frag.runbooks == [STORY, "cuda-oom-runtime"] and "at start-up" in frag.summary
    # the same OOM after the server served is a runtime OOM in both
    lines = text.splitlines()
    at = oom_line(text)
    served = "\n".join([*lines[: at - 1], *SERVING.splitlines(), *lines[at - 1 :]])
    runbooks = [f.runbooks for f in _findings(_facts(served), "log-signatures")]
    assert ["cuda-oom-runtime"] in runbooks and not any(STORY in r for r in runbooks)
    (frag,) = _findings(_facts(served), "memory-fragmentation")
    assert frag.runbooks == ["cuda-oom-runtime"] and "at start-up" not in frag.summary
