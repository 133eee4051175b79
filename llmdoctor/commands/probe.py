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
    from llmdoctor.commands.output import emit_and_exit
    from llmdoctor.usecases.probe import ProbeRequest, diagnose_request, probe_target

    _, note = probe_target(url)
    if note:
        typer.echo(f"llmdoctor: note: {note}", err=True)
    request = ProbeRequest(
        url,
        window=history.window(window),
        tokenizer=tokenizer,
        **probe.request_fields(),
        history=history.collection(),
        **report.selection(),
    )
    emit_and_exit(diagnose_request(request), report, charts)


def register(app: typer.Typer) -> None:
    app.command("probe")(probe_command)
