"""Today's flagship architectures, from their real config.json files: the per-token KV cache vLLM
0.33 allocates and the parameter count, each worked out by hand from vLLM's model files and the
model card (tests/fixtures/capacity/models/SOURCES.md), and the verdicts issue 25 named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from llmdoctor.capacity.model_weights import estimate_parameters, weight_bytes_from_parameters
from llmdoctor.capacity.planner import CapacityInputs, GiB, find_gpu, model_shape, plan
from llmdoctor.cli import app

MODELS = Path(__file__).parent / "fixtures" / "capacity" / "models"
runner = CliRunner()
QWEN2_7B = {  # Qwen/Qwen2-7B-Instruct config.json, abridged (tests/fixtures/capacity)
    "model_type": "qwen2",
    "hidden_size": 3584,
    "num_attention_heads": 28,
    "num_hidden_layers": 28,
    "num_key_value_heads": 4,
    "intermediate_size": 18944,
    "vocab_size": 152064,
    "max_position_embeddings": 32768,
}


def shape_of(name: str):
    return model_shape(json.loads((MODELS / name / "config.json").read_text()))


def kv_per_token(name: str, kv_cache_dtype: str = "auto", tp: int = 1) -> int:
    """KV bytes per token over all attention layers of the whole model, as vLLM pages them."""
    result = plan(
        CapacityInputs(
            shape=shape_of(name),
            gpu_memory_bytes=141 * GiB,
            kv_cache_dtype=kv_cache_dtype,
            tensor_parallel_size=tp,
            max_model_len=8192,
            kv_cache_bytes=40 * GiB,
        )
    )
    return result.kv_bytes_per_token_model


# (fixture, KV bytes per token at the model dtype (bf16), layers that keep every token,
#  parameters by hand, published total)
TABLE = [
    # Scout: 48 layers x 2 (K,V) x 8 KV heads x 128 head_dim x 2 B = 196,608; every 4th layer is
    # NoPE (no_rope_layer_interval 4): 12 keep every token, 36 chunked (llama4.py).
    # Params: embed+lm_head 2 x 202,048 x 5,120 = 2.069B; attention 48 x (2 x 5,120 x 5,120 +
    # 2 x 5,120 x 1,024) = 3.020B; 48 MoE layers x (16 x 3 x 5,120 x 8,192 + shared expert
    # 3 x 5,120 x 8,192 + router 5,120 x 16) = 102.680B; total 107.770B. Card: 109B (with the
    # vision encoder, not counted here).
    ("llama-4-scout-17b-16e-instruct", 196_608, 12, 107_769_364_480, 109e9),
    # Maverick: same attention as Scout. interleave_moe_layer_step 2: 24 MoE layers x
    # (128 x 125,829,120 + 125,829,120 + 655,360) = 389.583B, 24 dense x 3 x 5,120 x 16,384
    # (intermediate_size_mlp) = 6.040B; + 2.069B + 3.020B = 400.711B. Card: 400B.
    ("llama-4-maverick-17b-128e-instruct", 196_608, 12, 400_711_352_320, 400e9),
    # DeepSeek-V3.1: MLA 61 x (512 + 64) x 2 B = 70,272. Params: embed 2 x 129,280 x 7,168 =
    # 1.853B; MLA per layer q_a 7,168 x 1,536 + q_b 1,536 x 128 x 192 + kv_a 7,168 x 576 + kv_b
    # 512 x 128 x 256 + o 128 x 128 x 7,168 = 187,105,280, x 61 = 11.413B; first_k_dense_replace
    # 3: 3 x 3 x 7,168 x 18,432 = 1.189B; 58 MoE x (257 x 3 x 7,168 x 2,048 + 256 x 7,168) =
    # 656.570B; total 671.025B (MTP layer not loaded). Card: 671B.
    ("deepseek-v3.1", 70_272, 61, 671_025_397_760, 671e9),
    # DeepSeek-V3.2: as V3.1 + indexer key 128 + 4 B per layer: 61 x (1,152 + 132) = 78,324.
    # Params: + indexer per layer 1,536 x 64 x 128 + 7,168 x 128 + 7,168 x 64 = 13,959,168,
    # x 61 = 0.852B; total 671.877B. Card: 671B main model (+ MTP).
    ("deepseek-v3.2", 78_324, 61, 671_876_907_008, 671e9),
    # Kimi K2: MLA 61 x 576 x 2 = 70,272. Params: embed 2 x 163,840 x 7,168 = 2.349B; MLA per
    # layer (64 heads) 11,010,048 + 1,536 x 64 x 192 + 4,128,768 + 512 x 64 x 256 + 64 x 128 x
    # 7,168 = 101,122,048, x 61 = 6.168B; first_k_dense_replace 1: 0.396B; 60 MoE x (385 x
    # 44,040,192 + 384 x 7,168) = 1,017.494B; total 1,026.407B. Tech report: 1.04T.
    ("kimi-k2-instruct", 70_272, 61, 1_026_407_202_816, 1.04e12),
    # Kimi K2.5: the same DeepSeek-V3 text model under text_config (vision encoder not counted).
    ("kimi-k2.5", 70_272, 61, 1_026_407_202_816, 1.04e12),
    # GLM-4.5: 92 x 2 x 8 x 128 x 2 = 376,832. Params: embed 2 x 151,552 x 5,120 = 1.552B;
    # attention 92 x (5,120 x 12,288 x 2 + 2 x 5,120 x 1,024) = 12.541B; first_k_dense_replace 3:
    # 3 x 3 x 5,120 x 12,288 = 0.566B; 89 MoE x (161 x 3 x 5,120 x 1,536 + 160 x 5,120) =
    # 338.136B; total 352.796B. Card: 355B.
    ("glm-4.5", 376_832, 92, 352_795_525_120, 355e9),
    ("glm-4.6", 376_832, 92, 352_795_525_120, 355e9),  # same layers, longer context
    # Gemma 3 27B: 62 x 2 x 16 x 128 x 2 = 507,904; sliding_window_pattern 6 (transformers'
    # default): layers 6, 12, ..., 60 global = 10 keep every token. Params: tied embed 262,208 x
    # 5,376 = 1.410B; attention 62 x 3 x 5,376 x 4,096 = 4.096B; MLP 62 x 3 x 5,376 x 21,504 =
    # 21.503B; total 27.008B. Card: 27B.
    ("gemma-3-27b-it", 507_904, 10, 27_007_991_808, 27e9),
    # gpt-oss-120b: 36 x 2 x 8 x 64 x 2 = 73,728; layer_types alternate: 18 full. Params: embed
    # 2 x 201,088 x 2,880 = 1.158B; attention 36 x (2 x 2,880 x 4,096 + 2 x 2,880 x 512) =
    # 0.956B; 36 MoE x (128 x 3 x 2,880 x 2,880 + 2,880 x 128) = 114.675B; total 116.789B.
    # Card: 117B.
    ("gpt-oss-120b", 73_728, 18, 116_788_838_400, 117e9),
    # Qwen3-Next-80B-A3B: full_attention_interval 4: 12 x 2 x 2 x 256 x 2 = 24,576 (+ the Gated
    # DeltaNet state of the other 36). Params: embed 2 x 151,936 x 2,048 = 0.622B; 12 gated
    # attention layers x (2,048 x 8,192 + 2 x 2,048 x 512 + 4,096 x 2,048) = 0.327B; 36 linear
    # layers x (2,048 x 12,288 qkvz + 2,048 x 64 ba + 8,192 x 4 conv + 4,096 x 2,048 out) =
    # 1.214B; 48 MoE x (513 x 3 x 2,048 x 512 + 2,048 x 512 router + 2,048 gate) = 77.511B;
    # total 79.674B (llmdoctor leaves out the q gate: -0.13 %). Card: 80B.
    ("qwen3-next-80b-a3b-instruct", 24_576, 12, 79_674_181_888, 80e9),
    # Qwen3-235B-A22B: 94 x 2 x 4 x 128 x 2 = 192,512. Params: embed 2 x 151,936 x 4,096 =
    # 1.245B; attention 94 x (2 x 4,096 x 8,192 + 2 x 4,096 x 512) = 6.702B; mlp_only_layers []
    # and decoder_sparse_step 1: 94 MoE x (128 x 3 x 4,096 x 1,536 + 4,096 x 128) = 227.146B;
    # total 235.093B. Card: 235B.
    ("qwen3-235b-a22b", 192_512, 94, 235_092_836_352, 235e9),
    # MiniMax-M2: 62 x 2 x 8 x 128 x 2 = 253,952. Params: embed 2 x 200,064 x 3,072 = 1.229B;
    # attention 62 x (2 x 3,072 x 6,144 + 2 x 3,072 x 1,024) = 2.730B; 62 MoE x (256 x 3 x 3,072
    # x 1,536 + 3,072 x 256) = 224.729B; total 228.689B. Card: 230B.
    ("minimax-m2", 253_952, 62, 228_688_920_576, 230e9),
]


@pytest.mark.parametrize(("name", "kv", "full", "params", "published"), TABLE)
def test_kv_bytes_layers_and_parameters_match_the_hand_arithmetic(
    name, kv, full, params, published
):
    # each row: vLLM's per-layer pages summed, the layers that keep every token, and the
    # parameters as the model file builds them (norms and biases are the only terms left out)
    shape = shape_of(name)
    assert kv_per_token(name) == kv
    assert shape.full_layers == full
    estimated = estimate_parameters(shape)
    assert abs(estimated - params) / params < 0.002, estimated
    assert abs(estimated - published) / published < 0.02, estimated


def test_deepseek_v32_with_fp8_stores_fp8_ds_mla_and_the_indexer_key():
    # --kv-cache-dtype fp8 becomes fp8_ds_mla: 656 B + the 132 B indexer key, x 61 layers; the
    # old figure (61 x 576 x 1 B = 35,136) left out the scales, the bf16 RoPE part and the indexer
    assert kv_per_token("deepseek-v3.2", "fp8") == 61 * (656 + 132) == 48_068
    assert kv_per_token("deepseek-v3.2", "fp8", tp=8) == 48_068  # MLA is not split by TP


def test_mla_models_get_the_64_token_blocks_vllm_forces_for_flashmla():
    # --block-size 16 (the default) becomes 64: a 163,840-token request is 2,560 blocks
    result = plan(
        CapacityInputs(
            shape=shape_of("deepseek-v3.1"),
            gpu_memory_bytes=141 * GiB,
            tensor_parallel_size=8,
            kv_cache_bytes=40 * GiB,
        )
    )
    assert result.block_size == 64 and result.block_bytes == 64 * 70_272
    assert any("Forcing kv cache block size to 64" in s for s in result.steps)


def test_nvfp4_kv_packs_fp4_values_with_one_fp8_scale_per_16():
    # gpt-oss-120b: 36 layers x 2 x 8 KV heads x (64/2 + 64/16) B (vLLM nvfp4_kv_cache_full_dim)
    assert kv_per_token("gpt-oss-120b", "nvfp4") == 36 * 2 * 8 * (32 + 4)


def test_deepseek_v31_with_fp8_is_one_byte_per_latent_element():
    # dense MLA has no indexer and no fp8_ds_mla: 61 x 576 x 1 B
    assert kv_per_token("deepseek-v3.1", "fp8") == 61 * 576


def test_maverick_bf16_fits_on_eight_h200s():
    # issue 25: was "DOES NOT FIT, 778B parameters, 181 GiB per GPU"; 400.7B x 2 B / 8 = 93.3 GiB
    h200 = find_gpu("H200")
    result = plan(
        CapacityInputs(
            shape=shape_of("llama-4-maverick-17b-128e-instruct"),
            gpu_memory_bytes=h200.usable_bytes,
            gpu_name=h200.name,
            tensor_parallel_size=8,
        )
    )
    assert result.modelled and result.fits
    assert 93 * GiB < result.weights_bytes_per_gpu < 94 * GiB


def test_scout_at_one_million_tokens_fits_on_four_h100s():
    # 12 global layers keep 1M tokens (2 KV heads per GPU: 1,024 B per token and layer = 11.4
    # GiB); the 36 chunked layers keep 8,192 + one batch each
    h100 = find_gpu("H100")
    result = plan(
        CapacityInputs(
            shape=shape_of("llama-4-scout-17b-16e-instruct"),
            gpu_memory_bytes=h100.usable_bytes,
            gpu_name=h100.name,
            tensor_parallel_size=4,
            max_model_len=1_000_000,
        )
    )
    assert result.modelled and result.fits
    assert 11.4 * GiB < result.seq_bytes < 12.1 * GiB


def test_scout_without_the_hybrid_kv_cache_manager_keeps_every_token_in_every_layer():
    # VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=0: all 48 layers keep 1M tokens
    # (45.8 GiB), more than the ~19 GiB left on an H100 at TP 4: the start fails
    h100 = find_gpu("H100")
    result = plan(
        CapacityInputs(
            shape=shape_of("llama-4-scout-17b-16e-instruct"),
            gpu_memory_bytes=h100.usable_bytes,
            gpu_name=h100.name,
            tensor_parallel_size=4,
            max_model_len=1_000_000,
            hybrid_kv_cache=False,
        )
    )
    assert not result.fits and result.seq_bytes > 45 * GiB
    assert any("hybrid KV-cache manager off" in s for s in result.steps)


def test_the_chunked_attention_env_set_to_0_turns_the_hybrid_manager_off_for_scout():
    # VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=0 in the pod: vllm/config/vllm.py
    # disables the hybrid manager for models with attention_chunk_size
    result = plan(
        CapacityInputs(
            shape=shape_of("llama-4-scout-17b-16e-instruct"),
            gpu_memory_bytes=find_gpu("H100").usable_bytes,
            tensor_parallel_size=4,
            max_model_len=1_000_000,
            chunked_local_hybrid=False,
        )
    )
    assert not result.fits and result.seq_bytes > 45 * GiB
    assert any("HYBRID_KV_CACHE=0" in s for s in result.steps)


def kimi_k25_with_ignore(ignore):
    """Kimi-K2.5's verbatim config with its INT4 block's ignore list replaced."""
    config = json.loads((MODELS / "kimi-k2.5" / "config.json").read_text())
    config["text_config"]["quantization_config"]["ignore"] = ignore
    return model_shape(config)


def test_kimi_k25_int4_checkpoint_quantizes_only_the_routed_experts():
    # its ignore list keeps attention, shared experts and the dense MLP 16-bit (vLLM
    # should_ignore_layer): 60 x 384 x 3 x 7,168 x 2,048 = 1,014,686,023,680 expert weights at
    # 4 + 16/32 = 4.5 bits = 570,760,888,320 B; embeddings 2,348,810,240 + attention
    # 6,168,444,928 + shared experts, routers and dense MLP 3,203,923,968 + norms 881,664 at
    # 2 B = 23,444,121,600 B; 594,205,009,920 B in all (the old rule, every linear at 4.5 bits:
    # 580.7 GB, 12.5 GiB short)
    shape = shape_of("kimi-k2.5")
    assert shape.quant_scope == "experts" and shape.quant_bits == 4.5
    params = estimate_parameters(shape)
    assert weight_bytes_from_parameters(shape, params, None) == 594_205_009_920


@pytest.mark.parametrize(
    ("ignore", "why"),
    [
        (["lm_head"], "only lm_head left out: every linear layer is 4-bit"),
        (["lm_head", "re:.*self_attn.*"], "the shared experts and dense MLP are still 4-bit"),
        (["re:.*"], "everything ignored, the routed experts too"),
        (["re:(?<=x)self_attn"], "a pattern RE2 cannot compile matches nothing"),
    ],
)
def test_an_ignore_list_that_does_not_spare_exactly_the_routed_experts_keeps_the_linear_scope(
    ignore, why
):
    # only the Kimi-K2.5 pattern (attention, shared and dense MLPs ignored) narrows the scope
    assert kimi_k25_with_ignore(ignore).quant_scope == "linear", why


def test_deepseek_v4_is_not_modelled_and_gets_no_verdict():
    # compress_ratios: a compressed history plus a window that llmdoctor does not size
    result = plan(
        CapacityInputs(
            shape=shape_of("deepseek-v4-pro"),
            gpu_memory_bytes=find_gpu("H200").usable_bytes,
            tensor_parallel_size=8,
        )
    )
    assert not result.modelled
    assert result.not_modelled[0].startswith("not modelled: deepseek_v4's compressed")
    assert "assumed:" in result.not_modelled[0]
    assert result.to_json()["fits"] is None and result.vllm_error is None


def test_cli_says_not_modelled_for_deepseek_v4_never_fits_or_does_not_fit():
    # exit 1 (no verdict), and neither headline
    done = runner.invoke(
        app,
        ["capacity", "--model-config", str(MODELS / "deepseek-v4-pro" / "config.json"),
         "--gpu", "H200", "-tp", "8", "--no-color"],
    )  # fmt: skip
    assert done.exit_code == 1, done.output
    assert "NOT MODELLED" in done.output and "not modelled: deepseek_v4" in done.output
    assert "FITS" not in done.output.replace("NOT MODELLED", "")


def test_cli_headlines_for_maverick_and_scout_say_fits():
    # the two CRITICALs of issue 25 as a user would run them
    maverick = MODELS / "llama-4-maverick-17b-128e-instruct" / "config.json"
    scout = MODELS / "llama-4-scout-17b-16e-instruct" / "config.json"
    for args in (
        [str(maverick), "--gpu", "H200", "-tp", "8"],
        [str(scout), "--gpu", "H100", "-tp", "4", "--max-model-len", "1000000"],
    ):
        done = runner.invoke(app, ["capacity", "--model-config", *args, "--no-color"])
        assert done.exit_code == 0, done.output
        assert done.output.lstrip().startswith("FITS")


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"model_type": "falcon_mamba_x"}, "model_type 'falcon_mamba_x'"),
        ({"layer_types": ["full_attention"] * 27 + ["compressed_attention"]}, "compressed"),
        ({"attn_type_list": [0, 1] * 14}, "lightning"),
    ],
)
def test_an_architecture_llmdoctor_does_not_know_is_said_so(fields, named):
    # Qwen2-7B's shape with one field llmdoctor cannot size: named, with the assumption
    shape = model_shape({**QWEN2_7B, **fields})
    assert shape.not_modelled and named in shape.not_modelled[0]
    assert "assumed" in shape.not_modelled[0]


def test_a_known_architecture_is_modelled():
    # the same decoder without the unknown field, and every fixture but DeepSeek-V4: a verdict
    assert not model_shape(QWEN2_7B).not_modelled
    assert all(not shape_of(row[0]).not_modelled for row in TABLE)
