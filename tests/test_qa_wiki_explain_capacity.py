"""QA review of `explain`, `capacity` and `wiki`: hostile input ends in a clear result or a
one-line error (exit 3), never a traceback and never a silently wrong answer.

Logs and configs are the real captured fixtures (see their SOURCES.md), gzipped, truncated or
edited the way they arrive broken at 3 a.m.
"""

from __future__ import annotations

import gzip
import io
import json
import struct
import sys
from pathlib import Path

import pytest

from llmdoctor.cli import run
from llmdoctor.collectors.bundle import Bundle
from llmdoctor.usecases.diagnose import diagnose

ROOT = Path(__file__).resolve().parent.parent
OOM_LOG = ROOT / "tests" / "fixtures" / "logs" / "vllm-v1-tp-worker-oom-issue17835.log"
QWEN_CONFIG = ROOT / "tests" / "fixtures" / "capacity" / "qwen2-7b-instruct-config.json"
HEALTHY_BUNDLE = ROOT / "examples" / "bundles" / "healthy-vllm-7b"
A100_NODE = ROOT / "tests" / "fixtures" / "k8s" / "node-gpu-a100-node-3.json"
LLAMA_8B = {  # meta-llama/Meta-Llama-3-8B config.json, abridged
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


def run_cli(capsys, *args: str) -> tuple[int, str, str]:
    """The installed command's path: llmdoctor.cli.run (exit codes, one-line errors)."""
    with pytest.raises(SystemExit) as done:
        run(list(args))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    assert "internal error" not in err, err
    return int(done.value.code), out, err


def one_line_error(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.startswith("llmdoctor: ")]
    assert len(lines) == 1, err
    return lines[0]


def config_file(tmp_path: Path, **changes) -> Path:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**LLAMA_8B, **changes}), encoding="utf-8")
    return path


def capacity(capsys, *args: str) -> tuple[int, str, str]:
    return run_cli(capsys, "capacity", "--gpu", "H100", *args)


# --- explain ----------------------------------------------------------------------------------


def test_explain_reads_a_gzip_rotated_log(tmp_path, capsys):
    # A rotated vllm.log.1.gz used to be scanned as compressed bytes: "nothing matched", exit 0.
    path = tmp_path / "vllm.log.1.gz"
    path.write_bytes(gzip.compress(OOM_LOG.read_bytes()))
    code, out, _ = run_cli(capsys, "explain", str(path), "--json")
    assert code == 2
    assert json.loads(out)["matches"][0]["id"] == "cuda-oom-runtime"


def test_explain_truncated_gzip_is_a_one_line_error(tmp_path, capsys):
    # A half-copied .gz cannot be read to the end: say so rather than report a partial scan.
    path = tmp_path / "vllm.log.1.gz"
    path.write_bytes(gzip.compress(OOM_LOG.read_bytes())[:200])
    code, _, err = run_cli(capsys, "explain", str(path))
    assert code == 3
    assert "cannot be read" in one_line_error(err)


def test_explain_refuses_a_binary_file_instead_of_calling_it_clean(tmp_path, capsys):
    # A core dump or model shard passed by mistake used to print "no line looks like an error".
    path = tmp_path / "core.bin"
    path.write_bytes(bytes(range(1, 256)) * 400)
    code, _, err = run_cli(capsys, "explain", str(path))
    assert code == 3
    assert "binary" in one_line_error(err)


def test_explain_still_reads_a_log_that_starts_with_nul_bytes(tmp_path, capsys):
    # copytruncate rotation leaves a run of NULs at the start of a live log: it is still text.
    path = tmp_path / "vllm.log"
    path.write_bytes(b"\x00" * 100_000 + OOM_LOG.read_bytes())
    code, out, _ = run_cli(capsys, "explain", str(path), "--json")
    assert code == 2
    assert json.loads(out)["matches"][0]["id"] == "cuda-oom-runtime"


def test_explain_with_stdin_closed_is_a_one_line_error(capsys, monkeypatch):
    # `llmdoctor explain - <&-` used to end in "internal error: AttributeError".
    monkeypatch.setattr(sys, "stdin", None)
    code, _, err = run_cli(capsys, "explain", "-")
    assert code == 3
    assert "standard input is closed" in one_line_error(err)


def test_explain_decompresses_gzip_piped_on_stdin(capsys, monkeypatch):
    # `cat vllm.log.1.gz | llmdoctor explain -` is as common as the file form.
    data = gzip.compress(OOM_LOG.read_bytes())
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BufferedReader(io.BytesIO(data))))
    code, out, _ = run_cli(capsys, "explain", "-", "--json")
    assert code == 2
    assert json.loads(out)["matches"][0]["id"] == "cuda-oom-runtime"


# --- capacity ---------------------------------------------------------------------------------


def test_capacity_zero_kv_heads_is_bad_input_not_all_heads(tmp_path, capsys):
    # num_key_value_heads 0 used to fall back to all 32 heads: a 4x KV estimate, exit 0.
    code, _, err = capacity(
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
    code, _, err = capacity(capsys, "--model-config", str(config_file(tmp_path, **{field: value})))
    assert code == 3
    assert field in one_line_error(err)


def test_capacity_accepts_whole_float_and_null_optional_fields(tmp_path, capsys):
    # 32.0 layers and "head_dim": null appear in real exported configs; they are fine.
    path = config_file(tmp_path, num_hidden_layers=32.0, head_dim=None)
    code, out, _ = capacity(capsys, "--model-config", str(path), "--json")
    assert code == 0
    assert json.loads(out)["kv_bytes_per_token"] == 131072


def test_capacity_tp_not_dividing_attention_heads_is_refused_like_vllm(tmp_path, capsys):
    # -tp 3 with 32 heads used to say FITS; vLLM refuses: "must be divisible by tensor parallel".
    code, _, err = capacity(capsys, "--model-config", str(config_file(tmp_path)), "-tp", "3")
    assert code == 3
    assert "must be divisible by tensor parallel size (3)" in one_line_error(err)


def test_capacity_tp_not_dividing_kv_heads_is_refused(capsys):
    # Qwen2-7B: 28 heads split over 7 GPUs, but 4 KV heads cannot be replicated evenly on 7.
    code, _, err = capacity(capsys, "--model-config", str(QWEN_CONFIG), "-tp", "7")
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
        code, out, _ = capacity(capsys, "--model-config", path, "--json", *extra)
        assert code == 0
        assert json.loads(out)["kv_bytes_per_token"] == expected


@pytest.mark.parametrize("params", ["inf", "1e400", "0", "-7B"])
def test_capacity_params_must_be_a_positive_finite_count(tmp_path, capsys, params):
    # inf/1e400 used to crash (OverflowError); 0 and -7B gave a plan with no or negative weights.
    code, _, err = capacity(
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
    (folder / "config.json").write_text(json.dumps(LLAMA_8B), encoding="utf-8")
    header = json.dumps({"model.embed_tokens.weight": tensor}).encode()
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header)
    code, _, err = capacity(capsys, "--model-dir", str(folder))
    assert code == 3
    assert "model.embed_tokens.weight" in one_line_error(err)


def test_kv_cache_fit_skips_a_non_numeric_serving_argument(tmp_path):
    # --max-model-len 32k (accepted by newer vLLM) used to make the check raise (a check error).
    facts = Bundle(HEALTHY_BUNDLE).to_facts()
    facts.set("k8s/node.json", json.loads(A100_NODE.read_text()))
    settings = {"model_config_path": str(QWEN_CONFIG), "max_model_len": "32k"}
    report = diagnose([facts], "bundle", only=["kv-cache-fit"], settings=settings)
    assert not report.errors
    [skip] = [s for s in report.skipped if s["check"] == "kv-cache-fit"]
    assert "not a number" in skip["reason"]


# --- wiki -------------------------------------------------------------------------------------


def test_wiki_add_into_a_file_keeps_the_draft_and_exits_3(tmp_path, capsys):
    # --wiki pointing at a file used to end in "internal error: FileExistsError", draft lost.
    target = tmp_path / "runbooks.md"
    target.write_text("not a folder\n", encoding="utf-8")
    args = ["--id", "redis-timeout", "--title", "Gateway times out on Redis"]
    args += ["--severity", "warning", "--symptom", "s", "--cause", "c", "--fix", "f"]
    code, out, _ = run_cli(capsys, "wiki", "add", "--wiki", str(target), "--json", *args)
    assert code == 3
    data = json.loads(out)
    assert data["written"] is False and "is a file" in data["reason"]
    assert Path(data["draft"]).is_file()


@pytest.mark.parametrize("query", ["", "   ", "\t"])
def test_wiki_search_empty_query_is_a_one_line_error(capsys, query):
    # An empty query used to answer "no runbook entry matches", as if the wiki had nothing.
    code, _, err = run_cli(capsys, "wiki", "search", query)
    assert code == 3
    assert "nothing to search for" in one_line_error(err)


def test_missing_wiki_folders_are_warned_about_not_silently_dropped(tmp_path, capsys, monkeypatch):
    # A typo in LLMDOCTOR_WIKI or --wiki used to leave the team's entries out without a word.
    env_dir, flag_dir = tmp_path / "no-such-env-wiki", tmp_path / "no-such-flag-wiki"
    monkeypatch.setenv("LLMDOCTOR_WIKI", str(env_dir))
    code, out, err = run_cli(capsys, "wiki", "search", "OOM", "--wiki", str(flag_dir))
    assert code == 0 and "cuda-oom-runtime" in out  # the built-in entries still answer
    assert f"wiki folder {env_dir} does not exist" in err
    assert f"wiki folder {flag_dir} does not exist" in err
