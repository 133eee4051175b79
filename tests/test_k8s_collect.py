"""`llmdoctor collect`: a live collection written as an llmdoctor-bundle/1 and replayed with
`diagnose --bundle` gives the same findings as diagnosing it live."""

from __future__ import annotations

import json
import tarfile

import pytest
from k8s_server import (
    Running,
    scenario_crashloop_cuda_oom,
    scenario_gpu_unschedulable,
    scenario_healthy,
    scenario_probe_killed,
    scenario_saturated,
)

from llmdoctor.cli import run as cli_run
from llmdoctor.collectors.bundle import Bundle, write_bundle
from llmdoctor.commands.collect import bundle_paths
from llmdoctor.engine.collect import CollectContext
from llmdoctor.engine.target import parse_target
from llmdoctor.render.report import to_json
from llmdoctor.usecases.diagnose import diagnose, gather


@pytest.fixture
def cluster(tmp_path, monkeypatch):
    started = []

    def start(scenario) -> Running:
        running = Running(scenario, tmp_path / "kubeconfig").__enter__()
        started.append(running)
        monkeypatch.setenv("KUBECONFIG", str(running.kubeconfig))
        return running

    yield start
    for running in started:
        running.__exit__(None, None, None)


def comparable(report) -> dict:
    data = to_json(report)
    return {k: data[k] for k in ("status", "findings", "skipped", "errors")}


@pytest.mark.parametrize(
    ("scenario", "target", "namespace"),
    [
        (scenario_gpu_unschedulable, "sts/vllm", "llm"),
        (scenario_crashloop_cuda_oom, "pod/vllm-7b-7d9f8c6b5-m8wzt", "serving"),
        (scenario_probe_killed, "pod/vllm-qwen2-7b-6c9d8f7b4-kx2vq", "serving"),
        (scenario_saturated, "pod/vllm-7b-tp2-5b8d9c7f6-w4nzp", "serving"),
        (scenario_healthy, "pod/vllm-7b-7d9f8c6b5-x2kqp", "serving"),  # with exec
    ],
)
def test_replaying_the_bundle_gives_the_live_findings(
    cluster, tmp_path, scenario, target, namespace
):
    # one collection, diagnosed in memory and from the bundle written from it
    cluster(scenario())
    parsed = parse_target(target)
    options = {"namespace": namespace, "window": 0.2, "tail": 2000}
    (facts,) = gather(parsed, CollectContext(parsed, 5.0, options))
    path = write_bundle(facts, tmp_path / "incident.tar.gz", str(facts.get("target")), namespace)
    live = diagnose([facts], target)
    with Bundle(path) as bundle:
        replayed = diagnose([bundle.to_facts()], target)
    assert comparable(replayed) == comparable(live)
    assert any(f.severity.rank > 0 for f in live.findings) or target.endswith("x2kqp")


def test_collect_command_then_diagnose_bundle(cluster, tmp_path, capsys):
    # the CLI path: collect -o incident.tar.gz, then diagnose --bundle incident.tar.gz
    cluster(scenario_probe_killed())
    out = tmp_path / "incident.tar.gz"
    pod = "pod/vllm-qwen2-7b-6c9d8f7b4-kx2vq"
    with pytest.raises(SystemExit) as done:
        cli_run(["collect", pod, "-n", "serving", "-o", str(out), "--window", "0", "--no-exec"])
    assert done.value.code == 0
    assert f"wrote {out}" in capsys.readouterr().out
    with tarfile.open(out) as tar:
        names = {m.name.split("/", 1)[-1] for m in tar.getmembers() if m.isfile()}
    assert {"manifest.json", "k8s/pod.json", "k8s/events.json", "k8s/node.json"} <= names
    assert {"logs/vllm.log", "logs/vllm.previous.log", "vllm/health.json"} <= names
    with Bundle(out) as bundle:
        assert bundle.manifest["target"] == pod and bundle.manifest["namespace"] == "serving"
        assert "node/nvidia-smi.xml" in bundle.manifest["missing"]  # --no-exec, said so
    with pytest.raises(SystemExit) as done:
        cli_run(["diagnose", "--bundle", str(out), "--json"])
    replayed = json.loads(capsys.readouterr().out)
    assert done.value.code == 2
    with pytest.raises(SystemExit):
        cli_run(["diagnose", pod, "-n", "serving", "--json", "--window", "0", "--no-exec"])
    live = json.loads(capsys.readouterr().out)

    # the pod and log checks do not depend on timing: identical across the two collections
    def stable(report):
        return [f for f in report["findings"] if f["check"].startswith(("pod-", "log-"))]

    assert stable(replayed) == stable(live)
    assert replayed["target"] == f"{pod} (bundle {out})"


def test_collect_refuses_to_overwrite_without_force(cluster, tmp_path, capsys):
    cluster(scenario_crashloop_cuda_oom())
    out = tmp_path / "incident.tar.gz"
    out.write_text("keep me")
    args = ["collect", "pod/vllm-7b-7d9f8c6b5-m8wzt", "-o", str(out), "--window", "0"]
    with pytest.raises(SystemExit) as done:
        cli_run(args)
    assert done.value.code == 3 and "already exists" in capsys.readouterr().err
    assert out.read_text() == "keep me"
    with pytest.raises(SystemExit) as done:  # --force replaces only an llmdoctor bundle
        cli_run([*args, "--force", "--no-exec"])
    assert done.value.code == 3 and "is not an llmdoctor bundle" in capsys.readouterr().err
    assert out.read_text() == "keep me"
    out.unlink()
    for extra in ([], ["--force"]):
        with pytest.raises(SystemExit) as done:
            cli_run([*args, "--no-exec", *extra])
        assert done.value.code == 0 and tarfile.is_tarfile(out)


def test_deployment_gives_one_bundle_per_pod(cluster, tmp_path, capsys):
    cluster(scenario_healthy(replicas=2, nvidia_smi=False))
    out = tmp_path / "incident.tar.gz"
    with pytest.raises(SystemExit) as done:
        cli_run(["collect", "deploy/vllm-7b", "-o", str(out), "--window", "0", "--no-exec"])
    assert done.value.code == 0
    written = sorted(p.name for p in tmp_path.glob("incident-*.tar.gz"))
    assert written == [
        "incident-vllm-7b-7d9f8c6b5-m4v7r.tar.gz",
        "incident-vllm-7b-7d9f8c6b5-x2kqp.tar.gz",
    ]


def test_bundle_paths_for_folders_and_archives():
    assert [p.name for p in bundle_paths("out/x.tgz", ["a", "b"])] == ["x-a.tgz", "x-b.tgz"]
    assert [p.name for p in bundle_paths("out/folder", ["a", "b"])] == ["folder-a", "folder-b"]
    assert [str(p) for p in bundle_paths("x.tar.gz", ["only"])] == ["x.tar.gz"]


def test_secrets_in_the_pod_spec_are_redacted_in_the_bundle(cluster, tmp_path):
    # an env value named *TOKEN* and an hf_ token inside the args never reach the bundle
    scenario = scenario_crashloop_cuda_oom()
    pod = next(iter(scenario.cluster.pods.values()))
    container = pod["spec"]["containers"][0]
    token = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz0123"
    container["env"] = [{"name": "HUGGING_FACE_HUB_TOKEN", "value": token}]
    container["args"] = [*container["args"], "--hf-token", token]
    cluster(scenario)
    out = tmp_path / "b"
    with pytest.raises(SystemExit):
        cli_run(["collect", "pod/vllm-7b-7d9f8c6b5-m8wzt", "-o", str(out), "--window", "0"])
    text = (out / "k8s" / "pod.json").read_text()
    assert token not in text and "<redacted>" in text
