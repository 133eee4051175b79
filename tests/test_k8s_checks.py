"""The pod checks (checks/pod_*.py) on real-format Pod/Event/Node objects, without a cluster."""

from __future__ import annotations

import copy

import pytest
from k8s_server import load, read_text

from llmdoctor.engine.facts import Facts
from llmdoctor.engine.findings import Severity
from llmdoctor.engine.registry import all_checks
from llmdoctor.engine.textsource import TextSource
from llmdoctor.parsers.k8s_pod import go_duration, probe_budget, quantity
from llmdoctor.parsers.serving_args import serving_args

NOW = 1756949400.0  # 2025-09-04T01:30:00Z, the collection time of the vllm-7b fixtures


def facts_for(pod: dict, events=None, logs: dict[str, str] | None = None, **extra) -> Facts:
    facts = Facts({"k8s/pod.json": pod, "time/now": NOW, **extra})
    if events is not None:
        facts.set("k8s/events.json", events)
    for key, text in (logs or {}).items():
        facts.set(key, TextSource.from_text(key, text))
    facts.set("serving/args", serving_args(facts))
    return facts


def run(check_id: str, facts: Facts):
    spec = next(c for c in all_checks() if c.id == check_id)
    produced = spec.fn(facts)
    return produced if isinstance(produced, list) else [produced]


def one(check_id: str, facts: Facts):
    findings = run(check_id, facts)
    assert len(findings) == 1, findings
    return findings[0]


def healthy() -> dict:
    return load("pod-vllm-7b-healthy.json")


def event(reason: str, message: str, when: str = "2025-09-04T01:20:00Z", kind="Normal") -> dict:
    return {
        "kind": "Event",
        "type": kind,
        "reason": reason,
        "message": message,
        "count": 1,
        "firstTimestamp": when,
        "lastTimestamp": when,
        "involvedObject": {"kind": "Pod", "name": "vllm-7b-7d9f8c6b5-x2kqp"},
    }


# -- pod-scheduling ---------------------------------------------------------------------------


def test_pending_with_insufficient_gpu_names_requested_and_allocatable():
    # AKS: 0/3 nodes, 2 Insufficient nvidia.com/gpu; both T4 nodes have 1 allocatable GPU
    nodes = {
        "kind": "List",
        "items": [load(f"node-aks-gpunp-vmss{i}.json") for i in ("000002", "000003")],
    }
    facts = facts_for(
        load("pod-vllm-1-pending-aks.json"),
        load("events-vllm-1-pending-aks.json"),
        **{"k8s/gpu-nodes.json": nodes},
    )
    f = one("pod-scheduling", facts)
    assert f.severity is Severity.CRITICAL and f.runbooks == ["k8s-gpu-unschedulable"]
    assert "requests 1 nvidia.com/gpu" in f.summary and "2 of 3 nodes" in f.summary
    assert "2 of 2 GPU nodes are big enough" in f.summary
    texts = " | ".join(e["text"] for e in f.evidence)
    assert "allocatable nvidia.com/gpu 1" in texts and "TriggeredScaleUp" in texts


def test_pending_pod_asking_more_gpus_than_any_node_has():
    # 2 GPUs asked, the biggest node has 1: scaling the same pool can never help
    pod = load("pod-vllm-1-pending-aks.json")
    pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "2"
    nodes = {"items": [load("node-aks-gpunp-vmss000002.json")]}
    facts = facts_for(pod, load("events-vllm-1-pending-aks.json"), **{"k8s/gpu-nodes.json": nodes})
    assert "no node can ever fit it" in one("pod-scheduling", facts).summary


def test_pending_for_another_reason_is_not_called_a_gpu_problem():
    # Insufficient memory: critical, but no GPU runbook
    pod = load("pod-vllm-1-pending-aks.json")
    events = {
        "items": [
            event(
                "FailedScheduling",
                "0/4 nodes are available: 4 Insufficient memory. preemption: 0/4 nodes are "
                "available: 4 No preemption victims found for incoming pod..",
                kind="Warning",
            )
        ]
    }
    f = one("pod-scheduling", facts_for(pod, events))
    assert f.severity is Severity.CRITICAL and f.runbooks == []
    assert "Insufficient memory" in f.summary


def test_scheduled_pod_reports_its_node_gpus():
    # scheduled: ok, with the node's allocatable and product label
    facts = facts_for(healthy(), **{"k8s/node.json": load("node-gpu-a100-node-3.json")})
    f = one("pod-scheduling", facts)
    assert f.severity is Severity.OK and "NVIDIA-A100-SXM4-80GB" in f.summary


# -- pod-image-pull / pod-image-tag -------------------------------------------------------------


def test_image_pull_backoff_is_critical():
    # containerd's real NotFound text for a tag that does not exist
    pod = healthy()
    cs = pod["status"]["containerStatuses"][0]
    cs["state"] = {
        "waiting": {"reason": "ImagePullBackOff", "message": 'Back-off pulling image "x"'}
    }
    events = {
        "items": [
            event(
                "Failed",
                'Failed to pull image "vllm/vllm-openai:v0.10.9": rpc error: code = NotFound '
                'desc = failed to pull and unpack image "docker.io/vllm/vllm-openai:v0.10.9": '
                "not found",
                kind="Warning",
            )
        ]
    }
    f = one("pod-image-pull", facts_for(pod, events))
    assert f.severity is Severity.CRITICAL and f.runbooks == ["image-pull-slow"]
    assert any("Failed to pull image" in e["text"] for e in f.evidence)


def test_slow_pull_from_the_kubelet_pulled_event_warns():
    # kubelet >= 1.28 wording: "... in 6m32.1s (6m32.1s including waiting)"
    events = {
        "items": [
            event("Pulling", 'Pulling image "vllm/vllm-openai:v0.10.1.1"'),
            event(
                "Pulled",
                'Successfully pulled image "vllm/vllm-openai:v0.10.1.1" in 6m32.1s '
                "(6m32.1s including waiting)",
            ),
        ]
    }
    f = one("pod-image-pull", facts_for(healthy(), events))
    assert f.severity is Severity.WARNING and "6.5 min" in f.summary


def test_a_pull_still_running_after_ten_minutes_warns():
    # Pulling at 01:20, nothing since, collected at 01:30
    events = {"items": [event("Pulling", 'Pulling image "vllm/vllm-openai:v0.10.1.1"')]}
    f = one("pod-image-pull", facts_for(healthy(), events))
    assert f.severity is Severity.WARNING and "still pulling" in f.summary


def test_quick_pull_is_fine():
    # older kubelet wording, sub-second pull (real: "in 568.498558ms")
    events = {"items": [event("Pulled", 'Successfully pulled image "x" in 568.498558ms')]}
    assert one("pod-image-pull", facts_for(healthy(), events)).severity is Severity.OK


@pytest.mark.parametrize(
    ("image", "severity"),
    [
        ("vllm/vllm-openai:latest", Severity.WARNING),  # the vLLM docs' manifest uses :latest
        ("vllm/vllm-openai", Severity.WARNING),  # no tag means latest
        ("localhost:5000/vllm", Severity.WARNING),  # a registry port is not a tag
        ("vllm/vllm-openai:v0.10.1.1", Severity.OK),
        ("vllm/vllm-openai:latest@sha256:" + "a" * 64, Severity.OK),  # pinned by digest
    ],
)
def test_image_tags(image, severity):
    pod = healthy()
    pod["spec"]["containers"][0]["image"] = image
    pod["spec"]["containers"][0].pop("imagePullPolicy")
    assert one("pod-image-tag", facts_for(pod)).severity is severity


# -- pod-gpu-request ------------------------------------------------------------------------


def test_no_gpu_limit_means_no_gpu_in_the_container():
    pod = healthy()
    for kind in ("limits", "requests"):
        del pod["spec"]["containers"][0]["resources"][kind]["nvidia.com/gpu"]
    f = one("pod-gpu-request", facts_for(pod))
    assert f.severity is Severity.CRITICAL and f.runbooks == ["gpu-not-visible"]


def test_tensor_parallel_above_the_gpus_given():
    # -tp 2 in a container with one GPU
    pod = healthy()
    pod["spec"]["containers"][0]["args"] += ["--tensor-parallel-size", "2"]
    f = one("pod-gpu-request", facts_for(pod))
    assert f.severity is Severity.CRITICAL and "needs 2 GPUs" in f.summary


def test_gpus_through_nvidia_visible_devices_bypass_the_scheduler():
    pod = healthy()
    c = pod["spec"]["containers"][0]
    for kind in ("limits", "requests"):
        del c["resources"][kind]["nvidia.com/gpu"]
    c["env"].append({"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"})
    assert one("pod-gpu-request", facts_for(pod)).severity is Severity.WARNING


def test_one_gpu_for_one_worker_is_fine():
    assert one("pod-gpu-request", facts_for(healthy())).severity is Severity.OK


# -- pod-shm ----------------------------------------------------------------------------------


def tp2(pod: dict) -> dict:
    pod["spec"]["containers"][0]["args"] += ["--tensor-parallel-size", "2"]
    return pod


def test_tensor_parallel_without_dev_shm_is_critical():
    pod = tp2(healthy())
    pod["spec"]["containers"][0]["volumeMounts"] = []
    f = one("pod-shm", facts_for(pod))
    assert f.severity is Severity.CRITICAL and f.runbooks == ["shm-too-small"]


def test_tensor_parallel_with_memory_backed_dev_shm_is_fine():
    # emptyDir medium Memory, sizeLimit 8Gi
    assert one("pod-shm", facts_for(tp2(healthy()))).severity is Severity.OK


def test_small_dev_shm_for_tensor_parallel_warns():
    pod = tp2(healthy())
    pod["spec"]["volumes"][0]["emptyDir"]["sizeLimit"] = "512Mi"
    assert one("pod-shm", facts_for(pod)).severity is Severity.WARNING


def test_disk_backed_dev_shm_warns():
    pod = tp2(healthy())
    pod["spec"]["volumes"][0]["emptyDir"] = {}
    assert one("pod-shm", facts_for(pod)).severity is Severity.WARNING


def test_host_ipc_shares_the_hosts_dev_shm():
    pod = tp2(healthy())
    pod["spec"]["containers"][0]["volumeMounts"] = []
    pod["spec"]["hostIPC"] = True
    assert one("pod-shm", facts_for(pod)).severity is Severity.OK


def test_single_gpu_needs_no_big_dev_shm():
    pod = healthy()
    pod["spec"]["containers"][0]["volumeMounts"] = []
    assert one("pod-shm", facts_for(pod)).severity is Severity.OK


# -- pod-probes -------------------------------------------------------------------------------


def probe_killed_facts(**changes) -> Facts:
    return facts_for(
        load("pod-vllm-qwen2-7b-probe-killed.json"),
        load("events-vllm-qwen2-7b-probe-killed.json"),
        {
            "logs/vllm.log": read_text("logs/probe-killed.log"),
            "logs/vllm.previous.log": read_text("logs/probe-killed.previous.log"),
        },
        **changes,
    )


def test_liveness_probe_killing_a_loading_model_is_critical():
    # 60s + 3 x 10s = 90s, no startupProbe; the killed container's log stops mid-load
    f = one("pod-probes", probe_killed_facts())
    assert f.severity is Severity.CRITICAL and f.runbooks == ["probe-killed-during-load"]
    assert "budget is 90s" in f.summary and "no startupProbe" in f.summary
    texts = " | ".join(e["text"] for e in f.evidence)
    assert "failed liveness probe, will be restarted" in texts
    assert "killed after 72s" in texts


def test_startup_probe_covering_the_load_is_ok():
    # healthy: startupProbe 60 x 10s = 600s against a 137s load
    facts = facts_for(
        healthy(), {"items": []}, {"logs/vllm.log": read_text("logs/qwen2-7b-tp1-startup.log")}
    )
    f = one("pod-probes", facts)
    assert f.severity is Severity.OK and "137s" in f.summary


def test_liveness_budget_close_to_the_load_time_warns():
    # liveness 150s + 3 x 10s = 180s, no startupProbe, a 137s load: under 1.5x margin, warn
    pod = healthy()
    c = pod["spec"]["containers"][0]
    c.pop("startupProbe")
    c["livenessProbe"] = {"httpGet": {"path": "/health", "port": 8081}, "initialDelaySeconds": 150}
    facts = facts_for(
        pod, {"items": []}, {"logs/vllm.log": read_text("logs/qwen2-7b-tp1-startup.log")}
    )
    f = one("pod-probes", facts)
    assert f.severity is Severity.WARNING and f.runbooks == ["probe-killed-during-load"]


def test_liveness_kill_after_the_model_had_loaded_points_at_a_hung_engine():
    # the previous container reached "Application startup complete" and was killed later
    facts = probe_killed_facts()
    facts.set(
        "logs/vllm.previous.log",
        TextSource.from_text("logs/vllm.previous.log", read_text("logs/qwen2-7b-tp1-startup.log")),
    )
    f = one("pod-probes", facts)
    assert f.severity is Severity.WARNING and f.runbooks == ["engine-dead"]


def test_no_probes_nothing_can_kill_the_load():
    pod = healthy()
    c = pod["spec"]["containers"][0]
    for probe in ("startupProbe", "readinessProbe"):
        c.pop(probe)
    assert one("pod-probes", facts_for(pod)).severity is Severity.OK


# -- pod-enforce-eager ------------------------------------------------------------------------


def test_enforce_eager_flag_warns():
    pod = healthy()
    pod["spec"]["containers"][0]["args"].append("--enforce-eager")
    f = one("pod-enforce-eager", facts_for(pod))
    assert f.severity is Severity.WARNING and f.runbooks == ["enforce-eager-in-production"]


def test_enforce_eager_seen_in_the_engine_config_log_line():
    # arguments baked into the image: the startup log's engine config tells
    pod = load("pod-vllm-1-pending-aks.json")
    line = (
        "(EngineCore_0 pid=1812) INFO 09-04 01:02:54 [core.py:74] Initializing a V1 LLM engine "
        "(v0.10.1.1) with config: model='Qwen2-7B-Instruct', enforce_eager=True, kv_cache_dtype=auto"
    )
    f = one("pod-enforce-eager", facts_for(pod, logs={"logs/vllm.log": line}))
    assert f.severity is Severity.WARNING and f.evidence[0]["source"] == "logs/vllm.log"


def test_cuda_graphs_on_is_fine():
    assert one("pod-enforce-eager", facts_for(healthy())).severity is Severity.OK


# -- helpers ----------------------------------------------------------------------------------


def test_quantities_durations_and_probe_budgets():
    assert quantity("1Gi") == 2**30 and quantity("500m") == 0.5 and quantity("8") == 8
    assert go_duration("4m32.5s") == 272.5 and go_duration("568.498558ms") == pytest.approx(
        0.568498558
    )
    assert go_duration("soon") is None
    # defaults: period 10, failureThreshold 3
    assert probe_budget({"initialDelaySeconds": 60}) == 90
    assert probe_budget(copy.deepcopy({"periodSeconds": 10, "failureThreshold": 60})) == 600
