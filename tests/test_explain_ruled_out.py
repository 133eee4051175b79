"""A runbook entry's `ruled_out_by` lines keep a text-only guess of it from being named: the
words of the error fit the entry, what the line proves does not (real excerpts, sources in
tests/fixtures/explain_ruled_out/SOURCES.md)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from llmdoctor.engine.textsource import TextSource
from llmdoctor.triage.explain import FUSION, explain

FIXTURES = Path(__file__).parent / "fixtures"
RULED_OUT = FIXTURES / "explain_ruled_out"
CORPUS_UNKNOWN = FIXTURES / "explain_corpus" / "_unknown"
ROUND7_UNKNOWN = FIXTURES / "explain_fresh" / "round7" / "_unknown"  # measured: tuning data now


# An error's words alone no longer name an entry (triage.explain.TEXT_ONLY is below the
# threshold since 2026-12-05); a rule still guards a text match a hint lifts, and any numbers a
# calibration may choose again. Where a test shows the rule is what holds a guess back, it reads
# with the numbers before, under which the words alone named the entry.
WORDS_NAME = dataclasses.replace(FUSION, text_only=0.5)


def _named(path: Path, entries: dict, fusion=FUSION) -> list[str]:
    text = path.read_text(encoding="utf-8")
    result = explain(TextSource.from_text(path.name, text), entries, fusion=fusion)
    return [m.id for m in result.matches]


def _without_rule(entries: dict, entry_id: str) -> dict:
    return {**entries, entry_id: dataclasses.replace(entries[entry_id], ruled_out_by=[])}


def _held_by_its_rule(path: Path, entries: dict, entry_id: str) -> bool:
    """Not named, also when the words alone may name an entry, and named then without the rule."""
    return entry_id not in _named(path, entries, WORDS_NAME) and entry_id in _named(
        path, _without_rule(entries, entry_id), WORDS_NAME
    )


@pytest.mark.parametrize(
    "name",
    [
        # OpenAI's 404 for a path it does not serve: the base URL lacked /v1, the model was fine
        "chatgpt-web-issue737-invalid-url-baseurl-without-v1.log",
        # the same body from a custom API address, fixed by adding /v1
        "mossgpt-utools-issue50-invalid-url-custom-api-without-v1.log",
    ],
)
def test_a_404_invalid_url_names_no_unknown_model_though_its_words_fit(entries, name):
    path = RULED_OUT / "model-name-not-found" / name
    assert "model-name-not-found" not in _named(path, entries)
    # the rule is what holds it back: without it the text alone would name the entry
    assert _held_by_its_rule(path, entries, "model-name-not-found")


@pytest.mark.parametrize(
    "name",
    [
        # Home Assistant's integration calling Ollama's /api/generate: connection refused
        "home-llm-issue79-ollama-api-generate-connection-refused.log",
        # a LangChain script calling localhost:11434/api/generate with Ollama not running
        "updated-langchain-issue5-ollama-api-generate-connection-refused.log",
    ],
)
def test_a_client_that_cannot_reach_an_inference_api_names_no_download_failure(entries, name):
    assert "model-download-failure" not in _named(
        RULED_OUT / "model-download-failure" / name, entries
    )


@pytest.mark.parametrize(
    "name",
    [
        # flash_attn built against another torch: `undefined symbol: _ZN3c10…` (C++, not cu*)
        "flash-attn-undefined-symbol-llava-registry.log",
        # vLLM's _C built against another torch: the same kind of mangled symbol
        "vllm-c-extension-undefined-symbol-torch-abi.log",
    ],
)
def test_a_missing_cplusplus_symbol_is_never_named_a_driver_mismatch(entries, name):
    assert "driver-cuda-mismatch" not in _named(CORPUS_UNKNOWN / name, entries)


@pytest.mark.parametrize(
    ("name", "entry_id", "held_by_the_rule"),
    [
        # flash_attn_2_cuda missing `_ZN3c104cuda9SetDeviceEi`: built for another torch (since
        # Ollama's driver-library wording joined driver-cuda-mismatch, 2026-12-02, its words alone
        # no longer name the entry; the rule stays as the guard)
        ("r7-neurips-flash-attn-undefined-symbol-abi.log", "driver-cuda-mismatch", False),
        # an app container calling Ollama at `llm:11434/api/generate` could not resolve `llm`
        ("r7-genai-stack-docker-dns-llm-host.log", "model-download-failure", True),
        # a Java client's h2c upgrade dropped the body: vLLM's `Field required` for ('body',)
        # (since other engines' context wordings joined context-length-exceeded, 2026-12-06, its
        # words alone no longer name the entry; the rule stays as the guard)
        ("r7-mateclaw-java-h2c-upgrade-drops-body.log", "context-length-exceeded", False),
    ],
)
def test_round7_errors_no_entry_covers_are_not_named_on_words_a_ruled_out_line_refutes(
    entries, name, entry_id, held_by_the_rule
):
    assert entry_id not in _named(ROUND7_UNKNOWN / name, entries)
    # where the rule is what holds it back, without it the text alone would name the entry
    path = ROUND7_UNKNOWN / name
    assert entry_id not in _named(path, entries, WORDS_NAME)
    unruled = _named(path, _without_rule(entries, entry_id), WORDS_NAME)
    assert (entry_id in unruled) is held_by_the_rule


def test_a_request_body_the_schema_refused_names_neither_model_nor_context_length(entries):
    # pydantic's `Field required` for `messages`: the client sent `message`
    named = _named(CORPUS_UNKNOWN / "vllm-400-field-required-messages-typo.log", entries)
    assert not {"model-name-not-found", "context-length-exceeded"} & set(named)


def test_a_signature_match_is_never_held_back_by_a_ruled_out_line(entries):
    # vLLM's own 404 for an unknown model pasted with another client's `Invalid URL` 404: the
    # signature proves the entry, the other line cannot unprove it
    text = "".join(
        p.read_text(encoding="utf-8")
        for p in (
            FIXTURES
            / "runbooks/model-name-not-found/openai-client-notfounderror-qwen-vl-issue222.log",
            RULED_OUT
            / "model-name-not-found/chatgpt-web-issue737-invalid-url-baseurl-without-v1.log",
        )
    )
    result = explain(TextSource.from_text("paste", text), entries)
    assert result.matches and result.matches[0].id == "model-name-not-found"


@pytest.mark.parametrize(
    "pattern, why",
    [
        # RE2 has no backreferences: the rule cannot be applied at all
        (r"(a)\1", "cannot compile"),
        # a pattern that matches every line would hold back every guess of the entry
        (r"x*", "empty string"),
    ],
)
def test_a_ruled_out_pattern_explain_cannot_use_is_named_in_its_warnings(entries, pattern, why):
    team = {
        **entries,
        "model-name-not-found": dataclasses.replace(
            entries["model-name-not-found"], ruled_out_by=[pattern, "Invalid URL"]
        ),
    }
    path = (
        RULED_OUT / "model-name-not-found/chatgpt-web-issue737-invalid-url-baseurl-without-v1.log"
    )
    result = explain(TextSource.from_text(path.name, path.read_text(encoding="utf-8")), team)
    named = [w for w in result.warnings if "ruled_out_by pattern" in w]
    assert len(named) == 1 and repr(pattern) in named[0] and why in named[0], result.warnings
    # the usable pattern beside it is still applied
    assert "model-name-not-found" not in [m.id for m in result.matches]


def test_the_builtin_ruled_out_patterns_all_apply(entries):
    # no built-in rule is silently dropped
    path = (
        RULED_OUT / "model-name-not-found/chatgpt-web-issue737-invalid-url-baseurl-without-v1.log"
    )
    result = explain(TextSource.from_text(path.name, path.read_text(encoding="utf-8")), entries)
    assert not [w for w in result.warnings if "ruled_out_by" in w]


ROUND8_UNKNOWN = FIXTURES / "explain_fresh" / "round8" / "_unknown"  # measured: tuning data now


def test_a_guided_decoding_backend_that_cannot_be_imported_is_no_rejected_grammar(entries):
    # SGLang importing a function outlines had renamed (round 8): the words are json_schema and
    # regex, the fix was pinning outlines; no grammar was ever compiled
    path = ROUND8_UNKNOWN / "r8-sglang-194-outlines-build-regex-import-error.log"
    assert "guided-decoding-grammar-error" not in _named(path, entries)
    # the rule is what holds it back: without it the text alone would name the entry
    assert _held_by_its_rule(path, entries, "guided-decoding-grammar-error")
    # and vLLM's lm-format-enforcer backend failing to import transformers' LogitsWarper is
    # named neither way (an install problem: no entry covers it)
    other = RULED_OUT / "guided-decoding-grammar-error"
    assert not _named(
        other / "vllm-issue14401-lm-format-enforcer-logitswarper-import-error.log", entries
    )


def test_a_shared_memory_segment_nccl_cannot_open_is_no_small_dev_shm(entries):
    # NCCL's `Error while attaching … No such file or directory` with a size of 0: a peer's
    # descriptor misread (NCCL PR 2059), whatever /dev/shm's size; shm-too-small's words fit
    path = RULED_OUT / "shm-too-small" / "easyr1-issue505-nccl-shm-attach-enoent-size-0.log"
    assert "shm-too-small" not in _named(path, entries)
    assert _held_by_its_rule(path, entries, "shm-too-small")


def test_a_tracebacks_header_and_frames_name_no_entry(entries):
    # LiteLLM's proxy refusing a malformed JSON body (round 8): tool-call-parser-error's only
    # naming words in it were `call` (`most recent call last`) and `read` (a frame's
    # `_read_request_body`); where an error passed says nothing of what it is
    path = ROUND8_UNKNOWN / "r8-litellm-8535-doc-curl-invalid-json-payload.log"
    assert "tool-call-parser-error" not in _named(path, entries)


def test_an_oom_with_mib_reserved_but_unallocated_is_no_fragmentation(entries):
    # PyTorch's ROCm OOM on a 32 GB MI50 (round 11, measured): `1.21 MiB is reserved by PyTorch
    # but unallocated` (the line cut there); fragmentation was named on its words alone (0.5)
    path = (
        FIXTURES
        / "explain_fresh"
        / "round11"
        / "vllm-startup-memory-insufficient"
        / "r11-c1-gfx906-qwen3-32b-single-32gb.log"
    )
    assert "1.21 MiB is reserved by PyTorch but unallocate" in path.read_text(encoding="utf-8")
    named = _named(path, entries)
    # the OOM came at start-up (`vllm serve` launched it, nothing served): told as the start-up
    # that does not fit (cuda-oom-runtime's at_startup), and still no fragmentation
    assert named[:1] == ["vllm-startup-memory-insufficient"]
    assert "gpu-memory-fragmentation" not in named
    assert "gpu-memory-fragmentation" not in _named(path, entries, WORDS_NAME)
    unruled = _named(path, _without_rule(entries, "gpu-memory-fragmentation"), WORDS_NAME)
    assert "gpu-memory-fragmentation" in unruled


# `overruled_by`: a line anywhere in the input that says an entry's own signature lines mean
# another cause. NGC's banner says no driver reached the container; the CUDA runtime's
# "driver version is insufficient" below it is then no old driver but none (the corpus's
# llama.cpp Space, round 30's Triton under Seldon, both labelled gpu-not-visible)
DRIVER_NOT_DETECTED = [
    FIXTURES
    / "explain_corpus"
    / "gpu-not-visible"
    / "r4c-hf-space-llama-cpp-nvidia-driver-not-detected-cuda-error-35.log",
    FIXTURES
    / "explain_fresh"
    / "round30"
    / "gpu-not-visible"
    / "r30-eco-seldon-triton-driver-not-detected.log",
]


@pytest.mark.parametrize("path", DRIVER_NOT_DETECTED, ids=lambda p: p.name)
def test_the_driver_banner_overrules_the_runtimes_insufficient_driver(entries, path):
    first = explain(TextSource.from_text(path.name, path.read_text(encoding="utf-8")), entries)
    assert [m.id for m in first.matches] == ["gpu-not-visible"], first.matches
    assert first.matches[0].explained_by == []
    # without the rule the runtime's words named the driver too old, first
    plain = {
        **entries,
        "driver-cuda-mismatch": dataclasses.replace(
            entries["driver-cuda-mismatch"], overruled_by=[]
        ),
    }
    before = explain(TextSource.from_text(path.name, path.read_text(encoding="utf-8")), plain)
    assert before.matches[0].id == "driver-cuda-mismatch"


def test_diagnose_tells_the_driver_banner_the_same_way(entries):
    from llmdoctor.engine.facts import Facts
    from llmdoctor.usecases.diagnose import diagnose

    facts = Facts({"time/now": 0, "target": "pod/llm"})
    text = DRIVER_NOT_DETECTED[0].read_text(encoding="utf-8")
    facts.set("logs/llm.log", TextSource.from_text("logs/llm.log", text))
    facts.set("wiki/entries", entries)
    report = diagnose([facts], "pod/llm", scopes=("logs",), only=["log-signatures"])
    named = {r for f in report.findings for r in f.runbooks}
    assert "gpu-not-visible" in named and "driver-cuda-mismatch" not in named, named


def test_a_driver_too_old_without_the_banner_is_still_named(entries):
    # the same runtime error where the driver was there but old: no banner, no overruling
    path = (
        FIXTURES
        / "explain_corpus"
        / "driver-cuda-mismatch"
        / "bladebit-cuda-error-35-insufficient-driver.log"
    )
    result = explain(TextSource.from_text(path.name, path.read_text(encoding="utf-8")), entries)
    assert result.matches[0].id == "driver-cuda-mismatch", result.matches
