"""Network failures are classified by exception type (requests/urllib3/socket), not message text.

The exceptions are the real ones the requests library raises against local sockets: a closed
port, a port that never answers, a server that closes the connection without a word, TLS spoken
to a plain-HTTP server.
"""

from __future__ import annotations

import socket
import threading

import pytest
import requests
import urllib3.exceptions as u3
from vllm_server import FakeVllmServer, SilentServer, free_port

from llmdoctor.collectors.network_errors import classify_network_error


def raised(url: str, timeout: float = 1.0) -> BaseException:
    with requests.Session() as session:
        session.trust_env = False
        try:
            session.get(url, timeout=timeout)
        except requests.RequestException as exc:
            return exc
    raise AssertionError(f"{url} answered")


class HangUp:
    """A port that accepts a connection, reads the request and closes without answering."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self) -> None:
        conn, _ = self.sock.accept()
        conn.recv(65536)
        conn.close()

    def __enter__(self) -> str:
        self.thread.start()
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}/health"

    def __exit__(self, *exc) -> None:
        self.sock.close()


def test_closed_port_is_connection_refused():
    kind, text = classify_network_error(raised(f"http://127.0.0.1:{free_port()}/health"), 1.0)
    assert kind == "connect" and "connection refused" in text


def test_port_that_never_answers_is_a_timeout():
    with SilentServer() as srv:
        kind, text = classify_network_error(raised(srv.url + "/health", timeout=0.5), 0.5)
    assert kind == "timeout" and "no answer within 0.5s" in text


def test_server_that_hangs_up_is_a_reset():
    with HangUp() as url:
        kind, _ = classify_network_error(raised(url), 1.0)
    assert kind == "reset"


def test_bad_url_is_protocol():
    kind, text = classify_network_error(raised("http://"), 1.0)
    assert kind == "protocol" and "invalid URL" in text


def test_name_resolution_failure_by_type():
    # urllib3's own exception object, as its connection pool raises it (no DNS needed here)
    cause = socket.gaierror(socket.EAI_NONAME, "Name or service not known")
    error = u3.NameResolutionError("vllm.invalid", None, cause)
    wrapped = requests.exceptions.ConnectionError(u3.MaxRetryError(None, "/health", error))
    assert classify_network_error(wrapped, 1.0) == ("connect", "the host name does not resolve")


@pytest.mark.parametrize(
    "message", ["Connection refused", "[Errno 111] Connection refused", "read timed out"]
)
def test_message_text_alone_decides_nothing(message):
    # before: "connection refused" / "timed out" anywhere in the text picked the kind
    kind, _ = classify_network_error(requests.exceptions.RequestException(message), 1.0)
    assert kind == "protocol"


def test_https_to_a_plain_http_server_is_tls():
    with FakeVllmServer() as srv:
        exc = raised(srv.url.replace("http://", "https://") + "/health")
    kind, text = classify_network_error(exc, 1.0)
    assert kind == "tls" and text.startswith("TLS handshake failed") and "use http://" in text
