"""`llmdoctor exporter` hands nothing to whoever can reach it: loopback unless told, only the
targets --allow-target allows (cloud metadata never, names checked at the address reached),
the API key only where --api-key-target says, a bounded number of connections each with a
timeout; and its query parsing takes any text without an internal error."""

from __future__ import annotations

import inspect
import socket
import string
import threading
import time
import urllib.parse
from pathlib import Path

import pytest
import yaml
from exporter_running import Running
from hypothesis import example, given, settings
from hypothesis import strategies as st
from vllm_server import FakeVllmServer

from llmdoctor.commands.exporter import exporter_command
from llmdoctor.fleet.exporter import (
    ProbeRefused,
    ProbeSettings,
    parse_listen,
    parse_probe_query,
)
from llmdoctor.fleet.target_policy import HostPattern, TargetPolicy, TargetRefused

DEPLOY = Path(__file__).resolve().parent.parent / "deploy"
EVERYWHERE = ["0.0.0.0/0", "::/0"]


def settings_with(policy: TargetPolicy, **kw) -> ProbeSettings:
    return ProbeSettings(timeout=1.0, window=0.05, policy=policy, **kw)


def test_the_exporter_listens_on_loopback_unless_a_wider_bind_is_written():
    # `--listen :9808` once meant every interface: a probe proxy for the whole network
    default = inspect.signature(exporter_command).parameters["listen"].default
    assert parse_listen(default)[0] == "127.0.0.1"
    assert parse_listen(":9808") == ("127.0.0.1", 9808)
    assert parse_listen("0.0.0.0:9808") == ("0.0.0.0", 9808)  # explicit, as a pod needs


@pytest.mark.parametrize(
    "target",
    [
        "http://169.254.169.254/latest/meta-data/",  # AWS, GCP, Azure metadata
        "http://169.254.170.2/v2/credentials",  # ECS task credentials
        "http://[fd00:ec2::254]/latest/meta-data/",  # AWS metadata over IPv6
        "http://[::ffff:169.254.169.254]/",  # the same, written as IPv6
        "http://[::ffff:a9fe:a9fe]/",  # and in hex
        "http://metadata.google.internal/computeMetadata/v1/",
        "http://METADATA.google.internal./",  # case and a trailing dot
        "http://100.100.100.200/latest/meta-data/",  # Alibaba Cloud
        "http://0.0.0.0:8000/",  # the unspecified address reaches the host itself
    ],
)
def test_cloud_metadata_is_refused_even_when_every_address_is_allowed(target):
    # a cloud's metadata service hands out the node's credentials: never probed
    with Running(settings_with(TargetPolicy.from_patterns(EVERYWHERE, None))) as ex:
        status, body = ex.probe_in_process(target)
    assert status == 400 and "refused" in body


def test_a_name_resolving_to_a_metadata_address_is_refused():
    # a DNS name of the attacker's that points at 169.254.169.254
    policy = TargetPolicy.from_patterns(["*.example"], None)
    policy.resolve = lambda host, port: ["169.254.169.254"]
    with pytest.raises(TargetRefused, match="metadata"):
        policy.check("meta.example", 80)


def test_by_default_only_loopback_targets_are_probed():
    # no --allow-target: the exporter probes this machine's servers and nothing else
    with FakeVllmServer() as srv, Running(settings_with(TargetPolicy())) as ex:
        assert ex.probe_in_process(srv.url)[0] == 200
        status, body = ex.probe_in_process("http://10.255.255.1:8000")
    assert status == 400 and "not allowed" in body


def test_a_disallowed_target_is_never_contacted():
    # the policy is checked before any request: the server sees nothing
    policy = TargetPolicy.from_patterns(["10.0.0.0/8"], None)
    with FakeVllmServer() as srv, Running(settings_with(policy)) as ex:
        status, _ = ex.probe_in_process(srv.url)
        assert status == 400 and srv.requests == []


def test_a_name_that_rebinds_to_another_address_is_refused_at_connect():
    # DNS rebinding: the name resolved to an allowed address when checked (127.0.0.2) and
    # reaches another (127.0.0.1) when connected; the address reached is what is checked
    policy = TargetPolicy.from_patterns(["127.0.0.2/32"], None)
    policy.resolve = lambda host, port: ["127.0.0.2"]
    with FakeVllmServer() as srv, Running(settings_with(policy)) as ex:
        target = srv.url.replace("127.0.0.1", "localhost")
        status, body = ex.probe_in_process(target)
        assert srv.requests == []
    assert status == 200  # a probe that failed, as metrics
    assert "llmdoctor_probe_health_up 0.0" in body


@pytest.mark.parametrize(
    ("pattern", "host", "matches"),
    [
        ("*.serving", "vllm.serving", True),  # Service.namespace
        ("*.serving", "vllm.serving.svc", True),
        ("*.serving", "vllm.serving.svc.cluster.local", True),
        ("*.serving", "VLLM.Serving.svc.cluster.local.", True),  # DNS is case-blind
        ("*.serving", "serving", False),  # the namespace itself is no Service
        ("*.serving", "vllm.serving.evil.example", False),
        ("*.serving", "vllm.serving.svc.evil.example", False),
        ("vllm.serving", "vllm.serving.svc.cluster.local", True),
        ("vllm.serving", "other.serving", False),
    ],
)
def test_kubernetes_service_names_match_in_every_spelling(pattern, host, matches):
    assert HostPattern.parse(pattern).matches_name(host) is matches


@pytest.mark.parametrize("pattern", ["", "*", "*.", "a..b", "http://x", "vllm/x", "10.0.0.0/33"])
def test_an_unreadable_pattern_is_a_one_line_error(pattern):
    with pytest.raises(ValueError):
        TargetPolicy.from_patterns([pattern], None)


def test_the_api_key_goes_only_to_the_targets_named_for_it(monkeypatch):
    # LLMDOCTOR_API_KEY once went as a Bearer header to any target a caller named
    monkeypatch.setenv("LLMDOCTOR_API_KEY", "sk-exporter-key-0123456789")
    loopback = ["127.0.0.0/8"]
    with FakeVllmServer() as srv:
        with Running(settings_with(TargetPolicy.from_patterns(loopback, None))) as ex:
            assert ex.probe_in_process(srv.url)[0] == 200
        assert srv.authorizations and set(srv.authorizations) == {None}
        srv.authorizations.clear()
        with Running(settings_with(TargetPolicy.from_patterns(loopback, loopback))) as ex:
            assert ex.probe_in_process(srv.url)[0] == 200
        assert set(srv.authorizations) == {"Bearer sk-exporter-key-0123456789"}


def test_idle_connections_are_capped_and_closed():
    # each idle connection once held a thread forever: 200 of them, then a real scrape
    settings = settings_with(TargetPolicy(), max_connections=8, request_timeout=1.0)
    with Running(settings) as ex:
        idle = [socket.create_connection(("127.0.0.1", ex.port), timeout=5) for _ in range(200)]
        try:
            assert threading.active_count() < 40  # not a thread per connection
            answers = [s.recv(100) for s in idle]  # each ends: a 503, or closed when idle
            done = time.monotonic()
        finally:
            for s in idle:
                s.close()
        assert sum(a.startswith(b"HTTP/1.0 503") for a in answers) >= 150
        assert all(a == b"" or a.startswith(b"HTTP/1.0 503") for a in answers)
        with socket.create_connection(("127.0.0.1", ex.port), timeout=5) as s:
            s.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
            assert s.recv(12).startswith(b"HTTP/1.0 200")  # serving again
        assert time.monotonic() - done < 5


QUERY_TEXT = st.text(string.printable + "é\x00%&=", max_size=200)


@settings(max_examples=500, deadline=None)
@given(query=QUERY_TEXT)
@example(query="target=http://[::1")
@example(query="target=http://h:99999")
@example(query="target=http://a&target=http://b")
@example(query="target=" + "a" * 5000)
@example(query="target=http%3A%2F%2Fh%0d%0aX-Injected%3A1")
@example(query="model=%00&target=http://h:1")
def test_any_query_is_a_request_or_a_refusal_never_an_internal_error(query):
    # property: parse_probe_query takes any text; what it accepts is one http(s) URL with a host
    try:
        request = parse_probe_query(query)
    except ProbeRefused as exc:
        assert str(exc) and "\n" not in str(exc)
        return
    parts = urllib.parse.urlsplit(request.target)
    assert parts.scheme.lower() in ("http", "https") and parts.hostname
    assert not any(ord(c) < 32 for c in request.target + (request.model or ""))


@settings(max_examples=300, deadline=None)
@given(
    host=st.from_regex(r"[a-z][a-z0-9-]{0,20}(\.[a-z][a-z0-9-]{0,20}){0,3}", fullmatch=True),
    port=st.integers(1, 65535),
    model=st.text(string.ascii_letters + "-/._:", max_size=60),
    chat=st.booleans(),
)
def test_a_well_formed_probe_query_reads_back_as_written(host, port, model, chat):
    # property: what Prometheus' relabelling sends is read back exactly
    target = f"http://{host}:{port}"
    query = urllib.parse.urlencode({"target": target, "model": model, "chat": int(chat)})
    request = parse_probe_query(query)
    assert request.target == target
    assert request.model == (model.strip() or None) and request.chat is chat


def test_the_deployment_binds_every_interface_and_allows_only_its_services():
    # a pod behind a Service must bind wide: the manifest says so, and names its targets
    docs = [d for d in yaml.safe_load_all((DEPLOY / "probe-exporter.yaml").read_text()) if d]
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--listen=0.0.0.0:9808" in args
    allowed = [a.split("=", 1)[1] for a in args if a.startswith("--allow-target=")]
    assert allowed
    policy = TargetPolicy.from_patterns(allowed, None)
    policy.resolve = lambda host, port: ["10.96.0.12"]  # a ClusterIP, as cluster DNS answers
    (probe,) = [d for d in docs if d["kind"] == "Probe"]
    for url in probe["spec"]["targets"]["staticConfig"]["static"]:
        parts = urllib.parse.urlsplit(url)
        policy.check(parts.hostname, parts.port)


def test_a_request_dripped_byte_by_byte_is_closed_at_the_request_timeout():
    # slowloris: a byte every 0.2 s never trips a per-read timeout, yet must not hold a slot
    import select

    settings = settings_with(TargetPolicy(), max_connections=2, request_timeout=1.5)
    with Running(settings) as ex, socket.create_connection(("127.0.0.1", ex.port), 5) as s:
        started = time.monotonic()
        closed_after = None
        for byte in b"GET /metrics HTTP/1.0\r\nX-Slow: " + b"a" * 100:
            try:
                s.sendall(bytes([byte]))
                readable, _, _ = select.select([s], [], [], 0.2)
                if readable and s.recv(100) == b"":
                    closed_after = time.monotonic() - started
            except OSError:
                closed_after = time.monotonic() - started
            if closed_after is not None or time.monotonic() - started > 8:
                break
    assert closed_after is not None and closed_after < 4


def test_the_command_refuses_metadata_and_logs_no_traceback(tmp_path):
    # the real command, as deployed: every refusal is a 400 with a reason, stderr stays clean
    import subprocess
    import sys
    import urllib.error
    import urllib.request

    from vllm_server import free_port, wait_until

    port = free_port()
    command = [str(Path(sys.executable).parent / "llmdoctor"), "exporter"]
    proc = subprocess.Popen(
        [*command, "--listen", f"127.0.0.1:{port}", *("--allow-target", "0.0.0.0/0")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    codes = []
    try:

        def answers(target: str) -> bool:
            query = urllib.parse.urlencode({"target": target})
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/probe?{query}", timeout=10):
                    codes.append(200)
            except urllib.error.HTTPError as exc:
                codes.append(exc.code)
            except OSError:
                return False
            return True

        assert wait_until(lambda: answers("http://169.254.169.254/"), timeout=20)
        for target in ("http://2852039166/", "http://0251.0376.0251.0376/", "http://[::1]:1/"):
            answers(target)  # decimal and octal spellings of 169.254.169.254; ::1 not allowed
    finally:
        proc.terminate()
        err = proc.communicate(timeout=10)[1]
    assert set(codes) == {400}
    assert "Traceback" not in err and "Exception" not in err
