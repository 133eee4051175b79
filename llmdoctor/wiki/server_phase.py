"""Whether a log line comes while the server starts or once it serves: what an entry's
`at_startup` front matter needs (cuda-oom-runtime's is vllm-startup-memory-insufficient: an OOM
before the first request is a model and graphs that do not fit, not a request that was too big).
explain, log-signatures and pod-restarts all ask it here, so the three tell one story.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

# a server starting: vLLM's start-up lines, the start-up calls a traceback passes through, its
# wrappers' words when start-up fails, and the command that launches it
STARTUP_LINE = re.compile(
    r"Starting to load model|Loading (model )?weights took|Loading safetensors checkpoint shards"
    r"|Model loading took|Memory profiling takes|Capturing (CUDA graphs?|cudagraphs?)"
    r"|\bin (load_model|load_weights|profile_run|_dummy_run|_dummy_sampler_run"
    r"|determine_available_memory|determine_num_available_blocks|initialize_kv_cache"
    r"|_initialize_kv_caches|initialize_from_config|capture_model)\b"
    r"|while processing method (load_model|determine_num_available_blocks|initialize_cache"
    r"|determine_available_memory|compile_or_warm_up_model)"
    r"|Engine core initialization failed|Engine process failed to start|EngineCore failed to start"
    r"|\bvllm serve [^-]|vllm\.entrypoints\.openai\.api_server"
)
# an engine's stats line that says tokens were generated (vLLM V0/V1 `Avg generation throughput:
# 77.3 tokens/s`, SGLang's decode batch `gen throughput (token/s): 45.23`)
PROGRESS_LINE = re.compile(
    r"(Avg generation throughput: |gen throughput \(token/s\): )([1-9]|0\.[0-9]*[1-9])"
)
# a server that is serving: start-up done, a generation request received or answered, tokens
SERVING_LINE = re.compile(
    r"Application startup complete|\"POST /v1/(chat/)?completions|Received request|Added request"
    r"|Avg prompt throughput: ([1-9]|0\.[0-9]*[1-9])|" + PROGRESS_LINE.pattern
)
# how far after the line a start-up line may come and still be its start-up (the traceback that
# names `load_model`, a worker's `while processing method load_model`), not the next start's
AFTER = 50


def during_startup(lines: Iterable[tuple[int, str]], line: int) -> bool:
    """Whether input line `line` comes while the server starts: a start-up line before it or
    just after it, and no line before it that says the server served. `lines` are (number,
    text) in order; read only as far as the answer needs.
    """
    started = False
    for number, text in lines:
        if number > line + AFTER:
            break
        if number < line and SERVING_LINE.search(text):
            return False
        if not started and STARTUP_LINE.search(text):
            started = True
        if started and number >= line:
            return True
    return started


def startup_story(entries: dict, entry_id: str) -> str | None:
    """The entry an entry's `at_startup` names, when it is one of `entries` (and not itself)."""
    entry = entries.get(entry_id)
    named = (getattr(entry, "front_matter", None) or {}).get("at_startup")
    if isinstance(named, str) and named != entry_id and named in entries:
        return named
    return None


def retold_at_startup(
    entries: dict, first_lines: dict[str, int], lines: Callable[[], Iterable[str]]
) -> dict[str, str]:
    """For each entry (id → the line of its first match in one log) whose `at_startup` applies:
    the entry whose story it is. `lines()` reads that log again from its start (as far as
    `during_startup` needs: a crash-looping start-up's log is short, a serving one says so early).
    """
    retold = {}
    for entry_id, line in first_lines.items():
        story = startup_story(entries, entry_id)
        if story is not None and during_startup(enumerate(lines(), 1), line):
            retold[entry_id] = story
    return retold
