"""`llmdoctor node` — is this GPU machine fit to serve, and if not, why?"""

from __future__ import annotations

import re
from typing import Annotated

import typer

from llmdoctor import cli_options as opt

SCOPES = ("node", "logs")
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")
_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str) -> float:
    """'24h' -> 86400.0; '90m', '7d', '3600s', '3600' also work. BadInput otherwise."""
    from llmdoctor.errors import BadInput

    m = _DURATION.match(text or "")
    if not m or float(m.group(1)) <= 0:
        raise BadInput(f"--since {text!r}: expected a duration such as 24h, 90m, 7d")
    return float(m.group(1)) * _SECONDS[m.group(2)]


def _existing_file(option: str, path: str | None) -> str | None:
    from pathlib import Path

    from llmdoctor.errors import BadInput

    if path is not None and not Path(path).is_file():
        raise BadInput(f"{option} {path}: no such file")
    return path


def node_command(
    python: Annotated[
        str | None,
        typer.Option(
            "--python", help="The serving environment's python (default: python3 on PATH)."
        ),
    ] = None,
    nvidia_smi_xml: Annotated[
        str | None,
        typer.Option("--nvidia-smi-xml", help="Read `nvidia-smi -q -x` output from this file."),
    ] = None,
    kernel_log: Annotated[
        str | None,
        typer.Option("--kernel-log", help="Read the kernel log from this file (dmesg/journal)."),
    ] = None,
    since: Annotated[
        str | None,
        typer.Option("--since", help="Kernel log window, e.g. 24h, 90m, 7d (live default 24h)."),
    ] = None,
    gpu_memory_utilization: Annotated[
        float | None,
        typer.Option(
            "--gpu-memory-utilization",
            help="vLLM's --gpu-memory-utilization to check against free memory (default 0.9).",
        ),
    ] = None,
    dtype: Annotated[
        str | None, typer.Option("--dtype", help="vLLM's --dtype, checked against the GPU.")
    ] = None,
    quantization: Annotated[
        str | None,
        typer.Option("--quantization", help="vLLM's --quantization, checked against the GPU."),
    ] = None,
    bundle: Annotated[
        str | None,
        typer.Option("--bundle", help="Check the node facts of a saved bundle instead."),
    ] = None,
    as_json: opt.Json = False,
    as_markdown: opt.Markdown = False,
    no_color: opt.NoColor = False,
    timeout: opt.Timeout = 10.0,
    only: opt.Only = None,
    skip: opt.Skip = None,
    verbose: opt.Verbose = False,
    checks_dir: opt.ChecksDir = None,
    wiki: opt.WikiDirs = None,
    wiki_url: opt.WikiUrl = None,
) -> None:
    """Check this GPU node: driver/CUDA/torch match, GPU memory, Xid errors, GPU health.

    Run it on the node (or inside the serving container). Examples:

      llmdoctor node

      llmdoctor node --python /opt/venv/bin/python --gpu-memory-utilization 0.95

      llmdoctor node --nvidia-smi-xml smi.xml --kernel-log dmesg.txt --json

      llmdoctor node --bundle examples/bundles/xid79-gpu-fallen-off-bus
    """
    from llmdoctor.diagnosis import gather
    from llmdoctor.errors import BadInput
    from llmdoctor.output import diagnose_and_exit
    from llmdoctor.runner import CollectContext
    from llmdoctor.target import Target

    if gpu_memory_utilization is not None and not 0 < gpu_memory_utilization <= 1:
        raise BadInput(
            f"--gpu-memory-utilization {gpu_memory_utilization}: expected a fraction in (0, 1]"
        )
    if python is not None:
        import shutil

        if shutil.which(python) is None:
            raise BadInput(f"--python {python}: not found or not executable")
    options = {
        "python": python,
        "nvidia_smi_xml": _existing_file("--nvidia-smi-xml", nvidia_smi_xml),
        "kernel_log": _existing_file("--kernel-log", kernel_log),
        "since_seconds": parse_duration(since) if since is not None else None,
    }
    target = Target("bundle", name=bundle) if bundle else Target("node")
    ctx = CollectContext(target=target, timeout=timeout, options=options)
    facts_list = gather(target, ctx)
    settings = {
        "gpu_memory_utilization": gpu_memory_utilization,
        "dtype": dtype,
        "quantization": quantization,
    }
    diagnose_and_exit(
        facts_list,
        "node" if not bundle else f"bundle {bundle}",
        scopes=SCOPES,
        settings=settings,
        only=only,
        skip=skip,
        wiki=wiki,
        checks_dir=checks_dir,
        as_json=as_json,
        as_markdown=as_markdown,
        no_color=no_color,
        verbose=verbose,
    )


def register(app: typer.Typer) -> None:
    app.command("node")(node_command)
