"""GPUs by name with their memory (data/gpus.json), vLLM's batch defaults per GPU
(data/vllm_batch_defaults.json), and the size / count parsers of the capacity command."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from llmdoctor.errors import BadInput

GiB = 1 << 30
DATA = Path(__file__).resolve().parents[1] / "data"


@dataclass(frozen=True)
class Gpu:
    name: str
    memory_bytes: int  # as the vendor states it (NVIDIA's "80 GB" of HBM is 80 GiB)
    usable_bytes: int  # what CUDA reports as total, which vLLM multiplies by the utilization
    compute_capability: str
    aliases: tuple[str, ...] = ()


@cache
def _load(name: str) -> dict[str, Any]:
    with open(DATA / f"{name}.json", encoding="utf-8") as fh:
        return json.load(fh)


@cache
def gpu_table() -> tuple[Gpu, ...]:
    """The GPUs of llmdoctor/data/gpus.json."""
    gpus = []
    for item in _load("gpus")["gpus"]:
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


def gpus_named_like(name: str) -> list[str]:
    """The table's GPUs whose name holds `name` ('a100' -> A100-40GB, A100-80GB): for a name
    find_gpu leaves unmatched because it fits several memory sizes."""
    wanted = _norm(name)
    return [g.name for g in gpu_table() if wanted and wanted in _norm(g.name)]


def batch_defaults(
    gpu_memory_bytes: int,
    gpu_name: str | None,
    *,
    throughput_mode: bool = False,
    api_server: bool = True,
) -> tuple[int, int, str]:
    """vLLM's (max_num_batched_tokens, max_num_seqs) defaults for this GPU, and why."""
    from llmdoctor.gpus.tables import compute_capability_for

    doc = _load("vllm_batch_defaults")
    name = (gpu_name or "").lower()
    capability = compute_capability_for(gpu_name) if gpu_name else None
    for tier in doc["tiers"]:
        if gpu_memory_bytes < tier["min_memory_gib"] * GiB:
            continue
        if any(word in name for word in tier["name_excludes"]):
            continue
        if capability and capability in tier["capability_excludes"]:
            continue
        values = tier["openai_api_server" if api_server else "llm_class"]
        batched, seqs = values["max_num_batched_tokens"], values["max_num_seqs"]
        why = (
            f"vLLM's default for a GPU of >= {tier['min_memory_gib']} GiB"
            if tier["min_memory_gib"]
            else "vLLM's default for GPUs under 70 GiB, or named A100"
        )
        if tier["name_excludes"]:
            why += f" not named {'/'.join(tier['name_excludes'])}"
        if throughput_mode:
            factor = doc["throughput_mode_multiplier"]
            batched, seqs = batched * factor, seqs * factor
            why += f", x{factor} for --performance-mode throughput"
        return batched, seqs, why
    raise AssertionError("vllm_batch_defaults.json has no catch-all tier")


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
