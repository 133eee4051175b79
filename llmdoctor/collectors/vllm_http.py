"""Live collection for an http(s):// target: one vLLM server reached directly.

A thin wrapper over llmdoctor.collectors.vllm_endpoint.collect_endpoint (shared with the
Kubernetes collector) plus the local tokenizer probe of `--tokenizer PATH`.
Options read from ctx.options: window, model, chat, max_latency_ms, tokenizer.
An API key for servers started with --api-key is taken from $LLMDOCTOR_API_KEY.

Also here: the probe's base URL, from which a trailing `/v1` (the OpenAI client's base_url) is
dropped, since every path here starts with it. Failures are classified by
llmdoctor.collectors.network_errors.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any
from urllib.parse import urlsplit

from llmdoctor import __version__
from llmdoctor.engine.collect import CollectContext
from llmdoctor.engine.facts import Facts, Missing
from llmdoctor.engine.target import Target


def probe_base_url(url: str) -> tuple[str, str | None]:
    """(base URL for the probe, a note when it was changed): 'http://h:8000/v1/' ->
    'http://h:8000', since /v1/models and /health are asked for under the base."""
    trimmed = url.rstrip("/")
    if trimmed.endswith("/v1"):
        base = trimmed[: -len("/v1")]
        return base, f"{url} ends in /v1: probing {base} (its /v1/models, /health, /metrics)"
    return trimmed, None


class _TokenizerProbe:
    """The local tokenizer probe on a daemon thread, so it runs while the endpoint is probed."""

    def __init__(self, path: str):
        self.path = path
        self.result: dict[str, Any] | None = None
        self.started = time.monotonic()
        self.thread = threading.Thread(target=self._run, name="tokenizer-probe", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        from llmdoctor.collectors.tokenizer_probe import probe_tokenizer

        try:
            self.result = probe_tokenizer(self.path)
        except Exception as exc:  # never lose the endpoint facts to a tokenizer bug
            self.result = {"path": self.path, "errors": [f"{type(exc).__name__}: {exc}"]}

    def wait(self, limit: float) -> dict[str, Any]:
        """The result, or a record saying it was abandoned after `limit` seconds in all."""
        self.thread.join(max(0.0, self.started + limit - time.monotonic()))
        if self.result is not None:
            return self.result
        waited = round(time.monotonic() - self.started, 1)
        return {
            "path": self.path,
            "load_s": None,
            "timed_out_after_s": waited,
            "errors": [f"the tokenizer did not finish loading and encoding within {waited:g}s"],
        }


def collect(target: Target, ctx: CollectContext) -> Facts:
    """Facts for a vLLM server at target.url (see collect_endpoint for the keys)."""
    import requests

    from llmdoctor.collectors.tokenizer_probe import sample_text
    from llmdoctor.collectors.vllm_endpoint import collect_endpoint

    options = ctx.options or {}
    window = float(options.get("window", 5.0) if options.get("window") is not None else 5.0)
    tokenizer_path = options.get("tokenizer")
    facts = Facts()
    facts.set("time/now", time.time())
    facts.set("target", str(target))
    session = requests.Session()
    session.headers["User-Agent"] = f"llmdoctor/{__version__}"
    if urlsplit(target.url).hostname in ("127.0.0.1", "localhost", "::1"):
        session.trust_env = False  # no HTTP(S)_PROXY detour for a local server
    api_key = os.environ.get("LLMDOCTOR_API_KEY")
    if api_key:
        session.headers["Authorization"] = f"Bearer {api_key}"
    local = _TokenizerProbe(tokenizer_path) if tokenizer_path else None
    try:
        values = collect_endpoint(
            probe_base_url(target.url)[0],  # `diagnose URL/v1` too (probe says so on stderr)
            session,
            timeout=ctx.timeout,
            window=window,
            model=options.get("model"),
            chat=bool(options.get("chat")),
            max_latency_ms=options.get("max_latency_ms"),
            tokenize_text=sample_text() if tokenizer_path else None,
        )
    finally:
        session.close()
    server_tokenize = values.pop("vllm/tokenize", None)
    if local is not None:
        tokenizer = local.wait(ctx.timeout + window)
        if server_tokenize is not None and not isinstance(server_tokenize, Missing):
            tokenizer["server"] = server_tokenize
        values["tokenizer.json"] = tokenizer
    else:
        values["tokenizer.json"] = Missing("not requested (llmdoctor probe --tokenizer PATH)")
    for key, value in values.items():
        if isinstance(value, Missing):
            facts.mark_missing(key, value.reason)
        else:
            facts.set(key, value)
    return facts
