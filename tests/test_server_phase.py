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
from llmdoctor.triage.explain import explain
from llmdoctor.wiki.library import load_library
from llmdoctor.wiki.server_phase import (
    AFTER,
    MAX_SAID,
    PHASE_WORDS,
    SERVING_LINE,
    STARTING_LINE,
    during_startup,
    retold_at_startup,
    start_failed_after,
    startup_story,
)

ROOT = Path(__file__).resolve().parents[1]
CRASH_LOOP = ROOT / "examples" / "bundles" / "crashloop-cuda-oom" / "logs" / "vllm.previous.log"
FRESH = ROOT / "tests" / "fixtures" / "explain_fresh"
SERVING = (FRESH / "round11" / "_healthy" / "r11-c1-steady-77tps-generation.log").read_text()
ENTRIES = load_library().entries
STORY = "vllm-startup-memory-insufficient"


DRILLS = ROOT / "tests" / "fixtures" / "real-vllm-0.32"


def numbered(text: str) -> list[tuple[int, str]]:
    return list(enumerate(text.splitlines(), 1))


def calls_renamed(lines: list[tuple[int, str]], **renames: str) -> list[tuple[int, str]]:
    """The lines with each frame's `in old` call renamed `in new`, in the order given."""
    out = []
    for n, t in lines:
        for old, new in renames.items():
            t = t.replace(f"in {old}", f"in {new}")
        out.append((n, t))
    return out


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

    assert retold_at_startup(ENTRIES, {"cuda-oom-runtime": 10}, lines) == {}
    assert len(read) == 10 + AFTER + 1  # as far after it as its traceback may go, and one more


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


def test_every_phase_line_holds_a_word_the_reader_looks_for():
    # PHASE_WORDS lets most lines skip the regexes: a line the regexes match must hold one
    lines = [
        *CRASH_LOOP.read_text().splitlines(),
        *SERVING.splitlines(),
        *(ROOT / "tests/fixtures/real-vllm-0.32/healthy/server.log").read_text().splitlines(),
        *(ROOT / "tests/fixtures/real-vllm-0.32/saturation/server.log").read_text().splitlines(),
        "run : vllm serve Qwen/Qwen3-32B --port 8000",
        "$ python -m vllm.entrypoints.openai.api_server --model m",
    ]
    phase_lines = [t for t in lines if SERVING_LINE.search(t) or STARTING_LINE.search(t)]
    assert len(phase_lines) > 10
    assert all(any(w in t for w in PHASE_WORDS) for t in phase_lines)


HEALTHY = (ROOT / "tests/fixtures/real-vllm-0.32/healthy/server.log").read_text().splitlines()
# a frame of the V1 engine's serving step (vLLM issue 13673's traceback)
SERVING_STEP = (
    (
        ROOT
        / "tests/fixtures/runbooks/illegal-memory-access/vllm-v1-specdec-enginecore-issue13673.log"
    )
    .read_text()
    .splitlines()[0]
)


def _crash_loop() -> tuple[list[str], str]:
    lines = CRASH_LOOP.read_text().splitlines()
    at = oom_line(CRASH_LOOP.read_text())
    return lines[: at - 1], lines[at - 1]


def _at_startup(lines: list[str]) -> bool:
    at = next(n for n, t in numbered("\n".join(lines)) if "CUDA out of memory. Tried" in t)
    return during_startup(numbered("\n".join(lines)), at)


def test_the_last_start_before_the_line_decides():
    start, oom = _crash_loop()
    assert _at_startup([*start, oom])
    # served (a request answered on any route, the routes announced): a runtime OOM
    for served in (
        HEALTHY[90],  # "POST /v1/completions HTTP/1.1" 200
        HEALTHY[90].replace("/v1/completions", "/v1/embeddings"),
        next(t for t in HEALTHY if "Available routes are" in t),
    ):
        assert not _at_startup([*start, served, oom]), served
    # a server that served, then started again: this start's OOM
    assert _at_startup([*HEALTHY, *start, oom])


def test_a_traceback_through_the_serving_step_is_no_start_up():
    # a server whose logging shows no request (quiet access log): the frame says where it was
    start, oom = _crash_loop()
    assert "in execute_model" in SERVING_STEP
    assert not _at_startup([*start, SERVING_STEP, oom])


def test_the_next_start_after_a_runtime_oom_is_not_its_start():
    start, oom = _crash_loop()
    assert not _at_startup([*HEALTHY, oom, *start])


def test_vllm_serve_help_is_no_launch():
    _, oom = _crash_loop()
    usage = "usage: vllm serve [-h] [--model MODEL] [--port PORT] [model_tag]"
    assert not _at_startup([usage, oom])
    assert _at_startup(["$ vllm serve Qwen/Qwen2-7B-Instruct --port 8000", oom])


def test_an_oom_as_pytorch_ends_a_cuda_graph_capture_is_at_start_up():
    # round 13's vLLM worker: `capture_end` in the traceback, nothing logged before it; engines
    # capture their CUDA graphs as they start (vllm#19186: gpu-memory-utilization too high)
    path = FRESH / "round13" / STORY / "r13-c4-vllm-cudagraph-capture-oom.log"
    text = path.read_text()
    line = next(n for n, t in numbered(text) if "CUDA error: out of memory" in t)
    assert "in capture_end" in text and during_startup(numbered(text), line)


def test_an_oom_a_wrapper_reports_as_its_engine_not_initializing_is_at_start_up():
    # RunPod's worker-vllm wraps `AsyncLLMEngine.from_engine_args` and logs what it raised as
    # `Error initializing vLLM engine: …` (src/engine.py `_initialize_llm`, d91ccb8); round 27's
    # paste from RunPod's console, newest line first, where nothing before the OOM says "starting"
    path = FRESH / "round27" / STORY / "r27-hw-runpod-worker-vllm-graph-capture-oom.log"
    text = path.read_text()
    line = oom_line(text)
    assert "Error initializing vLLM engine: CUDA out of memory" in text.splitlines()[line - 1]
    assert during_startup(numbered(text), line)


def test_an_oom_before_tgi_says_its_shard_failed_to_start_is_at_start_up():
    # TGI's launcher ends a start whose shard process exited (`Shard 0 failed to start`,
    # `Error: ShardCannotStart`: launcher/src/main.rs); round 29's Flan-UL2 on one 16 GB V100,
    # fixed by sharding it over four (text-generation-inference#866)
    path = FRESH / "round29" / STORY / "r29-old-tgi-flanul2-single-v100-oom.log"
    text = path.read_text()
    assert "Shard 0 failed to start" in text
    assert during_startup(numbered(text), oom_line(text))


def test_an_oom_as_triton_creates_a_models_instance_is_at_start_up():
    # Triton's `Failed to create instance: ` (backend_model.cc) is a model being loaded, whatever
    # its backend; round 25's TensorRT-LLM engine out of memory as Triton loads it (its thread:
    # a 13B engine on a card too small for it), where nothing before the line says "starting"
    path = FRESH / "round25" / STORY / "r25-tgi-triton-trtllm-llama13b-load-oom.log"
    text = path.read_text()
    line = next(n for n, t in numbered(text) if "cudaMallocAsync" in t)
    assert "Failed to create instance: " in text.splitlines()[line - 1]
    assert during_startup(numbered(text), line)
    # TensorRT-LLM's backend's words for the same (ModelInstanceState::Create: `unexpected
    # error when creating modelInstanceState: `), as Triton's model table repeats them (round
    # 48's TP8 engine) are a load too; the OOM's words alone, as a request that ran out of
    # memory would print them, are not
    backend = text.splitlines()[line - 1].split("Failed to create instance: ", 1)[1]
    assert during_startup([(1, backend)], 1)
    alone = backend.split("creating modelInstanceState: ", 1)[1]
    assert not during_startup([(1, alone)], 1)


def test_tabby_starting_its_server_is_a_start_and_listening_is_up():
    # Tabby (its CTranslate2 or llama.cpp engine) says `Starting server, this might takes a few
    # minutes...` as it loads the model and `Listening at 0.0.0.0:8080` once it serves: round
    # 50's two TabbyML reports, a C++ `CUDA failed with error out of memory` before the
    # listening line (2x Titan Xp, #648) and after it, past a few completions (#587)
    round50 = FRESH / "round50"
    start = (round50 / STORY / "r50-ide-tabby-codellama-2x-titanxp-startup-oom.log").read_text()
    served = (
        round50 / "cuda-oom-runtime" / "r50-ide-tabby-codellama-titanxp-oom-after-completions.log"
    ).read_text()
    for text, starting in ((start, True), (served, False)):
        line = next(n for n, t in numbered(text) if "CUDA failed with error out of memory" in t)
        assert during_startup(numbered(text), line) is starting
        assert any(STARTING_LINE.search(t) for t in text.splitlines())


def test_a_traceback_longer_than_the_window_is_read_whole_for_its_start_up_calls():
    # round 52's committed 16 GB start-up (Kelsidavis/rusteze): the OOM raised in torch.compile's
    # autotuning, 35 frames under `determine_available_memory` / `profile_run` /
    # `_dummy_run`, the start-up calls more than AFTER lines above the exception
    path = FRESH / "round52" / STORY / "r52-committed-qwen25-coder-7b-16gb-profile-oom.log"
    text = path.read_text()
    line = next(n for n, t in numbered(text) if "Failed to run autotuning code block" in t)
    first = next(n for n, t in numbered(text) if "in profile_run" in t)
    assert line - first > AFTER
    assert during_startup(numbered(text), line)
    # hostile pass: a paste that lost the code lines' indentation, another process's line in
    # the middle, are still that traceback; an exception line ends it
    lines = numbered(text)
    bare = [(n, t.replace("[core.py:866]     ", "[core.py:866] ")) for n, t in lines]
    assert during_startup(bare, line)
    gap = line - AFTER - 1
    assert first < gap
    other = "(APIServer pid=1) INFO 01-19 23:55:18 [utils.py:1] Waiting for 1 core engine proc(s)"
    assert during_startup([(n, other if n == gap else t) for n, t in lines], line)
    ended = "(EngineCore_DP0 pid=558551) ERROR 01-19 23:55:18 [core.py:866] ValueError: other"
    assert not during_startup([(n, ended if n == gap else t) for n, t in lines], line)
    # once the server served, only an engine built again is a start (another data-parallel
    # engine profiling, capturing): these calls are; weights loaded into a serving engine (an RL
    # trainer's update through collective_rpc) are not, and are a runtime OOM
    up = [(0, "INFO:     Application startup complete."), *lines]
    assert during_startup(up, line)
    reload = calls_renamed(
        up,
        determine_available_memory="collective_rpc",
        profile_run="load_weights",
        _dummy_run="load_weights",
    )
    assert not during_startup(reload, line)


def test_an_oom_vllm_reports_as_its_sampler_warm_up_is_at_start_up():
    # vLLM's V1 runner warms up with max_num_seqs dummy requests before it serves and says so
    # when that runs out of memory (`CUDA out of memory occurred when warming up sampler with 256
    # dummy requests`); round 39's RTX 2080 Ti paste keeps those words and the OOM, no frame
    path = FRESH / "round39" / STORY / "r39-homelab-2080ti-docker-sampler-warmup-oom.log"
    text = path.read_text()
    line = next(n for n, t in numbered(text) if t.startswith("torch.OutOfMemoryError"))
    assert during_startup(numbered(text), line)
    assert not during_startup(numbered(text)[line - 1 :], line)


def test_an_oom_chained_to_the_engine_process_being_built_is_at_start_up():
    # round 43 (hiyouga/LlamaFactory#9261): a CUDA OOM, then `The above exception was the direct
    # cause`, and the traceback through run_engine_core's `engine_core = EngineCoreProc(...)`:
    # the V1 engine process's constructor (its start; `run_busy_loop` after it serves)
    path = FRESH / "round43" / "vllm-startup-memory-insufficient"
    text = (path / "r43-quant-vllm-enginecore-oom-llamafactory.log").read_text()
    assert during_startup(numbered(text), oom_line(text))
    assert not during_startup(numbered(text.replace("EngineCoreProc(", "Engine(")), oom_line(text))


def test_an_oom_allocating_the_kv_cache_is_at_start_up():
    # round 17's V1 traceback cut to its last frame: `_allocate_kv_cache_tensors` runs once, as
    # the engine sizes its KV cache at start (vllm PR 48593: a default max_model_len of 262144);
    # V0's CacheEngine allocates in `_allocate_kv_cache` the same way
    path = FRESH / "round17" / STORY / "r17-c5-kv-alloc-oom-default-maxlen.log"
    text = path.read_text()
    assert "in _allocate_kv_cache_tensors" in text
    assert during_startup(numbered(text), oom_line(text))
    v0 = [
        '  File "/usr/local/lib/python3.10/dist-packages/vllm/worker/cache_engine.py", line 93, '
        "in _allocate_kv_cache",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.02 GiB.",
    ]
    assert _at_startup(v0)


def test_a_long_run_of_stats_lines_is_read_once_per_distinct_line_and_decides_nothing():
    # a 300 MB previous log of idle stats lines made three checks read it for minutes (each line
    # through the phase regexes); each distinct line is now judged once, and the phase is the
    # same: idle stats say neither up nor starting, more distinct lines than are remembered too
    idle = (
        "(APIServer pid=1671) INFO 09-04 01:02:21 [loggers.py:123] Engine 000: Avg prompt "
        "throughput: 0.0 tokens/s, Avg generation throughput: 0.0 tokens/s, Running: 0 reqs, "
        "Waiting: {} reqs"
    )
    for repeats in (1, 20_000):
        for tail in ("Loading weights took 14.20 GiB", "Application startup complete."):
            distinct = [idle.format(n % (MAX_SAID + 50)) for n in range(repeats)]
            text = [tail, *distinct, "torch.OutOfMemoryError: CUDA out of memory."]
            expected = tail.startswith("Loading")
            assert during_startup(enumerate(text, 1), len(text)) is expected, (repeats, tail)


def test_an_oom_in_the_offline_llm_constructor_is_at_start_up():
    # `LLM(...)` builds the engine (loads, profiles, sizes the cache) before any request: a
    # worker's OOM, then the script's traceback through vLLM's constructor frames, as they print
    oom = (
        "(VllmWorkerProcess pid=42) ERROR 08-04 16:54:59 [multiproc_worker_utils.py:238] "
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.69 GiB."
    )
    constructor = [
        "[rank0]: Traceback (most recent call last):",
        '[rank0]:   File "/srv/run.py", line 31, in <module>',
        "[rank0]:     llm = LLM(",
        '[rank0]:   File "/opt/venv/lib/python3.10/site-packages/vllm/entrypoints/llm.py", line '
        "253, in __init__",
        "[rank0]:     self.llm_engine = LLMEngine.from_engine_args(",
    ]
    assert during_startup(numbered("\n".join([oom, *constructor])), 1)
    engine_built = ['  File "/opt/vllm/engine/llm_engine.py", line 521, in from_engine_args']
    assert during_startup(numbered("\n".join([oom, *engine_built])), 1)
    # a script's own `__init__` is not vLLM's constructor
    own = ['  File "/srv/app/llm.py", line 12, in __init__']
    assert not during_startup(numbered("\n".join([oom, *own])), 1)


OFFLINE_START = [
    "INFO 03-01 10:00:00 llm_engine.py:98] Initializing an LLM engine (v0.5.4) with config: m",
    "INFO 03-01 10:00:30 model_runner.py:732] Loading model weights took 24.2835 GB",
    "INFO 03-01 10:00:35 gpu_executor.py:102] # GPU blocks: 827, # CPU blocks: 327",
]
OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB."


def test_an_oom_in_an_offline_scripts_generate_is_not_at_start_up():
    # the hostile pass: after the constructor, `llm.generate(...)` OOMs; read as a start-up, the
    # advice raised --gpu-memory-utilization, the wrong way for a request that does not fit
    generate = [
        "Traceback (most recent call last):",
        '  File "/home/user/run_batch.py", line 20, in <module>',
        "    outputs = llm.generate(prompts, sampling_params)",
        '  File "/usr/lib/python3/dist-packages/vllm/entrypoints/llm.py", line 353, in generate',
        "    outputs = self._run_engine(use_tqdm=use_tqdm)",
        '  File "/usr/local/lib/python3.10/dist-packages/vllm/model_executor/layers/sampler.py", '
        "line 88, in forward",
        "    logits = torch.softmax(logits, dim=-1)",
        OOM,
    ]
    text = "\n".join([*OFFLINE_START, *generate])
    assert not during_startup(numbered(text), len(OFFLINE_START) + len(generate))
    # V1 says its start is over, and the progress bar that prompts were answered
    v1_done = "INFO 06-01 10:00:40 [core.py:159] init engine (profile, create kv cache, warmup model) took 20.00 seconds"
    progress = "Processed prompts:   3%|▎         | 60/2000 [00:09<05:07,  6.5it/s]"
    for said in (v1_done, progress):
        assert SERVING_LINE.search(said)
        text = "\n".join([*OFFLINE_START, said, OOM])
        assert not during_startup(numbered(text), len(OFFLINE_START) + 2)
    assert not SERVING_LINE.search("Processed prompts:   0%|          | 0/500 [00:00<?, ?it/s]")


def test_a_second_engine_built_after_one_served_is_at_start_up_by_its_own_traceback():
    served = "Processed prompts: 100%|██████████| 500/500 [01:10<00:00,  7.1it/s]"
    second = [
        "Traceback (most recent call last):",
        '  File "/home/user/eval.py", line 30, in <module>',
        '    judge = LLM(model="meta-llama/Llama-2-13b-hf")',
        '  File "/usr/local/lib/python3.10/dist-packages/vllm/entrypoints/llm.py", line 177, in '
        "__init__",
        "    self.llm_engine = LLMEngine.from_engine_args(",
        OOM,
    ]
    text = "\n".join([*OFFLINE_START, served, *second])
    assert during_startup(numbered(text), len(OFFLINE_START) + 1 + len(second))
    # a script's own `from_engine_args` after it served is its own call, not vLLM's start
    own = [
        "Traceback (most recent call last):",
        '  File "/app/myproj/engine.py", line 10, in from_engine_args',
        "    return cls(args).run(prompt)",
        OOM,
    ]
    text = "\n".join([*OFFLINE_START, served, *own])
    assert not during_startup(numbered(text), len(OFFLINE_START) + 1 + len(own))


def test_a_start_that_ends_on_the_error_is_a_failed_start():
    # the real engine: `vllm serve` exits on the KeyError its own traceback ends with (the CLI's
    # `main` frame comes before the error line), and on the LoRA error after the engine started
    # (given as the exception that ends `vllm serve`'s traceback)
    for drill, words, ended in (
        ("startup-tool-parser", "invalid tool call parser", "KeyError: 'invalid tool call parser"),
        ("startup-lora-missing", "adapter_config.json", "ValueError: Loading lora ghost failed"),
    ):
        lines = numbered((DRILLS / drill / "server.log").read_text())
        error = next(n for n, text in lines if words in text)
        failed = start_failed_after(lines, error)
        assert failed is not None and failed[1].startswith(ended), (drill, failed)


def test_a_ctrl_c_after_a_failed_start_that_hung_is_later():
    # a failed start that hung, then Ctrl-C: its KeyboardInterrupt ends another traceback
    lines = numbered((DRILLS / "startup-lora-missing" / "server.log").read_text())
    error = next(n for n, text in lines if "adapter_config.json" in text)
    end = len(lines)
    later = [
        (end + 1, "^C"),
        (end + 2, "Traceback (most recent call last):"),
        (end + 3, '  File "/v/vllm/entrypoints/cli/main.py", line 120, in main'),
        (end + 4, "KeyboardInterrupt"),
    ]
    failed = start_failed_after([*lines, *later], error)
    assert failed is not None and failed[1].startswith("ValueError: Loading lora"), failed


def test_a_server_that_came_up_did_not_fail_to_start():
    # the same error lines after `Application startup complete`, and an error with no failed
    # start after it, are no failed start; a new life (`vLLM API server version`) starts over
    healthy = numbered((DRILLS / "healthy" / "server.log").read_text())
    failing = [(len(healthy) + 1, "KeyError: 'invalid tool call parser: x (chose from { a })'")]
    main = [(len(healthy) + 2, '  File "/v/vllm/entrypoints/cli/main.py", line 120, in main')]
    assert start_failed_after([*healthy, *failing, *main], len(healthy) + 1) is None
    assert start_failed_after(healthy, 1) is None
    again = [(len(healthy) + 1, "INFO 12-06 [api_server.py:1] vLLM API server version 0.32.0")]
    lines = [*healthy, *again, (failing[0][0] + 1, failing[0][1]), (main[0][0] + 1, main[0][1])]
    assert start_failed_after(lines, failing[0][0] + 1) == lines[-1]
    # a run-time parser error says the server was answering, whatever follows
    n = len(healthy)
    parsing = (
        n + 2,
        "ERROR [hermes_tool_parser.py:1] Error in extracting tool call from response.",
    )
    assert start_failed_after([again[0], parsing, (n + 3, main[0][1])], n + 2) is None


# explain's whole story (llmdoctor/triage/explain.py told_at_startup, folded_into_story) on real
# lines put together: round 39's RTX 2080 Ti start-up that ran out of memory in vLLM's sampler
# warm-up, round 11's server generating, round 25's Triton instance failing to load and round
# 10's Triton announcing its endpoints
WARM_UP = FRESH / "round39" / STORY / "r39-homelab-2080ti-docker-sampler-warmup-oom.log"


def _explained(text: str) -> list[tuple[str, str | None]]:
    from llmdoctor.triage.explain import explain

    result = explain(TextSource.from_text("paste", text), ENTRIES)
    return [(m.id, m.lines_of) for m in result.matches]


def test_a_warm_up_oom_is_one_start_up_story_not_also_an_oom_while_serving():
    assert _explained(WARM_UP.read_text()) == [(STORY, "cuda-oom-runtime")]
    # the chained traceback, the OOM first and vLLM's warm-up words under it: folded all the same
    oom, warm_up = WARM_UP.read_text().split("\n\n", 1)[1], WARM_UP.read_text().split("\n\n")[0]
    assert [i for i, _ in _explained(oom + "\n" + warm_up + "\n")] == [STORY]


def test_an_oom_while_serving_after_a_start_that_did_not_fit_is_the_runtime_story():
    # the previous life's start-up OOM, then a start that came up and served, then an OOM: the
    # newest failure is told as a runtime OOM, the start-up still named beside it
    runtime_oom = next(t for t in WARM_UP.read_text().splitlines() if "Tried to allocate" in t)
    text = WARM_UP.read_text() + SERVING + "torch.OutOfMemoryError: CUDA out of memory.\n"
    text += runtime_oom + "\n"
    ids = [i for i, _ in _explained(text)]
    assert ids[0] == "cuda-oom-runtime" and STORY in ids, ids
    assert ("cuda-oom-runtime", "") in _explained(text)


def test_a_triton_model_that_failed_to_load_does_not_make_a_later_oom_a_start_up():
    load = (FRESH / "round25" / STORY / "r25-tgi-triton-trtllm-llama13b-load-oom.log").read_text()
    load_oom = next(t for t in load.splitlines() if "Failed to create instance: " in t)
    started = (
        FRESH / "round10" / "_healthy" / "r10-c5-triton-services-started-explicit-model-load.log"
    ).read_text()
    assert [i for i, _ in _explained(load_oom + "\n")] == [STORY]
    # (the OOM's own words: the instance being created is how a load says it, not a runtime)
    runtime = load_oom.split("creating modelInstanceState: ", 1)[1]
    assert _explained(f"{load_oom}\n{started}{runtime}\n")[0] == ("cuda-oom-runtime", "")


def test_retold_at_startup_asks_of_the_last_line_too():
    # log-signatures, pod-restarts and memory-fragmentation give the last line where they have it
    text = WARM_UP.read_text() + SERVING + "torch.OutOfMemoryError: CUDA out of memory.\n"
    lines = text.splitlines()
    first = next(n for n, t in enumerate(lines, 1) if t.startswith("torch.OutOfMemoryError"))
    last = len(lines)
    args = (ENTRIES, {"cuda-oom-runtime": first}, lambda: iter(lines))
    assert retold_at_startup(*args) == {"cuda-oom-runtime": STORY}
    assert retold_at_startup(*args, {"cuda-oom-runtime": first}) == {"cuda-oom-runtime": STORY}
    assert retold_at_startup(*args, {"cuda-oom-runtime": last}) == {}


# a V0 start-up's profiling run, pasted as a bare traceback (vllm-project/vllm#7854's frames,
# `[rank0]:` as torchrun prints them; the OOM line of #14095): `profile_run` runs the model
# through `execute_model`, the serving loop's own call
V0_PROFILE_RUN = """\
[rank0]:     self.model_executor.determine_num_available_blocks())
[rank0]:   File "/opt/conda/lib/python3.10/site-packages/vllm/executor/gpu_executor.py", line 94, in determine_num_available_blocks
[rank0]:     return self.driver_worker.determine_num_available_blocks()
[rank0]:   File "/opt/conda/lib/python3.10/site-packages/torch/utils/_contextlib.py", line 116, in decorate_context
[rank0]:     return func(*args, **kwargs)
[rank0]:   File "/opt/conda/lib/python3.10/site-packages/vllm/worker/worker.py", line 179, in determine_num_available_blocks
[rank0]:     self.model_runner.profile_run()
[rank0]:   File "/opt/conda/lib/python3.10/site-packages/torch/utils/_contextlib.py", line 116, in decorate_context
[rank0]:     return func(*args, **kwargs)
[rank0]:   File "/opt/conda/lib/python3.10/site-packages/vllm/worker/model_runner.py", line 940, in profile_run
[rank0]:     self.execute_model(model_input, kv_caches, intermediate_tensors)
[rank0]:   File "/opt/conda/lib/python3.10/site-packages/torch/utils/_contextlib.py", line 116, in decorate_context
[rank0]:     return func(*args, **kwargs)
[rank0]:   File "/opt/conda/lib/python3.10/site-packages/vllm/worker/model_runner.py", line 1363, in execute_model
[rank0]:     hidden_or_intermediate_states = model_executable(
[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 2 has a total capacity of 14.62 GiB of which 3.31 MiB is free.
"""


def test_a_serving_call_under_a_start_up_call_is_the_start():
    # V0's `profile_run` calls `execute_model`: a bare traceback through both, outermost first,
    # is a start-up (it was told as an OOM while serving); the other way round, a start-up
    # call's name under the serving loop (a data-parallel engine's dummy batch through
    # `_dummy_run` while serving) is serving
    lines = numbered(V0_PROFILE_RUN)
    line = len(lines)
    assert during_startup(lines, line)
    result = explain(TextSource.from_text("paste", V0_PROFILE_RUN), ENTRIES)
    assert result.matches[0].id == STORY
    swapped = calls_renamed(
        lines,
        determine_num_available_blocks="run_busy_loop",
        profile_run="step",
        execute_model="_dummy_run",
    )
    assert not during_startup(swapped, line)
    # a serving traceback nearby does not outvote the line's own
    serving = '[rank1]:   File "/opt/vllm/vllm/engine/llm_engine.py", line 1, in step'
    assert during_startup([*lines, (line + 1, serving)], line)


SGLANG_STARTS = sorted((FRESH / "round53" / STORY).glob("r53-*sglang*.log"))


def test_sglangs_scheduler_built_is_its_start():
    # round 53's two SGLang start-up OOMs (a Llama 4 at a 2M context capturing its graphs on
    # H200s; a 2x3090 at --mem-fraction-static 0.985 sizing FlashInfer's workspace): raised
    # under `scheduler = Scheduler(` in `run_scheduler_process`, they were told as OOMs while
    # serving; a traceback through the scheduler's event loop is serving (round 28's decode IMA)
    assert len(SGLANG_STARTS) == 2
    for path in SGLANG_STARTS:
        lines = numbered(path.read_text())
        line = next(n for n, t in lines if t.startswith("torch.OutOfMemoryError"))
        assert during_startup(lines, line), path.name
        assert (
            explain(TextSource.from_text(path.name, path.read_text()), ENTRIES).matches[0].id
            == STORY
        )
    serving = FRESH / "round28" / "illegal-memory-access" / "r28-dist-sglang-lora-decode-ima.log"
    lines = numbered(serving.read_text())
    line = next(n for n, t in lines if "illegal memory access" in t)
    assert not during_startup(lines, line)
    # SGLang's start-up lines say starting: an OOM logged after them, bare
    started = [
        (1, "[2026-06-11 05:11:40 TP0] Load weight begin. avail mem=23.10 GB"),
        (2, "[2026-06-11 05:11:58 TP1] Capture piecewise CUDA graph begin. avail mem=0.08 GB"),
        (3, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 384.00 MiB."),
    ]
    assert during_startup(started, 3)
    assert all(STARTING_LINE.search(t) for _, t in started[:2])


def test_a_chained_traceback_through_a_start_up_call_makes_the_line_the_starts():
    # V0 wraps `execute_model` (model_runner_base.py `dump_input_when_exception`): a profiling
    # OOM prints the inner frames first, the OOM, then `The above exception was the direct cause
    # of the following exception:` and the start's own chain (the hostile pass's paste of
    # vLLM 0.6's frames, as in #7854): the first OOM is the start's, not a request's
    inner = [
        "Traceback (most recent call last):",
        '  File "/usr/local/lib/python3.10/dist-packages/vllm/worker/model_runner.py", line 1654, in execute_model',
        "    hidden_or_intermediate_states = model_executable(",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 448.00 MiB.",
        "",
        "The above exception was the direct cause of the following exception:",
        "",
    ]
    outer = V0_PROFILE_RUN.splitlines()
    lines = list(enumerate([*inner, "Traceback (most recent call last):", *outer], 1))
    assert during_startup(lines, 4)
    # a chain through the serving loop, or no chain, leaves it serving
    serving = calls_renamed(lines, determine_num_available_blocks="step", profile_run="step")
    assert not during_startup(serving, 4)
    assert not during_startup(lines[:4], 4)


def test_sglangs_current_stats_line_and_ready_line_say_it_serves():
    # SGLang prints `Decode batch, #running-req: …` (a comma, round 7's benchmark) and, once its
    # warm-up request was answered, `The server is fired up and ready to roll!`: an OOM after
    # either, bare, is a runtime OOM (the hostile pass: both read as still starting)
    decode = FRESH / "round7" / "_healthy" / "r7-sglang-pr13023-benchmark-decode.log"
    decode = decode.read_text().splitlines()[0]
    start = (
        "[2026-06-11 05:11:58 TP0] Capture cuda graph begin. This can take up to several minutes."
    )
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 8.00 GiB."
    ready = "[2026-03-22 13:50:43] The server is fired up and ready to roll!"
    for up in (decode, ready):
        assert not during_startup([(1, start), (2, up), (3, oom)], 3), up
    assert during_startup([(1, start), (2, oom)], 2)


def test_a_llama_server_that_answered_requests_is_serving():
    # the second hostile pass: llama-server's OOM while serving, its restart then failing to
    # load (`failed to create context with model`, start-up words) was told as the start-up's;
    # its own request log (round 8's `srv  log_server_r: request: POST … 200`) says it served
    served = (
        FRESH / "round8" / "tool-call-parser-error" / "r8-continue-7491-llamacpp-gptoss-args.log"
    )
    request = served.read_text().splitlines()[0]
    assert "log_server_r: request: POST" in request
    oom = "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 4480.00 MiB on device 0: cudaMalloc failed: out of memory"
    restart = [
        "common_init_from_params: failed to create context with model '/models/m.gguf'",
        "srv    main: exiting due to model loading error",
    ]
    lines = list(enumerate([request, oom, *restart], 1))
    assert not during_startup(lines, 2)
    assert during_startup(lines[1:], 2)  # with no request answered, the load's words say start
