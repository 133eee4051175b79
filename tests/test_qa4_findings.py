"""QA pass on explain's JSON log records and the inputs around them, as an on-call engineer and
as an adversary would.

Each test pins one problem found by running the CLI on real excerpts (tests/fixtures/runbooks/,
tests/fixtures/healthy/). Where a test wraps real lines in a log record (Docker's json-file, a
containerd JSON line), only the encoding is added: the text of every line is as captured.
Each was fixed the same day; these tests hold the fixes.
"""

from __future__ import annotations

import gzip
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUNBOOKS = ROOT / "tests" / "fixtures" / "runbooks"
HEALTHY = ROOT / "tests" / "fixtures" / "healthy"

# a healthy vLLM 0.10 start-up (2×A100, TP 2): the padding that makes a log long
HEALTHY_STARTUP = (
    (HEALTHY / "vllm-qwen2-7b-2xa100-80gb-tp2-gmu0.5-startup.log")
    .read_text(encoding="utf-8")
    .splitlines()
)
OOM = RUNBOOKS / "cuda-oom-runtime" / "vllm-v1-tp-worker-oom-issue17835.log"
NAN = RUNBOOKS / "nan-or-garbage-output" / "multinomial-nan-probabilities-internlm-issue459.log"
ILLEGAL = RUNBOOKS / "illegal-memory-access"
CONTAINERD = (
    RUNBOOKS / "image-pull-slow" / "containerd-cancel-pull-no-progress-kubernetes131521.log"
)

PAST_CLEAN_LIMIT = 9 * 1024 * 1024  # explain cleans a paste, file or stream up to 8 MB only


def _explain(args: list[str], stdin: bytes | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, NO_COLOR="1")
    return subprocess.run(
        [sys.executable, "-m", "llmdoctor", "explain", *args],
        input=stdin,
        capture_output=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )


def _padded(lines: list[str], failure: list[str]) -> str:
    """Healthy start-up lines repeated past 8 MB, then the failure: a long log that ends badly."""
    out, size = [], 0
    while size < PAST_CLEAN_LIMIT:
        for line in lines:
            out.append(line)
            size += len(line) + 1
    return "\n".join(out + failure) + "\n"


def _docker_record(line: str) -> str:
    """One line as Docker's json-file driver writes it; like Go's HTML-safe JSON encoder, Docker
    writes <, > and & as \\u003c, \\u003e, \\u0026."""
    text = json.dumps({"log": line + "\n", "stream": "stderr", "time": "2024-01-01T00:00:00.0Z"})
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def test_stdin_longer_than_8mb_is_explained_not_an_internal_error():
    log = _padded(HEALTHY_STARTUP, OOM.read_text(encoding="utf-8").splitlines())
    result = _explain(["-", "--json"], stdin=log.encode())
    assert "internal error" not in result.stderr.decode(), result.stderr.decode()
    assert result.returncode == 2
    assert json.loads(result.stdout)["matches"][0]["id"] == "cuda-oom-runtime"


def test_gzip_log_longer_than_8mb_is_explained(tmp_path):
    log = _padded(HEALTHY_STARTUP, OOM.read_text(encoding="utf-8").splitlines())
    path = tmp_path / "vllm.log.1.gz"
    path.write_bytes(gzip.compress(log.encode()))
    result = _explain([str(path), "--json"])
    assert "internal error" not in result.stderr.decode(), result.stderr.decode()
    assert result.returncode == 2
    assert json.loads(result.stdout)["matches"][0]["id"] == "cuda-oom-runtime"


def test_docker_json_file_longer_than_8mb_keeps_the_verdict(tmp_path):
    failure = [_docker_record(line) for line in NAN.read_text(encoding="utf-8").splitlines()]
    small = tmp_path / "small-json.log"
    small.write_text("\n".join(failure) + "\n", encoding="utf-8")
    big = tmp_path / "big-json.log"
    big.write_text(_padded([_docker_record(line) for line in HEALTHY_STARTUP], failure))
    small_top = json.loads(_explain([str(small), "--json"]).stdout)["matches"][0]
    assert (small_top["id"], small_top["how"]) == ("nan-or-garbage-output", "signature")
    big_top = json.loads(_explain([str(big), "--json"]).stdout)["matches"][0]
    assert (big_top["id"], big_top["how"]) == ("nan-or-garbage-output", "signature")
    assert not big_top["evidence"][0]["text"].startswith('{"log"')


def test_json_record_with_lone_surrogate_does_not_crash(tmp_path):
    line = next(
        text
        for path in sorted(ILLEGAL.glob("*.log"))
        for text in path.read_text(encoding="utf-8").splitlines()
        if "an illegal memory access was encountered" in text
    )
    record = json.dumps({"log": line + " \ud83d\n", "stream": "stderr"})  # ensure_ascii: \ud83d
    path = tmp_path / "container-json.log"
    path.write_text(record + "\n", encoding="utf-8")
    result = _explain([str(path), "--json"])
    assert "internal error" not in result.stderr.decode(), result.stderr.decode()
    assert json.loads(result.stdout)["matches"][0]["id"] == "illegal-memory-access"


def test_json_record_keeps_its_error_field(tmp_path):
    raw = CONTAINERD.read_text(encoding="utf-8").splitlines()[1]  # level=error msg=... error=...
    fields = dict(token.partition("=")[::2] for token in shlex.split(raw))
    assert set(fields) == {"level", "msg", "error"}
    record = json.dumps(fields)  # containerd's --log-format json writes the same three fields
    as_logfmt = tmp_path / "containerd.log"
    as_logfmt.write_text(raw + "\n", encoding="utf-8")
    as_json = tmp_path / "containerd.json"
    as_json.write_text(record + "\n", encoding="utf-8")
    logfmt = json.loads(_explain([str(as_logfmt), "--json"]).stdout)
    assert logfmt["matches"] and logfmt["matches"][0]["id"] == "image-pull-slow"
    result = json.loads(_explain([str(as_json), "--json"]).stdout)
    salient = " ".join(s["text"] for s in result["salient"])
    evidence = " ".join(e["text"] for m in result["matches"] for e in m["evidence"])
    assert "context canceled" in salient + evidence
    assert result["matches"] and result["matches"][0]["id"] == "image-pull-slow"


def test_compose_prefixed_json_record_is_read_as_its_message(tmp_path):
    lines = (
        (RUNBOOKS / "host-oom-killer" / "vllm-v0-killed-after-gpu-blocks-got-ocr.log")
        .read_text(encoding="utf-8")
        .splitlines()
    )
    records = [
        "vllm-1  | " + json.dumps({"log": line + "\n", "stream": "stderr"}) for line in lines
    ]
    path = tmp_path / "compose.log"
    path.write_text("\n".join(records) + "\n", encoding="utf-8")
    result = json.loads(_explain([str(path), "--json"]).stdout)
    assert [s["text"] for s in result["salient"]] == ["Killed"]


def test_pod_json_of_an_oomkilled_pod_names_k8s_oomkilled():
    pod = ROOT / "tests" / "fixtures" / "k8s" / "pod-vllm-7b-oomkilled.json"
    result = _explain(["-", "--json"], stdin=pod.read_bytes())
    top = json.loads(result.stdout)["matches"][0]
    assert top["id"] == "k8s-oomkilled"


def test_journald_byte_array_message_is_read(tmp_path):
    line = (
        (RUNBOOKS / "nvml-driver-library-mismatch" / "pynvml-librmversionmismatch-dask-cuda949.log")
        .read_text(encoding="utf-8")
        .splitlines()[0]
    )
    message = list(("\x1b[0;31m" + line + "\x1b[0m").encode())
    path = tmp_path / "journal.json"
    path.write_text(json.dumps({"_SYSTEMD_UNIT": "vllm.service", "MESSAGE": message}) + "\n")
    result = json.loads(_explain([str(path), "--json"]).stdout)
    assert result["matches"] and result["matches"][0]["id"] == "nvml-driver-library-mismatch"


def test_enforce_eager_on_the_command_line_does_not_outrank_a_crash(tmp_path):
    command = (
        RUNBOOKS
        / "enforce-eager-in-production"
        / "vllm-serve-tp2-enforce-eager-very-slow-arena-hard-auto81.log"
    ).read_text(encoding="utf-8")
    killed = (
        RUNBOOKS / "host-oom-killer" / "vllm-v0-killed-after-gpu-blocks-got-ocr.log"
    ).read_text(encoding="utf-8")
    path = tmp_path / "paste.log"
    path.write_text(command + killed, encoding="utf-8")
    result = json.loads(_explain([str(path), "--json"]).stdout)
    closest = (result["matches"] or result["below_threshold"])[0]
    assert closest["id"] == "host-oom-killer"


def test_independent_split_knows_non_issue_sources(tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "qa4_explain_accuracy", ROOT / "benchmarks" / "explain_accuracy.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    url = (
        "https://github.com/kagaho/Build-Jetson-Container-VLLM-0.10.2/blob/"
        "6064fcee0d47c682135c177be8d739770f3b864f/README.md"
    )
    runbook_sources = RUNBOOKS / "enforce-eager-in-production" / "SOURCES.md"
    assert url in runbook_sources.read_text(encoding="utf-8")
    corpus = tmp_path / "corpus"  # a stand-in corpus: one row citing that same README
    corpus.mkdir()
    row = f"| enforce-eager-in-production/x.log | enforce-eager-in-production | {url} | same page |"
    (corpus / "SOURCES.md").write_text(row + "\n", encoding="utf-8")
    assert "enforce-eager-in-production/x.log" in module.shared_excerpts(corpus)
