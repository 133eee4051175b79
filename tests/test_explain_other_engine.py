"""Another engine's log: the Fix's vLLM flags told in that engine's settings beside it
(triage/other_engine.py), on real excerpts of SGLang, TGI, Ollama and TensorRT-LLM from the fresh rounds."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from llmdoctor.cli import app
from llmdoctor.engine.textsource import TextSource
from llmdoctor.triage.explain import explain
from llmdoctor.triage.other_engine import engine_of, their_flags

FRESH = Path(__file__).parent / "fixtures" / "explain_fresh"
# SGLang 0.1 in a notebook: its frames in sglang/srt, and vLLM's layers it called (sglang#86)
SGLANG = FRESH / "round36/gpu-memory-taken-by-other-process/r36-nb-jupyter-sglang-runtime-oom.log"
TGI = FRESH / "round29/vllm-startup-memory-insufficient/r29-old-tgi-flanul2-single-v100-oom.log"
OLLAMA = FRESH / "round10/cuda-oom-runtime/r10-c3-ollama-mixtral22b-cudamalloc-oom-load.log"


def lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def test_the_engine_is_told_by_its_own_lines_and_never_where_vllm_wrote_one():
    assert engine_of(lines(SGLANG)).name == "SGLang"  # vLLM only in frames it called
    assert engine_of(lines(TGI)).name == "TGI"
    assert engine_of(lines(OLLAMA)).name == "Ollama"
    vllm_line = (
        "ERROR 03-18 10:25:43 [core.py:337] EngineCore hit an exception: Traceback (most recent "
        "call last):"
    )
    assert engine_of([*lines(SGLANG), vllm_line]) is None
    assert (
        engine_of(["torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GiB"]) is None
    )
    # two other engines' marks: none is told
    assert engine_of([*lines(TGI), *lines(OLLAMA)]) is None


def test_only_the_flags_the_fix_names_with_a_counterpart_are_told():
    sglang = engine_of(lines(SGLANG))
    fix = ["2. Lower `--gpu-memory-utilization` by 0.05.", "3. `--max-num-seqs 128`, `--foo`."]
    assert their_flags(sglang, fix) == {
        "--gpu-memory-utilization": "--mem-fraction-static",
        "--max-num-seqs": "--max-running-requests",
    }
    ollama = engine_of(lines(OLLAMA))
    assert their_flags(ollama, ["`--max-num-batched-tokens 4096`"]) == {}  # none: never guessed


def test_explain_tells_the_fix_in_the_engine_s_settings(entries):
    result = explain(TextSource.from_text("paste", SGLANG.read_text(encoding="utf-8")), entries)
    oom = result.matches[0]
    assert oom.engine == "SGLang"
    assert oom.engine_flags["--gpu-memory-utilization"] == "--mem-fraction-static"
    assert oom.to_json()["engine"]["name"] == "SGLang"
    out = CliRunner().invoke(app, ["explain", str(TGI), "--no-color"]).stdout
    assert "TGI: the log is TGI's; for the vLLM flags above:" in out
    assert "--gpu-memory-utilization → --cuda-memory-fraction" in out
    # a vLLM log: no word of another engine, and no `engine` in JSON
    path = FRESH.parent / "runbooks/cuda-oom-runtime/vllm-v1-tp-worker-oom-issue17835.log"
    data = json.loads(CliRunner().invoke(app, ["explain", str(path), "--json"]).stdout)
    assert data["matches"][0]["id"] == "cuda-oom-runtime"
    assert all("engine" not in m for m in data["matches"])


def test_a_word_or_a_module_name_is_no_engine_s_line():
    # the hostile pass: "the log is Ollama's" for a vLLM 0.6 log whose logged prompt says
    # "ollama", for Open WebUI's `open_webui.routers.ollama` module in front of vLLM, and for a
    # LiteLLM router whose failing backend is `hosted_vllm/…` with Ollama as its fallback
    old_vllm = [
        "INFO 10-17 14:29:59 logger.py:37] Received request chat-5f2a9c: prompt: 'How do I "
        "migrate from ollama to a GPU server?'",
        "WARNING 10-17 14:30:01 scheduler.py:1439] Sequence group chat-5f2a9c is preempted by "
        "PreemptionMode.RECOMPUTE mode because there is not enough KV cache space.",
    ]
    open_webui = [
        "2025-05-12 10:14:02.311 | INFO     | open_webui.routers.ollama:get_all_models:330 - "
        "get_all_models() - {}",
    ]
    litellm = [
        "14:05:43 - LiteLLM Router:INFO: router.py:2964 - litellm.acompletion(model=hosted_vllm/"
        "meta-llama/Llama-3.1-70B-Instruct) Exception litellm.BadRequestError: "
        "Hosted_vllmException - This model's maximum context length is 8192 tokens.",
        "14:05:43 - LiteLLM Router:INFO: router.py:2964 - Trying to fallback b/w models. Falling "
        "back to: llama3-local (ollama/llama3.1:8b)",
    ]
    for paste in (old_vllm, open_webui, litellm):
        assert engine_of(paste) is None, paste
    # Ollama's own lines name it
    assert engine_of(lines(OLLAMA)).name == "Ollama"


def test_what_differs_is_said_and_an_llmdoctor_command_s_flag_is_none():
    tgi = engine_of(lines(TGI))
    fix = [
        "1. Size it: `llmdoctor capacity --model-config config.json --max-model-len 8192`.",
        "2. `--gpu-memory-utilization 0.95`; `--dtype half` on a T4.",
    ]
    flags = their_flags(tgi, fix)
    assert "--max-model-len" not in flags  # only in llmdoctor's own command
    assert flags["--gpu-memory-utilization"].startswith("--cuda-memory-fraction (default 1.0")
    assert "no `half`" in flags["--dtype"]
    # SGLang's full cache: the same flag name is said to be the same
    kv_full = (
        "[2025-05-12 10:00:00 TP0] Decode batch. #running-req: 120, #token: 250000, token usage: "
        "0.99, gen throughput (token/s): 1500.00, #queue-req: 35\n"
    )
    out = CliRunner().invoke(app, ["explain", "-", "--no-color"], input=kv_full).stdout
    assert "kv-cache-preemption" in out
    assert "--kv-cache-dtype: the same" in out and "--mem-fraction-static" in out


# TensorRT-LLM's engine out of memory as Triton loads it (round 25, tensorrtllm_backend: a 13B
# engine on a card too small for it), and its runtime's own prefix in trtllm-serve's output
TRTLLM = (
    FRESH / "round25/vllm-startup-memory-insufficient/r25-tgi-triton-trtllm-llama13b-load-oom.log"
)


def test_tensorrt_llm_is_told_with_its_own_settings_and_what_they_mean(entries):
    engine = engine_of(lines(TRTLLM))
    assert engine.name == "TensorRT-LLM"
    flags = their_flags(engine, ["`--gpu-memory-utilization 0.85`, `--max-model-len 8192`"])
    assert flags["--gpu-memory-utilization"].startswith("--kv_cache_free_gpu_memory_fraction")
    assert "left free after the weights" in flags["--gpu-memory-utilization"]
    assert "trtllm-build keeps its own" in flags["--max-model-len"]
    result = explain(TextSource.from_text("paste", TRTLLM.read_text(encoding="utf-8")), entries)
    assert result.matches[0].engine == "TensorRT-LLM"
    # Triton's vLLM backend names vLLM: its log is vLLM's, no other engine is told
    vllm_backend = "I0514 09:00:01.2 1 model_lifecycle.cc:469] loading: vllm_model:1 (backend vllm)"
    assert engine_of([*lines(TRTLLM), vllm_backend]) is None
