"""Whether `llmdoctor explain --json` answers the same from this tree and another checkout.

A speed change to explain must not change a byte of what it says. This runs the command (the
CLI path, in one process per tree) on the real-vLLM captures, the healthy fixtures and every
explain corpus excerpt, plus any logs named with --log, from this tree and from BEFORE (e.g.
`git archive 89cd18a | tar -x -C /tmp/before`), and compares stdout, stderr and exit code.

    .venv/bin/python benchmarks/explain_same_outputs.py /tmp/before
    .venv/bin/python benchmarks/explain_same_outputs.py /tmp/before --log /tmp/big.log
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"

# run inside each tree: every file through the CLI, one JSON line each (odd files --limit 100)
RUNNER = """
import contextlib, io, json, sys
sys.path.insert(0, ".")
from llmdoctor import cli
for n, path in enumerate(json.load(sys.stdin)):
    out, err, code = io.StringIO(), io.StringIO(), None
    args = ["explain", "--json", *(["--limit", "100"] if n % 2 else []), path]
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            cli.run(args)
        except SystemExit as done:
            code = done.code
    print(json.dumps([path, code, err.getvalue(), out.getvalue()]), flush=True)
"""


def fixture_logs() -> list[str]:
    logs = sorted(FIXTURES.glob("real-vllm-0.32/*/server.log"))
    logs += sorted(p for p in (FIXTURES / "healthy").iterdir() if p.suffix != ".md")
    logs += sorted((FIXTURES / "explain_corpus").rglob("*.log"))
    return [str(p) for p in logs]


def answers(tree: Path, logs: list[str]) -> list[list]:
    done = subprocess.run(
        [sys.executable, "-c", RUNNER],
        input=json.dumps(logs),
        capture_output=True,
        text=True,
        cwd=tree,
        check=True,
    )
    return [json.loads(line) for line in done.stdout.splitlines()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path, help="the other checkout")
    parser.add_argument("--log", action="append", default=[], help="one more log to compare")
    args = parser.parse_args(argv)
    logs = fixture_logs() + [str(Path(p).resolve()) for p in args.log]
    before, after = answers(args.before.resolve(), logs), answers(ROOT, logs)
    differ = [b[0] for b, a in zip(before, after, strict=True) if b != a]
    for path in differ:
        print(f"differs: {path}")
    print(f"{len(logs) - len(differ)} of {len(logs)} answers identical")
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
