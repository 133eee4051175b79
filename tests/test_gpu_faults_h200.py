"""Real GPU faults provoked on the project's lent H200 (2026-12-04; tests/fixtures/gpu-faults-h200/,
SOURCES.md there): what PyTorch 2.11, CuPy, Triton 3.6 and CUDA 13.0's nvcc/ptxas printed for
faults whose cause is known by construction, the driver's Xid lines they left in the kernel log,
and `llmdoctor node --json` run live after them.

Explain must name the cause each fault was made from, or, for the one no entry covers (a generic
device-side assert), name nothing rather than a wrong cause; the node command replayed from the
captured kernel log and nvidia-smi XML must reach the verdicts it printed live."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_node_checks import facts_with

from llmdoctor.engine.textsource import TextSource
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


def test_an_index_assert_no_entry_covers_names_no_cause(entries):
    # PyTorch's generic `index out of bounds` device-side assert: which index, and why, is in
    # the program, not in the log; a confident entry would be a guess
    first = first_match("fault-index-assert.log", entries)
    assert first is None


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
