"""`kubectl llmdoctor` (the plugin entry points) and shell completion, against the local
Kubernetes API server; with the real kubectl when it is installed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from k8s_server import Running, scenario_healthy
from vllm_server import SilentServer

from llmdoctor.kubectl_plugin import translate

BIN = Path(sys.executable).parent
POD = "vllm-7b-7d9f8c6b5-x2kqp"


@pytest.mark.parametrize(
    ("argv", "args", "env"),
    [
        (
            ["-n", "serving", "--kubeconfig", "/k/config", "diagnose", f"pod/{POD}"],
            ["diagnose", "-n", "serving", f"pod/{POD}"],
            {"KUBECONFIG": "/k/config"},
        ),
        (
            ["diagnose", f"pod/{POD}", "-n", "serving", "--context=prod", "--json"],
            ["diagnose", f"pod/{POD}", "-n", "serving", "--context", "prod", "--json"],
            {},
        ),
        (
            ["--namespace=serving", "--context", "prod", "collect", "deploy/x"],
            ["collect", "--namespace", "serving", "--context", "prod", "deploy/x"],
            {},
        ),
        # kubectl's namespace means nothing to the wiki: dropped, not an error
        (["-nserving", "wiki", "show", "engine-dead"], ["wiki", "show", "engine-dead"], {}),
        (["explain", "-", "--", "-n"], ["explain", "-", "--", "-n"], {}),
        # ... and after the command too (kubectl users type them anywhere)
        (["wiki", "search", "oom", "-n", "serving"], ["wiki", "search", "oom"], {}),
        (["wiki", "search", "oom", "--context=prod"], ["wiki", "search", "oom"], {}),
        (
            ["explain", "cr.log", "--namespace", "serving", "--json"],
            ["explain", "cr.log", "--json"],
            {},
        ),
        (["node", "-nserving", "--context", "prod"], ["node"], {}),
    ],
)
def test_kubectl_flags_are_translated(argv, args, env):
    assert translate(argv) == (args, env)


CRASH_LOG = (
    Path(__file__).resolve().parents[1]
    / "examples/bundles/crashloop-cuda-oom/logs/vllm.previous.log"
)
QWEN_CONFIG = Path(__file__).resolve().parent / "fixtures/capacity/qwen2-7b-instruct-config.json"


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (["wiki", "search", "CUDA out of memory", "-n", "serving"], "cuda-oom-runtime"),
        (["wiki", "search", "CUDA out of memory", "--context", "prod"], "cuda-oom-runtime"),
        (["explain", str(CRASH_LOG), "-n", "serving"], "cuda-oom-runtime"),
        (
            ["capacity", "--gpu", "H100", "--model-config", str(QWEN_CONFIG), "-n", "serving"],
            "H100",
        ),
    ],
)
def test_kubectl_flags_after_a_command_that_never_talks_to_the_cluster_are_ignored(
    command, expected
):
    done = run_plugin([str(BIN / "kubectl-llmdoctor"), *command, "--json"])
    assert done.returncode in (0, 1, 2) and done.stderr == "", done.stderr
    assert expected in done.stdout


def fake_cluster(tmp_path):
    # the kubeconfig's namespace is "default": only -n serving finds the pod
    running = Running(scenario_healthy(), tmp_path / "unused")
    running.__enter__()
    running.server.write_kubeconfig(tmp_path / "kubeconfig", namespace=None)
    return running


def run_plugin(command: list[str], env_extra: dict | None = None, timeout: float = 60):
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    env.update(env_extra or {})
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout)


def test_the_plugin_honours_kubeconfig_and_namespace(tmp_path):
    running = fake_cluster(tmp_path)
    try:
        done = run_plugin(
            [
                str(BIN / "kubectl-llmdoctor"),
                "--kubeconfig",
                str(tmp_path / "kubeconfig"),
                "-n",
                "serving",
                "diagnose",
                f"pod/{POD}",
                "--json",
                "--no-exec",
                "--window",
                "0",
            ]
        )
    finally:
        running.__exit__(None, None, None)
    report = json.loads(done.stdout)
    assert report["schema"] == "llmdoctor/2" and POD in report["target"], done.stderr
    assert not [e for e in report["errors"] if "not found" in e.get("message", "")]


def test_the_real_kubectl_runs_the_plugin_from_path(tmp_path):
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl not installed")
    running = fake_cluster(tmp_path)
    path = f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"
    try:
        done = run_plugin(
            [
                kubectl,
                "llmdoctor",
                "--kubeconfig",
                str(tmp_path / "kubeconfig"),
                "diagnose",
                f"pod/{POD}",
                "-n",
                "serving",
                "--json",
                "--no-exec",
                "--window",
                "0",
            ],
            {"PATH": path},
        )
        listed = run_plugin(
            [
                kubectl,
                "__complete",
                "llmdoctor",
                "--kubeconfig",
                str(tmp_path / "kubeconfig"),
                "-n",
                "serving",
                "diagnose",
                "pod/",
            ],
            # the listing's 1 s budget is for a shell; a loaded CI machine needs longer to start
            {"PATH": path, "LLMDOCTOR_COMPLETION_TIMEOUT": "20"},
        )
    finally:
        running.__exit__(None, None, None)
    assert json.loads(done.stdout)["target"].startswith(f"pod/{POD}"), done.stderr
    # kubectl 1.26+ asks kubectl_complete-llmdoctor for a plugin's completions
    assert f"pod/{POD}" in listed.stdout.splitlines(), listed.stdout + listed.stderr


def test_completion_lists_pods_from_the_cluster(tmp_path):
    running = fake_cluster(tmp_path)
    try:
        done = run_plugin(
            [
                str(BIN / "kubectl_complete-llmdoctor"),
                "--kubeconfig",
                str(tmp_path / "kubeconfig"),
                "-n",
                "serving",
                "diagnose",
                "pod/vllm",
            ],
            # the 1 s default is for a shell; a busy test machine may need longer to answer
            {"LLMDOCTOR_COMPLETION_TIMEOUT": "20"},
        )
    finally:
        running.__exit__(None, None, None)
    assert done.stdout.splitlines() == [f"pod/{POD}", ":4"], done.stderr


def test_completion_gives_up_quickly_on_an_api_server_that_never_answers(tmp_path):
    with SilentServer() as silent:
        silent.write_kubeconfig(tmp_path / "kubeconfig")
        started = time.monotonic()
        done = run_plugin(
            [str(BIN / "kubectl_complete-llmdoctor"), "diagnose", "pod/"],
            {"KUBECONFIG": str(tmp_path / "kubeconfig")},
        )
        took = time.monotonic() - started
    assert done.returncode == 0 and done.stdout.splitlines() == [":4"] and not done.stderr
    assert took < 1.0 + 4.0  # the 1 s budget plus start-up; a hang would hit the 60 s timeout


def test_the_completion_budget_can_be_raised_but_not_past_30_s(tmp_path, monkeypatch):
    from llmdoctor.commands.shell_completion import CLUSTER_BUDGET, cluster_budget

    for value, budget in (
        ("5", 5.0),
        ("0.5", 0.5),
        ("", CLUSTER_BUDGET),
        ("x", CLUSTER_BUDGET),
        ("0", CLUSTER_BUDGET),
        ("31", CLUSTER_BUDGET),
        ("nan", CLUSTER_BUDGET),
    ):
        monkeypatch.setenv("LLMDOCTOR_COMPLETION_TIMEOUT", value)
        assert cluster_budget() == budget, value
    with SilentServer() as silent:
        silent.write_kubeconfig(tmp_path / "kubeconfig")
        started = time.monotonic()
        done = run_plugin(
            [str(BIN / "kubectl_complete-llmdoctor"), "diagnose", "pod/"],
            {"KUBECONFIG": str(tmp_path / "kubeconfig"), "LLMDOCTOR_COMPLETION_TIMEOUT": "2"},
        )
        took = time.monotonic() - started
    assert done.returncode == 0 and done.stdout.splitlines() == [":4"]
    assert took >= 2.0  # it waited the budget it was given


def test_bash_completion_of_runbook_ids_and_target_kinds():
    env = {**os.environ, "_LLMDOCTOR_COMPLETE": "complete_bash"}
    ids = subprocess.run(
        [str(BIN / "llmdoctor")],
        env={**env, "COMP_WORDS": "llmdoctor wiki show xid-f", "COMP_CWORD": "3"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    kinds = subprocess.run(
        [str(BIN / "llmdoctor")],
        env={
            **env,
            "COMP_WORDS": "llmdoctor diagnose ",
            "COMP_CWORD": "2",
            "KUBECONFIG": "/nonexistent",
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ids.stdout.split() == ["xid-fallen-off-bus"]
    assert {"pod/", "deploy/", "sts/", "node", "http://"} <= set(kinds.stdout.split())


def test_completion_scripts(capsys):
    from llmdoctor.cli import run

    for shell in ("bash", "zsh", "fish"):
        with pytest.raises(SystemExit) as exc:
            run(["completion", shell])
        out = capsys.readouterr().out
        assert exc.value.code == 0 and "_LLMDOCTOR_COMPLETE" in out
    with pytest.raises(SystemExit) as exc:
        run(["completion", "tcsh"])
    assert exc.value.code == 3 and "expected one of bash, zsh, fish" in capsys.readouterr().err
