"""A checkpoint's quantization as vLLM loads it: bits per weight from quantization_config
(or compression_config), and which weights they apply to (linear layers or MoE experts)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from llmdoctor.errors import BadInput

if TYPE_CHECKING:
    from llmdoctor.capacity.model_shape import ModelShape

# mxfp4 stores 4-bit values with one E8M0 scale per 32 (4.25 bits), but vLLM's loaded gpt-oss-120b
# weighs 64.38 GiB on an H100 ("Model loading took", vLLM issue #33155), which is 4.5 bits per
# expert weight: the kernels keep a 16-bit scale per 32 values.
MXFP4_LOADED_BITS = 4.5
NVFP4_BITS = 4.5  # 4-bit values + one FP8 scale per 16


def read_quantization(shape: ModelShape, config: dict[str, Any]) -> None:
    """Set shape.quant_* from a config's quantization_config (compression_config)."""
    quant = None
    for name in ("quantization_config", "compression_config"):
        value = config.get(name)
        if value is None:
            continue
        if not isinstance(value, dict):  # [1, 2], "fp8": never silently sized as unquantized
            raise BadInput(
                f"the model config's {name} is {_shown(value)}: it must be a JSON object "
                '(e.g. {"quant_method": "fp8"})'
            )
        quant = value
        break
    if quant is None:
        return
    field_name = name
    method = str(quant.get("quant_method") or "").lower() or None
    shape.quant_method = method
    bits: float | None = None
    scope = "linear"
    if method == "mxfp4":
        bits, scope = (
            MXFP4_LOADED_BITS,
            "experts" if shape.experts or _has_experts(config) else "linear",
        )
        shape.quant_note = (
            "mxfp4: MoE expert weights at 4-bit (+ scales); attention, router, embeddings 16-bit"
        )
    elif method in ("fp8", "fbgemm_fp8", "ptpc_fp8", "fp8_per_block"):
        bits = 8.0
        shape.quant_note = f"{method}: linear layers 8-bit, embeddings and lm_head 16-bit"
    elif method == "compressed-tensors":
        bits = _compressed_tensors_bits(quant, field_name)
        fmt = quant.get("format") or "no format"
        if bits and _ignores_all_but_routed_experts(shape, quant.get("ignore")):
            scope = "experts"
            shape.quant_note = (
                f"compressed-tensors ({fmt}): {bits:g} bits per routed-expert weight; its "
                "ignore list keeps attention, shared experts and dense MLPs 16-bit"
            )
        elif bits:
            shape.quant_note = f"compressed-tensors ({fmt}): {bits:g} bits per linear weight"
    elif method in (
        "awq",
        "gptq",
        "awq_marlin",
        "gptq_marlin",
        "auto-round",
        "autoround",
        "marlin",
    ):
        raw = _quant_field(quant, field_name, ("bits", "w_bit", "weight_bits"))
        group = _quant_field(quant, field_name, ("group_size", "q_group_size"), per_channel=True)
        if raw is not None:
            if group == -1:  # one scale per output channel: negligible next to the weights
                bits = float(raw)
                shape.quant_note = f"{method}: {raw:g}-bit weights, per-channel scales"
            else:
                group = group or 128
                bits = float(raw) + 16 / float(group)  # + one 16-bit scale per group
                shape.quant_note = f"{method}: {raw:g}-bit weights, group size {group:g} ({bits:.2f} bits with scales)"
    elif method == "modelopt":
        inner = quant.get("quantization")
        algo = quant.get("quant_algo") or (
            inner.get("quant_algo") if isinstance(inner, dict) else ""
        )
        algo = str(algo or "").upper()
        bits = {"FP8": 8.0, "NVFP4": NVFP4_BITS, "W4A8_AWQ": 4.25, "W4A16_AWQ": 4.25}.get(algo)
        shape.quant_note = f"modelopt {algo or '?'}" + (
            f": {bits:g} bits per linear weight" if bits else ""
        )
    elif method == "bitsandbytes":
        if quant.get("load_in_4bit"):
            bits = 4.5  # NF4/FP4 + one fp32 absmax per 64
        elif quant.get("load_in_8bit"):
            bits = 8.0
    else:
        raw = quant.get("bits") or quant.get("weight_bits")
        bits = float(raw) if _positive(raw) else None
    shape.quant_bits = bits
    shape.quant_scope = scope
    if bits is None:
        shape.notes.append(
            f"quantization {method or '?'}: its bits per weight are not known to llmdoctor; the "
            "weights are sized at the model dtype (an upper bound): pass --model-dir or --params "
            "with --dtype for a better figure"
        )


# One module name per part of the model, in the DeepSeek/Kimi layout, for matching against a
# compressed-tensors `ignore` list as vLLM does (compressed_tensors/utils.py should_ignore_layer:
# an entry is an exact module name, or after "re:" a regex matched from the name's start).
_ATTENTION_MODULE = "model.layers.1.self_attn.o_proj"
_DENSE_MLP_MODULE = "model.layers.0.mlp.down_proj"
_SHARED_EXPERT_MODULE = "model.layers.1.mlp.shared_experts.down_proj"
_ROUTED_EXPERT_MODULE = "model.layers.1.mlp.experts.0.down_proj"


def _ignores_all_but_routed_experts(shape: ModelShape, ignore: Any) -> bool:
    """Whether the ignore list leaves attention, the dense MLPs and the shared experts
    unquantized but not the routed experts, as Kimi-K2.5's INT4 checkpoint does
    (["lm_head", "re:.*self_attn.*", "re:.*shared_experts.*",
    "re:.*mlp\\.(gate|up|gate_up|down)_proj.*"])."""
    if not shape.experts or not isinstance(ignore, list):
        return False
    entries = [e for e in ignore if isinstance(e, str)]
    kept = [_ATTENTION_MODULE]
    if shape.dense_mlp_layers:
        kept.append(_DENSE_MLP_MODULE)
    if shape.shared_experts or shape.shared_expert_intermediate_size:
        kept.append(_SHARED_EXPERT_MODULE)
    return all(_ignored(name, entries) for name in kept) and not _ignored(
        _ROUTED_EXPERT_MODULE, entries
    )


def _ignored(module: str, entries: list[str]) -> bool:
    """vLLM's match of one module name against ignore entries, in RE2 (linear time whatever
    the config says); an entry RE2 cannot compile matches nothing."""
    import re2

    options = re2.Options()
    options.log_errors = False
    options.never_capture = True
    for entry in entries:
        if not entry.startswith("re:"):
            if entry == module:
                return True
            continue
        try:
            if re2.compile(entry[3:], options).match(module):
                return True
        except re2.error:
            continue
    return False


def _has_experts(config: dict[str, Any]) -> bool:
    return any(
        isinstance(config.get(k), int) and config[k] > 1
        for k in ("num_local_experts", "num_experts", "n_routed_experts")
    )


def _positive(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value > 0


def _shown(value: Any) -> str:
    return (
        repr(value)[:40]
        if not isinstance(value, list | dict)
        else (f"a {'list' if isinstance(value, list) else 'object'} ({json.dumps(value)[:40]})")
    )


def _quant_field(
    quant: dict[str, Any], where: str, names: tuple[str, ...], per_channel: bool = False
) -> float | None:
    """The first present of `names` in a quantization config: a positive number (or -1 for a
    per-channel group size); present but anything else is an error naming the field."""
    for name in names:
        value = quant.get(name)
        if value is None:
            continue
        if _positive(value) or (per_channel and value == -1 and not isinstance(value, bool)):
            return value
        raise BadInput(
            f"the model config's {where}.{name} is {_shown(value)}: it must be a positive number"
            + (" (or -1 for per-channel scales)" if per_channel else "")
        )
    return None


def _compressed_tensors_bits(quant: dict[str, Any], where: str) -> float | None:
    """Bits per weight of a compressed-tensors config's first weight scheme.

    A present but malformed config_groups (a string, a group that is not an object, weights
    with a bad num_bits) is an error naming the field; a group without weights (activations
    only) is skipped.
    """
    groups = quant.get("config_groups")
    if groups is None:
        return None
    if not isinstance(groups, dict):
        raise BadInput(
            f"the model config's {where}.config_groups is {_shown(groups)}: it must be an "
            'object of groups (e.g. {"group_0": {"weights": {"num_bits": 8}}})'
        )
    fmt = str(quant.get("format") or "").lower()
    for key, group in groups.items():
        at = f"{where}.config_groups.{key}"
        if not isinstance(group, dict):
            raise BadInput(f"the model config's {at} is {_shown(group)}: it must be an object")
        weights = group.get("weights")
        if weights is None:
            continue
        if not isinstance(weights, dict):
            raise BadInput(
                f"the model config's {at}.weights is {_shown(weights)}: it must be an object"
            )
        num_bits = _quant_field(weights, f"{at}.weights", ("num_bits",))
        if num_bits is None:
            continue
        num_bits = float(num_bits)
        if "nvfp4" in fmt or (num_bits == 4 and weights.get("type") == "float"):
            return NVFP4_BITS
        size = _quant_field(weights, f"{at}.weights", ("group_size",), per_channel=True)
        if weights.get("strategy") == "group" and size and size > 0:
            return num_bits + 16 / float(size)
        return num_bits
    return None
