"""Which serving engine wrote a log, when it is not vLLM, and its own flags for the vLLM flags a
runbook's Fix names.

The runbooks are written for vLLM; the same causes (an OOM, a context too long, a full cache)
stop SGLang, TGI and Ollama, whose logs explain reads too. Where the lines are another engine's,
the Fix's vLLM flags are told in that engine's terms beside it, never rewritten: each engine
names its settings from its own source (sgl-project/sglang python/sglang/srt/server_args.py at
469c63e; huggingface/text-generation-inference launcher/src/main.rs at db931fc; ollama/ollama
envconfig/config.go and api/types.go at fb30760; NVIDIA/TensorRT-LLM's `trtllm-serve`,
tensorrt_llm/commands/serve.py, and the Triton backend's `tensorrt_llm` model parameters), with
what differs where it matters (TGI's memory fraction defaults to 1.0, its dtype takes no `half`;
TensorRT-LLM's KV fraction is of the memory left free after the weights, and an engine built
with trtllm-build keeps its own batch and length limits); the same name is said to be the same.
A vLLM flag with no counterpart is left out, never guessed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

FLAG = re.compile(r"--[a-z][a-z0-9-]+")
LLMDOCTOR_COMMAND = re.compile(r"`llmdoctor [^`]*`")
# a line vLLM wrote, or one naming it (LiteLLM's `hosted_vllm/…`, a vLLM pod's name: then no
# other engine is told): its name anywhere, its processes, its logger's `file.py:N]` after a level
# and a time (0.8+ in brackets, older without)
VLLM = re.compile(
    r"(?i:(?<![a-z])vllm(?![a-z]))|EngineCore|"
    r"\b(INFO|WARNING|ERROR|DEBUG) [0-9]{2}-[0-9]{2} [0-9:]{8}(\.[0-9]+)? \[?[A-Za-z0-9_]+\.py:[0-9]+\]"
)
# a traceback's frame names a module it ran, not who ran it: SGLang and TGI builds call vLLM's
# layers and kernels (`File ".../site-packages/vllm/model_executor/layers/linear.py"`)
FRAME = re.compile(r'^\s*File "')
LINES_READ = 5000  # an input's first lines, read for its engine (a paste; a big log's head)


@dataclass(frozen=True)
class Engine:
    name: str
    marks: re.Pattern  # a line this engine wrote (its module or binary's name, its log format)
    flags: dict[str, str]  # a vLLM flag: this engine's setting for the same thing


ENGINES = (
    Engine(
        "SGLang",
        re.compile(
            r"\bsglang\b|\bsgl_kernel\b|#queue-req: [0-9]|#running-req: [0-9]|--mem-fraction-static"
        ),
        {
            "--gpu-memory-utilization": "--mem-fraction-static",
            "--max-num-seqs": "--max-running-requests",
            "--max-model-len": "--context-length",
            "--max-num-batched-tokens": "--chunked-prefill-size",
            "--tensor-parallel-size": "--tp-size",
            "--enforce-eager": "--disable-cuda-graph",
            "--kv-cache-dtype": "--kv-cache-dtype",
            "--quantization": "--quantization",
            "--dtype": "--dtype",
        },
    ),
    Engine(
        "TGI",
        re.compile(r"text[_-]generation[_-](launcher|server|router|inference)"),
        {
            "--gpu-memory-utilization": "--cuda-memory-fraction (default 1.0: all it may take; "
            "lower it to leave room)",
            "--max-model-len": "--max-total-tokens (and --max-input-tokens)",
            "--quantization": "--quantize",
            "--kv-cache-dtype": "--kv-cache-dtype (fp8_e4m3fn or fp8_e5m2)",
            "--dtype": "--dtype (float16 or bfloat16; no `half`)",
            "--max-num-batched-tokens": "--max-batch-prefill-tokens",
            "--tensor-parallel-size": "--num-shard",
            "--enforce-eager": "--cuda-graphs 0",
        },
    ),
    Engine(
        "Ollama",
        # its own lines (slog's `level=… source=server.go:N msg=`, the runner's binary and
        # folder, journald's `ollama[pid]:`), never the word alone (a prompt, a module name)
        re.compile(
            r"level=[A-Z]+ source=[a-z_/]+\.go:[0-9]+ msg=|ollama\[[0-9]+\]:|"
            r"ollama_llama_server|/(usr|lib|share)/ollama/"
        ),
        {
            "--max-num-seqs": "OLLAMA_NUM_PARALLEL",
            "--max-model-len": "OLLAMA_CONTEXT_LENGTH (or the model's num_ctx)",
            "--gpu-memory-utilization": "the model's num_gpu (layers on the GPU; Ollama sizes "
            "them to the free memory itself) or OLLAMA_GPU_OVERHEAD (memory it leaves free)",
            "--kv-cache-dtype": "OLLAMA_KV_CACHE_TYPE (f16, q8_0, q4_0)",
        },
    ),
    Engine(
        "TensorRT-LLM",
        # its runtime's `[TensorRT-LLM][ERROR]` prefix, its Python package, Triton's backend
        # library, its commands
        re.compile(
            r"\[TensorRT-LLM\]|\btensorrt_llm[/.]|libtriton_tensorrtllm|\btrtllm-(serve|build|bench)\b"
        ),
        {
            "--gpu-memory-utilization": "--kv_cache_free_gpu_memory_fraction (Triton: the "
            "tensorrt_llm model's kv_cache_free_gpu_mem_fraction; a share of the memory left "
            "free after the weights, default 0.9)",
            "--max-num-seqs": "--max_batch_size (an engine built with trtllm-build keeps its own)",
            "--max-model-len": "--max_seq_len (an engine built with trtllm-build keeps its own)",
            "--max-num-batched-tokens": "--max_num_tokens",
            "--tensor-parallel-size": "--tp_size",
        },
    ),
)


def engine_of(lines: Iterable[str]) -> Engine | None:
    """The one engine other than vLLM whose marks the lines bear, when no line but a traceback's
    frame is vLLM's."""
    found: set[str] = set()
    for n, line in enumerate(lines):
        if n >= LINES_READ:
            break
        if VLLM.search(line) and not FRAME.match(line):
            return None
        found.update(e.name for e in ENGINES if e.marks.search(line))
    if len(found) != 1:
        return None
    return next(e for e in ENGINES if e.name in found)


def their_flags(engine: Engine, fix: Iterable[str]) -> dict[str, str]:
    """The vLLM flags the Fix's lines name that `engine` has a setting for, in their order; a
    flag of an llmdoctor command in them (`llmdoctor capacity … --max-model-len`) is none."""
    text = LLMDOCTOR_COMMAND.sub("", " ".join(fix))
    named = dict.fromkeys(FLAG.findall(text))
    return {flag: engine.flags[flag] for flag in named if flag in engine.flags}
