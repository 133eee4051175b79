"""Models as they ship: hybrid linear-attention/Mamba layers and quantized weights, checked
against vLLM's own startup lines (tests/fixtures/capacity/SOURCES.md)."""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path

import pytest
from typer.testing import CliRunner

from llmdoctor.capacity.planner import (
    CapacityInputs,
    GiB,
    batch_defaults,
    find_gpu,
    model_shape,
    plan,
    safetensors_weights,
)
from llmdoctor.cli import app
from llmdoctor.errors import BadInput

FIXTURES = Path(__file__).parent / "fixtures" / "capacity"
runner = CliRunner()


def config(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


def logged(log: str, pattern: str) -> float:
    m = re.search(pattern, (FIXTURES / log).read_text(encoding="utf-8"))
    assert m, f"{pattern} not in {log}"
    return float(m.group(1).replace(",", ""))


QWEN3_NEXT = "qwen3-next-80b-a3b-instruct-config.json"
QWEN3_NEXT_LOG = "qwen3-next-80b-a3b-2xh200-tp2-v0.10.2-startup.log"
GPT_OSS = "gpt-oss-120b-config.json"
QWEN_27B = "qwen3.x-27b-hybrid-config.json"


def test_qwen3_next_kv_bytes_count_only_its_full_attention_layers():
    shape = model_shape(config(QWEN3_NEXT))
    assert (shape.layers, shape.attention_layers, shape.state_layers) == (48, 12, 36)
    result = plan(CapacityInputs(shape=shape, gpu_memory_bytes=80 * GiB, kv_cache_bytes=40 * GiB))
    # 2 (K,V) x 12 layers x 2 KV heads x 256 x 2 bytes, not x 48 layers
    assert result.kv_bytes_per_token == 2 * 12 * 2 * 256 * 2


def test_qwen3_next_blocks_tokens_and_concurrency_match_vllms_log_exactly():
    # vLLM 0.10.2, TP 2 on H200s, logged "Available KV cache memory: 44.59 GiB": it set the
    # block size to 544, padded the Mamba page by 1.49%, and printed 973,760 tokens / 14.77x.
    kv = logged(QWEN3_NEXT_LOG, r"Available KV cache memory: ([0-9.]+) GiB")
    result = plan(
        CapacityInputs(
            shape=model_shape(config(QWEN3_NEXT)),
            gpu_memory_bytes=find_gpu("H200").usable_bytes,
            gpu_name="H200",
            tensor_parallel_size=2,
            kv_cache_bytes=int(kv * GiB),
        )
    )
    assert result.block_size == logged(QWEN3_NEXT_LOG, r"attention block size to ([0-9]+) tokens")
    padding = logged(QWEN3_NEXT_LOG, r"Padding mamba page size by ([0-9.]+)%")
    assert any(f"padded by {padding:.2f}%" in step for step in result.steps)
    assert result.kv_tokens_v0_10 == logged(QWEN3_NEXT_LOG, r"GPU KV cache size: ([0-9,]+) tokens")
    assert round(result.concurrency, 2) == logged(QWEN3_NEXT_LOG, r"per request: ([0-9.]+)x")
    assert result.mamba_cache_blocks == result.num_blocks == 7162
    assert result.fits


def test_qwen3_next_weights_per_gpu_within_1_percent_of_vllms_model_loading_line():
    result = plan(
        CapacityInputs(
            shape=model_shape(config(QWEN3_NEXT)),
            gpu_memory_bytes=find_gpu("H200").usable_bytes,
            gpu_name="H200",
            tensor_parallel_size=2,
        )
    )
    seen = logged(QWEN3_NEXT_LOG, r"Model loading took ([0-9.]+) GiB")
    assert abs(result.weights_bytes_per_gpu / GiB - seen) / seen < 0.01


def test_moe_overhead_estimate_is_flagged_with_what_vllm_measured():
    # From the same log: 0.9 x H200 - 74.28 GiB weights - 44.59 GiB KV leaves ~6.8 GiB that
    # vLLM spent besides weights and KV; llmdoctor's estimate is far lower, and says so.
    result = plan(
        CapacityInputs(
            shape=model_shape(config(QWEN3_NEXT)),
            gpu_memory_bytes=find_gpu("H200").usable_bytes,
            gpu_name="H200",
            tensor_parallel_size=2,
        )
    )
    measured = (
        0.9 * find_gpu("H200").usable_bytes / GiB
        - logged(QWEN3_NEXT_LOG, r"Model loading took ([0-9.]+) GiB")
        - logged(QWEN3_NEXT_LOG, r"Available KV cache memory: ([0-9.]+) GiB")
    )
    assert round(measured, 1) == 6.8
    assert result.overhead_bytes / GiB < measured / 2
    assert any("MoE models" in note and "6.8 GiB" in note for note in result.notes)


def test_qwen3_27b_fp8_block_size_and_padding_match_vllms_lines():
    # fp32 SSM state (mamba_ssm_dtype) + bf16 conv state vs an fp8 attention page: 1568 tokens.
    log = "qwen3.8-27b-a6000-fp8-block-size-issue1047.log"
    result = plan(
        CapacityInputs(
            shape=model_shape(config(QWEN_27B)),
            gpu_memory_bytes=48 * GiB,
            kv_cache_dtype="fp8",
            max_model_len=32768,
            kv_cache_bytes=10 * GiB,
        )
    )
    assert result.block_size == logged(log, r"attention block size to ([0-9]+) tokens")
    padding = logged(log, r"Padding mamba page size by ([0-9.]+)%")
    assert any(f"padded by {padding:.2f}%" in step for step in result.steps)


def test_qwen3_27b_tp2_prefix_caching_tokens_match_the_newer_vllm_count():
    # Newer vLLM: tokens = concurrency x max_model_len; with prefix caching each state group
    # holds 2 blocks per request. The PR reports the pool as 2 x 4.99 GiB (TP 2).
    log = "qwen3.8-27b-tp2-fp8-prefix-caching-pr1995.log"
    result = plan(
        CapacityInputs(
            shape=model_shape(config(QWEN_27B)),
            gpu_memory_bytes=32 * GiB,
            tensor_parallel_size=2,
            kv_cache_dtype="fp8",
            max_model_len=131072,
            kv_cache_bytes=int(4.99 * GiB),
            prefix_caching=True,
        )
    )
    assert result.kv_tokens == logged(log, r"GPU KV cache size: ([0-9,]+) tokens")
    assert round(result.concurrency, 2) == logged(log, r"per request: ([0-9.]+)x")


def test_gpt_oss_120b_weights_within_1_percent_of_vllms_loaded_size():
    shape = model_shape(config(GPT_OSS))
    assert shape.quant_method == "mxfp4" and shape.quant_scope == "experts"
    result = plan(
        CapacityInputs(shape=shape, gpu_memory_bytes=find_gpu("H100").usable_bytes, gpu_name="H100")
    )
    seen = logged("gpt-oss-120b-h100-weights-issue33155.log", r"Model loading took ([0-9.]+) GiB")
    assert abs(result.weights_bytes_per_gpu / GiB - seen) / seen < 0.01


def test_gpt_oss_120b_fits_one_h100_at_32k():
    gpu = find_gpu("NVIDIA H100 80GB HBM3")
    result = plan(
        CapacityInputs(
            shape=model_shape(config(GPT_OSS)),
            gpu_memory_bytes=gpu.usable_bytes,
            gpu_name=gpu.name,
            max_model_len=32768,
        )
    )
    assert result.fits and result.weights_fit
    assert result.kv_bytes_per_token == 2 * 36 * 8 * 64 * 2
    assert result.vllm_error is None


def test_gpt_oss_120b_with_vllms_1_71_gib_refuses_128k_but_takes_32k():
    # vLLM logged 1.71 GiB of KV cache and refused the default 131,072-token context.
    kv = logged("gpt-oss-120b-h100-gmu0.95-kv-issue27508.log", r"memory: ([0-9.]+) GiB")
    base = dict(
        shape=model_shape(config(GPT_OSS)),
        gpu_memory_bytes=find_gpu("H100").usable_bytes,
        kv_cache_bytes=int(kv * GiB),
    )
    long = plan(CapacityInputs(**base))
    assert not long.fits
    assert "KV cache is needed" in long.vllm_error
    assert 32768 < long.estimated_max_model_len < 131072
    assert plan(CapacityInputs(**base, max_model_len=32768)).fits


def test_mamba_blocks_below_max_num_seqs_stop_the_start_with_vllms_message():
    shape = model_shape(config(QWEN3_NEXT))
    base = dict(shape=shape, gpu_memory_bytes=80 * GiB, gpu_name="H100-SXM", max_model_len=32768)
    result = plan(CapacityInputs(**base, kv_cache_bytes=4 * GiB))
    blocks = result.mamba_cache_blocks
    assert 0 < blocks < 1024 and result.max_num_seqs == 1024
    assert not result.fits
    assert result.vllm_error == (
        f"ValueError: max_num_seqs (1024) exceeds available Mamba cache blocks ({blocks}). Each "
        "decode sequence requires one Mamba cache block, so CUDA graph capture cannot proceed. "
        f"Please lower max_num_seqs to at most {blocks} or increase gpu_memory_utilization."
    )
    assert result.runbooks == ["mamba-cache-blocks-exceeded"]
    assert f"--max-num-seqs {blocks}" in result.suggestions[0]
    assert plan(CapacityInputs(**base, kv_cache_bytes=4 * GiB, max_num_seqs=blocks)).fits
    assert plan(CapacityInputs(**base, kv_cache_bytes=4 * GiB, enforce_eager=True)).fits


LLAMA_70B = {
    "model_type": "llama",
    "hidden_size": 8192,
    "intermediate_size": 28672,
    "num_hidden_layers": 80,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
    "torch_dtype": "bfloat16",
}


@pytest.mark.parametrize(
    ("quantization", "bits"),
    [
        ({"quant_method": "fp8", "activation_scheme": "dynamic"}, 8),
        (
            {
                "quant_method": "compressed-tensors",
                "format": "float-quantized",
                "config_groups": {
                    "group_0": {
                        "weights": {"num_bits": 8, "type": "float", "strategy": "channel"},
                        "targets": ["Linear"],
                    }
                },
                "ignore": ["lm_head"],
            },
            8,
        ),
        (
            {
                "quant_method": "compressed-tensors",
                "format": "pack-quantized",
                "config_groups": {
                    "group_0": {
                        "weights": {
                            "num_bits": 4,
                            "type": "int",
                            "strategy": "group",
                            "group_size": 128,
                        },
                        "targets": ["Linear"],
                    }
                },
            },
            4 + 16 / 128,
        ),
        (
            {
                "quant_method": "compressed-tensors",
                "format": "nvfp4-pack-quantized",
                "config_groups": {"group_0": {"weights": {"num_bits": 4, "type": "float"}}},
            },
            4.5,
        ),
        ({"quant_method": "modelopt", "quant_algo": "NVFP4"}, 4.5),
        ({"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True}, 4.125),
        ({"quant_method": "gptq", "bits": 8, "group_size": 64}, 8.25),
    ],
)
def test_quantized_checkpoints_are_sized_at_their_bits_not_as_bf16(quantization, bits):
    shape = model_shape({**LLAMA_70B, "quantization_config": quantization})
    assert shape.quant_bits == pytest.approx(bits)
    bf16 = plan(CapacityInputs(shape=model_shape(LLAMA_70B), gpu_memory_bytes=80 * GiB))
    quant = plan(CapacityInputs(shape=shape, gpu_memory_bytes=80 * GiB, dtype="bfloat16"))
    embeddings = 2 * 128256 * 8192 * 2
    expected = (bf16.weights_bytes_per_gpu - embeddings) * bits / 16 + embeddings
    assert quant.weights_bytes_per_gpu == pytest.approx(expected, rel=0.01)


def test_an_unknown_quantization_is_named_not_silently_bf16():
    shape = model_shape({**LLAMA_70B, "quantization_config": {"quant_method": "exotic"}})
    assert shape.quant_bits is None
    assert any("exotic" in note and "upper bound" in note for note in shape.notes)


def test_weights_larger_than_the_gpu_say_so_and_what_would_fit():
    result = plan(
        CapacityInputs(shape=model_shape(LLAMA_70B), gpu_memory_bytes=find_gpu("H100").usable_bytes)
    )
    assert not result.fits and not result.weights_fit
    assert "do not fit" in result.suggestions[0]
    assert any(s.startswith("-tp 4 ") for s in result.suggestions)  # 2 leaves no 128K request
    assert any("FP8" in s for s in result.suggestions)
    assert result.runbooks == ["vllm-startup-memory-insufficient"]
    # 131 GiB of bf16 weights on a 79 GiB GPU: loading itself runs out of memory
    assert result.vllm_error.startswith("torch.OutOfMemoryError: CUDA out of memory")


def test_cli_weights_too_large_headline_blames_the_weights_not_the_cache():
    path = FIXTURES / "qwen2-7b-instruct-config.json"
    out = runner.invoke(
        app, ["capacity", "--model-config", str(path), "--params", "70B", "--gpu", "L4",
              "--no-color"],
    )  # fmt: skip
    assert out.exit_code == 2
    assert "the weights alone do not fit" in out.output
    assert "What would fit:" in out.output


def test_a_safetensors_dtype_llmdoctor_does_not_know_is_refused_by_name(tmp_path):
    header = json.dumps({"w": {"dtype": "Q4_K", "shape": [4, 4], "data_offsets": [0, 0]}}).encode()
    (tmp_path / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header)
    with pytest.raises(BadInput, match="dtype 'Q4_K'"):
        safetensors_weights(tmp_path)


def test_max_model_len_above_max_position_embeddings_warns_like_vllm():
    shape = model_shape({**LLAMA_70B, "max_position_embeddings": 8192})
    result = plan(
        CapacityInputs(shape=shape, gpu_memory_bytes=80 * GiB, max_model_len=16384,
                       kv_cache_bytes=20 * GiB)
    )  # fmt: skip
    assert "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1" in result.warnings[0]


def test_kv_cache_memory_bytes_overrides_the_utilization():
    base = dict(shape=model_shape(LLAMA_70B), gpu_memory_bytes=4 * 80 * GiB,
                tensor_parallel_size=4, max_model_len=8192)  # fmt: skip
    a = plan(CapacityInputs(**base, gpu_memory_utilization=0.5, kv_cache_memory_bytes=10 * GiB))
    b = plan(CapacityInputs(**base, gpu_memory_utilization=0.9, kv_cache_memory_bytes=10 * GiB))
    assert a.kv_cache_bytes == b.kv_cache_bytes == 10 * GiB
    assert a.budget_bytes is None
    assert any("--kv-cache-memory-bytes" in step for step in a.steps)


@pytest.mark.parametrize("dtype", ["fp8_e4m3", "fp8_e5m2", "fp8_ds_mla", "nvfp4"])
def test_cli_accepts_vllms_newer_kv_cache_dtypes(dtype):
    path = FIXTURES / "qwen2-7b-instruct-config.json"
    out = runner.invoke(
        app, ["capacity", "--model-config", str(path), "--gpu", "H100", "--kv-cache-dtype", dtype,
              "--max-model-len", "8192", "--json"],
    )  # fmt: skip
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["kv_cache_dtype"] == dtype


def test_cli_refuses_an_unknown_kv_cache_dtype_in_one_line(capsys):
    from llmdoctor.cli import run

    path = FIXTURES / "qwen2-7b-instruct-config.json"
    with pytest.raises(SystemExit) as exc:
        run(["capacity", "--model-config", str(path), "--gpu", "H100", "--kv-cache-dtype", "int3"])
    assert exc.value.code == 3
    err = capsys.readouterr().err
    assert "fp8_e5m2" in err and "Traceback" not in err


def test_cli_json_help_names_what_it_prints():
    out = runner.invoke(app, ["capacity", "--help"])
    assert "llmdoctor/2" not in out.output
    assert "capacity plan" in out.output


@pytest.mark.parametrize(
    ("label", "name"),
    [
        ("NVIDIA-GB200", "GB200"),
        ("NVIDIA-B300-SXM6-AC", "B300"),
        ("NVIDIA GB300", "GB300"),
        ("NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition", "RTX-PRO-6000-Blackwell"),
        ("NVIDIA H100 NVL", "H100-NVL"),
        ("NVIDIA GH200 480GB", "GH200"),
        ("NVIDIA GeForce RTX 5090", "RTX-5090"),
        ("NVIDIA L40", "L40"),
        ("NVIDIA L20", "L20"),
    ],
)
def test_gpu_table_has_the_gpus_that_were_missing(label, name):
    assert find_gpu(label).name == name


@pytest.mark.parametrize(
    ("gpu", "batched", "seqs"),
    [
        ("A100-80GB", 2048, 256),  # vLLM excludes "a100" by name (PR #17885)
        ("A800", 8192, 1024),  # ... but not the A800
        ("H100-SXM", 8192, 1024),
        ("B200", 16384, 1024),  # >= 160 GiB
        ("L40S", 2048, 256),
    ],
)
def test_vllm_batch_defaults_per_gpu_come_from_the_data_file(gpu, batched, seqs):
    found = find_gpu(gpu)
    assert batch_defaults(found.usable_bytes, found.name)[:2] == (batched, seqs)


def test_throughput_performance_mode_doubles_the_defaults():
    h100 = find_gpu("H100")
    assert batch_defaults(h100.usable_bytes, h100.name, throughput_mode=True)[:2] == (16384, 2048)


ODD_VALUES = [None, True, 0, -1, 1.5, "4", [], {}, [1, 2], {"a": 1}, 10**9]
ODD_KEYS = ["layer_types", "full_attention_interval", "hybrid_override_pattern",
            "attn_layer_period", "linear_num_value_heads", "linear_conv_kernel_dim",
            "mamba_ssm_dtype", "ssm_state_size", "sliding_window", "num_experts",
            "quantization_config", "text_config"]  # fmt: skip
ODD_QUANT = [
    {"quant_method": "modelopt", "quantization": "x"},
    {"quant_method": "compressed-tensors", "config_groups": [1]},
    {"quant_method": "compressed-tensors", "config_groups": {"g": {"weights": {"num_bits": "8"}}}},
    {"quant_method": "awq", "bits": "4"},
    {"quant_method": "awq", "bits": 4, "group_size": "x"},
    {"quant_method": 5},
]


@pytest.mark.parametrize("base", [QWEN3_NEXT, GPT_OSS])
def test_odd_config_values_are_bad_input_or_planned_never_a_crash(base):
    for key in ODD_KEYS:
        for value in ODD_VALUES + (ODD_QUANT if key == "quantization_config" else []):
            cfg = {**config(base), key: value}
            try:
                shape = model_shape(cfg)
                plan(CapacityInputs(shape=shape, gpu_memory_bytes=80 * GiB, max_model_len=4096,
                                    mean_seq_len=1000)).to_json()  # fmt: skip
            except BadInput:
                pass


def test_a_model_of_state_layers_whose_state_is_unknown_is_refused():
    cfg = {"num_hidden_layers": 4, "num_attention_heads": 4, "hidden_size": 64,
           "layer_types": ["mamba"] * 4}  # fmt: skip
    with pytest.raises(BadInput, match="no attention layers"):
        plan(CapacityInputs(shape=model_shape(cfg), gpu_memory_bytes=GiB, max_model_len=16))


# nvidia/Nemotron-H-8B-Base-8K config.json fields as copied in the `nemotronh_8b_config_dict`
# fixture of a Megatron-Bridge NemotronH bridge test (found by code search; path not given), trimmed.
NEMOTRON_H_8B = {
    "architectures": ["NemotronHForCausalLM"],
    "attention_head_dim": 128,
    "conv_kernel": 4,
    "expand": 2,
    "hidden_size": 4096,
    "hybrid_override_pattern": "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-",
    "intermediate_size": 21504,
    "mamba_head_dim": 64,
    "mamba_num_heads": 128,
    "max_position_embeddings": 8192,
    "model_type": "nemotron_h",
    "n_groups": 8,
    "num_attention_heads": 32,
    "num_hidden_layers": 52,
    "num_key_value_heads": 8,
    "ssm_state_size": 128,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "vocab_size": 131072,
}


def test_nemotron_h_pattern_counts_4_attention_24_mamba_and_24_mlp_only_layers():
    shape = model_shape(NEMOTRON_H_8B)
    assert (shape.attention_layers, shape.state_layers, shape.cacheless_layers) == (4, 24, 24)
    assert shape.state.kind == "mamba2"
    # conv state 3 x (8192 + 2 x 8 x 128) and SSM state 128 heads x 64 x 128, bf16
    assert shape.state.bytes_per_gpu(1, 2) == (3 * 10240 + 128 * 64 * 128) * 2
    result = plan(CapacityInputs(shape=shape, gpu_memory_bytes=80 * GiB, max_model_len=8192,
                                 kv_cache_bytes=20 * GiB))  # fmt: skip
    assert result.kv_bytes_per_token == 2 * 4 * 8 * 128 * 2
    assert result.mamba_cache_blocks == result.num_blocks > 0
