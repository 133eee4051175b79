"""One bounded HTTP request: a deadline over the whole exchange, a cap on the body, redirects
only to the same origin, and a failure told by its kind (connect, timeout, tls, reset, protocol,
too-large). Every vLLM endpoint request and the generation probe go through `http_request`."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from llmdoctor.collectors.network_errors import NOT_SENT, NOT_SENT_KIND, classify_network_error

SNIPPET = 300


@dataclass
class HttpReply:
    """What one request got: a status and (capped) body, or why there is none."""

    status: int | None = None
    body: bytes = b""
    content_type: str = ""
    latency_ms: float | None = None
    error: str | None = None
    # connect | timeout | reset | too-large | tls | protocol | not-sent
    error_kind: str | None = None
    headers_ms: float | None = None
    done_at: float = field(default_factory=time.time)
    redirected_to: str | None = None  # the path a same-origin redirect led to

    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")

    def looks_like_html(self) -> bool:
        head = self.body[:512].lstrip().lower()
        return "html" in self.content_type.lower() or head.startswith((b"<!doctype", b"<html"))


def _ms(seconds: float) -> float:
    return round(seconds * 1000.0, 1)


def describe_exception(exc: BaseException, budget: float) -> tuple[str, str]:
    """(kind, one-line text) for a requests/urllib3/socket failure, by exception type."""
    return classify_network_error(exc, budget)


class _OffsiteRedirect(Exception):
    def __init__(self, status: int, location: str):
        super().__init__(location)
        self.status, self.location = status, location


def _send(session, method, url, json_body, start, deadline, timeout):
    """(response, the URL it answered for): session.request, following at most 3 redirects and
    only within the same origin (a login page on another host is reported, not visited;
    vLLM < ~0.6 redirected /metrics)."""
    from urllib.parse import urljoin, urlsplit

    for _ in range(4):
        budget = max(0.05, min(timeout, deadline - time.monotonic()))
        resp = session.request(
            method,
            url,
            json=json_body,
            timeout=(budget, budget),
            stream=True,
            allow_redirects=False,
        )
        location = resp.headers.get("Location")
        if resp.status_code not in (301, 302, 303, 307, 308) or not location:
            return resp, url
        target = urljoin(url, location)
        resp.close()
        if urlsplit(target)[:2] != urlsplit(url)[:2]:
            raise _OffsiteRedirect(resp.status_code, target)
        url = target
    return resp, url


def http_request(
    session,
    method: str,
    url: str,
    *,
    timeout: float,
    deadline: float,
    cap: int,
    json_body: Any = None,
    on_chunk: Callable[[bytes, float], None] | None = None,
) -> HttpReply:
    """One request with a connect/read timeout, a body-size cap and an overall deadline.

    The body is streamed: reading stops past `cap` bytes or past `deadline` (monotonic), so a
    server that drips bytes cannot hold the caller. `on_chunk(data, monotonic_time)` sees the
    body as it arrives (for server-sent events).
    """
    import requests

    start = time.monotonic()
    budget = min(timeout, deadline - start)
    if budget <= 0.05:
        return HttpReply(error=NOT_SENT, error_kind=NOT_SENT_KIND)
    try:
        resp, final = _send(session, method, url, json_body, start, deadline, timeout)
    except requests.RequestException as exc:
        kind, text = describe_exception(exc, budget)
        return HttpReply(error=text, error_kind=kind, latency_ms=_ms(time.monotonic() - start))
    except _OffsiteRedirect as exc:
        return HttpReply(
            status=exc.status,
            error=(
                f"HTTP {exc.status} redirect to {exc.location} (another scheme, host or port; "
                "not followed)"
            ),
            error_kind="redirect",
            latency_ms=_ms(time.monotonic() - start),
        )
    reply = HttpReply(
        status=resp.status_code,
        content_type=resp.headers.get("Content-Type", ""),
        headers_ms=_ms(time.monotonic() - start),
        redirected_to=_path(final) if final != url else None,
    )
    body = bytearray()
    try:
        with resp:
            for chunk in _body_chunks(resp):
                now = time.monotonic()
                body += chunk
                if on_chunk is not None:
                    on_chunk(chunk, now)
                if len(body) > cap:
                    reply.error = f"the response is over the {cap // 1024} KiB cap; stopped reading"
                    reply.error_kind = "too-large"
                    break
                if now > deadline:
                    reply.error = (
                        f"the response was still arriving after {now - start:.1f}s; stopped "
                        "reading (a slow or dripping server)"
                    )
                    reply.error_kind = "timeout"
                    break
    except Exception as exc:  # requests, urllib3 (not wrapped when reading raw) and socket errors
        kind, text = describe_exception(exc, budget)
        reply.error_kind = kind
        if kind == "reset":
            text = f"the connection was cut after {len(body)} bytes of the response"
        elif kind == "timeout":
            text = f"the response stalled for {budget:.1f}s after {len(body)} bytes"
        reply.error = text
    reply.body = bytes(body[:cap])
    reply.latency_ms = _ms(time.monotonic() - start)
    reply.done_at = time.time()
    return reply


def _body_chunks(resp):
    """The body as it arrives: read1 returns whatever bytes are there (a dripping server cannot
    make one read wait for a full buffer), so the caller checks its deadline after each."""
    raw = resp.raw
    if hasattr(raw, "read1"):  # urllib3 >= 2
        while True:
            chunk = raw.read1(64 * 1024, decode_content=True)
            if not chunk:
                return
            yield chunk
    else:
        chunked = "chunked" in resp.headers.get("Transfer-Encoding", "").lower()
        yield from (c for c in resp.iter_content(None if chunked else 1024) if c)


def error_message(reply: HttpReply) -> tuple[str, Any]:
    """(one-line message, the parsed or raw error body) for a non-2xx or unusable answer."""
    if reply.status is None:
        return reply.error or "no answer", None
    raw = reply.text()
    if reply.looks_like_html():
        title = _html_title(raw)
        moved = f" after a redirect to {reply.redirected_to}" if reply.redirected_to else ""
        shown = f"HTTP {reply.status} with an HTML page{f' ({title})' if title else ''}{moved}"
        return shown, raw[:2000]
    try:
        parsed = json.loads(raw) if raw.strip() else None
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        err = parsed.get("error", parsed)
        if isinstance(err, dict):
            message = str(err.get("message") or err.get("detail") or err)
        else:
            message = str(err)
        return f"HTTP {reply.status}: {message[:500]}", parsed
    snippet = raw.strip().splitlines()[0][:SNIPPET] if raw.strip() else "empty body"
    return f"HTTP {reply.status}: {snippet}", raw[:2000] if raw else None


def _path(url: str) -> str:
    """The path (and query) of a URL: what a same-origin redirect changed, without a token."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    return parts.path + ("?…" if parts.query else "")


def _html_title(text: str) -> str:
    import re

    m = re.search(r"<(title|h1)[^>]*>(.*?)</\1>", text, re.IGNORECASE | re.DOTALL)
    return " ".join(m.group(2).split())[:120] if m else ""
