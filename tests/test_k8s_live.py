"""`llmdoctor diagnose pod/deploy/sts/-l` end to end: the real `kubernetes` client (and
requests, websocket-client for exec) against tests/k8s_server.py on 127.0.0.1."""

from __future__ import annotations

import json

import pytest
from k8s_server import (
    Running,
    load,
    read_text,
    scenario_crashloop_cuda_oom,
    scenario_gpu_unschedulable,
    scenario_healthy,
    scenario_oomkilled,
    scenario_probe_killed,
    scenario_saturated,
)

from llmdoctor.cli import run as cli_run


@pytest.fixture
def cluster(tmp_path, monkeypatch):
    """Start a scenario; KUBECONFIG points at it (and only at it)."""
    started = []

    def start(scenario, delay: float = 0.0) -> Running:
        running = Running(scenario, tmp_path / "kubeconfig", delay).__enter__()
        started.append(running)
        monkeypatch.setenv("KUBECONFIG", str(running.kubeconfig))
        monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
        return running

    yield start
    for running in started:
        running.__exit__(None, None, None)


def diagnose(capsys, *args: str) -> tuple[int, dict]:
    with pytest.raises(SystemExit) as exit_info:
        cli_run(["diagnose", *args, "--json", "--timeout", "5"])
    out = capsys.readouterr().out
    return exit_info.value.code, json.loads(out)


def findings(report: dict, check: str) -> list[dict]:
    return [f for f in report["findings"] if f["check"] == check]


def requests_to(running: Running, path_part: str) -> list[tuple[str, str, dict]]:
    return [r for r in running.server.requests if path_part in r[1]]


def test_gpu_unschedulable_statefulset_pod(cluster, capsys):
    # sts/vllm on AKS: vllm-1 Pending with "2 Insufficient nvidia.com/gpu"
    running = cluster(scenario_gpu_unschedulable())
    code, report = diagnose(capsys, "sts/vllm", "-n", "llm", "--window", "0")
    assert code == 2 and report["target"] == "statefulset/vllm -n llm"
    (f,) = findings(report, "pod-scheduling")
    assert f["severity"] == "critical" and f["runbooks"] == ["k8s-gpu-unschedulable"]
    assert "requests 1 nvidia.com/gpu" in f["summary"]
    assert "2 of 2 GPU nodes are big enough" in f["summary"]
    # the pod selector came from the StatefulSet; the GPU nodes were listed
    (pods,) = requests_to(running, "/namespaces/llm/pods")
    assert pods[2]["labelSelector"] == ["app=vllm"]
    assert requests_to(running, "/api/v1/nodes")
    assert not requests_to(running, "/log"), "no log request for a container that never started"


def test_oomkilled_pod_reads_current_and_previous_log(cluster, capsys):
    running = cluster(scenario_oomkilled())
    code, report = diagnose(
        capsys, "pod/vllm-7b-7d9f8c6b5-q4rnv", "-n", "serving", "--no-exec", "--window", "0"
    )
    assert code == 2
    (f,) = findings(report, "pod-restarts")
    assert f["severity"] == "critical" and "k8s-oomkilled" in f["runbooks"]
    assert "16Gi" in f["summary"]
    logs = requests_to(running, "/log")
    assert {r[2].get("previous", ["false"])[0] for r in logs} == {"true", "false"}
    assert all(r[2]["tailLines"] == ["2000"] for r in logs)


def test_crash_loop_tied_to_the_cuda_oom_in_the_previous_log(cluster, capsys):
    cluster(scenario_crashloop_cuda_oom())
    code, report = diagnose(
        capsys, "pod/vllm-7b-7d9f8c6b5-m8wzt", "-n", "serving", "--no-exec", "--window", "0"
    )
    assert code == 2
    (restarts,) = findings(report, "pod-restarts")
    assert "CrashLoopBackOff" in restarts["summary"]
    # the OOM came right after the weights loaded, before it served: a start-up that does not fit
    assert restarts["runbooks"] == ["vllm-startup-memory-insufficient"]
    # the OOM is reported once, by the most specific check (memory-fragmentation supersedes
    # the generic log-signatures finding for the same runbook)
    oom = [
        f
        for f in report["findings"]
        if "cuda-oom-runtime" in f["runbooks"] and f["check"] != "pod-restarts"
    ]
    assert len(oom) == 1 and oom[0]["evidence"][0]["source"] == "logs/vllm.previous.log"
    assert isinstance(oom[0]["evidence"][0]["line"], int)
    # nothing listens on the port: the proxy's 503 is read as "connection refused", worded as a
    # consequence of the crash loop and ranked under it (a warning, not a second critical)
    health = [f for f in findings(report, "vllm-health") if f.get("subject") == "endpoint /health"]
    assert health and "connection refused" in health[0]["summary"]
    assert health[0]["severity"] == "warning" and "consequence" in health[0]["summary"]


def test_probe_killing_a_loading_pod(cluster, capsys):
    cluster(scenario_probe_killed())
    code, report = diagnose(
        capsys, "pod/vllm-qwen2-7b-6c9d8f7b4-kx2vq", "-n", "serving", "--no-exec", "--window", "0"
    )
    assert code == 2
    (f,) = findings(report, "pod-probes")
    assert f["severity"] == "critical" and f["runbooks"] == ["probe-killed-during-load"]
    assert "livenessProbe" in f["summary"] and "no startupProbe" in f["summary"]


def test_healthy_pod_whose_queue_is_saturated(cluster, capsys):
    # vLLM answers through pods/NAME:8081/proxy; two /metrics scrapes 0.2s apart
    running = cluster(scenario_saturated())
    code, report = diagnose(
        capsys, "pod/vllm-7b-tp2-5b8d9c7f6-w4nzp", "-n", "serving", "--no-exec", "--window", "0.2"
    )
    assert code == 2
    (queue,) = findings(report, "vllm-queue")
    assert queue["severity"] == "critical" and "queue-saturation" in queue["runbooks"]
    pod_problems = [
        f
        for f in report["findings"]
        if f["check"].startswith("pod-") and f["severity"] in ("warning", "critical")
    ]
    assert pod_problems == [], "the pod itself is healthy"
    assert [f["severity"] for f in findings(report, "pod-shm")] == ["ok"]  # TP=2 with 8Gi shm
    proxied = requests_to(running, ":8081/proxy/metrics")
    assert len(proxied) == 2


def test_logs_forbidden_becomes_a_fact_and_the_rest_still_runs(cluster, capsys):
    scenario = scenario_oomkilled()
    scenario.cluster.forbidden.add(("get", "pods/log"))
    cluster(scenario)
    code, report = diagnose(
        capsys, "pod/vllm-7b-7d9f8c6b5-q4rnv", "-n", "serving", "--no-exec", "--window", "0"
    )
    assert code == 2  # the OOMKilled finding comes from the Pod object, which was readable
    assert findings(report, "pod-restarts")[0]["severity"] == "critical"
    why = "forbidden: cannot get pods/log in namespace serving (RBAC: add 'get' on 'pods/log'"
    skipped = {s["check"]: s["reason"] for s in report["skipped"]}
    assert why in skipped["log-signatures"]
    errors = {e.get("collector"): e["message"] for e in report["errors"]}
    assert errors["kubernetes pods/log"].startswith(why)


def test_deployment_pods_are_diagnosed_together_and_grouped_by_pod(cluster, capsys):
    # deploy/vllm-7b selects 2 healthy pods and the OOMKilled one
    scenario = scenario_healthy(replicas=2, nvidia_smi=False)
    oom = scenario_oomkilled()
    scenario.cluster.pods.update(oom.cluster.pods)
    scenario.cluster.events.update(oom.cluster.events)
    scenario.cluster.logs.update(oom.cluster.logs)
    cluster(scenario)
    code, report = diagnose(capsys, "deploy/vllm-7b", "-n", "serving", "--no-exec", "--window", "0")
    assert code == 2 and report["status"] == "critical"
    subjects = {f["subject"].split(" ")[0] for f in report["findings"] if f.get("subject")}
    assert subjects == {
        "pod/vllm-7b-7d9f8c6b5-x2kqp",
        "pod/vllm-7b-7d9f8c6b5-m4v7r",
        "pod/vllm-7b-7d9f8c6b5-q4rnv",
    }
    (oom_finding,) = [f for f in findings(report, "pod-restarts") if f["severity"] == "critical"]
    assert oom_finding["subject"] == "pod/vllm-7b-7d9f8c6b5-q4rnv container vllm"


def test_init_container_logs_are_read_too(cluster, capsys):
    # a model-download init container failing on a gated repo (Init:CrashLoopBackOff)
    scenario = scenario_healthy(nvidia_smi=False)
    pod = next(iter(scenario.cluster.pods.values()))
    name = pod["metadata"]["name"]
    pod["spec"]["initContainers"] = [
        {
            "name": "download-model",
            "image": "python:3.12-slim",
            "command": ["huggingface-cli", "download", "meta-llama/Llama-3.2-1B-Instruct"],
        }
    ]
    pod["status"]["initContainerStatuses"] = [
        {
            "name": "download-model",
            "restartCount": 2,
            "ready": False,
            "state": {"waiting": {"reason": "CrashLoopBackOff"}},
            "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}},
        }
    ]
    text = read_text("logs/init-download-gated-repo-401.log")
    scenario.cluster.add_log("serving", name, "download-model", text)
    scenario.cluster.add_log("serving", name, "download-model", text, previous=True)
    cluster(scenario)
    code, report = diagnose(capsys, f"pod/{name}", "--no-exec", "--window", "0")
    assert code == 2
    # reported once: by pod-restarts, which names the init container's crash loop and its cause;
    # a 401 on a gated repo is hf-gated-model, which explains model-download-failure, so the
    # finding keeps the cause's runbook and no second finding names the download failure
    download = [f for f in report["findings"] if "hf-gated-model" in f["runbooks"]]
    assert len(download) == 1
    assert not [f for f in report["findings"] if "model-download-failure" in f["runbooks"]]
    sources = [e.get("source", "") for e in download[0]["evidence"]]
    assert any(s.startswith("logs/download-model") for s in sources)


def test_label_selector(cluster, capsys):
    cluster(scenario_healthy(replicas=2, nvidia_smi=False))
    code, report = diagnose(
        capsys, "-l", "app=vllm-7b", "-n", "serving", "--no-exec", "--window", "0"
    )
    assert report["target"] == "pods -l app=vllm-7b -n serving"
    assert code in (0, 1)
    assert {f["subject"].split(" ")[0] for f in report["findings"] if f.get("subject")} == {
        "pod/vllm-7b-7d9f8c6b5-x2kqp",
        "pod/vllm-7b-7d9f8c6b5-m4v7r",
    }


def test_exec_runs_nvidia_smi_and_the_env_probe_in_the_serving_container(cluster):
    # pods/exec over a websocket (v4.channel.k8s.io) into container "vllm"
    from llmdoctor.collectors.kubernetes import collect
    from llmdoctor.engine.collect import CollectContext
    from llmdoctor.engine.target import parse_target

    running = cluster(scenario_healthy())
    target = parse_target("pod/vllm-7b-7d9f8c6b5-x2kqp")
    (facts,) = collect(target, CollectContext(target, 5.0, {"window": 0}))
    assert facts.get("node/nvidia-smi.xml") == read_text("exec/nvidia-smi-l4x2-555.42.06.xml")
    assert facts.get("node/versions.json") == load("exec/versions-vllm-0.10.1.1.json")
    commands = {tuple(c[:2]): c for _, container, c in running.server.exec_commands}
    assert ("nvidia-smi", "-q") in commands and commands[("nvidia-smi", "-q")][2] == "-x"
    assert "serving" in commands[("python3", "-c")][2]  # the probe script's text
    assert {container for _, container, _ in running.server.exec_commands} == {"vllm"}
    assert facts.get("k8s/owner.json")["kind"] == "Deployment"  # via the ReplicaSet
    assert facts.get("k8s/node.json")["metadata"]["name"] == "gpu-a100-node-3"


def test_exec_forbidden_names_the_optional_role(cluster):
    from llmdoctor.collectors.kubernetes import collect
    from llmdoctor.engine.collect import CollectContext
    from llmdoctor.engine.target import parse_target

    scenario = scenario_healthy()
    scenario.cluster.forbidden.add(("create", "pods/exec"))
    cluster(scenario)
    target = parse_target("pod/vllm-7b-7d9f8c6b5-x2kqp")
    (facts,) = collect(target, CollectContext(target, 5.0, {"window": 0}))
    reason = facts.missing_reason("node/nvidia-smi.xml")
    assert reason.startswith("forbidden: cannot create pods/exec in namespace serving")
    assert facts.collector_errors["kubernetes pods/exec"] == reason
    assert facts.has("logs/vllm.log") and facts.has("vllm/metrics-0.txt")


def test_missing_nvidia_smi_in_the_image_is_a_clean_fact(cluster):
    # the runtime's real "executable file not found in $PATH" answer
    from llmdoctor.collectors.kubernetes import collect
    from llmdoctor.engine.collect import CollectContext
    from llmdoctor.engine.target import parse_target

    cluster(scenario_healthy(nvidia_smi=False))
    target = parse_target("pod/vllm-7b-7d9f8c6b5-x2kqp")
    (facts,) = collect(target, CollectContext(target, 5.0, {"window": 0}))
    assert "nvidia-smi is not in the serving container's image" in facts.missing_reason(
        "node/nvidia-smi.xml"
    )
    assert "kubernetes pods/exec" not in facts.collector_errors


def test_no_exec_sends_no_exec_request(cluster, capsys):
    running = cluster(scenario_healthy())
    diagnose(capsys, "pod/vllm-7b-7d9f8c6b5-x2kqp", "--no-exec", "--window", "0")
    assert running.server.exec_commands == []


def test_proxy_forbidden_is_a_fact_not_an_unhealthy_server(cluster, capsys):
    scenario = scenario_healthy(nvidia_smi=False)
    scenario.cluster.forbidden.add(("get", "pods/proxy"))
    cluster(scenario)
    code, report = diagnose(capsys, "pod/vllm-7b-7d9f8c6b5-x2kqp", "--no-exec", "--window", "0")
    errors = {e.get("collector"): e["message"] for e in report["errors"]}
    assert errors["kubernetes pods/proxy"].startswith(
        "forbidden: cannot get pods/proxy in namespace serving"
    )
    assert not [f for f in report["findings"] if f["check"].startswith("vllm-")]
    assert code in (0, 1)


def test_proxy_post_forbidden_only_skips_the_generation_probe(cluster):
    # get on pods/proxy granted, create (POST) not: metrics are read, the probe is not sent
    from llmdoctor.collectors.kubernetes import collect
    from llmdoctor.engine.collect import CollectContext
    from llmdoctor.engine.target import parse_target

    scenario = scenario_healthy(nvidia_smi=False)
    scenario.cluster.forbidden.add(("create", "pods/proxy"))
    cluster(scenario)
    target = parse_target("pod/vllm-7b-7d9f8c6b5-x2kqp")
    (facts,) = collect(target, CollectContext(target, 5.0, {"window": 0, "no_exec": True}))
    assert facts.has("vllm/metrics-0.txt") and facts.has("vllm/health.json")
    assert facts.missing_reason("vllm/probe.json").startswith(
        "forbidden: cannot create pods/proxy in namespace serving"
    )


def test_events_forbidden_still_reads_status(cluster, capsys):
    scenario = scenario_oomkilled()
    scenario.cluster.forbidden.add(("list", "events"))
    cluster(scenario)
    code, report = diagnose(capsys, "pod/vllm-7b-7d9f8c6b5-q4rnv", "--no-exec", "--window", "0")
    assert code == 2
    errors = {e.get("collector"): e["message"] for e in report["errors"]}
    assert errors["kubernetes events"].startswith("forbidden: cannot list events")


def test_unknown_pod_is_a_one_line_error(cluster, capsys):
    cluster(scenario_healthy(nvidia_smi=False))
    with pytest.raises(SystemExit) as exit_info:
        cli_run(["diagnose", "pod/nope", "-n", "serving"])
    assert exit_info.value.code == 3
    err = capsys.readouterr().err
    assert err.strip() == "llmdoctor: pod/nope not found in namespace serving"


def test_pod_read_forbidden_exits_3_naming_the_permission(cluster, capsys):
    scenario = scenario_healthy(nvidia_smi=False)
    scenario.cluster.forbidden.add(("get", "pods"))
    cluster(scenario)
    with pytest.raises(SystemExit) as exit_info:
        cli_run(["diagnose", "pod/vllm-7b-7d9f8c6b5-x2kqp", "--no-exec", "--window", "0"])
    assert exit_info.value.code == 3
    assert "forbidden: cannot get pods in namespace serving" in capsys.readouterr().err


def test_unreachable_api_server_is_a_one_line_error(tmp_path, monkeypatch, capsys):
    # a kubeconfig naming a closed local port
    import socket

    from k8s_server import FakeCluster, K8sServer

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = K8sServer(FakeCluster())
    kubeconfig = server.write_kubeconfig(tmp_path / "kubeconfig")
    server.server_close()
    kubeconfig.write_text(kubeconfig.read_text().replace(server.url, f"http://127.0.0.1:{port}"))
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    with pytest.raises(SystemExit) as exit_info:
        cli_run(["diagnose", "pod/x", "--timeout", "2"])
    assert exit_info.value.code == 3
    err = capsys.readouterr().err
    assert "cannot reach the Kubernetes API server" in err and "Traceback" not in err


def test_unknown_context_is_a_one_line_error(cluster, capsys):
    cluster(scenario_healthy(nvidia_smi=False))
    with pytest.raises(SystemExit) as exit_info:
        cli_run(["diagnose", "pod/x", "--context", "prod"])
    assert exit_info.value.code == 3
    assert "kubeconfig" in capsys.readouterr().err


def test_selector_and_target_together_are_refused(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli_run(["diagnose", "deploy/x", "-l", "app=x"])
    assert exit_info.value.code == 3
    assert "either a target or -l" in capsys.readouterr().err
