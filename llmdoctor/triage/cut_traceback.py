"""Whether a pasted log stops inside a Python traceback: its header and frames are there, the
exception line that ends it (the error itself, what names the cause) is not. A paste cut by a
terminal's scrollback, `head`, or a chat's length limit; explain says so instead of letting the
lines it did read pass for the whole story.
"""

from __future__ import annotations

import re

HEADER = "Traceback (most recent call last):"
# what a traceback holds between its header and its exception: frames, their source lines (indented)
# and PyTorch/Python 3.11's carets; a line with its own log prefix is read after that prefix
_FRAME = re.compile(r'^\s*File "[^"]*", line [0-9]+')
_DIGITS = re.compile(r"[0-9]")


def _inside(content: str) -> bool:
    """Whether one line (its log prefix cut) belongs between a traceback's header and its end."""
    if not content.strip():
        return True
    return bool(_FRAME.match(content)) or content[:1] in (" ", "\t")


def ends_inside_traceback(lines: list[str]) -> int | None:
    """The index in `lines` of the last traceback header when every line after it is a frame, a
    source line or blank (the exception that ends it never came); None otherwise."""
    header = None
    for n in range(len(lines) - 1, -1, -1):
        if HEADER in lines[n]:
            header = n
            break
    if header is None:
        return None
    at = lines[header].index(HEADER)
    # the prefix a logger writes before each line of the traceback (vLLM's `ERROR 11-25 18:39:23
    # [core.py:842] `, a worker's `(VllmWorker rank=0 pid=2445155) `): the same shape, digits aside
    prefix = _DIGITS.sub("0", lines[header][:at])
    for line in lines[header + 1 :]:
        content = line
        if at and _DIGITS.sub("0", line[:at]) == prefix:
            content = line[at:]
        if not _inside(content):
            return None
    return header
