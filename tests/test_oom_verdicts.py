"""memory-fragmentation on real OOM lines: no verdict without numbers, no "no OOM" for unread logs."""

from __future__ import annotations

import gzip
from pathlib import Path

from llmdoctor.engine.facts import Facts
from llmdoctor.engine.textsource import TextSource
from llmdoctor.parsers.torch_oom import parse_torch_oom
from llmdoctor.usecases.diagnose import diagnose

FIXTURES = Path(__file__).parent / "fixtures"
NO_NUMBERS = FIXTURES / "oom" / "cuda-runtime-oom-without-numbers-wanvideowrapper565.log"
SHORTAGE = FIXTURES / "logs" / "vllm-v0-async-engine-oom-under-benchmark-load-issue13152.log"
HEALTHY = FIXTURES / "k8s" / "logs" / "qwen2-7b-tp1-startup.log"


def fragmentation(files: dict[str, Path | bytes | str]):
    facts = Facts({"time/now": 0, "target": "pod/vllm"})
    for name, content in files.items():
        key = f"logs/{name}.log"
        if isinstance(content, Path):
            facts.set(key, TextSource.from_file(key, content))
        elif isinstance(content, bytes):
            facts.set(key, TextSource.from_text(key, content.decode("utf-8", "replace")))
        else:
            facts.set(key, TextSource.from_text(key, content))
    report = diagnose([facts], "pod/vllm", scopes=("logs",), only=["memory-fragmentation"])
    return report.findings, {s["check"]: s["reason"] for s in report.skipped}


def test_cuda_runtime_oom_without_numbers_is_an_oom_but_no_verdict():
    # before: the line was not an OOM at all, and the check said "no CUDA out-of-memory message"
    (f,), _ = fragmentation({"vllm": NO_NUMBERS})
    assert f.severity == "critical"
    assert "cannot be told" in f.summary and "not fragmentation" not in f.summary
    assert f.runbooks == ["cuda-oom-runtime", "gpu-memory-fragmentation"]
    assert f.evidence[0]["line"] == 1


def test_torch_oom_cut_before_its_numbers_is_not_called_a_shortage():
    # the real issue-13152 line cut after "Tried to allocate 1.33 GiB." (a truncated log line);
    # before: "a real shortage, not fragmentation" with "? GiB free of ? GiB"
    full = next(ln for ln in SHORTAGE.read_text().splitlines() if "Tried to allocate" in ln)
    cut = full[: full.index("GiB.") + 4]
    assert parse_torch_oom(cut).tried is not None and not parse_torch_oom(cut).has_numbers
    (f,), _ = fragmentation({"vllm": cut + "\n"})
    assert "tried 1.33 GiB" in f.summary and "cannot be told" in f.summary
    assert "shortage, not fragmentation" not in f.summary and "?" not in f.summary


def test_full_numbers_still_give_the_shortage_verdict():
    (f,), _ = fragmentation({"vllm": SHORTAGE})
    assert f.runbooks == ["cuda-oom-runtime"] and "not fragmentation" in f.summary


def test_a_compressed_log_is_not_counted_as_a_log_without_oom(tmp_path):
    # a rotated vllm.log.1 that is gzip: before, "no CUDA out-of-memory message in 1 log(s)"
    packed = tmp_path / "vllm.log"
    packed.write_bytes(gzip.compress(SHORTAGE.read_bytes()))
    found, skipped = fragmentation({"vllm": packed})
    assert found == []
    assert "gzip-compressed" in skipped["memory-fragmentation"]


def test_binary_and_text_logs_together_say_which_was_not_read(tmp_path):
    blob = tmp_path / "blob.log"
    blob.write_bytes(bytes(range(256)) * 64)
    (f,), _ = fragmentation({"vllm": HEALTHY, "sidecar": blob})
    assert f.severity == "ok"
    assert "in 1 log(s)" in f.summary and "1 not text" in f.summary
    assert "logs/sidecar.log is binary data" in f.evidence[0]["text"]


def test_kernel_memcg_oom_is_not_a_cuda_oom():
    line = "[18026.221140] Memory cgroup out of memory: Killed process 140339 (python3)"
    assert parse_torch_oom(line) is None
