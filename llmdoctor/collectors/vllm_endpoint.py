"""Collect one vLLM OpenAI-compatible endpoint over HTTP, bounded in time and size.

Bounded requests (timeouts, size caps, same-origin redirects), /health, /v1/models, /metrics,
/tokenize and the concurrent collection; the streamed generation probe is in
llmdoctor.collectors.vllm_generation_probe. `collect_endpoint()` is the one entry point; `llmdoctor probe`/`diagnose http://...` call it
with a plain requests.Session, the Kubernetes collector with a session that talks through the
API server's pod proxy. Everything here is network I/O; parsing is left to llmdoctor.parsers.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

from llmdoctor.collectors.http_request import SNIPPET, error_message, http_request
from llmdoctor.collectors.vllm_generation_probe import generation_probe
from llmdoctor.engine.deadline import Background
from llmdoctor.engine.facts import Missing
from llmdoctor.parsers.vllm_metrics import requests_waiting
from llmdoctor.parsers.vllm_serving import model_ids

MIB = 1024 * 1024
METRICS_CAP = 16 * MIB  # a /metrics page with many LoRA adapters stays far below this
JSON_CAP = 2 * MIB


def _get_json(session, url: str, what: str, *, timeout: float, deadline: float) -> Any:
    reply = http_request(session, "GET", url, timeout=timeout, deadline=deadline, cap=JSON_CAP)
    if reply.status is None or reply.error:
        return Missing(f"{what}: {reply.error}")
    if reply.status != 200 or reply.looks_like_html():
        return Missing(f"{what}: {error_message(reply)[0]}")
    try:
        return json.loads(reply.text())
    except ValueError:
        snippet = reply.text().strip()[:80]
        return Missing(f"{what}: answered 200 but the body is not JSON ({snippet!r})")


def check_health(session, base: str, *, timeout: float, deadline: float) -> dict[str, Any]:
    """vllm/health.json: {"status", "latency_ms", "error"} (+ error_kind, body when not empty)."""
    reply = http_request(
        session, "GET", f"{base}/health", timeout=timeout, deadline=deadline, cap=JSON_CAP
    )
    result: dict[str, Any] = {
        "status": reply.status,
        "latency_ms": reply.latency_ms,
        "error": reply.error,
    }
    if reply.error_kind:
        result["error_kind"] = reply.error_kind
    if reply.status is not None and reply.body.strip():
        result["body"] = reply.text()[:SNIPPET]
        result["content_type"] = reply.content_type
        if reply.looks_like_html():
            result["error"] = result["error"] or error_message(reply)[0]
            result["error_kind"] = "html"
    if reply.status is not None and reply.status >= 400 and not result["error"]:
        result["error"] = error_message(reply)[0]
    return result


def list_models(session, base: str, *, timeout: float, deadline: float) -> Any:
    """The /v1/models body, or Missing saying why it could not be read."""
    body = _get_json(
        session, f"{base}/v1/models", "GET /v1/models", timeout=timeout, deadline=deadline
    )
    if isinstance(body, Missing):
        return body
    if not isinstance(body, dict) or not isinstance(body.get("data"), list):
        return Missing("GET /v1/models: answered 200 but not an OpenAI model list")
    return body


def scrape_metrics(session, base: str, *, timeout: float, deadline: float) -> tuple[Any, dict]:
    """(metrics text or Missing, its vllm/scrapes.json entry without the file name)."""
    reply = http_request(
        session, "GET", f"{base}/metrics", timeout=timeout, deadline=deadline, cap=METRICS_CAP
    )
    entry: dict[str, Any] = {"at": round(reply.done_at, 3), "latency_ms": reply.latency_ms}
    if reply.status is None or reply.error:
        why = reply.error or "no answer"
    elif reply.status != 200:
        why = error_message(reply)[0]
    elif reply.looks_like_html():
        moved = f" after a redirect to {reply.redirected_to}" if reply.redirected_to else ""
        why = (
            f"answered {reply.status} with an HTML page{moved}, not Prometheus text: something "
            "else (a proxy, a login page, a UI) answers on this address"
        )
    else:
        entry["bytes"] = len(reply.body)
        return reply.text(), entry
    entry.update(error=why, status=reply.status)
    return Missing(f"GET /metrics: {why}"), entry


def server_tokenize(session, base: str, text: str, *, timeout: float, deadline: float) -> dict:
    """POST /tokenize with the sample text: {"status", "latency_ms", "count", "error"}."""
    reply = http_request(
        session,
        "POST",
        f"{base}/tokenize",
        timeout=timeout,
        deadline=deadline,
        cap=JSON_CAP,
        json_body={"prompt": text},
    )
    result: dict[str, Any] = {
        "status": reply.status,
        "latency_ms": reply.latency_ms,
        "count": None,
        "error": reply.error,
    }
    if reply.error or reply.status != 200:
        result["error"] = reply.error or error_message(reply)[0]
        return result
    try:
        body = json.loads(reply.text())
        result["count"] = body.get("count")
        result["max_model_len"] = body.get("max_model_len")
    except (ValueError, AttributeError):
        result["error"] = "answered 200 but not a /tokenize response"
    return result


def request_deadline(now: float, first_deadline: float, until: float, timeout: float) -> float:
    """When a request starting `now` must be done: by `first_deadline`, or half a timeout from
    now when its thread ran late (a loaded machine: the real saturation drill on a busy 2-core
    CI machine started two requests 20 s after the others, too late to be sent), never past
    `until`, when its task is given up."""
    return min(until, max(first_deadline, now + timeout / 2))


class _Tasks:
    """Requests on daemon threads with hard deadlines: a task stuck past its deadline is abandoned."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.results: dict[str, Any] = {}
        self.started: list[tuple[Background, float, tuple[str, ...], str]] = []

    def put(self, key: str, value: Any) -> None:
        with self.lock:
            self.results[key] = value

    def start(self, name: str, fn: Callable[[], None], deadline: float, keys: tuple[str, ...]):
        self.started.append((Background(fn, f"vllm-{name}"), deadline, keys, name))

    def put_default(self, key: str, value: Any) -> None:
        with self.lock:
            self.results.setdefault(key, value)

    def wait(self, started: float) -> dict[str, Any]:
        for task, deadline, keys, name in self.started:
            outcome = task.wait(deadline + 0.1)
            if not outcome.done:
                waited = time.monotonic() - started
                for key in keys:
                    self.put_default(key, Missing(f"{name}: no answer within {waited:.1f}s"))
            elif isinstance(outcome.error, Exception):  # a bug here must not lose the others
                exc = outcome.error
                for key in keys:
                    self.put_default(key, Missing(f"{name} failed: {type(exc).__name__}: {exc}"))
        with self.lock:
            return dict(self.results)


def collect_endpoint(
    base_url: str,
    session,
    *,
    timeout: float,
    window: float = 5.0,
    model: str | None = None,
    chat: bool = False,
    max_latency_ms: float | None = None,
    probe: bool = True,
    tokenize_text: str | None = None,
) -> dict[str, Any]:
    """Collect a vLLM endpoint; returns {fact key: value or Missing(reason)}.

    `base_url` is what the paths are appended to: `http://host:8000`, or a pod-proxy URL like
    `https://APISERVER/api/v1/namespaces/NS/pods/NAME:8000/proxy`. `session` is a
    requests.Session carrying whatever auth/certificates the base URL needs.

    Keys: vllm/health.json {"status", "latency_ms", "error"}; vllm/models.json (the /v1/models
    body); vllm/version.json; vllm/metrics-0.txt and vllm/metrics-1.txt (raw Prometheus text,
    scraped `window` seconds apart or, when the first shows no request waiting and the generation
    probe is still running, once it finished, at most `timeout` after the start; window 0 = one
    scrape); vllm/scrapes.json
    [{"file", "at", "latency_ms"} or {"file": null, "at", "error"}]; vllm/probe.json (one
    streamed generation with `model`, default the first /v1/models id, through
    /v1/completions or with `chat` /v1/chat/completions: status, latency_ms, ttft_ms, itl_ms,
    text, error...); with `tokenize_text`, "vllm/tokenize" (the /tokenize timing, a dict).
    `max_latency_ms` is recorded in the probe's request for the report only.

    Time: every request has `timeout`; calls run in parallel. When the endpoint does not
    answer at all this returns after about `timeout`; otherwise within window + 1.5 × timeout
    (the second scrape, a probe that waited for /v1/models and any request whose thread a
    loaded machine started late get at least half a timeout).
    Bodies are capped (metrics 16 MiB, others 1-2 MiB). Never raises for network errors.
    """
    base = base_url.rstrip("/")
    tasks = _Tasks()
    t0 = time.monotonic()
    first_deadline = t0 + timeout
    late = t0 + 1.5 * timeout

    def deadline_now() -> float:
        return request_deadline(time.monotonic(), first_deadline, late, timeout)

    # without a queue the second scrape waits for our own request, so that on an idle server
    # the window holds at least one finished request and the phase latencies are measured;
    # with one it does not: our request would finish only once the queue ahead had drained,
    # and the window would end on an empty queue (the real saturation drill)
    probe_finished = threading.Event()

    def health() -> None:
        tasks.put(
            "vllm/health.json",
            check_health(session, base, timeout=timeout, deadline=deadline_now()),
        )

    def version() -> None:
        tasks.put(
            "vllm/version.json",
            _get_json(
                session, f"{base}/version", "GET /version", timeout=timeout, deadline=deadline_now()
            ),
        )

    def run_probe(name: str, deadline: float) -> None:
        try:
            result = generation_probe(
                session, base, name, chat=chat, timeout=timeout, deadline=deadline
            )
            if max_latency_ms is not None:
                result["max_latency_ms"] = max_latency_ms
            tasks.put("vllm/probe.json", result)
        finally:
            probe_finished.set()

    def models_then_probe() -> None:
        models = list_models(session, base, timeout=timeout, deadline=deadline_now())
        tasks.put("vllm/models.json", models)
        if not probe or model:
            return
        ids = model_ids(models)
        if not ids:
            why = models.reason if isinstance(models, Missing) else "/v1/models lists no model"
            # --model helps a server that answers without a usable list, not one unreachable
            answered = not isinstance(models, Missing) or "HTTP " in why
            hint = " (give --model)" if answered else ""
            tasks.put("vllm/probe.json", Missing(f"generation probe not run: {why}{hint}"))
            probe_finished.set()
            return
        run_probe(ids[0], deadline_now())

    def metrics() -> None:
        scrapes: list[dict[str, Any]] = []
        text, entry = scrape_metrics(session, base, timeout=timeout, deadline=deadline_now())
        first_done = time.monotonic()
        scrapes.append({"file": None if isinstance(text, Missing) else "metrics-0.txt", **entry})
        tasks.put("vllm/metrics-0.txt", text)
        tasks.put("vllm/scrapes.json", list(scrapes))  # kept even if the second scrape hangs
        if isinstance(text, Missing) or window <= 0:
            why = "the first scrape failed" if isinstance(text, Missing) else "window is 0"
            tasks.put("vllm/metrics-1.txt", Missing(f"second /metrics scrape not taken: {why}"))
            tasks.put("vllm/scrapes.json", scrapes)
            return
        time.sleep(max(0.0, first_done + window - time.monotonic()))
        if not requests_waiting(text):
            probe_finished.wait(max(0.0, first_deadline - time.monotonic()))
        deadline = max(t0 + window + timeout, time.monotonic() + timeout / 2)
        text, entry = scrape_metrics(session, base, timeout=timeout, deadline=deadline)
        scrapes.append({"file": None if isinstance(text, Missing) else "metrics-1.txt", **entry})
        tasks.put("vllm/metrics-1.txt", text)
        tasks.put("vllm/scrapes.json", scrapes)

    def tokenize() -> None:
        tasks.put(
            "vllm/tokenize",
            server_tokenize(
                session, base, tokenize_text or "", timeout=timeout, deadline=deadline_now()
            ),
        )

    if not probe:
        probe_finished.set()
    tasks.start("GET /health", health, late, ("vllm/health.json",))
    tasks.start("GET /version", version, late, ("vllm/version.json",))
    probe_keys = ("vllm/probe.json",) if probe and not model else ()
    tasks.start("GET /v1/models", models_then_probe, late, ("vllm/models.json", *probe_keys))
    if probe and model:
        tasks.start(
            "generation probe",
            lambda: run_probe(model, deadline_now()),
            late,
            ("vllm/probe.json",),
        )
    metric_keys = ("vllm/metrics-0.txt", "vllm/metrics-1.txt", "vllm/scrapes.json")
    tasks.start("GET /metrics", metrics, t0 + window + 1.5 * timeout, metric_keys)
    if tokenize_text:
        tasks.start("POST /tokenize", tokenize, late, ("vllm/tokenize",))
    results = tasks.wait(t0)
    if not probe:
        results.setdefault("vllm/probe.json", Missing("generation probe not requested"))
    return results
