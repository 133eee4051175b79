"""Benchmark: `llmdoctor exporter` probe times, its concurrency bound, and shell completion
against an API server that never answers.

Targets (tests/vllm_server.py's scripted servers on 127.0.0.1, the exporter in-process):
  * healthy target: a probe's own time under window + 1 s;
  * blackholed target (accepts, never answers): answered, success 0, under
    window + 1.5 x timeout + 1 s;
  * 20 concurrent scrapes of a target whose completion never answers, --max-concurrent 4: all
    answered, never more than 4 probes at once, the whole burst under
    ceil(20 / 4) x (window + 1.5 x timeout) + 2 s;
  * `kubectl_complete-llmdoctor diagnose pod/` with a kubeconfig pointing at a silent API
    server: under interpreter start-up + 1 s budget + 0.5 s.

    .venv/bin/python benchmarks/fleet_exporter.py
    .venv/bin/python benchmarks/fleet_exporter.py --timeout 2 --window 1
"""

from __future__ import annotations

import argparse
import math
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
BIN = Path(sys.executable).parent


def _get(port: int, target: str) -> tuple[int, float, str]:
    query = urllib.parse.urlencode({"target": target})
    start = time.monotonic()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/probe?{query}", timeout=120) as r:
            return r.status, time.monotonic() - start, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, time.monotonic() - start, ""


def _value(body: str, name: str) -> float | None:
    for line in body.splitlines():
        if line.startswith(f"{name} "):
            return float(line.split()[1])
    return None


def _success(body: str) -> float | None:
    return _value(body, "llmdoctor_probe_success")


def main() -> None:
    from vllm_server import Blackhole, FakeVllmServer, Scenario, SilentServer

    from llmdoctor.fleet.exporter import ExporterServer, ProbeExporter, ProbeSettings

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=1.0)
    parser.add_argument("--window", type=float, default=0.5)
    parser.add_argument("--runs", type=int, default=5)
    opts = parser.parse_args()
    worst = opts.window + 1.5 * opts.timeout
    settings = ProbeSettings(
        timeout=opts.timeout, window=opts.window, max_concurrent=4, queue_wait=60
    )
    exporter = ProbeExporter(settings)
    server = ExporterServer(("127.0.0.1", 0), exporter)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    rows, verdicts = [], []
    try:
        with FakeVllmServer() as srv:
            runs = [_get(port, srv.url) for _ in range(opts.runs)]
        own = [_value(b, "llmdoctor_probe_duration_seconds") or 0.0 for _, _, b in runs]
        ok = all(_success(b) == 1 for _, _, b in runs) and max(own) < opts.window + 1
        rows.append(("healthy target, probe's own time", own))
        verdicts.append(("healthy < window + 1 s, success 1", ok))
        with SilentServer() as srv:
            runs = [_get(port, srv.url) for _ in range(opts.runs)]
        took = [t for _, t, _ in runs]
        ok = all(_success(b) == 0 for _, _, b in runs) and max(took) < worst + 1
        rows.append(("blackholed target, answer time", took))
        verdicts.append((f"blackholed < {worst + 1:g} s, success 0", ok))
        scenario = Scenario(routes={"POST /v1/completions": Blackhole()})
        with FakeVllmServer(scenario) as srv, ThreadPoolExecutor(20) as pool:
            start = time.monotonic()
            burst = list(pool.map(lambda _: _get(port, srv.url), range(20)))
            whole = time.monotonic() - start
        limit = math.ceil(20 / 4) * worst + 2
        ok = all(s == 200 for s, _, _ in burst) and exporter.peak_in_flight <= 4 and whole < limit
        rows.append(("20 concurrent scrapes, each", [t for _, t, _ in burst]))
        verdicts.append(
            (f"burst {whole:.2f}s < {limit:g}s, peak {exporter.peak_in_flight} <= 4", ok)
        )
    finally:
        server.shutdown()
        server.server_close()
    start = time.monotonic()
    subprocess.run([str(BIN / "llmdoctor"), "--version"], capture_output=True)
    startup = time.monotonic() - start
    completion = []
    with SilentServer() as silent, tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kubeconfig"
        silent.write_kubeconfig(path)
        for _ in range(3):
            start = time.monotonic()
            subprocess.run(
                [
                    str(BIN / "kubectl_complete-llmdoctor"),
                    "--kubeconfig",
                    str(path),
                    "diagnose",
                    "pod/",
                ],
                capture_output=True,
                timeout=60,
            )
            completion.append(time.monotonic() - start)
    rows.append(("completion, silent API server", completion))
    verdicts.append(
        (f"completion < start-up {startup:.2f}s + 1.5 s", max(completion) < startup + 1.5)
    )
    print(f"--timeout {opts.timeout:g}s --window {opts.window:g}s (probe worst case {worst:g}s)")
    print("| | min (s) | median (s) | max (s) |")
    print("|---|---|---|---|")
    for name, values in rows:
        print(
            f"| {name} | {min(values):.2f} | {statistics.median(values):.2f} | {max(values):.2f} |"
        )
    for text, ok in verdicts:
        print(f"target {text}: {'met' if ok else 'MISSED'}")


if __name__ == "__main__":
    main()
