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
    from llmdoctor.commands.output import diagnose_and_exit
    from llmdoctor.engine.collect import CollectContext
    from llmdoctor.gpus.xid_policy import policy_from_option
    from llmdoctor.usecases.diagnose import gather

    xid_policy = policy_from_option(None)  # LLMDOCTOR_XID_POLICY, checked before collecting
    parsed = parse_live_target(target, kube.selector, bundle)
    settings = {
        "model_config_path": model_config,
        "xid_policy": xid_policy,
        **probe.settings(),
        **gpu.settings(),
    }
    if bundle and history.prometheus:
        typer.echo(
            "llmdoctor: note: --prometheus is not read with --bundle (its prometheus/ is)", err=True
        )
    options = {**kube.collection(), **probe.collection(), **history.collection()}
    options["window"] = history.window(kube.window)
    ctx = CollectContext(target=parsed, timeout=report.timeout, options=options)
    facts_list = gather(parsed, ctx)
    label = _label(parsed, facts_list)
    if parsed.kind == "bundle":
        label = f"{facts_list[0].get('target')} (bundle {parsed.name})"
    diagnose_and_exit(facts_list, label, settings=settings, charts=charts, **report.printing())


def parse_live_target(target: str | None, selector: str | None, bundle: str | None = None):
    """The Target to diagnose or collect; `-l SELECTOR` stands for the pods it matches."""
    from llmdoctor.engine.target import Target, parse_target
    from llmdoctor.errors import BadTarget

    if selector:
        if target or bundle:
            raise BadTarget("give either a target or -l SELECTOR, not both")
        return Target("selector", name=selector)
    return parse_target(target, bundle)


def _label(parsed, facts_list) -> str:
    """The report's name for a live Kubernetes target: pod/x -n ns, pods -l app=x -n ns."""
    namespace = facts_list[0].get("k8s/namespace") if facts_list else None
    where = f" -n {namespace}" if namespace else ""
    if parsed.kind == "selector":
        return f"pods -l {parsed.name}{where}"
    return f"{parsed}{where}"


def register(app: typer.Typer) -> None:
    app.command("diagnose")(diagnose_command)
