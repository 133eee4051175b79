"""Values a runbook's Fix parameters take, read from the log lines that matched its signatures.

vLLM V1 states the answer itself::

    ValueError: To serve at least one request with the models's max seq len (131072), (16.00 GiB
    KV cache is needed, which is larger than the available KV cache memory (0.71 GiB). Based on
    the available memory, the estimated maximum model length is 5632. Try increasing ...

and V0 gives the tokens that fit::

    The model's max seq len (29000) is larger than the maximum number of tokens that can be
    stored in KV cache (23648). Try increasing `gpu_memory_utilization` ...

Plain string search, no regex: a log line is untrusted and may be long.
"""

from __future__ import annotations

from collections.abc import Iterable

KV_TOO_SMALL = "kv-cache-too-small-for-max-model-len"
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


def fix_values(entry_id: str, lines: Iterable[str]) -> dict[str, int]:
    """The Fix parameters of `entry_id` that its matched lines give (often none)."""
    if entry_id == KV_TOO_SMALL and (value := max_model_len(lines)) is not None:
        return {"max_model_len": value}
    return {}
