"""`llmdoctor collect TARGET -o FILE.tar.gz` — freeze the evidence into an incident bundle.

The work is llmdoctor.usecases.collect's.

Collects exactly what `diagnose` would (same collectors, same options) and writes it as an
llmdoctor-bundle/1, secrets redacted, so `diagnose --bundle FILE.tar.gz` later, or elsewhere,
gives the same findings. A deployment with several pods gives one bundle per pod.
"""

from __future__ import annotations

from typing import Annotated

import typer

from llmdoctor.commands import options as opt


@opt.grouped(kube=opt.KubeOptions, history=opt.PrometheusOptions)
def collect_command(
    target: opt.Target = None,
    output: Annotated[
        str, typer.Option("-o", "--output", help="The bundle to write: FILE.tar.gz or a folder.")
    ] = "",
    force: Annotated[
        bool,
        typer.Option(
            "--force", help="Replace an existing llmdoctor bundle (never any other file or folder)."
        ),
    ] = False,
    timeout: opt.Timeout = 10.0,
    model_config: Annotated[
        str | None,
        typer.Option("--model-config", help="Store this config.json as model/config.json."),
    ] = None,
    *,
    kube: opt.KubeOptions,
    history: opt.PrometheusOptions,
) -> None:
    """Collect a pod's (or deployment's) evidence into a redacted bundle for later diagnosis.

    Examples:

      llmdoctor collect pod/vllm-7b -n serving -o incident.tar.gz

      llmdoctor collect deploy/vllm -n serving -o incident.tar.gz   # one bundle per pod

      llmdoctor diagnose --bundle incident.tar.gz
    """
    from llmdoctor.commands.diagnose import collect_options
    from llmdoctor.usecases.collect import CollectRequest, collect

    request = CollectRequest(
        target,
        output,
        options=collect_options(kube, history),  # --prometheus: a prometheus/ folder
        timeout=timeout,
        force=force,
        model_config=model_config,
    )
    for bundle in collect(request):
        things = "thing" if bundle.gaps == 1 else "things"
        note = f"; {bundle.gaps} {things} could not be collected (see manifest.json)"
        typer.echo(
            f"wrote {bundle.path} ({bundle.target}: {bundle.documents} documents"
            f"{note if bundle.gaps else ''})"
        )
    raise typer.Exit(0)


def register(app: typer.Typer) -> None:
    app.command("collect")(collect_command)
