"""`llmdoctor node --prometheus-textfile`: the metrics file, and node-exporter serving it."""

from __future__ import annotations

import os
import subprocess
import urllib.request
from pathlib import Path

import pytest
from prom_tools import require_tool
from prometheus_client.parser import text_string_to_metric_families
from vllm_server import free_port, wait_until

from llmdoctor.cli import run

ROOT = Path(__file__).resolve().parents[1]
XID79 = ROOT / "examples" / "bundles" / "xid79-gpu-fallen-off-bus"
HEALTHY = ROOT / "examples" / "bundles" / "healthy-vllm-7b"


def node(argv: list[str], capsys) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        run(["node", *argv])
    out, err = capsys.readouterr()
    return int(exc.value.code or 0), out, err


def samples(text: str) -> dict[str, list]:
    out: dict[str, list] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, []).append(s)
    return out


def test_an_xid79_bundle_writes_a_critical_finding_and_the_xid_count(tmp_path, capsys):
    path = tmp_path / "llmdoctor.prom"
    code, out, _ = node(
        ["--bundle", str(XID79), "--json", "--prometheus-textfile", str(path)], capsys
    )
    assert code == 2 and '"status": "critical"' in out  # the report is printed as usual
    got = samples(path.read_text())
    findings = [s.labels for s in got["llmdoctor_finding"]]
    assert {
        "check": "xid",
        "runbook": "xid-fallen-off-bus",
        "severity": "critical",
        "subject": "GPU at 0000:2b:00.0",
    } in findings
    xid = {(s.labels["code"], s.labels["kind"]): s.value for s in got["llmdoctor_xid_events"]}
    assert xid[("79", "xid")] == 1
    status = {
        (s.labels["check"], s.labels["status"]): s.value for s in got["llmdoctor_check_status"]
    }
    assert status[("xid", "critical")] == 1 and status[("xid", "ok")] == 0
    # the bundle has no versions probe: that check is not called healthy
    assert status[("torch-vllm-versions", "not_checked")] == 1
    assert got["llmdoctor_node_status"][0].value == 2
    assert got["llmdoctor_node_last_run_timestamp_seconds"][0].value > 1.7e9
    assert got["llmdoctor_node_last_run_duration_seconds"][0].value >= 0
    assert os.listdir(tmp_path) == ["llmdoctor.prom"]  # no temporary file left behind


def test_a_healthy_bundle_replaces_the_previous_file_and_has_no_findings(tmp_path, capsys):
    path = tmp_path / "llmdoctor.prom"
    node(["--bundle", str(XID79), "--prometheus-textfile", str(path)], capsys)
    code, _, _ = node(["--bundle", str(HEALTHY), "--prometheus-textfile", str(path)], capsys)
    got = samples(path.read_text())
    assert code in (0, 1)
    assert "llmdoctor_xid_events" not in got
    assert not [s for s in got.get("llmdoctor_finding", []) if s.labels["check"] == "xid"]


@pytest.mark.parametrize(
    ("name", "message"),
    [("metrics.txt", "reads only *.prom files"), ("nowhere/llmdoctor.prom", "does not exist")],
)
def test_a_path_node_exporter_would_not_read_is_one_line_and_exit_3(
    tmp_path, capsys, name, message
):
    path = tmp_path / name
    code, _, err = node(["--bundle", str(XID79), "--prometheus-textfile", str(path)], capsys)
    assert code == 3 and message in err and len(err.strip().splitlines()) == 1
    assert not path.exists()


def test_node_exporter_serves_the_file_from_its_textfile_folder(tmp_path, capsys):
    exporter = require_tool("node-exporter")
    node(
        ["--bundle", str(XID79), "--prometheus-textfile", str(tmp_path / "llmdoctor.prom")], capsys
    )
    port = free_port()
    proc = subprocess.Popen(
        [
            exporter,
            f"--web.listen-address=127.0.0.1:{port}",
            "--collector.disable-defaults",
            "--collector.textfile",
            f"--collector.textfile.directory={tmp_path}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        body = {}

        def scraped() -> bool:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
                    body["text"] = r.read().decode()
                return True
            except OSError:
                return False

        assert wait_until(scraped, timeout=15), "node-exporter did not answer"
    finally:
        proc.terminate()
        proc.wait(10)
    got = samples(body["text"])
    assert any(s.labels.get("runbook") == "xid-fallen-off-bus" for s in got["llmdoctor_finding"])
    # node-exporter found no error in the file (it reports one per bad file)
    errors = [s for s in got.get("node_textfile_scrape_error", [])]
    assert errors and all(s.value == 0 for s in errors)
