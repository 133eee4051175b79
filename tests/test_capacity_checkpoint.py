"""`capacity --model-dir`: a checkpoint is sized from all of its shards or not at all. A
half-downloaded model (shards missing from the index's weight_map or from the -of-N numbering),
a shard cut short, or a header whose shape disagrees with its data_offsets is refused (exit 3)
with the missing files or the tensor named, never sized as the part that happens to be there."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from llmdoctor.cli import run as cli_run

QWEN_CONFIG = Path(__file__).parent / "fixtures" / "capacity" / "qwen2-7b-instruct-config.json"
GiB = 1 << 30


def shard(path: Path, tensors: dict[str, dict], data: int | None = None) -> None:
    """A safetensors file: the 8-byte header length, the JSON header, then `data` bytes
    (a sparse hole; by default as many as the offsets say)."""
    raw = json.dumps(tensors).encode()
    end = max((t["data_offsets"][1] for t in tensors.values()), default=0)
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(raw)) + raw)
        fh.truncate(8 + len(raw) + (end if data is None else data))


def bf16(rows: int, cols: int, start: int = 0) -> dict:
    return {
        "dtype": "BF16",
        "shape": [rows, cols],
        "data_offsets": [start, start + 2 * rows * cols],
    }


def model_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "qwen2-7b"
    folder.mkdir()
    (folder / "config.json").write_text(QWEN_CONFIG.read_text())
    return folder


def index(folder: Path, weight_map: dict[str, str], total_size=None) -> None:
    doc = {"metadata": {"total_size": total_size}, "weight_map": weight_map}
    (folder / "model.safetensors.index.json").write_text(json.dumps(doc))


def capacity(capsys, folder: Path, *extra: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as done:
        cli_run(["capacity", "--model-dir", str(folder), "--gpu", "H100", *extra])
    out, err = capsys.readouterr()
    return done.value.code, out, err


def refusal(err: str) -> str:
    assert "Traceback" not in err and "internal error" not in err
    assert len(err.strip().splitlines()) == 1, err
    return err


def test_half_downloaded_model_names_the_missing_shards(tmp_path, capsys):
    # QA's case: shard 1 of 4 present; the index says 15.2 GB in four files
    folder = model_dir(tmp_path)
    shard(
        folder / "model-00001-of-00004.safetensors", {"model.embed_tokens.weight": bf16(1000, 1000)}
    )
    weight_map = {
        "model.embed_tokens.weight": "model-00001-of-00004.safetensors",
        "model.layers.0.mlp.up_proj.weight": "model-00002-of-00004.safetensors",
        "lm_head.weight": "model-00004-of-00004.safetensors",
    }
    index(folder, weight_map, total_size=15231233024)
    code, out, err = capacity(capsys, folder)
    assert code == 3 and "FITS" not in out
    err = refusal(err)
    assert "incomplete" in err and "3 shard file(s) missing" in err
    for k in (2, 3, 4):  # 3 is in neither map nor folder: the -of-00004 numbering implies it
        assert f"model-0000{k}-of-00004.safetensors" in err


def test_a_shard_of_n_without_its_index_is_still_incomplete(tmp_path, capsys):
    folder = model_dir(tmp_path)
    shard(folder / "model-00002-of-00003.safetensors", {"w": bf16(10, 10)})
    code, _, err = capacity(capsys, folder)
    assert code == 3
    err = refusal(err)
    assert "model-00001-of-00003.safetensors, model-00003-of-00003.safetensors" in err


def test_a_shard_the_index_names_that_is_absent_is_named(tmp_path, capsys):
    folder = model_dir(tmp_path)
    shard(folder / "part-a.safetensors", {"w": bf16(10, 10)})
    index(folder, {"w": "part-a.safetensors", "v": "part-b.safetensors"})
    code, _, err = capacity(capsys, folder)
    assert code == 3 and "part-b.safetensors" in refusal(err)


def test_a_shard_cut_short_is_refused(tmp_path, capsys):
    folder = model_dir(tmp_path)
    shard(folder / "model.safetensors", {"model.norm.weight": bf16(3584, 1)}, data=1000)
    code, _, err = capacity(capsys, folder)
    assert code == 3
    err = refusal(err)
    assert "'model.norm.weight'" in err and "cut short" in err


@pytest.mark.parametrize(
    "shape",
    [[10**12, 10**12], [1e12, 1e12], [2**64, 2**64, 2**64], [1000, 999]],
)
def test_a_shape_that_disagrees_with_the_offsets_is_refused_naming_the_tensor(
    tmp_path, capsys, shape
):
    folder = model_dir(tmp_path)
    tensor = {"dtype": "BF16", "shape": shape, "data_offsets": [0, 2 * 1000 * 1000]}
    shard(folder / "model.safetensors", {"model.embed_tokens.weight": tensor})
    code, out, err = capacity(capsys, folder)
    assert code == 3 and "FITS" not in out
    assert "'model.embed_tokens.weight'" in refusal(err)


def test_a_complete_checkpoint_is_sized_from_its_index_shards(tmp_path, capsys):
    # two shards of 7 GiB and a consolidated copy the index does not list: 14 GiB, not 28
    folder = model_dir(tmp_path)
    half = bf16(7 * GiB // 2 // 4096, 4096)
    shard(folder / "model-00001-of-00002.safetensors", {"a": half})
    shard(folder / "model-00002-of-00002.safetensors", {"b": half})
    shard(
        folder / "consolidated.safetensors",
        {"a": half, "b": {**half, "data_offsets": [7 * GiB, 14 * GiB]}},
    )
    weight_map = {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}
    index(folder, weight_map, total_size=14 * GiB)
    code, out, err = capacity(capsys, folder, "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["weights_bytes_per_gpu"] == 14 * GiB
    assert doc["weights_source"] == "2 tensors in 2 safetensors files: BF16 14.00 GiB"
    assert any("consolidated.safetensors" in n for n in doc["notes"])


def test_an_index_whose_total_size_disagrees_is_said(tmp_path, capsys):
    folder = model_dir(tmp_path)
    shard(folder / "model.safetensors", {"w": bf16(1024, 1024)})
    index(folder, {"w": "model.safetensors"}, total_size=15231233024)
    code, out, err = capacity(capsys, folder)
    assert code == 0, err
    assert "total_size" in out and "15,231,233,024" in out


@pytest.mark.parametrize(
    ("doc", "says"),
    [
        (
            {"metadata": {"total_size": "15 GB"}, "weight_map": {"w": "model.safetensors"}},
            "metadata.total_size",
        ),
        ({"metadata": {}, "weight_map": ["model.safetensors"]}, "weight_map"),
        ({"weight_map": {"w": "../other/model.safetensors"}}, "weight_map"),
        ({"weight_map": {"v": "model.safetensors"}}, "'v'"),  # the shard does not hold it
        ([1, 2], "JSON object"),
    ],
)
def test_a_malformed_index_is_refused_naming_the_field(tmp_path, capsys, doc, says):
    folder = model_dir(tmp_path)
    shard(folder / "model.safetensors", {"w": bf16(10, 10)})
    (folder / "model.safetensors.index.json").write_text(json.dumps(doc))
    code, _, err = capacity(capsys, folder)
    assert code == 3 and says in refusal(err)
