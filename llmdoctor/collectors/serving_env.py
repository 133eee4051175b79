"""The serving interpreter's software stack (`node/versions.json`): torch, CUDA build, vLLM.

Runs llmdoctor/data/serving_env_probe.py with the serving environment's python (`--python
PATH`, default python3 on PATH) in a subprocess with a timeout. No torch is a fact, not a crash.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

from llmdoctor.collectors.command import run_command
from llmdoctor.engine.collect import CollectContext
from llmdoctor.engine.facts import Missing

PROBE = Path(__file__).resolve().parents[1] / "data" / "serving_env_probe.py"


def probe_script() -> str:
    """The probe's source, for running it elsewhere (e.g. `kubectl exec ... python3 -`)."""
    return PROBE.read_text(encoding="utf-8")


def parse_probe_output(stdout: str) -> dict[str, Any]:
    """The JSON object the probe printed (its last line that parses as an object)."""
    for line in reversed(stdout.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                doc = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(doc, dict):
                return doc
    raise ValueError("the probe printed no JSON object")


def collect_serving_env(ctx: CollectContext) -> dict[str, Any]:
    """node/versions.json from the serving python, or why it could not be read."""
    options = ctx.options or {}
    wanted = options.get("python") or "python3"
    python = shutil.which(wanted)
    if python is None:
        return {
            "node/versions.json": Missing(
                f"{wanted} not found; pass --python PATH of the serving environment's python"
            )
        }
    timeout = max(1.0, ctx.timeout - 0.5)
    try:
        proc = run_command([python, str(PROBE)], timeout)
    except subprocess.TimeoutExpired:
        return {
            "node/versions.json": Missing(
                f"{python} took more than {timeout:.0f}s to report torch/CUDA (importing torch "
                "or starting CUDA hung?); raise --timeout"
            )
        }
    except OSError as exc:
        return {"node/versions.json": Missing(f"cannot run {python}: {exc.strerror or exc}")}
    try:
        doc = parse_probe_output(proc.stdout)
    except ValueError:
        last = (proc.stderr.strip().splitlines() or [f"exit code {proc.returncode}"])[-1]
        return {"node/versions.json": Missing(f"{python} could not run the probe: {last}")}
    return {"node/versions.json": doc}
