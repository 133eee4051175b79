"""What a restart says of the pod now: an init container that completed is done as designed, and
an OOM kill the container has since recovered from is a warning unless it recurs.

The shapes are the kubelet's (status.initContainerStatuses / containerStatuses with state and
lastState), written onto the shipped healthy bundle's real pod.json.
"""

from __future__ import annotations

import json
from pathlib import Path

from example_bundles import bundle, by_check, diagnose_json

OOM_KILL = {
    "exitCode": 137,
    "reason": "OOMKilled",
    "startedAt": "2025-09-01T00:40:00Z",
    "finishedAt": "2025-09-01T00:49:00Z",
}


def pod_bundle(tmp_path: Path, edit) -> Path:
    folder = bundle(tmp_path, "healthy-vllm-7b")
    path = folder / "k8s" / "pod.json"
    pod = json.loads(path.read_text())
    edit(pod)
    path.write_text(json.dumps(pod))
    return folder


def with_init_container(restarts: int, last_state: dict | None = None):
    def edit(pod: dict) -> None:
        pod["spec"]["initContainers"] = [{"name": "fetch-model", "image": "busybox"}]
        status = {
            "name": "fetch-model",
            "image": "busybox",
            "imageID": "docker.io/library/busybox@sha256:00",
            "ready": True,
            "restartCount": restarts,
            "state": {
                "terminated": {
                    "exitCode": 0,
                    "reason": "Completed",
                    "startedAt": "2025-09-04T00:50:00Z",
                    "finishedAt": "2025-09-04T00:58:00Z",
                }
            },
        }
        if last_state:
            status["lastState"] = {"terminated": last_state}
        pod["status"]["initContainerStatuses"] = [status]

    return edit


def with_oom_kills(restarts: int, ready: bool = True):
    def edit(pod: dict) -> None:
        (status,) = pod["status"]["containerStatuses"]
        status.update(restartCount=restarts, ready=ready, lastState={"terminated": OOM_KILL})

    return edit


def restarts(capsys, folder: Path) -> dict[str, dict]:
    _, report, _ = diagnose_json(capsys, folder, "--only", "pod-restarts")
    return {f["subject"]: f for f in by_check(report, "pod-restarts")}


def test_a_completed_init_container_is_no_outage(capsys, tmp_path):
    # a model-download init container that ran to exit 0 is what lets the server start
    found = restarts(capsys, pod_bundle(tmp_path, with_init_container(0)))
    assert found["container fetch-model"]["severity"] == "ok"
    assert found["container vllm"]["severity"] == "ok"


def test_an_init_container_oom_killed_then_completed_is_told_and_not_critical(capsys, tmp_path):
    found = restarts(capsys, pod_bundle(tmp_path, with_init_container(1, OOM_KILL)))
    init = found["container fetch-model"]
    assert init["severity"] == "warning"
    assert "OOMKilled" in init["summary"] and "completed after the restart" in init["summary"]
    assert "restarted once" in init["summary"]
    assert "k8s-oomkilled" in init["runbooks"]


def test_an_init_container_failing_now_is_still_told(capsys, tmp_path):
    def failing(pod: dict) -> None:
        with_init_container(3)(pod)
        (status,) = pod["status"]["initContainerStatuses"]
        status["ready"] = False
        status["state"] = {"waiting": {"reason": "CrashLoopBackOff"}}
        status["lastState"] = {"terminated": OOM_KILL}

    init = restarts(capsys, pod_bundle(tmp_path, failing))["container fetch-model"]
    assert init["severity"] == "critical"
    assert "running and ready" not in init["summary"]


def test_one_oom_kill_recovered_from_is_a_warning(capsys, tmp_path):
    (found,) = restarts(capsys, pod_bundle(tmp_path, with_oom_kills(1))).values()
    assert found["severity"] == "warning"
    assert "running and ready now" in found["summary"]
    assert "k8s-oomkilled" in found["runbooks"]


def test_a_recurring_oom_kill_stays_critical_though_ready_now(capsys, tmp_path):
    (found,) = restarts(capsys, pod_bundle(tmp_path, with_oom_kills(2))).values()
    assert found["severity"] == "critical"
    assert "restarted 2 times" in found["summary"]


def test_an_oom_kill_with_the_container_not_ready_is_critical(capsys, tmp_path):
    (found,) = restarts(capsys, pod_bundle(tmp_path, with_oom_kills(1, ready=False))).values()
    assert found["severity"] == "critical"


def test_an_init_containers_own_memory_limit_is_told(capsys, tmp_path):
    def limited(pod: dict) -> None:
        with_init_container(1, OOM_KILL)(pod)
        pod["spec"]["initContainers"][0]["resources"] = {"limits": {"memory": "2Gi"}}

    init = restarts(capsys, pod_bundle(tmp_path, limited))["container fetch-model"]
    assert "its memory limit of 2Gi" in init["summary"]


def test_a_sidecar_init_container_that_exited_is_not_done(capsys, tmp_path):
    # restartPolicy Always on an init container (Kubernetes 1.29+): a sidecar, it never completes
    def sidecar(pod: dict) -> None:
        with_init_container(0)(pod)
        pod["spec"]["initContainers"][0]["restartPolicy"] = "Always"

    found = restarts(capsys, pod_bundle(tmp_path, sidecar))["container fetch-model"]
    assert found["severity"] == "warning" and "is not running" in found["summary"]


def test_a_completed_init_container_without_its_exit_code_is_done(capsys, tmp_path):
    def no_code(pod: dict) -> None:
        with_init_container(0)(pod)
        del pod["status"]["initContainerStatuses"][0]["state"]["terminated"]["exitCode"]

    assert (
        restarts(capsys, pod_bundle(tmp_path, no_code))["container fetch-model"]["severity"] == "ok"
    )


def test_an_evicted_pod_is_not_said_to_restart(capsys, tmp_path):
    message = "The node was low on resource: memory. Container vllm was using 61Gi."

    def evicted(pod: dict) -> None:
        pod["status"].update(phase="Failed", reason="Evicted", message=message)
        (status,) = pod["status"]["containerStatuses"]
        status.update(ready=False, restartCount=2, lastState={"terminated": OOM_KILL})
        status["state"] = {"terminated": {"exitCode": 137, "reason": "ContainerStatusUnknown"}}

    (found,) = restarts(capsys, pod_bundle(tmp_path, evicted)).values()
    assert found["severity"] == "critical"
    assert "evicted" in found["summary"] and message in found["summary"]
    assert "starts it again" not in found["summary"]
    assert "k8s-oomkilled" in found["runbooks"]  # the OOM kill in lastState is not hidden


def test_an_oom_kill_under_never_names_the_oom(capsys, tmp_path):
    def never(pod: dict) -> None:
        pod["spec"]["restartPolicy"] = "Never"
        pod["status"]["phase"] = "Failed"
        (status,) = pod["status"]["containerStatuses"]
        status.update(ready=False, state={"terminated": OOM_KILL})

    (found,) = restarts(capsys, pod_bundle(tmp_path, never)).values()
    assert found["severity"] == "critical" and "k8s-oomkilled" in found["runbooks"]
    assert "OOMKilled: exceeded its memory limit" in found["summary"]
    assert "will not be restarted" in found["summary"]


def test_a_crash_loop_caught_between_back_offs_is_critical(capsys, tmp_path):
    # between two back-offs the kubelet shows the failed run as terminated, not waiting
    def between(pod: dict) -> None:
        (status,) = pod["status"]["containerStatuses"]
        status.update(ready=False, restartCount=3)
        status["state"] = {"terminated": {"exitCode": 1, "reason": "Error"}}

    (found,) = restarts(capsys, pod_bundle(tmp_path, between)).values()
    assert (
        found["severity"] == "critical" and "crash-looping: restarted 3 times" in found["summary"]
    )


def test_a_first_oom_kill_not_yet_restarted(capsys, tmp_path):
    def first(pod: dict) -> None:
        (status,) = pod["status"]["containerStatuses"]
        status.update(ready=False, restartCount=0, state={"terminated": OOM_KILL})

    (found,) = restarts(capsys, pod_bundle(tmp_path, first)).values()
    assert found["severity"] == "critical" and "not restarted yet" in found["summary"]
    assert "0 times" not in found["summary"]


def test_a_recurring_oom_kill_says_it_is_serving_now(capsys, tmp_path):
    (found,) = restarts(capsys, pod_bundle(tmp_path, with_oom_kills(3))).values()
    assert found["severity"] == "critical"
    assert "the last for this kill" in found["summary"]
    assert "running and ready now" in found["summary"]


def test_a_completed_init_container_never_says_not_restarted_and_restarted(capsys, tmp_path):
    # restartCount 0 beside an OOMKilled lastState (a status the hostile pass wrote): the summary
    # said "not restarted yet, completed after the restart"
    found = restarts(capsys, pod_bundle(tmp_path, with_init_container(0, OOM_KILL)))
    summary = found["container fetch-model"]["summary"]
    assert "completed after the restart" in summary and "not restarted yet" not in summary
