"""A serving container that exited and that the kubelet will not start again.

Real vLLM 0.32 exits with code 0 after its worker is killed and the engine dies (the drill's
capture, tests/fixtures/real-vllm-0.32/dead/exit.json): under restartPolicy OnFailure the pod
then reads Completed and nothing serves, which a ✓ "no restarts" would hide.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from example_bundles import bundle, by_check, diagnose_json

ROOT = Path(__file__).resolve().parents[1]
DEAD = ROOT / "tests" / "fixtures" / "real-vllm-0.32" / "dead"


def ended_bundle(tmp_path: Path, policy: str, exit_code: int) -> Path:
    folder = bundle(tmp_path, "healthy-vllm-7b")
    pod_path = folder / "k8s" / "pod.json"
    pod = json.loads(pod_path.read_text())
    pod["spec"]["restartPolicy"] = policy
    # the kubelet's phase: a container it will not start again ends the pod, one it restarts
    # leaves it Running
    if exit_code == 0 and policy != "Always":
        pod["status"]["phase"] = "Succeeded"
    elif policy == "Never":
        pod["status"]["phase"] = "Failed"
    (status,) = pod["status"]["containerStatuses"]
    status.update(ready=False, started=False)
    status["state"] = {
        "terminated": {
            "exitCode": exit_code,
            "reason": "Completed" if exit_code == 0 else "Error",
            "startedAt": "2025-09-04T00:58:15Z",
            "finishedAt": "2025-09-04T02:11:40Z",
        }
    }
    pod_path.write_text(json.dumps(pod))
    shutil.copy(DEAD / "server.log", folder / "logs" / "vllm.log")
    return folder


def restarts_findings(capsys, folder: Path) -> list[dict]:
    _, report, _ = diagnose_json(capsys, folder, "--only", "pod-restarts")
    return by_check(report, "pod-restarts")


def test_exit_0_under_on_failure_is_critical_and_names_the_dead_engine(capsys, tmp_path):
    # the real drill's server exited 0 after its engine died: OnFailure never restarts it
    (found,) = restarts_findings(capsys, ended_bundle(tmp_path, "OnFailure", 0))
    assert found["severity"] == "critical"
    assert "will not be restarted (restartPolicy OnFailure)" in found["summary"]
    assert "exits with code 0" in found["summary"]
    assert "engine-dead" in found["runbooks"] or "vllm-worker-killed" in found["runbooks"]


@pytest.mark.parametrize("exit_code", [0, 1])
def test_never_policy_leaves_any_exit_down(capsys, tmp_path, exit_code):
    # restartPolicy Never: whatever the code, the server stays down
    (found,) = restarts_findings(capsys, ended_bundle(tmp_path, "Never", exit_code))
    assert found["severity"] == "critical"
    assert "restartPolicy Never" in found["summary"]


def test_a_failing_exit_under_on_failure_is_restarted_so_not_this_verdict(capsys, tmp_path):
    # OnFailure restarts exit code 1: the kubelet brings it back, no "will not be restarted"
    for found in restarts_findings(capsys, ended_bundle(tmp_path, "OnFailure", 1)):
        assert "will not be restarted" not in found["summary"]


def test_the_health_check_calls_the_exited_container_the_cause_not_engine_dead(capsys, tmp_path):
    # the probe's silence follows from the container having exited
    folder = ended_bundle(tmp_path, "OnFailure", 0)
    (folder / "vllm").mkdir(exist_ok=True)
    shutil.copy(DEAD / "bundle" / "vllm" / "health.json", folder / "vllm" / "health.json")
    _, report, _ = diagnose_json(capsys, folder, "--only", "vllm-health")
    (found,) = by_check(report, "vllm-health")
    assert "exited (Completed)" in found["summary"]


@pytest.mark.parametrize("policy", ["Always", None, "Sometimes", ["Never"]])
def test_an_exited_container_the_kubelet_will_restart_is_no_check_mark(capsys, tmp_path, policy):
    # Always (also the default for a missing or unreadable policy): it comes back, but right
    # now nothing serves; never "✓ no restarts"
    folder = ended_bundle(tmp_path, "Always", 0)
    pod_path = folder / "k8s" / "pod.json"
    pod = json.loads(pod_path.read_text())
    if policy is None:
        del pod["spec"]["restartPolicy"]
    else:
        pod["spec"]["restartPolicy"] = policy
    pod_path.write_text(json.dumps(pod))
    (found,) = restarts_findings(capsys, folder)
    assert found["severity"] == "warning"
    assert (
        "exited (Completed, exit code 0" in found["summary"]
        and "is not running" in found["summary"]
    )


def test_an_unreadable_exit_code_under_on_failure_is_not_taken_for_success(capsys, tmp_path):
    # exitCode "oops": not 0, so OnFailure restarts it; still not running now
    folder = ended_bundle(tmp_path, "OnFailure", 0)
    pod_path = folder / "k8s" / "pod.json"
    pod = json.loads(pod_path.read_text())
    pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] = "oops"
    pod_path.write_text(json.dumps(pod))
    (found,) = restarts_findings(capsys, folder)
    assert found["severity"] == "warning" and "is not running" in found["summary"]
