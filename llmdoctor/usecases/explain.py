"""Explain one log named by the user (a path or - for stdin): read it within bounds, pick the
number of reader threads, and run explain. `llmdoctor explain` and `wiki add --from-log` both
call it, so both read a log the same way and refuse the same inputs."""

from __future__ import annotations

import os
import sys
import zlib
from dataclasses import dataclass
from typing import Any

from llmdoctor.errors import BadInput

PARALLEL_FROM_BYTES = 64 * 1024 * 1024  # below this one thread reads faster than several
MAX_WORKERS = 4


@dataclass(frozen=True)
class ExplainRequest:
    """What to explain: `file` is a path or "-"; `jobs` 0 means one thread per CPU (up to 4)."""

    file: str = "-"
    limit: int = 5
    jobs: int = 1
    wiki_dirs: tuple[str, ...] | list[str] | None = None
    name: str | None = None  # how the log is named in the result (a bundle's logs/vllm.log)


def explain_log(request: ExplainRequest, entries: dict, stdin=None) -> tuple[Any, Any, str]:
    """(the ExplainResult, the source read, its name). BadInput when the log cannot be read:
    devices, FIFOs without a writer, gzip bombs, binary data, a read error half-way."""
    from llmdoctor.engine.textsource import TextSource
    from llmdoctor.triage.explain import explain
    from llmdoctor.triage.log_input import open_log, open_log_stdin

    if request.file == "-":
        source, name, workers = open_log_stdin(stdin), "<stdin>", 1
    else:
        source, name = open_log(request.file), request.name or request.file
        workers = request.jobs or min(os.cpu_count() or 1, MAX_WORKERS)
    try:
        if not isinstance(source, TextSource) or source.size_bytes() < PARALLEL_FROM_BYTES:
            workers = 1
        result = explain(
            source,
            entries,
            limit=request.limit,
            wiki_dirs=request.wiki_dirs,
            workers=workers,
            name=name,
        )
    except (OSError, EOFError, zlib.error) as exc:  # a read error half-way through
        why = getattr(exc, "strerror", None) or exc
        raise BadInput(f"{name}: cannot be read ({why})") from None
    finally:
        if request.file != "-":
            getattr(source, "close", lambda: None)()
    result.unchecked.extend(getattr(source, "unread", list)())
    return result, source, name


def print_source_notes(source) -> None:
    """What the reader noticed about the input (decompressed, lines cut …), on stderr."""
    from llmdoctor.terminal_text import visible

    for note in getattr(source, "notes", list)():
        print(f"llmdoctor: note: {visible(note)}", file=sys.stderr)
