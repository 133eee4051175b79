"""The parts of a pod that need more than one API read: logs, vLLM via the pod proxy, exec.

Each function returns {fact key: value or Missing(reason)} and never raises for an API error.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from llmdoctor.collectors.k8s_client import KubeConnection, KubeError, read_text
from llmdoctor.collectors.k8s_exec import exec_in_container
from llmdoctor.engine.deadline import map_abandonable, submit_abandonable
from llmdoctor.engine.facts import Missing
from llmdoctor.engine.textsource import TextSource
from llmdoctor.parsers.k8s_pod import restarted
from llmdoctor.parsers.serving_args import parse_serving_args

DEFAULT_WINDOW = 5.0
PORT_NAMES = ("http", "vllm", "api", "openai", "serve", "server")
NOT_FOUND_IN_IMAGE = ("executable file not found", "no such file or directory")


def window_seconds(options: dict) -> float:
    """Seconds between the two /metrics scrapes (--window; 0 means one scrape)."""
    value = options.get("window")
    return DEFAULT_WINDOW if value is None else max(0.0, float(value))


def _statuses(pod: dict) -> dict[str, dict]:
    status = pod.get("status") or {}
    every = (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or [])
    return {cs.get("name"): cs for cs in every}


def _started(status: dict) -> bool:
    state = status.get("state") or {}
    return bool(state.get("running") or state.get("terminated") or status.get("restartCount"))


def collect_logs(conn: KubeConnection, pod: dict, tail: int) -> dict[str, Any]:
    """logs/<c>.log for every container that ran (init containers too: model downloaders),
    and logs/<c>.previous.log after a restart."""
    name = pod["metadata"]["name"]
    statuses = _statuses(pod)
    spec = pod.get("spec") or {}
    result: dict[str, Any] = {}
    wanted: list[tuple[str, str, bool]] = []
    for c in (spec.get("initContainers") or []) + (spec.get("containers") or []):
        cname = c.get("name")
        status = statuses.get(cname, {})
        if not _started(status):
            waiting = ((status.get("state") or {}).get("waiting") or {}).get("reason")
            why = f" ({waiting})" if waiting else ""
            result[f"logs/{cname}.log"] = Missing(f"container {cname} has not started{why}")
            continue
        wanted.append((f"logs/{cname}.log", cname, False))
        if restarted(status):
            wanted.append((f"logs/{cname}.previous.log", cname, True))

    def read(item: tuple[str, str, bool]) -> tuple[str, Any]:
        key, cname, previous = item
        try:
            text = read_text(
                conn,
                conn.core().read_namespaced_pod_log,
                "get",
                "pods/log",
                name=name,
                namespace=conn.namespace,
                container=cname,
                tail_lines=tail,
                previous=previous,
            )
        except KubeError as exc:
            return key, exc
        return key, TextSource.from_text(key, text)

    if not wanted:
        reasons = [v.reason for v in result.values() if isinstance(v, Missing)]
        result["logs/"] = Missing(reasons[0] if reasons else "the pod has no containers")
        return result
    if wanted:
        for key, value in map_abandonable(read, wanted, len(wanted)):
            if isinstance(value, KubeError):
                result[key] = Missing(value.reason)
                if value.status in (401, 403):
                    result["logs/"] = Missing(value.reason)
            else:
                result[key] = value
    return result


def serving_port(pod: dict, args: dict, option_port: int | None) -> int:
    """vLLM's port: --port, else vLLM's --port flag, else the container's port, else 8000."""
    if option_port:
        return int(option_port)
    if "port" in (args.get("explicit") or []) and args.get("port"):
        return int(args["port"])
    container = next(
        (
            c
            for c in (pod.get("spec") or {}).get("containers") or []
            if c.get("name") == args.get("container")
        ),
        None,
    )
    ports = [p for p in (container or {}).get("ports") or [] if p.get("containerPort")]
    for p in ports:
        if str(p.get("name", "")).lower() in PORT_NAMES:
            return int(p["containerPort"])
    if ports:
        return int(ports[0]["containerPort"])
    return int(args.get("port") or 8000)


def _proxy_error_hook(state: dict):
    """Turn the API server's own error answers (a v1 Status) into connection errors.

    Through the pod proxy, "connection refused" from vLLM arrives as a 503 Status from the API
    server; raising it as a connection error makes the vLLM collector see what a direct
    connection would. A 403 Status is the proxy being forbidden, remembered in `state`.
    """
    import requests

    def hook(response, *args, **kwargs):
        if response.status_code < 400 or "json" not in response.headers.get("Content-Type", ""):
            return response
        try:
            body = response.json()
        except ValueError:
            return response
        if not (isinstance(body, dict) and body.get("kind") == "Status"):
            return response
        message = str(body.get("message") or body.get("reason") or response.status_code)
        if response.status_code in (401, 403):
            method = (response.request.method or "GET").upper() if response.request else "GET"
            state.setdefault("denied", {})[method] = response.status_code
            raise requests.exceptions.ConnectionError(message)
        raise requests.exceptions.ConnectionError(f"{message} (via the API server's pod proxy)")

    return hook


def collect_endpoint_via_proxy(
    conn: KubeConnection, pod: dict, options: dict, timeout: float
) -> dict[str, Any]:
    """vLLM's /metrics, /health, /v1/models and the probe, through pods/NAME:PORT/proxy."""
    phase = (pod.get("status") or {}).get("phase")
    if phase != "Running":
        return {"vllm/": Missing(f"the pod is {phase or 'not running'}: no vLLM server to query")}
    try:
        from llmdoctor.collectors.vllm_endpoint import collect_endpoint
    except ImportError:
        return {"vllm/": Missing("the vLLM endpoint collector is not installed")}
    args = parse_serving_args(pod)
    port = serving_port(pod, args, options.get("port"))
    name = pod["metadata"]["name"]
    base_url = f"{conn.host}/api/v1/namespaces/{conn.namespace}/pods/{name}:{port}/proxy"
    session = conn.http_session()
    state: dict[str, dict[str, int]] = {}
    session.hooks["response"].append(_proxy_error_hook(state))
    kwargs = {
        "timeout": timeout,
        "window": window_seconds(options),
        "model": options.get("model"),  # None: the first /v1/models id, as vLLM serves it
        "chat": bool(options.get("chat")),
        "max_latency_ms": options.get("max_latency_ms"),
    }
    try:
        result = collect_endpoint(base_url, session, **kwargs)
    finally:
        session.close()
    denied = state.get("denied") or {}
    if 401 in denied.values():
        return {"vllm/": Missing("unauthorized: the API server rejected the credentials")}
    if denied.get("GET") == 403:
        return {"vllm/": Missing(_proxy_forbidden("get", conn.namespace))}
    if denied.get("POST") == 403:  # reads allowed; the generation probe POSTs
        result["vllm/probe.json"] = Missing(_proxy_forbidden("create", conn.namespace))
    return result


def _proxy_forbidden(verb: str, namespace: str) -> str:
    return (
        f"forbidden: cannot {verb} pods/proxy in namespace {namespace} "
        f"(RBAC: add '{verb}' on 'pods/proxy' to the Role)"
    )


def serving_env_script(name: str = "serving_env_probe.py") -> str | None:
    """A stdlib script of llmdoctor/data/ run by the serving container's python: the
    environment probe (node/versions.json) or vLLM's own argument check (serving/vllm-args.json).
    """
    path = Path(__file__).resolve().parent.parent / "data" / name
    return path.read_text(encoding="utf-8") if path.is_file() else None


VLLM_ARGS = "serving/vllm-args.json"


def vllm_args_command(args: dict) -> list[str] | None:
    """The exec that asks the image's own vLLM to parse the server's arguments, or None."""
    script = serving_env_script("vllm_args_probe.py")
    entry = str(args.get("entrypoint") or "")
    if script is None or not entry:
        return None
    request = {
        "args": list(args.get("argv") or []),
        "positional_model": entry.endswith("vllm serve") or entry == "image entrypoint",
    }
    return ["python3", "-c", script, "--llmdoctor-vllm-args", json.dumps(request)]


def _exec_failure(what: str, exc_or_result) -> str:
    if isinstance(exc_or_result, KubeError):
        return exc_or_result.reason
    r = exc_or_result
    text = (r.message or r.stderr or r.stdout or "").strip()
    first = text.splitlines()[0][:300] if text else "no output"
    if any(s in text.lower() for s in NOT_FOUND_IN_IMAGE) or r.exit_code == 127:
        return f"{what} is not in the serving container's image ({first})"
    return f"{what} exited with code {r.exit_code}: {first}"


def _vllm_args_fact(checked) -> Any:
    if checked is None:
        return Missing("no vLLM command line in the pod spec to check")
    if isinstance(checked, KubeError) or checked.exit_code != 0:
        return Missing(_exec_failure("python3 (vLLM's argument check)", checked))
    try:
        found = json.loads(checked.stdout)
    except json.JSONDecodeError as exc:
        return Missing(f"vLLM's argument check printed no JSON ({exc})")
    return found if isinstance(found, dict) else Missing("vLLM's argument check printed no object")


def collect_exec(conn: KubeConnection, pod: dict, timeout: float) -> dict[str, Any]:
    """node/nvidia-smi.xml and node/versions.json as seen inside the serving container."""
    args = parse_serving_args(pod)
    container = args.get("container")
    status = _statuses(pod).get(container, {})
    if not container or not (status.get("state") or {}).get("running"):
        reason = f"the serving container {container or '?'} is not running: nothing to exec into"
        return {
            "node/nvidia-smi.xml": Missing(reason),
            "node/versions.json": Missing(reason),
            VLLM_ARGS: Missing(reason),
        }
    name = pod["metadata"]["name"]
    script = serving_env_script()

    def run(command: list[str]):
        try:
            return exec_in_container(conn, name, container, command, timeout)
        except KubeError as exc:
            return exc

    check_args = vllm_args_command(args)
    smi_future = submit_abandonable(run, ["nvidia-smi", "-q", "-x"])
    env_future = submit_abandonable(run, ["python3", "-c", script]) if script else None
    args_future = submit_abandonable(run, check_args) if check_args else None
    smi, env = smi_future.result(), env_future.result() if env_future else None
    checked = args_future.result() if args_future else None
    result: dict[str, Any] = {VLLM_ARGS: _vllm_args_fact(checked)}
    if not isinstance(smi, KubeError) and smi.exit_code == 0 and "<nvidia_smi_log" in smi.stdout:
        result["node/nvidia-smi.xml"] = smi.stdout
    else:
        result["node/nvidia-smi.xml"] = Missing(_exec_failure("nvidia-smi", smi))
        if not isinstance(smi, KubeError) and (smi.stdout or smi.stderr).strip():
            # what nvidia-smi printed instead (e.g. "Failed to initialize NVML: Driver/library
            # version mismatch") is scanned by the log signatures like any log
            text = (smi.stdout + smi.stderr).strip() + "\n"
            result["logs/exec-nvidia-smi.log"] = TextSource.from_text(
                "logs/exec-nvidia-smi.log", text
            )
    if env is None:
        result["node/versions.json"] = Missing("the serving environment probe is not installed")
    elif not isinstance(env, KubeError) and env.exit_code == 0:
        try:
            result["node/versions.json"] = json.loads(env.stdout)
        except json.JSONDecodeError as exc:
            result["node/versions.json"] = Missing(f"the environment probe printed no JSON ({exc})")
    else:
        result["node/versions.json"] = Missing(_exec_failure("python3", env))
    return result
