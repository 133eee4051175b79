"""Values a runbook's Fix parameters take, read from the log lines that matched its signatures.

vLLM V1 states the answer itself::

    ValueError: To serve at least one request with the models's max seq len (131072), (16.00 GiB
    KV cache is needed, which is larger than the available KV cache memory (0.71 GiB). Based on
    the available memory, the estimated maximum model length is 5632. Try increasing ...

and V0 gives the tokens that fit::

    The model's max seq len (29000) is larger than the maximum number of tokens that can be
    stored in KV cache (23648). Try increasing `gpu_memory_utilization` ...

vLLM's refusal to start beside another tenant gives the share that is free, and PyTorch's OOM
the GPU's size ("GPU 0 has a total capacity of 7.75 GiB")::

    ValueError: Free memory on device (31.44/47.38 GiB) on startup is less than desired GPU
    memory utilization (0.95, 45.01 GiB). Decrease GPU memory utilization or reduce GPU memory
    used by other processes.

Plain string search, no regex: a log line is untrusted and may be long.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

KV_TOO_SMALL = "kv-cache-too-small-for-max-model-len"
TAKEN = "gpu-memory-taken-by-other-process"
FREE_ON_DEVICE = "Free memory on device ("
STARTUP_MEMORY = "vllm-startup-memory-insufficient"
TOTAL_CAPACITY = " has a total capacity of "  # PyTorch's OOM message
MAX_NUMBER_CHARS = 12
# (the words just before the number, the characters between them and the number)
MAX_LEN_SOURCES = (
    ("the estimated maximum model length is", " "),
    ("the maximum number of tokens that can be stored in KV cache", " ("),
)
MAX_DIGITS = 9


def _number_after(text: str, words: str, between: str) -> int | None:
    at = text.find(words + between)
    if at == -1:
        return None
    start = at + len(words) + len(between)
    end = start
    while end < len(text) and end - start < MAX_DIGITS and text[end].isdigit():
        end += 1
    return int(text[start:end]) if end > start else None


def max_model_len(lines: Iterable[str]) -> int | None:
    """The longest max_model_len the KV cache holds, as the engine's own error states it."""
    for text in lines:
        for words, between in MAX_LEN_SOURCES:
            value = _number_after(text, words, between)
            if value:
                return value
    return None


def _decimal(text: str) -> float | None:
    if not text or len(text) > MAX_NUMBER_CHARS:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if value == value and value >= 0 else None  # not NaN, not negative


def free_share(lines: Iterable[str]) -> float | None:
    """The gpu_memory_utilization that fits what was free at startup (free / total, rounded
    down to 0.01), from vLLM's "Free memory on device (free/total GiB)" refusal."""
    for text in lines:
        at = text.find(FREE_ON_DEVICE)
        if at == -1:
            continue
        start = at + len(FREE_ON_DEVICE)
        end = text.find(" GiB)", start, start + 2 * MAX_NUMBER_CHARS + 1)
        free_text, sep, total_text = text[start:end].partition("/") if end != -1 else ("", "", "")
        free, total = _decimal(free_text), _decimal(total_text)
        if sep and free is not None and total and free < total:
            share = math.floor(free / total * 100) / 100
            if share > 0:
                return share
    return None


def gpu_total_gib(lines: Iterable[str]) -> float | None:
    """The GPU's memory as PyTorch's OOM states it ("GPU 0 has a total capacity of 7.75 GiB")."""
    for text in lines:
        at = text.find(TOTAL_CAPACITY)
        if at == -1:
            continue
        start = at + len(TOTAL_CAPACITY)
        end = text.find(" GiB", start, start + MAX_NUMBER_CHARS + 1)
        value = _decimal(text[start:end]) if end != -1 else None
        if value:
            return value
    return None


def fix_values(entry_id: str, lines: Iterable[str]) -> dict[str, int | float]:
    """The Fix parameters of `entry_id` that its matched lines give (often none)."""
    if entry_id == KV_TOO_SMALL and (value := max_model_len(lines)) is not None:
        return {"max_model_len": value}
    if entry_id == TAKEN and (share := free_share(lines)) is not None:
        return {"gpu_memory_utilization": share}
    if entry_id == STARTUP_MEMORY and (total := gpu_total_gib(lines)) is not None:
        return {"gpu_memory": total}
    return {}
