"""`llmdoctor mcp`: llmdoctor's verdicts as Model Context Protocol tools, over stdio.

Each tool but capacity runs one read-only llmdoctor command with `--json` in a child process and
returns its JSON unchanged: the same `llmdoctor/2` report (findings, evidence, runbook ids, skipped,
errors), explain, wiki and capacity objects as the CLI, with the CLI's timeouts, credentials and
RBAC. The child process keeps the protocol's stdout clean and one failed diagnosis from taking
the server down. capacity is arithmetic on one file: it builds a CapacityRequest and runs the
use case here (llmdoctor.usecases.capacity), which returns the command's JSON object. Commands
that write (`collect`, `wiki add`) are not offered.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from llmdoctor.engine.collect import MAX_TIMEOUT, MAX_WINDOW, MIN_TIMEOUT

INSTRUCTIONS = """llmdoctor diagnoses vLLM inference servers on NVIDIA GPUs and Kubernetes.
Start with `diagnose` (a pod, deployment, statefulset, node, vLLM URL or saved bundle): it returns
a status (ok / warning / critical / unknown), findings worst first with evidence and runbook ids,
and the checks it could not run and why. Read a runbook with `wiki_show ID`; match a pasted error
with `explain`; find entries by words with `wiki_search`; check whether a model fits a GPU with
`capacity`. Everything is read-only."""

# exit codes 0-2 carry a result; 3 means llmdoctor could not run (one line on stderr)
RESULT_CODES = (0, 1, 2)


class ToolFailed(RuntimeError):
    """llmdoctor could not run the command (bad target, bad input, nothing checked)."""


def _seconds(name: str, value: Any, low: float, high: float) -> float:
    """A number of seconds the CLI takes, or the CLI's kind of one-line reason: a NaN or an
    infinity reached the subprocess's own deadline before (`cannot convert float NaN`)."""
    import math

    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ToolFailed(f"{name} {value!r}: must be a number of seconds, {low:g} to {high:g}")
    if not low <= value <= high:
        raise ToolFailed(f"{name} {value:g}: must be {low:g} to {high:g} seconds")
    return float(value)


def _plain(name: str, value: str | None) -> str | None:
    """A value that cannot be mistaken for an option of the command line."""
    if value is not None and value.startswith("-"):
        raise ToolFailed(f"{name} {value!r}: must not start with '-'")
    return value


# The diagnose tool probes whatever URL the model names: $LLMDOCTOR_API_KEY goes only to the
# targets this variable's patterns name (the exporter's --api-key-target syntax, comma-separated)
API_KEY_TARGETS = "LLMDOCTOR_MCP_API_KEY_TARGETS"


def api_key_allowed(url: str) -> bool:
    """Whether $LLMDOCTOR_API_KEY may be sent to this http(s) URL (see API_KEY_TARGETS)."""
    from urllib.parse import urlsplit

    from llmdoctor.fleet.target_policy import TargetPolicy

    patterns = [p.strip() for p in os.environ.get(API_KEY_TARGETS, "").split(",") if p.strip()]
    if not patterns:
        return False
    try:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        policy = TargetPolicy.from_patterns(patterns, patterns)
        return policy.check(parts.hostname or "", port).send_api_key
    except ValueError:  # a bad pattern, a refused or unresolvable target: no key
        return False


def run_json(
    args: list[str], *, stdin: str | None = None, timeout: float = 120.0, send_api_key=True
) -> Any:
    """Run `llmdoctor ARGS` and return its JSON output; ToolFailed with its reason otherwise."""
    command = [sys.executable, "-m", "llmdoctor", *args]
    env = {**os.environ, "NO_COLOR": "1"}
    if not send_api_key:
        env.pop("LLMDOCTOR_API_KEY", None)
    try:
        done = subprocess.run(
            command,
            input=stdin if stdin is not None else "",
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
        )
    except subprocess.TimeoutExpired:
        raise ToolFailed(f"llmdoctor {args[0]} did not finish within {timeout:g}s") from None
    if done.returncode not in RESULT_CODES:
        reason = done.stderr.strip().splitlines()
        line = reason[-1].removeprefix("llmdoctor: ") if reason else ""
        raise ToolFailed(line or f"llmdoctor exited {done.returncode}")
    try:
        return json.loads(done.stdout)
    except ValueError:
        raise ToolFailed(f"llmdoctor {args[0]} printed no JSON") from None


def diagnose(
    target: str | None = None,
    namespace: str | None = None,
    context: str | None = None,
    selector: str | None = None,
    bundle: str | None = None,
    no_exec: bool = False,
    window: float = 5.0,
    timeout: float = 10.0,
) -> dict:
    """Diagnose a vLLM deployment: target is pod/NAME, deploy/NAME, sts/NAME, node (this
    machine) or http(s)://HOST:PORT; or give selector (a label selector) or bundle (a saved
    incident bundle path). Returns the llmdoctor/2 report: status, findings (check, severity,
    summary, evidence, runbooks, subject), skipped checks with reasons, collector errors."""
    timeout = _seconds("timeout", timeout, MIN_TIMEOUT, MAX_TIMEOUT)
    window = _seconds("window", window, 0.0, MAX_WINDOW)
    args = ["diagnose", "--json", "--timeout", f"{timeout:g}", "--window", f"{window:g}"]
    if bundle:
        args += ["--bundle", _plain("bundle", bundle)]
    elif target:
        args.append(_plain("target", target))
    elif not selector:
        raise ToolFailed("give a target (pod/NAME, deploy/NAME, node, URL), a selector or a bundle")
    for flag, value in (("-n", namespace), ("--context", context), ("-l", selector)):
        if value:
            args += [flag, _plain(flag, value)]
    if no_exec:
        args.append("--no-exec")
    by_url = bool(target) and not bundle and target.startswith(("http://", "https://"))
    return run_json(
        args,
        timeout=60 + window + 6 * timeout,
        send_api_key=not by_url or api_key_allowed(target),
    )


def explain(text: str, limit: int = 5) -> dict:
    """Which runbook entries explain a log excerpt, stack trace, dmesg or `kubectl describe`
    output, best first, with confidence, the matching lines and the fix."""
    if not text.strip():
        raise ToolFailed("text is empty: paste the log lines to explain")
    return run_json(["explain", "-", "--json", "--limit", str(limit)], stdin=text)


def wiki_search(query: str, limit: int = 10) -> dict:
    """Search the runbook wiki (English or Chinese words, or an error message), best first."""
    if not query.strip():
        raise ToolFailed("query is empty")
    return run_json(["wiki", "search", "--json", "--limit", str(limit), "--", query])


def wiki_show(entry_id: str) -> dict:
    """One runbook entry by id: symptom, cause, fix, verify, references."""
    return run_json(["wiki", "show", "--json", _plain("entry_id", entry_id)])


def capacity(
    model_config_path: str,
    gpu: str,
    params: str | None = None,
    tensor_parallel_size: int = 1,
    gpu_memory_utilization: float = 0.9,
    max_model_len: int | None = None,
    kv_cache_dtype: str | None = None,
    max_num_seqs: int | None = None,
) -> dict:
    """Will a model start on this GPU, and how much context and concurrency fit? gpu is a GPU
    name (A100-80GB, H100, L4 ...); model_config_path the path of the model's config.json on
    the server's machine (a file path, not JSON text); params e.g. 7.6B (else estimated from the
    config)."""
    from llmdoctor.errors import LlmdoctorError
    from llmdoctor.usecases.capacity import CapacityRequest
    from llmdoctor.usecases.capacity import capacity as plan_capacity

    request = CapacityRequest(
        model_config=model_config_path,
        gpu=gpu,
        params=params,
        tensor_parallel_size=tensor_parallel_size,
        gpu_memory_utilization=gpu_memory_utilization,
        max_model_len=max_model_len,
        kv_cache_dtype=kv_cache_dtype or "auto",
        max_num_seqs=max_num_seqs,
    )
    try:  # arithmetic on one file: run here, the same use case as `llmdoctor capacity --json`
        return plan_capacity(request).to_json()
    except LlmdoctorError as exc:
        raise ToolFailed(str(exc)) from None


TOOLS = (diagnose, explain, wiki_search, wiki_show, capacity)


def build_server():
    """The FastMCP server with the read-only tools."""
    from mcp.server.fastmcp import FastMCP
    from mcp.server.fastmcp.exceptions import ToolError
    from mcp.types import ToolAnnotations

    server = FastMCP("llmdoctor", instructions=INSTRUCTIONS, log_level="WARNING")
    read_only = ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True)

    for tool in TOOLS:

        def wrapped(*args, _tool=tool, **kwargs):
            try:
                return _tool(*args, **kwargs)
            except ToolFailed as exc:
                raise ToolError(str(exc)) from None

        _copy_signature(wrapped, tool)
        server.add_tool(wrapped, name=tool.__name__, annotations=read_only)
    return server


def _copy_signature(wrapper, tool) -> None:
    import functools
    import inspect

    functools.update_wrapper(wrapper, tool)
    wrapper.__signature__ = inspect.signature(tool)
    del wrapper.__wrapped__


def serve() -> None:
    """Serve the tools over stdio until the client closes the connection."""
    build_server().run("stdio")
