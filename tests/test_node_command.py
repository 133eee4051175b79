"""`llmdoctor node` end to end: files given by flag, example bundles, bad input, and a machine
without GPU, driver, torch or kernel log (nothing checked -> exit 3, never a traceback)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pynvml
import pytest

from llmdoctor.cli import run as cli_run
from llmdoctor.collectors import kernel_log

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
EXAMPLES = ROOT / "examples" / "bundles"


def llmdoctor(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "llmdoctor", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


def in_process(capsys, *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as done:
        cli_run(list(args))
    out = capsys.readouterr()
    return int(done.value.code), out.out, out.err


def test_node_help_lists_its_flags():
    result = llmdoctor("node", "--help")
    assert result.returncode == 0
    for flag in (
        "--python",
        "--nvidia-smi-xml",
        "--kernel-log",
        "--since",
        "--gpu-memory-utilization",
        "--dtype",
        "--quantization",
        "--bundle",
        "--json",
    ):
        assert flag in result.stdout


def test_node_on_this_machine_never_shows_a_traceback():
    # whatever this machine has (no GPU here; an H200 elsewhere), the report is clean
    result = llmdoctor("node", "--timeout", "20")
    assert result.returncode in (0, 1, 2, 3)
    assert "Traceback" not in result.stdout + result.stderr


def test_node_json_on_this_machine_follows_the_contract():
    result = llmdoctor("node", "--json", "--timeout", "20")
    doc = json.loads(result.stdout)
    assert doc["schema"] == "llmdoctor/2" and doc["target"] == "node"
    assert doc["status"] in ("ok", "warning", "critical", "unknown")
    reported = {f["check"] for f in doc["findings"]} | {s["check"] for s in doc["skipped"]}
    assert {"xid", "gpu-memory", "driver-cuda", "gpu-health", "nvml-status"} <= reported


def test_files_given_by_flag_are_checked(capsys, monkeypatch):
    # the Dell XE9680 Xid 119 log and a real T4 capture; the bf16 flag cannot run on a T4
    monkeypatch.setattr(pynvml, "nvmlInit", _no_nvml)
    code, out, _ = in_process(
        capsys,
        "node",
        "--json",
        "--python",
        sys.executable,
        "--nvidia-smi-xml",
        str(FIXTURES / "nvidia-smi/tesla-t4-515.105.01.xml"),
        "--kernel-log",
        str(FIXTURES / "kernel/xid119-gsp-rpc-timeout-dell-xe9680.log"),
        "--dtype",
        "bfloat16",
    )
    doc = json.loads(out)
    assert code == 2 and doc["status"] == "critical"
    by_check = {f["check"]: f for f in doc["findings"] if f["severity"] == "critical"}
    assert by_check["xid"]["runbooks"] == ["gsp-timeout"]
    assert by_check["dtype-support"]["runbooks"] == ["unsupported-quantization-or-dtype"]


def _no_nvml():
    raise pynvml.NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)


def test_no_driver_and_nothing_else_readable_warns_with_the_reasons(capsys, monkeypatch, tmp_path):
    # no NVML, no nvidia-smi, no python, no dmesg/journalctl, no kern.log: nothing may be called
    # healthy, and "no NVIDIA driver at all" on a GPU node is itself the finding (exit 1)
    monkeypatch.setattr(pynvml, "nvmlInit", _no_nvml)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(kernel_log, "TEXT_LOGS", (str(tmp_path / "kern.log"),))
    code, out, err = in_process(capsys, "node", "--no-color")
    assert code == 1
    assert "no NVIDIA driver on this machine" in out and "gpu-not-visible" in out
    assert "NVML library not found" in out and "kernel log not readable" in out
    assert "Traceback" not in out + err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--kernel-log", "/nonexistent/kern.log"],
            "--kernel-log /nonexistent/kern.log: no such file",
        ),
        (["--nvidia-smi-xml", "/nonexistent.xml"], "no such file"),
        (["--since", "yesterday"], "expected a duration"),
        (["--gpu-memory-utilization", "1.5"], "expected a fraction"),
        (["--python", "/nonexistent/python3"], "not found or not executable"),
    ],
)
def test_bad_input_is_one_line_and_exit_3(args, message):
    result = llmdoctor("node", *args)
    assert result.returncode == 3
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_since_filters_a_given_kernel_log(capsys, monkeypatch):
    # the 2025 Xid 119 lines are older than 1 hour: with --since they are out of the window
    monkeypatch.setattr(pynvml, "nvmlInit", _no_nvml)
    code, out, _ = in_process(
        capsys,
        "node",
        "--json",
        "--only",
        "xid",
        "--kernel-log",
        str(FIXTURES / "kernel/xid119-gsp-rpc-timeout-dell-xe9680.log"),
        "--since",
        "1h",
    )
    (finding,) = json.loads(out)["findings"]
    assert finding["severity"] == "ok" and code == 0


def test_example_bundle_xid79_is_critical_and_names_the_lost_gpu():
    result = llmdoctor("node", "--json", "--bundle", str(EXAMPLES / "xid79-gpu-fallen-off-bus"))
    doc = json.loads(result.stdout)
    assert result.returncode == 2
    xid = next(f for f in doc["findings"] if f["check"] == "xid")
    assert xid["severity"] == "critical" and xid["runbooks"] == ["xid-fallen-off-bus"]
    assert any("no longer see this GPU" in e["text"] for e in xid["evidence"])


def test_example_bundle_cu128_on_535_warns_about_the_driver():
    result = llmdoctor("node", "--json", "--bundle", str(EXAMPLES / "torch-cu128-on-driver-535"))
    doc = json.loads(result.stdout)
    assert result.returncode == 1
    driver = next(f for f in doc["findings"] if f["check"] == "driver-cuda")
    assert driver["severity"] == "warning" and driver["runbooks"] == ["driver-cuda-mismatch"]
    assert "570.26" in driver["summary"]
    skipped = {s["check"]: s["reason"] for s in doc["skipped"]}
    assert "Operation not permitted" in skipped["xid"]


def test_diagnose_runs_the_node_checks_on_a_bundle_too():
    result = llmdoctor("diagnose", "--json", "--bundle", str(EXAMPLES / "xid79-gpu-fallen-off-bus"))
    doc = json.loads(result.stdout)
    assert any(f["check"] == "xid" and f["severity"] == "critical" for f in doc["findings"])


def test_a_bundle_written_from_node_facts_replays_the_same_findings(tmp_path):
    # collect -> bundle -> replay: node/gpus.json and the XML round-trip, derived facts are rebuilt
    from llmdoctor.collectors.bundle import Bundle, write_bundle
    from llmdoctor.usecases.diagnose import diagnose

    src = Bundle(EXAMPLES / "xid79-gpu-fallen-off-bus")
    facts = src.to_facts()
    out = write_bundle(facts, tmp_path / "copy", target="node")
    first = diagnose(
        [Bundle(EXAMPLES / "xid79-gpu-fallen-off-bus").to_facts()], "n", scopes=("node",)
    )
    again = diagnose([Bundle(out).to_facts()], "n", scopes=("node",))
    assert [(f.check, f.severity, f.summary) for f in first.findings] == [
        (f.check, f.severity, f.summary) for f in again.findings
    ]


# -- --kernel-log / --nvidia-smi-xml: say what a path that is not a file is; bounded reading ---


def _node_capped(*args: str, memory: int = 1024**3) -> subprocess.CompletedProcess:
    """`llmdoctor node ARGS` with its address space capped: an unbounded read dies there."""
    import resource

    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    return subprocess.run(
        [sys.executable, "-m", "llmdoctor", "node", *args],
        capture_output=True, text=True, timeout=120, preexec_fn=cap, cwd=ROOT,
    )  # fmt: skip


@pytest.mark.parametrize("option", ["--kernel-log", "--nvidia-smi-xml"])
@pytest.mark.parametrize("kind", ["device", "fifo", "folder"])
def test_a_path_that_is_not_a_file_is_named_for_what_it_is(tmp_path, option, kind):
    path = {"device": "/dev/zero", "fifo": str(tmp_path / "pipe"), "folder": str(tmp_path)}[kind]
    if kind == "fifo":
        os.mkfifo(path)
    said = {"device": "is a device", "fifo": "is a named pipe (FIFO)", "folder": "is a folder"}
    run = _node_capped(option, path, "--only", "xid")
    assert run.returncode == 3, run.stderr
    assert run.stderr.strip().count("\n") == 0 and f"{option} {path}: {said[kind]}" in run.stderr


def test_an_nvidia_smi_xml_over_the_cap_is_refused_in_one_line(tmp_path):
    xml = tmp_path / "smi.xml"
    with open(xml, "wb") as fh:
        fh.truncate(65 * 1024**2)  # sparse: no disk used
    run = _node_capped("--nvidia-smi-xml", str(xml), "--only", "xid")
    assert run.returncode == 3, run.stderr
    assert run.stderr.strip().count("\n") == 0 and "over the 64 MiB cap" in run.stderr


def test_a_huge_kernel_log_of_one_endless_line_is_not_read_whole_with_since(tmp_path):
    log = tmp_path / "kernel.log"
    with open(log, "wb") as fh:
        fh.write(b"[Sun Feb 23 16:24:18 2025] NVRM: loading\n")
        fh.truncate(1536 * 1024**2)  # sparse: 1.5 GiB of NUL bytes without a newline
    run = _node_capped(  # (--timeout: the 10 s default is short on a loaded 2-core machine)
        "--kernel-log", str(log), "--since", "7d", "--only", "xid", "--json", "--timeout", "60"
    )
    assert "Traceback" not in run.stderr and "internal error" not in run.stderr, run.stderr
    assert run.returncode in (0, 1, 2), run.stderr
