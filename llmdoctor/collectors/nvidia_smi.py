"""`nvidia-smi -q -x` (`node/nvidia-smi.xml`): from `--nvidia-smi-xml FILE`, else run live."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

from llmdoctor.collectors.command import run_command
from llmdoctor.engine.collect import CollectContext
from llmdoctor.engine.facts import Missing

MAX_XML_BYTES = 64 * 1024 * 1024


def collect_nvidia_smi(ctx: CollectContext) -> dict[str, Any]:
    """The XML document, or why there is none (the NVML collector usually has the same facts)."""
    given = (ctx.options or {}).get("nvidia_smi_xml")
    if given:
        path = Path(given)
        if path.stat().st_size > MAX_XML_BYTES:
            return {"node/nvidia-smi.xml": Missing(f"{path}: larger than 64 MiB")}
        return {"node/nvidia-smi.xml": path.read_text(encoding="utf-8", errors="replace")}
    binary = shutil.which("nvidia-smi")
    if binary is None:
        return {"node/nvidia-smi.xml": Missing("nvidia-smi not found on PATH")}
    timeout = max(1.0, ctx.timeout - 0.5)
    try:
        proc = run_command([binary, "-q", "-x"], timeout)
    except subprocess.TimeoutExpired:
        return {
            "node/nvidia-smi.xml": Missing(
                f"nvidia-smi -q -x did not answer in {timeout:.0f}s (a GPU that hangs the driver?)"
            )
        }
    except OSError as exc:
        return {"node/nvidia-smi.xml": Missing(f"cannot run nvidia-smi: {exc.strerror or exc}")}
    if proc.returncode != 0 or "<nvidia_smi_log" not in proc.stdout:
        said = proc.stdout.strip() or proc.stderr.strip() or f"exit code {proc.returncode}"
        return {"node/nvidia-smi.xml": Missing(f"nvidia-smi failed: {said.splitlines()[0]}")}
    return {"node/nvidia-smi.xml": proc.stdout}
