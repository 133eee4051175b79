"""deploy/: the read-only RBAC is enough for a full diagnosis, and the node-check DaemonSet
runs `llmdoctor node --json` on GPU nodes only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from k8s_server import Running, scenario_healthy

from llmdoctor.cli import run as cli_run

DEPLOY = Path(__file__).resolve().parent.parent / "deploy"
READ_VERBS = {"get", "list", "watch"}


def documents(name: str) -> list[dict]:
    return [d for d in yaml.safe_load_all((DEPLOY / name).read_text()) if d]


def by_kind(docs: list[dict], kind: str) -> list[dict]:
    return [d for d in docs if d["kind"] == kind]


def granted(rules: list[dict]) -> set[tuple[str, str]]:
    return {(v, r) for rule in rules for r in rule["resources"] for v in rule["verbs"]}


def test_cluster_role_only_reads_except_the_proxy_post():
    # no write verb on any object; "create" only on pods/proxy (the generation probe's POST)
    (role,) = by_kind(documents("rbac.yaml"), "ClusterRole")
    writes = {(v, r) for v, r in granted(role["rules"]) if v not in READ_VERBS}
    assert writes == {("create", "pods/proxy")}
    for needed in [
        ("get", "pods"),
        ("list", "pods"),
        ("list", "events"),
        ("get", "nodes"),
        ("list", "nodes"),
        ("get", "pods/log"),
        ("get", "pods/proxy"),
        ("get", "deployments"),
        ("get", "statefulsets"),
        ("get", "replicasets"),
    ]:
        assert needed in granted(role["rules"]), needed


def test_exec_is_a_separate_namespaced_role():
    docs = documents("rbac.yaml")
    (role,) = by_kind(docs, "Role")
    assert role["metadata"]["namespace"] and granted(role["rules"]) == {
        ("create", "pods/exec"),
        ("get", "pods/exec"),
    }
    (binding,) = by_kind(docs, "RoleBinding")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]


@pytest.mark.parametrize("with_exec", [False, True])
def test_the_shipped_rbac_is_enough_for_a_full_diagnosis(tmp_path, monkeypatch, capsys, with_exec):
    # the fake API server answers 403 to everything deploy/rbac.yaml does not grant
    docs = documents("rbac.yaml")
    allowed = granted(by_kind(docs, "ClusterRole")[0]["rules"])
    if with_exec:
        allowed |= granted(by_kind(docs, "Role")[0]["rules"])
    scenario = scenario_healthy()
    scenario.cluster.allowed = allowed
    with Running(scenario, tmp_path / "kubeconfig") as running:
        monkeypatch.setenv("KUBECONFIG", str(running.kubeconfig))
        with pytest.raises(SystemExit):
            cli_run(["diagnose", "pod/vllm-7b-7d9f8c6b5-x2kqp", "--json", "--window", "0"])
    report = json.loads(capsys.readouterr().out)
    errors = [e for e in report["errors"] if e.get("collector", "").startswith("kubernetes")]
    if with_exec:
        assert errors == []
    else:  # without the optional Role, exec is the one thing missing, and it says so
        assert [e["collector"] for e in errors] == ["kubernetes pods/exec"]
        assert "RBAC: add 'create' on 'pods/exec'" in errors[0]["message"]


def test_node_check_daemonset_runs_on_gpu_nodes_without_taking_gpus():
    (ds,) = by_kind(documents("node-check-daemonset.yaml"), "DaemonSet")
    spec = ds["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    assert "llmdoctor node --json" in container["args"][0]
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    keys = {e["key"] for t in terms["nodeSelectorTerms"] for e in t["matchExpressions"]}
    assert "nvidia.com/gpu.present" in keys
    assert {"operator": "Exists"} in spec["tolerations"]
    resources = container.get("resources", {})
    assert "nvidia.com/gpu" not in resources.get("limits", {})  # monitoring, not consuming
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["NVIDIA_VISIBLE_DEVICES"] == "all"
    assert "SYSLOG" in container["securityContext"]["capabilities"]["add"]  # dmesg
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
