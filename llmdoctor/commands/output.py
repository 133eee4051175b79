"""Print a Report in the format the user asked for and turn it into the exit code."""

from __future__ import annotations

import os
import sys

from llmdoctor.exit_codes import ExitCode


def make_console(no_color: bool = False, stderr: bool = False):
    from rich.console import Console

    no_color = no_color or bool(os.environ.get("NO_COLOR"))
    stream = sys.stderr if stderr else sys.stdout
    try:
        on_terminal = bool(stream is not None and stream.isatty())
    except (AttributeError, ValueError):
        on_terminal = False
    return Console(
        no_color=no_color,
        highlight=False,
        # data is printed as written: ":ab:" in a PCI address 0000:ab:00.0 is no emoji
        emoji=False,
        stderr=stderr,
        color_system=None if no_color else "auto",
        # wrapped to the terminal's width on screen; in a pipe or file every line stays whole
        # (rich would wrap at 80 columns and split the headline a grep looks for)
        soft_wrap=not on_terminal,
    )


def emit(
    report, *, as_json: bool, as_markdown: bool, no_color: bool, verbose: bool, charts=None
) -> ExitCode:
    """Write the report to stdout; return its exit code (3 when nothing could be checked).

    `charts`: a folder for the SVG chart of the Prometheus history (linked from --markdown)."""
    from llmdoctor.render import report as render

    written = []
    if charts:
        from llmdoctor.timeline.charts import write_charts

        written = write_charts(report, charts)
        if not written:
            sys.stderr.write("llmdoctor: note: no Prometheus history to chart (--prometheus)\n")
    if as_json:
        sys.stdout.write(render.render_json(report) + "\n")
    elif as_markdown:
        sys.stdout.write(render.render_markdown(report, written) + "\n")
    else:
        render.render_terminal(report, make_console(no_color), verbose=verbose)
    code = render.exit_code(report)
    if code == ExitCode.CANNOT_RUN:
        reasons = sorted(
            {s["reason"] for s in report.skipped} | {e["message"] for e in report.errors}
        )
        detail = "; ".join(reasons[:3]) or "no checks selected"
        from llmdoctor.terminal_text import visible

        sys.stderr.write(f"llmdoctor: nothing could be checked: {visible(detail)}\n")
    return code


def diagnose_and_exit(
    facts_list,
    label: str,
    *,
    scopes: tuple[str, ...] | None = None,
    settings: dict | None = None,
    only=None,
    skip=None,
    wiki=None,
    checks_dir=None,
    as_json: bool = False,
    as_markdown: bool = False,
    no_color: bool = False,
    verbose: bool = False,
    timeout: float | None = None,
    charts: str | None = None,
):
    """Run the checks of `scopes` over the facts, print the report, exit with its code.

    The common tail of diagnose, node and probe. Each check gets `timeout` seconds; by
    default the --timeout the facts were gathered with.
    """
    import typer

    from llmdoctor.usecases.diagnose import ALL_SCOPES, diagnose

    report = diagnose(
        facts_list,
        label,
        scopes=scopes or ALL_SCOPES,
        only=only,
        skip=skip,
        wiki_dirs=wiki,
        settings=settings,
        checks_dirs=checks_dir,
        check_timeout=timeout,
    )
    code = emit(
        report,
        as_json=as_json,
        as_markdown=as_markdown,
        no_color=no_color,
        verbose=verbose,
        charts=charts,
    )
    raise typer.Exit(int(code))
