"""Benchmark: `llmdoctor diagnose deploy/NAME` with 5 pods takes about as long as one pod.

A fake Kubernetes API server and one fake vLLM server per pod (tests/k8s_server.py) run in a
separate process on 127.0.0.1, each answer delayed by --latency seconds (a remote API server
and the pod proxy are never instant). The CLI is run end to end in a fresh process, as a user
runs it, for one pod and for a 5-pod deployment; the pods of a deployment are collected
concurrently, so the deployment costs about one pod's time, not five.

    .venv/bin/python benchmarks/diagnose_deploy.py            # defaults: --window 5, 3 runs
    .venv/bin/python benchmarks/diagnose_deploy.py --window 0 --runs 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LLMDOCTOR = [sys.executable, "-m", "llmdoctor"]
POD = "pod/vllm-7b-7d9f8c6b5-x2kqp"

SERVER = """
import sys, time
sys.path.insert(0, {tests!r})
from k8s_server import Running, scenario_healthy
from pathlib import Path
with Running(scenario_healthy(replicas={replicas}), Path({kubeconfig!r}), delay={latency}):
    print("ready", flush=True)
    sys.stdin.read()  # until the parent closes our stdin
"""


def start_cluster(replicas: int, latency: float, kubeconfig: Path) -> subprocess.Popen:
    code = SERVER.format(
        tests=str(ROOT / "tests"), replicas=replicas, kubeconfig=str(kubeconfig), latency=latency
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    if proc.stdout.readline().strip() != "ready":
        raise SystemExit("the fake cluster did not start")
    return proc


def timed_run(args: list[str], env: dict[str, str]) -> tuple[float, int]:
    start = time.perf_counter()
    done = subprocess.run(
        [*LLMDOCTOR, *args], env=env, capture_output=True, text=True, check=False, cwd=ROOT
    )
    elapsed = time.perf_counter() - start
    if done.returncode == 3:
        raise SystemExit(f"llmdoctor could not run: {done.stderr.strip()}")
    return elapsed, done.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=5)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--window", type=float, default=5.0, help="diagnose --window")
    parser.add_argument("--latency", type=float, default=0.05, help="seconds per answer")
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="llmdoctor-bench-") as tmp:
        kubeconfig = Path(tmp) / "kubeconfig"
        cluster = start_cluster(opts.pods, opts.latency, kubeconfig)
        env = {**os.environ, "KUBECONFIG": str(kubeconfig), "NO_COLOR": "1"}
        common = ["-n", "serving", "--json", "--window", str(opts.window)]
        one_pod: list[float] = []
        deploy: list[float] = []
        try:
            timed_run(["diagnose", "deploy/vllm-7b", *common], env)  # warm the disk caches
            for _ in range(opts.runs):  # interleaved, so machine noise hits both alike
                one_pod.append(timed_run(["diagnose", POD, *common], env)[0])
                deploy.append(timed_run(["diagnose", "deploy/vllm-7b", *common], env)[0])
        finally:
            cluster.stdin.close()
            cluster.wait(timeout=10)
    median_one, median_deploy = statistics.median(one_pod), statistics.median(deploy)
    print(
        f"window {opts.window:g}s, {opts.latency * 1000:.0f} ms per API/vLLM answer, "
        f"median of {opts.runs} runs (CLI end to end, fresh process each)"
    )
    print("| target | pods | wall time (s) | per pod (s) |")
    print("|---|---|---|---|")
    print(f"| {POD} | 1 | {median_one:.2f} | {median_one:.2f} |")
    print(
        f"| deploy/vllm-7b | {opts.pods} | {median_deploy:.2f} | {median_deploy / opts.pods:.2f} |"
    )
    print(
        f"deployment / one pod = {median_deploy / median_one:.2f}x "
        f"(one pod after another would be about {opts.pods}x)"
    )


if __name__ == "__main__":
    main()
