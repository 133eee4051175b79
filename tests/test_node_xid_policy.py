"""NVIDIA's Xid catalog as data, the team Xid policy, and the source each Xid decision names.

The catalog is checked against tests/fixtures/xid/nvidia-xid-catalog-2025-10-29.tsv, NVIDIA's
published catalog as mirrored by leptonai/gpud (see tests/fixtures/xid/SOURCES.md). Kernel logs
are the real captures in tests/fixtures/kernel/.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_node_checks import facts_with, findings

from llmdoctor.errors import BadInput
from llmdoctor.gpus.tables import load_table
from llmdoctor.gpus.xid_policy import decide, load_policy, most_in_window, policy_from_option

FIXTURES = Path(__file__).parent / "fixtures"
NVIDIA_CATALOG = FIXTURES / "xid" / "nvidia-xid-catalog-2025-10-29.tsv"


def nvidia_rows() -> list[dict[str, str]]:
    with open(NVIDIA_CATALOG, encoding="utf-8") as fh:
        return list(csv.DictReader(fh, delimiter="\t"))


# --- the catalog --------------------------------------------------------------------------------


def test_every_code_of_nvidias_catalog_is_in_ours_with_its_resolution():
    codes = load_table("xid_catalog")["codes"]
    rows = nvidia_rows()
    assert len(rows) == 172
    for row in rows:
        entry = codes.get(row["code"])
        assert entry is not None, f"Xid {row['code']} missing"
        assert entry["mnemonic"] == row["mnemonic"], row["code"]
        assert entry["resolution"] == {
            "immediate": row["immediate_resolution"],
            "investigatory": row["investigatory_resolution"],
        }, row["code"]


def test_every_entry_names_a_source_with_its_address_and_the_date_read():
    table = load_table("xid_catalog")
    for code, entry in table["codes"].items():
        source = table["sources"][entry["source"]]
        assert source["url"].startswith("https://") and source["read"], code
        assert entry["severity"] in ("info", "warning", "critical", "nvlink5", "recovery"), code
        assert entry["policy_action"] in table["policy_actions"] or entry["severity"] in (
            "nvlink5",
            "recovery",
        ), code
    drivers = load_table("cuda_drivers")
    assert all(s["url"].startswith("https://") and s["read"] for s in drivers["sources"].values())


@pytest.mark.parametrize("code", [110, 136, 155, 156, 158])
def test_reset_class_codes_are_critical_with_nvidias_resolution(code):
    # these were "a code the catalog does not know" (warning); NVIDIA says RESET_GPU
    decision = decide({"kind": "xid", "code": code, "count": 1})
    assert decision.severity == "critical"
    assert "reset the GPU" in decision.action
    assert "resolution RESET_GPU" in decision.decided_by[0]["text"]


def test_every_reset_or_reboot_resolution_is_critical():
    for code, entry in load_table("xid_catalog")["codes"].items():
        if entry["resolution"]["immediate"] in ("RESET_GPU", "RESTART_BM", "RESTART_VM"):
            assert entry["severity"] == "critical", code


def test_nvlink_codes_link_the_nvlink_entry_not_the_fallen_off_bus_one():
    codes = load_table("xid_catalog")["codes"]
    for code in (74, 137, *range(144, 151)):
        assert codes[str(code)]["runbook"] == "xid-nvlink-error", code
    assert codes["79"]["runbook"] == "xid-fallen-off-bus"


def test_the_catalog_decision_is_shown_as_evidence_per_gpu():
    (f,) = findings(facts_with(kernel="xid119-gsp-rpc-timeout-dell-xe9680.log"), "xid")[0]
    assert f.severity == "critical" and f.subject == "GPU at 0000:9b:00.0"
    assert f.evidence[-1]["text"] == (
        "decided by the NVIDIA Xid catalog: Xid 119 GSP_RPC_TIMEOUT, resolution "
        "RESET_GPU / INVESTIGATE_SW"
    )


# --- occurrences within a window ----------------------------------------------------------------


def test_most_in_window_counts_the_densest_stretch_of_a_real_log():
    # the five Xid 119 times of the Dell XE9680 log: three within 12 s, five within 6 min
    times = [
        "Sun Feb 23 16:24:18 2025",
        "Sun Feb 23 16:24:24 2025",
        "Sun Feb 23 16:24:30 2025",
        "Sun Feb 23 16:27:12 2025",
        "Sun Feb 23 16:30:13 2025",
    ]
    assert most_in_window(times, 60) == 3
    assert most_in_window(times, 600) == 5
    assert most_in_window(["1843.308145", "1850.1"], 5) == 1
    assert most_in_window([None, "1843.3"], 60) is None  # a line without a time: unknown


# --- the team policy ----------------------------------------------------------------------------


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "xid-policy.yaml"
    path.write_text(text, encoding="utf-8")
    return str(path)


def with_policy(kernel: str, policy: dict, **kw):
    facts = facts_with(kernel=kernel, **kw)
    facts.set("settings/xid_policy", policy)
    return findings(facts, "xid")[0]


def test_team_threshold_within_a_window_decides_and_names_its_line(tmp_path):
    path = write(
        tmp_path,
        "about: GSP timeouts only matter when they come in bursts\n"
        "xids:\n"
        "  119: {action: drain, critical_after: 4, window: 1m}\n",
    )
    (f,) = with_policy("xid119-gsp-rpc-timeout-dell-xe9680.log", load_policy(path))
    assert f.severity == "warning"  # at most 3 within a minute
    assert "Action: drain (team policy)" in f.summary
    decided = next(e for e in f.evidence if e["text"].startswith("decided by the team policy"))
    assert decided["source"] == path and decided["line"] == 3
    assert "at most 3 within 1m, critical from 4" in decided["text"]

    path = write(tmp_path, "xids:\n  119: {action: drain, critical_after: 4, window: 10m}\n")
    (f,) = with_policy("xid119-gsp-rpc-timeout-dell-xe9680.log", load_policy(path))
    assert f.severity == "critical"


def test_team_policy_ranges_and_codes_without_a_rule_keep_nvidias_decision(tmp_path):
    path = write(tmp_path, "xids:\n  144-150:\n    action: rma\n    note: hardware team\n")
    found = with_policy("xid144-145-149-nvlink5-gpud-pr1160-1174.log", load_policy(path))
    assert {f.severity.value for f in found} == {"critical"}  # rma is critical, even nonfatal
    assert all("rma (team policy): hardware team" in f.summary for f in found)
    (f,) = with_policy("xid119-gsp-rpc-timeout-dell-xe9680.log", load_policy(path))
    assert f.evidence[-1]["text"].startswith("decided by the NVIDIA Xid catalog")


def test_the_drivers_recovery_action_raises_an_app_xid_to_critical():
    gpus = {
        "source": "nvml",
        "gpus": [
            {
                "index": 0,
                "name": "NVIDIA A100-SXM4-80GB",
                "pci_bus_id": "0000:cb:00.0",
                "recovery_action": "GPU Reset Required",
            }
        ],
    }
    found, _ = findings(
        facts_with(kernel="xid13-109-peermem-dmesg-ctime.log", gpus_json=gpus), "xid"
    )
    xid13 = next(f for f in found if f.summary.startswith("Xid 13"))
    assert xid13.severity == "critical" and xid13.subject == "GPU 0 (0000:cb:00.0)"
    assert "GPU Reset Required (the driver's recovery action)" in xid13.summary
    assert any(e["text"].endswith("now: GPU Reset Required") for e in xid13.evidence)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("xids:\n  13: {action: restart}\n", ":2: xids.13.action: 'restart' is not one of"),
        ("xids:\n  13: {action: drain, window: soon, critical_after: 2}\n", ":2: xids.13.window"),
        ("xids:\n  13:\n    action: drain\n    critcal_after: 2\n", ":4: xids.13: unknown key"),
        ("xids:\n  13: {action: drain, critical_after: 0}\n", ":2: xids.13.critical_after"),
        ("xids:\n  13: {action: drain, window: 1h}\n", ":2: xids.13: a window needs"),
        ("xids:\n  13: {critical_after: 2}\n", ":2: xids.13: no action"),
        ("xids:\n  140-150: {action: drain}\n  145: {action: rma}\n", ":3: Xid 145 already"),
        ("xids:\n  thirteen: {action: drain}\n", ":2: xids: 'thirteen' is not an Xid code"),
        ("xid:\n  13: {action: drain}\n", ":1: unknown key 'xid'"),
        ("xids: [13, 31]\n", ":1: xids: expected"),
        ("xids:\n  13: {action: drain\n", ":3: "),
    ],
)
def test_a_bad_policy_file_is_refused_with_file_line_and_what(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(BadInput) as err:
        load_policy(path)
    assert str(err.value).startswith(path + ":") and message in str(err.value)


def test_the_environment_names_the_policy_when_no_option_does(tmp_path, monkeypatch):
    path = write(tmp_path, "xids:\n  79: {action: rma}\n")
    monkeypatch.setenv("LLMDOCTOR_XID_POLICY", path)
    assert policy_from_option(None)["codes"]["79"]["action"] == "rma"
    monkeypatch.delenv("LLMDOCTOR_XID_POLICY")
    assert policy_from_option(None) is None


def test_node_refuses_a_bad_policy_with_exit_3_and_one_line(tmp_path):
    path = write(tmp_path, "xids:\n  79: {action: reboot}\n")
    kernel = FIXTURES / "kernel" / "xid79-journal-595-ogkm1151.log"
    run = subprocess.run(
        [sys.executable, "-m", "llmdoctor", "node", "--kernel-log", str(kernel),
         "--xid-policy", path, "--only", "xid"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 3, run.stderr
    assert run.stderr.strip().count("\n") == 0 and f"{path}:2: xids.79.action" in run.stderr


def test_diagnose_applies_the_policy_named_by_the_environment(tmp_path):
    path = write(tmp_path, "xids:\n  79: {action: rma, note: back to the vendor}\n")
    run = subprocess.run(
        [sys.executable, "-m", "llmdoctor", "diagnose", "--bundle",
         "examples/bundles/xid79-gpu-fallen-off-bus", "--only", "xid", "--json"],
        capture_output=True, text=True, timeout=120, cwd=Path(__file__).parent.parent,
        env={**os.environ, "LLMDOCTOR_XID_POLICY": path},
    )  # fmt: skip
    assert run.returncode == 2, run.stderr
    (f,) = json.loads(run.stdout)["findings"]
    assert f["summary"].endswith("Action: rma (team policy): back to the vendor")
    texts = [e["text"] for e in f["evidence"]]
    assert "decided by the team policy: Xid 79 -> rma (1 in the log)" in texts
    assert any(t.startswith("NVIDIA Xid catalog (overruled): Xid 79") for t in texts)


# -- the policy file is read within bounds, and the errors name where its path came from ------

XID79_BUNDLE = "examples/bundles/xid79-gpu-fallen-off-bus"


def _node_capped(args: list[str], env: dict | None = None) -> subprocess.CompletedProcess:
    """`llmdoctor node ARGS` in a child with 1.5 GiB of address space and a timeout: an
    unbounded read of /dev/zero dies there (not on the test machine) and a FIFO cannot hang."""
    import resource

    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (1536 * 1024**2, 1536 * 1024**2))

    return subprocess.run(
        [sys.executable, "-m", "llmdoctor", "node", *args],
        capture_output=True, text=True, timeout=60, preexec_fn=cap,
        cwd=Path(__file__).parent.parent, env={**os.environ, **(env or {})},
    )  # fmt: skip


@pytest.mark.parametrize("via_env", [True, False], ids=["env", "option"])
@pytest.mark.parametrize("kind", ["device", "fifo", "folder", "huge"])
def test_a_policy_that_is_not_a_small_regular_file_is_refused_in_one_line(tmp_path, kind, via_env):
    if kind == "device":
        path, said = "/dev/zero", "is a device"
    elif kind == "fifo":
        path, said = str(tmp_path / "pipe"), "is a named pipe (FIFO)"
        os.mkfifo(path)
    elif kind == "folder":
        path, said = str(tmp_path), "is a folder"
    else:
        path, said = str(tmp_path / "huge.yaml"), "over the 1 MiB cap"
        Path(path).write_text("xids:\n" + "# padding\n" * 200_000)
    if via_env:
        run = _node_capped(["--bundle", XID79_BUNDLE], env={"LLMDOCTOR_XID_POLICY": path})
        named = f"LLMDOCTOR_XID_POLICY={path}:"
    else:
        run = _node_capped(["--bundle", XID79_BUNDLE, "--xid-policy", path])
        named = f"--xid-policy {path}:"
    assert run.returncode == 3, run.stderr
    assert run.stderr.strip().count("\n") == 0 and "Traceback" not in run.stderr
    assert named in run.stderr and said in run.stderr
    assert "--xid-policy" not in run.stderr or not via_env


# -- a policy may quiet the Xid, not a GPU that is gone ----------------------------------------


def _node_json(bundle: str | Path, *extra: str) -> tuple[int, dict]:
    run = subprocess.run(
        [sys.executable, "-m", "llmdoctor", "node", "--bundle", str(bundle), "--json", *extra],
        capture_output=True, text=True, timeout=120, cwd=Path(__file__).parent.parent,
        env={k: v for k, v in os.environ.items() if k != "LLMDOCTOR_XID_POLICY"},
    )  # fmt: skip
    return run.returncode, json.loads(run.stdout)


def test_a_policy_that_silences_xid79_still_reports_the_gpu_missing_from_nvml(tmp_path):
    path = write(tmp_path, "xids:\n  79: {action: none}\n")
    code, doc = _node_json(XID79_BUNDLE, "--xid-policy", path)
    assert code == 2
    (gone,) = [
        f for f in doc["findings"] if f["check"] == "gpu-health" and f["severity"] == "critical"
    ]
    assert "0000:2b:00.0" in gone["subject"] and "fell off the bus" in gone["summary"]
    texts = [e["text"] for e in gone["evidence"]]
    assert any("0000:2b:00.0 is not among them" in t for t in texts)
    assert "xid-fallen-off-bus" in gone["runbooks"]


def test_an_xid79_on_a_gpu_still_listed_is_left_to_the_xid_check(tmp_path):
    import shutil

    bundle = tmp_path / "bundle"
    shutil.copytree(XID79_BUNDLE, bundle)
    log = bundle / "node" / "kernel.log"
    log.write_text(log.read_text().replace("0000:2b:00", "0000:84:00"))
    path = write(tmp_path, "xids:\n  79: {action: none}\n")
    code, doc = _node_json(bundle, "--xid-policy", path)
    health = [f for f in doc["findings"] if f["check"] == "gpu-health"]
    assert health and all(f["severity"] != "critical" for f in health)
    assert code == 0
