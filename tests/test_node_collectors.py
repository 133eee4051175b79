"""Node collectors against their real boundaries: dmesg/journalctl/nvidia-smi/python executables
(stand-ins on PATH print what the real tools print), the probe script in a real interpreter, and
the node target as a whole. Every failure must become a reason, never an exception or a hang.
"""

from __future__ import annotations

import os
import shutil
import stat
import sys
import time
from pathlib import Path

import pytest

from llmdoctor.collectors import kernel_log
from llmdoctor.collectors.kernel_log import collect_kernel_log, keep_since, line_time
from llmdoctor.collectors.nvidia_smi import collect_nvidia_smi
from llmdoctor.collectors.serving_env import PROBE, collect_serving_env, parse_probe_output
from llmdoctor.engine.collect import CollectContext
from llmdoctor.engine.facts import Missing
from llmdoctor.engine.textsource import TextSource

FIXTURES = Path(__file__).parent / "fixtures"
SLEEP, CAT = shutil.which("sleep"), shutil.which("cat")


def tool(folder: Path, name: str, script: str) -> Path:
    """An executable stand-in for a system tool (the boundary llmdoctor calls), on PATH."""
    path = folder / name
    path.write_text("#!/bin/sh\n" + script + "\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


@pytest.fixture
def bare_path(tmp_path, monkeypatch):
    """PATH holds only the stand-ins a test writes; no text logs exist."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setattr(kernel_log, "TEXT_LOGS", (str(tmp_path / "kern.log"),))
    return bin_dir


def ctx(timeout: float = 5.0, **options) -> CollectContext:
    return CollectContext(target=None, timeout=timeout, options=options)


# --- kernel log -------------------------------------------------------------------------------


def test_kernel_log_file_is_streamed_from_disk_not_loaded():
    path = FIXTURES / "kernel" / "xid119-gsp-rpc-timeout-dell-xe9680.log"
    got = collect_kernel_log(ctx(kernel_log=str(path)))
    source = got["node/kernel.log"]
    assert isinstance(source, TextSource) and source.path == path and source.text is None
    assert "--kernel-log" in got["node/kernel-log-source"]


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("[Sun Feb 23 16:24:18 2025] NVRM: Xid ...", "2025-02-23 16:24:18"),  # dmesg -T
        ("2025-05-18T19:02:39+0000 host kernel: NVRM", "2025-05-18 19:02:39"),  # short-iso
        ("May 18 19:02:39 kernel: NVRM: Xid", "2025-05-18 19:02:39"),  # syslog, year from now
        ("               NVRM: fallen off the bus", None),  # continuation line
    ],
)
def test_kernel_line_timestamps_in_each_format(line, expected):
    from datetime import datetime

    now = datetime(2025, 6, 1).timestamp()
    stamp = line_time(line, now)
    assert (stamp and datetime.fromtimestamp(stamp).strftime("%Y-%m-%d %H:%M:%S")) == expected or (
        stamp is None and expected is None
    )


def test_since_keeps_recent_lines_and_their_continuations(tmp_path):
    # the two Xid 119 bursts are minutes apart; a cutoff between them keeps only the later one,
    # and the stack lines without their own timestamp stay with their message
    src = FIXTURES / "kernel" / "xid119-gsp-rpc-timeout-dell-xe9680.log"
    from datetime import datetime

    cutoff = datetime(2025, 2, 23, 16, 27, 0).timestamp()
    dst = tmp_path / "kept.log"
    kept = keep_since(src, dst, cutoff, now=cutoff + 3600)
    lines = dst.read_text().splitlines()
    assert kept == 2 and all("16:27:12" in lines[0] or "16:30:13" in t for t in lines)


def test_dmesg_permission_denied_says_how_to_get_the_log(bare_path):
    # util-linux dmesg's real message when kernel.dmesg_restrict=1 and we lack CAP_SYSLOG
    tool(
        bare_path,
        "dmesg",
        'echo "dmesg: read kernel buffer failed: Operation not permitted" >&2; exit 1',
    )
    tool(
        bare_path,
        "journalctl",
        'echo "No journal files were opened due to insufficient permissions." >&2; exit 1',
    )
    got = collect_kernel_log(ctx())
    why = got["node/kernel.log"]
    assert isinstance(why, Missing)
    assert "Operation not permitted" in why.reason and "CAP_SYSLOG" in why.reason
    assert "insufficient permissions" in why.reason
    assert "kubectl debug node/NODE" in why.reason and "--kernel-log" in why.reason


def test_journalctl_is_used_when_dmesg_is_refused(bare_path):
    tool(
        bare_path,
        "dmesg",
        'echo "dmesg: read kernel buffer failed: Operation not permitted" >&2; exit 1',
    )
    xid = (FIXTURES / "kernel" / "xid79-journal-595-ogkm1151.log").read_text()
    tool(bare_path, "journalctl", f"{CAT} <<'EOF'\n{xid}EOF")
    got = collect_kernel_log(ctx())
    assert got["node/kernel-log-source"].startswith("journalctl -k")
    assert "Xid (PCI:0000:2b:00): 79" in got["node/kernel.log"].read_text()


def test_a_hanging_dmesg_is_cut_off_by_the_timeout(bare_path):
    tool(bare_path, "dmesg", f"{SLEEP} 30")
    started = time.monotonic()
    got = collect_kernel_log(ctx(timeout=2.0))
    assert time.monotonic() - started < 10
    assert "timed out" in got["node/kernel.log"].reason


def test_no_tools_at_all_is_a_reason_too(bare_path):
    why = collect_kernel_log(ctx())["node/kernel.log"]
    assert "dmesg: not installed" in why.reason and "not present" in why.reason


# --- nvidia-smi -------------------------------------------------------------------------------


def test_nvidia_smi_xml_file_is_read():
    path = FIXTURES / "nvidia-smi" / "l4x2-555.42.06.xml"
    got = collect_nvidia_smi(ctx(nvidia_smi_xml=str(path)))
    assert got["node/nvidia-smi.xml"].startswith("<?xml")


def test_nvidia_smi_driver_library_mismatch_is_its_reason(bare_path):
    # nvidia-smi's real output when the kernel module and user-space library differ
    tool(
        bare_path,
        "nvidia-smi",
        'echo "Failed to initialize NVML: Driver/library version mismatch"; '
        'echo "NVML library version: 580.178"; exit 18',
    )
    why = collect_nvidia_smi(ctx())["node/nvidia-smi.xml"]
    assert "Driver/library version mismatch" in why.reason


def test_nvidia_smi_missing_is_a_reason(bare_path):
    assert "not found" in collect_nvidia_smi(ctx())["node/nvidia-smi.xml"].reason


# --- serving python ---------------------------------------------------------------------------


def test_probe_in_a_python_without_torch_reports_that_as_a_fact():
    got = collect_serving_env(ctx(python=sys.executable))["node/versions.json"]
    assert got["torch"] is None and "torch" in got["torch_error"]
    assert got["python_executable"]


def test_probe_reads_torch_and_vllms_pin_without_importing_vllm(tmp_path, monkeypatch):
    # a stand-in torch package answers with values of a real torch 2.10.0+cu128 wheel on an old
    # driver (arch list from pytorch#182250, warning text from Yuan-2.0#65); the vllm package
    # raises if imported, so the pin must come from its metadata alone
    site = tmp_path / "site"
    (site / "torch").mkdir(parents=True)
    (site / "torch" / "__init__.py").write_text(
        "import warnings\n"
        "print('noise printed while importing torch')\n"
        "__version__ = '2.10.0+cu128'\n"
        "class version:\n    cuda = '12.8'\n"
        "class _C:\n"
        "    @staticmethod\n"
        "    def _cuda_getArchFlags():\n"
        "        return 'sm_70 sm_75 sm_80 sm_86 sm_90 sm_100 sm_120'\n"
        "class backends:\n    class cudnn:\n        version = staticmethod(lambda: 91002)\n"
        "class cuda:\n"
        "    class nccl:\n        version = staticmethod(lambda: (2, 27, 3))\n"
        "    @staticmethod\n"
        "    def is_available():\n"
        "        warnings.warn('CUDA initialization: The NVIDIA driver on your system is too old "
        "(found version 11000). Please update your GPU driver by downloading and installing a new "
        "version from the URL: http://www.nvidia.com/Download/index.aspx', UserWarning)\n"
        "        return False\n"
        "    device_count = staticmethod(lambda: 0)\n"
    )
    (site / "vllm").mkdir()
    (site / "vllm" / "__init__.py").write_text("raise RuntimeError('vllm was imported')\n")
    dist = site / "vllm-0.10.2.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: vllm\nVersion: 0.10.2\n"
        "Requires-Dist: torch==2.8.0\nRequires-Dist: torchvision==0.23.0\n"
        'Requires-Dist: pytest; extra == "test"\n'
    )
    monkeypatch.setenv("PYTHONPATH", str(site))
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")
    got = collect_serving_env(ctx(python=sys.executable))["node/versions.json"]
    assert got["torch"] == "2.10.0+cu128" and got["torch_cuda"] == "12.8"
    assert got["torch_arch_list"][-1] == "sm_120"
    assert (got["cudnn"], got["nccl"]) == (91002, "2.27.3")
    assert got["cuda_available"] is False and "found version 11000" in got["cuda_error"]
    assert (got["vllm"], got["vllm_requires_torch"]) == ("0.10.2", "==2.8.0")
    assert got["env"]["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:True"


def test_probe_prints_exactly_one_json_object():
    # the Kubernetes exec path json.loads() the whole stdout
    import json
    import subprocess

    out = subprocess.run([sys.executable, str(PROBE)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0
    assert isinstance(json.loads(out.stdout), dict)
    assert len(out.stdout.strip().splitlines()) == 1


def test_probe_script_uses_the_standard_library_only():
    import ast

    tree = ast.parse(PROBE.read_text())
    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in (
            node.names if isinstance(node, ast.Import) else [ast.alias(node.module or "")]
        )
    }
    assert imported - {"torch"} <= set(sys.stdlib_module_names)


def test_missing_python_is_a_reason(bare_path):
    why = collect_serving_env(ctx())["node/versions.json"]
    assert "python3 not found" in why.reason and "--python" in why.reason


def test_a_hanging_python_is_cut_off(bare_path):
    python = tool(bare_path, "slowpython", f"{SLEEP} 30")
    started = time.monotonic()
    why = collect_serving_env(ctx(timeout=2.0, python=str(python)))["node/versions.json"]
    assert time.monotonic() - started < 10 and "raise --timeout" in why.reason


def test_probe_output_with_noise_before_the_json_is_still_read():
    assert parse_probe_output('warning: x\n{"torch": null}\n') == {"torch": None}
    with pytest.raises(ValueError):
        parse_probe_output("Traceback (most recent call last):\n")


# --- the node target as a whole -----------------------------------------------------------------


def test_node_collect_never_raises_and_every_source_has_a_fact_or_a_reason(bare_path):
    from llmdoctor.collectors.node import collect

    facts = collect(None, ctx(timeout=3.0))
    for key in ("node/nvml.json", "node/versions.json", "node/kernel.log", "node/nvidia-smi.xml"):
        assert facts.has(key) or facts.missing_reason(key) != "not collected", key
    assert "container logs" in facts.missing_reason("logs/x.log")
    assert os.environ["PATH"] == str(bare_path)
