"""Live collection for an http(s):// target: one vLLM server reached directly.

A thin wrapper over llmdoctor.collectors.vllm_endpoint.collect_endpoint (shared with the
Kubernetes collector) plus the local tokenizer probe of `--tokenizer PATH`.
Options read from ctx.options: window, model, chat, max_latency_ms, tokenizer.
An API key for servers started with --api-key is taken from $LLMDOCTOR_API_KEY.

Also here: what kind of network failure an exception is (`classify_network_error`), decided by
the exception types of requests, urllib3, http.client, ssl and socket, never by message text
(which differs between versions, platforms and locales); and the probe's base URL, from which a
trailing `/v1` (the OpenAI client's base_url) is dropped, since every path here starts with it.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any
from urllib.parse import urlsplit

from llmdoctor import __version__
from llmdoctor.facts import Facts
from llmdoctor.runner import CollectContext, Missing
from llmdoctor.target import Target


def _causes(exc: BaseException) -> list[BaseException]:
    """The exception and every exception behind it: requests wraps urllib3's MaxRetryError,
    whose `reason` is e.g. a NewConnectionError raised from the socket's ConnectionRefusedError."""
    seen: list[BaseException] = []
    todo = [exc]
    while todo:
        current = todo.pop(0)
        if any(current is s for s in seen):
            continue
        seen.append(current)
        behind = [current.__cause__, current.__context__, getattr(current, "reason", None)]
        behind += [a for a in getattr(current, "args", ()) if isinstance(a, BaseException)]
        todo += [b for b in behind if isinstance(b, BaseException)]
    return seen


def classify_network_error(exc: BaseException, budget: float) -> tuple[str, str]:
    """(kind, one-line text) for a failed request; kind is connect, timeout, tls, reset or
    protocol. Decided by exception types (and errno), never by the message's wording."""
    import http.client
    import socket
    import ssl

    import requests
    import urllib3.exceptions as u3

    chain = _causes(exc)

    def has(*types: type) -> BaseException | None:
        return next((e for e in chain if isinstance(e, types)), None)

    first = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
    if has(requests.exceptions.InvalidURL, requests.exceptions.MissingSchema) or has(
        requests.exceptions.InvalidSchema, u3.LocationParseError, u3.LocationValueError
    ):
        return "protocol", f"invalid URL: {first[:160]}"
    if has(u3.NameResolutionError, socket.gaierror):
        return "connect", "the host name does not resolve"
    if has(ConnectionRefusedError):
        return "connect", "connection refused (nothing listens on that port, or vLLM exited)"
    if has(u3.NewConnectionError) and has(TimeoutError):
        return "timeout", f"could not connect within {budget:.1f}s"
    connect_timeout = has(u3.ConnectTimeoutError)
    if has(requests.exceptions.ConnectTimeout) or (
        connect_timeout is not None and not isinstance(connect_timeout, u3.NewConnectionError)
    ):
        return "timeout", f"could not connect within {budget:.1f}s"
    if has(requests.exceptions.SSLError, u3.SSLError, ssl.SSLError):
        return "tls", f"TLS error: {first[:160]}"
    if has(requests.exceptions.ReadTimeout, u3.ReadTimeoutError, TimeoutError):
        return "timeout", f"no answer within {budget:.1f}s (the server accepted the connection)"
    if has(requests.exceptions.ChunkedEncodingError):
        return "reset", "the connection was cut in the middle of the response"
    if has(
        ConnectionResetError,
        ConnectionAbortedError,
        BrokenPipeError,
        http.client.RemoteDisconnected,
        http.client.IncompleteRead,
        u3.IncompleteRead,
        u3.ProtocolError,
    ):
        return "reset", "the server closed or reset the connection without an answer"
    # requests' exceptions are OSErrors too: only a socket's own error carries an errno
    errno = next(
        (
            e
            for e in chain
            if isinstance(e, OSError) and not isinstance(e, requests.RequestException) and e.errno
        ),
        None,
    )
    if errno is not None or has(u3.NewConnectionError, requests.exceptions.ConnectionError):
        why = f"{errno.strerror} (errno {errno.errno})" if errno and errno.strerror else first
        return "connect", f"cannot connect: {why}"
    return "protocol", f"{type(exc).__name__}: {first}" if str(exc) else type(exc).__name__


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
