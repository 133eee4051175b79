"""`llmdoctor probe URL` — is one vLLM server healthy for its users, and if not, why?"""

from __future__ import annotations

from typing import Annotated

import typer

from llmdoctor import cli_options as opt


def probe_command(
    url: Annotated[str, typer.Argument(help="The vLLM server: http(s)://HOST:PORT")],
    window: Annotated[
        float,
        typer.Option(
            "--window", min=0.0, help="Seconds between the two /metrics scrapes (0: one scrape)."
        ),
    ] = 5.0,
    model: Annotated[
        str | None,
        typer.Option("--model", help="Served model name to probe (default: first in /v1/models)."),
    ] = None,
    chat: Annotated[
        bool, typer.Option("--chat", help="Probe /v1/chat/completions instead of /v1/completions.")
    ] = False,
    max_latency_ms: Annotated[
        float,
        typer.Option("--max-latency-ms", min=1.0, help="Slowest acceptable generation probe."),
    ] = 1000.0,
    tokenizer: Annotated[
        str | None,
        typer.Option(
            "--tokenizer", help="A local model folder whose tokenizer to check (offline)."
        ),
    ] = None,
    max_num_seqs: Annotated[
        int | None,
        typer.Option("--max-num-seqs", min=1, help="The server's --max-num-seqs, if not default."),
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
    """Check one vLLM endpoint: health, models, queue and KV cache from /metrics, a real
    generation, and optionally the tokenizer.

    Examples:

      llmdoctor probe http://vllm:8000

      llmdoctor probe http://vllm:8000 --model llama-3-8b --chat --max-latency-ms 2000

      llmdoctor probe http://localhost:8000 --tokenizer /models/Qwen2-7B-Instruct --json
    """
    from pathlib import Path

    from llmdoctor.diagnosis import gather
    from llmdoctor.errors import BadInput, BadTarget
    from llmdoctor.output import diagnose_and_exit
    from llmdoctor.runner import CollectContext
    from llmdoctor.target import parse_target

    target = parse_target(url)
    if target.kind != "http":
        raise BadTarget(f"probe takes an http(s)://HOST:PORT URL, not {url!r}")
    if tokenizer is not None and not Path(tokenizer).exists():
        raise BadInput(f"--tokenizer {tokenizer}: no such file or folder")
    options = {
        "window": window,
        "model": model,
        "chat": chat,
        "max_latency_ms": max_latency_ms,
        "tokenizer": tokenizer,
    }
    ctx = CollectContext(target=target, timeout=timeout, options=options)
    facts_list = gather(target, ctx)
    settings = {
        "max_latency_ms": max_latency_ms,
        "max_num_seqs": max_num_seqs,
        "model": model,
    }
    diagnose_and_exit(
        facts_list,
        str(target),
        scopes=("vllm",),
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
    app.command("probe")(probe_command)
