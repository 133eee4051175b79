"""KV-cache arithmetic for vLLM: how many tokens and sequences fit, shown step by step.

Per GPU, vLLM sizes its KV cache at startup as

    budget     = GPU memory x --gpu-memory-utilization   (or --kv-cache-memory-bytes, given)
    KV memory  = budget - weights/TP - (activation peak + non-torch memory, from a profiling run)
    blocks     = KV memory // (block_size x KV bytes per token);  tokens = blocks x block_size
    concurrency (full-length requests) = blocks / ceil(max_model_len / block_size)

and refuses to start when one max-model-len request does not fit. KV bytes per token:

* standard / GQA attention: 2 (K and V) x attention layers x KV heads per GPU x head_dim x dtype
  bytes, KV heads per GPU = max(1, num_key_value_heads // TP);
* MLA (DeepSeek-V2/V3): layers x (kv_lora_rank + qk_rope_head_dim) x dtype bytes, the same on
  every GPU (the latent is not split by TP);
* sliding-window layers hold at most the window (+ one prefill chunk) per sequence;
* linear-attention / Mamba layers (Qwen3-Next, Qwen3.5, Nemotron-H) hold no K/V but one
  fixed-size state per sequence. vLLM then raises the attention block size until one attention
  page is at least one state page, pads the state page to it, splits the layers into groups of
  equal size that share one pool of blocks, and needs one state block per running sequence: with
  CUDA graphs, --max-num-seqs above the number of blocks stops the start.

The activation peak cannot be known without running the model; it is estimated from the batch
vLLM profiles with (max_num_batched_tokens), the MLP width and the vocabulary, calibrated on
real vLLM startup logs (tests/fixtures/capacity). Pass `overhead_bytes` (or read vLLM's own
"Available KV cache memory" line and pass `kv_cache_bytes`) to replace the estimate.
Model shapes live in llmdoctor.capacity.model_shape, weights in llmdoctor.capacity.model_weights, GPUs in
llmdoctor.gpus.catalog. This module is a library: no typer, no rich.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from llmdoctor.capacity.model_shape import (  # noqa: F401
    DTYPE_BYTES,
    KV_CACHE_DTYPES,
    ModelShape,
    dtype_bytes,
    indexer_bytes,
    load_model_config,
    model_shape,
)
from llmdoctor.capacity.model_weights import (  # noqa: F401
    SafetensorsWeights,
    estimate_parameters,
    parameter_breakdown,
    safetensors_weights,
    weight_bytes_from_parameters,
)
from llmdoctor.errors import BadInput
from llmdoctor.gpus.catalog import (  # noqa: F401  (re-exported for callers of capacity)
    Gpu,
    batch_defaults,
    find_gpu,
    gpu_names,
    gpu_table,
    gpus_named_like,
    parse_count,
    parse_size,
)

GiB = 1 << 30
MiB = 1 << 20
# Overhead model (activation peak + non-torch memory), calibrated on vLLM 0.10 V1 startup logs
NON_TORCH_BYTES = 0.25 * GiB  # CUDA context, cuBLAS workspaces ... on one GPU
NON_TORCH_TP_BYTES = 0.2 * GiB  # + NCCL / custom all-reduce buffers when TP > 1
DEFAULT_BLOCK_SIZE = 16
DEFAULT_UTILIZATION = 0.9
KERNEL_BLOCK_ALIGNMENT = 16  # vLLM rounds a hybrid model's attention block size to this
GROUP_SIZE_SLACK = 1.5  # vLLM pads layer groups to the largest type when within this ratio
MAMBA_RUNBOOK = "mamba-cache-blocks-exceeded"
# 0.9 x 139.6 GiB - 74.28 GiB weights - 44.59 GiB KV (tests/fixtures/capacity, Qwen3-Next log)
MOE_MEASURED_OVERHEAD_GIB = 6.8


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
    kv_cache_memory_bytes: int | None = None  # --kv-cache-memory-bytes: overrides utilization
    performance_mode: str | None = None  # --performance-mode; "throughput" doubles the defaults
    enforce_eager: bool = False  # no CUDA graphs: no Mamba-block check at startup
    prefix_caching: bool = False  # hybrid models then keep 2 state blocks per sequence
    hybrid_kv_cache: bool = True  # vLLM's hybrid KV-cache manager (sliding/chunked layers)
    # VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE (default 1): 0 turns the hybrid manager
    # off for models with chunked local attention
    chunked_local_hybrid: bool = True
    data_parallel_size: int = 1


@dataclass
class CapacityPlan:
    """Every number of the arithmetic, and the steps as text lines."""

    kv_bytes_per_token: int  # per GPU, all attention layers, as if every layer kept every token
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
    block_size: int = DEFAULT_BLOCK_SIZE
    max_num_seqs: int = 0  # the value vLLM will run with (given, else its default)
    state_bytes_per_sequence: int = 0  # per GPU, all linear/Mamba layers
    mamba_cache_blocks: int | None = None  # hybrid models: blocks = the max_num_seqs ceiling
    kv_tokens_v0_10: int | None = None  # "GPU KV cache size" as vLLM <= 0.11 counted hybrids
    weights_fit: bool = True
    suggestions: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    runbooks: list[str] = field(default_factory=list)
    # what of the model the arithmetic does not understand, each with what it assumed instead:
    # then neither "fits" nor "does not fit" is said
    not_modelled: list[str] = field(default_factory=list)

    @property
    def modelled(self) -> bool:
        return not self.not_modelled

    def to_json(self) -> dict[str, Any]:
        i = self.inputs
        shape = i.shape
        attention = (
            "mla" if shape.is_mla else "gqa" if shape.kv_heads < shape.attention_heads else "mha"
        )
        return {
            "model": {
                "layers": shape.layers,
                "attention_layers": shape.attention_layers,
                "state_layers": shape.state_layers,
                "state_kind": shape.state.kind if shape.state else None,
                "kv_heads": shape.kv_heads,
                "head_dim": shape.head_dim,
                "attention": attention,
                "sliding_window": shape.sliding_window,
                "sliding_layers": shape.sliding_layers,
                "quantization": shape.quant_method,
                "quant_bits": shape.quant_bits,
                "max_position_embeddings": shape.max_position_embeddings,
            },
            "gpu": i.gpu_name,
            "gpu_memory_bytes": i.gpu_memory_bytes,
            "gpu_memory_utilization": i.gpu_memory_utilization,
            "kv_cache_memory_bytes": i.kv_cache_memory_bytes,
            "tensor_parallel_size": i.tensor_parallel_size,
            "data_parallel_size": i.data_parallel_size,
            "kv_cache_dtype": i.kv_cache_dtype,
            "block_size": self.block_size,
            "max_model_len": self.max_model_len,
            "kv_bytes_per_token": self.kv_bytes_per_token,
            "kv_bytes_per_token_model": self.kv_bytes_per_token_model,
            "state_bytes_per_sequence": self.state_bytes_per_sequence,
            "budget_bytes": self.budget_bytes,
            "weights_bytes_per_gpu": self.weights_bytes_per_gpu,
            "weights_source": i.weights_source,
            "weights_fit": self.weights_fit,
            "overhead_bytes": self.overhead_bytes,
            "overhead_estimated": self.overhead_estimated,
            "kv_cache_bytes": self.kv_cache_bytes,
            "num_blocks": self.num_blocks,
            "mamba_cache_blocks": self.mamba_cache_blocks,
            "kv_cache_tokens": self.kv_tokens,
            "bytes_per_sequence": self.seq_bytes,
            "max_concurrency": round(self.concurrency, 2),
            "full_sequences": int(self.concurrency),
            "fits": self.fits if self.modelled else None,
            "modelled": self.modelled,
            "not_modelled": self.not_modelled,
            "estimated_max_model_len": self.estimated_max_model_len,
            "mean_seq_len": i.mean_seq_len,
            "suggested_max_num_seqs": self.suggested_max_num_seqs,
            "max_num_seqs": self.max_num_seqs,
            "default_max_num_seqs": self.default_max_num_seqs,
            "max_num_batched_tokens": self.max_num_batched_tokens,
            "vllm_error": self.vllm_error,
            "vllm_error_v0": self.vllm_error_v0,
            "suggestions": self.suggestions,
            "warnings": self.warnings,
            "runbooks": self.runbooks,
            "steps": self.steps,
            "notes": self.notes,
        }


def gib(n: float) -> str:
    return f"{n / GiB:.2f} GiB"


FLASHMLA_BLOCK_SIZE = 64
FP8_DS_MLA_BYTES = 656  # vLLM MLAAttentionSpec: 512 fp8 latent + 4 fp32 scales + 64 bf16 RoPE


def resolve_kv_cache_dtype(shape: ModelShape, requested: str, model_dtype: str) -> str:
    """The cache dtype vLLM stores: DeepSeek-V3.2 (index_topk) turns any fp8 into fp8_ds_mla
    and bfloat16 into auto (vLLM DeepseekV32ForCausalLM.verify_and_update_config)."""
    if shape.indexer_head_dim and requested.startswith("fp8"):
        return "fp8_ds_mla"
    if requested in ("auto", None, "") or (shape.indexer_head_dim and requested == "bfloat16"):
        return model_dtype
    return requested


def attention_page_per_token(
    shape: ModelShape, tp: int, kv_dtype_bytes: float, kv_dtype: str = ""
) -> int:
    """Bytes one token takes in one attention layer on one GPU (with V3.2's indexer key)."""
    if shape.is_mla:
        if kv_dtype == "fp8_ds_mla":
            latent = FP8_DS_MLA_BYTES
        else:
            latent = int(
                ((shape.kv_lora_rank or 0) + (shape.qk_rope_head_dim or 0)) * kv_dtype_bytes
            )
        return latent + (indexer_bytes(shape.indexer_head_dim) if shape.indexer_head_dim else 0)
    return int(2 * max(1, shape.kv_heads // tp) * shape.head_dim * kv_dtype_bytes)


def kv_bytes_per_token(
    shape: ModelShape, tp: int, kv_dtype_bytes: float, kv_dtype: str = ""
) -> tuple[int, str]:
    """(bytes per token per GPU over all attention layers, the formula with the numbers)."""
    layers = shape.attention_layers
    of = (
        f" (of {shape.layers}; the other {shape.state_layers} keep a state)"
        if (shape.state_layers)
        else ""
    )
    value = layers * attention_page_per_token(shape, tp, kv_dtype_bytes, kv_dtype)
    if shape.is_mla:
        if kv_dtype == "fp8_ds_mla":
            latent = (
                f"{FP8_DS_MLA_BYTES} B (fp8_ds_mla: {shape.kv_lora_rank} kv_lora_rank fp8 + "
                f"4 fp32 scales + {shape.qk_rope_head_dim} qk_rope_head_dim bf16; vLLM "
                "MLAAttentionSpec)"
            )
        else:
            latent = (
                f"({shape.kv_lora_rank} kv_lora_rank + {shape.qk_rope_head_dim} "
                f"qk_rope_head_dim) x {_num(kv_dtype_bytes)} bytes"
            )
        indexer = (
            f" + {indexer_bytes(shape.indexer_head_dim)} B indexer key (index_head_dim "
            f"{shape.indexer_head_dim} fp8 + fp32 scale)"
            if shape.indexer_head_dim
            else ""
        )
        per_layer = f"({latent}{indexer})" if indexer else latent
        return value, f"{layers} MLA layers{of} x {per_layer}, on every GPU (not split by TP)"
    heads = max(1, shape.kv_heads // tp)
    split = f" ({shape.kv_heads} / TP {tp})" if tp > 1 else ""
    per_head = f"{shape.head_dim} head_dim x {_num(kv_dtype_bytes)} bytes"
    if kv_dtype == "nvfp4":
        per_head = (
            f"({shape.head_dim}/2 fp4 + {shape.head_dim}/16 fp8 scales) bytes (vLLM "
            "nvfp4_kv_cache_full_dim)"
        )
    return value, (
        f"2 (K,V) x {layers} attention layers{of} x {heads} KV heads{split} x {per_head}"
    )


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def default_batched_tokens(gpu_memory_bytes: int, gpu_name: str | None) -> int:
    """vLLM's API-server default --max-num-batched-tokens for this GPU (data file)."""
    return batch_defaults(gpu_memory_bytes, gpu_name)[0]


def default_max_num_seqs(gpu_memory_bytes: int, gpu_name: str | None) -> int:
    """vLLM's API-server default --max-num-seqs for this GPU (data file)."""
    return batch_defaults(gpu_memory_bytes, gpu_name)[1]


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
    """KV memory one request of `tokens` tokens holds on one GPU (block-rounded, no state)."""
    full_tokens = _ceil_div(tokens, block) * block
    total = shape.full_layers * full_tokens * per_layer_token
    if shape.sliding_layers and shape.sliding_window:
        kept = min(shape.sliding_window - 1 + chunk, tokens)
        window_tokens = (_ceil_div(kept, block) + 1) * block
        total += shape.sliding_layers * min(window_tokens, full_tokens) * per_layer_token
    if shape.chunked_layers:
        total += (
            shape.chunked_layers
            * _chunk_blocks(shape, tokens, block, chunk)
            * block
            * per_layer_token
        )
    return int(total)


def _chunk_blocks(shape: ModelShape, tokens: int, block: int, batched: int) -> int:
    """Blocks a chunked-local-attention layer keeps per request: the chunk plus one batch of new
    tokens (vLLM ChunkedLocalAttentionSpec.max_memory_usage_bytes)."""
    return _ceil_div(min((shape.attention_chunk_size or 0) + batched, tokens), block)


@dataclass
class _Layout:
    """How vLLM lays out a hybrid model's cache: block size, layer groups, blocks per request."""

    block_size: int
    page_bytes: int  # one block of one layer
    group_size: int  # layers per group; one pool block holds group_size pages
    full_groups: int
    sliding_groups: int
    state_groups: int
    state_blocks_per_seq: int
    chunked_groups: int = 0

    @property
    def groups(self) -> int:
        return self.full_groups + self.sliding_groups + self.state_groups + self.chunked_groups

    @property
    def pool_block_bytes(self) -> int:
        return self.page_bytes * self.group_size

    def blocks_for(self, shape: ModelShape, tokens: int, chunk: int) -> int:
        """Pool blocks one request of `tokens` tokens takes (vLLM's per-group max usage)."""
        full = _ceil_div(tokens, self.block_size)
        blocks = self.full_groups * full + self.state_groups * self.state_blocks_per_seq
        if self.sliding_groups and shape.sliding_window:
            kept = _ceil_div(shape.sliding_window - 1 + chunk, self.block_size) + 1
            blocks += self.sliding_groups * min(full, kept)
        if self.chunked_groups:
            blocks += self.chunked_groups * _chunk_blocks(shape, tokens, self.block_size, chunk)
        return blocks

    def bytes_for(self, shape: ModelShape, tokens: int, chunk: int) -> int:
        """Memory one request needs, layer by layer (vLLM's check_enough_kv_cache_memory)."""
        full = _ceil_div(tokens, self.block_size)
        total = shape.full_layers * full
        if shape.state is not None:
            total += shape.state_layers * self.state_blocks_per_seq
        if shape.sliding_layers and shape.sliding_window:
            kept = _ceil_div(shape.sliding_window - 1 + chunk, self.block_size) + 1
            total += shape.sliding_layers * min(full, kept)
        if shape.chunked_layers:
            total += shape.chunked_layers * _chunk_blocks(shape, tokens, self.block_size, chunk)
        return total * self.page_bytes


def _hybrid_layout(
    shape: ModelShape, block_size: int, attn_page_token: int, state_bytes: int, prefix: bool
) -> tuple[_Layout, list[str]]:
    """vLLM's page-size unification and layer grouping for models with more than one layer kind."""
    steps = []
    if state_bytes:
        needed = KERNEL_BLOCK_ALIGNMENT * _ceil_div(
            state_bytes, KERNEL_BLOCK_ALIGNMENT * attn_page_token
        )
        if block_size < needed:
            steps.append(
                f"attention block size raised from {block_size} to {needed} tokens, so that one "
                f"attention page ({needed} x {attn_page_token:,} B = {needed * attn_page_token:,} B)"
                f" is at least one state page ({state_bytes:,} B); the state page is padded by "
                f"{100 * (needed * attn_page_token - state_bytes) / state_bytes:.2f}% "
                '(vLLM logs "Setting attention block size to '
                f'{needed} tokens")'
            )
            block_size = needed
    counts = {
        "full": shape.full_layers,
        "sliding": shape.sliding_layers,
        "chunked local": shape.chunked_layers,
        "state": shape.state_layers if shape.state is not None else 0,
    }
    present = [n for n in counts.values() if n]
    group_size = min(present)
    if max(present) < min(present) * GROUP_SIZE_SLACK:
        group_size = max(present)
    layout = _Layout(
        block_size=block_size,
        page_bytes=block_size * attn_page_token,
        group_size=group_size,
        full_groups=_ceil_div(counts["full"], group_size),
        sliding_groups=_ceil_div(counts["sliding"], group_size),
        state_groups=_ceil_div(counts["state"], group_size),
        state_blocks_per_seq=2 if prefix else 1,
        chunked_groups=_ceil_div(counts["chunked local"], group_size),
    )
    kinds = ", ".join(f"{n} {k}" for k, n in counts.items() if n)
    steps.append(
        f"layer groups: {kinds} layers in groups of {group_size} = {layout.groups} groups sharing "
        f"one pool; one pool block = {group_size} x {layout.page_bytes:,} B = "
        f"{layout.pool_block_bytes:,} B"
    )
    return layout, steps


def _kv_cache_manager(
    shape: ModelShape, hybrid: bool, chunked_hybrid: bool, steps: list[str]
) -> ModelShape:
    """The layers vLLM's KV-cache manager keeps every token of: with the hybrid manager off,
    sliding-window and chunked layers are allocated as full attention."""
    if shape.chunked_layers and hybrid and not chunked_hybrid:
        hybrid = False
        steps.append(
            "VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=0: vLLM turns the hybrid "
            "KV-cache manager off for chunked local attention (vllm/config/vllm.py)"
        )
    if shape.chunked_layers and hybrid:
        steps.append(
            f"chunked local attention: the hybrid KV-cache manager keeps "
            f"attention_chunk_size {shape.attention_chunk_size} + one batch of tokens per "
            f"request in the {shape.chunked_layers} chunked layers "
            "(VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=1, vLLM 0.33's default; with 0, "
            "or with EAGLE speculative decoding, every layer keeps every token: plan that with "
            "--disable-hybrid-kv-cache-manager)"
        )
    if hybrid or not (shape.sliding_layers or shape.chunked_layers):
        return shape
    steps.append(
        f"hybrid KV-cache manager off: {shape.sliding_layers + shape.chunked_layers} "
        "sliding/chunked layers are allocated like full attention (vLLM FullAttentionSpec)"
    )
    return replace(
        shape, sliding_layers=0, sliding_window=None, chunked_layers=0, attention_chunk_size=None
    )


def plan(i: CapacityInputs) -> CapacityPlan:
    """Run the arithmetic; every step is also written out in `steps`."""
    shape = i.shape
    tp = max(1, int(i.tensor_parallel_size))
    _check_inputs(i, shape, tp)
    max_len = i.max_model_len or shape.max_position_embeddings
    if not max_len:
        raise BadInput("give --max-model-len (the config has no max_position_embeddings)")
    model_dtype = i.dtype if i.dtype not in (None, "auto") else shape.dtype
    model_b = min(dtype_bytes(model_dtype), 2) if shape.quant_bits else dtype_bytes(model_dtype)
    steps: list[str] = [f"layers: {t}" for t in shape.traces]
    if shape.is_mla and i.block_size % FLASHMLA_BLOCK_SIZE:
        steps.append(
            f"block size {FLASHMLA_BLOCK_SIZE}, not {i.block_size}: vLLM forces it for its MLA "
            'kernels on NVIDIA GPUs (vllm/platforms/cuda.py, "Forcing kv cache block size to 64 '
            'for FlashMLA backend"; 128 with CUTLASS MLA on Blackwell)'
        )
        i = replace(i, block_size=FLASHMLA_BLOCK_SIZE)
    shape = _kv_cache_manager(shape, i.hybrid_kv_cache, i.chunked_local_hybrid, steps)
    not_modelled = list(shape.not_modelled)
    kv_name = resolve_kv_cache_dtype(shape, i.kv_cache_dtype or "auto", model_dtype)
    if kv_name != (i.kv_cache_dtype or "auto") and kv_name == "fp8_ds_mla":
        steps.append(
            f"--kv-cache-dtype {i.kv_cache_dtype}: DeepSeek-V3.2 sparse attention stores "
            "fp8_ds_mla (vLLM DeepseekV32ForCausalLM.verify_and_update_config)"
        )
    if shape.is_mla and kv_name == "nvfp4":
        not_modelled.append("an nvfp4 KV cache for MLA layers; assumed: 1 byte per element")
    kv_b = dtype_bytes(kv_name)
    if kv_b > 2:
        kv_b = 2  # vLLM serves float32 checkpoints in 16-bit unless --dtype float32
        kv_name = "float16/bfloat16 (from float32)"
    notes = list(shape.notes)
    warnings = _length_warnings(shape, max_len)
    per_token, formula = kv_bytes_per_token(shape, tp, kv_b, kv_name)
    per_token_model, _ = kv_bytes_per_token(shape, 1, kv_b, kv_name)
    steps.append(
        f"KV cache per token: {formula} = {per_token:,} B ({per_token / MiB:.3f} MiB) per GPU"
        f" [{kv_name}]"
    )
    attn_page_token = attention_page_per_token(shape, tp, kv_b, kv_name)
    state_bytes = shape.state.bytes_per_gpu(tp, min(model_b, 2)) if shape.state else 0
    if state_bytes:
        steps.append(
            f"state per sequence: {shape.state_layers} {shape.state.kind} layers x "
            f"{state_bytes:,} B per GPU ({gib(shape.state_layers * state_bytes)})"
        )
    throughput = (i.performance_mode or "") == "throughput"
    batched_default, seqs_default, why = batch_defaults(
        i.gpu_memory_bytes, i.gpu_name, throughput_mode=throughput
    )
    batched = i.max_num_batched_tokens or batched_default
    max_seqs = i.max_num_seqs or seqs_default
    if not i.max_num_seqs:
        steps.append(f"max_num_seqs: {max_seqs} ({why})")
    memory = _memory(i, shape, tp, batched, max_seqs, steps)
    kv_memory = memory["kv_memory"]

    blocks = _cache_blocks(
        shape, i, kv_memory, max_len, batched, per_token, attn_page_token, state_bytes, steps
    )
    layout, block_size = blocks["layout"], blocks["block_size"]
    num_blocks, concurrency = blocks["num_blocks"], blocks["concurrency"]
    kv_tokens, seq_bytes, block_bytes = blocks["kv_tokens"], blocks["seq_bytes"], blocks["bytes"]
    result = CapacityPlan(
        kv_bytes_per_token=per_token,
        kv_bytes_per_token_model=per_token_model,
        budget_bytes=memory["budget"],
        weights_bytes_per_gpu=memory["weights_gpu"],
        overhead_bytes=memory["overhead"],
        overhead_estimated=memory["overhead_estimated"],
        kv_cache_bytes=kv_memory,
        block_bytes=block_bytes,
        num_blocks=int(num_blocks),
        kv_tokens=int(kv_tokens),
        max_model_len=int(max_len),
        seq_bytes=int(seq_bytes),
        concurrency=concurrency,
        fits=kv_memory > 0 and seq_bytes <= kv_memory,
        estimated_max_model_len=None,
        suggested_max_num_seqs=None,
        default_max_num_seqs=seqs_default,
        max_num_batched_tokens=batched,
        steps=steps,
        notes=notes,
        vllm_error=None,
        vllm_error_v0=None,
        inputs=i,
        block_size=block_size,
        max_num_seqs=max_seqs,
        state_bytes_per_sequence=shape.state_layers * state_bytes,
        weights_fit=memory["weights_fit"],
        warnings=warnings,
    )
    if layout is not None:
        result.kv_tokens_v0_10 = int(num_blocks // layout.groups * layout.block_size)
        if state_bytes:
            result.mamba_cache_blocks = int(num_blocks)
    _verdict(result, shape, layout, batched)
    if not_modelled:
        result.not_modelled = [f"not modelled: {n}" for n in not_modelled]
        result.vllm_error = result.vllm_error_v0 = None
        result.suggestions, result.runbooks = [], []
        result.estimated_max_model_len = None
    _suggest_max_num_seqs(result, shape, layout, batched)
    if memory["overhead_estimated"]:
        notes.append(
            "the activation/non-torch overhead is an estimate; vLLM's own 'Available KV cache "
            "memory' line (or --kv-cache-memory) gives the exact figure"
        )
        if shape.experts:
            notes.append(
                "MoE models: vLLM has measured far more non-KV memory than this estimate (about "
                f"{MOE_MEASURED_OVERHEAD_GIB:g} GiB per GPU for Qwen3-Next-80B, TP 2 on H200, vLLM "
                "0.10.2); when the fit is tight, check vLLM's logged KV cache memory"
            )
    return result


def _cache_blocks(
    shape: ModelShape,
    i: CapacityInputs,
    kv_memory: int,
    max_len: int,
    batched: int,
    per_token: int,
    attn_page_token: int,
    state_bytes: int,
    steps: list[str],
) -> dict[str, Any]:
    """Blocks, concurrency and tokens: one pool of blocks, or vLLM's hybrid groups."""
    kv = max(kv_memory, 0)
    if (
        shape.sliding_layers
        or shape.chunked_layers
        or (shape.state_layers and shape.state is not None)
    ):
        layout, layout_steps = _hybrid_layout(
            shape, i.block_size, attn_page_token, state_bytes, i.prefix_caching
        )
        steps += layout_steps
        num_blocks = kv // layout.pool_block_bytes
        per_request = layout.blocks_for(shape, max_len, batched)
        concurrency = num_blocks / per_request if per_request else 0.0
        out = {
            "layout": layout,
            "block_size": layout.block_size,
            "bytes": layout.pool_block_bytes,
            "num_blocks": num_blocks,
            "concurrency": concurrency,
            "kv_tokens": int(concurrency * max_len),
            "seq_bytes": layout.bytes_for(shape, max_len, batched),
        }
        steps.append(
            f"blocks: {gib(kv)} / {layout.pool_block_bytes:,} B = {num_blocks:,}; "
            f"one {max_len:,}-token request takes {per_request:,} of them "
            f"({gib(out['seq_bytes'])}); concurrency {num_blocks:,} / {per_request:,} = "
            f"{concurrency:.2f}x; tokens {concurrency:.2f} x {max_len:,} = {out['kv_tokens']:,}"
        )
        return out
    block_size = i.block_size
    block_bytes = int(block_size * per_token)
    num_blocks = kv // block_bytes if block_bytes else 0
    per_layer = per_token / max(shape.attention_layers, 1)
    per_request = _ceil_div(max_len, block_size)
    concurrency = num_blocks / per_request if per_request else 0.0
    kv_tokens = num_blocks * block_size
    steps.append(
        f"KV cache tokens: {gib(kv)} / ({block_size} tokens x {per_token:,} B = "
        f"{block_bytes:,} B per block) = {num_blocks:,} blocks x {block_size} = "
        f"{kv_tokens:,} tokens"
    )
    steps.append(
        f"full-length sequences: {num_blocks:,} blocks / {per_request:,} blocks per "
        f'{max_len:,}-token request = {concurrency:.2f}x (vLLM logs "Maximum concurrency '
        f'for {max_len:,} tokens per request: {concurrency:.2f}x")'
    )
    return {
        "layout": None,
        "block_size": block_size,
        "bytes": block_bytes,
        "num_blocks": num_blocks,
        "concurrency": concurrency,
        "kv_tokens": kv_tokens,
        "seq_bytes": sequence_bytes(shape, max_len, per_layer, block_size, batched),
    }


def _check_inputs(i: CapacityInputs, shape: ModelShape, tp: int) -> None:
    if not 0 < i.gpu_memory_utilization <= 1:
        raise BadInput("--gpu-memory-utilization must be in (0, 1]")
    if i.block_size <= 0:
        raise BadInput("--block-size must be positive")
    if i.kv_cache_memory_bytes is not None and i.kv_cache_memory_bytes <= 0:
        raise BadInput("--kv-cache-memory-bytes must be more than 0")
    if i.gpu_memory_bytes <= 0 and i.kv_cache_bytes is None and i.kv_cache_memory_bytes is None:
        raise BadInput("the GPU memory must be more than 0 (e.g. --gpu-memory 80GiB)")
    if i.kv_cache_dtype not in (None, *KV_CACHE_DTYPES):
        raise BadInput(
            f"--kv-cache-dtype {i.kv_cache_dtype}: vLLM accepts {', '.join(KV_CACHE_DTYPES)}"
        )
    _check_tensor_parallel(shape, tp)
    if shape.attention_layers == 0 and shape.state is None:
        raise BadInput(
            "the model config has no attention layers and a state llmdoctor cannot size "
            f"({shape.model_type or 'unknown model type'})"
        )


def _length_warnings(shape: ModelShape, max_len: int) -> list[str]:
    limit = shape.max_position_embeddings
    if not limit or max_len <= limit:
        return []
    return [
        f"--max-model-len {max_len:,} is above the model's max_position_embeddings {limit:,}: "
        f'vLLM refuses to start ("User-specified max_model_len ({max_len}) is greater than the '
        f'derived max_model_len (max_position_embeddings={limit} ...)") unless '
        "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 is set, and the model may produce garbage beyond "
        "its trained length"
    ]


def _memory(
    i: CapacityInputs, shape: ModelShape, tp: int, batched: int, max_seqs: int, steps: list[str]
) -> dict[str, Any]:
    """The KV cache memory per GPU: given, or budget - weights - overhead."""
    out: dict[str, Any] = {
        "budget": None,
        "weights_gpu": None,
        "overhead": None,
        "overhead_estimated": False,
        "weights_fit": True,
    }
    if i.kv_cache_bytes is not None:
        out["kv_memory"] = int(i.kv_cache_bytes)
        steps.append(f"KV cache memory: {gib(out['kv_memory'])} per GPU (given, as vLLM logged it)")
        return out
    if i.kv_cache_memory_bytes is None:
        out["budget"] = int(i.gpu_memory_bytes * i.gpu_memory_utilization)
        label = f"{i.gpu_name}: " if i.gpu_name else ""
        steps.append(
            f"vLLM budget: {label}{gib(i.gpu_memory_bytes)} x {i.gpu_memory_utilization} "
            f"(--gpu-memory-utilization) = {gib(out['budget'])} per GPU"
        )
    weights = i.weights_bytes
    if weights is None:
        params = i.parameters or estimate_parameters(shape)
        weights = weight_bytes_from_parameters(shape, params, i.dtype)
        source = i.weights_source or (
            "parameters given" if i.parameters else "parameters estimated from config.json"
        )
        quant = f"; {shape.quant_note}" if shape.quant_bits and shape.quant_note else ""
        steps.append(f"weights: {params / 1e9:.2f}B parameters ({source}{quant}) = {gib(weights)}")
        if not i.parameters:
            steps.append(f"parameters: {parameter_trace(shape)}")
    else:
        steps.append(f"weights: {gib(weights)} ({i.weights_source or 'given'})")
    weights_gpu = weights // tp
    out["weights_gpu"] = weights_gpu
    if tp > 1:
        steps.append(f"weights per GPU: {gib(weights)} / TP {tp} = {gib(weights_gpu)}")
    if i.kv_cache_memory_bytes is not None:
        out["kv_memory"] = int(i.kv_cache_memory_bytes)
        steps.append(
            f"KV cache memory: {gib(out['kv_memory'])} per GPU (--kv-cache-memory-bytes; vLLM "
            "skips its memory profiling and ignores --gpu-memory-utilization)"
        )
        total = weights_gpu + out["kv_memory"]
        if i.gpu_memory_bytes and total > i.gpu_memory_bytes:
            out["weights_fit"] = weights_gpu < i.gpu_memory_bytes
            steps.append(
                f"weights + KV cache = {gib(total)} > the GPU's {gib(i.gpu_memory_bytes)}: "
                "vLLM would run out of memory allocating the cache"
            )
        return out
    budget = out["budget"]
    if i.overhead_bytes is not None:
        overhead = int(i.overhead_bytes)
        steps.append(f"activations + non-torch memory: {gib(overhead)} (given)")
    else:
        overhead, text = estimate_overhead(shape, tp, batched, max_seqs)
        out["overhead_estimated"] = True
        steps.append(f"activations + non-torch memory: {text}")
    out["overhead"] = overhead
    out["weights_fit"] = weights_gpu + overhead < budget
    out["kv_memory"] = budget - weights_gpu - overhead
    steps.append(
        f"KV cache memory: {gib(budget)} - {gib(weights_gpu)} - {gib(overhead)} = "
        f"{gib(out['kv_memory'])} per GPU"
    )
    return out


def _verdict(result: CapacityPlan, shape: ModelShape, layout: _Layout | None, chunk: int) -> None:
    """Whether vLLM starts: the weights, then one max-model-len request, then the Mamba blocks."""
    i = result.inputs
    max_len = result.max_model_len
    kv_memory = result.kv_cache_bytes
    if not result.weights_fit:
        result.fits = False
        result.vllm_error = (
            "ValueError: No available memory for the cache blocks. Try increasing "
            "`gpu_memory_utilization` when initializing the engine."
        )
        if (result.weights_bytes_per_gpu or 0) >= i.gpu_memory_bytes > 0:
            result.vllm_error = (
                "torch.OutOfMemoryError: CUDA out of memory (while loading the weights: "
                f"{gib(result.weights_bytes_per_gpu or 0)} per GPU on a "
                f"{gib(i.gpu_memory_bytes)} GPU)"
            )
        result.vllm_error_v0 = result.vllm_error
        result.suggestions += _weights_suggestions(result, shape)
        result.runbooks.append("vllm-startup-memory-insufficient")
        return
    if kv_memory <= 0:
        result.fits = False
        result.vllm_error = (
            "ValueError: No available memory for the cache blocks. Try increasing "
            "`gpu_memory_utilization` when initializing the engine."
        )
        result.vllm_error_v0 = result.vllm_error
        result.runbooks.append("vllm-startup-memory-insufficient")
        return
    if not result.fits:
        estimated = _estimate_max_len(result, shape, layout, chunk)
        result.estimated_max_model_len = estimated
        extra = (
            f"Based on the available memory, the estimated maximum model length is {estimated}. "
            if estimated
            else ""
        )
        result.vllm_error = (
            f"ValueError: To serve at least one request with the models's max seq len "
            f"({max_len}), ({result.seq_bytes / GiB:.2f} GiB KV cache is needed, which is larger "
            f"than the available KV cache memory ({kv_memory / GiB:.2f} GiB). {extra}Try "
            "increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing "
            "the engine."
        )
        result.vllm_error_v0 = (
            f"ValueError: The model's max seq len ({max_len}) is larger than the maximum number "
            f"of tokens that can be stored in KV cache ({result.kv_tokens}). Try increasing "
            f"`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine."
        )
        result.runbooks.append("kv-cache-too-small-for-max-model-len")
        return
    blocks = result.mamba_cache_blocks
    if blocks is not None and not i.enforce_eager and result.max_num_seqs > blocks:
        result.fits = False
        result.vllm_error = (
            f"ValueError: max_num_seqs ({result.max_num_seqs}) exceeds available Mamba cache "
            f"blocks ({blocks}). Each decode sequence requires one Mamba cache block, so CUDA "
            f"graph capture cannot proceed. Please lower max_num_seqs to at most {blocks} or "
            "increase gpu_memory_utilization."
        )
        result.suggestions.append(
            f"--max-num-seqs {blocks} or less (the KV cache itself fits: do not shorten "
            "--max-model-len for this)"
        )
        result.runbooks.append(MAMBA_RUNBOOK)


def parameter_trace(shape: ModelShape) -> str:
    """The parameter estimate by part, each with the config fields it multiplies."""
    parts = parameter_breakdown(shape)
    h = shape.hidden_size
    out = [
        f"embeddings {parts['embeddings'] / 1e9:.2f}B (vocab_size {shape.vocab_size:,} x "
        f"hidden_size {h:,}{'' if shape.tie_word_embeddings else ' x 2, lm_head untied'})",
        f"attention {parts['attention'] / 1e9:.2f}B ({shape.attention_layers} layers"
        + (", MLA through q_lora_rank / kv_lora_rank" if shape.is_mla else "")
        + ")",
    ]
    if parts["state"]:
        out.append(
            f"linear-attention/Mamba {parts['state'] / 1e9:.2f}B ({shape.state_layers} layers)"
        )
    if shape.experts:
        out.append(
            f"routed experts {parts['experts'] / 1e9:.2f}B ({shape.moe_layers} MoE layers x "
            f"{shape.experts} experts x 3 x {h:,} x {shape.expert_intermediate_size:,})"
        )
        dense = shape.dense_mlp_layers
        width = shape.dense_intermediate_size or shape.intermediate_size
        out.append(
            f"shared experts, routers and dense MLPs {parts['mlp'] / 1e9:.2f}B"
            + (f" ({dense} dense layers of {width:,})" if dense else "")
        )
    else:
        out.append(
            f"MLP {parts['mlp'] / 1e9:.2f}B (3 x {h:,} x {shape.intermediate_size:,} per layer)"
        )
    return "; ".join(out)


def _weights_suggestions(result: CapacityPlan, shape: ModelShape) -> list[str]:
    """What would make the weights fit: a larger TP that vLLM accepts, or a quantized checkpoint."""
    i = result.inputs
    weights_total = (result.weights_bytes_per_gpu or 0) * max(1, i.tensor_parallel_size)
    room = (result.budget_bytes or i.gpu_memory_bytes) - (result.overhead_bytes or 0)
    out = [
        f"the weights ({gib(result.weights_bytes_per_gpu or 0)} per GPU) do not fit in "
        f"{gib(max(room, 0))} left after activations; a higher --gpu-memory-utilization "
        "cannot fix that"
    ]
    for tp in (2, 4, 8, 16):
        if tp <= i.tensor_parallel_size:
            continue
        try:
            _check_tensor_parallel(shape, tp)
        except BadInput:
            continue
        one_request = result.seq_bytes * max(1, i.tensor_parallel_size) / tp
        if weights_total / tp + one_request < room:
            out.append(f"-tp {tp} ({gib(weights_total / tp)} of weights per GPU)")
            break
    if not shape.quant_bits:
        out.append(
            f"a quantized checkpoint: FP8 ~{gib(weights_total / 2)}, 4-bit (AWQ/GPTQ/NVFP4) "
            f"~{gib(weights_total * 0.28)} in all"
        )
    return out


def _suggest_max_num_seqs(
    result: CapacityPlan, shape: ModelShape, layout: _Layout | None, chunk: int
) -> None:
    i = result.inputs
    if not i.mean_seq_len:
        return
    kv = max(result.kv_cache_bytes, 0)
    if layout is not None:
        per_seq = layout.bytes_for(shape, i.mean_seq_len, chunk)
    else:
        per_layer = result.kv_bytes_per_token / max(shape.attention_layers, 1)
        per_seq = sequence_bytes(shape, i.mean_seq_len, per_layer, result.block_size, chunk)
    suggested = int(kv // per_seq) if per_seq else 0
    if result.mamba_cache_blocks is not None:
        suggested = min(suggested, result.mamba_cache_blocks)
    result.suggested_max_num_seqs = suggested
    result.steps.append(
        f"max-num-seqs: at a mean of {i.mean_seq_len:,} tokens per sequence "
        f"({gib(per_seq)} each), {gib(kv)} holds {suggested:,} sequences"
    )
    default = result.default_max_num_seqs
    if suggested > default:
        result.notes.append(
            f"the KV cache holds more than vLLM's default --max-num-seqs {default}: "
            f"raise it to about {suggested} for more throughput, if latency allows"
        )
    elif suggested:
        result.notes.append(
            f"set --max-num-seqs {suggested} (default {default}): more concurrent "
            "sequences of that length would be preempted"
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
    result: CapacityPlan, shape: ModelShape, layout: _Layout | None, chunk: int
) -> int:
    """The longest max-model-len whose one request fits (vLLM's binary search)."""
    available = result.kv_cache_bytes
    per_layer = result.kv_bytes_per_token / max(shape.attention_layers, 1)

    def need(tokens: int) -> int:
        if layout is not None:
            return layout.bytes_for(shape, tokens, chunk)
        return sequence_bytes(shape, tokens, per_layer, result.block_size, chunk)

    if need(1) > available:
        return 0
    low, high, best = 1, result.max_model_len, 1
    while low <= high:
        mid = (low + high) // 2
        if need(mid) <= available:
            best, low = mid, mid + 1
        else:
            high = mid - 1
    return best
