"""explain on what people really paste and on what logs really hold: the first error before a
consequence (issue 26 item 2), cut and prose-wrapped pastes (item 3), and a log whose every line
is the same error (item 6). The texts are real excerpts under tests/fixtures/ (sources in the
SOURCES.md beside each); where a test reshapes one (cuts it, wraps it in a sentence, repeats
it) the comment says how.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from llmdoctor.cli import app
from llmdoctor.engine.textsource import TextSource
from llmdoctor.triage.explain import explain, read_input
from llmdoctor.triage.pasted import (
    body_messages,
    clean_lines,
    code_pieces,
    event_message,
    rich_logged,
)

FIXTURES = Path(__file__).parent / "fixtures"
RUNBOOK_FIXTURES = FIXTURES / "runbooks"
CORPUS = FIXTURES / "explain_corpus"
ROUND8 = FIXTURES / "explain_fresh" / "round8"
PHI4_TP4_ASSERT = ROUND8 / "tp-heads-not-divisible" / "r8-vllm-phi4-tp4-kv-heads-assert.log"
ROUND47_DISTILABEL = (
    FIXTURES / "explain_fresh/round47/ray-worker-lost/r47-batch-distilabel-placement-group-gpus.log"
)
ROUND44_SHM_TIMEOUT = (
    FIXTURES / "explain_fresh/round44/engine-dead/r44-evalh-euroeval-shm-broadcast-timeout.log"
)
runner = CliRunner()


def fixture(name: str) -> str:
    return (RUNBOOK_FIXTURES / name).read_text(encoding="utf-8")


def run_text(text: str, entries):
    return explain(TextSource.from_text("paste", text), entries)


# --- the first error before a consequence ------------------------------------------------------


def test_the_first_error_before_a_consequence_is_shown_as_its_likely_cause(entries):
    # kernel log: an nvidia-peermem ERROR comes one line before the Xid 13 that names
    # illegal-memory-access (an entry other entries explain): that ERROR is the likely cause
    result = run_text(
        fixture("illegal-memory-access/kernel-xid13-109-pt-main-thread-dmesg-ctime.log"), entries
    )
    assert result.matches[0].id == "illegal-memory-access"
    cause = result.likely_cause
    assert cause is not None and cause.consequence == "illegal-memory-access"
    assert cause.line == 1 and "nvidia-peermem" in cause.text and "ERROR" in cause.text


def test_the_likely_cause_is_named_even_when_no_entry_names_that_line(entries):
    # huggingface_hub's EntryNotFoundError (line 1) comes before the download failure's own
    # signature (line 3): shown as the cause although no signature of any entry matches it
    text = fixture("model-download-failure/entry-not-found-404-maggie-issue5.log")
    result = run_text(text, entries)
    assert result.matches[0].id == "model-download-failure"
    cause = result.likely_cause
    assert cause is not None and cause.line == 1 and "EntryNotFoundError" in cause.text
    assert cause.line < min(e.line for e in result.matches[0].evidence)


def test_a_bare_assertion_error_points_at_the_failed_statement_above_it(entries):
    # round 8's Phi-4 `-tp 4` report (tuning data): a worker prints the failed
    # `assert self.total_num_kv_heads % tp_size == 0` (line 6), then a bare `AssertionError`
    # (line 7), then the engine dies. Without the entry whose signature names that assert,
    # engine-dead leads; its likely cause is the statement, which says why, not the bare name
    text = PHI4_TP4_ASSERT.read_text()
    without = {k: v for k, v in entries.items() if k != "tp-heads-not-divisible"}
    result = run_text(text, without)
    assert result.matches[0].id == "engine-dead"
    cause = result.likely_cause
    assert cause is not None and cause.line == 6
    assert "assert self.total_num_kv_heads % tp_size == 0" in cause.text
    # with the shipped entries the assert is the cause's own signature: named first
    assert run_text(text, entries).matches[0].id == "tp-heads-not-divisible"


def test_an_exception_with_a_message_is_its_own_likely_cause(entries):
    # the same excerpt with the exception given a message: that message is the cause, the
    # statement above it is not looked for
    text = PHI4_TP4_ASSERT.read_text()
    text = text.replace(") AssertionError\n", ") AssertionError: heads do not split\n")
    without = {k: v for k, v in entries.items() if k != "tp-heads-not-divisible"}
    cause = run_text(text, without).likely_cause
    assert cause is not None and cause.line == 7 and "heads do not split" in cause.text


def test_a_bare_exception_raised_by_a_bare_raise_is_shown_with_where_it_was_raised(entries):
    # round 44's EuroEval run (EuroEval#1643): shm_broadcast's `raise TimeoutError` (line 2)
    # above a bare `TimeoutError` (line 3) inside the engine core's busy loop. The statement
    # says no more than the name: the exception line is the cause, with the frame it was
    # raised in (line 1), its path from the package on
    text = ROUND44_SHM_TIMEOUT.read_text()
    result = run_text(text, entries)
    assert result.matches[0].id == "engine-dead"
    cause = result.likely_cause
    assert cause is not None and cause.line == 3 and cause.text == "TimeoutError"
    assert cause.raised_in is not None
    assert str(cause.raised_in) == (
        "vllm/distributed/device_communicators/shm_broadcast.py:631, in timeout_ms"
    )
    assert cause.to_json()["raised_in"] == {
        "function": "timeout_ms",
        "file": "vllm/distributed/device_communicators/shm_broadcast.py",
        "line": 631,
    }
    out = runner.invoke(app, ["explain", str(ROUND44_SHM_TIMEOUT)], env={"COLUMNS": "200"})
    assert (
        "3: TimeoutError  (raised at vllm/distributed/device_communicators/shm_broadcast.py:631,"
        " in timeout_ms)" in out.output
    )


SHM_TIMEOUT_TRACEBACK = [
    "Traceback (most recent call last):",
    '  File "/usr/local/lib/python3.12/dist-packages/vllm/distributed/device_communicators/'
    'shm_broadcast.py", line 631, in timeout_ms',
    "    raise TimeoutError",
    "TimeoutError",
]
ENGINE_FAILED = [
    "ERROR 06-05 06:18:14 [core.py:586] EngineCore failed",
    "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace"
    " (above) for the root cause.",
]
SHM_631 = "vllm/distributed/device_communicators/shm_broadcast.py:631, in timeout_ms"


@pytest.mark.parametrize(
    "prefix",
    [
        "",
        "(VllmWorker rank=0 pid=4360) ",
        "[rank0]: ",
        "2025-06-05T06:18:05.123456789Z ",
        "[pod/vllm-7b-5b8d9c7f6-w4nzp/vllm] ",
        "(VllmWorker rank=0 pid=4360) ERROR 06-05 06:18:13 [multiproc_executor.py:470] ",
        "2025-06-05T06:18:05.123456789Z stderr F ",
    ],
)
def test_a_bare_raise_is_read_the_same_under_every_prefix_a_collector_puts(entries, prefix):
    # the hostile pass: under a process tag, torchrun's rank or kubectl's prefixes the `raise`
    # line itself was taken for the first error, and no frame was found
    text = "\n".join([*(prefix + line for line in SHM_TIMEOUT_TRACEBACK), *ENGINE_FAILED])
    cause = run_text(text + "\n", entries).likely_cause
    assert cause is not None and cause.line == 4 and cause.text.endswith("TimeoutError")
    assert str(cause.raised_in) == SHM_631


def test_where_a_bare_exception_was_raised_is_read_from_its_own_traceback_only(entries):
    # two workers writing one log: rank 1's frame between rank 0's frame and its exception
    rank0, rank1 = "(VllmWorker rank=0 pid=4360) ", "(VllmWorker rank=1 pid=4361) "
    lines = [rank0 + line for line in SHM_TIMEOUT_TRACEBACK]
    lines.insert(
        3,
        rank1 + '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/'
        'gpu_model_runner.py", line 2001, in execute_model',
    )
    cause = run_text("\n".join([*lines, *ENGINE_FAILED]) + "\n", entries).likely_cause
    assert cause is not None and str(cause.raised_in) == SHM_631
    # a stack a watchdog dumped on purpose (no traceback's header above its frames) above a
    # TimeoutError logged on its own is not that exception's traceback: neither its code line
    # nor its frame is shown as where it came from
    dumped = [
        "WARNING 06-05 06:18:00 [watchdog.py:41] Step took over 60 s; stack of the main thread:",
        '  File "/usr/local/lib/python3.12/dist-packages/torch/cuda/streams.py", line 224,'
        " in synchronize",
        "    super().synchronize()",
        "ERROR 06-05 06:18:13 [core.py:586] TimeoutError",
        *ENGINE_FAILED,
    ]
    cause = run_text("\n".join(dumped) + "\n", entries).likely_cause
    assert cause is not None and cause.line == 4 and cause.raised_in is None
    # ... nor are frames dumped under a logged line, above an exception printed bare
    logged_dump = [
        "WARNING 06-05 06:18:00 [watchdog.py:41] Step took over 60 s; stack of the main thread:",
        *SHM_TIMEOUT_TRACEBACK[1:],
        *ENGINE_FAILED,
    ]
    cause = run_text("\n".join(logged_dump) + "\n", entries).likely_cause
    assert cause is not None and cause.raised_in is None
    # a statement Python 3.13 prints over several lines is shown from where it begins
    multi = [
        *SHM_TIMEOUT_TRACEBACK[:2],
        "    assert (self.total_num_kv_heads",
        "            % tp_size == 0)",
        "AssertionError",
        *ENGINE_FAILED,
    ]
    cause = run_text("\n".join(multi) + "\n", entries).likely_cause
    assert cause is not None and cause.text == "assert (self.total_num_kv_heads"
    # a frame whose line number no int() takes (5,000 digits) is no frame: no internal error
    huge = [line.replace("line 631", "line " + "9" * 5000) for line in SHM_TIMEOUT_TRACEBACK]
    cause = run_text("\n".join([*huge, *ENGINE_FAILED]) + "\n", entries).likely_cause
    assert cause is not None and cause.raised_in is None


def test_a_failed_assert_keeps_its_statement_and_says_where_it_was_raised(entries):
    # the Phi-4 excerpt above: the statement is still what is shown, the frame above it (line 5,
    # LlamaAttention's __init__) says where; an exception with a message has no frame looked for
    text = PHI4_TP4_ASSERT.read_text()
    without = {k: v for k, v in entries.items() if k != "tp-heads-not-divisible"}
    cause = run_text(text, without).likely_cause
    assert cause is not None and cause.line == 6
    assert str(cause.raised_in) == "vllm/model_executor/models/llama.py:122, in __init__"
    text = text.replace(") AssertionError\n", ") AssertionError: heads do not split\n")
    assert run_text(text, without).likely_cause.raised_in is None


def test_a_hinted_first_error_that_explains_the_consequence_is_named_before_it(entries):
    # GPUStack's SGLang at --tp-size 6 (gpustack#4769): `AssertionError: 16 is not divisible by 6`
    # (a hint of tp-heads-not-divisible: ensure_divisibility's message), then SGLang's `Received
    # sigquit from a child process` (engine-dead's signature). The hint alone is a guess, but it
    # is on the first error line, the search of the lines from there finds the same entry, and
    # that entry explains engine-dead: it is named first, just above the consequence
    text = fixture(
        "tp-heads-not-divisible/gpustack-issue4769-sglang-ensure-divisibility-16-by-6.log"
    )
    result = run_text(text, entries)
    first, second = result.matches[:2]
    assert (first.id, second.id) == ("tp-heads-not-divisible", "engine-dead")
    assert first.confidence > second.confidence and "tp-heads-not-divisible" in second.explained_by
    # no signature proves it: at most a warning, and the evidence is the hinted line
    assert first.severity == "warning" and [e.line for e in first.evidence] == [4]
    assert result.likely_cause is not None and result.likely_cause.line == 4


def test_the_same_hint_without_the_consequence_is_at_most_a_maybe(entries):
    # the assertion line alone: a hint on a stated error whose words fit (hint_stated_floor),
    # no consequence to explain and no signature: named, never critical, nothing ranked above
    # a consequence
    text = fixture(
        "tp-heads-not-divisible/gpustack-issue4769-sglang-ensure-divisibility-16-by-6.log"
    )
    result = run_text(text.splitlines()[3] + "\n", entries)
    assert [m.id for m in result.matches] == ["tp-heads-not-divisible"]
    assert result.matches[0].severity == "warning" and result.likely_cause is None


def test_no_likely_cause_when_only_traceback_frames_come_before_the_consequence(entries):
    # EngineDeadError after two frame lines: a frame says where, not why; nothing is invented
    result = run_text(
        (CORPUS / "engine-dead/vllm-v1-serving-chat-lmcache.log").read_text(), entries
    )
    assert result.matches[0].id == "engine-dead"
    assert result.likely_cause is None


def test_a_servers_wrapper_line_above_the_traceback_is_no_likely_cause(entries):
    # uvicorn's `ERROR:    Exception in ASGI application` is the header of the very traceback
    # the consequence ends (round 7's vLLM#1380 paste, frames unindented as pasted; its bare
    # AssertionError replaced by the AsyncEngineDeadError line of a corpus excerpt): it was shown
    # as the likely cause, "fits ray-worker-lost"
    lines = (
        FIXTURES / "explain_fresh/round7/engine-dead/r7-vllm-1380-task-finished-unexpectedly.log"
    )
    dead = next(
        t
        for p in sorted((CORPUS / "engine-dead").glob("*.log"))
        for t in p.read_text().splitlines()
        if t.startswith("vllm.engine.async_llm_engine.AsyncEngineDeadError: Task finished")
    )
    text = "\n".join([*lines.read_text().splitlines()[:13], dead]) + "\n"
    result = run_text(text, entries)
    assert result.matches[0].id == "engine-dead"
    assert result.likely_cause is None
    # behind kubectl's --timestamps prefix too
    stamped = "".join(
        f"2024-05-01T10:00:{i:02d}.000000000Z {t}\n" for i, t in enumerate(text.splitlines())
    )
    assert run_text(stamped, entries).likely_cause is None
    # behind vLLM's process tag (every line of a 0.10+ API server's log)
    tagged = "".join(f"(APIServer pid=1) {t}\n" for t in text.splitlines())
    assert run_text(tagged, entries).likely_cause is None


def test_in_a_chain_of_exceptions_the_first_one_is_the_likely_cause_not_the_wrapper(entries):
    # the same paste with its own exception kept (vLLM#1380's bare AssertionError from `assert
    # output == other_output`) and the engine's death chained after it, as Python prints a
    # chain: the wrapper above the first traceback was shown as the likely cause
    lines = (
        (FIXTURES / "explain_fresh/round7/engine-dead/r7-vllm-1380-task-finished-unexpectedly.log")
        .read_text()
        .splitlines()
    )
    dead = next(
        t
        for p in sorted((CORPUS / "engine-dead").glob("*.log"))
        for t in p.read_text().splitlines()
        if t.startswith("vllm.engine.async_llm_engine.AsyncEngineDeadError: Task finished")
    )
    chain = "\n".join(
        [
            *lines[:14],
            "",
            "During handling of the above exception, another exception occurred:",
            "",
            "Traceback (most recent call last):",
            *lines[3:5],
            dead,
        ]
    )
    for text in (chain, "".join(f"(APIServer pid=1) {t}\n" for t in chain.splitlines())):
        cause = run_text(text + "\n", entries).likely_cause
        assert cause is not None and cause.line == 14 and cause.text.endswith("AssertionError")


def test_no_likely_cause_when_the_first_entry_is_a_root_cause(entries):
    # trust-remote-code is explained by no entry: its answer is already the cause
    text = fixture("trust-remote-code/worker-vllm-eoferror-custom-code-prompt-runpod-issue43.log")
    result = run_text(text, entries)
    assert result.matches[0].id == "trust-remote-code"
    assert result.likely_cause is None


def test_the_likely_cause_is_in_the_json_and_the_terminal_view(tmp_path):
    # the same kernel excerpt through the command: JSON carries it, the terminal says it
    log = tmp_path / "dmesg.log"
    log.write_text(fixture("illegal-memory-access/kernel-xid13-109-pt-main-thread-dmesg-ctime.log"))
    doc = json.loads(runner.invoke(app, ["explain", str(log), "--json"]).output)
    assert doc["likely_cause"]["consequence"] == "illegal-memory-access"
    assert doc["likely_cause"]["line"] == 1
    shown = runner.invoke(app, ["explain", str(log), "--no-color"]).output
    assert "Likely cause: the first error before illegal-memory-access" in shown


# --- cut and prose-wrapped pastes ----------------------------------------------------------


def test_a_code_span_inside_a_sentence_is_read_as_its_own_line():
    # a question that quotes the error inline, as forum posts do
    line = "when I start it I get ```ValueError: Total number of attention heads (28) must be divisible by tensor parallel size (8)``` any idea?"
    assert code_pieces(line) == [
        "when I start it I get",
        "ValueError: Total number of attention heads (28) must be divisible by tensor parallel size (8)",
        "any idea?",
    ]
    # a fence's language tag is no line of the log
    assert code_pieces("```bash") == [""]


def test_an_error_quoted_in_a_sentence_is_explained_like_the_bare_line(entries):
    # the real AdaptThink line, wrapped in prose with a Markdown fence on one line
    line = fixture("tp-heads-not-divisible/adaptthink-issue1-28-heads-tp8.log").strip()
    result = run_text(f"Hi, running vllm I get ```{line}``` what does it mean?", entries)
    assert result.matches and result.matches[0].id == "tp-heads-not-divisible"


@pytest.mark.parametrize(
    "prompt",
    [
        "$ ", "# ", "root@gpu-node-3:/var/log# ", "(venv) sre@bastion:~/incident$ sudo ", "  % ",
        "[root@gpu01 ~]# ", "[ec2-user@ip-10-0-1-5 ~]$ ", "bob@mac ~ % ", "sh-4.2$ ", "gpu01# ",
        "➜  ~ ", "❯ ", "PS C:\\> ", "C:\\Users\\bob>", "[10:23:45] bob@host:~$ ",
        "user@host ~/work (main) $ ", "> ",
    ],
)  # fmt: skip
def test_a_command_typed_at_a_shell_prompt_is_not_evidence(entries, prompt):
    # what was searched for is not what was found: the grep line above the real Ollama OOM
    # (its own line, the one evidence) and, alone, no entry at all
    found = fixture("cuda-oom-runtime/ollama-runner-aborted-cudamalloc-logfmt-issue5113.log")
    typed = f'{prompt}grep -n "cudaMalloc failed: out of memory" /var/log/ollama.log'
    result = run_text(f"{typed}\n{found}", entries)
    assert result.matches[0].id == "cuda-oom-runtime"
    assert [e.line for e in result.matches[0].evidence] == [2]
    assert run_text(typed, entries).matches == []


def test_a_prompt_without_a_command_that_reads_or_runs_is_still_read():
    # a `#` comment or a `$` in a message is not a prompt with a typed command
    from llmdoctor.wiki.request_log import not_server_output

    assert not not_server_output("# CUDA out of memory. Tried to allocate 2.00 GiB")
    assert not not_server_output("cost $ 12: CUDA out of memory")
    assert not not_server_output("$ RuntimeError: CUDA error: an illegal memory access")
    assert not not_server_output("> torch.OutOfMemoryError: CUDA out of memory.")  # a quote
    # a Markdown quote of docker's error (the corpus's WSL mount error): "docker" is no command
    assert not not_server_output(">docker: Error response from daemon: OCI runtime create failed")
    assert not_server_output("$ kubectl logs vllm-0 | grep 'CUDA out of memory'")


def test_kubectl_describe_event_rows_are_followed_by_their_message():
    # the AKS describe output: each Events row also yields its Message column alone
    text = fixture("k8s-gpu-unschedulable/describe-pod-vllm-pending-insufficient-gpu-aks.txt")
    lines = [t for _, t in clean_lines(text)]
    assert any(
        t.startswith("0/2 nodes are available: 2 Insufficient nvidia.com/gpu") for t in lines
    )
    # a row outside an Events table (or the header itself) yields nothing more
    assert event_message("  Type     Reason   Age   From   Message") is None


def test_a_json_error_body_is_followed_by_its_message_unescaped():
    # vLLM's 400 body as a Python dict inside the client's error string (vllm #20409)
    text = fixture("context-length-exceeded/client-400-flat-error-body-vllm-issue20409.log")
    messages = [m for line in text.splitlines() for m in body_messages(line)]
    assert messages == [
        "This model's maximum context length is 16384 tokens. However, you requested 19591 "
        "tokens (9591 in the messages, 10000 in the completion). Please reduce the length of the "
        "messages or completion. None"
    ]
    # a JSON body with an escaped newline gives one line per line of its message
    assert body_messages('{"error": {"message": "a\\nb", "type": "x"}}') == ["a", "b"]


def client_400_line() -> str:
    """The real 400 line of a client whose prompt was over the context (vLLM issue 20409)."""
    text = fixture("context-length-exceeded/client-400-flat-error-body-vllm-issue20409.log")
    return text.splitlines()[1]


@pytest.mark.parametrize(
    "body",
    [
        # a client's error string around vLLM's 400 body as a Python dict
        "Error code: 400 - {'object': 'error', 'message': \"This model's maximum context length is "
        "4096 tokens. However, you requested 5000 tokens (4000 in the messages, 1000 in the "
        "completion). Please reduce the length of the messages or completion.\", 'code': 400}",
        # a JSON body whose message is split by an escaped newline
        '{"error":{"message":"CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total '
        'capacity of 79.15 GiB\\nof which 1.2 GiB is free.","code":500}}',
    ],
)
def test_a_one_line_error_body_counts_as_one_matching_line(entries, body):
    # the line and the message read out of it are one line of the input
    result = explain(TextSource.from_text("paste", body + "\n"), entries)
    assert result.matches and result.matches[0].count == 1
    assert result.matched_lines == 1


def test_the_same_error_on_two_input_lines_still_counts_two(entries):
    # the correction is for one line read twice, not for a repeated error
    body = client_400_line()
    result = explain(TextSource.from_text("paste", f"{body}\n{body}\n"), entries)
    assert result.matches[0].count == 2 and result.matched_lines == 2


def test_a_last_word_cut_by_the_paste_does_not_count_against_the_right_entry(entries):
    # the real 400 line, cut in the middle of "completion" with no newline after it: the
    # fragment "compl" is dropped, whole words are kept
    line = client_400_line()
    cut = line[: line.index("10000 in the completion") + len("10000 in the compl")]
    reading, _ = read_input(TextSource.from_text("paste", cut), entries)
    assert reading.text is not None and reading.text.endswith("10000 in the")
    result = run_text(cut, entries)
    assert result.matches and result.matches[0].id == "context-length-exceeded"


def test_a_whole_last_word_without_a_newline_is_kept(entries):
    # "completion" is a word the wiki knows: a paste that ends on it is not cut
    line = client_400_line()
    whole = line[: line.index("10000 in the completion") + len("10000 in the completion")]
    reading, _ = read_input(TextSource.from_text("paste", whole), entries)
    assert reading.text is not None and reading.text.endswith("in the completion")


# --- a log that is one repeated error --------------------------------------------------------


def oom_line() -> str:
    """The real PyTorch OOM line of a fixture (vLLM issue 13152)."""
    text = fixture("cuda-oom-runtime/vllm-v0-async-engine-oom-under-benchmark-load-issue13152.log")
    return next(line for line in text.splitlines() if "CUDA out of memory" in line)


def test_a_repeated_error_is_counted_on_every_line_and_keeps_its_first_and_last_lines(entries):
    # the real PyTorch OOM line of a fixture, repeated 3,000 times: every line counts, the
    # evidence is the first three and the last two (not 3,000 pieces of it)
    line = oom_line()
    result = run_text("\n".join([line] * 3000) + "\n", entries)
    top = result.matches[0]
    assert top.id == "cuda-oom-runtime"
    assert top.count == 3000 and result.matched_lines == 3000
    assert [e.line for e in top.evidence] == [1, 2, 3, 2999, 3000]


def test_an_unclosed_error_body_with_many_backslashes_is_read_in_linear_time():
    # hostile input: a message string that never closes, full of escapes; each character is
    # consumed one way only, so this takes milliseconds, not the age of the universe
    import time

    line = "{'message': '" + "\\\\x" * 50_000 + " and no closing quote"
    started = time.perf_counter()
    assert body_messages(line) == []
    assert time.perf_counter() - started < 2.0


def test_a_warning_that_mentions_a_failure_is_not_the_likely_cause():
    # a final new-user pass: vLLM's start-up "WARNING … Found ulimit of 20000 and failed to
    # automatically increase" was shown as the likely cause of a KV cache too small to start
    from pathlib import Path

    from typer.testing import CliRunner

    from llmdoctor.cli import app

    log = (
        Path(__file__).parent
        / "fixtures"
        / "real-vllm-0.32"
        / "startup-kv-too-small"
        / "server.log"
    )
    result = CliRunner().invoke(app, ["explain", str(log), "--json"])
    doc = json.loads(result.stdout)
    assert doc["matches"][0]["id"] == "kv-cache-too-small-for-max-model-len"
    cause = doc.get("likely_cause")
    assert cause is None or "ulimit" not in cause["text"]


def test_a_guess_that_rounds_to_zero_is_not_shown_as_too_weak_to_name():
    # a final new-user pass: "Too weak to name" listed entries at confidence 0.00
    from typer.testing import CliRunner

    from llmdoctor.cli import app

    text = "ERROR zzqx\n"  # no entry shares a word with it: every guess is 0.00
    result = CliRunner().invoke(app, ["explain", "-", "--no-color"], input=text)
    assert "(0.00)" not in result.stdout


def test_guesses_the_error_s_words_alone_back_say_so():
    # an error's words alone never name an entry (TEXT_ONLY): the closest guesses are listed, and
    # the reader is told that no signature or hint backs them (a lower-cased vLLM error, corpus)
    from typer.testing import CliRunner

    from llmdoctor.cli import app

    path = CORPUS / "trust-remote-code/lowercased-internvl2-vllm9531.log"
    out = CliRunner().invoke(app, ["explain", str(path), "--no-color"]).stdout
    assert (
        "Too weak to name (confidence < 0.3, by the error's words alone): trust-remote-code" in out
    )
    # a guess a hint backs is not said to rest on words alone
    hinted = "Traceback (most recent call last):\nKilled\n"
    out = CliRunner().invoke(app, ["explain", "-", "--no-color"], input=hinted).stdout
    assert "Too weak to name" in out and "words alone" not in out


def test_a_paste_folded_at_a_narrow_width_is_joined_back(entries):
    # a phone's or a narrow pane's copy folds at 40-59 columns: before, only folds of 60 or
    # more were joined (corpus folded at 45 columns: 647 of 865 first answers kept, now 835)
    text = fixture("cuda-oom-runtime/vllm-v1-tp-worker-oom-issue17835.log")
    clean = run_text(text, entries).matches[0]
    for width in (42, 45, 55):
        folded = [
            line[i : i + width] or ""
            for line in text.splitlines()
            for i in range(0, max(len(line), 1), width)
        ]
        matches = run_text("\n".join(folded) + "\n", entries).matches
        assert matches and matches[0].id == clean.id == "cuda-oom-runtime", width
        assert matches[0].confidence >= clean.confidence - 0.05, width


def test_one_line_folded_once_or_twice_is_read_joined_beside_its_pieces(entries):
    # the usual 3 a.m. paste: the one error line, copied from a narrow pane, cut through a word
    # or just before a space; too few lines of the fold's width to prove a wrap
    line = (
        "2025-09-04T01:00:01Z ERROR model_loader: failed to write shard: No space left on "
        "device (os error 28)"
    )  # Rust's io::Error as hf-hub prints it (hf-hub#9), with a log prefix
    for width in (40, 45, 50, 55, 60, 70, 80):
        folded = "\n".join(line[i : i + width] for i in range(0, len(line), width)) + "\n"
        result = run_text(folded, entries)
        assert [m.id for m in result.matches][:1] == ["disk-full"], width
        # the joined line where the fold split the signature, else the piece that holds it
        assert "(os error 28)" in result.matches[0].evidence[0].text, width
    # two lines of their own, the first the longest, are not read as one
    text = "ERROR Warming up the model weights and the cache: it failed!\nmodel load failed\n"
    assert all(
        e.text != text.replace("\n", "", 1).strip()
        for m in run_text(text, entries).matches
        for e in m.evidence
    )


def test_a_record_rich_logging_wrapped_in_its_message_column_is_read_joined(entries):
    # round 47's distilabel run (distilabel#1044): RichHandler wrapped vLLM's `The number of
    # required GPUs exceeds the total number of available GPUs in the placement group.` over
    # four lines of its message column, the source file at the right of the first; the second
    # record's time left out (the same second), padded with spaces
    real = ROUND47_DISTILABEL.read_text(encoding="utf-8")
    assert "The number of required\nGPUs exceeds" in real
    result = run_text(real, entries)
    assert [m.id for m in result.matches][:1] == ["ray-worker-lost"]
    assert [e.line for e in result.matches[0].evidence] == [1, 12]
    assert "required GPUs exceeds the total number of available GPUs in the placement group" in (
        result.matches[0].evidence[0].text
    )
    # the pieces without the record's first line (no level, no source file) stay pieces
    headless = "\n".join(real.splitlines()[3:6]) + "\n"
    assert "ray-worker-lost" not in [m.id for m in run_text(headless, entries).matches]
    # joined up to a blank line or the next record, and only where that heals a signature
    lines = [
        "[12/01/26 03:00:01] INFO     starting the pipeline, step   local.py:120",
        "one of three",
        "",
        "                    ERROR    load failed: the number   local.py:302",
        "of GPUs",
        "[12/01/26 03:00:02] INFO     next   local.py:130",
    ]
    everything = rich_logged(lines, lambda joined, pieces: True)
    assert everything == {
        1: "starting the pipeline, step one of three",
        4: "load failed: the number of GPUs",
    }
    assert rich_logged(lines, lambda joined, pieces: False) == {}
    # a line that would have fitted beside the record's message (the column is padded: `eval`
    # fits in it) is output of its own, not a piece: not joined, and 40 records padded to one
    # width are no fixed-width wrap either (the hostile pass's false lora-adapter-load-failure)
    records = [
        f"[10/21/24 06:52:{n:02}] INFO     Warmup request {n:02} done{' ' * 36}server.py:150"
        for n in range(40)
    ]
    glued = [
        *records,
        "[10/21/24 06:53:04] INFO     Loading lora adapter sql-lora                server.py:210",
        "eval batch 1/3: 512 ok, 0 failed",
        "eval batch 2/3: 512 ok, 0 failed",
        "[10/21/24 06:53:09] INFO     LoRA adapter sql-lora ready                  server.py:214",
    ]
    assert rich_logged(glued, lambda joined, pieces: True) == {}
    assert "lora-adapter-load-failure" not in [
        m.id for m in run_text("\n".join(glued) + "\n", entries).matches
    ]


def test_a_rich_log_padded_to_the_console_width_is_no_hard_wrap(entries):
    # Rich pads every line it writes to a file or a pod's log to the console's width: read as a
    # hard wrap, 2,000 records were glued into one line and an NCCL error at line 6,001 was
    # told at line 1 (the second hostile pass)
    record = (
        "[12/07/26 16:07:33] INFO     Loaded batch {n} of 4096 prompts into the queue, the"
        "       gen_rich.py:11"
    )
    width = len(record.format(n=0)) + 8
    lines = []
    for n in range(300):
        lines.append(record.format(n=n).ljust(width))
        lines.append("                             engine reports 12 running requests".ljust(width))
    lines.append("RuntimeError: NCCL error: unhandled system error".ljust(width))
    result = run_text("\n".join(lines) + "\n", entries)
    assert result.matches and result.matches[0].id == "nccl-failure"
    assert [e.line for e in result.matches[0].evidence] == [601]


def test_a_rich_looking_line_with_a_long_run_of_spaces_is_read_in_linear_time(entries):
    # the first version matched the record with one pattern whose lazy message backtracked
    # through every space: 160,000 spaces took 104 s
    for spaces in (20_000, 200_000):
        text = f"[10/21/24 06:53:04] ERROR    see a.py:1{' ' * spaces}x\n        INFO     col"
        started = time.monotonic()
        run_text(text + " " * spaces + "|\n", entries)
        assert time.monotonic() - started < 5, spaces


def test_a_sentence_wrapped_at_a_word_is_read_whole_where_that_names_the_cause(entries):
    # round 25's Ray excerpt, as a pull request pasted it: Ray's OutOfMemoryError wrapped at
    # words, no two lines of one width (a fold needs those), the signature across the break
    text = (ROUND8.parent / "round25" / "host-oom-killer").glob("*.log")
    real = next(text).read_text(encoding="utf-8")
    assert "the node\nrunning low on memory" in real
    result = run_text(real, entries)
    assert [m.id for m in result.matches][:1] == ["host-oom-killer"]
    assert "the node running low on memory" in result.matches[0].evidence[0].text
    # the same words on lines that do not go on in lower case are two lines, not one sentence
    apart = real.replace("\nrunning low", "\nRunning low")
    assert "host-oom-killer" not in [m.id for m in run_text(apart, entries).matches]
    # a status report is no wrapped log record, whatever its joined words would match
    report = "Weekly GPU report: 0 uncorrectable ECC error\nencountered this week; all healthy\n"
    assert run_text(report, entries).matches == []
    # and two unrelated lines are never glued where no signature comes of it
    prose = "the GPU was fine until the\nnode was drained for a kernel upgrade\n"
    assert all(
        "the node was drained" not in e.text
        for m in run_text(prose, entries).matches + run_text(prose, entries).below_threshold
        for e in m.evidence
    )


def test_one_error_repeated_with_changing_numbers_is_no_hard_wrap(entries):
    # a crash loop's OOM line with its numbers changing: many lines of one longest length, but
    # all of one shape; joined as a "wrap" they became 6,982 matches where grep counts 28,000
    line = oom_line()
    rng = random.Random(26)
    lines = [
        "".join(rng.choice("0123456789") if c.isdigit() else c for c in line) for _ in range(3000)
    ]
    assert len({len(x) for x in lines}) == 1 and len(set(lines)) > 100
    result = run_text("\n".join(lines) + "\n", entries)
    assert result.matches[0].id == "cuda-oom-runtime"
    assert result.matched_lines == 3000 and result.matches[0].count == 3000
    assert all(
        "\n" not in e.text and e.text.count("CUDA out of memory") == 1
        for e in result.matches[0].evidence
    )


def test_records_of_one_length_are_no_hard_wrap_of_the_records_after_them(entries):
    # V1 logs `Request <id> failed (engine dead).` for each request in flight, every id as long
    # as the next, each line followed by uvicorn's 500: read as a hard wrap, every quote was the
    # two records glued (`…(engine dead).INFO:     10.0.0.1:…`); the hostile pass of 2026-12-05
    rng = random.Random(24)
    lines = []
    for n in range(300):
        request = "".join(rng.choice("0123456789abcdef") for _ in range(32))
        lines.append(
            f"INFO 09-03 07:51:00 [async_llm.py:342] Request chatcmpl-{request} failed "
            "(engine dead)."
        )
        lines.append(
            f'INFO:     10.0.0.{n % 200}:{50000 + n} - "POST /v1/chat/completions '
            'HTTP/1.1" 500 Internal Server Error'
        )
    result = run_text("\n".join(lines) + "\n", entries)
    assert result.matches[0].id == "engine-dead" and result.matches[0].count == 300
    assert all(e.text.endswith("failed (engine dead).") for e in result.matches[0].evidence)
    # a real wrap still joins where its cut falls after a dot (`torch.` | `cuda.OutOfMemory…`)
    head = "ERROR 09-03 07:51:00 [model_runner.py:1] RuntimeError: torch."
    text = head + "cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB." * 3
    wrapped = [text[k : k + len(head)] for k in range(0, len(text), len(head))]
    result = run_text("\n".join(wrapped) + "\n", entries)
    assert result.matches[0].id == "cuda-oom-runtime"
    assert "torch.cuda.OutOfMemoryError" in result.matches[0].evidence[0].text


def test_vllm_source_quoting_the_engine_dead_line_is_no_engine_death(entries):
    # a grep of vLLM's source (`%s`) or its V0 f-string (`{request_id}`) names no death
    for line in (
        'vllm/v1/engine/async_llm.py:344:    logger.info("Request %s failed (engine dead).", rid)',
        'vllm/engine/async_llm_engine.py:1:    logger.info(f"Request {request_id} failed (engine dead)")',
    ):
        assert "engine-dead" not in [m.id for m in run_text(line + "\n", entries).matches], line


REAL_VLLM = Path(__file__).parent / "fixtures" / "real-vllm-0.32"


@pytest.mark.parametrize("body", ["over-context/error-400.json", "admission/error-503-busy.json"])
def test_a_one_line_error_body_is_quoted_once(entries, body):
    # vLLM 0.32's own 400 and 503 bodies: the line and the message read out of it are one
    # input line, so the evidence quotes line 1 once under "1 matching line", not twice
    source = TextSource.from_text(body, (REAL_VLLM / body).read_text(encoding="utf-8"))
    result = explain(source, entries)
    assert [e.line for e in result.matches[0].evidence] == [1]


def test_the_same_error_on_two_input_lines_is_still_quoted_twice(entries):
    # one quote per input line, not one per distinct text: a repeated error keeps its lines
    body = client_400_line()
    result = explain(TextSource.from_text("paste", f"{body}\n{body}\n"), entries)
    assert [e.line for e in result.matches[0].evidence] == [1, 2]


# --- a paste that stops inside a traceback -----------------------------------------------------

ROUND17 = FIXTURES / "explain_fresh" / "round17"
# vllm PR 29431's "before" run as its page shows it: the engine's traceback header is the last line
SCOUT_CUT = (
    ROUND17 / "kv-cache-too-small-for-max-model-len" / "r17-c4-llama4-scout-autofit-before.log"
)


def test_a_traceback_without_its_exception_is_cut_and_a_whole_one_is_not():
    from llmdoctor.triage.cut_traceback import ends_inside_traceback

    scout = SCOUT_CUT.read_text().rstrip().split("\n")
    assert ends_inside_traceback(scout) == 3
    # a docker compose prefix on every line, frames and source lines after the header
    compose = CORPUS / "_unknown" / "redis-connection-refused-compose-service-startup.log"
    lines = compose.read_text().rstrip().split("\n")
    header = ends_inside_traceback(lines)
    assert header is not None and "Traceback" in lines[header] and "|" in lines[header]
    # the same traceback with its exception after it, prefixed alike: whole
    assert (
        ends_inside_traceback(
            [
                *lines,
                lines[header].replace(
                    "Traceback (most recent call last):",
                    "ConnectionError: Error 111 connecting to redis",
                ),
            ]
        )
        is None
    )
    # a whole traceback, then the chained one cut: the last one decides
    oom = fixture("cuda-oom-runtime/vllm-v1-tp-worker-oom-issue17835.log").rstrip().split("\n")
    assert ends_inside_traceback(oom) is None
    assert ends_inside_traceback([*oom, "", "Traceback (most recent call last):"]) == len(oom) + 1
    assert ends_inside_traceback(["no traceback here"]) is None


def test_a_cut_traceback_is_found_under_prefixes_of_varying_width_and_other_writers():
    from llmdoctor.triage.cut_traceback import ends_inside_traceback

    # round 12's vLLM 0.6.2 log: worker 2144911's traceback, worker 2144910's lines between
    # its frames, the paste ends in 2144911's frames (a hostile pass: another process's line
    # after a cut traceback hid the cut)
    interleaved = (
        FIXTURES
        / "explain_fresh"
        / "round12"
        / "kv-cache-too-small-for-max-model-len"
        / "r12-c8-vllm062-131072-vs-86432.log"
    )
    lines = interleaved.read_text().rstrip().split("\n")
    header = ends_inside_traceback(lines)
    assert header is not None and "pid=2144911" in lines[header]
    # `kubectl logs --timestamps` drops a fraction's trailing zeros: the prefix's width varies
    scout = SCOUT_CUT.read_text().rstrip().split("\n")
    stamped = [f"2025-11-25T18:39:23.{'1' * (n % 4 + 1)}Z {line}" for n, line in enumerate(scout)]
    frame = '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 833'
    stamped += ["2025-11-25T18:39:23.12Z " + frame, "2025-11-25T18:39:23.9Z     raise e"]
    assert ends_inside_traceback(stamped) == 3
    # a logger that prefixes only a record's first line (`logger.error(traceback.format_exc())`)
    # and Ray's exception with its cause in parentheses: whole
    first_only = [
        "2024-05-01 10:00:00,123 ERROR Traceback (most recent call last):",
        '  File "serve.py", line 3, in <module>',
        "    main()",
        "ValueError: max_model_len too large",
    ]
    assert ends_inside_traceback(first_only) is None
    ray = (CORPUS / "ray-worker-lost" / "search-r1-grpo-main-task-actor-died.log").read_text()
    assert ends_inside_traceback(ray.rstrip().split("\n")) is None
    # V1's `EngineCore hit an exception: Traceback …` (round 12's vLLM log, its first line's
    # prefix as its other lines carry it): the message before the header is on that line only,
    # so the frames' prefix is the logger's; with its exception after the frames it is whole
    # (a hostile pass: it was read as cut, and an engine that died was "explained by nothing")
    core = FIXTURES / "explain_fresh/round12/_unknown/r12-c1-ray-241-v1-tp-pp-compiled-dag.log"
    lines = core.read_text().rstrip().split("\n")
    prefix = "ERROR 02-18 01:08:08 core.py:283] "
    lines[0] = prefix + lines[0]
    assert ends_inside_traceback(lines) == 0
    assert ends_inside_traceback([*lines, prefix + "RuntimeError: boom"]) is None
    # a header a megabyte into its line is read as one without a prefix, at once: its text is
    # not compiled into a pattern of that size (4.8 s before the bound)
    long_line = "ab1 " * 250_000 + "Traceback (most recent call last):"
    started = time.perf_counter()
    assert ends_inside_traceback([long_line, '  File "x.py", line 1']) == 0
    assert ends_inside_traceback([long_line, '  File "x.py", line 1', "ValueError: x"]) is None
    assert time.perf_counter() - started < 0.5


def test_explain_says_the_paste_stops_before_the_exception():
    result = runner.invoke(app, ["explain", str(SCOUT_CUT), "--no-color"])
    text = " ".join(result.stdout.split())
    assert "stops inside the traceback at line 4" in text and "Paste the lines after it" in text
    doc = json.loads(runner.invoke(app, ["explain", str(SCOUT_CUT), "--json"]).stdout)
    assert doc["cut_traceback"]["line"] == 4 and "Traceback" in doc["cut_traceback"]["text"]
    # a whole traceback says nothing of the kind
    whole = RUNBOOK_FIXTURES / "cuda-oom-runtime" / "vllm-v1-tp-worker-oom-issue17835.log"
    assert (
        json.loads(runner.invoke(app, ["explain", str(whole), "--json"]).stdout)["cut_traceback"]
        is None
    )
    assert "stops inside" not in runner.invoke(app, ["explain", str(whole)]).stdout


def test_a_cut_traceback_says_the_last_frame_it_shows():
    # round 42 (OpenBMB/MiniCPM-V#369): the paste ends in vLLM's `_initialize_kv_caches`, where
    # start-up sizes the KV cache from the memory left: where it stopped is said, and the
    # start-up-memory entry is the closest guess (a hint on that frame), never asserted
    cut = FIXTURES / (
        "explain_fresh/round42/vllm-startup-memory-insufficient/r42-mm-minicpmv25-a10-init-oom.log"
    )
    text = " ".join(runner.invoke(app, ["explain", str(cut), "--no-color"]).stdout.split())
    assert (
        "stops inside the traceback at line 4 (its last frame, line 17: _initialize_kv_caches "
        "in vllm/engine/llm_engine.py:364)" in text
    )
    doc = json.loads(runner.invoke(app, ["explain", str(cut), "--json"]).stdout)
    assert doc["cut_traceback"]["last_frame"]["line"] == 17
    assert doc["matches"] == [] and doc["below_threshold"][0]["id"] == (
        "vllm-startup-memory-insufficient"
    )


def test_a_frame_is_read_whatever_its_path_holds():
    from llmdoctor.commands.explain_cli import _package_path
    from llmdoctor.triage.explain import frame_parts

    # Python leaves a `"` in a path as it is; a Windows path; a huge line read in one pass
    assert frame_parts('  File "/tmp/we"ird/x.py", line 3, in f') == ('/tmp/we"ird/x.py', "3", "f")
    windows = r'  File "C:\Python311\Lib\site-packages\vllm\worker\model_runner.py", line 9, in run'
    path, line, function = frame_parts(windows)
    assert (_package_path(path), line, function) == ("vllm/worker/model_runner.py", "9", "run")
    assert frame_parts("x" * 1_000_000 + 'File "' * 50_000) is None
    assert frame_parts("    return fn(*args)") is None


def test_a_consequence_guessed_from_words_stays_a_guess_when_the_cause_was_cut(entries):
    # `EngineCore failed to start.` and the traceback's header, nothing after: engine-dead was
    # named at 0.32 from those words alone (round 17, measured fresh: confidently wrong); the
    # exception that would say why is what the paste lost
    text = SCOUT_CUT.read_text()
    result = run_text(text, entries)
    assert result.matches == [] and result.cut_traceback is not None
    assert result.below_threshold[0].id == "engine-dead"
    # the same paste with the exception vLLM 0.32 raised there (our real start-up drill's line,
    # tests/fixtures/real-vllm-0.32/startup-kv-too-small/server.log:60) names the cause
    real = FIXTURES / "real-vllm-0.32" / "startup-kv-too-small" / "server.log"
    error = real.read_text().splitlines()[59].split("] ", 1)[1]
    prefix = text.splitlines()[-1].split("Traceback")[0]  # the engine's own prefix
    whole = run_text(text.rstrip("\n") + "\n" + prefix + error + "\n", entries)
    assert whole.cut_traceback is None
    assert whole.matches[0].id == "kv-cache-too-small-for-max-model-len"


# --- a process killed as it loaded ---------------------------------------------------------------

FRESH = FIXTURES / "explain_fresh"
KILLED_WHILE_LOADING = [
    # the shell's `Killed` after `Loading model ...` (text-generation-webui on WSL2, round 27),
    # after `Creating WanModel from weights/…` (round 22), after `-- loading …/params/` with the
    # shell's prompt pasted below it (MLC on a Jetson, round 7), and glued to tqdm's
    # `Loading checkpoint shards: 50%|…` bar (round 23, and the corpus's text-generation-webui)
    FRESH / "round27" / "host-oom-killer" / "r27-ops-textgen-wsl-llama30b-killed.log",
    FRESH / "round22" / "host-oom-killer" / "r22-diffusion-infinitetalk-wanmodel-killed-wsl.log",
    FRESH / "round7" / "host-oom-killer" / "r7-mlc-llm-70b-q4-jetson-killed-swap.log",
    FRESH / "round23" / "host-oom-killer" / "r23-tune-chatglm6b-webdemo-shards-killed.log",
    CORPUS / "host-oom-killer" / "textgen-loading-checkpoint-shards-killed.log",
]


@pytest.mark.parametrize("path", KILLED_WHILE_LOADING, ids=lambda p: p.stem)
def test_a_sigkill_right_after_loading_names_the_oom_killer_as_a_warning(entries, path):
    result = run_text(path.read_text(encoding="utf-8"), entries)
    first = result.matches[0] if result.matches else None
    assert first is not None and first.id == "host-oom-killer", result.below_threshold[:2]
    assert first.severity == "warning" and first.killed_loading is not None


@pytest.mark.parametrize(
    "path",
    [
        # `Killed` after an AssertionError's traceback (SGLang's warm-up got a 502 from a proxy)
        FRESH / "round27" / "_unknown" / "r27-eng-sglang-warmup-502-proxy.log",
        # `Killed` after `[INFO] CPU device is used.`: no line of loading before it
        FRESH / "round10" / "host-oom-killer" / "r10-c6-itrex-llm-cpu-load-4bit-killed.log",
    ],
    ids=lambda p: p.stem,
)
def test_a_sigkill_after_anything_else_stays_a_guess(entries, path):
    result = run_text(path.read_text(encoding="utf-8"), entries)
    assert all(m.killed_loading is None for m in result.matches)
    assert "host-oom-killer" not in [m.id for m in result.matches]


def test_the_reader_sees_why_a_sigkill_while_loading_is_named(tmp_path):
    out = runner.invoke(app, ["explain", str(KILLED_WHILE_LOADING[0])])
    assert "killed as it loaded: a SIGKILL on line 3, right after line 2's loading" in out.output
    data = json.loads(
        runner.invoke(app, ["explain", str(KILLED_WHILE_LOADING[0]), "--json"]).output
    )
    assert data["matches"][0]["killed_loading"] == {"line": 2, "text": "Loading model ..."}


# --- round 27's hostile pass -----------------------------------------------------------------------

ROUND27 = FRESH / "round27"


def test_rays_disk_threshold_with_room_left_is_no_disk_full(entries):
    # the raylet says `is over 95% full` from 95 % on, with 42 GB left (lmdeploy#3457): no
    # failure; with `available space: 0` (vllm#1953, every request then 500) the disk is full
    roomy = (ROUND27 / "disk-full" / "r27-ops-lmdeploy-raylet-tmp-ray-95pct-full.log").read_text()
    assert "disk-full" not in [m.id for m in run_text(roomy, entries).matches]
    full = fixture("disk-full/ray-session-tmp-full-singularity-vllm-issue1953.log")
    first = run_text(full, entries).matches[0]
    assert first.id == "disk-full" and first.severity == "critical"


def test_the_toolkit_installers_retry_that_recovered_is_no_failure(entries):
    # nvidia-ctk-installer retries its SIGHUP to containerd six times (`Error signaling
    # containerd, attempt 1/6: …`) and says `Successfully signaled containerd` when one works:
    # only its giving up (`unable to restart containerd: … no such file or directory`) fails
    retry, gave_up = fixture("nvidia-container-toolkit/wordings-from-source.log").splitlines()[4:6]
    recovered = "\n".join(
        [retry, 'time="2025-01-10T09:12:49Z" level=info msg="Successfully signaled containerd"']
    )
    assert run_text(recovered, entries).matches == []
    first = run_text("\n".join([retry, gave_up]), entries).matches[0]
    assert first.id == "nvidia-container-toolkit" and first.severity == "critical"


def test_a_signatures_lines_are_quoted_before_a_hints(entries):
    # NCCL's `NCCL INFO …cc:N -> 2` trace lines (a hint) come after the WARN that a signature
    # matched, whatever their order in the log
    result = run_text(
        fixture("nccl-failure/nccl-2.5.6-ib-ibv-modify-qp-failed-invalid-argument-issue302.log"),
        entries,
    )
    first = result.matches[0]
    assert first.id == "nccl-failure" and first.hint_lines > 0
    assert "NCCL WARN Call to ibv_modify_qp failed" in first.evidence[0].text
    assert all("-> 2" in e.text for e in first.evidence[1:])


# --- rounds 28 and 29 ------------------------------------------------------------------------------


def test_other_processes_holding_a_cuda_context_each_are_no_memory_taken(entries):
    # PyTorch's OOM names the other tensor-parallel ranks' CUDA contexts (413 MiB each on an
    # 80 GB GPU, this process holding 77.52 GiB: LMDeploy's Mixtral benchmark, round 29): the
    # GPU was short, nobody else took it
    text = (
        FRESH / "round29" / "cuda-oom-runtime" / "r29-plat-lmdeploy-mixtral-bench-oom.log"
    ).read_text()
    assert run_text(text, entries).matches[0].id == "cuda-oom-runtime"
    held = text.replace("Process 37200 has 413.00 MiB", "Process 37200 has 41.30 GiB", 1)
    assert run_text(held, entries).matches[0].id == "gpu-memory-taken-by-other-process"


def test_a_tokenizer_class_of_transformers_itself_is_an_old_transformers(entries):
    # `Qwen2Tokenizer` ships with transformers 4.37 (rounds 8 and 28): named by a signature, no
    # remote code to trust; a class only a repository's own code defines (`QWenTokenizer`,
    # round 31's Baichuan and ChatGLM) is its code not trusted. Even where the arguments show
    # the flag given: three reports of the corpus and rounds 12 and 28 show it then did not
    # reach the code that loaded the class (a wrapper, a second loader), so it is not held back
    builtin = (
        "ValueError: Tokenizer class Qwen2Tokenizer does not exist or is not currently imported.\n"
    )
    first = run_text(builtin, entries).matches[0]
    assert first.id == "tokenizer-problem" and first.how == "signature"
    custom = (
        "ValueError: Tokenizer class QWenTokenizer does not exist or is not currently imported.\n"
    )
    first = run_text(custom, entries).matches[0]
    assert first.id == "trust-remote-code" and first.how == "signature"


def test_a_container_oom_that_lists_its_own_process_is_no_memory_taken(entries):
    # inside a container PyTorch cannot tell its own pid among the host's: it lists itself
    # (77.48 GiB here, what it allocated and reserved) with no `this process has`, and another
    # rank's 584 MiB CUDA context (round 29's hostile pass)
    line = (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.96 GiB. GPU 0 has a total "
        "capacity of 79.19 GiB of which 1.12 GiB is free. Process 2553631 has 77.48 GiB memory in "
        "use. Process 2553632 has 584.00 MiB memory in use. Of the allocated memory 75.10 GiB is "
        "allocated by PyTorch, and 1.02 GiB is reserved by PyTorch but unallocated.\n"
    )
    assert run_text(line, entries).matches[0].id == "cuda-oom-runtime"
    # the same message where this process had allocated nothing: the 77.48 GiB is another's
    taken = line.replace("75.10 GiB is allocated", "0 bytes is allocated").replace(
        "1.02 GiB is", "0 bytes is"
    )
    assert run_text(taken, entries).matches[0].id == "gpu-memory-taken-by-other-process"


def test_an_oom_message_wrapped_by_hand_is_read_whole(entries):
    # round 28: a reporter broke PyTorch's message over five lines; its 1.25 GiB reserved but
    # unallocated is under 2 % of the GPU, so the GPU was short, not fragmented
    text = (
        FRESH
        / "round28"
        / "cuda-oom-runtime"
        / "r28-mem-dsv4-flash-a800-long-prefill-activation-oom.log"
    ).read_text()
    assert [m.id for m in run_text(text, entries).matches] == ["cuda-oom-runtime"]


@pytest.mark.parametrize(
    "text, entry",
    [
        # docker compose v2 builds a service whose image it could not pull: a warning, no failure
        (
            " ! api Warning pull access denied for llm-gateway, repository does not exist or may "
            "require 'docker login': denied: requested access to the resource is denied\n",
            None,
        ),
        (
            " ✘ api Error pull access denied for llm-gateway, repository does not exist or may "
            "require 'docker login': denied: requested access to the resource is denied\n",
            "image-pull-slow",
        ),
        # Cloudflare's error page in a referer is no error page
        (
            '203.0.113.9 - - [06/Dec/2026:10:00:00 +0000] "GET /v1/models HTTP/1.1" 200 512 '
            '"https://www.cloudflare.com/5xx-error-landing?utm_source=errorcode_524" "curl/8.5"\n',
            None,
        ),
        # an Ollama that has no /api/embed answers Gin's `404 page not found`, no missing model
        (
            "requests.exceptions.HTTPError: 404 Client Error: Not Found for url: "
            "http://localhost:11434/api/embed\n",
            None,
        ),
        (
            "requests.exceptions.HTTPError: 404 Client Error: Not Found for url: "
            "http://localhost:11434/api/chat\n",
            "model-name-not-found",
        ),
        # a server that serves with a slow tokenizer: slower, not failed
        (
            "(APIServer pid=1) WARNING 12-06 10:00:01 [tokenizer.py:281] Using a slow tokenizer. "
            "This might cause a significant slowdown. Consider using a fast tokenizer instead.\n"
            '(APIServer pid=1) INFO:     10.0.0.7:51234 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n',
            None,
        ),
    ],
    ids=[
        "compose-warning",
        "compose-error",
        "cloudflare-referer",
        "ollama-embed",
        "ollama-chat",
        "slow-tokenizer",
    ],
)
def test_round29s_hostile_pass(entries, text, entry):
    named = [m.id for m in run_text(text, entries).matches]
    assert named[:1] == ([entry] if entry else []), named


def test_a_tgi_oom_after_its_router_connected_is_no_start_up(entries):
    # TGI's router said `Connected` and served; a later start of another configuration failed
    # within 50 lines: the OOM of the server that served stays a run-time OOM
    text = (
        "2025-12-06T10:00:09.000000Z  INFO shard-manager: text_generation_launcher: Starting shard rank=0\n"
        "2025-12-06T10:00:41.000000Z  INFO text_generation_router: router/src/server.rs:1868: Connected\n"
        "2025-12-06T10:07:13.000000Z ERROR batch{batch_size=64}:decode: text_generation_router_v3::client: "
        "backends/v3/src/client/mod.rs:54: Server error: CUDA out of memory. Tried to allocate 2.00 GiB\n"
        "2025-12-06T10:30:09.000000Z  INFO shard-manager: text_generation_launcher: Starting shard rank=0\n"
        "2025-12-06T10:30:21.000000Z ERROR text_generation_launcher: Shard 0 failed to start\n"
        "Error: ShardCannotStart\n"
    )
    assert run_text(text, entries).matches[0].id == "cuda-oom-runtime"


# a tensor-parallel rank lost; the other ranks' NCCL calls then fail or wait until the watchdog:
# the loss leads, nccl-failure is its consequence (the hostile passes of rounds 31 and 33:
# nccl-failure led, its fix NCCL_DEBUG and /dev/shm)
RANK_LOST_THEN_NCCL = {
    # the OOM killer ends one worker (`Attempt to use communicator…`, `remote process exited`)
    "host-oom-killer": (
        "[Mon Jul 21 10:40:01 2026] Out of memory: Killed process 312 (VLLM::Worker_TP) "
        "total-vm:120234556kB, anon-rss:98234560kB, file-rss:0kB, shmem-rss:1024kB, UID:0 "
        "pgtables:223456kB oom_score_adj:0\n"
        "(VllmWorker TP0 pid=311) node-3:311:411 [0] init.cc:430 NCCL WARN Attempt to use "
        "communicator before the previous operation returned ncclSuccess\n"
        "(VllmWorker TP0 pid=311) ERROR 07-21 10:40:05 [multiproc_executor.py:540] RuntimeError: "
        "NCCL error: remote process exited or there was a network error, NCCL version 2.21.5\n"
    ),
    # one rank raises CUDA OOM; rank 0 waits in its all-reduce until the watchdog, 600 s on
    "cuda-oom-runtime": (
        "(VllmWorker rank=1 pid=317) ERROR 05-14 03:00:02 [multiproc_executor.py:527] "
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB. GPU 1 has a "
        "total capacity of 79.19 GiB of which 1.02 GiB is free.\n"
        "(VllmWorker rank=0 pid=316) [rank0]:[E514 03:10:02.612000 316 ProcessGroupNCCL.cpp:632] "
        "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=4821, "
        "OpType=ALLREDUCE, NumelIn=8192, NumelOut=8192, Timeout(ms)=600000) ran for 600034 "
        "milliseconds before timing out.\n"
    ),
}


@pytest.mark.parametrize("cause", sorted(RANK_LOST_THEN_NCCL))
def test_a_rank_lost_explains_the_nccl_errors_of_the_ranks_left(cause, entries):
    matches = run_text(RANK_LOST_THEN_NCCL[cause], entries).matches
    assert matches[0].id == cause, [m.id for m in matches]
    nccl = next(m for m in matches if m.id == "nccl-failure")
    assert nccl.explained_by == [cause]


def test_an_xid_on_another_gpu_explains_nothing_of_this_one(entries):
    # an MMU fault's Xid 13 on GPU cb:00 and an ECC Xid 48 on GPU 8a:00 (real lines of two
    # reports): xid-ecc-memory explains illegal-memory-access only on the same GPU (the third
    # hostile pass: "explained by" an ECC error of another GPU)
    paste = (
        "[Fri Aug 30 11:43:09 2024] NVRM: Xid (PCI:0000:cb:00): 13, pid='<unknown>', "
        "name=<unknown>, Graphics SM Warp Exception on (GPC 7, TPC 7, SM 0): Illegal Instruction "
        "Parameter\n"
        "[Mon Oct 29 12:07:39 2018] NVRM: Xid (PCI:0000:8a:00): 48, An uncorrectable double bit "
        "error (DBE) has been detected on GPU in the framebuffer at partition 4, subpartition 1.\n"
    )
    matches = {m.id: m for m in run_text(paste, entries).matches}
    assert {"xid-ecc-memory", "illegal-memory-access"} <= set(matches)
    assert matches["illegal-memory-access"].explained_by == []


def test_a_cause_written_well_after_its_effect_explains_nothing_of_it(entries):
    # vLLM's lines, one clock: the engine died at 10:30, an NCCL error came ten minutes later
    # (the times of two real lines set so): the NCCL error is no cause of that death; one
    # written before it is
    dead = "ERROR 07-21 10:30:00 [core.py:400] EngineCore encountered a fatal error.\n"
    nccl = (
        "(VllmWorker TP0 pid=311) ERROR 07-21 10:{} [multiproc_executor.py:540] RuntimeError: "
        "NCCL error: remote process exited or there was a network error, NCCL version 2.21.5\n"
    )
    after = {m.id: m for m in run_text(dead + nccl.format("40:05"), entries).matches}
    assert after["engine-dead"].explained_by == []
    before = {m.id: m for m in run_text(nccl.format("29:58") + dead, entries).matches}
    assert before["engine-dead"].explained_by == ["nccl-failure"]


@pytest.mark.parametrize(
    "text,form",
    [
        ("2025-12-06T10:00:09.000000Z  INFO shard-manager: text_generation_launcher: x", "iso-utc"),
        ("2023-07-01 16:41:05,669 - ERROR: Exception occurred during H2O LLM Studio run:", "iso"),
        ("[Fri Aug 30 11:43:09 2024] NVRM: Xid (PCI:0000:cb:00): 13, pid='<unknown>'", "ctime"),
        ("[rank0]:[E514 03:10:02.612000 316 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog", "glog"),
        ("ERROR 07-21 10:30:00 [core.py:400] EngineCore encountered a fatal error.", "vllm"),
        ("Nov 29 11:28:11 zeus kernel: NVRM: Xid (PCI:0000:c1:00): 31, pid=12890", "syslog"),
        ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB.", None),
    ],
)
def test_the_time_a_line_starts_with_is_read_in_its_own_form(text, form):
    from llmdoctor.triage.line_time import line_time

    found = line_time(text)
    assert (found[0] if found else None) == form


def test_a_time_that_says_its_zone_is_compared_in_utc():
    from llmdoctor.triage.line_time import line_time

    utc = line_time("2024-05-14T03:00:05.123Z ERROR x")
    assert utc == line_time("2024-05-14T11:00:05+08:00 ERROR x")
    assert line_time("2024-05-14 03:00:05 ERROR x")[0] != utc[0]  # no zone: never compared


def test_a_full_sglang_cache_with_nothing_queued_is_a_cache_in_use(entries):
    # SGLang's decode line of sglang#2746 (usage 1.00, `#queue-req: 0`) and of sglang#26248
    # (1.00 with 3 queued): only the second is requests waiting for KV (the rule vLLM's stats
    # line follows; round 35's hostile check)
    alone = (
        "[2025-01-06 02:58:11 TP0] Decode batch. #running-req: 2, #token: 307481, token usage: "
        "1.00, gen throughput (token/s): 10.92, #queue-req: 0\n"
    )
    queued = (
        "2026-05-24 03:51:44 TP0] Decode batch, #running-req: 4, #full token: 2642688, full token "
        "usage: 1.00, #swa token: 14592, swa token usage: 0.06, cuda graph: True, gen throughput "
        "(token/s): 429.34, #queue-req: 3\n"
    )
    assert "kv-cache-preemption" not in {m.id for m in run_text(alone, entries).matches}
    assert run_text(queued, entries).matches[0].id == "kv-cache-preemption"


def test_another_pod_serving_ends_nothing_of_the_pod_that_died(entries):
    # `kubectl logs --prefix` of two replicas (vLLM's lines): vllm-0 dies of a CUDA OOM and
    # stays down, vllm-1 starts and serves: vllm-0's outage has not ended (round 35's hostile
    # check: ENDED, exit 1, no page); when vllm-0 itself serves again, it has
    oom = (
        "[pod/vllm-0/vllm] ERROR 05-14 03:00:03 [core.py:780] torch.OutOfMemoryError: CUDA out of "
        "memory. Tried to allocate 3.91 GiB. GPU 0 has a total capacity of 79.19 GiB of which "
        "1.02 GiB is free.\n"
        "[pod/vllm-0/vllm] vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an "
        "issue. See stack trace (above) for the root cause.\n"
    )

    def serving(pod: str) -> str:
        return (
            f"[pod/{pod}/vllm] INFO 05-14 03:01:10 [api_server.py:1880] vLLM API server version "
            "0.10.1.1\n"
            f"[pod/{pod}/vllm] INFO 05-14 03:04:00 [loggers.py:118] Engine 000: Avg prompt "
            "throughput: 800.0 tokens/s, Avg generation throughput: 650.0 tokens/s, Running: 22 "
            "reqs, Waiting: 0 reqs, GPU KV cache usage: 31.0%, Prefix cache hit rate: 12.0%\n"
        )

    other = {m.id: m.shown_as for m in run_text(oom + serving("vllm-1"), entries).matches}
    assert other["cuda-oom-runtime"] == "critical"
    same = {m.id: m.shown_as for m in run_text(oom + serving("vllm-0"), entries).matches}
    assert same["cuda-oom-runtime"] == "ended"


def test_a_time_without_a_year_is_not_ordered_across_new_year():
    from llmdoctor.triage.line_time import written_after

    # vLLM's logger: an OOM at 12-31 23:59:50 before an engine death at 01-01 00:00:05 is not
    # "written after" it (read without a year, 12-31 looks later)
    oom = ["ERROR 12-31 23:59:50 [core.py:780] torch.OutOfMemoryError: CUDA out of memory."]
    dead = ["ERROR 01-01 00:00:05 [core.py:400] EngineCore encountered a fatal error."]
    assert not written_after(oom, dead, 60)
    later = ["ERROR 01-01 00:10:05 [core.py:780] torch.OutOfMemoryError: CUDA out of memory."]
    assert written_after(later, dead, 60)


def test_what_an_oom_told_as_a_start_up_explains_names_the_start_up(entries):
    # vLLM's lines: an engine death while serving, then a restart whose start ends in a CUDA
    # OOM; the OOM is told as vllm-startup-memory-insufficient, and the engine death names that
    # entry, not cuda-oom-runtime, which is shown nowhere (round 35's hostile check)
    paste = (
        "ERROR 05-14 03:00:10 [core.py:400] EngineCore encountered a fatal error.\n"
        "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack "
        "trace (above) for the root cause.\n"
        "INFO 05-14 03:09:10 [api_server.py:1880] vLLM API server version 0.10.1.1\n"
        "ERROR 05-14 03:10:00 [core.py:700] EngineCore failed to start.\n"
        "ERROR 05-14 03:10:00 [core.py:700] torch.OutOfMemoryError: CUDA out of memory. Tried to "
        "allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.02 GiB is free.\n"
    )
    matches = run_text(paste, entries).matches
    assert matches[0].id == "vllm-startup-memory-insufficient", [m.id for m in matches]
    shown = {m.id for m in matches}
    assert all(set(m.explained_by) <= shown for m in matches)


def test_a_running_container_is_no_error_line(entries):
    # the Kubernetes docs' `kubectl describe pod` of a healthy nginx pod: `State: Running` is
    # no error (it was listed as one); nothing is read as wrong
    path = CORPUS / "_healthy" / "r5b-k8s-docs-describe-pod-nginx-running-ready-events.log"
    result = runner.invoke(app, ["explain", str(path)])
    assert result.exit_code == 0, result.output
    assert "No line in it looks like an error" in result.output
    assert "State:" not in result.output


def test_nccl_teardown_after_a_stop_from_outside_is_no_failure_of_its_own(entries):
    # workers tearing their communicators down after vLLM was told to stop: the stop explains
    # the NCCL warnings, and a warning is the most it is (round 31's hostile pass: critical)
    paste = (
        "(APIServer pid=1) INFO 07-21 11:00:00 [launcher.py:99] [shutdown] API server: "
        "shutdown triggered\n"
        "(APIServer pid=1) INFO:     Shutting down\n"
        "(VllmWorker TP0 pid=311) node-3:311:411 [0] init.cc:430 NCCL WARN Attempt to use "
        "communicator before the previous operation returned ncclSuccess\n"
        "(APIServer pid=1) INFO:     Finished server process [1]\n"
    )
    result = run_text(paste, entries)
    ids = [m.id for m in result.matches]
    assert ids[0] == "server-stopped-by-signal", ids
    assert all(m.severity != "critical" for m in result.matches), result.matches


def test_a_value_rich_wrapped_inside_a_traceback_panel_is_read_whole(entries):
    # round 35's TGI 3.3.4 excerpt (text-generation-inference#3305): Rich's pretty traceback
    # wraps the locals' `<repr-error 'CUDA error: no kernel image is available for` /
    # `execution on the device` inside two panels of one width, the message cut there
    real = ROUND8.parent / "round35" / "no-kernel-image" / "r35-img-tgi-334-quadro-p2000.log"
    text = real.read_text(encoding="utf-8")
    assert "is available for        │ │\n│ │         execution on the device" in text
    result = run_text(text, entries)
    assert [m.id for m in result.matches][:1] == ["no-kernel-image"]
    evidence = result.matches[0].evidence[0]
    assert "no kernel image is available for execution on the device" in evidence.text
    assert "│" not in evidence.text  # the frames dropped, and no panel read as a fixed-width wrap
    # panels of one width are read line by line, not glued as a terminal's hard wrap: the
    # message on a line of its own keeps its line (it was joined to the panel's next lines)
    panel = "\n".join(
        f"│ {line:<90} │"
        for line in (
            "x = 1",
            "RuntimeError: CUDA error: no kernel image is available for execution on the device",
            "y = 2",
            "z = 3",
        )
    )
    matches = run_text(panel + "\n", entries).matches
    assert [m.id for m in matches][:1] == ["no-kernel-image"]
    assert [e.line for e in matches[0].evidence] == [2]


READY_AFTER_OOM = """Containers:
  vllm:
    Image:          vllm/vllm-openai:v0.9.1
    State:          Running
      Started:      Mon, 12 May 2025 10:03:12 +0000
    Last State:     Terminated
      Reason:       OOMKilled
      Exit Code:    137
      Started:      Mon, 12 May 2025 09:13:02 +0000
      Finished:     Mon, 12 May 2025 10:03:09 +0000
    Ready:          True
    Restart Count:  1
    Limits:
      memory:          64Gi
    Liveness:          http-get http://:8000/health delay=0s timeout=1s period=10s #success=1 #failure=3
    Readiness:         http-get http://:8000/health delay=0s timeout=1s period=10s #success=1 #failure=3
Events:
  Type    Reason   Age                From     Message
  ----    ------   ----               ----     -------
  Normal  Started  12m (x2 over 62m)  kubelet  Started container vllm
"""


def test_a_kill_in_a_ready_container_s_last_state_is_its_past(entries):
    # `kubectl describe pod`: Last State OOMKilled, then `Ready: True` with a readiness probe
    # set, and no line saying the pod fails now: the kill is the container's previous run
    # (ENDED, exit 1: a warning, no page); its Fix still stands (it may be killed again)
    result = run_text(READY_AFTER_OOM, entries)
    oom = result.matches[0]
    assert (oom.id, oom.shown_as, oom.ready_again.line) == ("k8s-oomkilled", "ended", 11)
    assert not result.critical and result.exit_code == 1
    assert oom.to_json()["ready_again"] == {
        "line": 11,
        "text": "Ready:          True",
        "container": "vllm",
    }
    out = runner.invoke(app, ["explain", "-", "--no-color"], input=READY_AFTER_OOM).stdout
    assert "ENDED  k8s-oomkilled" in out and "container vllm's last state" in out


@pytest.mark.parametrize(
    "now",
    [
        # not Ready; the kill as the current State
        ("Ready:          True", "Ready:          False"),
        ("Last State:     Terminated", "State:          Terminated"),
        # no readiness probe: Ready is only "the process runs", seconds into each crash-loop turn
        ("    Readiness:", "    Readines_:"),
        # restarted twice: killed again, not past it (diagnose's pod-restarts says the same)
        ("Restart Count:  1", "Restart Count:  2"),
        # a crash loop's BackOff, a liveness probe failing now (the hostile pass's cases)
        (
            "  Normal  Started  12m (x2 over 62m)  kubelet  Started container vllm",
            "  Warning  BackOff  30s (x12 over 25m)  kubelet  Back-off restarting failed container "
            "vllm in pod vllm-0",
        ),
        (
            "  Normal  Started  12m (x2 over 62m)  kubelet  Started container vllm",
            "  Warning  Unhealthy  10s (x9 over 3m)  kubelet  Liveness probe failed: Get "
            '"http://10.0.0.5:8000/health": context deadline exceeded',
        ),
    ],
)
def test_a_past_kill_stays_critical_where_the_pod_may_fail_now(now, entries):
    oom = run_text(READY_AFTER_OOM.replace(*now), entries).matches[0]
    assert (oom.id, oom.shown_as, oom.ready_again) == ("k8s-oomkilled", "critical", None)


POD_READY_AFTER_OOM = """apiVersion: v1
kind: Pod
metadata:
  name: vllm-7b-6d9f8c7b5-x2x9q
spec:
  containers:
  - name: vllm
    image: vllm/vllm-openai:v0.10.1
    resources:
      limits:
        memory: 32Gi
    readinessProbe:
      httpGet:
        path: /health
        port: 8000
status:
  phase: Running
  containerStatuses:
  - name: vllm
    ready: true
    restartCount: 1
    lastState:
      terminated:
        exitCode: 137
        reason: OOMKilled
        finishedAt: "2026-12-07T02:41:13Z"
    state:
      running:
        startedAt: "2026-12-07T02:41:20Z"
"""


def test_a_kill_in_a_pasted_pod_objects_last_state_is_its_past_as_in_describe(entries):
    # `kubectl get pod -o yaml` (or -o json) says what describe says: lastState OOMKilled,
    # ready: true with a readiness probe, restarted once: the kill is the previous run
    oom = run_text(POD_READY_AFTER_OOM, entries).matches[0]
    assert (oom.id, oom.shown_as, oom.ready_again.line) == ("k8s-oomkilled", "ended", 20)
    assert oom.ready_container == "vllm"
    import yaml

    as_json = json.dumps(yaml.safe_load(POD_READY_AFTER_OOM), indent=2)
    oom = run_text(as_json + "\n", entries).matches[0]
    assert (oom.id, oom.shown_as, oom.ready_container) == ("k8s-oomkilled", "ended", "vllm")
    assert oom.ready_again.text == '"ready": true,'
    # `kubectl get pods -o yaml`: a List, its pods under items
    listed = (
        "apiVersion: v1\nkind: List\nitems:\n- "
        + POD_READY_AFTER_OOM.replace("\n", "\n  ").rstrip()
        + "\n"
    )
    assert run_text(listed, entries).matches[0].shown_as == "ended"


@pytest.mark.parametrize(
    "now",
    [
        ("    ready: true", "    ready: false"),
        ("    restartCount: 1", "    restartCount: 2"),
        ("    readinessProbe:", "    readinessProb_:"),
        # the kill as the current state, nothing restarted
        ("    lastState:\n      terminated:", "    lastState: {}\n    stat_:\n      terminated:"),
        # another container not ready now, or the pod's Ready condition False (a hostile pass)
        (
            "  - name: vllm\n    ready: true",
            "  - name: proxy\n    ready: false\n    restartCount: 0\n  - name: vllm\n    ready: true",
        ),
        (
            "  phase: Running\n",
            '  phase: Running\n  conditions:\n  - type: Ready\n    status: "False"\n',
        ),
        # a count kubectl never writes (a superscript digit; a missing one) is no count
        ("    restartCount: 1", "    restartCount: \u00b2"),
        ("    restartCount: 1\n", ""),
        # a repeated key is read as YAML, JSON and Go read it: the last
        ("    restartCount: 1", "    restartCount: 1\n    restartCount: 9"),
        # another container crash-looping now
        (
            "  - name: vllm\n    ready: true",
            "  - name: proxy\n    ready: false\n    restartCount: 6\n    state:\n"
            "      waiting:\n        reason: CrashLoopBackOff\n  - name: vllm\n    ready: true",
        ),
    ],
)
def test_a_pasted_pod_objects_past_kill_stays_critical_where_it_may_fail_now(now, entries):
    assert now[0] in POD_READY_AFTER_OOM
    oom = run_text(POD_READY_AFTER_OOM.replace(*now), entries).matches[0]
    assert (oom.id, oom.shown_as, oom.ready_again) == ("k8s-oomkilled", "critical", None)


def test_a_pasted_pod_object_is_read_in_bounded_time_and_by_its_own_lines(entries):
    # a hostile pass: a List whose items an alias shares nine times a level was read once per
    # reference (exponential: a hang at 12 levels); now each node once
    pod = "\n".join("    " + line for line in POD_READY_AFTER_OOM.splitlines())
    levels = "".join(
        f"  p{n}: &p{n}\n    kind: List\n    items: [{', '.join([f'*p{n - 1}'] * 9)}]\n"
        for n in range(1, 13)
    )
    laughs = f"apiVersion: v1\nkind: List\nanch:\n  p0: &p0\n{pod}\n{levels}items: [*p12]\n"
    started = time.perf_counter()
    assert run_text(laughs, entries).matches[0].shown_as == "ended"
    assert time.perf_counter() - started < 5
    # PyYAML also breaks a line at a lone CR: the ready line is the paste's own line 20 still
    # (it pointed at later lines, and a container not ready read as ready)
    shifted = POD_READY_AFTER_OOM.replace(
        "metadata:\n", 'metadata:\n  annotations: {note: "a\r\r\r\r\r\r\r\rb"}\n'
    )
    oom = run_text(shifted, entries).matches[0]
    assert oom.shown_as == "ended" and oom.ready_again.text == "ready: true"
    # nested past what the parser takes: no pod read, the paste still explained
    deep = POD_READY_AFTER_OOM + "extra: " + "[" * 20_000 + "]" * 20_000 + "\n"
    assert run_text(deep, entries).matches[0].shown_as == "critical"


def test_a_describe_s_past_kill_stays_critical_while_another_container_is_not_ready(entries):
    other = READY_AFTER_OOM.replace(
        "  vllm:\n", "  proxy:\n    State:          Running\n    Ready:          False\n  vllm:\n"
    )
    assert run_text(other, entries).matches[0].shown_as == "critical"


def test_a_sidecar_s_past_kill_hides_no_crash_loop_of_another_container(entries):
    # the hostile pass: a sidecar OOMKilled once and Ready, the vllm container waiting in
    # CrashLoopBackOff: the sidecar's Ready line said "ENDED", exit 1, and hid the crash loop
    sidecar = READY_AFTER_OOM.replace("  vllm:\n", "  metrics-proxy:\n").replace(
        "Events:",
        "  vllm:\n    State:          Waiting\n      Reason:       CrashLoopBackOff\n"
        "    Ready:          False\n    Restart Count:  6\nEvents:",
    )
    result = run_text(sidecar, entries)
    assert result.critical and result.matches[0].ready_again is None
    # round 14's real describe (operator-sdk#3838) shows no readiness probe: critical
    path = (
        ROUND8.parent / "round14" / "k8s-oomkilled" / "r14-c2-operator-manager-oomkilled-90mi.log"
    )
    assert run_text(path.read_text(encoding="utf-8"), entries).matches[0].shown_as == "critical"


def test_a_describe_s_probe_settings_are_no_error_lines(entries):
    # `kubectl describe pod`'s probe lines state settings (timeout=1s, #failure=3): before, both
    # were listed as "the lines it read as errors" of a paste with nothing wrong in it
    settings = (
        "    Ready:          False\n"
        "    Liveness:       http-get http://:8000/health delay=0s timeout=1s period=10s "
        "#success=1 #failure=3\n"
        "    Readiness:      exec [cat /tmp/ready] delay=30s timeout=5s period=10s #success=1 "
        "#failure=3\n"
    )
    result = run_text(settings, entries)
    assert result.salient == [] and result.error_lines == 0
    # the probe that failed, in an Events row, is one
    failed = settings + (
        "  Warning  Unhealthy  2m (x40 over 8m)  kubelet  Readiness probe failed: Get "
        '"http://10.0.0.5:8000/health": context deadline exceeded (Client.Timeout exceeded '
        "while awaiting headers)\n"
    )
    assert run_text(failed, entries).matches[0].id == "pod-not-ready"


def test_a_pasted_event_is_one_error_line_in_json_too(entries):
    # an Events row is also read as its Message alone (for the search): one input line, one
    # error line, in `salient` and in the count (the terminal deduplicated, JSON listed both)
    text = (
        "Events:\n"
        "  Type     Reason     Age                 From     Message\n"
        "  ----     ------     ----                ----     -------\n"
        "  Warning  Failed     2m (x4 over 3m)     kubelet  Error: failed to create containerd "
        "task: something odd happened here\n"
        "  Warning  BackOff    1m (x10 over 3m)    kubelet  Back-off restarting failed container "
        "vllm in pod vllm-0\n"
    )
    result = run_text(text, entries)
    assert result.how == "none"
    assert [e["line"] for e in result.to_json()["salient"]] == [4, 5]
    assert result.error_lines == 2
    assert result.salient[0].text.startswith("  Warning  Failed")


def _rich_traceback(width: int, message: str, show_locals: bool) -> str:
    """A Rich pretty traceback as a terminal of `width` columns prints it (rich, typer's own)."""
    import io

    from rich.console import Console
    from rich.traceback import Traceback

    def load_model(error_message: str) -> None:
        model_name = "meta-llama/Llama-3.1-70B-Instruct"  # noqa: F841 (a local Rich shows)
        raise RuntimeError(error_message)

    try:
        load_model(message)
    except RuntimeError as exc:
        trace = Traceback.from_exception(type(exc), exc, exc.__traceback__, show_locals=show_locals)
    out = io.StringIO()
    Console(file=out, width=width, color_system=None, legacy_windows=False).print(trace)
    return out.getvalue()


@pytest.mark.parametrize("width", [50, 60, 80, 100, 140])
@pytest.mark.parametrize("show_locals", [True, False])
def test_a_rich_traceback_is_read_at_any_width(width, show_locals, entries):
    # the hostile pass: a panel's top and bottom edges share its width, and Rich wraps the
    # exception under it at that width too: read as a hard wrap, the whole traceback became one
    # line (garbage evidence) or the error was missed (widths 50 and 60)
    message = (
        "CUDA error: no kernel image is available for execution on the device\nCUDA kernel "
        "errors might be asynchronously reported at some other API call"
    )
    result = run_text(_rich_traceback(width, message, show_locals), entries)
    assert [m.id for m in result.matches][:1] == ["no-kernel-image"], width
    evidence = result.matches[0].evidence[0].text
    assert "no kernel image is available for execution on the device" in evidence
    assert evidence.count("│") <= 4  # one framed line at most, never a panel glued into one


def test_prose_rich_wraps_in_a_panel_that_is_no_traceback_is_not_joined(entries):
    # the hostile pass: a start-up banner's panel wrapping "maximum context length is" /
    # "131072 tokens" read as context-length-exceeded: only a traceback's panels are read joined
    banner = (
        "╭──────────────────────────── model-gateway ────────────────────────────╮\n"
        "│ Serving meta-llama/Llama-3.1-8B-Instruct. Its maximum context length is │\n"
        "│ 131072 tokens; this deployment caps it at 32768 via --max-model-len.  │\n"
        "│ Health: http://0.0.0.0:8000/health                                    │\n"
        "╰───────────────────────────────────────────────────────────────────────╯\n"
    )
    assert run_text(banner, entries).matches == []
    # the same lines as a traceback's locals panel are read joined
    locals_panel = banner.replace(" model-gateway ", " locals ───────")
    assert [m.id for m in run_text(locals_panel, entries).matches] == ["context-length-exceeded"]


def test_probe_settings_as_yaml_print_them_are_no_error_lines(entries):
    pod = (
        "    readinessProbe:\n      failureThreshold: 3\n      periodSeconds: 10\n"
        "      timeoutSeconds: 1\n"
        '    "livenessProbe": {\n      "failureThreshold": 3,\n      "timeoutSeconds": 1,\n'
    )
    result = run_text(pod, entries)
    assert result.salient == [] and result.error_lines == 0


@pytest.mark.parametrize(
    "prefix",
    [
        "2025-05-12T10:01:02.002468Z ",  # kubectl logs --timestamps
        "2025-05-12T10:01:02.000000002Z stderr F ",  # the node's CRI log file
        "(VllmWorker TP0 pid=2231) ",  # a vLLM worker's tag
        "vllm-0 vllm ",  # stern
    ],
)
def test_a_rich_traceback_behind_a_log_prefix_is_read(prefix, entries):
    # the hostile pass: the same traceback behind a prefix was missed (exit 0)
    message = (
        "CUDA error: no kernel image is available for execution on the device\nCUDA kernel "
        "errors might be asynchronously reported at some other API call"
    )
    text = "".join(prefix + line + "\n" for line in _rich_traceback(80, message, True).splitlines())
    result = run_text(text, entries)
    assert [m.id for m in result.matches][:1] == ["no-kernel-image"], prefix
    evidence = result.matches[0].evidence[0].text
    assert "no kernel image is available for execution on the device" in evidence
    assert evidence.count("│") <= 4 and evidence.count(prefix.strip()) <= 1


def test_a_traceback_logged_whole_as_one_message_gives_its_exception_as_likely_cause(entries):
    # SGLang logs `Scheduler hit an exception: Traceback (most recent call last):` and the frames
    # unprefixed below it (round 41's TKE guide excerpt): the exception that ends them is why
    # the scheduler died, and the wiki search's first entry for it (lora-adapter-load-failure, on
    # the words "only supports") is no cause to name: no hint of it fires on the line
    text = (
        FIXTURES / "explain_fresh/round41/_unknown/r41-zhblog-sglang-below-sm75.log"
    ).read_text()
    result = run_text(text, entries)
    assert result.matches[0].id == "engine-dead"
    likely = result.likely_cause
    assert likely is not None
    assert likely.text == "RuntimeError: SGLang only supports sm75 and above."
    assert likely.entry_id is None and not likely.named_first
    # a chained exception below the frames is no single exception: nothing is claimed
    chained = text.replace(
        "RuntimeError: SGLang",
        "During handling of the above exception, another exception occurred:\nRuntimeError: SGLang",
    )
    assert run_text(chained, entries).likely_cause is None


SGLANG_SM75 = FIXTURES / "explain_fresh/round41/_unknown/r41-zhblog-sglang-below-sm75.log"


def test_a_cut_traceback_logged_as_one_message_gives_no_likely_cause(entries):
    # the hostile pass: the frames stop without their exception and the server's next line was
    # taken for it ("the exception in the traceback" over a health check's line)
    lines = SGLANG_SM75.read_text().splitlines()
    cut = [
        *lines[:14],
        "[2025-02-12 02:56:49] ERROR: Health check failed for http://127.0.0.1:30000/health",
    ]
    result = run_text("\n".join(cut) + "\n", entries)
    assert result.likely_cause is None


def test_another_ranks_line_inside_the_traceback_is_passed_over(entries):
    # several ranks write to one stderr: a TP1 line between the frames and the exception
    lines = SGLANG_SM75.read_text().splitlines()
    other = "[2025-02-12 02:56:48 TP1] Failed to allocate memory for the KV cache on rank 1"
    mixed = [*lines[:14], other, *lines[14:]]
    likely = run_text("\n".join(mixed) + "\n", entries).likely_cause
    assert (
        likely is not None and likely.text == "RuntimeError: SGLang only supports sm75 and above."
    )


def test_behind_kubectl_timestamps_the_traceback_is_read_whole(entries):
    # `kubectl logs --timestamps`: a time that differs line by line before every line
    text = SGLANG_SM75.read_text()
    stamped = "".join(
        f"2025-02-12T02:56:48.{i:09d}Z {t}\n" for i, t in enumerate(text.splitlines())
    )
    result = run_text(stamped, entries)
    assert result.likely_cause is not None
    assert result.likely_cause.text.endswith("RuntimeError: SGLang only supports sm75 and above.")
    assert result.cut_traceback is None  # the exception is there: no "paste the rest" advice


def test_the_likely_cause_heading_does_not_depend_on_limit():
    # `--limit 1` hid the consequence and the heading said "the first error before" a line the
    # cause came after; the JSON says which it is
    for extra in ([], ["--limit", "1"]):
        out = runner.invoke(app, ["explain", str(SGLANG_SM75), "--no-color", *extra]).stdout
        assert "Likely cause: the exception in the traceback of engine-dead" in out
    data = json.loads(
        runner.invoke(app, ["explain", str(SGLANG_SM75), "--json", "--limit", "1"]).stdout
    )
    assert data["likely_cause"]["in_traceback"] is True


def test_tgis_download_wrapper_line_is_no_likely_cause(entries):
    # TGI's launcher logs `Download encountered an error:` over the download's traceback: the
    # header of that traceback, never its cause
    text = (
        "2025-02-12T02:56:40.000000Z  INFO download: text_generation_launcher: Starting check "
        "and download process for meta-llama/Llama-3.1-8B-Instruct\n"
        "2025-02-12T02:56:48.000000Z ERROR download: text_generation_launcher: Download "
        "encountered an error: \n"
        "Traceback (most recent call last):\n"
        '  File "/opt/conda/bin/text-generation-server", line 8, in <module>\n'
        "    sys.exit(app())\n"
        "RuntimeError: Data processing error: CAS service error : IO Error: No space left on "
        "device (os error 28)\n"
        "Error: DownloadError\n"
    )
    result = run_text(text, entries)
    assert result.matches[0].id == "disk-full"
    cause = result.likely_cause
    assert cause is None or "Download encountered an error" not in cause.text
