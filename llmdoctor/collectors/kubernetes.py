"""Live collection from Kubernetes: one Facts per pod of pod/NAME, deploy/NAME, sts/NAME or -l SEL.

For each pod, at the same time and each with a timeout: the Pod, its events, its node (or the
GPU nodes when it is not scheduled), its owner, container logs (tail, and the previous
container's when it restarted), vLLM's endpoints through the API server's pod proxy, and,
unless --no-exec, `nvidia-smi -q -x` and the serving-environment probe inside the serving
container. The pods of a deployment are collected concurrently. Whatever cannot be read
becomes a missing fact with the reason (a 403 names the verb and resource to grant).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from llmdoctor.collectors.k8s_client import KubeConnection, KubeError, connect, read_json
from llmdoctor.collectors.k8s_pod_parts import (
    collect_endpoint_via_proxy,
    collect_exec,
    collect_logs,
    window_seconds,
)
from llmdoctor.engine.collect import (
    CollectContext,
    Collector,
    map_abandonable,
    run_collectors,
    submit_abandonable,
)
from llmdoctor.engine.facts import Facts, Missing
from llmdoctor.errors import BadTarget, LlmdoctorError

GPU = "nvidia.com/gpu"
KERNEL_LOG_REASON = (
    "not collected for a pod: run `llmdoctor node` on its node (deploy/node-check-daemonset.yaml)"
)
NODE_REASON = "not collected from inside the pod (run `llmdoctor node` on its node)"
MAX_PARALLEL_PODS = 16


@dataclass
class PodRef:
    """A pod to diagnose: its object, or why it could not be read."""

    name: str
    obj: dict | None = None
    reason: str | None = None
    owner: dict | None = None
    errors: dict[str, str] = field(default_factory=dict)


def with_kind(obj: dict, kind: str, api_version: str = "v1") -> dict:
    """List items come without kind/apiVersion; add them as `kubectl get -o json` does."""
    if isinstance(obj, dict):
        obj.setdefault("apiVersion", api_version)
        obj.setdefault("kind", kind)
    return obj


def label_selector(selector: dict) -> str:
    """A LabelSelector object as the string form the API takes ('app=vllm,tier in (a,b)')."""
    parts = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if op == "In":
            parts.append(f"{key} in ({','.join(values)})")
        elif op == "NotIn":
            parts.append(f"{key} notin ({','.join(values)})")
        elif op == "Exists":
            parts.append(str(key))
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
    return ",".join(parts)


def _list_pods(conn: KubeConnection, selector: str) -> list[dict]:
    doc = read_json(
        conn,
        conn.core().list_namespaced_pod,
        "list",
        "pods",
        True,
        namespace=conn.namespace,
        label_selector=selector,
    )
    return sorted(
        (with_kind(p, "Pod") for p in doc.get("items") or []),
        key=lambda p: (p.get("metadata") or {}).get("name", ""),
    )


def find_pods(conn: KubeConnection, target, selector: str | None) -> list[PodRef]:
    """The pods the target names; BadTarget when there are none, LlmdoctorError when unreadable."""
    ns = conn.namespace
    if target.kind == "pod":
        try:
            pod = read_json(
                conn,
                conn.core().read_namespaced_pod,
                "get",
                "pods",
                True,
                name=target.name,
                namespace=ns,
            )
        except KubeError as exc:
            if exc.status == 404:
                raise BadTarget(f"pod/{target.name} not found in namespace {ns}") from None
            if exc.status == 403:
                return [PodRef(target.name, reason=exc.reason)]
            raise LlmdoctorError(exc.reason) from None
        return [PodRef(target.name, obj=with_kind(pod, "Pod"))]
    if target.kind == "selector":
        pods = _checked(lambda: _list_pods(conn, selector or target.name))
        if not pods:
            raise BadTarget(f"no pods match -l {selector or target.name} in namespace {ns}")
        return [PodRef(p["metadata"]["name"], obj=p) for p in pods]
    read = {
        "deployment": (conn.apps().read_namespaced_deployment, "deployments", "Deployment"),
        "statefulset": (conn.apps().read_namespaced_stateful_set, "statefulsets", "StatefulSet"),
    }.get(target.kind)
    if read is None:
        raise BadTarget(f"{target} is not a Kubernetes target")
    call, resource, kind = read
    try:
        owner = read_json(conn, call, "get", resource, True, name=target.name, namespace=ns)
    except KubeError as exc:
        if exc.status == 404:
            raise BadTarget(f"{target} not found in namespace {ns}") from None
        raise LlmdoctorError(exc.reason) from None
    owner = with_kind(owner, kind, "apps/v1")
    selector_text = label_selector((owner.get("spec") or {}).get("selector") or {})
    if not selector_text:
        raise BadTarget(f"{target} has no pod selector")
    pods = _checked(lambda: _list_pods(conn, selector_text))
    if not pods:
        replicas = (owner.get("spec") or {}).get("replicas")
        raise BadTarget(f"{target} has no pods (spec.replicas {replicas}) in namespace {ns}")
    return [PodRef(p["metadata"]["name"], obj=p, owner=owner) for p in pods]


def _checked(fn):
    try:
        return fn()
    except KubeError as exc:
        raise LlmdoctorError(exc.reason) from None


class PodCollection:
    """Everything collected for one pod, built by the collectors below."""

    def __init__(self, conn: KubeConnection, ref: PodRef, ctx: CollectContext):
        self.conn, self.ref, self.ctx = conn, ref, ctx
        self.pod = ref.obj or {}
        self.errors: dict[str, str] = {}

    def failed(self, name: str, exc: KubeError, *keys: str) -> dict[str, Missing]:
        """A failed read as missing facts; forbidden and connection errors are also listed."""
        if exc.status not in (400, 404):
            self.errors[f"kubernetes {name}"] = exc.reason
        return {key: Missing(exc.reason) for key in keys}

    def events(self, _ctx) -> dict[str, Any]:
        try:
            doc = read_json(
                self.conn,
                self.conn.core().list_namespaced_event,
                "list",
                "events",
                True,
                namespace=self.conn.namespace,
                field_selector=f"involvedObject.name={self.ref.name}",
            )
        except KubeError as exc:
            return self.failed("events", exc, "k8s/events.json")
        items = [
            with_kind(e, "Event")
            for e in doc.get("items") or []
            if (e.get("involvedObject") or {}).get("kind") in (None, "Pod")
        ]
        doc.update(items=items)
        return {"k8s/events.json": with_kind(doc, "EventList")}

    def node(self, _ctx) -> dict[str, Any]:
        node_name = (self.pod.get("spec") or {}).get("nodeName")
        core = self.conn.core()
        if node_name:
            try:
                node = read_json(self.conn, core.read_node, "get", "nodes", False, name=node_name)
            except KubeError as exc:
                return self.failed("nodes", exc, "k8s/node.json")
            return {"k8s/node.json": with_kind(node, "Node")}
        result: dict[str, Any] = {"k8s/node.json": Missing("the pod is not scheduled on a node")}
        try:
            nodes = read_json(self.conn, core.list_node, "list", "nodes", False)
        except KubeError as exc:
            return {**result, **self.failed("nodes", exc, "k8s/gpu-nodes.json")}
        gpu_nodes = []
        for node in nodes.get("items") or []:
            status = node.get("status") or {}
            if GPU in (status.get("capacity") or {}) or GPU in (status.get("allocatable") or {}):
                status.pop("images", None)  # hundreds of image names; not needed here
                gpu_nodes.append(with_kind(node, "Node"))
        result["k8s/gpu-nodes.json"] = {"apiVersion": "v1", "kind": "List", "items": gpu_nodes}
        return result

    def owner(self, _ctx) -> dict[str, Any]:
        if self.ref.owner is not None:
            return {"k8s/owner.json": self.ref.owner}
        refs = (self.pod.get("metadata") or {}).get("ownerReferences") or []
        ref = next((r for r in refs if r.get("controller")), refs[0] if refs else None)
        if ref is None:
            return {"k8s/owner.json": Missing("the pod has no owner (a bare pod)")}
        apps, ns = self.conn.apps(), self.conn.namespace
        try:
            if ref.get("kind") == "ReplicaSet":
                rs = read_json(
                    self.conn,
                    apps.read_namespaced_replica_set,
                    "get",
                    "replicasets",
                    True,
                    name=ref["name"],
                    namespace=ns,
                )
                rs_refs = (rs.get("metadata") or {}).get("ownerReferences") or []
                dep = next((r for r in rs_refs if r.get("kind") == "Deployment"), None)
                if dep is None:
                    return {"k8s/owner.json": with_kind(rs, "ReplicaSet", "apps/v1")}
                obj = read_json(
                    self.conn,
                    apps.read_namespaced_deployment,
                    "get",
                    "deployments",
                    True,
                    name=dep["name"],
                    namespace=ns,
                )
                return {"k8s/owner.json": with_kind(obj, "Deployment", "apps/v1")}
            if ref.get("kind") == "StatefulSet":
                obj = read_json(
                    self.conn,
                    apps.read_namespaced_stateful_set,
                    "get",
                    "statefulsets",
                    True,
                    name=ref["name"],
                    namespace=ns,
                )
                return {"k8s/owner.json": with_kind(obj, "StatefulSet", "apps/v1")}
        except KubeError as exc:
            return self.failed("owner", exc, "k8s/owner.json")
        return {
            "k8s/owner.json": Missing(f"owned by {ref.get('kind')}/{ref.get('name')} (not read)")
        }

    def logs(self, _ctx) -> dict[str, Any]:
        result = collect_logs(self.conn, self.pod, int(self.ctx.options.get("tail") or 2000))
        if "logs/" in result and isinstance(result["logs/"], Missing):
            self.errors["kubernetes pods/log"] = result["logs/"].reason
        return result

    def vllm(self, ctx) -> dict[str, Any]:
        result = collect_endpoint_via_proxy(self.conn, self.pod, ctx.options, self.ctx.timeout)
        for key in ("vllm/", "vllm/probe.json"):
            value = result.get(key)
            if isinstance(value, Missing) and value.reason.startswith(("forbidden", "unauth")):
                self.errors["kubernetes pods/proxy"] = value.reason
        return result

    def exec(self, _ctx) -> dict[str, Any]:
        if self.ctx.options.get("no_exec"):
            reason = "not collected: --no-exec was given"
            return {
                "node/nvidia-smi.xml": Missing(reason),
                "node/versions.json": Missing(reason),
                "serving/vllm-args.json": Missing(reason),
            }
        result = collect_exec(self.conn, self.pod, self.ctx.timeout)
        for key in ("node/nvidia-smi.xml", "node/versions.json"):
            value = result.get(key)
            if isinstance(value, Missing) and value.reason.startswith("forbidden"):
                self.errors["kubernetes pods/exec"] = value.reason
        return result


def collect_pod(conn: KubeConnection, ref: PodRef, ctx: CollectContext) -> Facts:
    """The Facts of one pod, its collectors run concurrently."""
    facts = Facts()
    facts.set("time/now", time.time())
    facts.set("target", f"pod/{ref.name}")
    facts.set("k8s/namespace", conn.namespace)
    facts.mark_missing("node/kernel.log", KERNEL_LOG_REASON)
    facts.mark_missing("node/", NODE_REASON)
    if ref.obj is None:
        reason = ref.reason or "not read"
        facts.mark_missing("k8s/pod.json", reason)
        facts.collector_errors["kubernetes pods"] = reason
        for key in ("k8s/", "logs/", "vllm/", "node/"):
            facts.mark_missing(key, f"the pod could not be read ({reason})")
        return facts
    facts.set("k8s/pod.json", ref.obj)
    part = PodCollection(conn, ref, ctx)
    k8s = [
        Collector("events", ("k8s/events.json",), part.events),
        Collector("node", ("k8s/node.json",), part.node),
        Collector("owner", ("k8s/owner.json",), part.owner),
        Collector("logs", ("logs/",), part.logs),
        Collector(
            "exec",
            ("node/nvidia-smi.xml", "node/versions.json", "serving/vllm-args.json"),
            part.exec,
        ),
    ]
    window = window_seconds(ctx.options)
    vllm_ctx = CollectContext(ctx.target, ctx.timeout * 3 + window, ctx.options)
    vllm = [Collector("vllm", ("vllm/",), part.vllm)]
    done = [
        submit_abandonable(run_collectors, k8s, ctx, facts),
        submit_abandonable(run_collectors, vllm, vllm_ctx, facts),
    ]
    for future in done:
        future.result()
    facts.collector_errors.update(part.errors)
    return facts


def collect(target, ctx: CollectContext) -> list[Facts]:
    """One Facts per pod of the target, pods collected concurrently."""
    opts = ctx.options
    conn = connect(opts.get("context"), opts.get("namespace"), ctx.timeout)
    refs = find_pods(conn, target, opts.get("selector"))
    return map_abandonable(lambda ref: collect_pod(conn, ref, ctx), refs, MAX_PARALLEL_PODS)
