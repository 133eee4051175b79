"""memory-fragmentation on real OOM lines: no verdict without numbers, no "no OOM" for unread logs."""

from __future__ import annotations

import gzip
from pathlib import Path

from example_bundles import bundle_report, by_check

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
    # the OOM is what is known: fragmentation, the runbook that would explain it, is named in
    # the summary but is no runbook of the finding (a headline named it the root cause)
    assert f.runbooks == ["cuda-oom-runtime"] and "gpu-memory-fragmentation" in f.summary
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
    # the binary log may hold the OOM: a note, never among the checks called fine
    assert f.severity == "info"
    assert "in 1 log(s)" in f.summary and "(1 not read: not text)" in f.summary
    assert "logs/sidecar.log is binary data" in f.evidence[0]["text"]


def test_an_empty_log_is_not_a_log_without_oom(tmp_path):
    # an empty vllm.log was "no CUDA out-of-memory message in 1 log(s)": nothing was seen
    empty = tmp_path / "vllm.log"
    empty.write_text("")
    found, skipped = fragmentation({"vllm": empty})
    assert found == []
    assert "is empty" in skipped["memory-fragmentation"]
    # beside a log with text, the empty one is named as not read, the other one checked
    (f,), _ = fragmentation({"vllm": HEALTHY, "sidecar": empty})
    assert f.severity == "ok" and "in 1 log(s)" in f.summary
    assert "logs/sidecar.log is empty" in f.evidence[0]["text"]
    assert "(1 empty)" in f.summary and "not read" not in f.summary  # never "not read" by a ✓
    # and a container log's binary data is not called a kernel log
    blob = tmp_path / "blob.log"
    blob.write_bytes(bytes(range(256)) * 64)
    _, skipped = fragmentation({"vllm": blob})
    assert "is binary data" in skipped["memory-fragmentation"]
    assert "kernel" not in skipped["memory-fragmentation"]


def test_kernel_memcg_oom_is_not_a_cuda_oom():
    line = "[18026.221140] Memory cgroup out of memory: Killed process 140339 (python3)"
    assert parse_torch_oom(line) is None


EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "bundles"


def test_oom_finding_names_the_container_and_says_why_free_memory_did_not_help(capsys):
    # "tried 1.16 GiB with 1.17 GiB free" reads as a contradiction without the last clause;
    # the subject is the container, as pod-restarts names it (was "vllm.previous")
    (oom,) = by_check(
        bundle_report(capsys, EXAMPLES / "crashloop-cuda-oom"), "memory-fragmentation"
    )
    assert oom["subject"] == "container vllm (previous run)"
    assert "tried 1.16 GiB with 1.17 GiB free of 7.75 GiB" in oom["summary"]
    assert "the GPU is full" in oom["summary"]


def _issue13152_oom_with(unallocated: str) -> str:
    """The real issue-13152 OOM line (1.33 GiB tried, 1.17 GiB free of 79.15 GiB) with its
    reserved-but-unallocated figure rewritten."""
    line = next(ln for ln in SHORTAGE.read_text().splitlines() if "Tried to allocate" in ln)
    assert "488.05 MiB is reserved by PyTorch but unallocated" in line
    return line.replace("488.05 MiB is reserved", f"{unallocated} is reserved") + "\n"


def test_one_oom_is_told_one_way_by_both_checks_and_explain(entries):
    # 1.20 GiB reserved but unallocated (1.5 % of the GPU): the fragmentation entry's signature
    # fires on any GiB figure, the check's numbers say shortage. Before, log-signatures named
    # fragmentation as the root cause with the check's "not fragmentation" folded under it
    from llmdoctor.triage.explain import explain

    short = _issue13152_oom_with("1.20 GiB")
    facts = Facts({"time/now": 0, "target": "pod/vllm"})
    facts.set("logs/vllm.log", TextSource.from_text("logs/vllm.log", short))
    facts.set("wiki/entries", entries)
    both = ["memory-fragmentation", "log-signatures"]
    report = diagnose([facts], "pod/vllm", scopes=("logs",), only=both)
    named = {r for f in report.findings for r in f.runbooks}
    assert "gpu-memory-fragmentation" not in named, named
    (frag,) = [f for f in report.findings if f.check == "memory-fragmentation"]
    assert "not fragmentation" in frag.summary
    # log-signatures's OOM finding is the check's now (superseded: one problem, once)
    assert all(f.runbooks == ["cuda-oom-runtime"] for f in report.findings)
    result = explain(TextSource.from_text("paste", short), entries)
    assert result.matches[0].id == "cuda-oom-runtime"
    assert "gpu-memory-fragmentation" not in {m.id for m in result.matches}
    assert all("gpu-memory-fragmentation" not in m.explained_by for m in result.matches)
    # 2.00 GiB (2.5 %): fragmentation, told so by all three
    fragmented = _issue13152_oom_with("2.00 GiB")
    (frag,), _ = fragmentation({"vllm": fragmented})
    assert frag.runbooks == ["gpu-memory-fragmentation"]
    assert explain(TextSource.from_text("paste", fragmented), entries).matches[0].id == (
        "gpu-memory-fragmentation"
    )


# vLLM's free-memory check as a reporter wrapped it (round 30: LeaderWorkerSet EP16 on B200, 4.11
# of 178.35 GiB in use at --gpu-memory-utilization 0.98) and one that another process explains
# (issue 23192: 7.34 of 139.72 GiB free on an H200)
EP16_CHECK = (
    FIXTURES / "explain_fresh" / "round30" / "vllm-startup-memory-insufficient"
) / "r30-k8s-lws-ep16-decode-util-098.log"
TAKEN_CHECK = FIXTURES / "runbooks" / "gpu-memory-taken-by-other-process"
TAKEN_CHECK = TAKEN_CHECK / "vllm-free-memory-h200-issue23192.log"


def test_the_free_memory_check_is_read_by_its_numbers():
    from llmdoctor.parsers.vllm_memory_check import parse_free_memory_check

    ep16 = parse_free_memory_check(" ".join(EP16_CHECK.read_text().splitlines()[:3]))
    assert ep16 is not None and ep16.utilization == 0.98 and ep16.own_overhead_only
    taken = [parse_free_memory_check(line) for line in TAKEN_CHECK.read_text().splitlines()]
    assert [c.own_overhead_only for c in taken if c is not None] == [False]
    # the first line alone (wrapped by hand) and numbers that are none are no reading
    assert parse_free_memory_check(EP16_CHECK.read_text().splitlines()[0]) is None
    cut = "Free memory on device (1.2.3/22.05 GiB) on startup is less than desired GPU memory "
    assert parse_free_memory_check(cut + "utilization (0.9, 19.84 GiB)") is None


def test_a_free_memory_check_with_little_in_use_is_told_by_the_start_up_entry(entries):
    # 4.11 GiB in use is what the ranks' own CUDA context, NCCL and EFA hold: the utilization
    # asked too much; before, gpu-memory-taken-by-other-process was the only reading
    from llmdoctor.triage.explain import explain

    wrapped = EP16_CHECK.read_text()
    one_line = " ".join(wrapped.splitlines()[:3]) + "\n"
    for text in (wrapped, one_line):
        result = explain(TextSource.from_text("paste", text), entries)
        first = result.matches[0]
        assert first.id == "vllm-startup-memory-insufficient", result.matches
        assert first.lines_of == "gpu-memory-taken-by-other-process"
        assert first.fix_steps[0].text.startswith("`Free memory on device … on startup"), first
        assert "gpu-memory-taken-by-other-process" not in {m.id for m in result.matches}
    facts = Facts({"time/now": 0, "target": "pod/vllm"})
    facts.set("logs/vllm.log", TextSource.from_text("logs/vllm.log", one_line))
    facts.set("wiki/entries", entries)
    report = diagnose([facts], "pod/vllm", scopes=("logs",), only=["log-signatures"])
    assert [f.runbooks for f in report.findings] == [["vllm-startup-memory-insufficient"]]
    # 132 GiB in use by something else: memory taken, as before
    result = explain(TextSource.from_text("paste", TAKEN_CHECK.read_text()), entries)
    assert result.matches[0].id == "gpu-memory-taken-by-other-process", result.matches


def test_a_wrapped_check_behind_a_collectors_prefix_is_read_whole(entries):
    # a hostile pass: `kubectl logs --timestamps` before each wrapped line, a wrap inside the
    # parentheses and a blank line between: read as memory taken at confidence 1.00 before
    from llmdoctor.triage.explain import explain

    lines = EP16_CHECK.read_text().splitlines()
    stamped = [f"2026-12-06T10:00:05.123456789Z {line}" for line in lines]
    inside = [lines[0] + " GPU memory utilization (0.98,", "174.78 GiB). Decrease", *lines[2:]]
    blank = [lines[0], "", *lines[1:]]
    for paste in (stamped, inside, blank):
        result = explain(TextSource.from_text("paste", "\n".join(paste) + "\n"), entries)
        assert result.matches[0].id == "vllm-startup-memory-insufficient", (paste, result.matches)
