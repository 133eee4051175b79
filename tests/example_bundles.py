"""Shipped example bundles as tests use them: a private copy to break, the CLI's JSON report of one."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from llmdoctor.cli import run as cli_run

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "bundles"


def bundle(tmp_path: Path, example: str) -> Path:
    dest = tmp_path / example
    shutil.copytree(EXAMPLES / example, dest)
    return dest


def diagnose_json(capsys, path: Path, *extra: str) -> tuple[int, dict, str]:
    with pytest.raises(SystemExit) as done:
        cli_run(["diagnose", "--bundle", str(path), "--json", *extra])
    out = capsys.readouterr()
    assert "Traceback" not in out.out + out.err
    return int(done.value.code), json.loads(out.out), out.err


def by_check(report: dict, check: str) -> list[dict]:
    return [f for f in report["findings"] if f["check"] == check]


def skipped(report: dict) -> dict[str, str]:
    return {s["check"]: s["reason"] for s in report["skipped"]}


def check_errors(report: dict) -> list[dict]:
    return [e for e in report["errors"] if "check" in e]


def bundle_report(capsys, path: Path | str) -> dict:
    with pytest.raises(SystemExit):
        cli_run(["diagnose", "--bundle", str(path), "--json"])
    return json.loads(capsys.readouterr().out)
