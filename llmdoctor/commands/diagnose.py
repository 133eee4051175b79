"""`llmdoctor diagnose TARGET` — the headline command: collect everything, run every check."""

from __future__ import annotations

from typing import Annotated

import typer

from llmdoctor import cli_options as opt


def diagnose_command(
    target: opt.Target = None,
    bundle: Annotated[
        str | None, typer.Option("--bundle", help="Diagnose a saved bundle (folder or .tar.gz).")
    ] = None,
    namespace: opt.Namespace = None,
    context: opt.KubeContext = None,
    selector: opt.Selector = None,
    port: opt.Port = None,
    tail: opt.Tail = 2000,
    no_exec: opt.NoExec = False,
    window: opt.Window = 5.0,
    model_config: Annotated[
        str | None,
        typer.Option("--model-config", help="The model's config.json, for the KV cache fit check."),
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
    """Find what is wrong with a vLLM pod, deployment, node, endpoint or saved bundle.

    Examples:

      llmdoctor diagnose pod/vllm-7b -n serving

      llmdoctor diagnose deploy/vllm -n serving --json

      llmdoctor diagnose --bundle examples/bundles/crashloop-cuda-oom
    """
    from llmdoctor.diagnosis import gather
    from llmdoctor.output import diagnose_and_exit
    from llmdoctor.runner import CollectContext

    parsed = parse_live_target(target, selector, bundle)
    options = {
        "namespace": namespace,
        "context": context,
        "selector": selector,
        "port": port,
        "tail": tail,
        "no_exec": no_exec,
        "window": window,
    }
    ctx = CollectContext(target=parsed, timeout=timeout, options=options)
    facts_list = gather(parsed, ctx)
    settings = {"model_config_path": model_config}
    label = _label(parsed, facts_list)
    if parsed.kind == "bundle":
        label = f"{facts_list[0].get('target')} (bundle {parsed.name})"
    diagnose_and_exit(
        facts_list,
        label,
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


def parse_live_target(target: str | None, selector: str | None, bundle: str | None = None):
    """The Target to diagnose or collect; `-l SELECTOR` stands for the pods it matches."""
    from llmdoctor.errors import BadTarget
    from llmdoctor.target import Target, parse_target

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
