"""Probe one vLLM server by URL: what `llmdoctor probe` and the exporter's /probe both run."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from llmdoctor.engine.collect import API_KEY_FROM_ENV, CollectOptions
from llmdoctor.engine.report import Report
from llmdoctor.engine.target import Target
from llmdoctor.usecases.diagnose import CheckSettings, DiagnoseRequest, diagnose

PROBE_SCOPES = ("vllm", "history")


@dataclass(frozen=True)
class ProbeRequest:
    """One vLLM server, its generation probe's limits, and which checks to run."""

    url: str
    timeout: float = 10.0
    window: float | None = None  # seconds between the two /metrics scrapes
    model: str | None = None
    chat: bool = False
    max_latency_ms: float = 1000.0
    max_num_seqs: int | None = None
    tokenizer: str | None = None  # a local model folder whose tokenizer to check
    history: dict = field(default_factory=dict)  # the Prometheus options (PrometheusOptions)
    scopes: tuple[str, ...] = PROBE_SCOPES
    only: tuple[str, ...] = ()
    skip: tuple[str, ...] = ()
    wiki_dirs: tuple[str, ...] = ()
    checks_dirs: tuple[str, ...] = ()
    # the exporter's per-target decisions (CollectOptions): which key is sent, the address check
    api_key: str | None = API_KEY_FROM_ENV
    prepare_session: Callable[[Any], None] | None = None


def probe_target(url: str) -> tuple[Target, str | None]:
    """The server to probe, and a note when the URL was changed (a trailing /v1 dropped).

    BadTarget for anything but an http(s)://HOST:PORT URL."""
    from llmdoctor.collectors.vllm_http import probe_base_url
    from llmdoctor.engine.target import parse_target
    from llmdoctor.errors import BadTarget

    target = parse_target(url)
    if target.kind != "http":
        raise BadTarget(f"probe takes an http(s)://HOST:PORT URL, not {url!r}")
    base, note = probe_base_url(target.url)
    return (parse_target(base) if note else target), note


def diagnose_request(request: ProbeRequest) -> DiagnoseRequest:
    """The DiagnoseRequest a probe is; BadTarget / BadInput before anything is collected."""
    from pathlib import Path

    from llmdoctor.errors import BadInput

    target, _ = probe_target(request.url)
    if request.tokenizer is not None and not Path(request.tokenizer).exists():
        raise BadInput(f"--tokenizer {request.tokenizer}: no such file or folder")
    options = CollectOptions.of(
        {
            "window": request.window,
            "tokenizer": request.tokenizer,
            "model": request.model,
            "chat": request.chat,
            "max_latency_ms": request.max_latency_ms,
            "api_key": request.api_key,
            "prepare_session": request.prepare_session,
            **request.history,
        }
    )
    settings = CheckSettings(
        model=request.model,
        max_latency_ms=request.max_latency_ms,
        max_num_seqs=request.max_num_seqs,
    )
    return DiagnoseRequest(
        target,
        timeout=request.timeout,
        options=options,
        settings=settings,
        scopes=request.scopes,
        only=request.only,
        skip=request.skip,
        wiki_dirs=request.wiki_dirs,
        checks_dirs=request.checks_dirs,
    )


def probe(request: ProbeRequest) -> Report:
    """Probe the server and run the checks of request.scopes."""
    return diagnose(diagnose_request(request))
