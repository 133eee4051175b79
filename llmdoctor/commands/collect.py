"""`llmdoctor collect TARGET -o FILE.tar.gz` — freeze the evidence into an incident bundle.

Collects exactly what `diagnose` would (same collectors, same options) and writes it as an
llmdoctor-bundle/1, secrets redacted, so `diagnose --bundle FILE.tar.gz` later, or elsewhere,
gives the same findings. A deployment with several pods gives one bundle per pod.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from llmdoctor.commands import options as opt


def bundle_paths(output: str, pods: list[str]) -> list[Path]:
    """Where each pod's bundle goes: OUTPUT itself for one pod, OUTPUT-<pod>.tar.gz for several."""
    dest = Path(output)
    if len(pods) == 1:
        return [dest]
    name = dest.name
    suffix = next((s for s in (".tar.gz", ".tgz") if name.endswith(s)), "")
    stem = name[: len(name) - len(suffix)] if suffix else name
    return [dest.with_name(f"{stem}-{pod}{suffix}") for pod in pods]


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
    from llmdoctor.collectors.bundle import check_destination, write_bundle
    from llmdoctor.commands.diagnose import parse_live_target
    from llmdoctor.engine.collect import CollectContext
    from llmdoctor.errors import BadInput, BadTarget
    from llmdoctor.usecases.diagnose import gather

    if not output:
        raise BadInput("give the bundle to write with -o FILE.tar.gz")
    config = None
    if model_config:
        from llmdoctor.capacity.model_shape import load_model_config

        config = load_model_config(model_config)  # BadInput (exit 3) before anything is collected
    parsed = parse_live_target(target, kube.selector)
    if parsed.kind == "bundle":
        raise BadTarget("collect reads a live target, not a bundle")
    check_destination(output, force)  # before minutes of collection, not after
    options = {**kube.collection(), **history.collection()}  # --prometheus: prometheus/ folder
    options["window"] = history.window(kube.window)
    ctx = CollectContext(target=parsed, timeout=timeout, options=options)
    facts_list = gather(parsed, ctx)
    names = [str(f.get("target") or parsed).split("/", 1)[-1] for f in facts_list]
    paths = bundle_paths(output, names)
    for path in paths:  # every destination is checked before the first is written
        check_destination(path, force)
    for facts, path in zip(facts_list, paths, strict=True):
        if config is not None:
            facts.set("model/config.json", config)
        written = write_bundle(
            facts,
            path,
            target=str(facts.get("target") or parsed),
            namespace=facts.get("k8s/namespace"),
            force=force,
        )
        files = sum(1 for k, _ in facts.items() if "/" in k and "." in k.rsplit("/", 1)[-1])
        gaps = len(facts.missing()) + len(facts.collector_errors)
        note = f"; {gaps} things could not be collected (see manifest.json)" if gaps else ""
        typer.echo(f"wrote {written} ({facts.get('target')}: {files} documents{note})")
    raise typer.Exit(0)


def register(app: typer.Typer) -> None:
    app.command("collect")(collect_command)
