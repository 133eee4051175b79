"""What round 11's blind measurement found explain telling wrongly, each on the real excerpt that
showed it (tests/fixtures/explain_fresh/round11, sources in SOURCES-round11.md)."""

from __future__ import annotations

from pathlib import Path

from llmdoctor.engine.textsource import TextSource
from llmdoctor.triage.explain import explain

ROUND11 = Path(__file__).parent / "fixtures" / "explain_fresh" / "round11"
ENGINE_WEDGED = Path(__file__).parent / "fixtures" / "runbooks" / "engine-wedged"


def run(path: Path, entries):
    return explain(TextSource.from_file(path.name, path), entries)


def run_text(text: str, entries):
    return explain(TextSource.from_text("paste", text), entries)


def test_one_stalled_stats_interval_before_the_engine_generates_is_no_wedge(entries):
    # V0 logs `Avg generation throughput: 0.0 tokens/s, Running: 1 reqs` for the interval in
    # which a request arrived, then 77 tokens/s: a critical "engine wedged" (confidence 1.00)
    result = run(ROUND11 / "_healthy" / "r11-c1-steady-77tps-generation.log", entries)
    assert result.matches == [] and result.salient == []


def test_a_stall_that_lasts_to_the_end_of_the_input_is_still_a_wedge(entries):
    # the same stall lines with no later progress (vLLM issue 12795's endless loop)
    result = run(
        ENGINE_WEDGED / "vllm-v0-cpu-endless-loop-0-tokens-running-1-issue12795.log", entries
    )
    assert [m.id for m in result.matches][:1] == ["engine-wedged"]
    # ... and a stall after progress is one too: only a later progress line ends it
    lines = (ROUND11 / "_healthy" / "r11-c1-steady-77tps-generation.log").read_text().splitlines()
    stalled_last = "\n".join([*lines[1:], lines[0]]) + "\n"
    assert [m.id for m in run_text(stalled_last, entries).matches][:1] == ["engine-wedged"]


def test_nccl_info_lines_are_not_errors(entries):
    # NCCL's set-up lines at INFO (`NET/Plugin : dlerror=libnccl-net.so: cannot open shared
    # object file …`, `NET/IB : No device found.`) named nccl-failure as a MAYBE on a healthy
    # TP=4 start-up
    path = ROUND11 / "_healthy" / "r11-c4-vllm-k8s-nccl-init-info.log"
    assert "NCCL INFO NET/Plugin : dlerror=libnccl-net.so: cannot open" in path.read_text()
    result = run(path, entries)
    assert result.matches == [] and result.salient == []
    # an NCCL WARN line is still an error line
    warn = "host:272:272 [2] NCCL WARN NET/Socket : connect to 10.0.0.2<43511> failed : Connection refused"
    assert run_text(warn, entries).salient


def test_amds_memory_access_fault_is_an_illegal_memory_access(entries):
    # vLLM on 8x MI300X: the HSA runtime's `Memory access fault by GPU node-2 (Agent handle: …)
    # on address …` after a stats line with 130 pending: "queue saturated" (0.74) was named
    result = run(
        ROUND11 / "illegal-memory-access" / "r11-c1-mi300x-tp8-memory-access-fault.log", entries
    )
    assert [m.id for m in result.matches][:1] == ["illegal-memory-access"]


# vLLM 0.32's request logger (entrypoints/serve/utils/request_logger.py), its format strings
# filled with a user's prompt and the model's answer that quote errors
PROMPT_LOGGED = (
    "(APIServer pid=1671) DEBUG 12-03 03:10:01 [request_logger.py:55] Request chatcmpl-9a1 "
    "details: prompt: 'My job failed with torch.OutOfMemoryError: CUDA out of memory. Tried to "
    "allocate 2.00 GiB, then NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.', "
    "prompt_token_ids: [1, 2, 3], prompt_embeds shape: None."
)
OUTPUT_LOGGED = (
    "(APIServer pid=1671) INFO 12-03 03:10:02 [request_logger.py:109] Generated response "
    "chatcmpl-9a1 (streaming complete): output: 'An NCCL error: unhandled system error means a "
    "peer died', finish_reason: stop"
)


def test_text_a_request_log_quotes_is_no_evidence(entries):
    # a hostile pass: errors quoted in a prompt named xid-fallen-off-bus, nccl-failure and
    # cuda-oom-runtime, three criticals on a healthy server, from one INFO line
    healthy = (
        ROUND11.parent / "round6" / "_healthy" / "r6-vllm-34503-request-logged-200.log"
    ).read_text()
    result = run_text(PROMPT_LOGGED + "\n" + OUTPUT_LOGGED + "\n" + healthy, entries)
    assert result.matches == [] and result.salient == []
    # the same words logged by the server as its own error still count
    own = "ERROR 12-03 03:10:05 [core.py:1] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
    assert [m.id for m in run_text(PROMPT_LOGGED + "\n" + own, entries).matches][:1] == [
        "cuda-oom-runtime"
    ]


def test_a_stall_over_several_intervals_that_recovered_is_still_a_wedge(entries):
    # a hostile pass: minutes of `0.0 tokens/s` with requests running, then progress, read as
    # "No entry explains" once any later line generated: only a single interval is forgiven
    stalled = (
        ENGINE_WEDGED / "vllm-v0-cpu-endless-loop-0-tokens-running-1-issue12795.log"
    ).read_text()
    progress = (
        (ROUND11 / "_healthy" / "r11-c1-steady-77tps-generation.log").read_text().splitlines()[1]
    )
    result = run_text(stalled.rstrip("\n") + "\n" + progress + "\n", entries)
    assert [m.id for m in result.matches][:1] == ["engine-wedged"]
