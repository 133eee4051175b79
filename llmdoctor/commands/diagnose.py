"""`llmdoctor diagnose TARGET` — the headline command: collect everything, run every check."""

from __future__ import annotations

from typing import Annotated

import typer

from llmdoctor.commands import options as opt


@opt.grouped(
    kube=opt.KubeOptions,
    probe=opt.ProbeOptions,
    gpu=opt.GpuOptions,
    history=opt.PrometheusOptions,
    report=opt.ReportOptions,
)
def diagnose_command(
    target: opt.Target = None,
    bundle: Annotated[
        str | None, typer.Option("--bundle", help="Diagnose a saved bundle (folder or .tar.gz).")
    ] = None,
    model_config: Annotated[
        str | None,
        typer.Option("--model-config", help="The model's config.json, for the KV cache fit check."),
    ] = None,
    charts: opt.Charts = None,
    *,
    kube: opt.KubeOptions,
    probe: opt.ProbeOptions,
    gpu: opt.GpuOptions,
    history: opt.PrometheusOptions,
    report: opt.ReportOptions,
) -> None:
    """Find what is wrong with a vLLM pod, deployment, node, endpoint or saved bundle.

    Examples:

      llmdoctor diagnose pod/vllm-7b -n serving

      llmdoctor diagnose deploy/vllm -n serving --json

      llmdoctor diagnose --bundle examples/bundles/crashloop-cuda-oom
    """
    from llmdoctor.commands.output import emit_and_exit
    from llmdoctor.gpus.xid_policy import policy_from_option
    from llmdoctor.usecases.diagnose import CheckSettings, DiagnoseRequest, live_target

    xid_policy = policy_from_option(None)  # LLMDOCTOR_XID_POLICY, checked before collecting
    parsed = live_target(target, kube.selector, bundle)
    settings = CheckSettings(
        model_config_path=model_config, xid_policy=xid_policy, **probe.settings(), **gpu.settings()
    )
    if bundle and history.prometheus:
        typer.echo(
            "llmdoctor: note: --prometheus is not read with --bundle (its prometheus/ is)", err=True
        )
    if bundle and kube.window is not None:
        typer.echo(
            "llmdoctor: note: --window has no effect with --bundle (its scrapes were taken when "
            "it was collected)",
            err=True,
        )
    request = DiagnoseRequest(
        parsed,
        options=collect_options(kube, history, probe),
        settings=settings,
        **report.selection(),
    )
    emit_and_exit(request, report, charts)


def collect_options(kube, history, probe=None):
    """The collectors' options from the command's option blocks (diagnose, collect)."""
    from llmdoctor.engine.collect import CollectOptions

    values = {**kube.collection(), **(probe.collection() if probe else {}), **history.collection()}
    values["window"] = history.window(kube.window)
    return CollectOptions.of(values)


def register(app: typer.Typer) -> None:
    app.command("diagnose")(diagnose_command)
