"""`llmdoctor wiki add` — write a new runbook entry: prompts, flags, a file, $EDITOR or a log.

What the user typed is never lost: an entry that is not written is kept as a draft (see
llmdoctor/wiki/authoring.py).
"""

# no `from __future__ import annotations` here: typer would eval every annotation string on
# each run; real annotation objects are cheaper.

import os
import shlex
import sys
from pathlib import Path
from typing import Annotated

import typer

from llmdoctor.commands import options as opt

MAX_ENTRY_CHARS = 1024 * 1024  # `wiki add --from-file`: an entry is a page, not a log


ListOption = list[str] | None


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
        from llmdoctor.usecases.from_log import prefill

        stdin = sys.stdin.buffer if from_log == "-" and sys.stdin is not None else None
        log_draft = prefill(from_log, given, wiki, stdin)
    draft: EntryDraft | None = None
    source: Path | None = None  # the file the text came from, if any: it is the draft
    if from_file:
        source = None if from_file == "-" else Path(from_file)
        text = _read_entry_file(from_file)
    elif editor:
        source, text = _edit_template(_draft_from_flags(given))
    else:
        draft = _draft_from_flags(given)
        if not all([draft.id, draft.title, draft.symptom, draft.cause, draft.fix]):
            if from_log == "-":  # the log took standard input: no answer can follow it there
                from llmdoctor.errors import BadInput

                missing = [f"--{k}" for k in ("cause", "fix") if not getattr(draft, k)]
                raise BadInput(
                    "--from-log -: standard input was the log, so nothing is left on it to "
                    f"answer the prompts; give {' and '.join(missing) or 'every field'} as "
                    "options, or --editor, or the log as a FILE"
                )
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


def _edit_template(draft) -> tuple[Path, str]:
    """Open $VISUAL/$EDITOR on a template kept in the drafts folder, as `git commit` does;
    (the draft's path, its text with the help comments removed)."""
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
    try:
        if path.exists() and not path.is_file():  # replaced by a folder, a FIFO, /dev/zero
            raise BadInput(f"the draft {path} is no longer a regular file; nothing written")
        with open(path, "rb") as fh:
            raw = fh.read(4 * MAX_ENTRY_CHARS + 1)  # UTF-8: at most 4 bytes a character
    except FileNotFoundError:
        raise BadInput(f"the editor removed the draft {path}; nothing written") from None
    except OSError as exc:
        raise BadInput(f"cannot read the draft {path}: {exc.strerror or exc}") from None
    if len(raw) > 4 * MAX_ENTRY_CHARS:
        raise BadInput(f"the draft {path} is over {MAX_ENTRY_CHARS >> 10} KiB; nothing written")
    try:
        edited = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadInput(
            f"the draft {path} is not UTF-8 text (byte {exc.start}); nothing written. Fix it, "
            f"then: llmdoctor wiki add --from-file {path}"
        ) from None
    text = strip_editor_comments(edited)
    if not text.strip() or text == strip_editor_comments(template):
        path.unlink(missing_ok=True)
        raise BadInput("the template was not changed; nothing written")
    return path, edited


def _ask_missing(draft, given: dict, folder, force: bool) -> None:
    """Prompt for every field the flags did not give; on Ctrl-C/EOF keep what was typed. A
    closed or exhausted standard input that is no terminal (a script, `< /dev/null`) is a
    usage error, not an abort."""
    from llmdoctor.errors import BadInput
    from llmdoctor.terminal_text import visible
    from llmdoctor.wiki.authoring import SECTION_HINTS, render_entry
    from llmdoctor.wiki.entry import SEVERITIES
    from llmdoctor.wiki.lint import ID_PATTERN

    needs = "give the entry with --id, --title, --signature … or --from-file FILE"
    if sys.stdin is None:
        raise BadInput(f"standard input is closed: nothing to answer the prompts; {needs}")
    at_terminal = sys.stdin.isatty()

    def refuse(field: str, value: str, why: str):
        # at a terminal the prompt asks again; from a pipe the next answers belong to the next
        # prompts, so asking again would shift every field after this one
        if at_terminal:
            return typer.BadParameter(why)
        return BadInput(f"{field} '{visible(value)[:80]}': {why}")

    def check_id(value: str) -> str:
        value = value.strip()
        if not ID_PATTERN.match(value):
            raise refuse("id", value, "use lower-case letters and digits joined by '-'")
        if (folder / f"{value}.md").exists() and not force:
            raise refuse("id", value, f"{folder / (value + '.md')} exists; pick another id")
        return value

    def check_severity(value: str) -> str:
        value = value.strip().lower()
        if value not in SEVERITIES:
            raise refuse("severity", value, f"one of {', '.join(SEVERITIES)}")
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
    except (BadInput, typer.Abort, EOFError, KeyboardInterrupt) as stopped:
        # what was answered before is kept, whatever stopped the prompts
        kept = ""
        if not draft.is_empty():
            kept = f"; what you typed is {_keep_draft(render_entry(draft), draft.id)}"
        if isinstance(stopped, BadInput):  # an invalid answer from a pipe
            raise BadInput(f"{stopped}{kept}") from None
        if at_terminal:
            if kept:
                typer.echo(f"\nnothing written{kept}", err=True)
            raise typer.Abort() from None
        raise BadInput(
            f"standard input ended before every prompt was answered; {needs}{kept}"
        ) from None


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
        DraftNotSaved,
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
    if source is None:
        try:
            source = save_draft(text, entry.id if entry else "")
        except DraftNotSaved as exc:
            if as_json:  # the text inside the one JSON object, so a script still parses stdout
                import json

                data = {"written": False, "reason": f"{reason}; {exc}", "draft": None}
                typer.echo(json.dumps({**data, "text": text}, ensure_ascii=False))
            else:
                _print_typed_text(text)
            typer.echo(f"llmdoctor: entry not written: {reason}; {exc}", err=True)
            raise typer.Exit(3) from None
    draft_path = source
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
    again = ["llmdoctor", "wiki", "add", *[a for d in wiki or () for a in ("--wiki", d)]]
    again += ["--from-file", str(draft_path)]
    typer.echo(
        f"llmdoctor: entry not written: {reason}; your draft is saved in {draft_path} "
        f"(fix it, then: {shlex.join(again)})",
        err=True,
    )
    raise typer.Exit(3)


def _print_typed_text(text: str) -> None:
    """The entry on stdout, between marker lines, when no file could keep it."""
    typer.echo("----- the entry as typed (not saved anywhere: copy it) -----")
    typer.echo(text.rstrip("\n"))
    typer.echo("----- end of the entry -----")


def _keep_draft(text: str, entry_id: str) -> str:
    """Save the draft; where it is, or (printed) the text itself when it cannot be saved."""
    from llmdoctor.wiki.authoring import DraftNotSaved, save_draft

    try:
        return f"saved in {save_draft(text, entry_id)}"
    except DraftNotSaved as exc:
        _print_typed_text(text)
        return f"printed above ({exc})"


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


def register(wiki_app: typer.Typer) -> None:
    wiki_app.command("add")(add_command)
