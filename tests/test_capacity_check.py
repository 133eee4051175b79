"""The kv-cache-fit check in `diagnose`: the capacity arithmetic on a real pod, node and config."""

from __future__ import annotations

import json
from pathlib import Path

from llmdoctor.collectors.bundle import Bundle
from llmdoctor.usecases.diagnose import diagnose

ROOT = Path(__file__).resolve().parent.parent
BUNDLE = ROOT / "examples" / "bundles" / "healthy-vllm-7b"
QWEN_CONFIG = ROOT / "tests" / "fixtures" / "capacity" / "qwen2-7b-instruct-config.json"
A100_NODE = ROOT / "tests" / "fixtures" / "k8s" / "node-gpu-a100-node-3.json"


def run_check(settings: dict, node: bool = True):
    """diagnose --only kv-cache-fit on the healthy Qwen2-7B bundle (vllm serve ... --max-model-len
    16384 --gpu-memory-utilization 0.25), with the A100 node's real labels when `node`."""
    facts = Bundle(BUNDLE).to_facts()
    if node:
        facts.set("k8s/node.json", json.loads(A100_NODE.read_text()))
    report = diagnose([facts], "bundle", only=["kv-cache-fit"], settings=settings)
    return report


def own_skip(report) -> dict:
    [skip] = [s for s in report.skipped if s["check"] == "kv-cache-fit"]
    return skip


def test_qwen2_7b_at_16k_fits_on_an_a100_at_quarter_utilization():
    # The bundle's own arguments on the node's NVIDIA-A100-SXM4-80GB: it fits (vLLM started).
    report = run_check({"model_config_path": str(QWEN_CONFIG)})
    [finding] = report.findings
    assert str(finding.severity) == "ok", finding.summary
    assert "16,384-token request needs 0.88 GiB" in finding.summary
    texts = [e["text"] for e in finding.evidence]
    assert any("NVIDIA-A100-SXM4-80GB" in t for t in texts)
    assert any(
        t.startswith("KV cache per token: 2 (K,V) x 28 attention layers x 4 KV heads")
        for t in texts
    )


def test_too_low_utilization_is_critical_with_vllms_error_and_the_fix():
    # --gpu-memory-utilization 0.19 leaves less than one 16k request: vLLM would not start.
    report = run_check({"model_config_path": str(QWEN_CONFIG), "gpu_memory_utilization": 0.19})
    [finding] = report.findings
    assert str(finding.severity) == "critical"
    assert finding.runbooks == ["kv-cache-too-small-for-max-model-len"]
    assert "max-model-len 16,384 does not fit" in finding.summary
    assert any("models's max seq len (16384)" in e["text"] for e in finding.evidence)
    # the length that fits, as the summary says it, fills the runbook's --max-model-len
    fits = finding.params["max_model_len"]
    assert f"--max-model-len {fits} would fit" in finding.summary and 0 < fits < 16384


def test_without_a_model_config_the_check_is_skipped_with_the_reason():
    report = run_check({})
    assert report.findings == []
    skip = own_skip(report)
    assert "--model-config" in skip["reason"]


def test_without_gpu_facts_the_check_is_skipped_not_guessed():
    # No node/gpus and no GPU labels: never call it healthy.
    report = run_check({"model_config_path": str(QWEN_CONFIG)}, node=False)
    skip = own_skip(report)
    assert "GPU's memory is unknown" in skip["reason"]


def test_an_unreadable_model_config_is_a_skip_reason(tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    report = run_check({"model_config_path": str(bad)})
    skip = own_skip(report)
    assert "not valid JSON" in skip["reason"]


def test_the_model_config_is_a_fact_a_written_bundle_replays(tmp_path):
    # diagnose --model-config reads the file once into model/config.json; a bundle written from
    # those facts carries it, and diagnosing that bundle needs no --model-config any more.
    from llmdoctor.collectors.bundle import write_bundle
    from llmdoctor.engine.derive import derive_all
    from llmdoctor.usecases.diagnose import add_settings

    facts = Bundle(BUNDLE).to_facts()
    facts.set("k8s/node.json", json.loads(A100_NODE.read_text()))
    add_settings(facts, {"model_config_path": str(QWEN_CONFIG)})
    derive_all(facts)
    assert facts.get("model/config.json") == json.loads(QWEN_CONFIG.read_text())
    written = write_bundle(facts, tmp_path / "replay", target="pod/vllm-7b")
    assert (written / "model" / "config.json").is_file()
    replay = Bundle(written).to_facts()
    report = diagnose([replay], "bundle", only=["kv-cache-fit"], settings={})
    [finding] = report.findings
    assert str(finding.severity) == "ok", finding.summary
    assert finding.evidence[0]["source"] == "model/config.json"


def test_a_hybrid_model_with_too_many_sequences_points_at_the_mamba_runbook(tmp_path):
    # Qwen3-Next, TP 4, a 2 GiB --kv-cache-memory-bytes: one 131,072-token request fits, but
    # --max-num-seqs 1024 is more than the Mamba cache blocks that memory holds.
    config = ROOT / "tests" / "fixtures" / "capacity" / "qwen3-next-80b-a3b-instruct-config.json"
    report = run_check(
        {
            "model_config_path": str(config),
            "tensor_parallel_size": 4,
            "max_model_len": 131072,
            "kv_cache_memory_bytes": 2 * 2**30,
            "max_num_seqs": 1024,
        }
    )
    [finding] = report.findings
    assert str(finding.severity) == "critical", finding.summary
    assert finding.runbooks == ["mamba-cache-blocks-exceeded"]
    assert "Mamba cache blocks" in finding.summary


def test_a_model_llmdoctor_does_not_model_is_info_naming_it_never_ok_or_critical():
    # DeepSeek-V4's compressed cache on the Qwen2 pod's A100: no verdict either way
    v4 = ROOT / "tests" / "fixtures" / "capacity" / "models" / "deepseek-v4-pro" / "config.json"
    report = run_check({"model_config_path": str(v4)})
    [finding] = report.findings
    assert str(finding.severity) == "info", finding.summary
    assert finding.summary.startswith("not modelled: deepseek_v4's compressed attention cache")
    assert "is not said" in finding.summary and finding.runbooks == []
