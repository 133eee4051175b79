"""Benchmark: `llmdoctor probe` against a port that accepts and never answers ends near --timeout.

The target (tests/vllm_server.py's SilentServer, 127.0.0.1) accepts TCP connections and never
sends a byte. The CLI runs end to end in a fresh process, as a user runs it; the interpreter's
start-up (timed with `llmdoctor probe --help`) is reported apart, so the figure is the probe's
own time. Target: the probe's own time under --timeout + 1 s.

    .venv/bin/python benchmarks/probe_silent_port.py              # --timeout 2, 5 runs
    .venv/bin/python benchmarks/probe_silent_port.py --timeout 5 --runs 3
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
LLMDOCTOR = [sys.executable, "-m", "llmdoctor"]


def timed(argv: list[str]) -> tuple[float, int]:
    start = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    return time.monotonic() - start, proc.returncode


def main() -> None:
    from vllm_server import SilentServer

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=2.0, help="probe --timeout")
    parser.add_argument("--runs", type=int, default=5)
    opts = parser.parse_args()
    startup = statistics.median(timed([*LLMDOCTOR, "probe", "--help"])[0] for _ in range(3))
    totals, codes = [], set()
    with SilentServer() as srv:
        argv = [*LLMDOCTOR, "probe", srv.url, "--timeout", str(opts.timeout), "--window", "0.1"]
        for _ in range(opts.runs):
            seconds, code = timed([*argv, "--json"])
            totals.append(seconds)
            codes.add(code)
    own = [t - startup for t in totals]
    print(f"--timeout {opts.timeout:g}s, {opts.runs} runs, interpreter start-up {startup:.2f}s")
    print("| | min (s) | median (s) | max (s) |")
    print("|---|---|---|---|")
    print(
        f"| whole command | {min(totals):.2f} | {statistics.median(totals):.2f} | {max(totals):.2f} |"
    )
    print(f"| probe's own time | {min(own):.2f} | {statistics.median(own):.2f} | {max(own):.2f} |")
    verdict = "met" if max(own) < opts.timeout + 1 else "MISSED"
    print(
        f"target (own time < --timeout + 1 s = {opts.timeout + 1:g}s): {verdict}; exit codes {sorted(codes)}"
    )


if __name__ == "__main__":
    main()
