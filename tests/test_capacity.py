"""`llmdoctor capacity`: the KV cache arithmetic against the seed example and real vLLM logs."""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path

import pytest
from cli_runs import one_line_error, run_cli
from typer.testing import CliRunner

from llmdoctor.capacity.planner import (
    CapacityInputs,
    GiB,
    MiB,
    estimate_parameters,
    find_gpu,
    model_shape,
    parse_count,
    parse_size,
    plan,
    safetensors_weights,
)
from llmdoctor.cli import app, run
from llmdoctor.errors import BadInput

FIXTURES = Path(__file__).parent / "fixtures" / "capacity"
QWEN_CONFIG = FIXTURES / "qwen2-7b-instruct-config.json"
LLAMA_8B = {
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
    "torch_dtype": "bfloat16",
}
LLAMA_70B = {**LLAMA_8B, "hidden_size": 8192, "intermediate_size": 28672, "num_hidden_layers": 80,
             "num_attention_heads": 64}  # fmt: skip
SEED_7B = {  # the seed documents' worked example: 7B, 32 layers, 32 KV heads, head_dim 128, FP16
    "hidden_size": 4096,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 32,
    "intermediate_size": 11008,
    "vocab_size": 32000,
    "max_position_embeddings": 4096,
    "torch_dtype": "float16",
}
runner = CliRunner()


def vllm_numbers(log: str) -> dict[str, float]:
    """The KV cache figures vLLM printed in a startup log (numbers may carry thousands commas)."""
    text = (FIXTURES / log).read_text(encoding="utf-8")
    patterns = {
        "kv_gib": r"Available KV cache memory: ([0-9.]+) GiB",
        "tokens": r"GPU KV cache size: ([0-9,]+) tokens",
        "max_len": r"Maximum concurrency for ([0-9,]+) tokens per request",
        "concurrency": r"tokens per request: ([0-9.]+)x",
        "weights_gib": r"Model loading took ([0-9.]+) GiB",
        "blocks": r"GPU blocks: ([0-9]+)",
        "kv_cache_size_gib": r"kv_cache_size=([0-9.]+)GiB",
    }
    out = {}
    for key, pattern in patterns.items():
        m = re.search(pattern, text)
        if m:
            out[key] = float(m.group(1).replace(",", ""))
    return out


def qwen_shape():
    return model_shape(json.loads(QWEN_CONFIG.read_text()))


def within(value: float, expected: float, tolerance: float = 0.03) -> bool:
    return abs(value - expected) <= tolerance * abs(expected)


def test_seed_example_half_a_mib_per_token_and_29_sequences_in_58_gib():
    # The seed document: 0.5 MiB/token, 2 GiB per 4096-token sequence, ~29 of them in 58 GiB.
    result = plan(
        CapacityInputs(
            shape=model_shape(SEED_7B),
            gpu_memory_bytes=80 * GiB,
            max_model_len=4096,
            kv_cache_bytes=58 * GiB,
        )
    )
    assert result.kv_bytes_per_token == MiB // 2
    assert result.seq_bytes == 2 * GiB
    assert int(result.concurrency) == 29
    assert result.kv_tokens == 29 * 4096


def test_qwen2_7b_tokens_from_vllms_own_kv_memory_match_its_log():
    # Given the KV memory vLLM logged (5.01 GiB), blocks and concurrency follow exactly.
    seen = vllm_numbers("qwen2-7b-a100-80gb-tp1-gmu0.25-startup.log")
    result = plan(
        CapacityInputs(
            shape=qwen_shape(),
            gpu_memory_bytes=80 * GiB,
            max_model_len=int(seen["max_len"]),
            kv_cache_bytes=int(seen["kv_gib"] * GiB),
        )
    )
    assert result.kv_bytes_per_token == 2 * 28 * 4 * 128 * 2  # 56 KiB, GQA-aware
    assert within(result.kv_tokens, seen["tokens"], 0.005)
    assert within(result.concurrency, seen["concurrency"], 0.005)


@pytest.mark.parametrize(
    ("log", "tp", "utilization"),
    [
        ("qwen2-7b-a100-80gb-tp1-gmu0.25-startup.log", 1, 0.25),
        ("qwen2-7b-2xa100-80gb-tp2-gmu0.5-startup.log", 2, 0.5),
    ],
)
def test_qwen2_7b_on_a100_predicted_end_to_end_within_3_percent(log, tp, utilization):
    # From the GPU table, the config and the flags alone: KV memory, tokens and concurrency
    # within 3% of what vLLM 0.10.1.1 printed on the real A100 80GB.
    seen = vllm_numbers(log)
    gpu = find_gpu("NVIDIA-A100-SXM4-80GB")
    result = plan(
        CapacityInputs(
            shape=qwen_shape(),
            gpu_memory_bytes=gpu.usable_bytes,
            gpu_name=gpu.name,
            gpu_memory_utilization=utilization,
            max_model_len=int(seen["max_len"]),
            tensor_parallel_size=tp,
        )
    )
    assert within(result.weights_bytes_per_gpu / GiB, seen["weights_gib"])
    assert within(result.kv_cache_bytes / GiB, seen["kv_gib"])
    assert within(result.kv_tokens, seen["tokens"])
    assert within(result.concurrency, seen["concurrency"])
    assert result.fits


def test_llama_8b_v0_blocks_and_concurrency_from_logged_kv_size():
    # V0 log: kv_cache_size=3.81GiB -> 1952 blocks of 16 -> 1.56x for 20000 tokens.
    seen = vllm_numbers("llama-3.1-8b-rtx3090-v0-maxlen20000-ok-issue10517.log")
    result = plan(
        CapacityInputs(
            shape=model_shape(LLAMA_8B),
            gpu_memory_bytes=int(23.58 * GiB),
            max_model_len=int(seen["max_len"]),
            kv_cache_bytes=int(seen["kv_cache_size_gib"] * GiB),
        )
    )
    assert result.kv_bytes_per_token == 128 * 1024
    assert within(result.num_blocks, seen["blocks"], 0.005)
    assert within(result.concurrency, seen["concurrency"], 0.01)


def test_llama_8b_v0_budget_predicted_within_3_percent_without_chunked_prefill():
    # V0 without chunked prefill profiles max_model_len (20000) tokens at once; the overhead
    # model with that batch lands within 3% of the logged 3.81 GiB.
    seen = vllm_numbers("llama-3.1-8b-rtx3090-v0-maxlen20000-ok-issue10517.log")
    result = plan(
        CapacityInputs(
            shape=model_shape(LLAMA_8B),
            gpu_memory_bytes=int(23.58 * GiB),
            max_model_len=20000,
            max_num_batched_tokens=20000,
            weights_bytes=int(14.9888 * GiB),
        )
    )
    assert within(result.kv_cache_bytes / GiB, seen["kv_cache_size_gib"])


def test_llama_70b_concurrency_from_block_count():
    # Early V1 log: 1381 blocks x 16 tokens / 2048 = 10.79x.
    seen = vllm_numbers("llama-3.1-70b-w8a8-v1-gpu-blocks-pr12569.log")
    shape = model_shape(LLAMA_70B)
    per_token = 2 * 80 * 8 * 128 * 2
    result = plan(
        CapacityInputs(
            shape=shape,
            gpu_memory_bytes=80 * GiB,
            max_model_len=int(seen["max_len"]),
            kv_cache_bytes=int(seen["blocks"]) * 16 * per_token,
        )
    )
    assert result.num_blocks == seen["blocks"]
    assert round(result.concurrency, 2) == seen["concurrency"]


def test_too_long_max_model_len_renders_vllms_error_with_its_estimate():
    # 128K context of Qwen2-7B on one L4: one request needs 7 GiB; vLLM refuses to start.
    result = plan(
        CapacityInputs(
            shape=qwen_shape(),
            gpu_memory_bytes=find_gpu("L4").usable_bytes,
            gpu_name="L4",
            max_model_len=131072,
        )
    )
    assert not result.fits
    assert result.vllm_error.startswith(
        "ValueError: To serve at least one request with the models's max seq len (131072), ("
    )
    assert "GiB KV cache is needed, which is larger than the available KV cache memory" in (
        result.vllm_error
    )
    estimate = result.estimated_max_model_len
    assert 0 < estimate < 131072
    assert f"the estimated maximum model length is {estimate}." in result.vllm_error
    assert result.seq_bytes > result.kv_cache_bytes
    # the estimate is the longest length that does fit
    assert result.inputs.shape.layers * 4 * 128 * 2 * 2 * -(-estimate // 16) * 16 <= (
        result.kv_cache_bytes
    )


def test_weights_larger_than_the_budget_leave_no_memory_for_the_cache():
    # Llama-3.1-8B in bf16 (~15 GiB) on a 16 GiB GPU at 0.9: the weights load, but nothing is
    # left for the cache: vLLM's "No available memory for the cache blocks".
    result = plan(
        CapacityInputs(shape=model_shape(LLAMA_8B), gpu_memory_bytes=16 * GiB, max_model_len=8192)
    )
    assert not result.fits and not result.weights_fit
    assert result.kv_cache_bytes < 0
    assert "No available memory for the cache blocks" in result.vllm_error


def test_fp8_kv_cache_halves_bytes_per_token():
    # --kv-cache-dtype fp8: one byte per element instead of two.
    base = dict(shape=qwen_shape(), gpu_memory_bytes=80 * GiB, max_model_len=8192)
    auto = plan(CapacityInputs(**base))
    fp8 = plan(CapacityInputs(**base, kv_cache_dtype="fp8"))
    assert fp8.kv_bytes_per_token * 2 == auto.kv_bytes_per_token
    assert fp8.kv_tokens > 1.9 * auto.kv_tokens


def test_kv_heads_fewer_than_tp_are_replicated_not_split_below_one():
    # 8 KV heads on TP 16: each GPU still holds one head (vLLM replicates KV heads). (Qwen2-7B
    # on TP 8 was used here before, but vLLM refuses it: 28 attention heads % 8 != 0.)
    result = plan(
        CapacityInputs(
            shape=model_shape(LLAMA_8B), gpu_memory_bytes=80 * GiB, tensor_parallel_size=16
        )
    )
    assert result.kv_bytes_per_token == 2 * 32 * 1 * 128 * 2


def test_mla_caches_the_latent_once_per_layer_on_every_gpu():
    # DeepSeek-V3 layout: (kv_lora_rank 512 + qk_rope_head_dim 64) per token and layer, not x2,
    # and not divided by TP.
    config = {
        "model_type": "deepseek_v3",
        "hidden_size": 7168,
        "num_hidden_layers": 61,
        "num_attention_heads": 128,
        "num_key_value_heads": 128,
        "kv_lora_rank": 512,
        "qk_rope_head_dim": 64,
        "qk_nope_head_dim": 128,
        "v_head_dim": 128,
        "vocab_size": 129280,
        "max_position_embeddings": 163840,
        "torch_dtype": "bfloat16",
    }
    result = plan(
        CapacityInputs(
            shape=model_shape(config),
            gpu_memory_bytes=141 * GiB,
            tensor_parallel_size=8,
            max_model_len=32768,
            kv_cache_bytes=20 * GiB,
        )
    )
    assert result.kv_bytes_per_token == 61 * 576 * 2


def test_sliding_window_layers_only_hold_the_window():
    # Gemma-3-style 5:1 pattern: sliding layers keep ~window + one prefill chunk, so a long
    # request needs far less than 2 x layers x heads x dim x len.
    config = {
        "model_type": "gemma3_text",
        "hidden_size": 2560,
        "num_hidden_layers": 34,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 256,
        "sliding_window": 1024,
        "sliding_window_pattern": 6,
        "max_position_embeddings": 131072,
        "torch_dtype": "bfloat16",
    }
    shape = model_shape(config)
    assert shape.sliding_layers == 34 - 5  # layers 6, 12, ..., 30 are global
    result = plan(
        CapacityInputs(
            shape=shape, gpu_memory_bytes=24 * GiB, max_model_len=131072, kv_cache_bytes=10 * GiB
        )
    )
    naive = result.kv_bytes_per_token * 131072
    assert result.seq_bytes < naive / 4
    assert result.kv_tokens == int(result.concurrency * 131072)


def test_mean_sequence_length_gives_a_max_num_seqs_suggestion():
    # 93,872 tokens at a mean of 2,000 tokens (125 blocks each) -> 46 sequences.
    seen = vllm_numbers("qwen2-7b-a100-80gb-tp1-gmu0.25-startup.log")
    result = plan(
        CapacityInputs(
            shape=qwen_shape(),
            gpu_memory_bytes=80 * GiB,
            max_model_len=16384,
            kv_cache_bytes=int(seen["kv_gib"] * GiB),
            mean_seq_len=2000,
        )
    )
    assert result.suggested_max_num_seqs == result.kv_cache_bytes // (2000 * 57344)


def test_parameter_estimate_of_qwen2_7b_matches_its_published_size():
    # Qwen2-7B has 7.62B parameters; the config-based estimate is within 0.5%.
    assert within(estimate_parameters(qwen_shape()), 7.62e9, 0.005)


def test_safetensors_headers_are_summed_by_dtype_without_reading_tensors(tmp_path):
    # Two shards with BF16 and F32 tensors: sizes come from data_offsets only.
    def shard(name, tensors):
        header, offset = {"__metadata__": {"format": "pt"}}, 0
        for tname, dtype, size in tensors:
            header[tname] = {  # the shape agrees with the span, as safetensors writes it
                "dtype": dtype,
                "shape": [size // {"BF16": 2, "F32": 4}[dtype]],
                "data_offsets": [offset, offset + size],
            }
            offset += size
        raw = json.dumps(header).encode()
        (tmp_path / name).write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * offset)

    shard("model-00001-of-00002.safetensors", [("a", "BF16", 1000), ("b", "F32", 400)])
    shard("model-00002-of-00002.safetensors", [("c", "BF16", 600)])
    weights = safetensors_weights(tmp_path)
    assert weights.total_bytes == 2000
    assert weights.by_dtype == {"BF16": 1600, "F32": 400}
    assert (weights.files, weights.tensors) == (2, 3)


def test_a_corrupt_safetensors_header_is_bad_input(tmp_path):
    # A header length larger than the file must not be trusted (nor read).
    (tmp_path / "model.safetensors").write_bytes(struct.pack("<Q", 10**12) + b"{}")
    with pytest.raises(BadInput, match="not plausible"):
        safetensors_weights(tmp_path)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("80GiB", 80 * GiB), ("81920MiB", 80 * GiB), ("24GB", 24 * 10**9), ("80", 80 * GiB)],
)
def test_sizes_understand_binary_and_decimal_units(text, expected):
    # GiB/MiB are binary, GB is decimal, a bare number is GiB.
    assert parse_size(text) == expected


def test_parameter_counts_understand_suffixes():
    assert parse_count("7.6B") == 7_600_000_000
    assert parse_count("70b") == 70_000_000_000


def test_gpu_table_knows_every_gpu_the_issue_names_with_capability():
    # Every GPU named in issue 7 resolves, with a compute capability.
    for name in ("A100-40GB", "A100-80GB", "A800", "H100", "H100-PCIe", "H800", "H200", "H20",
                 "L40S", "L4", "A10", "T4", "B200", "RTX 4090"):  # fmt: skip
        gpu = find_gpu(name)
        assert gpu is not None, name
        assert re.fullmatch(r"[0-9]+\.[0-9]", gpu.compute_capability)
        assert gpu.usable_bytes < gpu.memory_bytes
    assert find_gpu("NVIDIA-A100-SXM4-80GB").name == "A100-80GB"
    assert find_gpu("NVIDIA H100 80GB HBM3").name == "H100-SXM"
    assert find_gpu("A10").name == "A10" and find_gpu("nonsense-gpu") is None


# --- the command -------------------------------------------------------------------------------


def test_cli_shows_the_arithmetic_and_exits_0_when_it_fits():
    result = runner.invoke(
        app,
        ["capacity", "--model-config", str(QWEN_CONFIG), "--gpu", "A100-80GB",
         "--gpu-memory-utilization", "0.25", "--max-model-len", "16384", "--no-color"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "FITS" in result.output
    assert (
        "2 (K,V) x 28 attention layers x 4 KV heads x 128 head_dim x 2 bytes = 57,344 B"
        in result.output
    )
    assert "Maximum concurrency for 16,384 tokens per request" in result.output


def test_cli_json_when_it_does_not_fit_exits_2_with_vllms_error():
    result = runner.invoke(
        app,
        ["capacity", "--model-config", str(QWEN_CONFIG), "--gpu-memory", "24GiB",
         "--max-model-len", "131072", "--json"],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    doc = json.loads(result.output)
    assert doc["fits"] is False
    assert doc["kv_bytes_per_token"] == 57344
    assert "estimated maximum model length" in doc["vllm_error"]
    assert doc["estimated_max_model_len"] < 131072


def test_cli_model_dir_reads_config_and_weights(tmp_path):
    # A folder with config.json and one shard: weights come from the header (14 GiB claimed).
    (tmp_path / "config.json").write_text(QWEN_CONFIG.read_text())
    size = 14 * GiB
    header = {"w": {"dtype": "BF16", "shape": [size // 2], "data_offsets": [0, size]}}
    raw = json.dumps(header).encode()
    with open(tmp_path / "model.safetensors", "wb") as fh:  # sparse: the tensor bytes are a hole
        fh.write(struct.pack("<Q", len(raw)) + raw)
        fh.truncate(8 + len(raw) + size)
    result = runner.invoke(
        app, ["capacity", "--model-dir", str(tmp_path), "--gpu", "H100", "--json"]
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["weights_bytes_per_gpu"] == size
    assert doc["weights_source"] == "1 tensors in 1 safetensors files: BF16 14.00 GiB"


@pytest.mark.parametrize(
    "args",
    [
        ["capacity", "--gpu", "L4"],  # no model config
        ["capacity", "--model-config", "/nonexistent/config.json", "--gpu", "L4"],
        ["capacity", "--model-config", str(QWEN_CONFIG), "--gpu", "Z9000"],
        ["capacity", "--model-config", str(QWEN_CONFIG)],  # no GPU
        ["capacity", "--model-config", str(QWEN_CONFIG), "--gpu-memory", "lots"],
    ],
)
def test_cli_bad_input_is_one_line_and_exit_3(args):

    with pytest.raises(SystemExit) as exc:
        run(args)
    assert exc.value.code == 3


LLAMA_3_8B = {  # meta-llama/Meta-Llama-3-8B config.json, abridged
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
    "max_position_embeddings": 8192,
    "torch_dtype": "bfloat16",
}


def config_file(tmp_path: Path, **changes) -> Path:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**LLAMA_3_8B, **changes}), encoding="utf-8")
    return path


def capacity_cli(capsys, *args: str) -> tuple[int, str, str]:
    return run_cli(capsys, "capacity", "--gpu", "H100", *args)


def test_capacity_zero_kv_heads_is_bad_input_not_all_heads(tmp_path, capsys):
    # num_key_value_heads 0 used to fall back to all 32 heads: a 4x KV estimate, exit 0.
    code, _, err = capacity_cli(
        capsys, "--model-config", str(config_file(tmp_path, num_key_value_heads=0))
    )
    assert code == 3
    assert "num_key_value_heads is 0" in one_line_error(err)


@pytest.mark.parametrize(
    "field, value",
    [
        ("num_hidden_layers", 32.5),  # used to be truncated to 32 silently
        ("num_hidden_layers", 10**30),  # used to print a 34-digit byte count, exit 2
        ("num_hidden_layers", 10**400),  # too big for a float
        ("head_dim", -128),  # used to fall back to hidden/heads silently
        ("num_attention_heads", "32"),  # a string where a number belongs
    ],
)
def test_capacity_implausible_model_shape_is_bad_input(tmp_path, capsys, field, value):
    # A config field that is present but not a plausible whole number is an error, not a guess.
    code, _, err = capacity_cli(
        capsys, "--model-config", str(config_file(tmp_path, **{field: value}))
    )
    assert code == 3
    assert field in one_line_error(err)


def test_capacity_accepts_whole_float_and_null_optional_fields(tmp_path, capsys):
    # 32.0 layers and "head_dim": null appear in real exported configs; they are fine.
    path = config_file(tmp_path, num_hidden_layers=32.0, head_dim=None)
    code, out, _ = capacity_cli(capsys, "--model-config", str(path), "--json")
    assert code == 0
    assert json.loads(out)["kv_bytes_per_token"] == 131072


def test_capacity_tp_not_dividing_attention_heads_is_refused_like_vllm(tmp_path, capsys):
    # -tp 3 with 32 heads used to say FITS; vLLM refuses: "must be divisible by tensor parallel".
    code, _, err = capacity_cli(capsys, "--model-config", str(config_file(tmp_path)), "-tp", "3")
    assert code == 3
    assert "must be divisible by tensor parallel size (3)" in one_line_error(err)


def test_capacity_tp_not_dividing_kv_heads_is_refused(capsys):
    # Qwen2-7B: 28 heads split over 7 GPUs, but 4 KV heads cannot be replicated evenly on 7.
    code, _, err = capacity_cli(capsys, "--model-config", str(QWEN_CONFIG), "-tp", "7")
    assert code == 3
    assert "4 KV heads over 7 GPUs" in one_line_error(err)


def test_capacity_hand_checked_kv_bytes_per_token(tmp_path, capsys):
    # Llama-3-8B: 2 x 32 layers x 8 KV heads x 128 x 2 B = 128 KiB; fp8 halves it; TP 2 halves
    # the KV heads per GPU; none of these may be refused.
    path = str(config_file(tmp_path))
    for extra, expected in [
        ((), 131072),
        (("--kv-cache-dtype", "fp8"), 65536),
        (("-tp", "2"), 65536),
    ]:
        code, out, _ = capacity_cli(capsys, "--model-config", path, "--json", *extra)
        assert code == 0
        assert json.loads(out)["kv_bytes_per_token"] == expected


@pytest.mark.parametrize("params", ["inf", "1e400", "0", "-7B"])
def test_capacity_params_must_be_a_positive_finite_count(tmp_path, capsys, params):
    # inf/1e400 used to crash (OverflowError); 0 and -7B gave a plan with no or negative weights.
    code, _, err = capacity_cli(
        capsys, "--model-config", str(config_file(tmp_path)), f"--params={params}"
    )
    assert code == 3
    assert "is not a parameter count" in one_line_error(err)


def test_capacity_zero_gpu_memory_is_bad_input(tmp_path, capsys):
    # --gpu-memory 0 used to answer "DOES NOT FIT" (exit 2) as if it were a real GPU.
    code, _, err = run_cli(
        capsys, "capacity", "--model-config", str(config_file(tmp_path)), "--gpu-memory", "0"
    )
    assert code == 3
    assert "GPU memory must be more than 0" in one_line_error(err)


@pytest.mark.parametrize(
    "tensor",
    [
        {"dtype": "BF16", "shape": [4, "x"]},  # used to crash: ValueError from int('x')
        {"dtype": "BF16", "data_offsets": [100, 0]},  # used to count -100 bytes of weights
        {"dtype": "BF16", "data_offsets": [0, 10**15]},  # more bytes than the file holds
    ],
)
def test_capacity_safetensors_tensor_with_bad_offsets_is_bad_input(tmp_path, capsys, tensor):
    # A corrupt shard must be named, not summed into a wrong weight size.
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(LLAMA_3_8B), encoding="utf-8")
    header = json.dumps({"model.embed_tokens.weight": tensor}).encode()
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header)
    code, _, err = capacity_cli(capsys, "--model-dir", str(folder))
    assert code == 3
    assert "model.embed_tokens.weight" in one_line_error(err)


@pytest.mark.parametrize(
    "gpu,message",
    [
        # 'a100' fits two sizes, so find_gpu rightly picks neither; it was called unknown
        ("a100", "GPU 'a100' has several sizes: give A100-40GB or A100-80GB"),
        # a name the table does not hold at all is still unknown, with the list
        ("rtx9090", "unknown GPU 'rtx9090'; known: A100-40GB"),
    ],
)
def test_a_gpu_name_of_several_sizes_asks_which(capsys, gpu, message):
    code, out, err = run_cli(capsys, "capacity", "--model-config", str(QWEN_CONFIG), "--gpu", gpu)
    assert code == 3 and out == "" and message in one_line_error(err)
