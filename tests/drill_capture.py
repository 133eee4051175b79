"""What a drill keeps: llmdoctor's own bundle of the live server (`collect URL`), the slice of the
server's log the drill produced, and the answers its clients got. The same files are read back
by the offline tests (tests/test_real_vllm_fixtures.py) from tests/fixtures/real-vllm-0.32/.

Set LLMDOCTOR_DRILL_SAVE=tests/fixtures/real-vllm-0.32 to (re)write the fixtures from a run.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from llmdoctor.cli import run as cli_run

FIXTURES = Path(__file__).parent / "fixtures" / "real-vllm-0.32"


def save_root(tmp_root: Path) -> Path:
    """Where this run writes each drill's captures: the fixtures folder when asked, else tmp."""
    chosen = os.environ.get("LLMDOCTOR_DRILL_SAVE")
    return Path(chosen) if chosen else tmp_root


def drill_folder(root: Path, drill: str) -> Path:
    folder = root / drill
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    return folder


def run_cli(capsys, *args: str) -> tuple[int, str]:
    """llmdoctor's command line in this process: (exit code, stdout)."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        cli_run(list(args))
    return exit_info.value.code, capsys.readouterr().out


def run_json(capsys, *args: str) -> tuple[int, dict]:
    code, out = run_cli(capsys, *args, "--json")
    return code, json.loads(out)


def start_collect(url: str, bundle: Path, window: float) -> subprocess.Popen:
    """`llmdoctor collect URL` in a child process, so it sees the same moment as a probe."""
    command = [sys.executable, "-m", "llmdoctor", "collect", url, "-o", str(bundle)]
    return subprocess.Popen(
        [*command, "--window", str(window), "--timeout", "8"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def finish_collect(collector: subprocess.Popen, timeout: float = 90) -> None:
    try:
        out, _ = collector.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        collector.kill()
        out, _ = collector.communicate()
    assert collector.returncode == 0, out


def write_json(path: Path, value) -> None:
    path.write_text(json.dumps(value, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def verdict(report: dict) -> list[tuple[str, str, tuple[str, ...]]]:
    """(check, severity, runbooks) of every finding that is not ok, in the report's order."""
    return [
        (f["check"], f["severity"], tuple(f.get("runbooks") or ()))
        for f in report["findings"]
        if f["severity"] != "ok"
    ]


def ok_checks(report: dict) -> list[tuple[str, str]]:
    return [(f["check"], f["summary"]) for f in report["findings"] if f["severity"] == "ok"]


def explained(result: dict) -> list[tuple[str, str, float]]:
    """(runbook id, severity, confidence) of explain's confident matches, best first."""
    return [(m["id"], m["severity"], m["confidence"]) for m in result["matches"]]
