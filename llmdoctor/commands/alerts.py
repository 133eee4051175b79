"""`llmdoctor alerts` — Prometheus alerting rules that link each alert to its runbook entry."""

from __future__ import annotations

from typing import Annotated

import typer

from llmdoctor.commands import options as opt

FORMATS = ("prometheusrule", "rules")


def alerts_command(
    wiki_url: opt.WikiUrl = None,
    fmt: Annotated[
        str,
        typer.Option(
            "--format",
            help="prometheusrule (a prometheus-operator object) or rules (a Prometheus rules file).",
        ),
    ] = "prometheusrule",
    ttft_p95: Annotated[
        float,
        typer.Option(
            "--ttft-p95",
            min=0.001,
            callback=opt.finite,
            help="Seconds of p95 time to first token to alert on.",
        ),
    ] = 2.0,
    itl_p95: Annotated[
        float,
        typer.Option(
            "--itl-p95",
            min=0.001,
            callback=opt.finite,
            help="Seconds of p95 inter-token latency to alert on.",
        ),
    ] = 0.2,
    name: Annotated[
        str, typer.Option("--name", help="metadata.name of the PrometheusRule.")
    ] = "llmdoctor",
) -> None:
    """Print alerting rules for the failures the wiki covers and metrics can show; each carries
    its runbook entry id (label `runbook`) and page (annotation `runbook_url`).

    Examples:

      llmdoctor alerts --wiki-url https://wiki.example.com/llmdoctor | kubectl apply -n monitoring -f -

      llmdoctor alerts --wiki-url https://wiki.example.com/llmdoctor --format rules > llmdoctor.rules.yml
    """
    from llmdoctor.errors import BadInput
    from llmdoctor.fleet.alert_rules import build_rules, render
    from llmdoctor.wiki.links import wiki_url as current_wiki_url

    if fmt not in FORMATS:
        raise BadInput(f"--format {fmt}: expected one of {', '.join(FORMATS)}")
    base = current_wiki_url()
    if base is None:
        raise BadInput(
            "alerts needs the published wiki's address for runbook_url: --wiki-url URL or "
            "LLMDOCTOR_WIKI_URL (see `llmdoctor wiki site`)"
        )
    rules = build_rules(ttft_p95_seconds=ttft_p95, itl_p95_seconds=itl_p95)
    typer.echo(render(rules, base, fmt, name=name), nl=False)


def register(app: typer.Typer) -> None:
    app.command("alerts")(alerts_command)
