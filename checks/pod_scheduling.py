"""A Pending pod that no node can take: GPUs requested against what the GPU nodes offer.

Reads the PodScheduled condition and the scheduler's FailedScheduling events; when the message
says "Insufficient nvidia.com/gpu", the GPU nodes' allocatable counts (k8s/gpu-nodes.json) tell
"no node is big enough" apart from "every GPU is taken".
"""

from __future__ import annotations

import re

from llmdoctor.engine.facts import Facts
from llmdoctor.engine.findings import Finding, critical, evidence, info, ok
from llmdoctor.engine.registry import check
from llmdoctor.parsers.k8s_pod import (
    GPU,
    dicts,
    event_items,
    event_line,
    field_dict,
    gpus_requested,
    quantity,
    require_pod,
)

INSUFFICIENT_GPU = re.compile(r"(\d+) Insufficient nvidia\.com/gpu")
NODES_AVAILABLE = re.compile(r"(\d+)/(\d+) nodes are available")
AUTOSCALER = ("NotTriggerScaleUp", "TriggeredScaleUp", "FailedScaleUp")


def _scheduled_condition(pod: dict) -> dict:
    for cond in dicts(field_dict(pod, "status").get("conditions")):
        if cond.get("type") == "PodScheduled":
            return cond
    return {}


def _gpu_nodes(facts: Facts) -> list[tuple[str, float, str]]:
    """(name, allocatable GPUs, product label) of every node that advertises nvidia.com/gpu."""
    nodes = facts.get("k8s/gpu-nodes.json") or {}
    out = []
    for node in nodes.get("items") or []:
        status = node.get("status") or {}
        capacity = quantity((status.get("capacity") or {}).get(GPU)) or 0
        allocatable = quantity((status.get("allocatable") or {}).get(GPU)) or 0
        if capacity or allocatable:
            labels = (node.get("metadata") or {}).get("labels") or {}
            product = labels.get("nvidia.com/gpu.product", "unknown GPU")
            out.append(((node.get("metadata") or {}).get("name", "?"), allocatable, product))
    return out


def _node_summary(facts: Facts, requested: int) -> tuple[str, list[dict]]:
    nodes = _gpu_nodes(facts)
    if not nodes:
        reason = facts.missing_reason("k8s/gpu-nodes.json")
        if facts.has("k8s/gpu-nodes.json"):
            return "no node in the cluster advertises nvidia.com/gpu", []
        return f"GPU nodes not listed ({reason})", []
    items = [
        evidence(f"node {n}: allocatable nvidia.com/gpu {a:g} ({p})", source="k8s/gpu-nodes.json")
        for n, a, p in nodes
    ]
    largest = max(a for _, a, _ in nodes)
    if requested > largest:
        return (
            f"no node can ever fit it: the largest GPU node has {largest:g} allocatable "
            f"(of {len(nodes)} GPU nodes)",
            items,
        )
    fitting = sum(1 for _, a, _ in nodes if a >= requested)
    return (
        f"{fitting} of {len(nodes)} GPU nodes are big enough, so their GPUs are taken by other "
        "pods (or taints/affinity keep this pod off them)",
        items,
    )


@check(
    "pod-scheduling",
    title="Pod scheduling: GPUs requested against node allocatable",
    scope="k8s",
    needs=("k8s/pod.json",),
    runbooks=("k8s-gpu-unschedulable",),
    before_start=True,
)
def pod_scheduling(facts: Facts) -> Finding:
    pod = require_pod(facts)
    spec, status = field_dict(pod, "spec"), field_dict(pod, "status")
    requested = gpus_requested(pod)
    node_name = spec.get("nodeName")
    if node_name:
        node = facts.get("k8s/node.json")
        allocatable = field_dict(field_dict(node, "status"), "allocatable").get(GPU)
        product = field_dict(field_dict(node, "metadata"), "labels").get("nvidia.com/gpu.product")
        detail = f" ({allocatable} GPUs allocatable, {product})" if allocatable else ""
        return ok(
            "pod-scheduling",
            f"scheduled on {node_name}{detail}; requests {requested} GPU(s)",
            [evidence(f"spec.nodeName: {node_name}", source="k8s/pod.json")],
        )
    cond = _scheduled_condition(pod)
    events = event_items(facts.get("k8s/events.json"))
    failed = [e for e in events if e.get("reason") == "FailedScheduling"]
    if not failed and cond.get("reason") != "Unschedulable":
        phase = status.get("phase", "unknown")
        return info(
            "pod-scheduling",
            f"not scheduled yet (phase {phase}) and no scheduling failure recorded",
            [evidence(f"status.phase: {phase}", source="k8s/pod.json")],
        )
    message = (failed[-1].get("message") if failed else None) or cond.get("message", "")
    items = [evidence(event_line(e), source="k8s/events.json") for e in failed[-3:]]
    if not failed:
        items.append(evidence(f"PodScheduled: {message}", source="k8s/pod.json"))
    items += [
        evidence(event_line(e), source="k8s/events.json")
        for e in events
        if e.get("reason") in AUTOSCALER
    ][-2:]
    short = INSUFFICIENT_GPU.search(message)
    if not short:
        return critical(
            "pod-scheduling",
            f"Pending: the scheduler cannot place it: {message.split('. preemption')[0]}",
            items,
        )
    counts = NODES_AVAILABLE.search(message)
    total = f" of {counts.group(2)}" if counts else ""
    nodes_text, node_items = _node_summary(facts, requested)
    return critical(
        "pod-scheduling",
        f"Pending: requests {requested} nvidia.com/gpu but {short.group(1)}{total} nodes have "
        f"too few free GPUs; {nodes_text}",
        [evidence(f"GPUs requested: {requested}", source="k8s/pod.json"), *items, *node_items],
        ["k8s-gpu-unschedulable"],
    )
