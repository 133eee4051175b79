"""`llmdoctor wiki ...` — search, show, list, lint and index the runbook wiki (add: wiki_add.py,
site and serve: wiki_site.py).

Only typer is imported here; each command imports what it needs, so a warm `wiki search` loads
the sqlite3 module and nothing heavy (no yaml, markdown-it, sqlite-utils or rich).
"""

# no `from __future__ import annotations` here: typer would eval every annotation string on
# each run (~4 ms for these commands); real annotation objects are cheaper.

import os
from pathlib import Path
from typing import Annotated

import typer

from llmdoctor.commands import options as opt
from llmdoctor.wiki.search_cli import MAX_LIMIT

wiki_app = typer.Typer(
    help="The runbook wiki: symptom -> cause -> fix, searchable in English and Chinese.",
    no_args_is_help=True,
    rich_markup_mode=None,
)

TagOption = Annotated[str | None, typer.Option("--tag", help="Only entries with this tag.")]


@wiki_app.command("search")
def search_command(
    query: Annotated[
        list[str],
        typer.Argument(
            metavar="QUERY",
            help="Words, Chinese, or a whole pasted error message; '-' reads stdin.",
        ),
    ],
    tag: TagOption = None,
    limit: Annotated[
        int,
        typer.Option(
            "--limit", min=1, max=MAX_LIMIT, help=f"At most this many results (1-{MAX_LIMIT})."
        ),
    ] = 10,
    as_json: opt.Json = False,
    no_color: opt.NoColor = False,
    wiki: opt.WikiDirs = None,
    wiki_url: opt.WikiUrl = None,
) -> None:
    """Find runbook entries: words, Chinese terms or a pasted error message, best first.

    Examples:

    \b
      llmdoctor wiki search OOM
      llmdoctor wiki search 显存
      llmdoctor wiki search "CUDA out of memory. Tried to allocate 1.33 GiB"
      kubectl logs vllm-7b --previous | tail -50 | llmdoctor wiki search -
    """
    from llmdoctor.wiki.search_cli import run_search

    code = run_search(query, tag=tag, limit=limit, as_json=as_json, no_color=no_color, wiki=wiki)
    raise typer.Exit(code)


def _complete_runbook_id(incomplete: str) -> list:
    from llmdoctor.commands.shell_completion import complete_runbook_id

    return complete_runbook_id(incomplete)


@wiki_app.command("show")
def show_command(
    entry_id: Annotated[
        str,
        typer.Argument(
            metavar="ID",
            help="The entry id, e.g. cuda-oom-runtime.",
            autocompletion=_complete_runbook_id,
        ),
    ],
    as_json: opt.Json = False,
    no_color: opt.NoColor = False,
    wiki: opt.WikiDirs = None,
    wiki_url: opt.WikiUrl = None,
) -> None:
    """Show one entry: symptom, cause, fix, with its file (and what it overrides).

    Example:

    \b
      llmdoctor wiki show cuda-oom-runtime
    """
    from llmdoctor.errors import BadInput
    from llmdoctor.wiki.catalog import all_ids, find_entry
    from llmdoctor.wiki.entry import EntryError, parse_entry_file
    from llmdoctor.wiki.library import builtin_dir
    from llmdoctor.wiki.links import page_url

    record = find_entry(entry_id, wiki)
    if record is None:
        import difflib

        from llmdoctor.wiki.library import load_library

        for error in load_library(wiki).errors:  # the entry's file is there but unreadable
            if os.path.basename(error.path) == f"{entry_id}.md":
                raise BadInput(str(error))

        close = difflib.get_close_matches(entry_id, all_ids(wiki), n=3, cutoff=0.5)
        hint = f"did you mean: {', '.join(close)}?" if close else "try: llmdoctor wiki search WORDS"
        raise BadInput(f"no runbook entry {entry_id!r}; {hint}")
    try:
        entry = parse_entry_file(record.path)
    except (EntryError, OSError) as exc:
        raise BadInput(f"cannot read runbook entry {entry_id!r}: {exc}") from None
    if wiki:  # a team file of this id that was refused: say so, not show another silently
        from llmdoctor.terminal_text import visible
        from llmdoctor.wiki.library import load_library

        for error in load_library(wiki).errors:
            if os.path.basename(error.path) == f"{entry_id}.md":
                shown = visible(f"{error} (shown instead: {record.path})")
                typer.echo(f"llmdoctor: warning: {shown}", err=True)
    builtin = str(builtin_dir().resolve())
    is_builtin = str(os.path.realpath(record.path)).startswith(builtin + os.sep)
    overridden_builtin = [
        p for p in record.overrides if os.path.realpath(p).startswith(builtin + os.sep)
    ]
    if as_json:
        import json

        data = {
            "id": entry.id,
            "title": entry.title,
            "severity": entry.severity,
            "tags": entry.tags,
            "aliases": entry.aliases,
            "signatures": entry.signatures,
            "hints": entry.hints,
            "detected_by": entry.detected_by,
            "symptom": entry.symptom,
            "cause": entry.cause,
            "fix": entry.fix,
            "verify": entry.verify,
            "references": entry.references,
            "path": record.path,
            "builtin": is_builtin,
            "overrides": record.overrides,
        }
        if url := page_url(entry.id):
            data["url"] = url
        typer.echo(json.dumps(data, ensure_ascii=False, indent=2))
        raise typer.Exit(0)
    _render_entry(entry, record, is_builtin, overridden_builtin, no_color)
    if url := page_url(entry.id):
        typer.echo(f"page: {url}")
    raise typer.Exit(0)


def _render_entry(entry, record, is_builtin: bool, overridden_builtin: list[str], no_color: bool):
    from rich.console import Console
    from rich.markdown import Markdown
    from rich.text import Text

    from llmdoctor.terminal_text import visible

    console = Console(no_color=no_color or "NO_COLOR" in os.environ, highlight=False, emoji=False)
    style = {"critical": "bold red", "warning": "bold yellow"}.get(entry.severity, "bold blue")
    head = Text()
    head.append(visible(entry.title), style="bold")
    head.append(f"  [{visible(entry.severity)}]", style=style)
    console.print(head)
    facts = [("id", entry.id), ("file", record.path + ("  (built-in)" if is_builtin else ""))]
    if overridden_builtin:
        facts.append(("overrides", f"the built-in entry {overridden_builtin[-1]}"))
    elif record.overrides:
        facts.append(("overrides", ", ".join(record.overrides)))
    if entry.tags:
        facts.append(("tags", ", ".join(entry.tags)))
    if entry.aliases:
        facts.append(("aliases", ", ".join(entry.aliases)))
    if entry.detected_by:
        facts.append(("detected by", ", ".join(entry.detected_by)))
    for name, value in facts:
        line = Text(f"{name:>12}: ", style="dim")
        line.append(visible(value))
        console.print(line, soft_wrap=True)  # paths and regexes stay whole, copyable
    for name, patterns in (("signature", entry.signatures), ("hint (weak)", entry.hints)):
        for signature in patterns:
            line = Text(f"{name:>12}: ", style="dim")
            line.append(visible(signature), style="cyan")
            console.print(line, soft_wrap=True)
    console.print()
    from llmdoctor.wiki.fix_params import fill

    body = entry.body.replace(entry.fix, fill(entry.fix)) if entry.fix else entry.body
    body = "\n".join(visible(line) for line in body.split("\n"))
    console.print(Markdown(body, code_theme="ansi_dark", justify="left"))


@wiki_app.command("list")
def list_command(
    tag: TagOption = None,
    as_json: opt.Json = False,
    wiki: opt.WikiDirs = None,
    wiki_url: opt.WikiUrl = None,
) -> None:
    """List every entry (team entries override built-in ones with the same id)."""
    from llmdoctor.wiki.catalog import list_entries
    from llmdoctor.wiki.links import page_url

    entries = list_entries(tag, wiki)
    if as_json:
        import json

        rows = [e.to_json() for e in entries]
        for row in rows:
            if url := page_url(row["id"]):
                row["url"] = url
        typer.echo(json.dumps({"entries": rows}, ensure_ascii=False))
        raise typer.Exit(0)
    width = max((len(e.id) for e in entries), default=0)
    from llmdoctor.terminal_text import visible

    for e in entries:
        note = "  (overrides a built-in entry)" if e.overrides else ""
        url = page_url(e.id)
        page = f"  {url}" if url else ""
        typer.echo(visible(f"{e.id:<{width}}  {e.severity:<8}  {e.title}{note}{page}"))
    typer.echo(f"{len(entries)} entries" + (f" tagged {tag!r}" if tag else ""), err=True)
    raise typer.Exit(0)


@wiki_app.command("lint")
def lint_command(
    paths: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="[DIR|FILE]...",
            help="Folders or entry files; default: the built-in folder and the configured wikis.",
        ),
    ] = None,
    as_json: opt.Json = False,
    wiki: opt.WikiDirs = None,
) -> None:
    """Check entries: front matter, sections, ids, signatures. Exit 1 on any error.

    Examples:

    \b
      llmdoctor wiki lint runbooks/
      llmdoctor wiki lint                 # built-in + LLMDOCTOR_WIKI + --wiki folders
    """
    from llmdoctor.errors import BadInput
    from llmdoctor.wiki.library import wiki_dirs
    from llmdoctor.wiki.lint import lint_paths

    if paths:
        targets = [Path(p) for p in paths]
        for t in targets:
            if not t.exists():
                raise BadInput(f"{t}: no such file or folder")
    else:
        targets = [Path(d) for d in wiki_dirs(wiki) if Path(d).is_dir()]
    report = lint_paths(targets)
    if as_json:
        import json

        data = {
            "ok": report.ok,
            "files": report.files,
            "problems": [p.to_json() for p in report.problems],
            "notes": [p.to_json() for p in report.notes],
        }
        typer.echo(json.dumps(data, ensure_ascii=False))
        raise typer.Exit(0 if report.ok else 1)
    for problem in sorted(report.problems + report.notes, key=lambda p: (p.file, p.line)):
        typer.echo(str(problem))
    count = len(report.problems)
    summary = f"{report.files} files checked: " + (
        "no problems" if report.ok else f"{count} problem{'s' if count != 1 else ''}"
    )
    typer.echo(summary, err=True)
    raise typer.Exit(0 if report.ok else 1)


@wiki_app.command("index")
def index_command(
    rebuild: Annotated[bool, typer.Option("--rebuild", help="Rebuild from scratch.")] = False,
    as_json: opt.Json = False,
    wiki: opt.WikiDirs = None,
) -> None:
    """Refresh the search index (normally automatic) and show where it lives."""
    import time

    from llmdoctor.wiki.catalog import summarize_index

    started = time.perf_counter()
    summary = summarize_index(wiki, rebuild=rebuild)
    elapsed = time.perf_counter() - started
    if as_json:
        import json

        data = summary.to_json() | {"seconds": round(elapsed, 3)}
        typer.echo(json.dumps(data, ensure_ascii=False))
        raise typer.Exit(0)
    typer.echo(f"index: {summary.path}")
    folders = f"{len(summary.dirs)} folder{'s' if len(summary.dirs) != 1 else ''}"
    typer.echo(
        f"{summary.entries} entries from {summary.files} files in {folders} ({elapsed:.2f} s)"
    )
    for folder in summary.dirs:
        typer.echo(f"  {folder}")
    for file, error in summary.problems:
        typer.echo(f"{file}:{error}")
    if summary.problems:
        typer.echo("some files were skipped; run: llmdoctor wiki lint", err=True)
    raise typer.Exit(0)


def register(app: typer.Typer) -> None:
    from llmdoctor.commands import wiki_add, wiki_site

    wiki_add.register(wiki_app)
    wiki_site.register(wiki_app)
    app.add_typer(wiki_app, name="wiki")
