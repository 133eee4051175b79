"""A scripted fake vLLM server on 127.0.0.1 (ephemeral port) for tests.

It serves the real captured /metrics of tests/fixtures/vllm (values of chosen series can be
changed, and histograms appended, to script a scenario), the real /v1/models capture, vLLM's
streamed completion chunk shape, and misbehaviours: a port that accepts and never answers,
a slow answer, bytes dripped one at a time, a connection reset mid-stream, an HTML page.
Everything scripted here is labelled so in tests/fixtures/vllm/SOURCES.md.
"""

from __future__ import annotations

import json
import re
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).parent / "fixtures" / "vllm"
V0_CAPTURE = "metrics_v0-0.7_aibrix_qwen25coder.txt"
V0_MODEL = "Qwen/Qwen2.5-Coder-1.5B-Instruct"

# vLLM's histogram buckets (vllm_reference.md §1.2/§1.3)
V0_TTFT = [
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
]
V1_TTFT = [*V0_TTFT, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0]
V0_TPOT = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5]
V1_ITL = [*V0_TPOT, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0]
V0_LATENCY = [0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0]
V1_LATENCY = [*V0_LATENCY, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0]

HISTOGRAM_HELP = {
    "vllm:time_to_first_token_seconds": "Histogram of time to first token in seconds.",
    "vllm:time_per_output_token_seconds": "Histogram of time per output token in seconds.",
    "vllm:inter_token_latency_seconds": "Histogram of inter-token latency in seconds.",
    "vllm:e2e_request_latency_seconds": "Histogram of end to end request latency in seconds.",
    "vllm:request_queue_time_seconds": "Histogram of time spent in WAITING phase for request.",
    "vllm:iteration_tokens_total": "Histogram of number of tokens per engine_step.",
}


def fixture_text(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def set_values(text: str, values: dict[str, float]) -> str:
    """Change the value of every sample of the named series (any labels), keeping the rest."""
    out = []
    for line in text.splitlines():
        m = re.match(r"^([A-Za-z_:][\w:]*)(\{[^}]*\})?(\s+)(\S+)$", line)
        if m and m.group(1) in values:
            line = f"{m.group(1)}{m.group(2) or ''}{m.group(3)}{float(values[m.group(1)])!r}"
        out.append(line)
    return "\n".join(out) + "\n"


def _labels(pairs: list[tuple[str, str]]) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in pairs) + "}"


def histogram_block(
    name: str, buckets: list[float], observations: list[float], labels: dict[str, str]
) -> str:
    """A Prometheus histogram in prometheus_client's layout (labels sorted, `le` among them)."""
    help_text = HISTOGRAM_HELP.get(name, "Scripted histogram.")
    lines = [f"# HELP {name} {help_text}", f"# TYPE {name} histogram"]
    plain = sorted(labels.items())
    lines.append(f"{name}_sum{_labels(plain)} {float(sum(observations))!r}")
    for le in [*buckets, float("inf")]:
        count = sum(1 for o in observations if o <= le)
        le_text = "+Inf" if le == float("inf") else repr(float(le))
        pairs = sorted([*plain, ("le", le_text)])
        lines.append(f"{name}_bucket{_labels(pairs)} {float(count)!r}")
    lines.append(f"{name}_count{_labels(plain)} {float(len(observations))!r}")
    return "\n".join(lines) + "\n"


def v0_metrics(
    *,
    running: float = 0,
    waiting: float = 0,
    swapped: float = 0,
    kv: float = 0.0,
    preemptions: float = 0,
    prompt_tokens: float = 148,
    generation_tokens: float = 955,
    histograms: dict[str, list[float]] | None = None,
) -> str:
    """The real V0 capture (aibrix docs) with the scenario's values, plus scripted histograms."""
    text = set_values(
        fixture_text(V0_CAPTURE),
        {
            "vllm:num_requests_running": running,
            "vllm:num_requests_waiting": waiting,
            "vllm:num_requests_swapped": swapped,
            "vllm:gpu_cache_usage_perc": kv,
            "vllm:num_preemptions_total": preemptions,
            "vllm:prompt_tokens_total": prompt_tokens,
            "vllm:generation_tokens_total": generation_tokens,
        },
    )
    buckets = {
        "vllm:time_to_first_token_seconds": V0_TTFT,
        "vllm:time_per_output_token_seconds": V0_TPOT,
        "vllm:e2e_request_latency_seconds": V0_LATENCY,
        "vllm:request_queue_time_seconds": V0_LATENCY,
    }
    for name, obs in (histograms or {}).items():
        text += histogram_block(name, buckets[name], obs, {"model_name": V0_MODEL})
    return text


V0_EARLY_E2E = [1.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0]


def v0_early_text(
    model: str, state: EngineState, *, cache_config: dict[str, str] | None = None
) -> str:
    """Scripted V0 ~0.4-0.5 text, from the `Metrics` class of vllm/engine/metrics.py at
    vllm-project/vllm@00c33e81b526a179a6afb86512d1e8198965ee2f: `model_name` label only, no
    `_created` series (disable_created_metrics), no queue-time or engine-step histograms, the
    cache config as an Info metric (exposed as `vllm:cache_config_info`)."""
    lab = _labels([("model_name", model)])
    lines: list[str] = []
    if cache_config is not None:
        lines += [
            "# HELP vllm:cache_config_info information of cache_config",
            "# TYPE vllm:cache_config_info gauge",
            f"vllm:cache_config_info{_labels(sorted(cache_config.items()))} 1.0",
        ]
    families = [
        (
            "vllm:num_requests_running",
            "gauge",
            "Number of requests currently running on GPU.",
            state.running,
        ),
        (
            "vllm:num_requests_waiting",
            "gauge",
            "Number of requests waiting to be processed.",
            state.waiting,
        ),
        ("vllm:num_requests_swapped", "gauge", "Number of requests swapped to CPU.", 0.0),
        (
            "vllm:gpu_cache_usage_perc",
            "gauge",
            "GPU KV-cache usage. 1 means 100 percent usage.",
            state.kv,
        ),
        (
            "vllm:cpu_cache_usage_perc",
            "gauge",
            "CPU KV-cache usage. 1 means 100 percent usage.",
            0.0,
        ),
        (
            "vllm:num_preemptions_total",
            "counter",
            "Cumulative number of preemption from the engine.",
            state.preemptions,
        ),
        (
            "vllm:prompt_tokens_total",
            "counter",
            "Number of prefill tokens processed.",
            state.prompt_tokens,
        ),
        (
            "vllm:generation_tokens_total",
            "counter",
            "Number of generation tokens processed.",
            state.generation_tokens,
        ),
    ]
    for name, kind, help_text, value in families:
        lines += [
            f"# HELP {name} {help_text}",
            f"# TYPE {name} {kind}",
            f"{name}{lab} {float(value)!r}",
        ]
    if state.finished:
        lines += [
            "# HELP vllm:request_success_total Count of successfully processed requests.",
            "# TYPE vllm:request_success_total counter",
            f"vllm:request_success_total{_labels([('finished_reason', 'stop'), ('model_name', model)])} "
            f"{float(state.finished)!r}",
        ]
    text = "\n".join(lines) + "\n"
    buckets = {
        "vllm:time_to_first_token_seconds": V0_TTFT,
        "vllm:time_per_output_token_seconds": V0_TPOT,
        "vllm:e2e_request_latency_seconds": V0_EARLY_E2E,
    }
    for name, obs in state.histograms.items():
        text += histogram_block(name, buckets[name], obs, {"model_name": model})
    return text


# The V1 releases the scripted text follows (see tests/fixtures/vllm/SOURCES.md):
#   "0.8"   early V1 (production-stack#318 dump): model_name only, gpu_cache_usage_perc,
#           time_per_output_token_seconds;
#   "0.10"  engine + model_name, both KV names, _created series (production-stack#617 dump,
#           vllm/v1/metrics/loggers.py ~0.10);
#   "0.11+" current loggers.py: kv_cache_usage_perc only, engine_sleep_state,
#           num_requests_waiting_by_reason, prompt_tokens_cached, inter_token_latency_seconds.
V1_RELEASES = ("0.8", "0.10", "0.11+")
ITERATION_BUCKETS = [1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384]
SLEEP_HELP = (
    "Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine is awake; "
    "weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep level 2."
)
WAITING_BY_REASON_HELP = (
    "Number of waiting requests by reason. Reason labels: 'capacity' = waiting for scheduling "
    "capacity; 'deferred' = deferred by transient constraints (LoRA budget, KV transfer, blocked "
    "status). Sum of all reasons equals vllm:num_requests_waiting."
)
GPU_CACHE_HELP = "GPU KV-cache usage. 1 means 100 percent usage."


@dataclass
class EngineState:
    """What one data-parallel engine reports (values chosen per scenario)."""

    running: float = 0
    waiting: float = 0  # capacity waiting; `deferred` is added to num_requests_waiting
    deferred: float = 0
    kv: float = 0.0
    preemptions: float = 0
    prompt_tokens: float = 0
    generation_tokens: float = 0
    finished: float = 0
    iterations: float | None = None  # engine steps (iteration_tokens_total_count)
    sleep_level: int = 0  # 0 awake, 1 weights offloaded, 2 discard all
    histograms: dict[str, list[float]] = field(default_factory=dict)


def _family(lines: list[str], name: str, kind: str, help_text: str, help_lines: bool) -> None:
    if help_lines:
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]


def v1_text(
    model: str,
    engines: dict[str, EngineState],
    *,
    release: str = "0.10",
    help_lines: bool = True,
    cache_config: dict[str, str] | None = None,
) -> str:
    """Scripted V1 /metrics of one model, each family once with every engine's sample."""
    assert release in V1_RELEASES, release
    labelled = release != "0.8"  # the engine label exists from ~0.8.x/0.9 on

    def lab(engine: str, *extra: tuple[str, str]) -> str:
        pairs = [("engine", engine)] if labelled else []
        return _labels(sorted([*pairs, ("model_name", model), *extra]))

    lines: list[str] = []
    if cache_config is not None:
        _family(
            lines,
            "vllm:cache_config_info",
            "gauge",
            "Information of the LLMEngine CacheConfig",
            help_lines,
        )
        for engine in engines:
            extra = [("engine", engine)] if release == "0.11+" else []
            lines.append(
                f"vllm:cache_config_info{_labels(sorted([*cache_config.items(), *extra]))} 1.0"
            )
    gauges = [
        (
            "vllm:num_requests_running",
            "Number of requests in model execution batches.",
            lambda e: e.running,
        ),
        (
            "vllm:num_requests_waiting",
            "Number of requests waiting to be processed.",
            lambda e: e.waiting + (e.deferred if release == "0.11+" else 0),
        ),
    ]
    if release == "0.8":
        gauges.append(("vllm:gpu_cache_usage_perc", GPU_CACHE_HELP, lambda e: e.kv))
    elif release == "0.10":
        gauges.append(
            (
                "vllm:gpu_cache_usage_perc",
                f"{GPU_CACHE_HELP} DEPRECATED: Use vllm:kv_cache_usage_perc instead.",
                lambda e: e.kv,
            )
        )
    if release != "0.8":
        gauges.append(
            (
                "vllm:kv_cache_usage_perc",
                "KV-cache usage. 1 means 100 percent usage.",
                lambda e: e.kv,
            )
        )
    for name, help_text, value in gauges:
        _family(lines, name, "gauge", help_text, help_lines)
        lines += [f"{name}{lab(e)} {float(value(st))!r}" for e, st in engines.items()]
    if release == "0.11+":
        name = "vllm:num_requests_waiting_by_reason"
        _family(lines, name, "gauge", WAITING_BY_REASON_HELP, help_lines)
        for e, st in engines.items():
            lines.append(f"{name}{lab(e, ('reason', 'capacity'))} {float(st.waiting)!r}")
            lines.append(f"{name}{lab(e, ('reason', 'deferred'))} {float(st.deferred)!r}")
        name = "vllm:engine_sleep_state"
        _family(lines, name, "gauge", SLEEP_HELP, help_lines)
        for e, st in engines.items():
            for state, on in (
                ("awake", st.sleep_level == 0),
                ("weights_offloaded", st.sleep_level == 1),
                ("discard_all", st.sleep_level == 2),
            ):
                lines.append(f"{name}{lab(e, ('sleep_state', state))} {float(on)!r}")
    counters = [
        (
            "vllm:num_preemptions",
            "Cumulative number of preemption from the engine.",
            lambda e: e.preemptions,
        ),
        ("vllm:prompt_tokens", "Number of prefill tokens processed.", lambda e: e.prompt_tokens),
        (
            "vllm:generation_tokens",
            "Number of generation tokens processed.",
            lambda e: e.generation_tokens,
        ),
    ]
    for name, help_text, value in counters:
        _family(lines, f"{name}_total", "counter", help_text, help_lines)
        for e, st in engines.items():
            lines.append(f"{name}_total{lab(e)} {float(value(st))!r}")
            if release != "0.8":
                lines.append(f"{name}_created{lab(e)} 1.7537953269352946e+09")
    _family(
        lines,
        "vllm:request_success_total",
        "counter",
        "Count of successfully processed requests.",
        help_lines,
    )
    for e, st in engines.items():
        for reason, share in (("stop", 1.0), ("length", 0.0), ("abort", 0.0)):
            lines.append(
                f"vllm:request_success_total{lab(e, ('finished_reason', reason))} {float(st.finished * share)!r}"
            )
    text = "\n".join(lines) + "\n"
    buckets = {
        "vllm:time_to_first_token_seconds": V1_TTFT,
        "vllm:inter_token_latency_seconds": V1_ITL,
        "vllm:time_per_output_token_seconds": V1_ITL,
        "vllm:e2e_request_latency_seconds": V1_LATENCY,
        "vllm:request_queue_time_seconds": V1_LATENCY,
    }
    for e, st in engines.items():
        base = {"engine": e, "model_name": model} if labelled else {"model_name": model}
        for name, obs in st.histograms.items():
            text += histogram_block(name, buckets[name], obs, base)
        if st.iterations is not None:
            # tokens per engine step: `iterations` steps of 1 token each (a decode-only load)
            steps = [1.0] * int(st.iterations)
            text += histogram_block("vllm:iteration_tokens_total", ITERATION_BUCKETS, steps, base)
    return text


def v1_metrics(
    model: str,
    *,
    engine: str = "0",
    release: str = "0.10",
    help_lines: bool = True,
    **values,
) -> str:
    """Scripted V1 text of one model served by one engine (see v1_text and EngineState)."""
    return v1_text(model, {engine: EngineState(**values)}, release=release, help_lines=help_lines)


def models_body(*names: str) -> bytes:
    """/v1/models: the real capture, or its first card re-labelled for other served names."""
    real = json.loads(fixture_text("models_v0-0.7_aibrix_lora.json"))
    if not names or names == (V0_MODEL,):
        return json.dumps(real).encode()
    card = real["data"][0]
    data = [{**card, "id": n, "root": n} for n in names]
    return json.dumps({"object": "list", "data": data}).encode()


# --- what a route can answer -------------------------------------------------------------


@dataclass
class Reply:
    status: int = 200
    body: bytes | str = b""
    content_type: str = "application/json"
    delay: float = 0.0  # seconds before the status line is sent
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Stream:
    """A streamed completion in vLLM's chunk shape; optionally cut (RST) after some tokens."""

    tokens: list[str] = field(default_factory=lambda: [" Paris", ".", " The"])
    first_delay: float = 0.0
    gap: float = 0.0
    reset_after: int | None = None
    finish_reason: str = "length"


@dataclass
class Blackhole:
    """Read the request, then never answer."""


@dataclass
class Drip:
    """Answer 200 with a Content-Length, then send the body one byte per `interval`."""

    body: bytes = b"x" * 4096
    interval: float = 0.2
    content_type: str = "text/plain; version=0.0.4; charset=utf-8"


@dataclass
class ResetNow:
    """Close the connection with a TCP reset before answering."""


Route = Reply | Stream | Blackhole | Drip | ResetNow | Callable[[dict], Any]


@dataclass
class Scenario:
    metrics: list[str] = field(default_factory=lambda: [fixture_text(V0_CAPTURE)])
    models: tuple[str, ...] = (V0_MODEL,)
    version: str = "0.7.1"
    routes: dict[str, Route] = field(default_factory=dict)  # "GET /health" -> what to answer
    prefix: str = ""  # serve under a path prefix, as the API server's pod proxy does


# --- the scripted scenarios of issue 13 (values chosen; formats per V1_RELEASES) ----------


def dp_scenario(engines: int = 4, saturated: str | None = None) -> Scenario:
    """A 0.11+ `--data-parallel-size N` server, every engine at 100 running and tokens flowing;
    `saturated` names one engine pinned at 256 running with 40 waiting."""
    pages = []
    for tokens in (1000, 4000):
        states = {
            str(e): EngineState(
                running=256 if str(e) == saturated else 100,
                waiting=40 if str(e) == saturated else 0,
                generation_tokens=tokens,
                iterations=tokens,
            )
            for e in range(engines)
        }
        pages.append(v1_text("m", states, release="0.11+"))
    return Scenario(metrics=pages, models=("m",), version="0.11.0")


def sleeping_scenario(level: int = 1) -> Scenario:
    """Sleep mode between RL rollouts: awake 0, two requests waiting, the completion hangs."""
    page = v1_text("m", {"0": EngineState(waiting=2, sleep_level=level)}, release="0.11+")
    return Scenario(
        metrics=[page, page], models=("m",), routes={"POST /v1/completions": Blackhole()}
    )


def deferred_scenario() -> Scenario:
    """12 running and 25 waiting requests that vLLM labels `deferred` (KV transfer, LoRA)."""
    pages = [
        v1_text(
            "m",
            {"0": EngineState(running=12, deferred=25, generation_tokens=t, iterations=t)},
            release="0.11+",
        )
        for t in (100, 900)
    ]
    return Scenario(metrics=pages, models=("m",))


def wedged_scenario() -> Scenario:
    """/health 200, 6 running, tokens and engine steps frozen, the completion never answers."""
    page = v1_text(
        "m",
        {"0": EngineState(running=6, waiting=2, generation_tokens=777, iterations=300)},
        release="0.11+",
    )
    return Scenario(
        metrics=[page, page], models=("m",), routes={"POST /v1/completions": Blackhole()}
    )


def no_vllm_series_scenario() -> Scenario:
    """Another exporter on the port: a python_info series only."""
    page = (
        "# HELP python_info Python platform information\n# TYPE python_info gauge\n"
        'python_info{implementation="CPython",major="3",minor="11",patchlevel="7",'
        'version="3.11.7"} 1.0\n'
    )
    return Scenario(metrics=[page, page])


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: FakeVllmServer

    def log_message(self, *args) -> None:  # keep test output clean
        return

    def do_GET(self) -> None:
        self._dispatch("GET", None)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = {}
        self._dispatch("POST", body)

    def _dispatch(self, method: str, body: dict | None) -> None:
        fake = self.server
        path = self.path.split("?")[0]
        if fake.scenario.prefix:
            if not path.startswith(fake.scenario.prefix):
                self._reply(Reply(404, json.dumps({"detail": "Not Found"})))
                return
            path = path[len(fake.scenario.prefix) :]
        path = path.rstrip("/") or "/"
        fake.requests.append((method, path, body))
        route = fake.scenario.routes.get(f"{method} {path}") or fake.default_route(method, path)
        if callable(route) and not isinstance(route, Reply | Stream | Blackhole | Drip | ResetNow):
            route = route(body or {})
        if isinstance(route, Blackhole):
            fake.stopping.wait()
            self.close_connection = True
        elif isinstance(route, ResetNow):
            self._reset()
        elif isinstance(route, Drip):
            self._drip(route)
        elif isinstance(route, Stream):
            self._stream(route, path, body or {})
        else:
            self._reply(route)

    def _reply(self, reply: Reply) -> None:
        if reply.delay and fake_sleep(self.server, reply.delay):
            return
        data = reply.body.encode() if isinstance(reply.body, str) else reply.body
        self.send_response(reply.status)
        if reply.content_type:
            self.send_header("Content-Type", reply.content_type)
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _drip(self, drip: Drip) -> None:
        self.send_response(200)
        self.send_header("Content-Type", drip.content_type)
        self.send_header("Content-Length", str(len(drip.body)))
        self.end_headers()
        self.wfile.flush()
        try:
            for i in range(len(drip.body)):
                if fake_sleep(self.server, drip.interval):
                    return
                self.wfile.write(drip.body[i : i + 1])
                self.wfile.flush()
        except OSError:
            self.close_connection = True

    def _reset(self) -> None:
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.connection.close()
        self.close_connection = True

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _stream(self, stream: Stream, path: str, body: dict) -> None:
        chat = path.endswith("/chat/completions")
        model = body.get("model", "?")
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        if fake_sleep(self.server, stream.first_delay):
            return
        try:
            if chat:
                self._chunk(sse(chunk_event(model, "", chat, None, role=True)))
            for i, token in enumerate(stream.tokens):
                if stream.reset_after is not None and i >= stream.reset_after:
                    # let the client read what was sent: Linux drops unread data on a reset
                    fake_sleep(self.server, 0.2)
                    self._reset()
                    return
                if i and fake_sleep(self.server, stream.gap):
                    return
                last = i == len(stream.tokens) - 1
                finish = stream.finish_reason if last else None
                self._chunk(sse(chunk_event(model, token, chat, finish)))
            if stream.reset_after is not None:
                self._reset()
                return
            self._chunk(b"data: [DONE]\n\n")
            self._chunk(b"")
        except OSError:
            self.close_connection = True


def fake_sleep(server: FakeVllmServer, seconds: float) -> bool:
    """Sleep, but wake when the server stops; True if it stopped."""
    return server.stopping.wait(seconds) if seconds > 0 else server.stopping.is_set()


def chunk_event(model: str, text: str, chat: bool, finish: str | None, role: bool = False) -> dict:
    """One streamed chunk as vLLM's OpenAI server writes it (CompletionStreamResponse shape)."""
    if chat:
        delta: dict[str, Any] = {"role": "assistant", "content": ""} if role else {"content": text}
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        kind, prefix = "chat.completion.chunk", "chatcmpl"
    else:
        choice = {
            "index": 0,
            "text": text,
            "logprobs": None,
            "finish_reason": finish,
            "stop_reason": None,
        }
        kind, prefix = "text_completion", "cmpl"
    return {
        "id": f"{prefix}-2f7f1c3a9d8e4b6f",
        "object": kind,
        "created": 1756866192,
        "model": model,
        "choices": [choice],
    }


def sse(event: dict) -> bytes:
    return f"data: {json.dumps(event)}\n\n".encode()


class FakeVllmServer(ThreadingHTTPServer):
    """Use as a context manager; `.url` is http://127.0.0.1:<port>."""

    daemon_threads = True
    block_on_close = False

    def __init__(self, scenario: Scenario | None = None):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.scenario = scenario or Scenario()
        self.requests: list[tuple[str, str, Any]] = []
        self.stopping = threading.Event()
        self.metrics_served = 0
        self._thread = threading.Thread(
            target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def default_route(self, method: str, path: str) -> Route:
        s = self.scenario
        if (method, path) == ("GET", "/metrics"):
            text = s.metrics[min(self.metrics_served, len(s.metrics) - 1)]
            self.metrics_served += 1
            return Reply(200, text, "text/plain; version=0.0.4; charset=utf-8")
        if (method, path) == ("GET", "/health"):
            return Reply(200, b"", "")
        if (method, path) == ("GET", "/version"):
            return Reply(200, json.dumps({"version": s.version}))
        if (method, path) == ("GET", "/v1/models"):
            return Reply(200, models_body(*s.models))
        if method == "POST" and path in ("/v1/completions", "/v1/chat/completions"):
            return Stream()
        return Reply(404, json.dumps({"detail": "Not Found"}))

    def handle_error(self, request, client_address) -> None:  # resets are part of the script
        return

    def __enter__(self) -> FakeVllmServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stopping.set()
        self.shutdown()
        self.server_close()


class SilentServer:
    """A TCP port that accepts connections and never reads or answers (a hung process)."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.conns: list[socket.socket] = []
        self.stopping = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def write_kubeconfig(self, path) -> None:
        """A kubeconfig whose only cluster is this server (an API server that never answers)."""
        import json

        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "c", "cluster": {"server": self.url}}],
            "users": [{"name": "u", "user": {"token": "t"}}],
            "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
            "current-context": "c",
        }
        path.write_text(json.dumps(config))

    def _accept(self) -> None:
        self.sock.settimeout(0.1)
        while not self.stopping.is_set():
            try:
                conn, _ = self.sock.accept()
                self.conns.append(conn)
            except (TimeoutError, OSError):
                continue

    def __enter__(self) -> SilentServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stopping.set()
        self._thread.join(1)
        for conn in self.conns:
            conn.close()
        self.sock.close()


def free_port() -> int:
    """A loopback port with nothing listening (connection refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(predicate: Callable[[], bool], timeout: float = 2.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


def probe_report(url: str, *, timeout: float = 2.0, window: float = 0.2, settings=None, **options):
    """Run what `llmdoctor probe URL` runs (live collection, vllm scope) and return the Report."""
    from llmdoctor.engine.collect import CollectContext
    from llmdoctor.engine.target import parse_target
    from llmdoctor.usecases.diagnose import diagnose, gather

    target = parse_target(url)
    ctx = CollectContext(target=target, timeout=timeout, options={"window": window, **options})
    facts_list = gather(target, ctx)
    merged = {"max_latency_ms": options.get("max_latency_ms"), "model": options.get("model")}
    merged.update(settings or {})
    return diagnose(facts_list, url, scopes=("vllm",), settings=merged)


def by_check(report, check_id: str) -> list:
    return [f for f in report.findings if f.check == check_id]
