"""`llmdoctor wiki ...` — search, show, list, add, lint and index the runbook wiki.

Only typer is imported here; each command imports what it needs, so a warm `wiki search` loads
the sqlite3 module and nothing heavy (no yaml, markdown-it, sqlite-utils or rich).
"""

# no `from __future__ import annotations` here: typer would eval every annotation string on
# each run (~4 ms for these commands); real annotation objects are cheaper.

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from llmdoctor import cli_options as opt

wiki_app = typer.Typer(
    help="The runbook wiki: symptom -> cause -> fix, searchable in English and Chinese.",
    no_args_is_help=True,
    rich_markup_mode=None,
)

TagOption = Annotated[str | None, typer.Option("--tag", help="Only entries with this tag.")]


MAX_ENTRY_CHARS = 1024 * 1024  # `wiki add --from-file`: an entry is a page, not a log


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
    limit: Annotated[int, typer.Option("--limit", min=1, help="At most this many results.")] = 10,
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
    from llmdoctor.completion import complete_runbook_id

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

        close = difflib.get_close_matches(entry_id, all_ids(wiki), n=3, cutoff=0.5)
        hint = f"did you mean: {', '.join(close)}?" if close else "try: llmdoctor wiki search WORDS"
        raise BadInput(f"no runbook entry {entry_id!r}; {hint}")
    try:
        entry = parse_entry_file(record.path)
    except (EntryError, OSError) as exc:
        raise BadInput(f"cannot read runbook entry {entry_id!r}: {exc}") from None
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

    console = Console(no_color=no_color or "NO_COLOR" in os.environ, highlight=False)
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
    for signature in entry.signatures:
        line = Text(f"{'signature':>12}: ", style="dim")
        line.append(visible(signature), style="cyan")
        console.print(line, soft_wrap=True)
    console.print()
    body = "\n".join(visible(line) for line in entry.body.split("\n"))
    console.print(Markdown(body, code_theme="ansi_dark", justify="left"))


@wiki_app.command("list")
def list_command(
    tag: TagOption = None,
    as_json: opt.Json = False,
    wiki: opt.WikiDirs = None,
) -> None:
    """List every entry (team entries override built-in ones with the same id)."""
    from llmdoctor.wiki.catalog import list_entries

    entries = list_entries(tag, wiki)
    if as_json:
        import json

        typer.echo(json.dumps({"entries": [e.to_json() for e in entries]}, ensure_ascii=False))
        raise typer.Exit(0)
    width = max((len(e.id) for e in entries), default=0)
    from llmdoctor.terminal_text import visible

    for e in entries:
        note = "  (overrides a built-in entry)" if e.overrides else ""
        typer.echo(visible(f"{e.id:<{width}}  {e.severity:<8}  {e.title}{note}"))
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


ListOption = list[str] | None


@wiki_app.command("add")
def add_command(
    entry_id: Annotated[str | None, typer.Option("--id", help="Entry id = file name.")] = None,
    title: Annotated[str | None, typer.Option("--title", help="One-line title.")] = None,
    severity: Annotated[
        str | None, typer.Option("--severity", help="info, warning or critical.")
    ] = None,
    tags: Annotated[ListOption, typer.Option("--tag", help="A tag (repeatable, or a,b).")] = None,
    aliases: Annotated[
        ListOption, typer.Option("--alias", help="Another search word, any language (repeatable).")
    ] = None,
    signatures: Annotated[
        ListOption,
        typer.Option("--signature", help="A Python regex for one log line (repeatable)."),
    ] = None,
    detected_by: Annotated[
        ListOption, typer.Option("--detected-by", help="A check id that finds this (repeatable).")
    ] = None,
    symptom: Annotated[str | None, typer.Option("--symptom", help="What the on-call sees.")] = None,
    cause: Annotated[str | None, typer.Option("--cause", help="Why it happens.")] = None,
    fix: Annotated[str | None, typer.Option("--fix", help="What to do, concretely.")] = None,
    verify: Annotated[str | None, typer.Option("--verify", help="How to know it worked.")] = None,
    from_file: Annotated[
        str | None, typer.Option("--from-file", help="A complete entry file ('-' = stdin).")
    ] = None,
    editor: Annotated[
        bool, typer.Option("--editor", help="Write the entry in $EDITOR, from a filled template.")
    ] = False,
    from_log: Annotated[
        str | None,
        typer.Option("--from-log", help="Pre-fill from an incident log or bundle explain missed."),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing entry file.")] = False,
    as_json: opt.Json = False,
    wiki: opt.WikiDirs = None,
) -> None:
    """Record a lesson after a retro: a new entry in the team's wiki folder.

    Asks for each field unless given by flags; --editor opens $EDITOR on a template;
    --from-file takes a whole entry. Validates like `wiki lint` before writing; on a problem
    the draft is kept and its path printed. Writes to the first --wiki folder, else the first
    LLMDOCTOR_WIKI folder.

    Examples:

    \b
      llmdoctor wiki add --wiki ~/team-runbooks
      llmdoctor wiki add --wiki ~/team-runbooks --editor
      llmdoctor wiki add --wiki ~/team-runbooks --from-file lesson.md
      llmdoctor wiki add --wiki ~/team-runbooks --from-log incident.log --editor
      llmdoctor wiki add --wiki ~/team-runbooks --id redis-timeout \\
        --title "Gateway times out on Redis" --severity warning --tag gateway \\
        --symptom "..." --cause "..." --fix "..."
    """
    from llmdoctor.wiki.authoring import EntryDraft, render_entry, target_folder

    folder = target_folder(wiki)  # before any prompt: a missing folder must not waste typing
    given = {
        "entry_id": entry_id,
        "title": title,
        "severity": severity,
        "tags": tags,
        "aliases": aliases,
        "signatures": signatures,
        "detected_by": detected_by,
        "symptom": symptom,
        "cause": cause,
        "fix": fix,
        "verify": verify,
    }
    log_draft = None
    if from_log:
        from llmdoctor.wiki.from_log import prefill

        log_draft = prefill(from_log, given, wiki)
    draft: EntryDraft | None = None
    source: Path | None = None  # the file the text came from, if any: it is the draft
    if from_file:
        source = None if from_file == "-" else Path(from_file)
        text = _read_entry_file(from_file)
    elif editor:
        source = _edit_template(_draft_from_flags(given))
        text = source.read_text(encoding="utf-8")
    else:
        draft = _draft_from_flags(given)
        if not all([draft.id, draft.title, draft.symptom, draft.cause, draft.fix]):
            _ask_missing(draft, given=given, folder=folder, force=force)
        text = render_entry(draft)
    try:
        _write_validated(text, draft, folder, force, source, as_json, wiki)
    except typer.Exit as done:
        if log_draft is not None and done.exit_code == 0:
            log_draft.keep_examples(folder, text)
        raise


def _split(values: list[str] | None) -> list[str]:
    from llmdoctor.wiki.authoring import split_list

    return [item for value in values or [] for item in split_list(value)]


def _draft_from_flags(given: dict):
    from llmdoctor.wiki.authoring import EntryDraft

    return EntryDraft(
        id=(given["entry_id"] or "").strip(),
        title=(given["title"] or "").strip(),
        severity=(given["severity"] or "warning").strip().lower(),
        tags=_split(given["tags"]),
        aliases=_split(given["aliases"]),
        signatures=[s for s in given["signatures"] or [] if s.strip()],
        detected_by=_split(given["detected_by"]),
        symptom=(given["symptom"] or "").strip(),
        cause=(given["cause"] or "").strip(),
        fix=(given["fix"] or "").strip(),
        verify=(given["verify"] or "").strip(),
    )


def _read_entry_file(name: str) -> str:
    from llmdoctor.errors import BadInput

    limit = MAX_ENTRY_CHARS
    if name == "-":
        if sys.stdin is None:
            raise BadInput("--from-file -: standard input is closed")
        text = sys.stdin.read(limit + 1)
    else:
        try:
            if not Path(name).is_file():  # a folder, a device (/dev/zero), a FIFO
                raise BadInput(f"--from-file {name}: not a regular file")
            with open(name, encoding="utf-8") as fh:
                text = fh.read(limit + 1)
        except (OSError, UnicodeDecodeError) as exc:
            raise BadInput(f"--from-file {name}: {getattr(exc, 'strerror', None) or exc}") from None
    if len(text) > limit:
        raise BadInput(f"--from-file {name}: over {limit >> 10} KiB; a runbook entry is shorter")
    return text


def _edit_template(draft) -> Path:
    """Open $VISUAL/$EDITOR on a template kept in the drafts folder, as `git commit` does."""
    import shlex
    import subprocess

    from llmdoctor.errors import BadInput
    from llmdoctor.wiki.authoring import render_entry, save_draft, strip_editor_comments

    template = render_entry(draft, template=True)
    path = save_draft(template, draft.id)
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
    try:
        status = subprocess.call(f"{editor} {shlex.quote(str(path))}", shell=True)
    except OSError as exc:
        raise BadInput(f"cannot start the editor {editor!r}: {exc.strerror}") from None
    if status != 0:
        raise BadInput(f"the editor {editor!r} exited with status {status}; draft kept in {path}")
    text = strip_editor_comments(path.read_text(encoding="utf-8"))
    if not text.strip() or text == strip_editor_comments(template):
        path.unlink(missing_ok=True)
        raise BadInput("the template was not changed; nothing written")
    return path


def _ask_missing(draft, given: dict, folder, force: bool) -> None:
    """Prompt for every field the flags did not give; on Ctrl-C/EOF keep what was typed."""
    from llmdoctor.wiki.authoring import SECTION_HINTS, render_entry, save_draft
    from llmdoctor.wiki.entry import SEVERITIES
    from llmdoctor.wiki.lint import ID_PATTERN

    def check_id(value: str) -> str:
        value = value.strip()
        if not ID_PATTERN.match(value):
            raise typer.BadParameter("use lower-case letters and digits joined by '-'")
        if (folder / f"{value}.md").exists() and not force:
            raise typer.BadParameter(f"{folder / (value + '.md')} exists; pick another id")
        return value

    def check_severity(value: str) -> str:
        value = value.strip().lower()
        if value not in SEVERITIES:
            raise typer.BadParameter(f"one of {', '.join(SEVERITIES)}")
        return value

    try:
        if not given["entry_id"]:
            draft.id = typer.prompt(
                "id (file name, e.g. redis-gateway-timeout)", value_proc=check_id
            )
        if not given["title"]:
            draft.title = typer.prompt("title").strip()
        if not given["severity"]:
            draft.severity = typer.prompt(
                f"severity ({', '.join(SEVERITIES)})", default="warning", value_proc=check_severity
            )
        if not given["tags"]:
            draft.tags = _split(
                [typer.prompt("tags (comma-separated)", default="", show_default=False)]
            )
        if not given["aliases"]:
            draft.aliases = _split(
                [
                    typer.prompt(
                        "aliases: other search words, e.g. 显存, 排队",
                        default="",
                        show_default=False,
                    )
                ]
            )
        if not given["signatures"]:
            draft.signatures = []  # filled line by line: an interruption keeps what was typed
            _ask_lines("signatures: Python regexes, one log line each", draft.signatures)
        for name in ("symptom", "cause", "fix"):
            if not given[name]:
                typed: list[str] = []
                try:
                    _ask_lines(f"{name}: {SECTION_HINTS[name]}", typed)
                finally:
                    setattr(draft, name, "\n".join(typed))
    except (typer.Abort, EOFError, KeyboardInterrupt):
        if not draft.is_empty():
            path = save_draft(render_entry(draft), draft.id)
            typer.echo(f"\nnothing written; what you typed is saved in {path}", err=True)
        raise typer.Abort() from None


def _ask_lines(label: str, lines: list[str]) -> list[str]:
    """Append typed lines to `lines` until an empty one (in place, so Ctrl-D loses none)."""
    typer.echo(f"{label} (finish with an empty line):")
    while True:
        line = typer.prompt("", default="", show_default=False, prompt_suffix="> ")
        if not line.strip():
            return lines
        lines.append(line.rstrip())


def _write_validated(text, draft, folder: Path, force, source: Path | None, as_json, wiki) -> None:
    """Validate, then write; on any problem keep the text as a draft and say where it is."""
    from llmdoctor.wiki.authoring import (
        EntryExists,
        FolderNotWritable,
        relabel,
        save_draft,
        strip_editor_comments,
        validate,
        write_entry,
    )
    from llmdoctor.wiki.library import wiki_dirs

    # validate with comment lines blanked, so line numbers match the file being edited
    entry, problems = validate(strip_editor_comments(text, keep_lines=True), "draft", draft)
    if not problems and entry is not None:
        try:
            path = write_entry(folder, entry.id, strip_editor_comments(text), force=force)
        except (EntryExists, FolderNotWritable) as exc:
            reason = str(exc)
        else:
            others = [
                str(d / f"{entry.id}.md")
                for d in wiki_dirs(wiki)
                if (d / f"{entry.id}.md").is_file() and d.resolve() != folder.resolve()
            ]
            _report_written(path, entry.id, others, as_json)
            raise typer.Exit(0)
    else:
        reason = f"{len(problems)} problem{'s' if len(problems) != 1 else ''}"
    draft_path = source or save_draft(text, entry.id if entry else "")
    problems = relabel(problems, str(draft_path))
    if as_json:
        import json

        data = {
            "written": False,
            "reason": reason,
            "draft": str(draft_path),
            "problems": [p.to_json() for p in problems],
        }
        typer.echo(json.dumps(data, ensure_ascii=False))
    else:
        for problem in problems:
            typer.echo(str(problem), err=True)
    typer.echo(
        f"llmdoctor: entry not written: {reason}; your draft is saved in {draft_path} "
        f"(fix it, then: llmdoctor wiki add --from-file {draft_path})",
        err=True,
    )
    raise typer.Exit(3)


def _report_written(path, entry_id: str, others: list[str], as_json: bool) -> None:
    if as_json:
        import json

        data = {"written": True, "id": entry_id, "path": str(path), "overrides": others}
        typer.echo(json.dumps(data, ensure_ascii=False))
        return
    typer.echo(f"wrote {path}")
    for other in others:
        typer.echo(f"  it overrides {other}")
    typer.echo(f"next: git -C {path.parent} add {path.name} && git -C {path.parent} commit")


def register(app: typer.Typer) -> None:
    from llmdoctor.commands import wiki_site

    wiki_site.register(wiki_app)
    app.add_typer(wiki_app, name="wiki")
