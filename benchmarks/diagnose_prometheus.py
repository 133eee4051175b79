"""Benchmark: `llmdoctor diagnose pod/x --prometheus URL` on a single pod, end to end (< 2 s).

A fake Kubernetes API server with one fake vLLM (tests/k8s_server.py, each answer delayed by
--latency seconds) and a real `prometheus` over an hour of scripted history for that pod
(tests/prometheus_scenarios.py, TSDB blocks made by promtool). The CLI runs in a fresh process
each time, as a user runs it. With --prometheus the live /metrics window defaults to 0 (the rates
come from the history), so the command does not spend five seconds waiting; the run without
Prometheus (default --window 5) is printed beside it.

    .venv/bin/python benchmarks/diagnose_prometheus.py            # 5 runs
    .venv/bin/python benchmarks/diagnose_prometheus.py --runs 9 --latency 0.02

Needs Debian's `prometheus` package (prometheus, promtool).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests"))

from diagnose_deploy import timed_run  # noqa: E402

SATURATED_POD = "vllm-7b-tp2-5b8d9c7f6-w4nzp"
SERVER = """
import sys
sys.path.insert(0, {tests!r})
from k8s_server import Running, scenario_saturated
from pathlib import Path
with Running(scenario_saturated(), Path({kubeconfig!r}), delay={latency}):
    print("ready", flush=True)
    sys.stdin.read()
"""


def start_cluster(latency: float, kubeconfig: Path):
    import subprocess

    code = SERVER.format(tests=str(ROOT / "tests"), kubeconfig=str(kubeconfig), latency=latency)
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    if proc.stdout.readline().strip() != "ready":
        raise SystemExit("the fake cluster did not start")
    return proc


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--latency", type=float, default=0.05, help="seconds per API/vLLM answer")
    opts = parser.parse_args()
    if not (shutil.which("prometheus") and shutil.which("promtool")):
        raise SystemExit("needs Debian's prometheus package (prometheus, promtool)")
    import prometheus_scenarios as ps
    from prometheus_server import Prometheus, create_blocks

    with tempfile.TemporaryDirectory(prefix="llmdoctor-bench-") as tmp:
        folder = Path(tmp)
        start = time.time() // ps.SCRAPE * ps.SCRAPE - 3600
        data = create_blocks(ps.openmetrics_hour(start, [ps.queue_builds(SATURATED_POD)]), folder)
        prometheus = Prometheus(data, folder)
        cluster = start_cluster(opts.latency, folder / "kubeconfig")
        env = {**os.environ, "KUBECONFIG": str(folder / "kubeconfig"), "NO_COLOR": "1"}
        base = ["diagnose", f"pod/{SATURATED_POD}", "-n", "serving", "--no-exec", "--json"]
        with_history, without = [], []
        try:
            timed_run([*base, "--prometheus", prometheus.url], env)  # warm the disk caches
            for _ in range(opts.runs):
                with_history.append(timed_run([*base, "--prometheus", prometheus.url], env)[0])
            for _ in range(max(1, opts.runs // 2)):
                without.append(timed_run(base, env)[0])
        finally:
            cluster.stdin.close()
            cluster.wait(timeout=10)
            prometheus.stop()
    print(
        f"{opts.latency * 1000:.0f} ms per API/vLLM answer; CLI end to end, fresh process each run"
    )
    print("| command | runs | median (s) | max (s) |")
    print("|---|---|---|---|")
    print(
        f"| diagnose pod/x --prometheus URL | {len(with_history)} | "
        f"{statistics.median(with_history):.2f} | {max(with_history):.2f} |"
    )
    print(
        f"| diagnose pod/x (no Prometheus, --window 5) | {len(without)} | "
        f"{statistics.median(without):.2f} | {max(without):.2f} |"
    )


if __name__ == "__main__":
    main()
