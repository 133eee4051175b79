"""KV-cache arithmetic for vLLM: how many tokens and sequences fit, shown step by step.

Per GPU, vLLM sizes its KV cache at startup as

    budget     = GPU memory x --gpu-memory-utilization
    KV memory  = budget - weights/TP - (activation peak + non-torch memory, from a profiling run)
    blocks     = KV memory // (block_size x KV bytes per token);  tokens = blocks x block_size
    concurrency (full-length requests) = blocks / ceil(max_model_len / block_size)

and refuses to start when one max-model-len request does not fit. KV bytes per token:

* standard / GQA attention: 2 (K and V) x layers x KV heads per GPU x head_dim x dtype bytes,
  KV heads per GPU = max(1, num_key_value_heads // TP);
* MLA (DeepSeek-V2/V3): layers x (kv_lora_rank + qk_rope_head_dim) x dtype bytes, the same on
  every GPU (the latent is not split by TP);
* sliding-window layers hold at most the window (+ one prefill chunk) per sequence.

The activation peak cannot be known without running the model; it is estimated from the batch
vLLM profiles with (max_num_batched_tokens), the MLP width and the vocabulary, calibrated on
real vLLM startup logs (tests/fixtures/capacity). Pass `overhead_bytes` (or read vLLM's own
"Available KV cache memory" line and pass `kv_cache_bytes`) to replace the estimate.
This module is a library: no typer, no rich.
"""

from __future__ import annotations

import json
import math
import re
import struct
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from llmdoctor.errors import BadInput

GiB = 1 << 30
MiB = 1 << 20
DTYPE_BYTES = {
    "float32": 4,
    "float": 4,
    "fp32": 4,
    "float16": 2,
    "half": 2,
    "fp16": 2,
    "bfloat16": 2,
    "bf16": 2,
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "fp8_inc": 1,
    "int8": 1,
    "uint8": 1,
    "int4": 0.5,
}
SAFETENSORS_BYTES = {
    "F64": 8,
    "I64": 8,
    "U64": 8,
    "F32": 4,
    "I32": 4,
    "U32": 4,
    "F16": 2,
    "BF16": 2,
    "I16": 2,
    "U16": 2,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
    "F8_E8M0": 1,
    "I8": 1,
    "U8": 1,
    "BOOL": 1,
}
MAX_SAFETENSORS_HEADER = 100 * MiB
# Overhead model (activation peak + non-torch memory), calibrated on vLLM 0.10 V1 startup logs
NON_TORCH_BYTES = 0.25 * GiB  # CUDA context, cuBLAS workspaces ... on one GPU
NON_TORCH_TP_BYTES = 0.2 * GiB  # + NCCL / custom all-reduce buffers when TP > 1
DEFAULT_BLOCK_SIZE = 16
DEFAULT_UTILIZATION = 0.9


@dataclass
class ModelShape:
    """What of a Hugging Face config.json the KV cache and weight size depend on."""

    model_type: str = ""
    layers: int = 0
    attention_heads: int = 0
    kv_heads: int = 0
    head_dim: int = 0
    hidden_size: int = 0
    intermediate_size: int = 0
    vocab_size: int = 0
    max_position_embeddings: int | None = None
    dtype: str = "bfloat16"
    tie_word_embeddings: bool = False
    kv_lora_rank: int | None = None  # MLA
    qk_rope_head_dim: int | None = None  # MLA
    sliding_window: int | None = None
    sliding_layers: int = 0  # layers that keep only the window
    experts: int = 0  # MoE routed experts
    expert_intermediate_size: int = 0
    shared_experts: int = 0
    quant_method: str | None = None
    quant_bits: float | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def is_mla(self) -> bool:
        return bool(self.kv_lora_rank)

    @property
    def full_layers(self) -> int:
        return self.layers - self.sliding_layers


MAX_SHAPE_VALUE = 1 << 24  # no real layer count, head count or width comes near this


def model_shape(config: dict[str, Any]) -> ModelShape:
    """Read the fields that matter from a Hugging Face config (text_config merged in).

    Real input (Qwen/Qwen2-7B-Instruct config.json, abridged):
        {"hidden_size": 3584, "num_attention_heads": 28, "num_hidden_layers": 28,
         "num_key_value_heads": 4, "intermediate_size": 18944, "vocab_size": 152064,
         "max_position_embeddings": 32768, "torch_dtype": "bfloat16", "use_sliding_window": false}
    """
    if not isinstance(config, dict):
        raise BadInput("the model config is not a JSON object")
    merged = dict(config)
    for nested in ("text_config", "llm_config", "language_config"):
        inner = config.get(nested)
        if isinstance(inner, dict):
            merged = {**merged, **inner}
    get = merged.get

    def number(*names: str) -> int | None:
        for name in names:
            value = get(name)
            if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
                return int(value)
        return None

    def shape_number(*names: str) -> int | None:
        """Like number(), but a present, non-null value that is not a plausible positive
        whole number is an error: falling back (e.g. 0 KV heads -> all heads) would be
        silently wrong."""
        for name in names:
            value = get(name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int | float):
                ok = False
            elif isinstance(value, float):
                ok = math.isfinite(value) and value.is_integer()
            else:
                ok = True
            if not ok or not 0 < value <= MAX_SHAPE_VALUE:
                raise BadInput(
                    f"the model config's {name} is {repr(value)[:40]}: it must be a whole number "
                    "from 1 "
                    f"to {MAX_SHAPE_VALUE:,}"
                )
            return int(value)
        return None

    layers = shape_number("num_hidden_layers", "n_layer", "num_layers", "n_layers")
    heads = shape_number("num_attention_heads", "n_head", "num_heads", "n_heads")
    hidden = shape_number("hidden_size", "d_model", "n_embd", "dim")
    if not layers or not heads or not hidden:
        raise BadInput(
            "the model config has no num_hidden_layers / num_attention_heads / hidden_size"
        )
    kv_heads = shape_number(
        "num_key_value_heads", "n_kv_heads", "num_kv_heads", "multi_query_group_num"
    )
    if get("multi_query") is True:
        kv_heads = 1
    head_dim = shape_number("head_dim", "kv_channels") or hidden // heads
    shape = ModelShape(
        model_type=str(get("model_type") or ""),
        layers=layers,
        attention_heads=heads,
        kv_heads=kv_heads or heads,
        head_dim=head_dim,
        hidden_size=hidden,
        intermediate_size=number("intermediate_size", "ffn_dim", "n_inner") or 4 * hidden,
        vocab_size=number("vocab_size", "padded_vocab_size") or 32000,
        max_position_embeddings=number(
            "max_position_embeddings", "max_sequence_length", "seq_length", "n_positions"
        ),
        dtype=str(get("torch_dtype") or get("dtype") or "bfloat16"),
        tie_word_embeddings=bool(get("tie_word_embeddings", False)),
    )
    if number("kv_lora_rank"):
        shape.kv_lora_rank = number("kv_lora_rank")
        shape.qk_rope_head_dim = number("qk_rope_head_dim") or 64
        shape.notes.append(
            f"MLA: the cache holds kv_lora_rank {shape.kv_lora_rank} + qk_rope_head_dim "
            f"{shape.qk_rope_head_dim} per token and layer, on every GPU"
        )
    _sliding_layout(shape, merged)
    experts = number("n_routed_experts", "num_local_experts", "num_experts")
    if experts and experts > 1:
        shape.experts = experts
        shape.expert_intermediate_size = (
            number("moe_intermediate_size", "expert_intermediate_size") or shape.intermediate_size
        )
        shape.shared_experts = number("n_shared_experts", "num_shared_experts") or 0
    quant = get("quantization_config")
    if isinstance(quant, dict):
        shape.quant_method = str(quant.get("quant_method") or "") or None
        bits = quant.get("bits") or quant.get("w_bit") or quant.get("weight_bits")
        if isinstance(bits, int | float):
            shape.quant_bits = float(bits)
        elif shape.quant_method and "fp8" in shape.quant_method:
            shape.quant_bits = 8.0
    return shape


def _sliding_layout(shape: ModelShape, config: dict[str, Any]) -> None:
    """Which layers keep only a sliding window (Mistral v0.1, Gemma 2/3, gpt-oss, ...)."""
    window = config.get("sliding_window")
    if not isinstance(window, int) or window <= 0 or config.get("use_sliding_window") is False:
        return
    if (
        isinstance(window, int)
        and shape.max_position_embeddings
        and window >= shape.max_position_embeddings
    ):
        return
    layer_types = config.get("layer_types")
    pattern = config.get("sliding_window_pattern")
    if isinstance(layer_types, list) and layer_types:
        sliding = sum(1 for t in layer_types if "sliding" in str(t))
    elif isinstance(pattern, int) and pattern > 1:
        sliding = sum(1 for i in range(shape.layers) if (i + 1) % pattern != 0)
    elif shape.model_type in ("gemma2", "cohere2"):
        sliding = (shape.layers + 1) // 2
    else:
        sliding = shape.layers
    if sliding:
        shape.sliding_window = window
        shape.sliding_layers = min(sliding, shape.layers)
        shape.notes.append(
            f"sliding window {window}: {shape.sliding_layers} of {shape.layers} layers keep "
            "only the window"
        )


def load_model_config(path: str | Path) -> dict[str, Any]:
    """A config.json (or a model folder holding one), parsed; BadInput if it cannot be."""
    p = Path(path)
    if p.is_dir():
        p = p / "config.json"
    if p.exists() and not p.is_file():  # /dev/zero or a FIFO would be read until memory runs out
        raise BadInput(f"{p}: not a regular file")
    try:
        with open(p, encoding="utf-8") as fh:
            config = json.load(fh)
    except FileNotFoundError:
        raise BadInput(f"{p}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"{p}: cannot be read ({exc})") from None
    except json.JSONDecodeError as exc:
        raise BadInput(f"{p}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    except RecursionError:
        raise BadInput(f"{p}: JSON nested too deeply to read") from None
    if not isinstance(config, dict):
        raise BadInput(f"{p}: not a JSON object")
    return config


# --- weights ------------------------------------------------------------------------------------


def estimate_parameters(shape: ModelShape) -> int:
    """Parameters of a decoder-only transformer from its config (dense or MoE)."""
    h, layers = shape.hidden_size, shape.layers
    q = h * shape.attention_heads * shape.head_dim
    if shape.is_mla:
        kv = h * ((shape.kv_lora_rank or 0) + (shape.qk_rope_head_dim or 0))
        kv += (shape.kv_lora_rank or 0) * shape.attention_heads * 2 * shape.head_dim
    else:
        kv = 2 * h * shape.kv_heads * shape.head_dim
    attention = q + kv + shape.attention_heads * shape.head_dim * h
    if shape.experts:
        per_expert = 3 * h * shape.expert_intermediate_size
        mlp = per_expert * (shape.experts + shape.shared_experts) + h * shape.experts
    else:
        mlp = 3 * h * shape.intermediate_size
    embeddings = shape.vocab_size * h * (1 if shape.tie_word_embeddings else 2)
    return layers * (attention + mlp + 2 * h) + embeddings + h


def weight_bytes_from_parameters(shape: ModelShape, params: int, dtype: str | None) -> int:
    """Weights of `params` parameters: quantized layers at their bits, embeddings at 2 bytes."""
    if shape.quant_bits and (dtype in (None, "auto")):
        embeddings = shape.vocab_size * shape.hidden_size * (1 if shape.tie_word_embeddings else 2)
        rest = max(params - embeddings, 0)
        return int(rest * shape.quant_bits / 8 + embeddings * 2)
    return int(params * dtype_bytes(dtype if dtype not in (None, "auto") else shape.dtype))


def dtype_bytes(dtype: str) -> float:
    """Bytes per element of a dtype name (torch_dtype, --dtype or --kv-cache-dtype spelling)."""
    name = str(dtype).lower().removeprefix("torch.")
    if name not in DTYPE_BYTES:
        raise BadInput(f"unknown dtype {dtype!r} (use bfloat16, float16, float32 or fp8)")
    return DTYPE_BYTES[name]


@dataclass
class SafetensorsWeights:
    total_bytes: int
    by_dtype: dict[str, int]
    tensors: int
    files: int


def safetensors_weights(model_dir: str | Path) -> SafetensorsWeights:
    """Sum tensor sizes from the headers of every *.safetensors file in a folder.

    Only the 8-byte little-endian header length and the JSON header are read, e.g.
    {"model.embed_tokens.weight": {"dtype": "BF16", "shape": [152064, 3584],
     "data_offsets": [0, 1090076672]}, "__metadata__": {"format": "pt"}}
    """
    folder = Path(model_dir)
    if not folder.is_dir():
        raise BadInput(f"--model-dir {folder}: not a directory")
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise BadInput(f"--model-dir {folder}: no *.safetensors files")
    by_dtype: dict[str, int] = {}
    tensors = 0
    for path in files:
        for dtype, size in _safetensors_header_sizes(path):
            by_dtype[dtype] = by_dtype.get(dtype, 0) + size
            tensors += 1
    return SafetensorsWeights(sum(by_dtype.values()), by_dtype, tensors, len(files))


def _safetensors_header_sizes(path: Path) -> list[tuple[str, int]]:
    try:
        with open(path, "rb") as fh:
            raw = fh.read(8)
            if len(raw) != 8:
                raise BadInput(f"{path}: too short to be a safetensors file")
            (length,) = struct.unpack("<Q", raw)
            file_size = path.stat().st_size
            if length > MAX_SAFETENSORS_HEADER or length + 8 > file_size:
                raise BadInput(f"{path}: header length {length} is not plausible")
            header = json.loads(fh.read(length).decode("utf-8"))
    except OSError as exc:
        raise BadInput(f"{path}: cannot be read ({exc.strerror or exc})") from None
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise BadInput(f"{path}: the safetensors header is not valid JSON") from None
    if not isinstance(header, dict):
        raise BadInput(f"{path}: the safetensors header is not a JSON object")
    out = []
    for name, info in header.items():
        if name == "__metadata__" or not isinstance(info, dict):
            continue
        offsets = info.get("data_offsets")
        dtype = str(info.get("dtype", "?"))
        shape = info.get("shape")
        if isinstance(offsets, list) and len(offsets) == 2 and all(_whole(o) for o in offsets):
            size = offsets[1] - offsets[0]
        elif isinstance(shape, list) and all(_whole(d) for d in shape):
            size = int(math.prod(shape) * SAFETENSORS_BYTES.get(dtype, 2))
        else:
            size = -1
        if not 0 <= size <= file_size:
            raise BadInput(
                f"{path}: tensor {name!r} has no valid data_offsets or shape in the header"
            )
        out.append((dtype, size))
    return out


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


# --- GPUs and sizes -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Gpu:
    name: str
    memory_bytes: int  # as the vendor states it (NVIDIA's "80 GB" of HBM is 80 GiB)
    usable_bytes: int  # what CUDA reports as total, which vLLM multiplies by the utilization
    compute_capability: str
    aliases: tuple[str, ...] = ()


@cache
def gpu_table() -> tuple[Gpu, ...]:
    """The GPUs of llmdoctor/data/gpus.json."""
    path = Path(__file__).resolve().parent / "data" / "gpus.json"
    with open(path, encoding="utf-8") as fh:
        doc = json.load(fh)
    gpus = []
    for item in doc["gpus"]:
        memory = int(item["memory_bytes"])
        usable = int(item.get("cuda_total_bytes") or memory * item.get("usable_fraction", 0.99))
        gpus.append(
            Gpu(
                item["name"],
                memory,
                usable,
                str(item["compute_capability"]),
                tuple(item.get("aliases", [])),
            )
        )
    return tuple(gpus)


def _norm(text: str) -> str:
    text = re.sub(r"[^a-z0-9]", "", text.lower())
    for noise in ("nvidia", "tesla", "geforce"):
        text = text.replace(noise, "")
    return text


def find_gpu(name: str) -> Gpu | None:
    """A GPU of the table by name, alias, nvidia-smi product name or k8s product label
    ('NVIDIA-A100-SXM4-80GB', 'NVIDIA H100 80GB HBM3', 'h100', 'A100-80GB')."""
    wanted = _norm(name)
    if not wanted:
        return None
    for gpu in gpu_table():
        if wanted in {_norm(gpu.name), *(_norm(a) for a in gpu.aliases)}:
            return gpu
    return None


def gpu_names() -> list[str]:
    return [g.name for g in gpu_table()]


SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([KMGT]i?B?|B)?\s*$", re.IGNORECASE)
UNITS = {
    "b": 1,
    "kib": 1 << 10,
    "mib": 1 << 20,
    "gib": 1 << 30,
    "tib": 1 << 40,
    "ki": 1 << 10,
    "mi": 1 << 20,
    "gi": 1 << 30,
    "ti": 1 << 40,
    "k": 1 << 10,
    "m": 1 << 20,
    "g": 1 << 30,
    "t": 1 << 40,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
}


def parse_size(text: str, default_unit: str = "gib") -> int:
    """'80GiB', '81920MiB', '80GB' (10^9), '80' (GiB) -> bytes; BadInput otherwise."""
    m = SIZE.match(str(text))
    if not m:
        raise BadInput(f"{text!r} is not a size (examples: 80GiB, 81920MiB, 24GB)")
    unit = (m.group(2) or default_unit).lower()
    return int(float(m.group(1)) * UNITS[unit])


def parse_count(text: str) -> int:
    """'7.6B', '70b', '405B', '1.5e9', '7000000000' -> parameters."""
    t = str(text).strip().lower().replace("_", "").replace(",", "")
    scale = {"k": 10**3, "m": 10**6, "b": 10**9, "t": 10**12}.get(t[-1:], 1)
    try:
        value = float(t[:-1] if scale != 1 else t) * scale
    except ValueError:
        value = math.nan
    if not 1 <= value < 1e16:  # also false for NaN and infinity
        raise BadInput(f"{text!r} is not a parameter count (examples: 7.6B, 70B)")
    return int(value)


# --- the plan ---------------------------------------------------------------------------------------


@dataclass
class CapacityInputs:
    shape: ModelShape
    gpu_memory_bytes: int  # per GPU, as CUDA reports it
    gpu_name: str | None = None
    gpu_memory_utilization: float = DEFAULT_UTILIZATION
    max_model_len: int | None = None
    tensor_parallel_size: int = 1
    kv_cache_dtype: str = "auto"
    dtype: str | None = None  # --dtype; None/auto = the config's
    block_size: int = DEFAULT_BLOCK_SIZE
    mean_seq_len: int | None = None
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    weights_bytes: int | None = None  # whole model; None = from parameters
    weights_source: str = ""
    parameters: int | None = None
    overhead_bytes: int | None = None  # activation peak + non-torch; None = estimate
    kv_cache_bytes: int | None = None  # vLLM's own "Available KV cache memory"; skips the budget


@dataclass
class CapacityPlan:
    """Every number of the arithmetic, and the steps as text lines."""

    kv_bytes_per_token: int  # per GPU, all layers, as if every layer kept every token
    kv_bytes_per_token_model: int  # whole model (before TP split)
    budget_bytes: int | None
    weights_bytes_per_gpu: int | None
    overhead_bytes: int | None
    overhead_estimated: bool
    kv_cache_bytes: int
    block_bytes: int
    num_blocks: int
    kv_tokens: int
    max_model_len: int
    seq_bytes: int  # KV memory one max-model-len request needs
    concurrency: float
    fits: bool
    estimated_max_model_len: int | None
    suggested_max_num_seqs: int | None
    default_max_num_seqs: int
    max_num_batched_tokens: int
    steps: list[str]
    notes: list[str]
    vllm_error: str | None
    vllm_error_v0: str | None
    inputs: CapacityInputs

    def to_json(self) -> dict[str, Any]:
        i = self.inputs
        return {
            "model": {
                "layers": i.shape.layers,
                "kv_heads": i.shape.kv_heads,
                "head_dim": i.shape.head_dim,
                "attention": "mla"
                if i.shape.is_mla
                else "gqa"
                if i.shape.kv_heads < i.shape.attention_heads
                else "mha",
                "sliding_window": i.shape.sliding_window,
                "sliding_layers": i.shape.sliding_layers,
            },
            "gpu": i.gpu_name,
            "gpu_memory_bytes": i.gpu_memory_bytes,
            "gpu_memory_utilization": i.gpu_memory_utilization,
            "tensor_parallel_size": i.tensor_parallel_size,
            "kv_cache_dtype": i.kv_cache_dtype,
            "block_size": i.block_size,
            "max_model_len": self.max_model_len,
            "kv_bytes_per_token": self.kv_bytes_per_token,
            "kv_bytes_per_token_model": self.kv_bytes_per_token_model,
            "budget_bytes": self.budget_bytes,
            "weights_bytes_per_gpu": self.weights_bytes_per_gpu,
            "weights_source": i.weights_source,
            "overhead_bytes": self.overhead_bytes,
            "overhead_estimated": self.overhead_estimated,
            "kv_cache_bytes": self.kv_cache_bytes,
            "num_blocks": self.num_blocks,
            "kv_cache_tokens": self.kv_tokens,
            "bytes_per_sequence": self.seq_bytes,
            "max_concurrency": round(self.concurrency, 2),
            "full_sequences": int(self.concurrency),
            "fits": self.fits,
            "estimated_max_model_len": self.estimated_max_model_len,
            "mean_seq_len": i.mean_seq_len,
            "suggested_max_num_seqs": self.suggested_max_num_seqs,
            "default_max_num_seqs": self.default_max_num_seqs,
            "max_num_batched_tokens": self.max_num_batched_tokens,
            "vllm_error": self.vllm_error,
            "vllm_error_v0": self.vllm_error_v0,
            "steps": self.steps,
            "notes": self.notes,
        }


def gib(n: float) -> str:
    return f"{n / GiB:.2f} GiB"


def kv_bytes_per_token(shape: ModelShape, tp: int, kv_dtype_bytes: float) -> tuple[int, str]:
    """(bytes per token per GPU over all layers, the formula with the numbers)."""
    if shape.is_mla:
        width = (shape.kv_lora_rank or 0) + (shape.qk_rope_head_dim or 0)
        value = int(shape.layers * width * kv_dtype_bytes)
        return value, (
            f"{shape.layers} layers x ({shape.kv_lora_rank} kv_lora_rank + "
            f"{shape.qk_rope_head_dim} qk_rope_head_dim) x {_num(kv_dtype_bytes)} bytes"
        )
    heads = max(1, shape.kv_heads // tp)
    value = int(2 * shape.layers * heads * shape.head_dim * kv_dtype_bytes)
    split = f" ({shape.kv_heads} / TP {tp})" if tp > 1 else ""
    return value, (
        f"2 (K,V) x {shape.layers} layers x {heads} KV heads{split} x {shape.head_dim} head_dim "
        f"x {_num(kv_dtype_bytes)} bytes"
    )


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def default_batched_tokens(gpu_memory_bytes: int, gpu_name: str | None) -> int:
    """vLLM V1 server default: 8192 on GPUs of >= 70 GiB except the A100, else 2048."""
    name = (gpu_name or "").upper()
    big = gpu_memory_bytes >= 70 * GiB and "A100" not in name and "A800" not in name
    return 8192 if big else 2048


def default_max_num_seqs(gpu_memory_bytes: int, gpu_name: str | None) -> int:
    name = (gpu_name or "").upper()
    big = gpu_memory_bytes >= 70 * GiB and "A100" not in name and "A800" not in name
    return 1024 if big else 256


def estimate_overhead(shape: ModelShape, tp: int, batched: int, max_seqs: int) -> tuple[int, str]:
    """Activation peak of vLLM's profiling run + non-torch memory, per GPU (an estimate)."""
    width = shape.expert_intermediate_size if shape.experts else shape.intermediate_size
    per_token = (2 * width // tp + 6 * shape.hidden_size) * 2
    activation = batched * per_token
    sampler = min(max_seqs, batched) * shape.vocab_size * 4
    non_torch = NON_TORCH_BYTES + (NON_TORCH_TP_BYTES if tp > 1 else 0)
    total = int(activation + sampler + non_torch)
    text = (
        f"~{gib(total)} estimated = activations {batched} batched tokens x "
        f"{per_token:,} B ({gib(activation)}) + sampler {min(max_seqs, batched)} x "
        f"{shape.vocab_size:,} vocab x 4 B ({gib(sampler)}) + non-torch {gib(non_torch)}"
    )
    return total, text


def sequence_bytes(
    shape: ModelShape, tokens: int, per_layer_token: float, block: int, chunk: int
) -> int:
    """KV memory one request of `tokens` tokens holds on one GPU (block-rounded)."""
    full_tokens = _ceil_div(tokens, block) * block
    total = shape.full_layers * full_tokens * per_layer_token
    if shape.sliding_layers and shape.sliding_window:
        kept = min(shape.sliding_window - 1 + chunk, tokens)
        window_tokens = (_ceil_div(kept, block) + 1) * block
        total += shape.sliding_layers * min(window_tokens, full_tokens) * per_layer_token
    return int(total)


def plan(i: CapacityInputs) -> CapacityPlan:
    """Run the arithmetic; every step is also written out in `steps`."""
    shape = i.shape
    tp = max(1, int(i.tensor_parallel_size))
    if not 0 < i.gpu_memory_utilization <= 1:
        raise BadInput("--gpu-memory-utilization must be in (0, 1]")
    if i.block_size <= 0:
        raise BadInput("--block-size must be positive")
    if i.gpu_memory_bytes <= 0 and i.kv_cache_bytes is None:
        raise BadInput("the GPU memory must be more than 0 (e.g. --gpu-memory 80GiB)")
    _check_tensor_parallel(shape, tp)
    max_len = i.max_model_len or shape.max_position_embeddings
    if not max_len:
        raise BadInput("give --max-model-len (the config has no max_position_embeddings)")
    model_dtype = i.dtype if i.dtype not in (None, "auto") else shape.dtype
    kv_name = model_dtype if i.kv_cache_dtype in ("auto", None) else i.kv_cache_dtype
    kv_b = dtype_bytes(kv_name)
    if kv_b > 2:
        kv_b = 2  # vLLM serves float32 checkpoints in 16-bit unless --dtype float32
        kv_name = "float16/bfloat16 (from float32)"
    steps: list[str] = []
    notes = list(shape.notes)
    per_token, formula = kv_bytes_per_token(shape, tp, kv_b)
    per_token_model, _ = kv_bytes_per_token(shape, 1, kv_b)
    steps.append(
        f"KV cache per token: {formula} = {per_token:,} B ({per_token / MiB:.3f} MiB) per GPU"
        f" [{kv_name}]"
    )
    per_layer_token = per_token / shape.layers
    block_bytes = int(i.block_size * per_token)
    batched = i.max_num_batched_tokens or default_batched_tokens(i.gpu_memory_bytes, i.gpu_name)
    max_seqs_default = default_max_num_seqs(i.gpu_memory_bytes, i.gpu_name)
    max_seqs = i.max_num_seqs or max_seqs_default

    budget = weights_gpu = overhead = None
    overhead_estimated = False
    if i.kv_cache_bytes is not None:
        kv_memory = int(i.kv_cache_bytes)
        steps.append(f"KV cache memory: {gib(kv_memory)} per GPU (given, as vLLM logged it)")
    else:
        budget = int(i.gpu_memory_bytes * i.gpu_memory_utilization)
        label = f"{i.gpu_name}: " if i.gpu_name else ""
        steps.append(
            f"vLLM budget: {label}{gib(i.gpu_memory_bytes)} x {i.gpu_memory_utilization} "
            f"(--gpu-memory-utilization) = {gib(budget)} per GPU"
        )
        weights = i.weights_bytes
        if weights is None:
            params = i.parameters or estimate_parameters(shape)
            weights = weight_bytes_from_parameters(shape, params, i.dtype)
            source = i.weights_source or (
                "parameters given" if i.parameters else "parameters estimated from config.json"
            )
            steps.append(f"weights: {params / 1e9:.2f}B parameters ({source}) = {gib(weights)}")
        else:
            steps.append(f"weights: {gib(weights)} ({i.weights_source or 'given'})")
        weights_gpu = weights // tp
        if tp > 1:
            steps.append(f"weights per GPU: {gib(weights)} / TP {tp} = {gib(weights_gpu)}")
        if i.overhead_bytes is not None:
            overhead = int(i.overhead_bytes)
            steps.append(f"activations + non-torch memory: {gib(overhead)} (given)")
        else:
            overhead, text = estimate_overhead(shape, tp, batched, max_seqs)
            overhead_estimated = True
            steps.append(f"activations + non-torch memory: {text}")
        kv_memory = budget - weights_gpu - overhead
        steps.append(
            f"KV cache memory: {gib(budget)} - {gib(weights_gpu)} - {gib(overhead)} = "
            f"{gib(kv_memory)} per GPU"
        )
    num_blocks = max(kv_memory, 0) // block_bytes if block_bytes else 0
    seq_bytes = sequence_bytes(shape, max_len, per_layer_token, i.block_size, batched)
    hybrid = bool(shape.sliding_layers)
    if hybrid:
        concurrency = max(kv_memory, 0) / seq_bytes if seq_bytes else 0.0
        kv_tokens = int(concurrency * max_len)
        steps.append(
            f"one {max_len:,}-token request holds {gib(seq_bytes)} ({shape.full_layers} full "
            f"layers x {max_len:,} tokens + {shape.sliding_layers} sliding layers x the window)"
        )
        steps.append(
            f"concurrency: {gib(max(kv_memory, 0))} / {gib(seq_bytes)} = {concurrency:.2f}x; "
            f"tokens (as vLLM counts them) = {concurrency:.2f} x {max_len:,} = {kv_tokens:,}"
        )
    else:
        kv_tokens = num_blocks * i.block_size
        per_request_blocks = _ceil_div(max_len, i.block_size)
        concurrency = num_blocks / per_request_blocks if per_request_blocks else 0.0
        steps.append(
            f"KV cache tokens: {gib(max(kv_memory, 0))} / ({i.block_size} tokens x "
            f"{per_token:,} B = {block_bytes:,} B per block) = {num_blocks:,} blocks x "
            f"{i.block_size} = {kv_tokens:,} tokens"
        )
        steps.append(
            f"full-length sequences: {num_blocks:,} blocks / {per_request_blocks:,} blocks per "
            f'{max_len:,}-token request = {concurrency:.2f}x (vLLM logs "Maximum concurrency '
            f'for {max_len:,} tokens per request: {concurrency:.2f}x")'
        )
    fits = kv_memory > 0 and seq_bytes <= kv_memory
    estimated = None
    error = error_v0 = None
    if kv_memory <= 0:
        error = (
            "ValueError: No available memory for the cache blocks. Try increasing "
            "`gpu_memory_utilization` when initializing the engine."
        )
        error_v0 = error
    elif not fits:
        estimated = _estimate_max_len(
            shape, kv_memory, max_len, per_layer_token, i.block_size, batched
        )
        extra = (
            f"Based on the available memory, the estimated maximum model length is {estimated}. "
            if estimated
            else ""
        )
        error = (
            f"ValueError: To serve at least one request with the models's max seq len "
            f"({max_len}), ({seq_bytes / GiB:.2f} GiB KV cache is needed, which is larger than "
            f"the available KV cache memory ({kv_memory / GiB:.2f} GiB). {extra}Try increasing "
            f"`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine."
        )
        error_v0 = (
            f"ValueError: The model's max seq len ({max_len}) is larger than the maximum number "
            f"of tokens that can be stored in KV cache ({kv_tokens}). Try increasing "
            f"`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine."
        )
    suggested = None
    if i.mean_seq_len:
        per_seq = sequence_bytes(shape, i.mean_seq_len, per_layer_token, i.block_size, batched)
        suggested = int(max(kv_memory, 0) // per_seq) if per_seq else 0
        steps.append(
            f"max-num-seqs: at a mean of {i.mean_seq_len:,} tokens per sequence "
            f"({gib(per_seq)} each), {gib(max(kv_memory, 0))} holds {suggested:,} sequences"
        )
        if suggested > max_seqs_default:
            notes.append(
                f"the KV cache holds more than vLLM's default --max-num-seqs {max_seqs_default}: "
                f"raise it to about {suggested} for more throughput, if latency allows"
            )
        elif suggested:
            notes.append(
                f"set --max-num-seqs {suggested} (default {max_seqs_default}): more concurrent "
                "sequences of that length would be preempted"
            )
    if overhead_estimated:
        notes.append(
            "the activation/non-torch overhead is an estimate; vLLM's own 'Available KV cache "
            "memory' line (or --kv-cache-memory) gives the exact figure"
        )
    return CapacityPlan(
        kv_bytes_per_token=per_token,
        kv_bytes_per_token_model=per_token_model,
        budget_bytes=budget,
        weights_bytes_per_gpu=weights_gpu,
        overhead_bytes=overhead,
        overhead_estimated=overhead_estimated,
        kv_cache_bytes=kv_memory,
        block_bytes=block_bytes,
        num_blocks=int(num_blocks),
        kv_tokens=int(kv_tokens),
        max_model_len=int(max_len),
        seq_bytes=seq_bytes,
        concurrency=concurrency,
        fits=fits,
        estimated_max_model_len=estimated,
        suggested_max_num_seqs=suggested,
        default_max_num_seqs=max_seqs_default,
        max_num_batched_tokens=batched,
        steps=steps,
        notes=notes,
        vllm_error=error,
        vllm_error_v0=error_v0,
        inputs=i,
    )


def _check_tensor_parallel(shape: ModelShape, tp: int) -> None:
    """vLLM refuses a TP size that does not split the attention heads (and, for GQA, the KV
    heads: split them when TP is smaller, replicate them evenly when it is larger)."""
    if shape.attention_heads % tp:
        raise BadInput(
            f"-tp {tp}: vLLM would refuse to start: Total number of attention heads "
            f"({shape.attention_heads}) must be divisible by tensor parallel size ({tp})."
        )
    kv = shape.kv_heads
    if not shape.is_mla and kv and (kv % tp if tp < kv else tp % kv):
        raise BadInput(
            f"-tp {tp}: vLLM cannot shard {kv} KV heads over {tp} GPUs (one must divide the "
            "other); use a TP size that divides or is a multiple of the KV heads"
        )


def _estimate_max_len(
    shape: ModelShape, available: int, max_len: int, per_layer_token: float, block: int, chunk: int
) -> int:
    """The longest max-model-len whose one request fits (vLLM's binary search)."""
    if sequence_bytes(shape, 1, per_layer_token, block, chunk) > available:
        return 0
    low, high, best = 1, max_len, 1
    while low <= high:
        mid = (low + high) // 2
        if sequence_bytes(shape, mid, per_layer_token, block, chunk) <= available:
            best, low = mid, mid + 1
        else:
            high = mid - 1
    return best
