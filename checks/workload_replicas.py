"""Does the pod's Deployment or StatefulSet have the replicas it asks for?

One healthy pod says nothing about its siblings: a Deployment of 3 with 1 available serves a third
of its traffic while every check of the pod passes. The owner (k8s/owner.json) counts them:
`status.availableReplicas` against `spec.replicas`. When the ReplicaSet cannot create a pod
(a namespace ResourceQuota on `requests.nvidia.com/gpu`, a LimitRange, an admission webhook),
the deployment controller copies its ReplicaFailure condition (reason FailedCreate, the API
server's refusal as message) onto the Deployment, so the reason is read there.
"""

from __future__ import annotations

import math

from llmdoctor.engine.facts import FactMissing, Facts
from llmdoctor.engine.findings import Finding, critical, evidence, ok, warning
from llmdoctor.engine.registry import check
from llmdoctor.parsers.k8s_pod import dicts, field_dict, number

CHECK = "workload-replicas"
GPU_SHORTAGE = "k8s-gpu-unschedulable"
NOT_READY = "pod-not-ready"
KINDS = ("Deployment", "StatefulSet", "ReplicaSet")


def _count(value) -> int:
    """A replica count from the object; 0 for a missing, negative or non-finite one."""
    counted = number(value, 0)
    return int(counted) if math.isfinite(counted) and counted > 0 else 0


def _gpu_refusal(message: str) -> bool:
    return "nvidia.com/gpu" in message or "exceeded quota" in message


@check(
    CHECK,
    title="The pod's Deployment or StatefulSet has its replicas available",
    scope="k8s",
    needs=("k8s/owner.json",),
    runbooks=(GPU_SHORTAGE, NOT_READY),
    kind="symptom",
)
def workload_replicas(facts: Facts) -> Finding:
    owner = facts.get("k8s/owner.json")
    kind = owner.get("kind") if isinstance(owner, dict) else None
    if kind not in KINDS:
        raise FactMissing("k8s/owner.json", f"is not a {', '.join(KINDS)} object")
    name = f"{kind}/{field_dict(owner, 'metadata').get('name') or '?'}"
    desired = _count(field_dict(owner, "spec").get("replicas", 1))
    status = field_dict(owner, "status")
    counted_field = status.get("availableReplicas")  # omitted when 0
    if kind == "StatefulSet" and counted_field is None:  # counted from Kubernetes 1.22 only
        counted_field = status.get("readyReplicas")
    available = _count(counted_field)
    counted = f"{available} of {desired} replica{'s' if desired != 1 else ''} available"
    items = [evidence(f"{name}: {counted}", "k8s/owner.json")]
    if available >= desired:
        return ok(CHECK, f"{name}: {counted}", items)
    runbooks = [NOT_READY]
    failure = ""
    for condition in dicts(status.get("conditions")):
        kind_of = condition.get("type")
        if condition.get("status") == ("True" if kind_of == "ReplicaFailure" else "False"):
            message = str(condition.get("message") or "")
            reason = str(condition.get("reason") or "")
            line = f"{kind_of}={condition.get('status')} {reason}: {message}"
            items.append(evidence(line, "k8s/owner.json"))
            if kind_of == "ReplicaFailure":
                failure = f"; {reason or 'the ReplicaSet failed'}: {message}"
                if _gpu_refusal(message):
                    runbooks = [GPU_SHORTAGE]
    severity = critical if available == 0 else warning
    return severity(
        CHECK,
        f"{name} has {counted}{failure}: it serves with {desired - available} fewer "
        "replica(s) than it asks for",
        items,
        runbooks,
    )
