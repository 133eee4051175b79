"""Which decoder layers of a model are MoE, which attend locally, and what is not understood.

Each rule is vLLM's own (v0.33.0), named with the config field it reads, so a report can say
where every layer count came from:

* MoE vs dense MLP: Llama 4 ``interleave_moe_layer_step`` (``llama4.py``: layer i is MoE when
  ``(i + 1) % step == 0``), DeepSeek/Kimi/GLM ``first_k_dense_replace`` and ``moe_layer_freq``
  (``deepseek_v2.py``, ``glm4_moe.py``: ``i >= first_k_dense_replace and i % freq == 0``),
  Qwen ``mlp_only_layers`` and ``decoder_sparse_step`` (``qwen3_moe.py``, ``qwen3_next.py``);
* chunked local attention: Llama 4 layers with RoPE (``no_rope_layers[i] == 1``) use
  ``ChunkedLocalAttention`` of ``attention_chunk_size`` tokens, the NoPE layers full attention;
* fields of attention schemes llmdoctor does not model (DeepSeek-V4's ``compress_ratios``,
  MiniMax lightning attention, unknown ``layer_types``) are reported, never sized silently.

A library: pure functions of a config dict, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# model_type values whose layer layout, attention and MLP llmdoctor models as vLLM 0.33 does
MODELLED_TYPES = frozenset(
    {
        "llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "qwen3_next",
        "qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text", "gemma", "gemma2",
        "gemma3", "gemma3_text", "gpt_oss", "deepseek_v2", "deepseek_v3", "deepseek_v32",
        "kimi_k2", "kimi_k25", "glm4", "glm4_moe", "minimax_m2", "phi3", "llama4",
        "llama4_text", "nemotron_h", "granitemoehybrid", "jamba", "falcon_h1", "bamba",
        "cohere2", "olmo2", "mistral3",
        # standard decoders (every layer full GQA/MQA attention; MoE from the usual fields),
        # alone or as the text model of a vision-language wrapper
        "qwen2_vl", "qwen2_vl_text", "qwen2_5_vl", "qwen2_5_vl_text", "qwen3_vl",
        "qwen3_vl_text", "qwen3_vl_moe", "qwen3_vl_moe_text", "llava", "llava_next",
        "llava_onevision", "internlm2", "internlm3", "granite", "granitemoe",
        "granitemoeshared", "olmo", "olmoe", "starcoder2", "gpt_bigcode", "gpt_neox",
        "baichuan", "ernie4_5", "seed_oss", "smollm3", "apertus", "arcee",
        "cohere", "minicpm", "stablelm", "nemotron", "ministral", "phimoe", "deepseek",
        "bailing_moe", "mimo",
    }
)  # fmt: skip
# layer_types values vLLM's model files know; anything else is named as not modelled
KNOWN_LAYER_TYPES = frozenset(
    {
        "full_attention", "attention", "global", "global_attention", "sliding_attention",
        "sliding", "local", "local_attention", "chunked_attention", "linear_attention",
        "mamba", "mamba2", "linear", "gated_deltanet", "ssm",
    }
)  # fmt: skip
# fields a config.json may leave out because transformers' config class fills them in
TYPE_DEFAULTS: dict[str, dict[str, Any]] = {
    # transformers Gemma3TextConfig defaults
    "gemma3_text": {
        "vocab_size": 262208,
        "max_position_embeddings": 131072,
        "sliding_window_pattern": 6,
        "tie_word_embeddings": True,
    },
    # transformers Llama4TextConfig: no_rope_layers derived from no_rope_layer_interval 4
    "llama4_text": {"no_rope_layer_interval": 4},
}
DEEPSEEK_MOE_TYPES = ("deepseek_v2", "deepseek_v3", "deepseek_v32", "kimi_k2", "kimi_k25")
QWEN_MOE_TYPES = ("qwen2_moe", "qwen3_moe", "qwen3_next", "qwen3_5_moe", "qwen3_5_moe_text")


@dataclass
class LayerLayout:
    """Per-layer facts vLLM sizes weights and cache by, with the rule behind each count."""

    moe: list[bool]
    chunked: list[bool]
    attention_chunk_size: int | None = None
    traces: list[str] = field(default_factory=list)
    not_modelled: list[str] = field(default_factory=list)


def with_type_defaults(config: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The config with transformers' defaults for fields its config class fills in."""
    model_type = str(config.get("model_type") or "")
    defaults = TYPE_DEFAULTS.get(model_type, {})
    added = {k: v for k, v in defaults.items() if config.get(k) is None}
    notes = [
        f"{k} {v} (transformers' {model_type} default; the config.json leaves it out)"
        for k, v in added.items()
        if k != "no_rope_layer_interval"
    ]
    return {**config, **added}, notes


def _int(config: dict[str, Any], name: str, default: int) -> int:
    value = config.get(name)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return default


def moe_layers(config: dict[str, Any], layers: int, experts: int) -> tuple[list[bool], str]:
    """Which layers are MoE, and the vLLM rule with the config values that decided it."""
    model_type = str(config.get("model_type") or "")
    if experts <= 1:
        return [False] * layers, ""
    if "interleave_moe_layer_step" in config or model_type in ("llama4", "llama4_text"):
        step = _int(config, "interleave_moe_layer_step", 1)
        moe = [step > 0 and (i + 1) % step == 0 for i in range(layers)]
        dense = (
            f", the other {layers - sum(moe)} a dense MLP of intermediate_size_mlp"
            if sum(moe) < layers
            else ""
        )
        return moe, (
            f"interleave_moe_layer_step {step}: {sum(moe)} of {layers} layers MoE{dense} "
            "(vLLM llama4.py: MoE when (i + 1) % interleave_moe_layer_step == 0)"
        )
    if "first_k_dense_replace" in config or model_type in (*DEEPSEEK_MOE_TYPES, "glm4_moe"):
        first = _int(config, "first_k_dense_replace", 0)
        freq = max(1, _int(config, "moe_layer_freq", 1))
        moe = [i >= first and i % freq == 0 for i in range(layers)]
        return moe, (
            f"first_k_dense_replace {first}, moe_layer_freq {freq}: {sum(moe)} of {layers} "
            "layers MoE (vLLM deepseek_v2.py / glm4_moe.py: i >= first_k_dense_replace and "
            "i % moe_layer_freq == 0)"
        )
    if (
        "mlp_only_layers" in config
        or "decoder_sparse_step" in config
        or model_type in QWEN_MOE_TYPES
    ):
        only = config.get("mlp_only_layers") or []
        only = {i for i in only if isinstance(i, int)} if isinstance(only, list) else set()
        step = max(1, _int(config, "decoder_sparse_step", 1))
        moe = [i not in only and (i + 1) % step == 0 for i in range(layers)]
        return moe, (
            f"decoder_sparse_step {step}, mlp_only_layers {sorted(only) or '[]'}: {sum(moe)} of "
            f"{layers} layers MoE (vLLM qwen3_moe.py: i not in mlp_only_layers and "
            "(i + 1) % decoder_sparse_step == 0)"
        )
    return [True] * layers, f"every layer MoE ({experts} experts; no interleave field)"


def chunked_attention_layers(config: dict[str, Any], layers: int) -> tuple[list[bool], str]:
    """Llama 4: RoPE layers attend within attention_chunk_size tokens, NoPE layers globally."""
    chunk = config.get("attention_chunk_size")
    if not isinstance(chunk, int) or isinstance(chunk, bool) or chunk <= 0:
        return [False] * layers, ""
    pattern = config.get("no_rope_layers")
    interval = _int(config, "no_rope_layer_interval", 4)
    types = config.get("layer_types")
    if isinstance(types, list) and "chunked_attention" in types and len(types) == layers:
        rope = [t == "chunked_attention" for t in types]
        source = "layer_types chunked_attention"
    elif isinstance(pattern, list) and len(pattern) == layers:
        rope = [bool(x) for x in pattern]
        source = "no_rope_layers"
    else:  # transformers derives it when the list is empty
        rope = [(i + 1) % interval != 0 for i in range(layers)] if interval > 0 else [True] * layers
        source = f"no_rope_layer_interval {interval} (no_rope_layers empty)"
    return rope, (
        f"attention_chunk_size {chunk}, {source}: {sum(rope)} RoPE layers attend within "
        f"{chunk}-token chunks, {layers - sum(rope)} NoPE layers keep every token (vLLM "
        "llama4.py: ChunkedLocalAttention when not nope and attention_chunk_size)"
    )


def not_modelled(config: dict[str, Any]) -> list[str]:
    """What in the config names an attention or layer scheme llmdoctor does not size."""
    out = []
    model_type = str(config.get("model_type") or "")
    ratios = config.get("compress_ratios")
    if ratios is not None or model_type == "deepseek_v4":
        out.append(
            f"{model_type or 'this model'}'s compressed attention cache (compress_ratios"
            f"{_ratio_counts(ratios, config.get('num_hidden_layers'))}: besides a "
            f"{config.get('sliding_window', '?')}-token window, layers keep one compressed "
            "entry per that many tokens, some with their own indexer cache); assumed: only the "
            "window, which understates the cache of long requests"
        )
    if config.get("expert_dtype") not in (None, "", "bf16", "bfloat16"):
        out.append(
            f"expert_dtype {config.get('expert_dtype')!r} (MoE experts stored apart from "
            "quantization_config); assumed: the experts at quantization_config's precision"
        )
    kinds = config.get("attn_type_list")
    if isinstance(kinds, list) and any(k == 0 for k in kinds):
        out.append(
            "lightning (linear) attention layers (attn_type_list 0); assumed: every layer "
            "full softmax attention"
        )
    types = config.get("layer_types")
    if isinstance(types, list):
        unknown = sorted({str(t) for t in types if str(t).lower() not in KNOWN_LAYER_TYPES})
        if unknown:
            out.append(
                f"layer_types {', '.join(unknown)[:80]}; assumed: full attention for those layers"
            )
    if model_type and model_type not in MODELLED_TYPES and not out:
        out.append(
            f"model_type {model_type!r}; assumed: a standard decoder (every layer full "
            "attention, the MLP as its fields say)"
        )
    return out


def _ratio_counts(ratios: Any, layers: Any) -> str:
    """' 4:1 in 30 layers, 128:1 in 30, none in 1' from a compress_ratios list (its first
    num_hidden_layers entries; a trailing one belongs to the MTP layer)."""
    if not isinstance(ratios, list) or not ratios:
        return ""
    if isinstance(layers, int) and not isinstance(layers, bool) and layers > 0:
        ratios = ratios[:layers]
    counts: dict[str, int] = {}
    for r in ratios:
        key = f"{r}:1" if isinstance(r, int) and r > 1 else "none"
        counts[key] = counts.get(key, 0) + 1
    return " " + ", ".join(f"{k} in {n} layers" for k, n in counts.items())


def layer_layout(config: dict[str, Any], layers: int, experts: int) -> LayerLayout:
    """Per-layer MoE and chunked-attention flags, with traces and what is not modelled."""
    moe, moe_rule = moe_layers(config, layers, experts)
    chunked, chunk_rule = chunked_attention_layers(config, layers)
    layout = LayerLayout(moe=moe, chunked=chunked, not_modelled=not_modelled(config))
    if any(chunked):
        layout.attention_chunk_size = int(config["attention_chunk_size"])
    layout.traces = [t for t in (moe_rule, chunk_rule) if t]
    return layout
