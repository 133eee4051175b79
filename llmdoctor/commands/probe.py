"""`llmdoctor probe URL` — is one vLLM server healthy for its users, and if not, why?"""

from __future__ import annotations

from typing import Annotated

import typer

from llmdoctor.commands import options as opt


@opt.grouped(probe=opt.ProbeOptions, history=opt.PrometheusOptions, report=opt.ReportOptions)
def probe_command(
    url: Annotated[str, typer.Argument(help="The vLLM server: http(s)://HOST:PORT")],
    window: opt.Window = None,
    tokenizer: Annotated[
        str | None,
        typer.Option(
            "--tokenizer", help="A local model folder whose tokenizer to check (offline)."
        ),
    ] = None,
    charts: opt.Charts = None,
    *,
    probe: opt.ProbeOptions,
    history: opt.PrometheusOptions,
    report: opt.ReportOptions,
) -> None:
    """Check one vLLM endpoint: health, models, queue and KV cache from /metrics, a real
    generation, and optionally the tokenizer.

    Examples:

      llmdoctor probe http://vllm:8000

      llmdoctor probe http://vllm:8000 --model llama-3-8b --chat --max-latency-ms 2000

      llmdoctor probe http://localhost:8000 --tokenizer /models/Qwen2-7B-Instruct --json
    """
    from pathlib import Path

    from llmdoctor.collectors.vllm_http import probe_base_url
    from llmdoctor.commands.output import diagnose_and_exit
    from llmdoctor.engine.collect import CollectContext
    from llmdoctor.engine.target import parse_target
    from llmdoctor.errors import BadInput, BadTarget
    from llmdoctor.usecases.diagnose import gather

    target = parse_target(url)
    if target.kind != "http":
        raise BadTarget(f"probe takes an http(s)://HOST:PORT URL, not {url!r}")
    base, note = probe_base_url(target.url)
    if note:
        typer.echo(f"llmdoctor: note: {note}", err=True)
        target = parse_target(base)
    if tokenizer is not None and not Path(tokenizer).exists():
        raise BadInput(f"--tokenizer {tokenizer}: no such file or folder")
    options = {
        "window": history.window(window),
        "tokenizer": tokenizer,
        **probe.collection(),
        **history.collection(),
    }
    ctx = CollectContext(target=target, timeout=report.timeout, options=options)
    facts_list = gather(target, ctx)
    diagnose_and_exit(
        facts_list,
        str(target),
        scopes=("vllm", "history"),
        settings=probe.settings(),
        charts=charts,
        **report.printing(),
    )


def register(app: typer.Typer) -> None:
    app.command("probe")(probe_command)
