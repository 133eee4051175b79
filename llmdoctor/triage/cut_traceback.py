"""Whether a pasted log stops inside a Python traceback: its header and frames are there, the
exception line that ends it (the error itself, what names the cause) is not. A paste cut by a
terminal's scrollback, `head`, or a chat's length limit; explain says so instead of letting the
lines it did read pass for the whole story.
"""

from __future__ import annotations

import re
from collections.abc import Callable

HEADER = "Traceback (most recent call last):"
# what a traceback holds between its header and its exception: frames (their file, line and
# function: `File "…/core.py", line 1174, in run_busy_loop`), their source lines (indented),
# Python 3.11's carets
FRAME = re.compile(r'^\s*File "([^"]*)", line ([0-9]{1,9})(?:, in ([^\s,]+))?')
# how an exception line begins: its (dotted) class name, Ray's cause in parentheses
# (`RayTaskError(ActorDiedError)`), then `:` or nothing
_EXCEPTION = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*(\([A-Za-z0-9_.]*\))?(:|$)")
# how another writer's log line begins: a process tag (`(APIServer pid=1)`), a bracket
# (`[pod/x/c]`, `[rank1]:`), a timestamp, a level, a compose service's `name  | `
_OTHER_WRITER = re.compile(
    r"^(\(|\[|[0-9]{2}|(DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)\b|[A-Za-z0-9_.-]+ +\| )"
)
_DIGITS = re.compile(r"[0-9]+")
# a Python logger's prefix up to its `file.py:line]` (vLLM's `ERROR 03-13 09:00:43 [core.py:330] `,
# V0's `… multiproc_worker_utils.py:226] `)
_LOGGER = re.compile(r"^[^\n]{0,300}?\b[A-Za-z0-9_.-]+\.py:[0-9]+\] ")
# a logger's prefix, with the message a V0 worker puts before its header (~400 characters), is
# short; a header further into its line is no prefix (its pattern would cost seconds to build)
MAX_PREFIX = 1024


def _inside(content: str) -> bool:
    """Whether one line (its log prefix cut) belongs between a traceback's header and its end."""
    if not content.strip():
        return True
    return bool(FRAME.match(content)) or content[:1] in (" ", "\t")


def _prefix_pattern(prefix: str) -> re.Pattern | None:
    """The shape of the prefix a logger writes before each line of the traceback (vLLM's `ERROR
    11-25 18:39:23 [core.py:842] `, a worker's `(VllmWorker rank=0 pid=2445155) `, kubectl's
    `2025-01-01T10:00:23.1Z `): its text, any run of digits for each run of digits (a timestamp's
    fraction loses its trailing zeros). Literals and digit runs alone: matched in linear time."""
    if not prefix or len(prefix) > MAX_PREFIX:
        return None
    pieces = _DIGITS.split(prefix)
    return re.compile("[0-9]+".join(re.escape(piece) for piece in pieces))


def ends_inside_traceback(
    lines: list[str], without: Callable[[str], str] | None = None
) -> int | None:
    """The index in `lines` of the last traceback header when every line after it is a frame, a
    source line or blank (the exception that ends it never came); None otherwise. Under a
    prefixed header, a line with a log prefix of another shape is another writer's (a second
    process logging between its lines) and passed over; any other line may be the exception.
    `without` takes off what a collector put before each line (kubectl's `--timestamps`, a time
    that differs line by line), from the header on."""
    header = None
    for n in range(len(lines) - 1, -1, -1):
        if HEADER in lines[n]:
            header = n
            break
    if header is None:
        return None
    if without is not None:
        lines = [*lines[:header], *map(without, lines[header:])]
    before = lines[header][: lines[header].index(HEADER)]
    # a message the logger wrote before the header (V1's `EngineCore hit an exception: `) is on
    # the header's line only: the traceback's other lines carry the logger's prefix alone
    if (logger := _LOGGER.match(before[:MAX_PREFIX])) is not None:
        before = before[: logger.end()]
    own = _prefix_pattern(before)
    for line in lines[header + 1 :]:
        if own is not None and (m := own.match(line)) is not None:
            if not _inside(line[m.end() :]):
                return None  # its exception, logged with its prefix
            continue
        if _inside(line):
            continue
        if own is None or _EXCEPTION.match(line) or not _OTHER_WRITER.match(line):
            return None  # the exception, or a line nothing tells from one
    return header
