"""`llmdoctor explain [FILE|-]` — paste any log, get the runbook entries that explain it."""

from __future__ import annotations

from typing import Annotated

import typer

from llmdoctor.commands import options as opt
from llmdoctor.wiki.search_cli import MAX_LIMIT


def explain_command(
    file: Annotated[
        str,
        typer.Argument(help="A log, stack trace, dmesg or `kubectl describe` output; - for stdin."),
    ] = "-",
    as_json: opt.Json = False,
    limit: Annotated[
        int,
        typer.Option(
            "--limit",
            min=1,
            max=MAX_LIMIT,
            help=f"Show at most this many entries (1-{MAX_LIMIT}).",
        ),
    ] = 5,
    jobs: Annotated[
        int,
        typer.Option(
            "--jobs", min=0, help="Threads for a file of 64 MB or more (0 = one per CPU, up to 4)."
        ),
    ] = 1,
    no_color: opt.NoColor = False,
    wiki: opt.WikiDirs = None,
    wiki_url: opt.WikiUrl = None,
) -> None:
    """Which runbook entries explain a log, best first, each with a confidence.

    Signature hits, the wiki search of the lines that look wrong, the cause -> consequence
    table and recency make one ranking; root causes rank above the failures they explain (an
    Xid 79 above the EngineDeadError after it). When no entry is confident enough, it says so,
    shows the lines it read as errors, and points to `wiki add --from-log`.

    Exit codes: 0 no entry explains it, 1 warnings (or text-only guesses), 2 a critical entry
    matched by signature, 3 the input could not be read.

    Examples:

      llmdoctor explain crash.log

      kubectl logs vllm-0 --previous | llmdoctor explain -

      dmesg -T | llmdoctor explain - --json
    """
    from llmdoctor.commands.explain_cli import run_explain

    code = run_explain(file, as_json=as_json, limit=limit, jobs=jobs, no_color=no_color, wiki=wiki)
    raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    app.command("explain")(explain_command)
