"""`llmdoctor exporter`: the generation probe as a blackbox-style Prometheus exporter.

`GET /probe?target=http://vllm:8000[&model=NAME][&chat=1]` runs what `llmdoctor probe` runs
(the same collector, timeouts and size caps, the vllm checks) and answers the result as metrics;
`GET /metrics` is the exporter's own. At most `max_concurrent` probes run at once; a scrape that
finds no free slot within `queue_wait` seconds is answered 503 instead of piling up threads.

Whoever reaches the exporter names its targets, so: it listens on loopback unless told
otherwise, probes only what its TargetPolicy allows (llmdoctor/fleet/target_policy.py), sends
the API key only where the policy says, holds at most `max_connections` connections and closes
one that sends nothing for `request_timeout` seconds.
"""

from __future__ import annotations

import io
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from llmdoctor.fleet.target_policy import TargetPolicy, TargetRefused

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
SEVERITIES = ("info", "warning", "critical")
SCRAPE_TIMEOUT_HEADER = "X-Prometheus-Scrape-Timeout-Seconds"


MAX_QUERY_CHARS = 4096
MAX_TARGET_CHARS = 2048
MAX_MODEL_CHARS = 256
TRUE_WORDS = ("1", "true", "yes")


class ProbeRefused(ValueError):
    """A /probe request that names no usable target (answered 400)."""


@dataclass(frozen=True)
class ProbeRequest:
    """What one /probe asks: the target URL, the model to ask for, chat or completions."""

    target: str
    model: str | None = None
    chat: bool = False


def parse_probe_query(query: str) -> ProbeRequest:
    """The ProbeRequest of a /probe query string; ProbeRefused (one line) for anything else:
    no target, several, one that is not an http(s)://HOST[:PORT] URL, or values too long."""
    if len(query) > MAX_QUERY_CHARS:
        raise ProbeRefused(f"the query is longer than {MAX_QUERY_CHARS} characters")
    try:
        fields = parse_qs(query, keep_blank_values=True, max_num_fields=16)
    except ValueError as exc:
        raise ProbeRefused(f"unreadable query: {exc}") from None
    targets = [t.strip() for t in fields.get("target", []) if t.strip()]
    if not targets:
        raise ProbeRefused("missing ?target=http://HOST:PORT")
    if len(targets) > 1:
        raise ProbeRefused("give one ?target= per probe")
    target = targets[0]
    if len(target) > MAX_TARGET_CHARS or any(ord(c) < 32 or ord(c) == 127 for c in target):
        raise ProbeRefused("the target is not a URL (too long, or control characters)")
    if not target.lower().startswith(("http://", "https://")):
        raise ProbeRefused("target must be an http(s)://HOST:PORT URL")
    try:
        parts = urlsplit(target)
        parts.port  # noqa: B018 - validates the port number
    except ValueError:
        raise ProbeRefused("target must be an http(s)://HOST:PORT URL with a valid port") from None
    if not parts.hostname:
        raise ProbeRefused("target must name a host: http(s)://HOST:PORT")
    model = (fields.get("model") or [""])[0].strip() or None
    if model is not None and (
        len(model) > MAX_MODEL_CHARS or any(ord(c) < 32 or ord(c) == 127 for c in model)
    ):
        raise ProbeRefused(f"model must be a name of at most {MAX_MODEL_CHARS} characters")
    chat = (fields.get("chat") or ["0"])[0].strip().lower() in TRUE_WORDS
    return ProbeRequest(target, model, chat)


@dataclass(frozen=True)
class ProbeSettings:
    timeout: float = 3.0  # per request, as `probe --timeout`
    window: float = 2.0  # seconds between the two /metrics scrapes
    max_latency_ms: float = 1000.0
    max_concurrent: int = 4
    queue_wait: float = 10.0
    policy: TargetPolicy = field(default_factory=TargetPolicy, hash=False, compare=False)
    max_connections: int = 64  # open connections; more are answered 503 and closed
    request_timeout: float = 30.0  # seconds a connection may send nothing

    def budget(self, scrape_timeout: float | None) -> tuple[float, float]:
        """(timeout, window) shrunk so that a probe (window + 1.5 × timeout at worst) ends
        before Prometheus gives up on the scrape."""
        timeout, window = self.timeout, self.window
        if scrape_timeout is None:
            return timeout, window
        room = max(0.5, scrape_timeout - 0.5)
        window = min(window, room / 3)
        return max(0.2, min(timeout, (room - window) / 1.5)), window


def parse_listen(text: str) -> tuple[str, int]:
    """':9808' -> ('127.0.0.1', 9808): loopback unless a host is named ('0.0.0.0:9808',
    '[::]:9808' for every interface); '[::1]:9808'. ValueError otherwise."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"--listen {text!r}: expected [HOST]:PORT, e.g. 127.0.0.1:9808")
    host = host.strip("[]") or "127.0.0.1"
    return host, int(port)


def _last(values: list) -> Any:
    return next((v for v in reversed(values or []) if v is not None), None)


def run_probe(request, policy: TargetPolicy):
    """The `llmdoctor probe` pipeline for one ProbeRequest whose target the policy allows:
    (Report, seconds it took). ProbeRefused for anything but an http(s)://HOST:PORT URL, or a
    target the policy refuses. $LLMDOCTOR_API_KEY goes only where the policy says it may, and
    every address the probe reaches is checked again (no DNS rebinding)."""
    import dataclasses
    import os

    from llmdoctor.errors import LlmdoctorError
    from llmdoctor.usecases.probe import probe, probe_target

    try:
        target, _ = probe_target(request.url)
    except LlmdoctorError as exc:
        raise ProbeRefused(str(exc)) from None
    parts = urlsplit(target.url)
    try:
        permit = policy.check(
            parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)
        )
    except TargetRefused as exc:
        raise ProbeRefused(f"target refused: {exc}") from None
    request = dataclasses.replace(
        request,
        api_key=os.environ.get("LLMDOCTOR_API_KEY") if permit.send_api_key else None,
        prepare_session=permit.guard(policy),
    )
    started = time.monotonic()
    report = probe(request)
    return report, time.monotonic() - started


def probe_verdict(report, max_latency_ms: float) -> dict[str, Any]:
    """health_up, generation_ok, success and the probe's timings, from the report's facts."""
    facts = report.facts
    health = facts.get("vllm/health.json") if facts is not None else None
    probe = facts.get("vllm/probe.json") if facts is not None else None
    probe = probe if isinstance(probe, dict) else {}
    health_up = isinstance(health, dict) and health.get("status") == 200
    generation_ok = (
        probe.get("status") == 200
        and not probe.get("error")
        and bool((probe.get("text") or "").strip())
    )
    latency = probe.get("latency_ms")
    return {
        "health_up": health_up,
        "generation_ok": generation_ok,
        "success": generation_ok and latency is not None and latency <= max_latency_ms,
        "generation_seconds": latency / 1000.0 if latency is not None else None,
        "ttft_seconds": probe["ttft_ms"] / 1000.0 if probe.get("ttft_ms") is not None else None,
        "itl_seconds": probe["itl_ms"] / 1000.0 if probe.get("itl_ms") is not None else None,
    }


def probe_metrics(report, seconds: float, max_latency_ms: float) -> bytes:
    """The Prometheus text answered to one /probe."""
    from prometheus_client import CollectorRegistry, Gauge, generate_latest

    registry = CollectorRegistry()

    def gauge(name: str, doc: str, labels=()):
        return Gauge(name, doc, list(labels), registry=registry)

    verdict = probe_verdict(report, max_latency_ms)
    gauge(
        "llmdoctor_probe_success",
        "1 when a real completion returned text within the exporter's --max-latency-ms.",
    ).set(int(verdict["success"]))
    gauge(
        "llmdoctor_probe_generation_ok", "1 when the completion returned text, however slowly."
    ).set(int(verdict["generation_ok"]))
    gauge("llmdoctor_probe_health_up", "1 when /health answered 200.").set(
        int(verdict["health_up"])
    )
    gauge("llmdoctor_probe_duration_seconds", "How long the whole probe took.").set(seconds)
    gauge("llmdoctor_probe_max_latency_seconds", "The latency limit of the probe.").set(
        max_latency_ms / 1000.0
    )
    for key, name, doc in (
        ("generation_seconds", "llmdoctor_probe_generation_seconds", "Total completion time."),
        ("ttft_seconds", "llmdoctor_probe_ttft_seconds", "Time to the first streamed token."),
        ("itl_seconds", "llmdoctor_probe_inter_token_seconds", "Mean time between tokens."),
    ):
        if verdict[key] is not None:  # absent, not 0, when the completion never answered
            gauge(name, doc).set(verdict[key])
    counts = gauge(
        "llmdoctor_probe_findings", "Findings of the vllm checks by severity.", ["severity"]
    )
    for severity in SEVERITIES:
        counts.labels(severity).set(sum(1 for f in report.findings if str(f.severity) == severity))
    finding = gauge(
        "llmdoctor_probe_finding",
        "Findings that are not ok, by check and first runbook entry (value: how many).",
        ["check", "runbook", "severity"],
    )
    for f in report.findings:
        if str(f.severity) in ("warning", "critical"):
            finding.labels(f.check, f.runbooks[0] if f.runbooks else "", str(f.severity)).inc()
    _server_figures(report, gauge)
    return generate_latest(registry)


def _server_figures(report, gauge) -> None:
    """Queue and KV figures of the target's last /metrics scrape, per model and engine."""
    facts = report.facts
    window = facts.get("vllm/window") if facts is not None else None
    if not isinstance(window, dict):
        return
    figures = {
        "running": ("llmdoctor_probe_requests_running", "vllm:num_requests_running"),
        "waiting": ("llmdoctor_probe_requests_waiting", "vllm:num_requests_waiting"),
        "kv_cache_usage": ("llmdoctor_probe_kv_cache_usage_ratio", "KV cache usage (0-1)"),
    }
    made = {
        concept: gauge(name, f"The target's {what}, last scrape.", ["model_name", "engine"])
        for concept, (name, what) in figures.items()
    }
    preempt = gauge(
        "llmdoctor_probe_preemptions_per_second",
        "The target's preemption rate over the probe's window.",
        ["model_name", "engine"],
    )
    for model, doc in (window.get("models") or {}).items():
        gauges = doc.get("gauges") or {}
        for concept, metric in made.items():
            per_engine = (gauges.get(concept) or {}).get("per_engine") or []
            for engine in doc.get("engines") or []:
                value = _last([(p or {}).get(engine) for p in per_engine])
                if value is not None:
                    metric.labels(model, engine).set(value)
        counter = (doc.get("counters") or {}).get("preemptions") or {}
        seconds = window.get("seconds")
        for engine, entry in (counter.get("per_engine") or {}).items():
            if seconds and entry.get("delta") is not None and not entry.get("reset"):
                preempt.labels(model, engine).set(entry["delta"] / seconds)


class ProbeExporter:
    """The exporter's state: the probe slots and its own metrics."""

    def __init__(self, settings: ProbeSettings):
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.settings = settings
        self.slots = threading.BoundedSemaphore(settings.max_concurrent)
        self._lock = threading.Lock()
        self.in_flight = 0
        self.peak_in_flight = 0
        self.registry = CollectorRegistry()
        self.probes = Counter(
            "llmdoctor_exporter_probes",
            "Probes run, by result (success, failure, error: the exporter itself failed).",
            ["result"],
            registry=self.registry,
        )
        self.refused = Counter(
            "llmdoctor_exporter_probes_refused",
            "Requests refused: 400 (bad or disallowed target), 503 (no free probe slot in "
            "time, or too many open connections).",
            ["reason"],
            registry=self.registry,
        )
        self.in_flight_gauge = Gauge(
            "llmdoctor_exporter_probes_in_flight", "Probes running now.", registry=self.registry
        )
        Gauge(
            "llmdoctor_exporter_max_concurrent_probes",
            "The bound on concurrent probes.",
            registry=self.registry,
        ).set(settings.max_concurrent)
        self.duration = Histogram(
            "llmdoctor_exporter_probe_duration_seconds",
            "How long probes took.",
            buckets=(0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60),
            registry=self.registry,
        )

    def probe(self, query: str, scrape_timeout: float | None) -> tuple[int, bytes]:
        """(HTTP status, body) for one /probe request (`query`: its query string)."""
        from llmdoctor.usecases.probe import ProbeRequest

        try:
            request = parse_probe_query(query)
        except ProbeRefused as exc:
            self.refused.labels("bad-target").inc()
            return 400, f"{exc}\n".encode()
        target, model, chat = request.target, request.model, request.chat
        timeout, window = self.settings.budget(scrape_timeout)
        wait = self.settings.queue_wait
        if scrape_timeout is not None:  # wait for a slot only as long as the scrape can afford
            wait = min(wait, max(0.0, scrape_timeout - 0.5 - (window + 1.5 * timeout)))
        if not self.slots.acquire(timeout=wait):
            self.refused.labels("busy").inc()
            return 503, (
                f"{self.settings.max_concurrent} probes already running; none finished within "
                f"{wait:g}s\n"
            ).encode()
        try:
            with self._lock:
                self.in_flight += 1
                self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
                self.in_flight_gauge.set(self.in_flight)
            try:
                report, seconds = run_probe(
                    ProbeRequest(
                        target,
                        timeout=timeout,
                        window=window,
                        model=model,
                        chat=chat,
                        max_latency_ms=self.settings.max_latency_ms,
                        scopes=("vllm",),
                    ),
                    self.settings.policy,
                )
            except ProbeRefused as exc:
                self.refused.labels("bad-target").inc()
                return 400, f"{exc}\n".encode()
            body = probe_metrics(report, seconds, self.settings.max_latency_ms)
            ok = probe_verdict(report, self.settings.max_latency_ms)["success"]
            self.probes.labels("success" if ok else "failure").inc()
            self.duration.observe(seconds)
            return 200, body
        finally:
            with self._lock:
                self.in_flight -= 1
                self.in_flight_gauge.set(self.in_flight)
            self.slots.release()

    def own_metrics(self) -> bytes:
        from prometheus_client import generate_latest

        return generate_latest(self.registry)


INDEX = b"""llmdoctor exporter
  /probe?target=http://vllm:8000[&model=NAME][&chat=1]   one generation probe, as metrics
  /metrics                                              the exporter's own metrics
"""


class _DeadlineReader(io.RawIOBase):
    """A socket's reading side that gives up at a deadline, however slowly bytes arrive.
    Closing it leaves the socket to the server (which shuts it down)."""

    def __init__(self, sock, deadline: float):
        super().__init__()
        self.sock, self.deadline = sock, deadline

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the request took longer than --request-timeout")
        self.sock.settimeout(left)
        return self.sock.recv_into(buffer)


class _Handler(BaseHTTPRequestHandler):
    server: ExporterServer

    def setup(self) -> None:
        self.timeout = self.server.exporter.settings.request_timeout  # per socket operation
        super().setup()
        # and for the whole request: a client dripping a byte a second holds no slot for long
        raw = _DeadlineReader(self.connection, time.monotonic() + self.timeout)
        self.rfile = io.BufferedReader(raw)

    def log_message(self, *args) -> None:  # a scrape every 15 s per target: no access log
        return

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        exporter = self.server.exporter
        try:
            if url.path == "/probe":
                header = self.headers.get(SCRAPE_TIMEOUT_HEADER)
                try:
                    scrape_timeout = float(header) if header else None
                except ValueError:
                    scrape_timeout = None
                status, body = exporter.probe(url.query, scrape_timeout)
            elif url.path == "/metrics":
                status, body = 200, exporter.own_metrics()
            elif url.path == "/":
                status, body = 200, INDEX
            else:
                status, body = 404, b"not found: try /probe?target=... or /metrics\n"
        except Exception as exc:  # one bad probe must not take the exporter down
            from llmdoctor.redact import redact_text

            exporter.probes.labels("error").inc()
            why = redact_text(f"{type(exc).__name__}: {exc}")
            status, body = 500, f"probe failed: {why}\n".encode()
        self.send_response(status)
        self.send_header("Content-Type", CONTENT_TYPE)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


BUSY = b"HTTP/1.0 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


class ExporterServer(ThreadingHTTPServer):
    """The HTTP server; `serve_forever()` runs it. One thread per connection, at most
    `max_connections` of them: another connection is answered 503 and closed at once."""

    daemon_threads = True
    request_queue_size = 128  # connections over the cap are refused at once, not left to SYN

    def __init__(self, address: tuple[str, int], exporter: ProbeExporter):
        import socket

        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        self.exporter = exporter
        self.connections = threading.BoundedSemaphore(exporter.settings.max_connections)
        self._releases: dict[int, Callable[[], None]] = {}  # request -> its slot's release
        super().__init__(address, _Handler)

    def process_request(self, request, client_address) -> None:
        if not self.connections.acquire(blocking=False):
            self.exporter.refused.labels("connections").inc()
            try:
                request.settimeout(1.0)
                request.sendall(BUSY)
            except OSError:
                pass
            self.shutdown_request(request)
            return
        # a SIGTERM can raise in Thread.start() after the handler thread began: the slot is
        # then released by whichever of the two gets there first, once
        release = _release_once(self.connections)
        self._releases[id(request)] = release
        try:
            super().process_request(request, client_address)
        except BaseException:
            release()
            raise

    def process_request_thread(self, request, client_address) -> None:
        release = self._releases.pop(id(request), None)
        try:
            super().process_request_thread(request, client_address)
        finally:
            if release is not None:
                release()


def _release_once(semaphore: threading.BoundedSemaphore) -> Callable[[], None]:
    lock = threading.Lock()
    done = []

    def release() -> None:
        with lock:
            if not done:
                done.append(True)
                semaphore.release()

    return release
