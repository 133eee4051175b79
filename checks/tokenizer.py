"""The tokenizer the server loads: load time, encode speed, fast or slow, vocab, bos/eos, chat template.

From `tokenizer.json` (the probe of `llmdoctor probe --tokenizer PATH`): a slow-only tokenizer
(no tokenizer.json) makes vLLM log "Using a slow tokenizer. This might cause a significant
slowdown."; a vocabulary larger than the model's embedding (config.json vocab_size) yields
out-of-range token ids; without a chat template /v1/chat/completions answers 400.
"""

from __future__ import annotations

from pathlib import Path

from llmdoctor.engine.facts import Facts
from llmdoctor.engine.findings import Finding, Severity, evidence, ok
from llmdoctor.engine.registry import check
from llmdoctor.parsers.documents import LIST, NUMBER, OBJECT, TEXT, require_document
from llmdoctor.parsers.vllm_serving import threshold

CHECK = "tokenizer"
TOKENIZER = ("tokenizer-problem",)
COUNT_TOLERANCE = 0.01  # server and local token counts may differ by special tokens


def _evidence(t: dict) -> list[dict]:
    src = "tokenizer.json"
    items = [
        evidence(f"files: {', '.join(t.get('files') or []) or 'none of the known files'}", src),
        evidence(
            f"loader {t.get('loader')}, cold load {t.get('load_s')} s, encode "
            f"{t.get('encode_tokens')} tokens in {t.get('encode_ms')} ms (first call "
            f"{t.get('encode_cold_ms')} ms)",
            src,
        ),
        evidence(
            f"vocab {t.get('vocab_size')} (config.json vocab_size {t.get('config_vocab_size')}), "
            f"bos {t.get('bos_token')!r}, eos {t.get('eos_token')!r} (eos_token_id "
            f"{t.get('eos_token_id')}), chat template: {t.get('chat_template') or 'none'}",
            src,
        ),
    ]
    server = t.get("server")
    if isinstance(server, dict):
        items.append(
            evidence(
                f"server POST /tokenize: status {server.get('status')}, {server.get('latency_ms')}"
                f" ms, {server.get('count')} tokens"
                + (f", {server['error']}" if server.get("error") else ""),
                src,
            )
        )
    for err in t.get("errors") or []:
        items.append(evidence(f"error: {err}", src))
    return items


def _load_problems(t: dict, facts: Facts) -> list[tuple[Severity, str, tuple[str, ...]]]:
    problems = []
    if t.get("timed_out_after_s") is not None:
        problems.append(
            (Severity.CRITICAL, f"did not load within {t['timed_out_after_s']} s", TOKENIZER)
        )
        return problems
    if t.get("loader") is None:
        if t.get("fast") is False:
            problems.append(
                (
                    Severity.WARNING,
                    "no tokenizer.json: only a slow (Python) tokenizer, which vLLM warns "
                    "'might cause a significant slowdown'",
                    TOKENIZER,
                )
            )
        else:
            errors = "; ".join(t.get("errors") or []) or "unknown error"
            problems.append((Severity.CRITICAL, f"does not load: {errors}", TOKENIZER))
        return problems
    tf = t.get("transformers") or {}
    if t.get("fast") is False or tf.get("is_fast") is False:
        problems.append(
            (Severity.WARNING, "only a slow (Python) tokenizer is available", TOKENIZER)
        )
    load_limit = threshold(facts, "max_tokenizer_load_s")
    if (t.get("load_s") or 0) > load_limit:
        problems.append(
            (Severity.WARNING, f"cold load takes {t['load_s']} s (> {load_limit:g} s)", TOKENIZER)
        )
    encode_limit = threshold(facts, "max_encode_ms")
    if (t.get("encode_ms") or 0) > encode_limit:
        problems.append(
            (
                Severity.WARNING,
                f"encoding {t.get('encode_tokens')} tokens takes {t['encode_ms']} ms "
                f"(> {encode_limit:g} ms): every request pays it on the API server's CPU",
                TOKENIZER,
            )
        )
    return problems


def _config_problems(t: dict, facts: Facts) -> list[tuple[Severity, str, tuple[str, ...]]]:
    problems = []
    vocab, model_vocab = t.get("vocab_size"), t.get("config_vocab_size")
    if vocab and model_vocab and vocab > model_vocab:
        problems.append(
            (
                Severity.CRITICAL,
                f"the tokenizer has {vocab} tokens but the model's embedding has {model_vocab} "
                "(config.json vocab_size): ids past the embedding crash or produce garbage — "
                "tokenizer and weights do not belong together",
                TOKENIZER,
            )
        )
    if t.get("eos_token") is None and t.get("eos_token_id") is None:
        problems.append(
            (
                Severity.WARNING,
                "no EOS token in tokenizer_config.json, special_tokens_map.json, config.json or "
                "generation_config.json: generations run to max_tokens",
                TOKENIZER,
            )
        )
    for name in ("eos", "bos"):
        if t.get(f"{name}_in_vocab") is False:
            severity = Severity.CRITICAL if name == "eos" else Severity.WARNING
            problems.append(
                (
                    severity,
                    f"the {name} token {t.get(f'{name}_token')!r} is not in the vocabulary",
                    TOKENIZER,
                )
            )
    tf = t.get("transformers") or {}
    if not t.get("chat_template") and not tf.get("has_chat_template"):
        problems.append(
            (
                Severity.WARNING,
                "no chat template (tokenizer_config.json chat_template, chat_template.jinja): "
                "/v1/chat/completions answers 400 unless vLLM is started with --chat-template",
                ("chat-template-missing",),
            )
        )
    return problems


def _server_problems(t: dict, facts: Facts) -> list[tuple[Severity, str, tuple[str, ...]]]:
    server = t.get("server")
    if not isinstance(server, dict) or server.get("error"):
        return []
    problems = []
    limit = threshold(facts, "max_tokenize_ms")
    if (server.get("latency_ms") or 0) > limit:
        problems.append(
            (
                Severity.WARNING,
                f"the server's POST /tokenize takes {server['latency_ms']:.0f} ms for "
                f"{server.get('count')} tokens (> {limit:g} ms)",
                TOKENIZER,
            )
        )
    local, remote = t.get("encode_tokens"), server.get("count")
    if local and remote and abs(local - remote) > max(2, COUNT_TOLERANCE * remote):
        problems.append(
            (
                Severity.WARNING,
                f"the server counts {remote} tokens for the sample text, this tokenizer {local}: "
                "the folder given is not the tokenizer the server uses",
                TOKENIZER,
            )
        )
    return problems


@check(
    CHECK,
    title="Tokenizer load, speed and configuration",
    scope="vllm",
    needs=("tokenizer.json",),
    runbooks=("tokenizer-problem", "chat-template-missing"),
)
def tokenizer_check(facts: Facts) -> list[Finding]:
    t = require_document(
        facts,
        "tokenizer.json",
        {
            "path": TEXT,
            "files": LIST,
            "loader": TEXT,
            "errors": LIST,
            "load_s": NUMBER,
            "encode_ms": NUMBER,
            "encode_tokens": NUMBER,
            "vocab_size": NUMBER,
            "config_vocab_size": NUMBER,
            "server": OBJECT,
            "transformers": OBJECT,
            "timed_out_after_s": NUMBER,
        },
        "llmdoctor's tokenizer probe result",
        marker=("loader", "errors", "files"),
    )
    subject = f"tokenizer {Path(str(t.get('path') or '?')).name}"
    items = _evidence(t)
    problems = _load_problems(t, facts)
    if t.get("loader") is not None:
        problems += _config_problems(t, facts)
    problems += _server_problems(t, facts)
    if not problems:
        vocab, model_vocab = t.get("vocab_size"), t.get("config_vocab_size")
        fits = (
            f"vocab {vocab} fits the model's {model_vocab}"
            if vocab and model_vocab
            else "vocab not compared (no config.json vocab_size)"
        )
        summary = (
            f"loads in {t.get('load_s')} s, encodes {t.get('encode_tokens')} tokens in "
            f"{t.get('encode_ms')} ms, {fits}, chat template present"
        )
        return [ok(CHECK, summary, items, subject)]
    return [Finding(CHECK, sev, text, items, list(books), subject) for sev, text, books in problems]
