"""A connection to the Kubernetes API: kubeconfig (--context, KUBECONFIG) or in-cluster config.

Reads return the raw JSON the API server sent (the documents `kubectl get -o json` prints), not
the client's model objects, so live facts and bundle files are the same documents. Errors
become one-line reasons that name what is missing, e.g. a 403 on logs becomes
"forbidden: cannot get pods/log in namespace serving (RBAC: add 'get' on 'pods/log')".
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from typing import Any

from llmdoctor.errors import BadInput

IN_CLUSTER_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


class KubeError(Exception):
    """A Kubernetes API call that failed; `reason` is the one line to show, `status` the HTTP code."""

    def __init__(self, reason: str, status: int | None = None):
        super().__init__(reason)
        self.reason = reason
        self.status = status


@dataclass
class KubeConnection:
    """An ApiClient plus what the collectors need around it."""

    api_client: Any
    namespace: str
    timeout: float
    context: str | None = None

    @property
    def configuration(self):
        return self.api_client.configuration

    @property
    def host(self) -> str:
        return str(self.configuration.host).rstrip("/")

    def request_timeout(self) -> tuple[float, float]:
        return (min(5.0, self.timeout), self.timeout)

    def core(self):
        from kubernetes import client

        return client.CoreV1Api(self.api_client)

    def apps(self):
        from kubernetes import client

        return client.AppsV1Api(self.api_client)

    def new_api_client(self):
        """A separate ApiClient on the same configuration (exec patches its client while running)."""
        from kubernetes import client

        return client.ApiClient(configuration=self.configuration)

    def http_session(self):
        """A requests.Session that authenticates to the API server like the client does."""
        import requests

        cfg = self.configuration
        session = requests.Session()
        session.trust_env = False  # the kubernetes client ignores proxy env vars too
        token = cfg.get_api_key_with_prefix("authorization") or cfg.get_api_key_with_prefix(
            "BearerToken"
        )
        if token:
            session.headers["Authorization"] = token
        if cfg.username and cfg.password:
            session.auth = (cfg.username, cfg.password)
        session.verify = (cfg.ssl_ca_cert or True) if cfg.verify_ssl else False
        if cfg.cert_file:
            session.cert = (cfg.cert_file, cfg.key_file) if cfg.key_file else cfg.cert_file
        if cfg.proxy:
            session.proxies = {"http": cfg.proxy, "https": cfg.proxy}
        return session


def _kubeconfig_namespace(config_file: str | None, context: str | None) -> str | None:
    from kubernetes import config

    contexts, active = config.list_kube_config_contexts(config_file=config_file)
    chosen = active
    if context is not None:
        chosen = next((c for c in contexts if c.get("name") == context), None)
        if chosen is None:
            names = ", ".join(sorted(c.get("name", "?") for c in contexts))
            raise BadInput(f"kubeconfig has no context {context!r} (contexts: {names})")
    return ((chosen or {}).get("context") or {}).get("namespace")


def without_retries(cfg) -> None:
    """One attempt per request: urllib3's default Retry(3) made a silent API server cost four
    --timeouts per call, past the budget the user gave."""
    from urllib3.util.retry import Retry

    cfg.retries = Retry(total=0, redirect=0, raise_on_status=False)
    cfg.client_go_retries = False


def connect(context: str | None, namespace: str | None, timeout: float) -> KubeConnection:
    """Load kubeconfig (or the in-cluster service account); BadInput when neither works.

    Loading can run the kubeconfig's exec credential plugin (aws, gke-gcloud-auth-plugin,
    kubelogin), which the client waits for without a timeout; one waiting for a browser login
    would hang the run, so it gets --timeout like every request."""
    from llmdoctor.engine.collect import submit_abandonable

    loading = submit_abandonable(_connect, context, namespace, timeout)
    try:
        return loading.result(timeout=timeout)
    except TimeoutError:
        raise BadInput(
            f"loading the kubeconfig took more than {timeout:g}s: its exec credential plugin "
            "did not answer (a login waiting in a browser? run any kubectl command once)"
        ) from None


def _connect(context: str | None, namespace: str | None, timeout: float) -> KubeConnection:
    from kubernetes import client, config

    cfg = client.Configuration()
    config_file = os.environ.get("KUBECONFIG") or None
    default_namespace = None
    try:
        config.load_kube_config(
            config_file=config_file, context=context, client_configuration=cfg, persist_config=False
        )
        default_namespace = _kubeconfig_namespace(config_file, context)
    except config.ConfigException as exc:
        if context is not None or not os.environ.get("KUBERNETES_SERVICE_HOST"):
            raise BadInput(f"cannot load kubeconfig: {str(exc).splitlines()[0]}") from None
        try:
            config.load_incluster_config(client_configuration=cfg)
        except config.ConfigException as inner:
            raise BadInput(f"no kubeconfig and no in-cluster config: {inner}") from None
        if os.path.exists(IN_CLUSTER_NAMESPACE):
            with open(IN_CLUSTER_NAMESPACE, encoding="utf-8") as fh:
                default_namespace = fh.read().strip() or None
    except (OSError, ValueError, TypeError) as exc:
        raise BadInput(f"cannot load kubeconfig: {type(exc).__name__}: {exc}") from None
    without_retries(cfg)
    return KubeConnection(
        api_client=client.ApiClient(configuration=cfg),
        namespace=namespace or default_namespace or "default",
        timeout=timeout,
        context=context,
    )


def _status_message(body: Any) -> str:
    if isinstance(body, bytes):
        body = body.decode("utf-8", errors="replace")
    try:
        parsed = json.loads(body) if isinstance(body, str) and body.strip() else None
    except json.JSONDecodeError:
        parsed = None
    if isinstance(parsed, dict) and parsed.get("message"):
        return str(parsed["message"])
    return str(body or "").strip().splitlines()[0][:300] if body else ""


def describe_failure(
    exc: BaseException, verb: str, resource: str, namespace: str | None
) -> KubeError:
    """The KubeError for a failed call to `verb resource` (namespace None: cluster-scoped)."""
    from kubernetes.client.exceptions import ApiException

    where = f" in namespace {namespace}" if namespace else " (cluster-scoped)"
    if isinstance(exc, ApiException):
        status = exc.status
        if status == 0:  # websocket handshake failures carry the HTTP status in the reason
            m = re.search(r"Handshake status (\d{3})", str(exc.reason or ""))
            status = int(m.group(1)) if m else None
        if status == 403:
            role = "a ClusterRole" if namespace is None else "the Role"
            return KubeError(
                f"forbidden: cannot {verb} {resource}{where} "
                f"(RBAC: add '{verb}' on '{resource}' to {role})",
                403,
            )
        if status == 401:
            return KubeError(
                "unauthorized: the API server rejected the credentials (expired token?)", 401
            )
        message = _status_message(exc.body) or str(exc.reason or "").split(" -+-+- ")[0]
        if status == 404 and not _is_status(exc.body):
            # a Kubernetes API server says NotFound in a Status object; anything else answering
            # 404 (a proxy, a vLLM server, a wrong path prefix) is not the API server at all
            return KubeError(
                f"{verb} {resource}: the server answered 404 without a Kubernetes Status "
                f"({message[:120] or 'empty body'}): is the kubeconfig's server URL a Kubernetes "
                "API server?"
            )
        if status == 404:
            return KubeError(f"not found: {message or resource}", 404)
        return KubeError(f"{verb} {resource} failed: HTTP {status}: {message}", status)
    from llmdoctor.collectors.network_errors import classify_network_error

    kind, text = classify_network_error(exc, 0.0)
    if kind == "timeout":
        return KubeError(f"{verb} {resource}: timed out")
    if kind in ("connect", "reset", "tls"):
        return KubeError(f"cannot reach the Kubernetes API server: {text}")
    return KubeError(f"{verb} {resource} failed: {text}")


def _is_status(body: Any) -> bool:
    """Whether an error body is the API server's `{"kind": "Status", ...}` object."""
    if isinstance(body, bytes):
        body = body.decode("utf-8", errors="replace")
    try:
        parsed = json.loads(body) if isinstance(body, str) and body.strip() else None
    except json.JSONDecodeError:
        return False
    return isinstance(parsed, dict) and parsed.get("kind") == "Status"


def read_json(conn: KubeConnection, call, verb: str, resource: str, namespaced: bool, **kwargs):
    """Call a generated API method without model decoding and return the parsed JSON body."""
    try:
        response = call(_preload_content=False, _request_timeout=conn.request_timeout(), **kwargs)
        data = response.data
    except Exception as exc:
        raise describe_failure(
            exc, verb, resource, conn.namespace if namespaced else None
        ) from None
    try:
        return json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise KubeError(f"{verb} {resource}: the API server sent invalid JSON ({exc})") from None


def read_text(conn: KubeConnection, call, verb: str, resource: str, **kwargs) -> str:
    """Call a generated API method returning text (pod logs), undecoded bytes replaced."""
    try:
        response = call(_preload_content=False, _request_timeout=conn.request_timeout(), **kwargs)
        return response.data.decode("utf-8", errors="replace")
    except Exception as exc:
        raise describe_failure(exc, verb, resource, conn.namespace) from None
