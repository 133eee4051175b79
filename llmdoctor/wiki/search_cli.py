"""`llmdoctor wiki search`: what it prints, and a start-up path that skips the CLI framework.

The command is the one people type most, often in a loop over pasted lines, so its cost is
mostly start-up. `fast_main` parses its few options with the standard library and runs the same
`run_search` as the typer command; anything it does not recognise as plainly valid (help, an
unknown or malformed option, a bad --wiki-url) is handed back to typer, which stays the one
authority on usage errors. tests/test_wiki_search_cli.py holds the two paths equal.
"""

from __future__ import annotations

import os
import sys

OPTIONS_WITH_VALUE = ("--tag", "--limit", "--wiki", "--wiki-url")
FLAGS = ("--json", "--no-color")
MAX_LIMIT = 1000  # --limit of `wiki search` and `explain`: more is refused as a usage error


def use_color(no_color: bool) -> bool:
    out = sys.stdout
    return not no_color and "NO_COLOR" not in os.environ and out is not None and out.isatty()


def highlight(text: str, spans: list[tuple[int, int]], color: bool) -> str:
    """The snippet with its matched words highlighted; its own control characters escaped."""
    from llmdoctor.terminal_text import visible

    if not color or not spans:
        return visible(text)
    out, last = [], 0
    for start, end in spans:
        out += [visible(text[last:start]), "\x1b[1;33m", visible(text[start:end]), "\x1b[0m"]
        last = end
    out.append(visible(text[last:]))
    return "".join(out)


MAX_SEARCH_INPUT = 64 * 1024 * 1024  # characters read from stdin at most (`cat /dev/zero | …`)


def read_tail(stream, keep: int = 200_000, limit: int | None = None) -> str:
    """The last `keep` characters of a stream (a piped log can be any size), reading at most
    `limit` characters so an endless pipe cannot keep the search waiting."""
    limit = MAX_SEARCH_INPUT if limit is None else limit
    tail, read = "", 0
    while read < limit and (chunk := stream.read(min(1 << 20, limit - read))):
        read += len(chunk)
        tail = (tail + chunk)[-keep:]
    if read >= limit and stream.read(1):
        sys.stderr.write(
            f"llmdoctor: note: searched the end of the first {limit >> 20} MiB of stdin\n"
        )
    return tail.replace("\x00", "")


def run_search(
    query: list[str],
    *,
    tag: str | None = None,
    limit: int = 10,
    as_json: bool = False,
    no_color: bool = False,
    wiki: list[str] | None = None,
) -> int:
    """Search and print the results; BadInput for input that cannot be searched."""
    from llmdoctor.errors import BadInput
    from llmdoctor.wiki.search import search

    if query == ["-"] and sys.stdin is None:
        raise BadInput("standard input is closed: give the words to search for")
    text = read_tail(sys.stdin) if query == ["-"] else " ".join(query)
    if not text.strip():
        raise BadInput("nothing to search for: give some words, e.g. llmdoctor wiki search OOM")
    unreadable: list[tuple[str, str]] = []
    results = search(text, limit=limit, tag=tag, wiki_dirs=wiki, unreadable=unreadable)
    for path, problem in unreadable:  # never dropped quietly: the entry was not searched
        sys.stderr.write(f"warning: {path}:{problem} (entry not searched)\n")
    import io

    from llmdoctor.command_run import write_stdout

    text = io.StringIO()
    _print_results(text, results, tag, as_json, no_color)
    write_stdout(text.getvalue())
    return 0


def _print_results(out, results, tag: str | None, as_json: bool, no_color: bool) -> None:
    if as_json:
        import json

        from llmdoctor.wiki.links import page_url

        rows = [r.to_json() for r in results]
        for row in rows:
            if url := page_url(row["id"]):
                row["url"] = url
        out.write(json.dumps({"results": rows}, ensure_ascii=False) + "\n")
        return
    if not results:
        out.write("no runbook entry matches" + (f" with tag {tag!r}" if tag else "") + "\n")
        return
    from llmdoctor.terminal_text import visible
    from llmdoctor.wiki.links import page_url

    color = use_color(no_color)
    bold, dim, reset = ("\x1b[1m", "\x1b[2m", "\x1b[0m") if color else ("", "", "")
    for n, r in enumerate(results, 1):
        out.write(
            f"{n:>2}. {bold}{visible(r.id)}{reset}  {visible(r.title)}  "
            f"{dim}[{visible(r.severity)}]{reset}\n"  # the raw score only with --json
        )
        if r.snippet:
            out.write(f"    {highlight(r.snippet, r.highlights, color)}\n")
        if url := page_url(r.id):
            out.write(f"    {dim}page:{reset} {visible(url)}\n")
    out.write(f"{dim}details: llmdoctor wiki show {visible(results[0].id)}{reset}\n")


def fast_main(args: list[str]) -> int | None:
    """Run `wiki search ARGS` without the CLI framework; None = let typer handle these args."""
    parsed = _parse(args)
    if parsed is None:
        return None
    from llmdoctor.wiki.links import wiki_url_taken

    if not wiki_url_taken(parsed.pop("wiki_url")):
        return None  # typer says what is wrong with it
    from llmdoctor.errors import LlmdoctorError

    try:
        return run_search(**parsed)
    except LlmdoctorError as exc:
        from llmdoctor.exit_codes import ExitCode  # (an enum class: built only when needed)

        sys.stderr.write(f"llmdoctor: {exc}\n")
        return int(ExitCode.CANNOT_RUN)
    except BrokenPipeError:
        return 0


def _parse(args: list[str]) -> dict | None:
    """The search options from ARGS, or None when they are not plainly valid."""
    from llmdoctor.plain_args import bounded_int, plain_args

    read = plain_args(args, FLAGS, OPTIONS_WITH_VALUE, repeated=("--wiki",))
    if read is None or not read[0]:
        return None
    words, found = read
    limit = bounded_int(found.get("--limit", "10"), 1, MAX_LIMIT)
    if limit is None:
        return None
    return {
        "query": words,
        "tag": found.get("--tag"),
        "limit": limit,
        "as_json": "--json" in found,
        "no_color": "--no-color" in found,
        "wiki": found.get("--wiki"),
        "wiki_url": found.get("--wiki-url"),
    }
