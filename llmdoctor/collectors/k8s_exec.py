"""Run a command in a container through pods/exec (the websocket `kubectl exec` uses).

Used for `nvidia-smi -q -x` and the serving-environment probe, so the node checks see what the
serving process sees. Each call gets its own ApiClient: kubernetes.stream patches the client
it is given while the call runs, which must not leak into the other collectors' threads.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from llmdoctor.collectors.k8s_client import KubeConnection, KubeError, describe_failure

ERROR_CHANNEL = 3


@dataclass
class ExecResult:
    stdout: str
    stderr: str
    exit_code: int | None
    message: str  # the API server's status message when the command failed


def _status(raw: str) -> tuple[int | None, str]:
    """Exit code and message from the error channel's Status ('Success' = 0)."""
    if not raw.strip():
        return None, ""
    try:
        status = json.loads(raw)
    except json.JSONDecodeError:
        return None, raw.strip().splitlines()[0]
    if status.get("status") == "Success":
        return 0, ""
    message = str(status.get("message") or "")
    for cause in (status.get("details") or {}).get("causes") or []:
        if cause.get("reason") == "ExitCode":
            try:
                return int(cause.get("message")), message
            except (TypeError, ValueError):
                break
    return None, message


def exec_in_container(
    conn: KubeConnection, pod: str, container: str, command: list[str], timeout: float
) -> ExecResult:
    """Run `command` in the container; KubeError (with the RBAC reason on 403) on failure."""
    from kubernetes import client
    from kubernetes.stream import stream

    api = client.CoreV1Api(conn.new_api_client())
    try:
        ws = stream(
            api.connect_get_namespaced_pod_exec,
            pod,
            conn.namespace,
            container=container,
            command=command,
            stderr=True,
            stdin=False,
            stdout=True,
            tty=False,
            _preload_content=False,
            _request_timeout=conn.request_timeout(),
        )
    except Exception as exc:
        raise describe_failure(exc, "create", "pods/exec", conn.namespace) from None
    deadline = time.monotonic() + timeout
    stdout: list[str] = []
    stderr: list[str] = []
    try:
        while ws.is_open() and time.monotonic() < deadline:
            ws.update(timeout=min(1.0, max(0.0, deadline - time.monotonic())))
            if ws.peek_stdout():
                stdout.append(ws.read_stdout())
            if ws.peek_stderr():
                stderr.append(ws.read_stderr())
        if ws.is_open():
            raise KubeError(f"exec {command[0]}: no answer within {timeout:g}s")
        stdout.append(ws.read_stdout() if ws.peek_stdout() else "")
        stderr.append(ws.read_stderr() if ws.peek_stderr() else "")
        code, message = _status(ws.read_channel(ERROR_CHANNEL))
    finally:
        ws.close()
    return ExecResult("".join(stdout), "".join(stderr), code, message)
