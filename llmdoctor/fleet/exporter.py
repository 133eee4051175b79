"""`llmdoctor exporter`: the generation probe as a blackbox-style Prometheus exporter.

`GET /probe?target=http://vllm:8000[&model=NAME][&chat=1]` runs what `llmdoctor probe` runs
(the same collector, timeouts and size caps, the vllm checks) and answers the result as metrics;
`GET /metrics` is the exporter's own. At most `max_concurrent` probes run at once; a scrape that
finds no free slot within `queue_wait` seconds is answered 503 instead of piling up threads.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
SEVERITIES = ("info", "warning", "critical")
SCRAPE_TIMEOUT_HEADER = "X-Prometheus-Scrape-Timeout-Seconds"


class ProbeRefused(ValueError):
    """A /probe request that names no usable target (answered 400)."""


@dataclass(frozen=True)
class ProbeSettings:
    timeout: float = 3.0  # per request, as `probe --timeout`
    window: float = 2.0  # seconds between the two /metrics scrapes
    max_latency_ms: float = 1000.0
    max_concurrent: int = 4
    queue_wait: float = 10.0

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
    """':9808' -> ('0.0.0.0', 9808); '127.0.0.1:9808'; '[::1]:9808'. ValueError otherwise."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"--listen {text!r}: expected [HOST]:PORT, e.g. :9808")
    host = host.strip("[]") or "0.0.0.0"
    return host, int(port)


def _last(values: list) -> Any:
    return next((v for v in reversed(values or []) if v is not None), None)


def run_probe(
    target: str,
    *,
    model: str | None,
    chat: bool,
    timeout: float,
    window: float,
    settings: ProbeSettings,
):
    """The `llmdoctor probe` pipeline for one target: (Report, seconds it took)."""
    from llmdoctor.collectors.vllm_http import probe_base_url
    from llmdoctor.engine.collect import CollectContext
    from llmdoctor.engine.target import parse_target
    from llmdoctor.errors import LlmdoctorError
    from llmdoctor.usecases.diagnose import diagnose, gather

    try:
        parsed = parse_target(target)
    except LlmdoctorError as exc:
        raise ProbeRefused(str(exc)) from None
    if parsed.kind != "http":
        raise ProbeRefused(f"target must be an http(s)://HOST:PORT URL, not {target!r}")
    parsed = parse_target(probe_base_url(parsed.url)[0])
    options = {
        "window": window,
        "model": model,
        "chat": chat,
        "max_latency_ms": settings.max_latency_ms,
    }
    started = time.monotonic()
    ctx = CollectContext(target=parsed, timeout=timeout, options=options)
    report = diagnose(
        gather(parsed, ctx),
        str(parsed),
        scopes=("vllm",),
        settings={"model": model, "max_latency_ms": settings.max_latency_ms},
    )
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
            "Probe requests answered 400 (bad target) or 503 (no free slot in time).",
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

    def probe(self, query: dict[str, list[str]], scrape_timeout: float | None) -> tuple[int, bytes]:
        """(HTTP status, body) for one /probe request."""
        target = (query.get("target") or [""])[0].strip()
        if not target:
            self.refused.labels("bad-target").inc()
            return 400, b"missing ?target=http://HOST:PORT\n"
        model = (query.get("model") or [None])[0] or None
        chat = (query.get("chat") or ["0"])[0].lower() in ("1", "true", "yes")
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
                    target,
                    model=model,
                    chat=chat,
                    timeout=timeout,
                    window=window,
                    settings=self.settings,
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


class _Handler(BaseHTTPRequestHandler):
    server: ExporterServer

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
                status, body = exporter.probe(parse_qs(url.query), scrape_timeout)
            elif url.path == "/metrics":
                status, body = 200, exporter.own_metrics()
            elif url.path == "/":
                status, body = 200, INDEX
            else:
                status, body = 404, b"not found: try /probe?target=... or /metrics\n"
        except Exception as exc:  # one bad probe must not take the exporter down
            exporter.probes.labels("error").inc()
            status, body = 500, f"probe failed: {type(exc).__name__}: {exc}\n".encode()
        self.send_response(status)
        self.send_header("Content-Type", CONTENT_TYPE)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class ExporterServer(ThreadingHTTPServer):
    """The HTTP server; `serve_forever()` runs it."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], exporter: ProbeExporter):
        import socket

        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, _Handler)
        self.exporter = exporter
