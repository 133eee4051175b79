"""Probe a local tokenizer folder: load time, encode speed, fast or slow, vocab, bos/eos, chat template.

Reads only local files and never downloads (HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE are set before
transformers is imported, and `local_files_only=True`). Uses the `tokenizers` library for
tokenizer.json, and transformers too when it is installed (it is never a dependency).
"""

from __future__ import annotations

import importlib.util
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

SMALL_FILE_CAP = 8 * 1024 * 1024  # config.json, tokenizer_config.json and friends
SLOW_TOKENIZER_FILES = ("tokenizer.model", "vocab.json", "merges.txt", "vocab.txt", "spiece.model")
KNOWN_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "config.json",
    "generation_config.json",
    "chat_template.jinja",
    "chat_template.json",
    *SLOW_TOKENIZER_FILES,
)
PARAGRAPH = (
    "On-call engineers read this text to time a tokenizer. The service answered 1,024 requests "
    "in 37.5 seconds; the p95 latency was 812 ms, and the queue held 42 waiting prompts. "
    "Kubernetes restarted pod vllm-7b-7d9f8c6b5-x2kqp twice (exit code 137, OOMKilled) before "
    "the GPU memory utilisation was lowered from 0.95 to 0.90. Naïve café résumé, 東京, "
    "Zürich: mixed scripts, numbers like 3.14159 and URLs such as https://example.com/a?b=c "
    "make the encoder work for its living."
)


def sample_text(repeats: int = 24) -> str:
    """A fixed text of roughly 2,000 tokens for most LLM tokenizers."""
    return "\n".join(f"{i}. {PARAGRAPH}" for i in range(1, repeats + 1))


def _read_json(path: Path) -> Any:
    if not path.is_file() or path.stat().st_size > SMALL_FILE_CAP:
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except ValueError:
        return None


def _token_text(value: Any) -> str | None:
    """A special token as tokenizer_config.json writes it: a string or {"content": ...}."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) and value else None


def _config_vocab(config: Any) -> int | None:
    if not isinstance(config, dict):
        return None
    for holder in (config, config.get("text_config"), config.get("llm_config")):
        if isinstance(holder, dict) and isinstance(holder.get("vocab_size"), int):
            return holder["vocab_size"]
    return None


def _chat_template_source(folder: Path, tok_config: Any) -> str | None:
    if isinstance(tok_config, dict) and tok_config.get("chat_template"):
        return "tokenizer_config.json"
    if (folder / "chat_template.jinja").is_file():
        return "chat_template.jinja"
    template = _read_json(folder / "chat_template.json")
    if isinstance(template, dict) and template.get("chat_template"):
        return "chat_template.json"
    return None


def _time_encode(encode, text: str) -> tuple[float, float, int]:
    """(cold ms, median warm ms of 3, token count) for one encode function."""
    start = time.perf_counter()
    count = len(encode(text))
    cold = (time.perf_counter() - start) * 1000
    warm = []
    for _ in range(3):
        start = time.perf_counter()
        encode(text)
        warm.append((time.perf_counter() - start) * 1000)
    return round(cold, 2), round(statistics.median(warm), 2), count


def probe_tokenizer(path: str | Path, text: str | None = None) -> dict[str, Any]:
    """The `tokenizer.json` fact for a local model folder (or a tokenizer.json file)."""
    given = Path(path)
    folder = given.parent if given.is_file() else given
    tok_file = given if given.is_file() else folder / "tokenizer.json"
    text = text if text is not None else sample_text()
    tok_config = _read_json(folder / "tokenizer_config.json")
    special = _read_json(folder / "special_tokens_map.json")
    config = _read_json(folder / "config.json")
    gen_config = _read_json(folder / "generation_config.json")
    result: dict[str, Any] = {
        "path": str(given),
        "files": sorted(n for n in KNOWN_FILES if (folder / n).is_file()),
        "fast": tok_file.is_file(),
        "loader": None,
        "load_s": None,
        "encode_cold_ms": None,
        "encode_ms": None,
        "encode_tokens": None,
        "vocab_size": None,
        "config_vocab_size": _config_vocab(config),
        "bos_token": None,
        "eos_token": None,
        "bos_in_vocab": None,
        "eos_in_vocab": None,
        "eos_token_id": None,
        "chat_template": _chat_template_source(folder, tok_config),
        "model_max_length": None,
        "transformers": None,
        "errors": [],
    }
    for name in ("bos_token", "eos_token"):
        for source in (tok_config, special):
            if isinstance(source, dict) and _token_text(source.get(name)):
                result[name] = _token_text(source.get(name))
                break
    for source in (gen_config, config):
        if isinstance(source, dict) and source.get("eos_token_id") is not None:
            result["eos_token_id"] = source["eos_token_id"]
            break
    if isinstance(tok_config, dict) and isinstance(tok_config.get("model_max_length"), int | float):
        result["model_max_length"] = tok_config["model_max_length"]
    if tok_file.is_file():
        _probe_fast(tok_file, text, result)
    else:
        slow = [n for n in SLOW_TOKENIZER_FILES if (folder / n).is_file()]
        result["errors"].append(
            "no tokenizer.json (fast tokenizer) in the folder"
            + (f"; only slow-tokenizer files: {', '.join(slow)}" if slow else "")
        )
    if importlib.util.find_spec("transformers") is not None:
        result["transformers"] = _probe_transformers(folder, text)
        if result["loader"] is None and result["transformers"].get("load_s") is not None:
            tf = result["transformers"]
            result.update(
                loader="transformers",
                load_s=tf["load_s"],
                encode_ms=tf.get("encode_ms"),
                encode_cold_ms=tf.get("encode_cold_ms"),
                encode_tokens=tf.get("encode_tokens"),
                vocab_size=tf.get("vocab_size"),
            )
    return result


def _probe_fast(tok_file: Path, text: str, result: dict[str, Any]) -> None:
    try:
        from tokenizers import Tokenizer
    except ImportError:
        result["errors"].append("the `tokenizers` package is not installed")
        return
    start = time.perf_counter()
    try:
        tokenizer = Tokenizer.from_file(str(tok_file))
    except Exception as exc:  # a corrupt or too-new tokenizer.json raises plain Exception
        message = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        result["errors"].append(f"tokenizer.json does not load: {message}")
        return
    result["loader"] = "tokenizers"
    result["load_s"] = round(time.perf_counter() - start, 3)
    cold, warm, count = _time_encode(lambda t: tokenizer.encode(t).ids, text)
    result.update(encode_cold_ms=cold, encode_ms=warm, encode_tokens=count)
    result["vocab_size"] = tokenizer.get_vocab_size(with_added_tokens=True)
    for name in ("bos", "eos"):
        token = result[f"{name}_token"]
        if token is not None:
            result[f"{name}_in_vocab"] = tokenizer.token_to_id(token) is not None


def _probe_transformers(folder: Path, text: str) -> dict[str, Any]:
    """Load with transformers' AutoTokenizer, offline, without remote code."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    out: dict[str, Any] = {"load_s": None, "is_fast": None, "class": None, "error": None}
    try:
        from transformers import AutoTokenizer

        start = time.perf_counter()
        tokenizer = AutoTokenizer.from_pretrained(
            str(folder), local_files_only=True, trust_remote_code=False
        )
        out["load_s"] = round(time.perf_counter() - start, 3)
        out["is_fast"] = bool(getattr(tokenizer, "is_fast", False))
        out["class"] = type(tokenizer).__name__
        out["has_chat_template"] = bool(getattr(tokenizer, "chat_template", None))
        cold, warm, count = _time_encode(tokenizer.encode, text)
        out.update(
            encode_cold_ms=cold, encode_ms=warm, encode_tokens=count, vocab_size=len(tokenizer)
        )
    except Exception as exc:  # transformers raises many types (OSError, ValueError, ...)
        first = str(exc).splitlines()[0][:200] if str(exc) else ""
        out["error"] = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
    return out
