"""What of a Hugging Face config.json vLLM's memory depends on: layers by kind, heads, state.

Layers are sorted into the kinds vLLM caches differently:

* ``full``: full attention, K and V for every token (GQA: num_key_value_heads x head_dim);
* ``sliding``: sliding-window attention, at most the window per sequence (gpt-oss, Gemma 2/3);
* ``state``: linear attention / Mamba layers (Qwen3-Next, Qwen3.5 Gated DeltaNet, Nemotron-H,
  Granite 4, Jamba), which keep one fixed-size state per sequence instead of K and V;
* MLA models (DeepSeek-V2/V3) cache one latent per token and layer.

The layout comes from ``layer_types``, ``full_attention_interval``, ``hybrid_override_pattern``,
``attn_layer_period``/``attn_layer_offset`` or ``sliding_window_pattern``; quantization from
``quantization_config`` (see llmdoctor.capacity.model_weights). A library: no I/O but load_model_config.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llmdoctor.errors import BadInput

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
    "fp8_ds_mla": 1,
    "int8": 1,
    "uint8": 1,
    "int4": 0.5,
    "nvfp4": 0.5625,  # 4 bits + one FP8 scale per 16 values
}
# --kv-cache-dtype values vLLM accepts (vllm/config/cache.py, CacheDType, v0.33.0)
KV_CACHE_DTYPES = ("auto", "bfloat16", "float16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc",
                   "fp8_ds_mla", "nvfp4")  # fmt: skip
MAX_SHAPE_VALUE = 1 << 24  # no real layer count, head count or width comes near this
MAX_CONFIG_BYTES = 16 << 20  # a config.json is a few KiB; /dev/zero or a FIFO is never read
STATE_KINDS = ("linear_attention", "mamba", "mamba2", "linear", "gated_deltanet", "ssm")


@dataclass
class StateSpec:
    """The per-sequence state of one linear-attention / Mamba layer, before the TP split."""

    kind: str  # "gated_deltanet" or "mamba2"
    inner: int  # width of the value / SSM inner projection (for the parameter count)
    conv_channels: int  # channels of the causal conv state
    conv_width: int  # kernel size - 1 (tokens the conv state keeps)
    ssm_elements: int  # elements of the recurrent (temporal / SSM) state
    ssm_heads: int  # heads the recurrent state is split over by TP
    ssm_dtype: str | None = None  # the config's mamba_ssm_dtype, if any (else the model dtype)

    def bytes_per_gpu(self, tp: int, model_dtype_bytes: float) -> int:
        """Bytes of one layer's state for one sequence on one GPU (vLLM's MambaSpec page)."""
        conv = self.conv_width * (self.conv_channels // tp) * model_dtype_bytes
        ssm_bytes = DTYPE_BYTES.get(str(self.ssm_dtype or "").lower(), model_dtype_bytes)
        ssm = (self.ssm_elements // tp) * ssm_bytes
        return int(conv + ssm)


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
    qk_nope_head_dim: int | None = None  # MLA (weights only)
    v_head_dim: int | None = None  # MLA (weights only)
    q_lora_rank: int | None = None  # MLA (weights only)
    indexer_head_dim: int | None = None  # sparse MLA (DeepSeek-V3.2): the indexer's key cache
    indexer_heads: int = 0
    chunked_layers: int = 0  # chunked local attention (Llama 4 RoPE layers)
    attention_chunk_size: int | None = None
    sliding_window: int | None = None
    sliding_layers: int = 0  # layers that keep only the window
    state_layers: int = 0  # linear-attention / Mamba layers (no K/V)
    cacheless_layers: int = 0  # MLP-only layers of a hybrid pattern (Nemotron-H "-" and "E")
    mlp_layers: int = 0  # layers with an MLP or MoE block (all of them unless a pattern says)
    state: StateSpec | None = None
    experts: int = 0  # MoE routed experts
    expert_intermediate_size: int = 0
    moe_layers: int = 0  # layers whose MLP is MoE (the rest of mlp_layers are dense)
    dense_intermediate_size: int = 0  # the dense layers' MLP width (Llama 4: intermediate_size_mlp)
    shared_experts: int = 0
    shared_expert_intermediate_size: int = 0
    quant_method: str | None = None
    quant_bits: float | None = None  # bits per quantized weight (scales included)
    quant_scope: str = "linear"  # "linear": all but embeddings/lm_head; "experts": MoE only
    quant_note: str = ""
    notes: list[str] = field(default_factory=list)
    traces: list[str] = field(default_factory=list)  # each layer count with its field and rule
    not_modelled: list[str] = field(default_factory=list)  # what is assumed, not understood

    @property
    def is_mla(self) -> bool:
        return bool(self.kv_lora_rank)

    @property
    def attention_layers(self) -> int:
        """Layers that hold K/V (or an MLA latent) per token."""
        return self.layers - self.state_layers - self.cacheless_layers

    @property
    def full_layers(self) -> int:
        """Attention layers that keep every token."""
        return self.attention_layers - self.sliding_layers - self.chunked_layers

    @property
    def dense_mlp_layers(self) -> int:
        return (self.mlp_layers or self.layers) - self.moe_layers

    @property
    def is_hybrid_state(self) -> bool:
        return self.state_layers > 0


def load_model_config(path: str | Path) -> dict[str, Any]:
    """A config.json (or a model folder holding one), parsed; BadInput if it cannot be."""
    from llmdoctor.input_files import read_small_json

    p = Path(path)
    if p.is_dir():
        p = p / "config.json"
    config = read_small_json("", str(p), MAX_CONFIG_BYTES)
    if not isinstance(config, dict):
        raise BadInput(f"{p}: not a JSON object")
    return config


def dtype_bytes(dtype: str) -> float:
    """Bytes per element of a dtype name (torch_dtype, --dtype or --kv-cache-dtype spelling)."""
    name = str(dtype).lower().removeprefix("torch.")
    if name not in DTYPE_BYTES:
        raise BadInput(
            f"unknown dtype {dtype!r} (use bfloat16, float16, float32, fp8, fp8_e4m3, fp8_e5m2, "
            "fp8_ds_mla or nvfp4)"
        )
    return DTYPE_BYTES[name]


def merged_config(config: dict[str, Any]) -> dict[str, Any]:
    """The config with its language model's text_config (or llm_config ...) merged in."""
    if not isinstance(config, dict):
        raise BadInput("the model config is not a JSON object")
    merged = dict(config)
    for nested in ("text_config", "llm_config", "language_config"):
        inner = config.get(nested)
        if isinstance(inner, dict):
            merged = {**merged, **inner}
    return merged


class _Reader:
    """Typed reads of config fields: optional numbers, and strictly checked shape numbers."""

    def __init__(self, config: dict[str, Any]):
        self.get = config.get

    def number(self, *names: str) -> int | None:
        for name in names:
            value = self.get(name)
            if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
                return int(value)
        return None

    def shape_number(self, *names: str) -> int | None:
        """Like number(), but a present, non-null value that is not a plausible positive whole
        number is an error: falling back (e.g. 0 KV heads -> all heads) would be wrong."""
        for name in names:
            value = self.get(name)
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
                    f"from 1 to {MAX_SHAPE_VALUE:,}"
                )
            return int(value)
        return None


def model_shape(config: dict[str, Any]) -> ModelShape:
    """Read the fields that matter from a Hugging Face config (text_config merged in).

    Real input (Qwen/Qwen2-7B-Instruct config.json, abridged):
        {"hidden_size": 3584, "num_attention_heads": 28, "num_hidden_layers": 28,
         "num_key_value_heads": 4, "intermediate_size": 18944, "vocab_size": 152064,
         "max_position_embeddings": 32768, "torch_dtype": "bfloat16", "use_sliding_window": false}
    """
    from llmdoctor.capacity.model_layers import layer_layout, with_type_defaults
    from llmdoctor.capacity.quantization import read_quantization

    merged, default_notes = with_type_defaults(merged_config(config))
    read = _Reader(merged)
    get = merged.get
    layers = read.shape_number("num_hidden_layers", "n_layer", "num_layers", "n_layers")
    heads = read.shape_number("num_attention_heads", "n_head", "num_heads", "n_heads")
    hidden = read.shape_number("hidden_size", "d_model", "n_embd", "dim")
    if not layers or not heads or not hidden:
        raise BadInput(
            "the model config has no num_hidden_layers / num_attention_heads / hidden_size"
        )
    kv_heads = read.shape_number(
        "num_key_value_heads", "n_kv_heads", "num_kv_heads", "multi_query_group_num"
    )
    if get("multi_query") is True:
        kv_heads = 1
    if kv_heads and kv_heads > heads:  # each KV head serves a group of query heads, never fewer
        raise BadInput(
            f"the model config has {kv_heads} key/value heads but {heads} attention heads: no "
            "model has more KV heads than attention heads (check num_key_value_heads)"
        )
    head_dim = read.shape_number("head_dim", "kv_channels", "attention_head_dim") or hidden // heads
    shape = ModelShape(
        model_type=str(get("model_type") or ""),
        layers=layers,
        attention_heads=heads,
        kv_heads=kv_heads or heads,
        head_dim=head_dim,
        hidden_size=hidden,
        intermediate_size=read.number("intermediate_size", "ffn_dim", "n_inner") or 4 * hidden,
        vocab_size=read.number("vocab_size", "padded_vocab_size") or 32000,
        max_position_embeddings=read.number(
            "max_position_embeddings", "max_sequence_length", "seq_length", "n_positions"
        ),
        dtype=str(get("torch_dtype") or get("dtype") or "bfloat16"),
        tie_word_embeddings=bool(get("tie_word_embeddings", False)),
    )
    shape.notes.extend(default_notes)
    if isinstance(config.get("vision_config"), dict):
        shape.notes.append(
            "vision_config: the vision encoder's weights are not counted (vLLM loads them too; "
            "a few hundred million parameters for the models planned here)"
        )
    if read.number("kv_lora_rank"):
        _mla_fields(shape, read, merged)
    kinds = layer_kinds(merged, layers)
    shape.state_layers = kinds.count("state")
    shape.cacheless_layers = kinds.count("none")
    shape.mlp_layers = shape.cacheless_layers or layers
    if shape.state_layers:
        shape.state = _state_spec(read, merged, shape)
        if shape.state is None:
            shape.notes.append(
                f"{shape.state_layers} linear-attention/Mamba layers: their state size is not "
                "known for this model type and is not counted"
            )
        else:
            shape.notes.append(
                f"hybrid: {shape.state_layers} of {layers} layers are {shape.state.kind} layers "
                "with a fixed per-sequence state; only the other "
                f"{layers - shape.state_layers} keep K/V per token"
            )
    _sliding_layout(shape, merged, kinds)
    experts = read.number("n_routed_experts", "num_local_experts", "num_experts") or 0
    layout = layer_layout(merged, layers, experts)
    shape.not_modelled = layout.not_modelled
    shape.traces.extend(layout.traces)
    if layout.attention_chunk_size and not shape.sliding_layers:
        shape.attention_chunk_size = layout.attention_chunk_size
        shape.chunked_layers = sum(
            1
            for kind, chunked in zip(kinds, layout.chunked, strict=True)
            if chunked and kind == "full"
        )
    if experts > 1:
        _moe_fields(shape, read, merged, experts, sum(layout.moe))
    read_quantization(shape, merged)
    return shape


def _mla_fields(shape: ModelShape, read: _Reader, config: dict[str, Any]) -> None:
    """Multi-head latent attention (DeepSeek-V2/V3, Kimi K2), and V3.2's indexer key cache."""
    shape.kv_lora_rank = read.number("kv_lora_rank")
    shape.qk_rope_head_dim = read.number("qk_rope_head_dim") or 64
    shape.qk_nope_head_dim = read.number("qk_nope_head_dim") or 128
    shape.v_head_dim = read.number("v_head_dim") or 128
    shape.q_lora_rank = read.number("q_lora_rank")
    shape.notes.append(
        f"MLA: the cache holds kv_lora_rank {shape.kv_lora_rank} + qk_rope_head_dim "
        f"{shape.qk_rope_head_dim} per token and layer, on every GPU"
    )
    if "index_topk" in config:  # vLLM's test for DeepSeek-V3.2 sparse attention (DSA)
        shape.indexer_head_dim = read.number("index_head_dim") or 128
        shape.indexer_heads = read.number("index_n_heads") or 64
        shape.traces.append(
            f"index_topk present: sparse MLA with a Lightning-indexer key cache per layer "
            f"(index_head_dim {shape.indexer_head_dim}: fp8 values + one fp32 scale per 128 "
            "= "
            f"{indexer_bytes(shape.indexer_head_dim)} B per token and layer, whatever "
            "--kv-cache-dtype; vLLM DeepseekV32IndexerCache)"
        )


def indexer_bytes(index_head_dim: int) -> int:
    """Bytes of one token's indexer key: fp8 values + one fp32 scale per 128 (uint8 cache)."""
    return index_head_dim + index_head_dim // 128 * 4


def _moe_fields(
    shape: ModelShape, read: _Reader, config: dict[str, Any], experts: int, moe_layers: int
) -> None:
    shape.experts = experts
    llama4 = shape.model_type in ("llama4", "llama4_text")
    shape.expert_intermediate_size = (
        read.number("moe_intermediate_size", "expert_intermediate_size") or shape.intermediate_size
    )
    shape.dense_intermediate_size = read.number("intermediate_size_mlp") or shape.intermediate_size
    shape.shared_experts = read.number("n_shared_experts", "num_shared_experts") or 0
    shape.shared_expert_intermediate_size = read.number(
        "shared_expert_intermediate_size", "shared_intermediate_size"
    ) or (shape.intermediate_size if llama4 else 0)
    # a hybrid pattern (Nemotron-H "E") already says which layers have an MLP
    shape.moe_layers = shape.mlp_layers if shape.cacheless_layers else moe_layers
    if llama4:
        shape.traces.append(
            f"shared expert: one of intermediate_size {shape.intermediate_size} on every MoE "
            "layer (vLLM llama4.py Llama4MoE.shared_expert)"
        )


def layer_kinds(config: dict[str, Any], layers: int) -> list[str]:
    """Per layer: 'full', 'sliding', 'state' or 'none' (a layer with only an MLP); sliding is
    refined later by the window."""
    layer_types = config.get("layer_types")
    if layer_types is not None:  # present: used, or refused naming it; never silently dropped
        if not isinstance(layer_types, list) or not all(isinstance(k, str) for k in layer_types):
            raise BadInput(
                f"the model config's layer_types is {repr(layer_types)[:40]}: it must be a list "
                'of layer kinds, one per layer (e.g. ["full_attention", "linear_attention"])'
            )
        if len(layer_types) != layers:
            raise BadInput(
                f"the model config's layer_types has {len(layer_types)} entries but the model "
                f"has {layers} layers (num_hidden_layers): it must name one kind per layer"
            )
        out = []
        for kind in layer_types:
            text = kind.lower()
            if text in STATE_KINDS or "linear" in text or "mamba" in text:
                out.append("state")
            elif "sliding" in text or text == "local":
                out.append("sliding")
            else:
                out.append("full")
        return out
    interval = config.get("full_attention_interval")
    if isinstance(interval, int) and not isinstance(interval, bool) and interval > 0:
        return ["full" if (i + 1) % interval == 0 else "state" for i in range(layers)]
    pattern = config.get("hybrid_override_pattern")
    if isinstance(pattern, str) and pattern:
        # Nemotron-H: M = Mamba-2, * = attention, - and E = MLP / MoE layers (no cache)
        kinds = {"M": "state", "*": "full"}
        return [kinds.get(c, "none") for c in pattern]
    period, offset = config.get("attn_layer_period"), config.get("attn_layer_offset")
    if isinstance(period, int) and isinstance(offset, int) and period > 0:  # Jamba
        return ["full" if i % period == offset else "state" for i in range(layers)]
    return ["full"] * layers


def _state_spec(read: _Reader, config: dict[str, Any], shape: ModelShape) -> StateSpec | None:
    """The state of one linear-attention layer (Gated DeltaNet) or Mamba-2 layer."""
    ssm_dtype = config.get("mamba_ssm_dtype")
    ssm_dtype = str(ssm_dtype) if isinstance(ssm_dtype, str) else None
    value_heads = read.number("linear_num_value_heads")
    if value_heads:  # Qwen3-Next / Qwen3.5 Gated DeltaNet
        key_heads = read.number("linear_num_key_heads") or value_heads
        key_dim = read.number("linear_key_head_dim") or 128
        value_dim = read.number("linear_value_head_dim") or 128
        conv = (read.number("linear_conv_kernel_dim") or 4) - 1
        return StateSpec(
            "gated_deltanet",
            inner=value_heads * value_dim,
            conv_channels=2 * key_heads * key_dim + value_heads * value_dim,
            conv_width=conv,
            ssm_elements=value_heads * key_dim * value_dim,
            ssm_heads=value_heads,
            ssm_dtype=ssm_dtype,
        )
    state_size = read.number("ssm_state_size", "mamba_d_state", "state_size", "d_state")
    if state_size:  # Mamba-2 (Nemotron-H, Granite 4, Bamba, Falcon-H1)
        heads = read.number("mamba_num_heads", "mamba_n_heads", "n_heads_ssm")
        head_dim = read.number("mamba_head_dim", "mamba_d_head", "ssm_head_dim")
        expand = read.number("mamba_expand", "expand") or 2
        inner = heads * head_dim if heads and head_dim else expand * shape.hidden_size
        if not heads:
            heads = inner // (head_dim or 64)
        groups = read.number("n_groups", "mamba_n_groups", "ngroups") or 1
        conv = (read.number("conv_kernel", "mamba_d_conv", "mamba_conv_kernel", "d_conv") or 4) - 1
        return StateSpec(
            "mamba2",
            inner=inner,
            conv_channels=inner + 2 * groups * state_size,
            conv_width=conv,
            ssm_elements=inner * state_size,
            ssm_heads=heads,
            ssm_dtype=ssm_dtype,
        )
    return None


def _sliding_layout(shape: ModelShape, config: dict[str, Any], kinds: list[str]) -> None:
    """Which attention layers keep only a sliding window (Mistral v0.1, Gemma 2/3, gpt-oss)."""
    window = config.get("sliding_window")
    if not isinstance(window, int) or window <= 0 or config.get("use_sliding_window") is False:
        return
    if shape.max_position_embeddings and window >= shape.max_position_embeddings:
        return
    pattern = config.get("sliding_window_pattern")
    attention = shape.attention_layers
    if "sliding" in kinds:
        sliding = kinds.count("sliding")
    elif isinstance(pattern, int) and pattern > 1:
        sliding = sum(1 for i in range(attention) if (i + 1) % pattern != 0)
    elif shape.model_type in ("gemma2", "cohere2"):
        sliding = (attention + 1) // 2
    elif shape.state_layers:
        sliding = 0  # a hybrid's sliding_window field alone does not make its layers sliding
    else:
        sliding = attention
    if sliding:
        shape.sliding_window = window
        shape.sliding_layers = min(sliding, attention)
        shape.notes.append(
            f"sliding window {window}: {shape.sliding_layers} of {shape.layers} layers keep "
            "only the window"
        )
