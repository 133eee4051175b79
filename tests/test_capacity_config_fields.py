"""`capacity`: a config.json field that is present but malformed is refused in one line naming
the field (exit 3), never silently dropped and the model sized as if it were absent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmdoctor.capacity.model_shape import model_shape
from llmdoctor.cli import run as cli_run

FIXTURES = Path(__file__).parent / "fixtures" / "capacity"
QWEN2 = json.loads((FIXTURES / "qwen2-7b-instruct-config.json").read_text())
HYBRID = json.loads((FIXTURES / "qwen3.x-27b-hybrid-config.json").read_text())


def capacity(capsys, tmp_path: Path, config: dict) -> tuple[int, str, str]:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    with pytest.raises(SystemExit) as done:
        cli_run(["capacity", "--model-config", str(path), "--gpu", "H100"])
    out, err = capsys.readouterr()
    return done.value.code, out, err


def ct(config_groups) -> dict:
    return {"quant_method": "compressed-tensors", "config_groups": config_groups}


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"quantization_config": [1, 2]}, "quantization_config is a list"),
        ({"quantization_config": "fp8"}, "quantization_config is 'fp8'"),
        ({"compression_config": [1]}, "compression_config is a list"),
        ({"quantization_config": ct("x")}, "quantization_config.config_groups is 'x'"),
        ({"quantization_config": ct({"group_0": 4})}, "config_groups.group_0 is 4"),
        ({"quantization_config": ct({"g": {"weights": [8]}})}, "config_groups.g.weights is"),
        (
            {"quantization_config": ct({"g": {"weights": {"num_bits": "8"}}})},
            "config_groups.g.weights.num_bits is '8'",
        ),
        ({"quantization_config": {"quant_method": "awq", "bits": "4"}}, "quantization_config.bits"),
        (
            {"quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": "x"}},
            "quantization_config.group_size",
        ),
        ({"layer_types": ["full_attention"]}, "layer_types has 1 entries"),
        ({"layer_types": "full_attention"}, "layer_types is 'full_attention'"),
    ],
)
def test_a_malformed_field_is_one_line_naming_it(capsys, tmp_path, fields, named):
    code, out, err = capacity(capsys, tmp_path, {**QWEN2, **fields})
    assert code == 3 and "FITS" not in out
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert named in err


def test_a_hybrids_layer_types_must_name_every_layer(capsys, tmp_path):
    # the real Qwen3.x hybrid config with its layer_types cut to one: not read as all-full
    text = {**HYBRID["text_config"], "layer_types": HYBRID["text_config"]["layer_types"][:1]}
    code, _, err = capacity(capsys, tmp_path, {**HYBRID, "text_config": text})
    assert code == 3 and "layer_types has 1 entries" in err and "64 layers" in err


def test_gptq_per_channel_group_size_is_read_not_refused():
    shape = model_shape(
        {**QWEN2, "quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": -1}}
    )
    assert shape.quant_bits == 4 and "per-channel" in shape.quant_note


def test_a_group_without_weights_is_skipped_and_an_absent_config_is_unquantized():
    groups = {"acts": {"weights": None}, "w": {"weights": {"num_bits": 8}}}
    assert model_shape({**QWEN2, "quantization_config": ct(groups)}).quant_bits == 8
    assert model_shape({**QWEN2, "quantization_config": None}).quant_bits is None
