"""pod-vllm-flags: the server's flags against the vLLM that reads them (the upgrade crash loop).

Real-format pod objects (tests/fixtures/k8s) with the flags of real reports; vLLM's own parser is
exercised through data/vllm_args_probe.py run by a real python against a stand-in `vllm` package
whose parser knows the flags vLLM 0.33.0 has (llmdoctor/data/vllm_cli_flags.json, read from the
0.33.0 wheel): llmdoctor never installs vLLM itself.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest
from k8s_server import load
from test_k8s_checks import facts_for, one, run

from llmdoctor.collectors.k8s_pod_parts import serving_env_script, vllm_args_command
from llmdoctor.engine.findings import Severity
from llmdoctor.parsers.serving_args import parse_serving_args

ROOT = Path(__file__).resolve().parent.parent
FLAGS = json.loads((ROOT / "llmdoctor" / "data" / "vllm_cli_flags.json").read_text())


def pod_with(*extra: str) -> dict:
    # the TP=2 pod of tests/fixtures/k8s, with the flags an older deployment still passes
    pod = copy.deepcopy(load("pod-vllm-7b-tp2-saturated.json"))
    container = pod["spec"]["containers"][0]
    container["args"] = [*(container.get("args") or []), *extra]
    return pod


def versions(vllm: str) -> dict:
    return {"node/versions.json": {"python": "3.12.3", "vllm": vllm}}


def test_a_removed_flag_on_a_vllm_past_its_removal_is_the_crash_loop():
    # vllm-project/vllm: --disable-log-requests is gone in 0.33.0 (vllm_cli_flags.json)
    facts = facts_for(pod_with("--disable-log-requests"), **versions("0.33.0"))
    finding = one("pod-vllm-flags", facts)
    assert finding.severity is Severity.CRITICAL
    assert "unrecognized arguments: --disable-log-requests" in finding.summary
    assert finding.runbooks == ["vllm-flag-removed-on-upgrade"]


def test_a_removed_flag_is_a_warning_while_the_image_still_has_it_or_is_unknown():
    older = one(
        "pod-vllm-flags", facts_for(pod_with("--disable-log-requests"), **versions("0.12.0"))
    )
    assert older.severity is Severity.WARNING and "0.12.0 still has it" in older.summary
    unknown = one("pod-vllm-flags", facts_for(pod_with("--disable-log-requests")))
    assert (
        unknown.severity is Severity.WARNING and "0.33.0 or later will not start" in unknown.summary
    )


def test_a_flag_no_release_has_is_a_warning_and_a_clean_command_line_is_ok():
    typo = one("pod-vllm-flags", facts_for(pod_with("--max-num-seq", "64")))
    assert typo.severity is Severity.WARNING and "--max-num-seq" in typo.summary
    clean = one("pod-vllm-flags", facts_for(pod_with(), **versions("0.33.0")))
    assert clean.severity is Severity.OK and "0.33.0" in clean.summary


def test_the_images_own_vllm_decides_when_it_was_asked():
    refused = {"vllm": "0.33.0", "accepted": False, "error": "unrecognized arguments: --foo"}
    finding = one(
        "pod-vllm-flags", facts_for(pod_with("--foo"), **{"serving/vllm-args.json": refused})
    )
    assert finding.severity is Severity.CRITICAL and "vLLM 0.33.0 in the serving image refuses" in (
        finding.summary
    )
    accepted = {"vllm": "0.12.0", "accepted": True, "error": None, "parsed": {}}
    facts = facts_for(pod_with("--disable-log-requests"), **{"serving/vllm-args.json": accepted})
    assert [f.severity for f in run("pod-vllm-flags", facts)] == [Severity.OK]


# --- data/vllm_args_probe.py with a real python ------------------------------------------------


@pytest.fixture
def stand_in_vllm(tmp_path):
    """A `vllm` package whose server parser has the flags of vLLM 0.33.0 (not vLLM itself)."""
    pkg = tmp_path / "vllm"
    (pkg / "entrypoints" / "openai").mkdir(parents=True)
    (pkg / "utils").mkdir()
    for folder in (pkg, pkg / "entrypoints", pkg / "entrypoints" / "openai"):
        (folder / "__init__.py").write_text("")
    (pkg / "utils" / "__init__.py").write_text(
        "import argparse\n\nclass FlexibleArgumentParser(argparse.ArgumentParser):\n    pass\n"
    )
    removed = set(FLAGS["removed"])
    booleans = [f for f in FLAGS["boolean"] if f not in removed]
    values = [f for f in FLAGS["value"] + FLAGS["list"] if f not in removed]
    (pkg / "entrypoints" / "openai" / "cli_args.py").write_text(
        "def make_arg_parser(parser):\n"
        f"    for flag in {booleans!r}:\n"
        "        parser.add_argument(flag, action='store_true')\n"
        f"    for flag in {values!r}:\n"
        "        parser.add_argument(flag)\n"
        "    return parser\n"
    )
    dist = tmp_path / "vllm-0.33.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.33.0\n")
    return tmp_path


def probe(site: Path | None, pod: dict) -> dict:
    command = vllm_args_command(parse_serving_args(pod))
    assert command is not None and command[:2] == ["python3", "-c"]
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(site) if site else ""}
    done = subprocess.run(
        [sys.executable, *command[1:]], capture_output=True, text=True, timeout=60, env=env
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_probe_asks_the_installed_vllm_and_reports_a_refusal(stand_in_vllm):
    refused = probe(stand_in_vllm, pod_with("--disable-log-requests"))
    assert refused["vllm"] == "0.33.0" and refused["accepted"] is False
    assert "unrecognized arguments: --disable-log-requests" in refused["error"]
    accepted = probe(stand_in_vllm, pod_with("--max-num-seqs", "64"))
    assert accepted["accepted"] is True and accepted["parsed"]["max_num_seqs"] == "64"
    assert accepted["parsed"]["model"] == "Qwen2-7B-Instruct"  # `vllm serve MODEL` -> --model


def test_the_probe_says_when_vllm_is_not_installed(tmp_path):
    answer = probe(tmp_path, pod_with())
    assert answer == {
        "vllm": None,
        "accepted": None,
        "error": "vLLM is not installed in this python",
        "parsed": None,
    }
    assert serving_env_script("vllm_args_probe.py") is not None


def test_a_live_diagnosis_asks_the_running_container_and_reports_its_answer(
    tmp_path, monkeypatch, capsys
):
    # the fake API server answers the exec of data/vllm_args_probe.py as vLLM 0.33.0 would
    from k8s_server import ExecAnswer, Running, scenario_healthy

    from llmdoctor.cli import run as cli_run

    scenario = scenario_healthy()
    pod = "vllm-7b-7d9f8c6b5-x2kqp"
    refusal = {
        "vllm": "0.33.0",
        "accepted": False,
        "error": "unrecognized arguments: --disable-log-requests",
        "parsed": None,
    }
    scenario.cluster.exec_answers[(pod, "vllm", "vllm-args")] = ExecAnswer(json.dumps(refusal))
    with Running(scenario, tmp_path / "kubeconfig", 0.0) as running:
        monkeypatch.setenv("KUBECONFIG", str(running.kubeconfig))
        monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
        with pytest.raises(SystemExit):
            cli_run(["diagnose", f"pod/{pod}", "-n", "serving", "--window", "0", "--json"])
        sent = [c for _, _, c in running.server.exec_commands if "--llmdoctor-vllm-args" in c]
    report = json.loads(capsys.readouterr().out)
    (finding,) = [f for f in report["findings"] if f["check"] == "pod-vllm-flags"]
    assert finding["severity"] == "critical" and "refuses" in finding["summary"]
    assert len(sent) == 1 and json.loads(sent[0][-1])["positional_model"] in (True, False)
