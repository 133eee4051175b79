"""A kubeconfig pointing at something that is not a Kubernetes API server is said so, not
reported as "pod not found"; a real NotFound still is."""

from __future__ import annotations

import pytest
from k8s_server import FakeCluster, K8sServer, Running, scenario_healthy
from vllm_server import FakeVllmServer

from llmdoctor.cli import run


def diagnose(capsys, *args: str) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exc:
        run(["diagnose", *args, "--no-exec", "--window", "0", "--timeout", "3"])
    return int(exc.value.code or 0), capsys.readouterr().err


def test_a_server_answering_404_to_everything_is_not_a_missing_pod(tmp_path, monkeypatch, capsys):
    # issue 12: a vLLM server (FastAPI's {"detail": "Not Found"} 404) behind the kubeconfig's
    # server URL made `diagnose pod/x` say "pod/x not found in namespace serving"
    server = K8sServer(FakeCluster())
    kubeconfig = server.write_kubeconfig(tmp_path / "kubeconfig")
    server.server_close()
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with FakeVllmServer() as vllm:
        kubeconfig.write_text(kubeconfig.read_text().replace(server.url, vllm.url))
        monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
        code, err = diagnose(capsys, "pod/vllm-7b-7d9f8c6b5-x2kqp")
        asked = [path for _, path, _ in vllm.requests]
    assert code == 3 and err.count("\n") == 1
    assert "not found in namespace" not in err
    assert "404 without a Kubernetes Status" in err and "Not Found" in err
    assert asked == ["/api/v1/namespaces/serving/pods/vllm-7b-7d9f8c6b5-x2kqp"]


def test_a_real_not_found_status_is_still_a_missing_pod(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with Running(scenario_healthy(nvidia_smi=False), tmp_path / "kubeconfig") as running:
        monkeypatch.setenv("KUBECONFIG", str(running.kubeconfig))
        code, err = diagnose(capsys, "pod/no-such-pod")
    assert code == 3 and "pod/no-such-pod not found in namespace serving" in err
