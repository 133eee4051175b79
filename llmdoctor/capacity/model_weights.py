"""How many bytes a model's weights take on the GPU: safetensors headers, or config arithmetic.

Quantized checkpoints are sized at their own bits (``quantization_config``): mxfp4 (gpt-oss,
MoE experts only), fp8, compressed-tensors ``config_groups`` (FP8, INT4/INT8, NVFP4), AWQ/GPTQ
bits with their per-group scales, ModelOpt FP8/NVFP4 and bitsandbytes. Embeddings and lm_head
stay 16-bit, as vLLM loads them.
"""

from __future__ import annotations

import json
import re
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llmdoctor.capacity.model_shape import ModelShape, dtype_bytes
from llmdoctor.errors import BadInput
from llmdoctor.input_files import read_small_json

MiB = 1 << 20
MAX_SAFETENSORS_HEADER = 100 * MiB
# bytes per element of every dtype a safetensors header may name (safetensors' Dtype enum)
SAFETENSORS_BYTES = {
    "F64": 8,
    "I64": 8,
    "U64": 8,
    "C64": 8,
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
    "F6_E2M3": 0.75,
    "F6_E3M2": 0.75,
    "F4": 0.5,
}


def parameter_breakdown(shape: ModelShape) -> dict[str, int]:
    """Parameters of a decoder-only model by part: embeddings, attention, state layers, MLP.

    MoE layers (shape.moe_layers, from the config's interleave fields) hold the routed experts,
    shared experts and router; the other MLP layers a dense MLP of dense_intermediate_size.
    Vision towers and multi-token-prediction layers, which vLLM loads apart, are not counted.
    """
    h = shape.hidden_size
    if shape.is_mla:
        attention_per_layer = _mla_parameters(shape)
    else:
        q = h * shape.attention_heads * shape.head_dim
        kv = 2 * h * shape.kv_heads * shape.head_dim
        attention_per_layer = q + kv + shape.attention_heads * shape.head_dim * h
    attention = attention_per_layer * shape.attention_layers
    state = 0
    if shape.state is not None:
        s = shape.state
        per_layer = h * (s.inner + s.conv_channels + 2 * s.ssm_heads) + s.inner * h
        per_layer += s.conv_channels * (s.conv_width + 1)
        state = per_layer * shape.state_layers
    experts = dense = 0
    if shape.experts:
        per_expert = 3 * h * shape.expert_intermediate_size
        shared = shape.shared_experts * per_expert + 3 * h * shape.shared_expert_intermediate_size
        experts = per_expert * shape.experts * shape.moe_layers
        dense = (shared + h * shape.experts) * shape.moe_layers
        width = shape.dense_intermediate_size or shape.intermediate_size
        dense += 3 * h * width * shape.dense_mlp_layers
    else:
        dense = 3 * h * shape.intermediate_size * (shape.mlp_layers or shape.layers)
    embeddings = shape.vocab_size * h * (1 if shape.tie_word_embeddings else 2)
    return {
        "embeddings": embeddings,
        "attention": attention,
        "state": state,
        "experts": experts,
        "mlp": dense,
        "norms": shape.layers * 2 * h + h,
    }


def _mla_parameters(shape: ModelShape) -> int:
    """One MLA layer: q (through q_lora_rank), the latent kv_a, its kv_b expansion, o; and the
    V3.2 indexer's wq_b, wk and head weights."""
    h, heads = shape.hidden_size, shape.attention_heads
    rope, nope = shape.qk_rope_head_dim or 0, shape.qk_nope_head_dim or 0
    latent, v = shape.kv_lora_rank or 0, shape.v_head_dim or 0
    q_in = shape.q_lora_rank or h
    q = (h * shape.q_lora_rank if shape.q_lora_rank else 0) + q_in * heads * (nope + rope)
    kv = h * (latent + rope) + latent * heads * (nope + v)
    total = q + kv + heads * v * h
    if shape.indexer_head_dim:
        total += shape.indexer_head_dim * (q_in * shape.indexer_heads + h) + h * shape.indexer_heads
    return total


def estimate_parameters(shape: ModelShape) -> int:
    """Parameters of a decoder-only transformer from its config (dense, MoE or hybrid)."""
    return sum(parameter_breakdown(shape).values())


def weight_bytes_from_parameters(shape: ModelShape, params: int, dtype: str | None) -> int:
    """Weights of `params` parameters: quantized parts at their bits, the rest at the dtype.

    A quantized checkpoint stays quantized whatever --dtype says (--dtype sets the activation
    and unquantized-layer dtype); embeddings and lm_head are never quantized.
    """
    base = dtype_bytes(dtype if dtype not in (None, "auto") else shape.dtype)
    if not shape.quant_bits:
        return int(params * base)
    base = min(base, 2)  # quantized checkpoints run their unquantized layers in 16-bit
    parts = parameter_breakdown(shape)
    scale = params / max(sum(parts.values()), 1)
    if shape.quant_scope == "experts":
        quantized = parts["experts"] * scale
    else:
        quantized = (sum(parts.values()) - parts["embeddings"] - parts["norms"]) * scale
    rest = max(params - quantized, 0)
    return int(quantized * shape.quant_bits / 8 + rest * base)


@dataclass
class SafetensorsWeights:
    total_bytes: int
    by_dtype: dict[str, int]
    tensors: int
    files: int
    notes: list[str] = field(default_factory=list)


MAX_INDEX_BYTES = 64 * MiB
_SHARD_NAME = re.compile(r"(.+)-(\d+)-of-(\d+)\.safetensors")
MAX_SHARDS = 100_000


def safetensors_weights(model_dir: str | Path) -> SafetensorsWeights:
    """Sum tensor sizes from the headers of a folder's safetensors checkpoint.

    Only the 8-byte little-endian header length and the JSON header are read, e.g.
    {"model.embed_tokens.weight": {"dtype": "BF16", "shape": [152064, 3584],
     "data_offsets": [0, 1090076672]}, "__metadata__": {"format": "pt"}}

    With a model.safetensors.index.json, its weight_map says which shard files make the
    checkpoint (others, e.g. a consolidated.safetensors copy, are left out) and its
    metadata.total_size is checked against the headers. A checkpoint with shard files missing
    (listed in the index, or model-0000k-of-0000n numbering with gaps: a download still running
    or interrupted) is refused with the missing files named, never sized from what is there.
    """
    folder = Path(model_dir)
    if not folder.is_dir():
        raise BadInput(f"--model-dir {folder}: not a directory")
    present = sorted(p.name for p in folder.glob("*.safetensors"))
    notes: list[str] = []
    index = _read_index(folder)
    if index is not None:
        index_name, total_size, weight_map = index
        listed = sorted(set(weight_map.values()))
        ignored = [n for n in present if n not in listed]
        if ignored:
            notes.append(f"not counted: {', '.join(ignored)} (not in {index_name}'s weight_map)")
    else:
        index_name, total_size, weight_map, listed = None, None, {}, present
    missing = [n for n in listed if not (folder / n).is_file()]
    missing = sorted({*missing, *_numbering_gaps(listed)})
    if missing:
        shown = ", ".join(missing[:5]) + (
            f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        )
        raise BadInput(
            f"--model-dir {folder}: the checkpoint is incomplete (a download still running or "
            f"interrupted?): {len(missing)} shard file(s) missing: {shown}"
        )
    if not listed:
        raise BadInput(f"--model-dir {folder}: no *.safetensors files")
    by_dtype: dict[str, int] = {}
    tensors = 0
    found: dict[str, set[str]] = {}
    for name in listed:
        path = folder / name
        found[name] = set()
        for tensor, dtype, size in _safetensors_header_sizes(path):
            by_dtype[dtype] = by_dtype.get(dtype, 0) + size
            tensors += 1
            found[name].add(tensor)
    for tensor, name in weight_map.items():
        if tensor not in found[name]:
            raise BadInput(
                f"--model-dir {folder}: {index_name} puts tensor {tensor!r} in {name}, whose "
                "header does not have it (a partial or mismatched download?)"
            )
    total = sum(by_dtype.values())
    if total <= 0:
        raise BadInput(f"--model-dir {folder}: the safetensors headers describe no weights")
    if total_size is not None and abs(total_size - total) > 0.01 * max(total, total_size):
        notes.append(
            f"{index_name} says metadata.total_size {total_size:,} B but the shard headers sum "
            f"to {total:,} B; the headers are used"
        )
    return SafetensorsWeights(total, by_dtype, tensors, len(listed), notes)


def _read_index(folder: Path) -> tuple[str, int | None, dict[str, str]] | None:
    """(file name, metadata.total_size, weight_map) of the folder's safetensors index, if any."""
    candidates = sorted(folder.glob("*.safetensors.index.json"))
    if not candidates:
        return None
    preferred = folder / "model.safetensors.index.json"
    path = preferred if preferred in candidates else candidates[0]
    name = path.name
    doc = read_small_json("", str(path), MAX_INDEX_BYTES)
    if not isinstance(doc, dict):
        raise BadInput(f"{path}: must be a JSON object")
    weight_map = doc.get("weight_map")
    if not isinstance(weight_map, dict) or not weight_map:
        raise BadInput(f"{path}: 'weight_map' must be a non-empty object of tensor -> shard file")
    for tensor, shard in weight_map.items():
        if (
            not isinstance(shard, str)
            or not shard.endswith(".safetensors")
            or "/" in shard
            or "\\" in shard
            or shard.startswith(".")
        ):
            raise BadInput(
                f"{path}: 'weight_map' puts tensor {tensor!r} in {shard!r}, which is not a "
                ".safetensors file name in this folder"
            )
    metadata = doc.get("metadata")
    total_size = None
    if metadata is not None:
        if not isinstance(metadata, dict):
            raise BadInput(f"{path}: 'metadata' must be a JSON object")
        total_size = metadata.get("total_size")
        if total_size is not None and not _whole(total_size):
            raise BadInput(
                f"{path}: 'metadata.total_size' must be a whole number of bytes, not {total_size!r}"
            )
    return name, total_size, weight_map


def _numbering_gaps(names: list[str]) -> list[str]:
    """Shard files a model-0000k-of-0000n numbering implies but that are not among `names`."""
    have = set(names)
    series: set[tuple[str, int, str]] = set()
    for name in names:
        m = _SHARD_NAME.fullmatch(name)
        if m and 0 < int(m.group(3)) <= MAX_SHARDS:
            series.add((m.group(1), len(m.group(2)), m.group(3)))
    gaps = []
    for prefix, width, of in sorted(series):
        for k in range(1, int(of) + 1):
            expected = f"{prefix}-{k:0{width}d}-of-{of}.safetensors"
            if expected not in have:
                gaps.append(expected)
    return gaps


def _safetensors_header_sizes(path: Path) -> list[tuple[str, str, int]]:
    """(tensor, dtype, bytes) of every tensor in a safetensors header.

    Each tensor's shape times its dtype's size must equal its data_offsets span, and the span
    must lie inside the file's data: a header that disagrees (or whose sizes overflow) is
    refused naming the tensor, as is a file cut short by an interrupted download.
    """
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
    except RecursionError:
        raise BadInput(f"{path}: the safetensors header is nested too deeply to read") from None
    if not isinstance(header, dict):
        raise BadInput(f"{path}: the safetensors header is not a JSON object")
    data_size = file_size - 8 - length
    out = []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if not isinstance(info, dict):
            raise BadInput(f"{path}: tensor {name!r} is not described by a JSON object")
        offsets = info.get("data_offsets")
        dtype = str(info.get("dtype", "?"))
        if dtype not in SAFETENSORS_BYTES:
            raise BadInput(
                f"{path}: tensor {name!r} has dtype {dtype!r}, which llmdoctor does not know; "
                "it cannot size these weights"
            )
        shape = info.get("shape")
        if not (
            isinstance(offsets, list) and len(offsets) == 2 and all(_whole(o) for o in offsets)
        ):
            raise BadInput(f"{path}: tensor {name!r} has no valid data_offsets in the header")
        if offsets[0] > offsets[1]:
            raise BadInput(f"{path}: tensor {name!r} has data_offsets that end before they start")
        if not (isinstance(shape, list) and all(_whole(d) for d in shape)):
            raise BadInput(f"{path}: tensor {name!r} has no valid shape in the header")
        size = offsets[1] - offsets[0]
        expected = _tensor_bytes(shape, dtype, cap=size)
        if expected != size:
            raise BadInput(
                f"{path}: tensor {name!r} of shape {shape} {dtype} is {expected:,} B, but its "
                f"data_offsets span {size:,} B; the header is corrupt"
            )
        if offsets[1] > data_size:
            raise BadInput(
                f"{path}: tensor {name!r} ends at byte {offsets[1]:,} of the data, but the file "
                f"holds {data_size:,} B of it (cut short: a download still running?)"
            )
        out.append((name, dtype, size))
    return out


def _tensor_bytes(shape: list[int], dtype: str, cap: int) -> int:
    """Bytes of a tensor (sub-byte dtypes rounded up), in whole numbers: a shape such as
    [1e12, 1e12] neither overflows nor wraps; past `cap` the count stops early (it disagrees)."""
    bits = round(SAFETENSORS_BYTES[dtype] * 8)
    if 0 in shape:
        return 0
    elements = 1
    for dim in shape:
        elements *= dim
        if elements * bits > (cap + 1) * 8:
            return (elements * bits + 7) // 8  # already more than the data_offsets span
    return (elements * bits + 7) // 8


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
