"""`llmdoctor probe URL` end to end: exit codes, JSON, bad input, the example bundle.

Time bounds are measured by benchmarks/probe_silent_port.py (wall-clock asserts fail on a busy
machine).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from vllm_server import (
    Blackhole,
    FakeVllmServer,
    Reply,
    Scenario,
    SilentServer,
    Stream,
    free_port,
    probe_report,
    v0_metrics,
)

from llmdoctor.cli import run
from llmdoctor.collectors.bundle import Bundle, write_bundle
from llmdoctor.usecases.diagnose import diagnose

ROOT = Path(__file__).resolve().parents[1]
LLMDOCTOR = str(Path(sys.executable).parent / "llmdoctor")
SATURATED = ROOT / "examples" / "bundles" / "saturated-queue"


def cli(argv: list[str], capsys) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        run(argv)
    out, err = capsys.readouterr()
    return int(exc.value.code or 0), out, err


def test_probe_of_a_healthy_server_exits_0_with_the_json_contract(capsys):
    # the idle real V0 capture and a working generation
    with FakeVllmServer() as srv:
        code, out, _ = cli(
            ["probe", srv.url, "--window", "0.1", "--timeout", "3", "--json"], capsys
        )
    doc = json.loads(out)
    assert code == 0 and doc["schema"] == "llmdoctor/2" and doc["status"] == "ok"
    checks = {f["check"] for f in doc["findings"]}
    assert {"vllm-health", "vllm-queue", "vllm-kv-cache", "vllm-generation"} <= checks
    assert all(f["severity"] == "ok" for f in doc["findings"])


def test_probe_of_a_saturated_server_exits_2(capsys):
    # queue growing at max_num_seqs, and a probe slower than --max-latency-ms
    scenario = Scenario(
        metrics=[v0_metrics(running=256, waiting=240), v0_metrics(running=256, waiting=603)],
        routes={"POST /v1/completions": Stream(first_delay=0.6)},
    )
    with FakeVllmServer(scenario) as srv:
        argv = ["probe", srv.url, "--window", "0.1", "--max-num-seqs", "256"]
        code, out, _ = cli([*argv, "--max-latency-ms", "300", "--json", "--timeout", "3"], capsys)
    doc = json.loads(out)
    assert code == 2 and doc["status"] == "critical"
    critical = {f["check"] for f in doc["findings"] if f["severity"] == "critical"}
    assert critical == {"vllm-queue", "vllm-generation"}


def test_probe_against_a_port_that_never_answers_is_a_critical_finding(capsys):
    # how long it takes is measured by benchmarks/probe_silent_port.py, not here
    with SilentServer() as srv:
        argv = ["probe", srv.url, "--timeout", "2", "--window", "0.1", "--json"]
        code, out, _ = cli(argv, capsys)
    doc = json.loads(out)
    assert code == 2 and doc["findings"][0]["check"] == "vllm-health"
    # the wait is --timeout less what a loaded machine took to start the request (2.0s or just under)
    waited = re.search(r"no answer within (\d+\.\d)s", doc["findings"][0]["summary"])
    assert waited and 1.5 <= float(waited.group(1)) <= 2.0
    # it took the connection and said nothing: a blocked server (or a proxy holding the
    # request), not a dead engine, which answers 500/503 or exits
    assert doc["findings"][0]["runbooks"][:1] == ["engine-wedged"]
    assert "engine-dead" not in doc["findings"][0]["runbooks"]


def test_a_health_path_that_never_answers_while_generation_works_is_not_a_wedged_engine(capsys):
    # only GET /health hangs; the real captured /metrics and a streamed completion answer: the
    # report said 'Root cause: engine wedged, no token is generated' over tokens it had just got
    scenario = Scenario(routes={"GET /health": Blackhole()})
    with FakeVllmServer(scenario) as srv:
        argv = ["probe", srv.url, "--timeout", "2", "--window", "0.1", "--json"]
        code, out, _ = cli(argv, capsys)
    findings = json.loads(out)["findings"]
    (health,) = [f for f in findings if f["subject"] == "endpoint /health"]
    assert code == 1 and health["severity"] == "warning"
    assert "engine-wedged" not in health["runbooks"] and "engine-dead" not in health["runbooks"]
    assert "a generation answered" in health["summary"]
    (generation,) = [f for f in findings if f["check"] == "vllm-generation"]
    assert generation["severity"] == "ok"


def test_https_to_a_plain_http_server_says_so_once(capsys):
    # the handshake fails on every endpoint alike: one finding that says use http://, not
    # three headlines of requests' pool internals ("HTTPSConnectionPool(host=...): Max retries")
    with FakeVllmServer(Scenario()) as srv:
        url = srv.url.replace("http://", "https://")
        code, out, _ = cli(["probe", url, "--timeout", "2", "--window", "0.1", "--json"], capsys)
    problems = [f for f in json.loads(out)["findings"] if f["severity"] != "ok"]
    assert code == 2 and [f["subject"] for f in problems] == ["endpoint /health"]
    assert "use http://" in problems[0]["summary"] and "Pool" not in problems[0]["summary"]


def test_probe_of_a_port_nothing_listens_on_names_a_dead_engine_as_unproven(capsys):
    # connection refused: vLLM exits after its engine dies, so engine-dead is the runbook to
    # rule out; but a server still loading, or a wrong port, is refused the same way, and the
    # headline must not say the engine died (a hostile pass typed a wrong port)
    url = f"http://127.0.0.1:{free_port()}"
    code, out, _ = cli(["probe", url, "--timeout", "2", "--json"], capsys)
    health = json.loads(out)["findings"][0]
    assert code == 2 and health["check"] == "vllm-health" and "refused" in health["summary"]
    assert health["runbooks"][:1] == ["engine-dead"] and health["runbooks_unproven"]
    code, out, _ = cli(["probe", url, "--timeout", "2"], capsys)
    head = out.split("\n\n")[1]
    assert code == 2 and head.startswith("Root cause  nothing listens on this address"), head
    assert "engine died" not in head.split("\n")[0], head
    assert "Do now      no cause is proven: rule out what engine-dead covers" in head, head
    assert "give --model" not in out  # no model name reaches a port nothing listens on


def test_a_host_name_that_does_not_resolve_is_not_called_a_dead_engine(capsys):
    # a final new-user pass: a typo in the URL read "Root cause: vLLM engine died"
    argv = ["probe", "http://no-such-host.invalid:8000", "--timeout", "2", "--json"]
    code, out, _ = cli(argv, capsys)
    health = json.loads(out)["findings"][0]
    assert code == 2 and health["check"] == "vllm-health" and health["severity"] == "critical"
    assert "does not resolve" in health["summary"] and "engine-dead" not in health["runbooks"]


def test_probe_subprocess_against_a_silent_port_is_clean():
    # the real executable: exit 2, the JSON report, no traceback
    with SilentServer() as srv:
        proc = subprocess.run(
            [LLMDOCTOR, "probe", srv.url, "--timeout", "2", "--window", "0.1", "--json"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    report = json.loads(proc.stdout)
    assert report["status"] == "critical"
    # a port that accepts and says nothing is a wedged vLLM as much as a proxy holding it, or
    # no vLLM at all: both runbooks are places to look, neither is the proven root cause
    health = report["findings"][0]
    assert health["runbooks"] == ["engine-wedged", "gateway-timeout"], health
    assert health["runbooks_unproven"], health


@pytest.mark.parametrize(
    "argv,message",
    [
        (["probe", "pod/vllm-7b"], "http(s)://HOST:PORT"),
        (["probe", "http://:8000"], "no host"),
        # a query or fragment would swallow /health and /metrics: every request went to '/'
        # while the report said 'GET /health returned 404'
        (["probe", "http://127.0.0.1:8000/?token=abc"], "query or fragment"),
        (["probe", "http://127.0.0.1:8000/#frag"], "query or fragment"),
        (["probe", "http://127.0.0.1:1", "--tokenizer", "/nonexistent/tok"], "--tokenizer"),
        (["probe", "http://127.0.0.1:1", "--only", "no-such-check"], "unknown check"),
        (["probe", "http://127.0.0.1:1", "--skip", "no-such-check"], "--skip names unknown"),
    ],
)
def test_bad_input_is_one_line_and_exit_3(argv, message, capsys):
    # the user's mistake, not a finding: exit 3 and a one-line reason
    code, out, err = cli(argv, capsys)
    assert code == 3 and message in err and err.count("\n") == 1 and out == ""


def test_help_does_not_import_requests():
    # the CLI stays light: requests is imported inside the command only
    code = "import sys, llmdoctor.cli; print('requests' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_example_bundle_shows_a_saturated_queue(capsys):
    # examples/bundles/saturated-queue: running 256 -> 250, waiting 240 -> 184, KV ~40%
    code, out, _ = cli(["diagnose", "--bundle", str(SATURATED), "--json"], capsys)
    doc = json.loads(out)
    assert code == 2
    by_check = {}
    for f in doc["findings"]:
        by_check.setdefault(f["check"], []).append(f)
    queue = by_check["vllm-queue"][0]
    assert queue["severity"] == "critical" and queue["runbooks"] == ["queue-saturation"]
    assert "240 → 184" in queue["summary"] and "256 → 250" in queue["summary"]
    assert by_check["vllm-latency"][0]["summary"].startswith("slow queue time")
    assert by_check["vllm-generation"][0]["severity"] == "critical"
    assert by_check["vllm-kv-cache"][0]["severity"] == "ok"  # not KV-bound
    assert by_check["vllm-health"][0]["severity"] == "ok"  # /health says 200 throughout


def test_live_facts_round_trip_through_a_bundle(tmp_path):
    # collect live, write a bundle, read it back: the same vLLM verdicts (tokenizer.json included)
    tok_dir = tmp_path / "tok"
    tok_dir.mkdir()
    from test_tokenizer_probe import build_tokenizer

    build_tokenizer(tok_dir)
    scenario = Scenario(
        metrics=[v0_metrics(running=256, waiting=240), v0_metrics(running=256, waiting=603)]
    )
    with FakeVllmServer(scenario) as srv:
        live = probe_report(srv.url, tokenizer=str(tok_dir), settings={"max_num_seqs": 256})
    dest = write_bundle(live.facts, tmp_path / "b", target=live.target)
    assert (dest / "tokenizer.json").is_file() and (dest / "vllm" / "scrapes.json").is_file()
    with Bundle(dest) as bundle:
        replay = diagnose(
            [bundle.to_facts()], "bundle", scopes=("vllm",), settings={"max_num_seqs": 256}
        )

    def verdicts(report):
        return sorted((f.check, f.subject or "", str(f.severity)) for f in report.findings)

    assert verdicts(replay) == verdicts(live)


# --- the base URL: a trailing /v1 is the OpenAI client's habit, not the server's root ----------


def test_probe_of_a_v1_url_probes_the_server_root(capsys):
    # issue 12: http://host:8000/v1 asked for /v1/v1/models and reported "returned 404: None"
    with FakeVllmServer() as srv:
        code, out, err = cli(
            ["probe", srv.url + "/v1/", "--window", "0.1", "--timeout", "3", "--json"], capsys
        )
        paths = {path for _, path, _ in srv.requests}
    doc = json.loads(out)
    assert code == 0 and doc["status"] == "ok" and doc["target"] == srv.url
    assert "/v1/models" in paths and not any(p.startswith("/v1/v1") for p in paths)
    assert "ends in /v1" in err and err.count("\n") == 1


def test_a_404_on_health_says_what_it_got_and_suggests_the_root_url(capsys):
    with FakeVllmServer() as srv:
        code, out, _ = cli(
            ["probe", srv.url + "/serving", "--window", "0", "--timeout", "3", "--json"], capsys
        )
    assert code == 1
    (health,) = [f for f in json.loads(out)["findings"] if f.get("subject") == "endpoint /health"]
    assert "returned 404: HTTP 404: Not Found" in health["summary"]
    assert "None" not in health["summary"] and "root URL" in health["summary"]


def test_an_sso_sign_in_page_is_not_called_a_gateway_timeout(capsys):
    # issue 12: oauth2-proxy's sign-in page (403, text/html) in front of vLLM linked the
    # gateway-timeout entry; tests/fixtures/login/SOURCES.md
    page = Reply(
        403, (ROOT / "tests/fixtures/login/oauth2-proxy-sign-in.html").read_text(), "text/html"
    )
    paths = [
        "GET /health",
        "GET /metrics",
        "GET /v1/models",
        "GET /version",
        "POST /v1/completions",
    ]
    with FakeVllmServer(Scenario(routes=dict.fromkeys(paths, page))) as srv:
        code, out, _ = cli(
            ["probe", srv.url, "--model", "m", "--window", "0", "--timeout", "3", "--json"], capsys
        )
    findings = json.loads(out)["findings"]
    assert code == 2
    assert all("gateway-timeout" not in f["runbooks"] for f in findings)
    (gen,) = [f for f in findings if f["check"] == "vllm-generation"]
    assert "HTML page" in gen["summary"] and "Sign In" in gen["summary"]
    assert "API key" not in gen["summary"]


def test_diagnose_of_a_v1_url_probes_the_root_too(capsys):
    with FakeVllmServer() as srv:
        code, out, _ = cli(
            ["diagnose", srv.url + "/v1", "--window", "0.1", "--timeout", "3", "--json"], capsys
        )
        paths = {path for _, path, _ in srv.requests}
    assert code == 0 and json.loads(out)["status"] == "ok"
    assert not any(p.startswith("/v1/v1") for p in paths), paths
