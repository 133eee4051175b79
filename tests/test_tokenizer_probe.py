"""The tokenizer probe and check, on small tokenizers built here with the `tokenizers` library."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from vllm_server import FakeVllmServer, Reply, Scenario, by_check, probe_report

from llmdoctor.collectors.tokenizer_probe import probe_tokenizer, sample_text
from llmdoctor.engine.facts import Facts
from llmdoctor.engine.findings import Severity
from llmdoctor.engine.registry import all_checks

CHAT_TEMPLATE = "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}</s>{% endfor %}"


def build_tokenizer(
    folder: Path,
    *,
    vocab: int = 400,
    config_vocab: int | None = 512,
    eos: str | None = "</s>",
    chat_template: str | None = CHAT_TEMPLATE,
    fast: bool = True,
) -> Path:
    """A byte-level BPE tokenizer trained on the probe's sample text, saved like a HF model."""
    folder.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab, special_tokens=["<unk>", "<s>", "</s>"], show_progress=False
    )
    tok.train_from_iterator([sample_text()], trainer)
    if fast:
        tok.save(str(folder / "tokenizer.json"))
    else:  # only the files a slow tokenizer uses
        (folder / "vocab.json").write_text(json.dumps(tok.get_vocab()))
        (folder / "merges.txt").write_text("#version: 0.2\n")
    config: dict = {"bos_token": "<s>", "model_max_length": 4096}
    if eos is not None:
        config["eos_token"] = {"content": eos, "lstrip": False}
    if chat_template is not None:
        config["chat_template"] = chat_template
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    if config_vocab is not None:
        (folder / "config.json").write_text(json.dumps({"vocab_size": config_vocab}))
    return folder


def run_check(result: dict) -> list:
    facts = Facts()
    facts.set("tokenizer.json", result)
    spec = next(c for c in all_checks() if c.id == "tokenizer")
    return spec.fn(facts)


def test_probe_measures_a_healthy_fast_tokenizer(tmp_path):
    # tokenizer.json, eos in vocab, chat template, vocab below the embedding size: all ok
    result = probe_tokenizer(build_tokenizer(tmp_path / "model"))
    assert result["fast"] is True and result["loader"] == "tokenizers"
    assert result["load_s"] is not None and result["load_s"] < 2.0
    assert result["encode_tokens"] > 1000 and result["encode_ms"] is not None
    assert result["vocab_size"] <= 400 and result["config_vocab_size"] == 512
    assert result["eos_token"] == "</s>" and result["eos_in_vocab"] is True
    assert result["chat_template"] == "tokenizer_config.json"
    findings = run_check(result)
    assert [f.severity for f in findings] == [Severity.OK]


def test_sample_text_is_about_two_thousand_tokens_for_a_real_sized_vocab():
    # ~2,000 tokens is what the issue asks for; a 400-token BPE splits more, so count words
    words = len(sample_text().split())
    assert 1500 <= words <= 2500


def test_missing_chat_template_is_chat_template_missing(tmp_path):
    # a base model's tokenizer: /v1/chat/completions would answer 400
    result = probe_tokenizer(build_tokenizer(tmp_path / "base", chat_template=None))
    assert result["chat_template"] is None
    (finding,) = run_check(result)
    assert finding.severity is Severity.WARNING and finding.runbooks == ["chat-template-missing"]


def test_chat_template_jinja_file_counts(tmp_path):
    # newer checkpoints ship chat_template.jinja instead of a tokenizer_config entry
    folder = build_tokenizer(tmp_path / "m", chat_template=None)
    (folder / "chat_template.jinja").write_text(CHAT_TEMPLATE)
    assert probe_tokenizer(folder)["chat_template"] == "chat_template.jinja"


def test_vocab_larger_than_the_embedding_is_critical(tmp_path):
    # a few hundred tokens but config.json says 50: ids past the embedding
    result = probe_tokenizer(build_tokenizer(tmp_path / "m", config_vocab=50))
    (finding,) = run_check(result)
    assert finding.severity is Severity.CRITICAL and finding.runbooks == ["tokenizer-problem"]
    assert "has 50 (config.json" in finding.summary


def test_eos_token_not_in_vocab_is_critical(tmp_path):
    # tokenizer_config names an EOS the vocabulary does not contain
    result = probe_tokenizer(build_tokenizer(tmp_path / "m", eos="<|im_end|>"))
    assert result["eos_in_vocab"] is False
    assert any(f.severity is Severity.CRITICAL and "eos" in f.summary for f in run_check(result))


def test_no_eos_anywhere_is_a_warning(tmp_path):
    # no eos_token and no eos_token_id: generation only stops at max_tokens
    result = probe_tokenizer(build_tokenizer(tmp_path / "m", eos=None))
    assert any("no EOS token" in f.summary for f in run_check(result))


def test_slow_only_tokenizer_is_flagged(tmp_path):
    # vocab.json + merges.txt but no tokenizer.json: vLLM would use a slow tokenizer
    result = probe_tokenizer(build_tokenizer(tmp_path / "m", fast=False))
    assert result["fast"] is False
    (finding,) = run_check(result)
    assert finding.severity is Severity.WARNING and "slow" in finding.summary


def test_corrupt_tokenizer_json_is_critical_not_a_traceback(tmp_path):
    # a truncated download
    folder = build_tokenizer(tmp_path / "m")
    (folder / "tokenizer.json").write_text('{"version": "1.0", "model": {')
    result = probe_tokenizer(folder)
    assert result["loader"] is None and "does not load" in result["errors"][0]
    (finding,) = run_check(result)
    assert finding.severity is Severity.CRITICAL


@pytest.mark.parametrize(
    "field,value,words", [("load_s", 3.5, "cold load"), ("encode_ms", 450.0, "encoding")]
)
def test_slow_load_or_encode_is_a_warning(tmp_path, field, value, words):
    # over 2 s to load, or over 100 ms to encode ~2,000 tokens
    result = probe_tokenizer(build_tokenizer(tmp_path / "m"))
    result[field] = value
    findings = run_check(result)
    assert any(f.severity is Severity.WARNING and words in f.summary for f in findings)


def test_probe_with_tokenizer_times_the_server_tokenize_too(tmp_path):
    # --tokenizer: the local probe plus POST /tokenize; counts that disagree mean another tokenizer
    folder = build_tokenizer(tmp_path / "m")

    def tokenize(body: dict) -> Reply:
        return Reply(200, json.dumps({"count": 7, "max_model_len": 32768, "tokens": [1] * 7}))

    scenario = Scenario(routes={"POST /tokenize": tokenize})
    with FakeVllmServer(scenario) as srv:
        report = probe_report(srv.url, tokenizer=str(folder))
        sent = [b for m, p, b in srv.requests if p == "/tokenize"]
    assert sent and sent[0]["prompt"] == sample_text()
    findings = by_check(report, "tokenizer")
    assert any("the server counts 7 tokens" in f.summary for f in findings)
    tok = report.facts.get("tokenizer.json")
    assert tok["server"]["status"] == 200 and tok["server"]["latency_ms"] is not None


def test_probe_with_matching_server_tokenizer_is_ok(tmp_path):
    # the server counts the same tokens as the local folder: nothing to report
    folder = build_tokenizer(tmp_path / "m")
    count = len(Tokenizer.from_file(str(folder / "tokenizer.json")).encode(sample_text()).ids)
    reply = Reply(200, json.dumps({"count": count, "max_model_len": 32768, "tokens": []}))
    with FakeVllmServer(Scenario(routes={"POST /tokenize": reply})) as srv:
        report = probe_report(srv.url, tokenizer=str(folder))
    (finding,) = by_check(report, "tokenizer")
    assert finding.severity is Severity.OK
