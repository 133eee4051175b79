"""A local Kubernetes API server (127.0.0.1 only) for driving the real `kubernetes` client.

It serves real-format objects from tests/fixtures/k8s on the REST paths the client uses:

  GET /api/v1/namespaces/NS/pods/NAME                   read_namespaced_pod
  GET /api/v1/namespaces/NS/pods?labelSelector=...      list_namespaced_pod
  GET /api/v1/namespaces/NS/events?fieldSelector=involvedObject.name=NAME
  GET /api/v1/namespaces/NS/pods/NAME/log?container=&tailLines=&previous=
  GET /api/v1/nodes, /api/v1/nodes/NAME
  GET /apis/apps/v1/namespaces/NS/{deployments,statefulsets,replicasets}/NAME
  ANY /api/v1/namespaces/NS/pods/NAME:PORT/proxy/PATH   forwarded to a local fake vLLM server
  GET /api/v1/namespaces/NS/pods/NAME/exec?command=...  a websocket speaking v4.channel.k8s.io

Errors are answered with the API server's Status JSON (403 naming the user, verb and resource
as RBAC does; 404 NotFound; 400 for logs of a container that has not started; 503 from the
proxy when nothing listens on the pod's port). A bearer token is required, as a real API
server would; `delay` adds latency to every answer (for the benchmark).
"""

from __future__ import annotations

import base64
import copy
import hashlib
import http.client
import json
import re
import struct
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

FIXTURES = Path(__file__).parent / "fixtures" / "k8s"
TOKEN = "llmdoctor-test-token"
USER = "system:serviceaccount:serving:llmdoctor"
WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def load(name: str) -> Any:
    """A JSON fixture from tests/fixtures/k8s."""
    return json.loads((FIXTURES / name).read_text(encoding="utf-8"))


def read_text(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


@dataclass
class ExecAnswer:
    """What a command run through pods/exec prints and returns."""

    stdout: str = ""
    stderr: str = ""
    exit_code: int = 0
    status_message: str | None = None  # a runtime failure (e.g. executable not found)


@dataclass
class FakeCluster:
    """The objects the fake API server serves, in one namespace per dict key."""

    pods: dict[tuple[str, str], dict] = field(default_factory=dict)
    events: dict[tuple[str, str], list[dict]] = field(default_factory=dict)
    logs: dict[tuple[str, str, str, bool], str] = field(default_factory=dict)
    nodes: dict[str, dict] = field(default_factory=dict)
    apps: dict[tuple[str, str, str], dict] = field(default_factory=dict)  # (kind, ns, name)
    upstreams: dict[tuple[str, str, int], str] = field(default_factory=dict)  # -> base url
    exec_answers: dict[tuple[str, str, str], ExecAnswer] = field(default_factory=dict)
    forbidden: set[tuple[str, str]] = field(default_factory=set)  # (verb, resource)
    allowed: set[tuple[str, str]] | None = None  # when set, RBAC: everything else is 403

    def denies(self, verb: str, resource: str) -> bool:
        if (verb, resource) in self.forbidden:
            return True
        return self.allowed is not None and (verb, resource) not in self.allowed

    def add_pod(self, pod: dict, events: list[dict] | None = None) -> None:
        meta = pod["metadata"]
        key = (meta["namespace"], meta["name"])
        self.pods[key] = pod
        self.events[key] = list(events or [])

    def add_log(self, ns: str, pod: str, container: str, text: str, previous=False) -> None:
        self.logs[(ns, pod, container, previous)] = text

    def add_app(self, obj: dict) -> None:
        kind = {"Deployment": "deployments", "StatefulSet": "statefulsets"}.get(
            obj["kind"], "replicasets"
        )
        self.apps[(kind, obj["metadata"]["namespace"], obj["metadata"]["name"])] = obj


def _status(code: int, reason: str, message: str, name: str | None = None, kind=None) -> dict:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if name is not None:
        body["details"] = {"name": name, "kind": kind}
    return body


def _forbidden(verb: str, resource: str, ns: str | None, name: str | None) -> dict:
    group = resource.split("/")[0]
    subject = f'{group} "{name}"' if name else group
    scope = f'in the namespace "{ns}"' if ns else "at the cluster scope"
    message = (
        f'{subject} is forbidden: User "{USER}" cannot {verb} resource "{resource}" in API '
        f'group "" {scope}'
    )
    return _status(403, "Forbidden", message, name, group)


def _not_found(resource: str, name: str) -> dict:
    return _status(404, "NotFound", f'{resource} "{name}" not found', name, resource)


def match_selector(labels: dict, selector: str) -> bool:
    """Kubernetes label selector semantics for k=v, k!=v, k in (..), k notin (..), k, !k."""
    if not selector:
        return True
    for term in re.split(r",(?![^()]*\))", selector):
        term = term.strip()
        if m := re.fullmatch(r"(\S+)\s+(in|notin)\s+\((.*)\)", term):
            values = {v.strip() for v in m.group(3).split(",")}
            inside = labels.get(m.group(1)) in values
            if inside != (m.group(2) == "in"):
                return False
        elif "!=" in term:
            k, v = term.split("!=", 1)
            if labels.get(k) == v:
                return False
        elif "=" in term:
            k, v = term.replace("==", "=").split("=", 1)
            if labels.get(k) != v:
                return False
        elif term.startswith("!"):
            if term[1:] in labels:
                return False
        elif term not in labels:
            return False
    return True


class K8sHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: K8sServer

    def log_message(self, *args) -> None:  # keep pytest output clean
        pass

    # -- plumbing -----------------------------------------------------------------------
    def _send(self, code: int, body: bytes, content_type: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _json(self, code: int, obj: Any) -> None:
        self._send(code, json.dumps(obj).encode(), "application/json")

    def _route(self, method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.body = self.rfile.read(length) if length else None  # read before any answer
        parts = urlsplit(self.path)
        query = {k: v for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        self.server.requests.append((method, parts.path, query))
        if self.server.delay:
            time.sleep(self.server.delay)
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            self._json(401, _status(401, "Unauthorized", "Unauthorized"))
            return
        cluster = self.server.cluster
        path = unquote(parts.path)
        if m := re.fullmatch(r"/api/v1/namespaces/([^/]+)/pods/([^/]+):(\d+)/proxy(/.*)?", path):
            self._proxy(method, m.group(1), m.group(2), int(m.group(3)), m.group(4) or "/")
            return
        if method != "GET":
            self._json(405, _status(405, "MethodNotAllowed", "method not allowed"))
            return
        if m := re.fullmatch(r"/api/v1/namespaces/([^/]+)/pods/([^/]+)/exec", path):
            self._exec(m.group(1), m.group(2), query)
            return
        if m := re.fullmatch(r"/api/v1/namespaces/([^/]+)/pods/([^/]+)/log", path):
            self._log(m.group(1), m.group(2), query)
            return
        if m := re.fullmatch(r"/api/v1/namespaces/([^/]+)/pods/([^/]+)", path):
            ns, name = m.groups()
            if cluster.denies("get", "pods"):
                self._json(403, _forbidden("get", "pods", ns, name))
            elif (ns, name) in cluster.pods:
                self._json(200, cluster.pods[(ns, name)])
            else:
                self._json(404, _not_found("pods", name))
            return
        if m := re.fullmatch(r"/api/v1/namespaces/([^/]+)/pods", path):
            self._list_pods(m.group(1), (query.get("labelSelector") or [""])[0])
            return
        if m := re.fullmatch(r"/api/v1/namespaces/([^/]+)/events", path):
            self._events(m.group(1), (query.get("fieldSelector") or [""])[0])
            return
        if m := re.fullmatch(r"/api/v1/nodes/([^/]+)", path):
            name = m.group(1)
            if cluster.denies("get", "nodes"):
                self._json(403, _forbidden("get", "nodes", None, name))
            elif name in cluster.nodes:
                self._json(200, cluster.nodes[name])
            else:
                self._json(404, _not_found("nodes", name))
            return
        if path == "/api/v1/nodes":
            if cluster.denies("list", "nodes"):
                self._json(403, _forbidden("list", "nodes", None, None))
                return
            items = [self._item(n) for n in cluster.nodes.values()]
            self._json(200, {"kind": "NodeList", "apiVersion": "v1", "items": items})
            return
        if m := re.fullmatch(
            r"/apis/apps/v1/namespaces/([^/]+)/(deployments|statefulsets|replicasets)/([^/]+)", path
        ):
            ns, resource, name = m.groups()
            if cluster.denies("get", resource):
                self._json(403, _forbidden("get", resource, ns, name))
            elif (resource, ns, name) in cluster.apps:
                self._json(200, cluster.apps[(resource, ns, name)])
            else:
                self._json(404, _not_found(f"{resource}.apps", name))
            return
        self._json(
            404, _status(404, "NotFound", "the server could not find the requested resource")
        )

    @staticmethod
    def _item(obj: dict) -> dict:
        """List items come without kind/apiVersion, as from a real API server."""
        item = copy.deepcopy(obj)
        item.pop("kind", None)
        item.pop("apiVersion", None)
        return item

    def _list_pods(self, ns: str, selector: str) -> None:
        if self.server.cluster.denies("list", "pods"):
            self._json(403, _forbidden("list", "pods", ns, None))
            return
        items = [
            self._item(p)
            for (pns, _), p in sorted(self.server.cluster.pods.items())
            if pns == ns and match_selector((p["metadata"].get("labels") or {}), selector)
        ]
        self._json(200, {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items})

    def _events(self, ns: str, field_selector: str) -> None:
        if self.server.cluster.denies("list", "events"):
            self._json(403, _forbidden("list", "events", ns, None))
            return
        wanted = dict(t.split("=", 1) for t in field_selector.split(",") if "=" in t)
        name = wanted.get("involvedObject.name")
        items = [
            self._item(e)
            for (ens, pod), events in self.server.cluster.events.items()
            if ens == ns and (name is None or name == pod)
            for e in events
        ]
        self._json(200, {"kind": "EventList", "apiVersion": "v1", "metadata": {}, "items": items})

    def _log(self, ns: str, name: str, query: dict) -> None:
        cluster = self.server.cluster
        if cluster.denies("get", "pods/log"):
            self._json(403, _forbidden("get", "pods/log", ns, name))
            return
        pod = cluster.pods.get((ns, name))
        if pod is None:
            self._json(404, _not_found("pods", name))
            return
        containers = [c["name"] for c in pod["spec"]["containers"]]
        container = (query.get("container") or [containers[0]])[0]
        previous = (query.get("previous") or ["false"])[0] == "true"
        text = cluster.logs.get((ns, name, container, previous))
        if text is None:
            message = (
                f'previous terminated container "{container}" in pod "{name}" not found'
                if previous
                else f'container "{container}" in pod "{name}" is waiting to start: '
                "ContainerCreating"
            )
            self._json(400, _status(400, "BadRequest", message))
            return
        tail = query.get("tailLines")
        if tail:
            text = "".join(text.splitlines(keepends=True)[-int(tail[0]) :])
        self._send(200, text.encode("utf-8"), "text/plain")

    def _proxy(self, method: str, ns: str, name: str, port: int, path: str) -> None:
        cluster = self.server.cluster
        body = self.body
        verb = "create" if method == "POST" else "get"  # RBAC maps POST to create
        if cluster.denies(verb, "pods/proxy"):
            self._json(403, _forbidden(verb, "pods/proxy", ns, f"{name}:{port}"))
            return
        pod = cluster.pods.get((ns, name))
        if pod is None:
            self._json(404, _not_found("pods", name))
            return
        upstream = cluster.upstreams.get((ns, name, port))
        pod_ip = (pod.get("status") or {}).get("podIP", "10.0.0.1")
        refused = _status(
            503,
            "ServiceUnavailable",
            f"error trying to reach service: dial tcp {pod_ip}:{port}: connect: connection refused",
        )
        if upstream is None:
            self._json(503, refused)
            return
        query = urlsplit(self.path).query
        target = urlsplit(upstream)
        conn = http.client.HTTPConnection(target.hostname, target.port, timeout=30)
        try:
            headers = {"Content-Type": self.headers.get("Content-Type", "application/json")}
            conn.request(method, path + (f"?{query}" if query else ""), body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
        except OSError:
            self._json(503, refused)
            return
        finally:
            conn.close()
        self._send(resp.status, data, resp.getheader("Content-Type") or "text/plain")

    # -- pods/exec over a websocket (RFC 6455, server side) ------------------------------
    def _exec(self, ns: str, name: str, query: dict) -> None:
        cluster = self.server.cluster
        if cluster.denies("create", "pods/exec"):
            self._json(403, _forbidden("create", "pods/exec", ns, name))
            return
        if (ns, name) not in cluster.pods:
            self._json(404, _not_found("pods", name))
            return
        key = self.headers.get("Sec-WebSocket-Key")
        if self.headers.get("Upgrade", "").lower() != "websocket" or not key:
            self._json(400, _status(400, "BadRequest", "Upgrade request required"))
            return
        command = query.get("command") or []
        container = (query.get("container") or [""])[0]
        self.server.exec_commands.append((name, container, command))
        # vLLM's own argument check runs python3 too: answered under its own key
        program = "vllm-args" if "--llmdoctor-vllm-args" in command else (command or [""])[0]
        answer = cluster.exec_answers.get((name, container, program))
        if answer is None:
            answer = ExecAnswer(
                exit_code=126,
                status_message=(
                    "OCI runtime exec failed: exec failed: unable to start container process: "
                    f'exec: "{command[0] if command else ""}": executable file not found in '
                    "$PATH: unknown"
                ),
            )
        accept = base64.b64encode(hashlib.sha1((key + WS_GUID).encode()).digest()).decode()
        self.send_response(101, "Switching Protocols")
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept)
        self.send_header("Sec-WebSocket-Protocol", "v4.channel.k8s.io")
        self.end_headers()
        for channel, text in ((1, answer.stdout), (2, answer.stderr)):
            data = text.encode("utf-8")
            for start in range(0, len(data), 32768):
                self._frame(0x2, bytes([channel]) + data[start : start + 32768])
        if answer.status_message is not None or answer.exit_code != 0:
            message = answer.status_message or (
                f"command terminated with non-zero exit code: error executing command "
                f"{command}, exit code {answer.exit_code}"
            )
            status: dict[str, Any] = {
                "metadata": {},
                "status": "Failure",
                "message": message,
                "reason": "NonZeroExitCode" if answer.status_message is None else "InternalError",
            }
            if answer.status_message is None:
                status["details"] = {
                    "causes": [{"reason": "ExitCode", "message": str(answer.exit_code)}]
                }
        else:
            status = {"metadata": {}, "status": "Success"}
        self._frame(0x2, b"\x03" + json.dumps(status).encode())
        self._frame(0x8, struct.pack("!H", 1000))
        self.wfile.flush()
        self.close_connection = True

    def _frame(self, opcode: int, payload: bytes) -> None:
        head = bytes([0x80 | opcode])
        n = len(payload)
        if n < 126:
            head += bytes([n])
        elif n < 65536:
            head += bytes([126]) + struct.pack("!H", n)
        else:
            head += bytes([127]) + struct.pack("!Q", n)
        self.wfile.write(head + payload)

    def do_GET(self) -> None:
        self._route("GET")

    def do_POST(self) -> None:
        self._route("POST")


class K8sServer(ThreadingHTTPServer):
    """The fake API server; use as a context manager. `url` is http://127.0.0.1:PORT."""

    daemon_threads = True
    request_queue_size = 256  # many pods' collectors connect at once; 5 would drop SYNs

    def __init__(self, cluster: FakeCluster, delay: float = 0.0):
        super().__init__(("127.0.0.1", 0), K8sHandler)
        self.cluster = cluster
        self.delay = delay
        self.requests: list[tuple[str, str, dict]] = []
        self.exec_commands: list[tuple[str, str, list[str]]] = []
        self._thread = threading.Thread(target=self.serve_forever, args=(0.05,), daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def __enter__(self) -> K8sServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()
        self.server_close()

    def write_kubeconfig(self, path: Path, namespace: str | None = "serving") -> Path:
        """A kubeconfig whose only cluster is this server, with a bearer token user."""
        context: dict[str, Any] = {"cluster": "fake", "user": "llmdoctor"}
        if namespace:
            context["namespace"] = namespace
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "llmdoctor", "user": {"token": TOKEN}}],
            "contexts": [{"name": "fake", "context": context}],
            "current-context": "fake",
        }
        path.write_text(json.dumps(config, indent=2), encoding="utf-8")
        return path


# -- a fake vLLM OpenAI-compatible server, the pod proxy's upstream -------------------------


class FakeVllmHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: FakeVllm

    def log_message(self, *args) -> None:
        pass

    def _send(self, code: int, body: bytes, content_type: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        vllm = self.server
        if vllm.delay:
            time.sleep(vllm.delay)
        path = urlsplit(self.path).path
        if path == "/health":
            self._send(200, b"", "application/json")
        elif path == "/version":
            self._send(200, json.dumps({"version": vllm.version}).encode(), "application/json")
        elif path == "/v1/models":
            self._send(200, json.dumps(vllm.models).encode(), "application/json")
        elif path.rstrip("/") == "/metrics":
            with vllm.lock:
                text = vllm.metrics[min(vllm.scrapes, len(vllm.metrics) - 1)]
                vllm.scrapes += 1
            self._send(200, text.encode(), "text/plain; version=0.0.4; charset=utf-8")
        else:
            self._send(404, b'{"detail":"Not Found"}', "application/json")

    def do_POST(self) -> None:
        vllm = self.server
        length = int(self.headers.get("Content-Length") or 0)
        request = json.loads(self.rfile.read(length) or b"{}")
        if vllm.delay:
            time.sleep(vllm.delay)
        if urlsplit(self.path).path != "/v1/completions":
            self._send(404, b'{"detail":"Not Found"}', "application/json")
            return
        created = int(time.time())
        events = []
        for i, piece in enumerate(vllm.completion):
            last = i == len(vllm.completion) - 1
            chunk = {
                "id": "cmpl-5b1c0ac8a5e44e2a8c3a7f0e7c1d2f3a",
                "object": "text_completion",
                "created": created,
                "model": request.get("model"),
                "choices": [
                    {
                        "index": 0,
                        "text": piece,
                        "logprobs": None,
                        "finish_reason": "stop" if last else None,
                        "stop_reason": None,
                    }
                ],
            }
            events.append(f"data: {json.dumps(chunk)}\n\n")
        events.append("data: [DONE]\n\n")
        self._send(200, "".join(events).encode(), "text/event-stream; charset=utf-8")


class FakeVllm(ThreadingHTTPServer):
    """Serves /health, /version, /v1/models, /metrics (one text per scrape) and completions."""

    daemon_threads = True
    request_queue_size = 256  # many pods' collectors connect at once; 5 would drop SYNs

    def __init__(self, metrics: list[str], models: dict, version: str = "0.10.1.1", delay=0.0):
        super().__init__(("127.0.0.1", 0), FakeVllmHandler)
        self.metrics = metrics
        self.models = models
        self.version = version
        self.delay = delay
        self.scrapes = 0
        self.completion = [" Paris", "."]
        self.lock = threading.Lock()
        self._thread = threading.Thread(target=self.serve_forever, args=(0.05,), daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def __enter__(self) -> FakeVllm:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()
        self.server_close()


# -- scenarios: the fixtures assembled into clusters ----------------------------------------

VLLM_PORT = 8081


@dataclass
class Scenario:
    """A fake cluster plus the fake vLLM servers its running pods answer with."""

    cluster: FakeCluster
    vllm: dict[tuple[str, str, int], tuple[list[str], dict]] = field(default_factory=dict)


def _metrics(kind: str) -> list[str]:
    return [read_text(f"vllm/qwen2-7b-{kind}-metrics-{i}.txt") for i in (0, 1)]


def all_available(owner: dict, replicas: int) -> dict:
    """The Deployment or ReplicaSet with `replicas` asked for and all of them available, as the
    controllers write it once a rollout has finished (the fixture's status has 1 of 3)."""
    owner["spec"]["replicas"] = replicas
    status = owner["status"]
    for key in ("replicas", "readyReplicas", "availableReplicas", "updatedReplicas"):
        if key in status or key == "availableReplicas":
            status[key] = replicas
    status.pop("unavailableReplicas", None)
    for condition in status.get("conditions") or []:
        if condition["type"] == "Available":
            condition.update(
                status="True",
                reason="MinimumReplicasAvailable",
                message="Deployment has minimum availability.",
            )
    return owner


def _add_vllm_7b_owners(cluster: FakeCluster, replicas: int = 1) -> None:
    cluster.add_app(all_available(load("deployment-vllm-7b.json"), replicas))
    cluster.add_app(all_available(load("replicaset-vllm-7b-7d9f8c6b5.json"), replicas))
    cluster.nodes["gpu-a100-node-3"] = load("node-gpu-a100-node-3.json")


def _add_owners_like_vllm_7b(cluster: FakeCluster, pod: dict) -> None:
    """A ReplicaSet and Deployment for a pod, shaped like the vllm-7b ones."""
    rs_name = pod["metadata"]["ownerReferences"][0]["name"]
    app = pod["metadata"]["labels"]["app"]
    dep = load("deployment-vllm-7b.json")
    dep["metadata"].update(name=app, labels={"app": app})
    dep["spec"]["selector"] = {"matchLabels": {"app": app}}
    dep["spec"]["template"]["metadata"]["labels"] = {"app": app}
    dep["spec"]["template"]["spec"] = copy.deepcopy(pod["spec"])
    dep["spec"]["template"]["spec"].pop("nodeName", None)
    rs = load("replicaset-vllm-7b-7d9f8c6b5.json")
    rs["metadata"].update(name=rs_name, labels=dict(pod["metadata"]["labels"]))
    rs["metadata"]["ownerReferences"][0]["name"] = app
    cluster.add_app(dep)
    cluster.add_app(rs)


def _events(name: str) -> list[dict]:
    return load(f"events-{name}.json")["items"]


def healthy_pod(name: str = "vllm-7b-7d9f8c6b5-x2kqp") -> dict:
    """The healthy vllm-7b pod, renamed (the benchmark's deployment has five of them)."""
    pod = load("pod-vllm-7b-healthy.json")
    pod["metadata"]["name"] = name
    return pod


def scenario_healthy(replicas: int = 1, nvidia_smi: bool = True) -> Scenario:
    """deploy/vllm-7b with `replicas` healthy pods, idle vLLM, exec answering."""
    cluster = FakeCluster()
    _add_vllm_7b_owners(cluster, replicas)
    models = load("vllm/models-qwen2-7b.json")
    scenario = Scenario(cluster)
    log = read_text("logs/qwen2-7b-tp1-startup.log")
    suffixes = ["x2kqp", "m4v7r", "p9q2s", "t6w3z", "b8n5k", "c3d7f", "h2j9l", "r5s8v"]
    for i in range(replicas):
        name = f"vllm-7b-7d9f8c6b5-{suffixes[i % len(suffixes)]}{'' if i < 8 else i}"
        pod = healthy_pod(name)
        events = [copy.deepcopy(e) for e in _events("vllm-7b-healthy")]
        for e in events:
            e["involvedObject"]["name"] = name
            e["message"] = e["message"].replace("vllm-7b-7d9f8c6b5-x2kqp", name)
        cluster.add_pod(pod, events)
        cluster.add_log("serving", name, "vllm", log)
        scenario.vllm[("serving", name, VLLM_PORT)] = (_metrics("tp1-idle"), models)
        if nvidia_smi:
            cluster.exec_answers[(name, "vllm", "nvidia-smi")] = ExecAnswer(
                stdout=read_text("exec/nvidia-smi-l4x2-555.42.06.xml")
            )
            cluster.exec_answers[(name, "vllm", "python3")] = ExecAnswer(
                stdout=read_text("exec/versions-vllm-0.10.1.1.json")
            )
    return scenario


def scenario_gpu_unschedulable() -> Scenario:
    """sts/vllm in namespace llm: vllm-1 Pending, Insufficient nvidia.com/gpu (AKS, 2x T4)."""
    cluster = FakeCluster()
    cluster.add_app(load("statefulset-vllm-aks.json"))
    cluster.add_pod(load("pod-vllm-1-pending-aks.json"), _events("vllm-1-pending-aks"))
    for idx in ("000002", "000003"):
        cluster.nodes[f"aks-gpunp-98036146-vmss{idx}"] = load(f"node-aks-gpunp-vmss{idx}.json")
    return Scenario(cluster)


def scenario_oomkilled() -> Scenario:
    """A running pod whose previous container was OOMKilled (host memory limit 16Gi)."""
    cluster = FakeCluster()
    _add_vllm_7b_owners(cluster)
    pod = load("pod-vllm-7b-oomkilled.json")
    name = pod["metadata"]["name"]
    cluster.add_pod(pod, _events("vllm-7b-oomkilled"))
    cluster.add_log("serving", name, "vllm", read_text("logs/oomkilled.log"))
    cluster.add_log("serving", name, "vllm", read_text("logs/oomkilled.previous.log"), True)
    scenario = Scenario(cluster)
    scenario.vllm[("serving", name, VLLM_PORT)] = (
        _metrics("tp1-idle"),
        load("vllm/models-qwen2-7b.json"),
    )
    return scenario


def scenario_crashloop_cuda_oom() -> Scenario:
    """CrashLoopBackOff whose previous log ends in torch.OutOfMemoryError: CUDA out of memory."""
    cluster = FakeCluster()
    _add_vllm_7b_owners(cluster)
    pod = load("pod-vllm-7b-crashloop.json")
    name = pod["metadata"]["name"]
    cluster.add_pod(pod, _events("vllm-7b-crashloop"))
    cluster.add_log("serving", name, "vllm", read_text("logs/crashloop-cuda-oom.log"))
    cluster.add_log(
        "serving", name, "vllm", read_text("logs/crashloop-cuda-oom.previous.log"), True
    )
    return Scenario(cluster)  # nothing listens on the port: the proxy answers 503


def scenario_probe_killed() -> Scenario:
    """A liveness probe (60s + 3 x 10s, no startupProbe) restarting vLLM while it loads."""
    cluster = FakeCluster()
    cluster.nodes["gpu-a100-node-3"] = load("node-gpu-a100-node-3.json")
    pod = load("pod-vllm-qwen2-7b-probe-killed.json")
    name = pod["metadata"]["name"]
    _add_owners_like_vllm_7b(cluster, pod)
    cluster.add_pod(pod, _events("vllm-qwen2-7b-probe-killed"))
    cluster.add_log("serving", name, "vllm", read_text("logs/probe-killed.log"))
    cluster.add_log("serving", name, "vllm", read_text("logs/probe-killed.previous.log"), True)
    return Scenario(cluster)  # still loading: connection refused through the proxy


def scenario_saturated() -> Scenario:
    """A healthy TP=2 pod whose request queue is saturated (running at ~256, hundreds waiting)."""
    cluster = FakeCluster()
    cluster.nodes["gpu-a100-node-3"] = load("node-gpu-a100-node-3.json")
    pod = load("pod-vllm-7b-tp2-saturated.json")
    name = pod["metadata"]["name"]
    _add_owners_like_vllm_7b(cluster, pod)
    cluster.add_pod(pod, _events("vllm-7b-tp2-saturated"))
    cluster.add_log("serving", name, "vllm", read_text("logs/qwen2-7b-tp2-startup.log"))
    scenario = Scenario(cluster)
    scenario.vllm[("serving", name, VLLM_PORT)] = (
        _metrics("tp2-saturated"),
        load("vllm/models-qwen2-7b.json"),
    )
    return scenario


class Running:
    """A started scenario: the API server, its fake vLLM upstreams, and a kubeconfig."""

    def __init__(self, scenario: Scenario, kubeconfig: Path, delay: float = 0.0):
        self.scenario = scenario
        self.kubeconfig = kubeconfig
        self.delay = delay
        self.vllms: list[FakeVllm] = []
        self.server: K8sServer | None = None

    def __enter__(self) -> Running:
        for key, (metrics, models) in self.scenario.vllm.items():
            vllm = FakeVllm(metrics, models, delay=self.delay).__enter__()
            self.vllms.append(vllm)
            self.scenario.cluster.upstreams[key] = vllm.url
        self.server = K8sServer(self.scenario.cluster, delay=self.delay).__enter__()
        self.server.write_kubeconfig(self.kubeconfig)
        return self

    def __exit__(self, *exc) -> None:
        if self.server is not None:
            self.server.__exit__(*exc)
        for vllm in self.vllms:
            vllm.__exit__(*exc)
