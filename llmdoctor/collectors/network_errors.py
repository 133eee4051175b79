"""Why a request failed, told by exception type and errno, never by message wording:
connect, timeout, tls, reset or protocol. Shared by every HTTP and Kubernetes API caller."""

from __future__ import annotations

UNRESOLVED = "the host name does not resolve"  # a connect failure before any address
# a read timeout: something listens and took the request, then said nothing (a blocked
# server or a proxy holding it), not a server that is gone
ACCEPTED_NO_ANSWER = "the server accepted the connection"
# llmdoctor's own budget ran out before a request could start: nothing is known of the server
NOT_SENT_KIND = "not-sent"
NOT_SENT = (
    "not sent: llmdoctor's --timeout ran out before the request could start (a --timeout "
    "too short, or a machine too loaded to run llmdoctor's threads)"
)


def never_sent(reason: str) -> bool:
    """Whether a collection failure's reason says the request was never sent (NOT_SENT): it
    tells nothing of the server."""
    return NOT_SENT in reason


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
        return "connect", UNRESOLVED
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
        return "tls", _tls_text(has(ssl.SSLError), first)
    if has(requests.exceptions.ReadTimeout, u3.ReadTimeoutError, TimeoutError):
        return "timeout", f"no answer within {budget:.1f}s ({ACCEPTED_NO_ANSWER})"
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


def _tls_text(error, first: str) -> str:
    """What a failed TLS handshake says, from OpenSSL's reason code when there is one (not
    requests' wrapper text, which is a line of pool internals): a plain-HTTP server answering
    an https:// URL is the usual one."""
    reason = getattr(error, "reason", None)
    if not isinstance(reason, str) or not reason:
        return f"TLS error: {first[:160]}"
    if reason in ("WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE", "HTTP_REQUEST"):
        return f"TLS handshake failed ({reason}): the server answers plain HTTP here; use http://"
    detail = getattr(error, "verify_message", None)
    return f"TLS handshake failed ({reason}{': ' + detail if isinstance(detail, str) else ''})"
