"""Real GPU faults provoked on the project's lent H200 (2026-12-04; tests/fixtures/gpu-faults-h200/,
SOURCES.md there): what PyTorch 2.11, CuPy, Triton 3.6 and CUDA 13.0's nvcc/ptxas printed for
faults whose cause is known by construction, the driver's Xid lines they left in the kernel log,
and `llmdoctor node --json` run live after them.

Explain must name the cause each fault was made from, or, for those no entry covers (two
device-side asserts), name nothing rather than a wrong cause; the node command replayed from the
captured kernel log and nvidia-smi XML must reach the verdicts it printed live."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_node_checks import facts_with

from llmdoctor.engine.textsource import TextSource
from llmdoctor.render.report import to_json
from llmdoctor.triage.explain import explain
from llmdoctor.usecases.diagnose import diagnose

FAULTS = Path(__file__).parent / "fixtures" / "gpu-faults-h200"

# each capture and the entry of the cause it was provoked with (tests/fixtures/capture/)
CAUSES = {
    "fault-no-gpu.log": "gpu-not-visible",  # CUDA_VISIBLE_DEVICES=""
    "fault-bad-ordinal.log": "gpu-not-visible",  # cuda:N past the last GPU
    "fault-illegal-address.log": "illegal-memory-access",  # a write 1 TiB past a tensor
    "fault-trap.log": "illegal-memory-access",  # a kernel that traps: unspecified launch failure
    "fault-multinomial-nan.log": "nan-or-garbage-output",  # sampling from NaN probabilities
    "fault-embedding-assert.log": "embedding-index-out-of-range",  # an nn.Embedding given an id past its rows
    "fault-no-kernel-image.log": "no-kernel-image",  # an sm_80 cubin on sm_90
    "fault-ptx-too-new.log": "no-kernel-image",  # compute_100 PTX JIT-compiled on sm_90
    "fault-triton-smem.log": "triton-shared-memory-exceeded",  # 640 KiB of tiles, 227 KiB per SM
    "ptxas-bf16-sm75.log": "unsupported-quantization-or-dtype",  # bf16 for Turing
    "ptxas-fp8-sm80.log": "unsupported-quantization-or-dtype",  # FP8 for Ampere
    "ptxas-wgmma-sm80.log": "no-kernel-image",  # Hopper's wgmma built for sm_80
    "nvcc-sm70.log": "no-kernel-image",  # CUDA 13 dropped Volta
}


def first_match(name: str, entries):
    result = explain(TextSource.from_file(name, FAULTS / name), entries)
    return result.matches[0] if result.matches else None


@pytest.mark.parametrize(("name", "cause"), sorted(CAUSES.items()))
def test_explain_names_the_cause_each_real_fault_was_made_from(entries, name, cause):
    first = first_match(name, entries)
    assert first is not None and first.id == cause, (name, first and first.id)


@pytest.mark.parametrize(
    ("name", "how"),
    [
        ("fault-bad-ordinal.log", "signature"),
        ("fault-triton-smem.log", "signature"),
        ("ptxas-fp8-sm80.log", "signature"),
        ("ptxas-wgmma-sm80.log", "signature"),
        ("nvcc-sm70.log", "signature"),
    ],
)
def test_the_wordings_this_capture_added_are_signatures_not_guesses(entries, name, how):
    first = first_match(name, entries)
    assert first.how == how and first.confidence >= 0.9


def test_a_device_side_assert_no_entry_covers_names_no_cause(entries):
    # PyTorch's generic `index out of bounds`: which index, and why, is in the program; a
    # confident entry would be a guess (an embedding lookup past its rows has its own assert,
    # `srcIndex < srcSelectDimSize`, and entry: embedding-index-out-of-range)
    assert first_match("fault-index-assert.log", entries) is None


def test_the_h200_fault_logs_carry_the_real_wordings():
    text = {name: (FAULTS / name).read_text() for name in CAUSES}
    assert "CUDA error: invalid device ordinal" in text["fault-bad-ordinal.log"]
    assert (
        "GPU device may be out of range, do you have enough GPUs?" in text["fault-bad-ordinal.log"]
    )
    assert "Hardware limit: 232448" in text["fault-triton-smem.log"]
    assert "Feature 'cvt with .e4m3x2/.e5m2x2' requires .target sm_89" in text["ptxas-fp8-sm80.log"]
    assert "Unsupported gpu architecture 'sm_70'" in text["nvcc-sm70.log"]
    versions = (FAULTS / "versions.txt").read_text().split()
    assert versions == ["2.11.0+cu130", "13.0", "3.6.0", "14.2.0"]


def node_after_faults():
    facts = facts_with(
        smi="../gpu-faults-h200/nvidia-smi-after.xml",
        kernel="../gpu-faults-h200/dmesg-after-two-fault-runs.txt",
        versions="h200-torch2.11.0-cu130-driver580.159.04.json",
    )
    return diagnose([facts], "node", scopes=("node", "logs"))


def test_the_node_replayed_reaches_the_xid_verdicts_it_printed_live():
    live = json.loads((FAULTS / "node-after-faults.json").read_text())
    live_xid = [
        (f["severity"], f["subject"], f["summary"]) for f in live["findings"] if f["check"] == "xid"
    ]
    report = node_after_faults()
    replayed = [
        (f.severity.value, f.subject, f.summary) for f in report.findings if f.check == "xid"
    ]
    assert replayed == live_xid
    assert live["status"] == "warning"
    # the app's own faults: a warning to restart the app, never the GPU's hardware
    assert [f for f in report.findings if f.severity.value == "critical"] == []
    (health,) = [f for f in report.findings if f.check == "gpu-health"]
    assert health.severity.value == "ok"


def test_the_xid_lines_name_each_faulting_process():
    report = node_after_faults()
    by_code = {f.summary.split(":")[0]: f for f in report.findings if f.check == "xid"}
    assert set(by_code) == {"Xid 31", "Xid 43"}
    assert "2 times" in by_code["Xid 31"].summary and "8 times" in by_code["Xid 43"].summary
    processes = [
        e["text"] for f in by_code.values() for e in f.evidence if "processes:" in e["text"]
    ]
    assert processes[0] == "processes: python3 (pid 612), python3 (pid 1101)"
    assert "python3 (pid 637)" in processes[1] and "python3 (pid 1207)" in processes[1]


XID79 = (
    "[{when}] NVRM: Xid (PCI:0000:00:06): 79, pid='<unknown>', name=<unknown>, "
    "GPU has fallen off the bus.\n"
)  # the driver's wording (tests/fixtures/kernel/xid79-journal-595-ogkm1151.log), dated here


def node_with_xid79(tmp_path, when: str, first: bool):
    kernel = (FAULTS / "dmesg-after-two-fault-runs.txt").read_text()
    line = XID79.format(when=when)
    (tmp_path / "kernel.log").write_text(line + kernel if first else kernel + line)
    facts = facts_with(
        smi="../gpu-faults-h200/nvidia-smi-after.xml",
        kernel=str(tmp_path / "kernel.log"),
        versions="h200-torch2.11.0-cu130-driver580.159.04.json",
    )
    return diagnose([facts], "node", scopes=("node", "logs"))


def _xid(report, code: str):
    return next(f for f in report.findings if f.check == "xid" and f.summary.startswith(code))


def test_a_gpu_that_fell_off_the_bus_after_the_apps_faulted_explains_none_of_those_faults(
    tmp_path,
):
    # the applications' Xid 31 and 43 came at 18:34-18:36; the GPU fell off at 19:03: those
    # faults are their own story, not what the lost GPU did
    report = node_with_xid79(tmp_path, "Fri Dec  4 19:03:06 2026", first=False)
    fell, fault = _xid(report, "Xid 79"), _xid(report, "Xid 31")
    assert fell.severity.value == "critical" and fell.explained_by == []
    assert fault not in fell.explains and fault.explained_by == []


def test_a_gpu_that_fell_off_the_bus_first_explains_the_faults_after_it(tmp_path):
    report = node_with_xid79(tmp_path, "Fri Dec  4 18:30:00 2026", first=True)
    fell, fault = _xid(report, "Xid 79"), _xid(report, "Xid 31")
    assert fault.explained_by == [fell]


def test_json_names_each_explaining_finding_once():
    # two Xid codes of one GPU are both {"check": "xid", "subject": "GPU 0 …"}: said once
    data = to_json(node_after_faults())
    xid43 = next(f for f in data["findings"] if f["summary"].startswith("Xid 43"))
    assert xid43["explained_by"] == [{"check": "xid", "subject": "GPU 0 (0000:00:06.0)"}]


def test_a_consequences_own_traceback_header_is_no_likely_cause_of_it(entries):
    # the H200's real `invalid device ordinal`, logged as vLLM's worker logs a failed start
    # (the header and frames of tests/fixtures/explain_fresh/round12/fabric-manager-not-running/
    # r12-c6-hfjobs-h200-802.log): "WorkerProc failed to start." heads the very traceback that
    # ends in the error; it is no error before it (a hostile pass: "Likely cause: … WorkerProc
    # failed to start.")
    tag = "(Worker pid=1332) ERROR 04-20 11:52:25 [multiproc_executor.py:870] "
    torch_lines = (FAULTS / "fault-bad-ordinal.log").read_text().splitlines()[1:8]
    frames = [
        "WorkerProc failed to start.",
        "Traceback (most recent call last):",
        '  File ".../vllm/v1/executor/multiproc_executor.py", line 837, in worker_main',
        "    worker = WorkerProc(*args, **kwargs)",
        *torch_lines[1:],
    ]
    text = "".join(f"{tag}{line}\n" for line in frames)
    result = explain(TextSource.from_text("worker.log", text), entries)
    assert result.matches[0].id == "gpu-not-visible"
    assert result.likely_cause is None
