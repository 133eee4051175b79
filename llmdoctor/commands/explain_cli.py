"""`llmdoctor explain`: what it prints, and a start-up path that skips the CLI framework.

explain is typed at 3 a.m. on a pasted log, often in a loop, and typer is a third of its
start-up. `fast_main` reads its few options with the standard library (llmdoctor.plain_args) and
runs the same `run_explain` as the typer command (llmdoctor/commands/explain.py), under the same
error contract (llmdoctor.command_run); anything it does not recognise as plainly valid (help,
an unknown or malformed option, a bad --wiki-url) is handed back to typer, which stays the one
authority on usage errors. tests/test_explain_cli.py holds the two paths equal.
"""

from __future__ import annotations

from llmdoctor.wiki.search_cli import MAX_LIMIT

TERMINAL_TEXT = 240
FLAGS = ("--json", "--no-color")
OPTIONS_WITH_VALUE = ("--limit", "--jobs", "--wiki", "--wiki-url")
MAX_JOBS = 999_999  # --jobs beyond this is typer's to read (it takes any count)


def fast_main(args: list[str]) -> None:
    """Run `explain ARGS` without the CLI framework (ends in SystemExit), or return when typer
    must read these arguments."""
    parsed = _parse(args)
    if parsed is None:
        return
    from llmdoctor.wiki.links import wiki_url_taken

    if not wiki_url_taken(parsed.pop("wiki_url")):
        return  # typer says what is wrong with it
    from llmdoctor.command_run import run_command

    run_command(lambda: run_explain(**parsed))


def _parse(args: list[str]) -> dict | None:
    """The explain options from ARGS, or None when they are not plainly valid."""
    from llmdoctor.plain_args import bounded_int, plain_args

    read = plain_args(args, FLAGS, OPTIONS_WITH_VALUE, repeated=("--wiki",))
    if read is None or len(read[0]) > 1:
        return None
    files, found = read
    limit = bounded_int(found.get("--limit", "5"), 1, MAX_LIMIT)
    jobs = bounded_int(found.get("--jobs", "1"), 0, MAX_JOBS)
    if limit is None or jobs is None:
        return None
    return {
        "file": files[0] if files else "-",
        "as_json": "--json" in found,
        "limit": limit,
        "jobs": jobs,
        "no_color": "--no-color" in found,
        "wiki": found.get("--wiki"),
        "wiki_url": found.get("--wiki-url"),
    }


def run_explain(
    file: str = "-",
    *,
    as_json: bool = False,
    limit: int = 5,
    jobs: int = 1,
    no_color: bool = False,
    wiki: list[str] | None = None,
) -> int:
    """Explain the log and print the answer; its exit code."""
    import json
    import sys

    from llmdoctor.terminal_text import visible
    from llmdoctor.usecases.explain import ExplainRequest, explain_log, print_source_notes
    from llmdoctor.wiki.library import load_library

    library = load_library(wiki)
    for error in library.errors:  # a team entry that cannot be read is said, never dropped quietly
        print(f"warning: {visible(str(error))} (entry not used)", file=sys.stderr)
    for dropped in library.dropped_signatures():
        print(f"warning: {visible(dropped)}", file=sys.stderr)
    stdin = None
    if file == "-":
        stdin = sys.stdin.buffer if sys.stdin is not None else None
        if stdin is not None and sys.stdin.isatty():
            print("reading a log from the terminal: paste it, then Ctrl-D", file=sys.stderr)
    if file != "-":
        from llmdoctor.triage.log_input import keep_freed_blocks

        keep_freed_blocks(file)
    request = ExplainRequest(file=file, limit=limit, jobs=jobs, wiki_dirs=wiki)
    result, source, name = explain_log(request, library.entries, stdin=stdin)
    if result.empty:  # never "no line looks wrong" of what was not there (a failed `kubectl logs`)
        from llmdoctor.errors import BadInput

        raise BadInput(
            f"{name}: the input is empty, nothing to explain (did the command that wrote it fail?)"
        )
    for warning in result.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    print_source_notes(source)
    if as_json:
        from llmdoctor.command_run import write_stdout

        write_stdout(
            json.dumps(result.to_json(), indent=2, ensure_ascii=False) + "\n", "the answer"
        )
    else:
        from llmdoctor.commands.output import make_console

        render(result, make_console(no_color))
    return result.exit_code


STYLE = {
    "critical": "bold white on red",
    "warning": "bold black on yellow",
    "info": "bold white on blue",
}


def render(result, console) -> None:
    """The terminal view: one block per entry with its lines and the first lines of its Fix."""
    from rich.markup import escape as rich_escape

    from llmdoctor.terminal_text import visible

    def escape(text: object) -> str:  # log and wiki text: control characters shown, not obeyed
        return rich_escape(visible(text))

    from llmdoctor.triage.explain import CLEAN_BYTES, CONFIDENT
    from llmdoctor.wiki.links import page_url

    # a guess that rounds to 0.00 says nothing: it is left out of the terminal (JSON keeps it)
    weak = [m for m in result.below_threshold if m.confidence >= 0.005]
    if result.how == "none":
        console.print(f"[bold]No entry explains[/] {escape(result.source)}.")
        _render_cut_traceback(result, console, escape)
        _render_notes(result, console, escape)
        if result.salient:
            kept = len(result.salient)
            shown = _shown_error_lines(result.salient)
            # the scan keeps the last error lines only: say so, never pass them off as all
            before = (
                f" (the last {kept} kept: more came before them)"
                if result.error_lines > kept
                else ""
            )
            if result.warnings_only:  # all logged as warnings or notices: never called errors
                console.print(f"The lines it read as wrong (none logged at ERROR){before}:")
            else:
                console.print(f"The lines it read as errors{before}:")
            for e in shown:
                if e is None:
                    console.print(f"  [dim]… {kept - len(shown) + 1} more …[/]")
                    continue
                console.print(f"  [dim]{e.line}:[/] {escape(_cut(e.text))}", soft_wrap=True)
            # a note with only warnings and notices beside it: nothing failed, nothing to guess
            quiet = bool(result.notes) and result.nothing_failed
            if weak and not quiet:
                guesses = ", ".join(f"{m.id} ({m.confidence:.2f})" for m in weak[:3])
                words = (
                    ", by the error's words alone"
                    if all(m.how == "search" and not m.count for m in weak[:3])
                    else ""
                )
                console.print(
                    f"[dim]Too weak to name (confidence < {CONFIDENT}{words}): {guesses}[/]"
                )
            if not quiet:
                console.print(
                    "Once the cause is known, record it: "
                    f"[bold]llmdoctor wiki add --from-log {escape(result.source)}[/]"
                )
        else:
            console.print(
                f"No line {'it read' if result.unchecked else 'in it'} looks like an error (no "
                "Error/Exception/FATAL/failed/Killed, exit code or warning Event)."
            )
            for m in [m for m in weak if m.evidence][:2]:
                e = m.evidence[-1]
                console.print(
                    f"A line hints at [bold]{m.id}[/] (weak evidence, check it): "
                    f"[dim]{e.line}:[/] {escape(_cut(e.text.strip()))}",
                    soft_wrap=True,
                )
            if weak:
                guesses = ", ".join(m.id for m in weak[:3])
                console.print(
                    f"[dim]If something is wrong all the same, these share its words: {guesses}[/]"
                )
        _render_unchecked(result, console, escape)
        return
    if result.how == "search":
        named = (
            "what its lines show names the first entry, as a warning (the others: the text "
            "that best fits its error lines, MAYBE)"
            if result.matches[0].named_by_its_lines
            else "the entries whose text best fits its error lines (MAYBE)"
        )
        console.print(f"[bold]No signature matched[/] {escape(result.source)}; {named}:")
        for e in result.salient[-5:]:
            console.print(f"  [dim]{e.line}:[/] {escape(_cut(e.text))}", soft_wrap=True)
    else:
        shown = len(result.matches)
        more = (
            f", {result.total_matches - shown} more with --limit"
            if result.total_matches > shown
            else ""
        )
        console.print(
            f"[bold]{escape(result.source)}[/]: {result.total_matches} runbook "
            f"{'entry explains' if result.total_matches == 1 else 'entries explain'} it "
            f"({result.matched_lines} matching line{'' if result.matched_lines == 1 else 's'}{more}), "
            "best explanation first"
        )
    if cause := result.likely_cause:
        named = f" (fits [bold]{escape(cause.entry_id)}[/])" if cause.entry_id else ""
        # the exception ending the traceback the consequence's first line opens
        where = (
            "the exception in the traceback of" if cause.in_traceback else "the first error before"
        )
        console.print(f"Likely cause: {where} {escape(cause.consequence)}{named}:", soft_wrap=True)
        raised = f"  [dim](raised at {escape(str(cause.raised_in))})[/]" if cause.raised_in else ""
        console.print(f"  [dim]{cause.line}:[/] {escape(_cut(cause.text))}{raised}", soft_wrap=True)
    likely = result.likely_cause
    hinted = likely.entry_id if likely is not None and likely.named_first else None
    for n, m in enumerate(result.matches, 1):
        console.print()
        label = m.shown_as.upper()
        # ENDED: it happened, and the engine generated again after it (or the container it
        # killed was started again and is Ready)
        style = STYLE["warning"] if label == "ENDED" else STYLE.get(m.severity, "bold")
        why = f"confidence {m.confidence:.2f}"
        if m.id == hinted:
            # ranked first by the likely cause's line, not by a confidence of its own
            label = "LIKELY"
            why = f"the likely cause's line fits it; it explains {escape(likely.consequence)}"
        line = (
            f"{n}. [{style}] {label} [/] [bold]{escape(m.id)}[/]: {escape(m.title)} [dim]({why})[/]"
        )
        if m.lines_of:
            line += f" [dim]({escape(m.retold_because)}: the lines of {escape(m.lines_of)})[/]"
        if m.ended_start is not None:  # a warning at run time, critical where the start failed
            line += f" [dim](that start failed on it: the server never came up, line {m.ended_start.line})[/]"
        if m.explained_by:
            line += f" [dim](explained by {escape(', '.join(m.explained_by))})[/]"
        console.print(line)
        if m.how == "signature":
            lines = "line" if m.count == 1 else "lines"
            # the header counts the lines a signature matched; a hint's are this entry's too
            by = f" ({m.count - m.hint_lines} by its signatures, {m.hint_lines} by a hint)"
            console.print(f"   [dim]{m.count} matching {lines}{by if m.hint_lines else ''}[/]")
            for i, e in enumerate(m.evidence):
                if i == 3 and m.count > len(m.evidence):
                    console.print(f"   [dim]│ … {m.count - len(m.evidence)} more …[/]")
                console.print(f"   [dim]│ {e.line}:[/] {escape(_cut(e.text))}", soft_wrap=True)
            if after := m.resumed:
                if after.lines is None:  # a long log: only its last stats lines were read
                    span = (
                        f"line {after.first.line} to {after.last.line}, "
                        "the last stats lines of a long log"
                    )
                elif after.lines == 1:
                    span = f"line {after.first.line}"
                else:
                    span = (
                        f"{after.lines} stats lines, line {after.first.line} to {after.last.line}"
                    )
                console.print(
                    f"   [bold]then tokens were generated again[/] ({span}); what is wrong now "
                    "may be something else:"
                )
                console.print(
                    f"   [dim]│ {after.first.line}:[/] {escape(_cut(after.first.text))}",
                    soft_wrap=True,
                )
            elif (ready := m.ready_again) is not None:
                whose = f"container {m.ready_container}" if m.ready_container else "its container"
                console.print(
                    f"   [bold]the kill is {escape(whose)}'s last state: it was started again "
                    f"and its readiness probe passes[/] (Ready, line {ready.line}), and no line "
                    "says the pod fails now; the same load may kill it again until the cause is "
                    "fixed:",
                    soft_wrap=True,
                )
                console.print(
                    f"   [dim]│ {ready.line}:[/] {escape(_cut(ready.text))}", soft_wrap=True
                )
            elif not result.read_whole and m.severity == "critical":
                console.print(
                    "   [dim]not checked whether the server was still starting then: the "
                    f"input is over {CLEAN_BYTES // 2**20} MB, read as a stream[/]",
                    soft_wrap=True,
                )
        elif (loading := m.killed_loading) is not None and m.evidence:
            killed = m.evidence[-1]
            where = (
                f"at the end of line {killed.line}, a line of loading"
                if loading.line == killed.line
                else f"on line {killed.line}, right after line {loading.line}'s loading"
            )
            console.print(
                f"   killed as it loaded: a SIGKILL {where}; most often the kernel's OOM killer "
                "(the kernel log says: step 1), else a stop that ran out of time (`docker stop`, "
                "a probe)",
                soft_wrap=True,
            )
            if loading.line != killed.line:
                console.print(
                    f"   [dim]│ {loading.line}:[/] {escape(_cut(loading.text))}", soft_wrap=True
                )
            # the end of the line, where the kill is (a bar's line runs on for thousands of columns)
            tail = killed.text if len(killed.text) <= 160 else "…" + killed.text[-159:]
            console.print(f"   [dim]│ {killed.line}:[/] {escape(tail)}", soft_wrap=True)
        elif (death := m.died_silently) is not None:
            last, said = death.last, death.said
            console.print(
                f"   died without a word: {death.who} failed to start (line {said.line}) and "
                "none of its lines is an error; most often SIGKILLed by the kernel's OOM killer "
                "as it loaded (the kernel log says: step 1), else a crash in native code. The "
                "last line of its processes:",
                soft_wrap=True,
            )
            console.print(f"   [dim]│ {last.line}:[/] {escape(_cut(last.text))}", soft_wrap=True)
            console.print(f"   [dim]│ {said.line}:[/] {escape(_cut(said.text))}", soft_wrap=True)
        elif m.snippet:  # the runbook's words, not the log's: labelled so, never a quote
            console.print(
                f"   [dim]its runbook reads: {escape(_cut(m.snippet))}[/]", soft_wrap=True
            )
        _render_fix(m, console, escape)
        if url := page_url(m.id):
            console.print(f"   [dim]page:[/] {escape(url)}", soft_wrap=True)
    if result.notes:
        console.print()
        _render_notes(result, console, escape)
    if result.cut_traceback:
        console.print()
        _render_cut_traceback(result, console, escape)
    _render_unchecked(result, console, escape)


def _render_unchecked(result, console, escape) -> None:
    """What the reading could not check (`Match.unchecked`), said rather than left out."""
    for said in result.unchecked:
        console.print(f"[dim]Not checked: {escape(said)}[/]", soft_wrap=True)


def _render_cut_traceback(result, console, escape) -> None:
    """The input stops inside a traceback: what names the error was never read."""
    if (header := result.cut_traceback) is None:
        return
    from llmdoctor.triage.explain import frame_parts

    where = ""
    if (frame := result.cut_frame) is not None:
        where = f" (its last frame, line {frame.line})"
        if parts := frame_parts(frame.text):
            path, line, function = parts
            where = (
                f" (its last frame, line {frame.line}: {escape(function)} in "
                f"{escape(_package_path(path))}:{line})"
            )
    console.print(
        f"[{STYLE['warning']}]The input stops inside the traceback at line {header.line}[/]"
        f"{where}: its last line, the exception that says what failed, is not in it. Paste the "
        "lines after it too (`tail -n 200` of the log, or the whole traceback).",
        soft_wrap=True,
    )


def _package_path(path: str) -> str:
    """A frame's file from its package on (`vllm/engine/llm_engine.py`, not the venv's path)."""
    path = path.replace("\\", "/")  # a Windows path's
    for marker in ("site-packages/", "dist-packages/"):
        if marker in path:
            return path.rsplit(marker, 1)[1]
    return "/".join(path.split("/")[-3:])


SHOWN_ERROR_LINES = 10


def _shown_error_lines(salient: list) -> list:
    """The error lines shown: all of a few; else the first one kept (the earliest is most often
    the cause), a gap (None), and the last ones."""
    if len(salient) <= SHOWN_ERROR_LINES:
        return list(salient)
    return [salient[0], None, *salient[-(SHOWN_ERROR_LINES - 1) :]]


def _render_notes(result, console, escape) -> None:
    """Warnings about the configuration, in a log where nothing failed (or a speed setting beside
    exceptions it cannot have raised): said, never as a cause. Each with its Fix's first step
    whole, as a match's."""
    errors = result.matches or (result.salient and not result.nothing_failed)
    for m in result.notes:
        if m.failed_before:
            why = "it came after the errors below, which it did not cause"
        elif m.failed_elsewhere:
            why = "no error in its own pod's or service's life"
        elif errors and not m.stopped_cleanly:
            why = "a setting for speed slows a server, it raises no exception"
        else:
            why = "no error follows it"
        console.print(
            f"[{STYLE['warning']}] NOTE [/] [bold]{escape(m.id)}[/]: {escape(m.title)} "
            f"[dim](a note on how it was set up or stopped, not what failed: {why})[/]",
            soft_wrap=True,
        )
        for e in m.evidence[:2]:
            console.print(f"   [dim]│ {e.line}:[/] {escape(_cut(e.text))}", soft_wrap=True)
        if m.stopped_cleanly and m.failed_elsewhere:  # errors, but not the stopped server's own
            console.print(
                "   [cyan]Look into the errors below:[/] they are another pod's or service's, or "
                "came after a restart: not the stopped server's own. How to stop without failing "
                f"requests: [bold]llmdoctor wiki show {escape(m.id)}[/]",
                soft_wrap=True,
            )
            continue
        if m.stopped_cleanly:  # its Fix is how to stop without failing requests: none failed
            console.print(
                "   [cyan]Nothing to fix:[/] no request failed after it. How to stop without "
                f"failing any: [bold]llmdoctor wiki show {escape(m.id)}[/]",
                soft_wrap=True,
            )
            continue
        if m.failed_before:  # what failed before it is the story; its Fix only how to stop
            console.print(
                "   [cyan]Look into the errors below:[/] they came before the stop. How to stop "
                f"without failing requests: [bold]llmdoctor wiki show {escape(m.id)}[/]",
                soft_wrap=True,
            )
            continue
        _render_fix(m, console, escape)


def _render_fix(m, console, escape) -> None:
    """The Fix's leading whole steps, prose re-flowed to a terminal's width (8 columns of lead),
    code as written, and where the rest is."""
    from llmdoctor.render.fix_text import display_lines

    width = console.width - 8 if console.is_terminal else None
    shown = display_lines(m.fix_steps, width) if m.fix_steps else m.fix
    for i, fix in enumerate(shown):
        label = "Fix: " if i == 0 else "     "
        console.print(f"   [cyan]{label}[/]{escape(fix)}", soft_wrap=True)
    if m.engine_flags:  # the steps are vLLM's; the log is another engine's
        theirs = ", ".join(
            f"{ours}: the same" if t == ours else f"{ours} → {t}"
            for ours, t in m.engine_flags.items()
        )
        console.print(
            f"   [cyan]{escape(m.engine)}:[/] the log is {escape(m.engine)}'s; for the vLLM flags "
            f"above: {escape(theirs)}",
            soft_wrap=True,
        )
    more = f"more (steps {m.fix_left_out})" if m.fix_left_out else "more"
    console.print(f"   [dim]{more}: llmdoctor wiki show {escape(m.id)}[/]")


def _cut(text: str) -> str:
    return text if len(text) <= TERMINAL_TEXT else text[: TERMINAL_TEXT - 1] + "…"
