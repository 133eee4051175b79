"""Undo what terminals, web pages and log shippers do to a pasted log, before it is read.

* ANSI colour and cursor codes (``\\x1b[31mERROR\\x1b[0m``) are removed;
* HTML entities from a copied web page or a JSON-escaped message (``&quot;``, ``&#39;``) are
  decoded;
* docker-compose's ``service-1  | `` prefix is removed;
* lines a terminal or a web form wrapped at a fixed width (several lines of exactly the same,
  longest length) are joined back, so a signature split by the wrap matches again.

Line numbers keep pointing at the input: a joined line keeps the number of its first piece.
"""

from __future__ import annotations

import html
import re

ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][A-Z0-9]|\x1b[=>]")
COMPOSE_PREFIX = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*(?:[-_][0-9]+)? {1,40}\| ")
ENTITY = re.compile(r"&(?:quot|amp|lt|gt|apos|nbsp|#[0-9]{1,6}|#x[0-9a-fA-F]{1,5});")
MIN_WRAP_WIDTH = 60
MIN_WRAPPED_LINES = 3


def clean_line(line: str) -> str:
    """One line without colour codes, HTML entities or a docker-compose prefix."""
    if "\x1b" in line:
        line = ANSI.sub("", line)
    if "&" in line and ENTITY.search(line):
        line = html.unescape(line)
    if " | " in line[:60]:
        line = COMPOSE_PREFIX.sub("", line, count=1)
    return line.rstrip("\r")


def wrap_width(lines: list[str]) -> int | None:
    """The width a pasted text was hard-wrapped at: the longest line length, when at least
    three lines have exactly it (a wrap leaves many lines of one length); else None.
    """
    lengths = [len(line) for line in lines if line]
    if not lengths:
        return None
    width = max(lengths)
    if width < MIN_WRAP_WIDTH or lengths.count(width) < MIN_WRAPPED_LINES:
        return None
    return width


def clean_lines(text: str) -> list[tuple[int, str]]:
    """(number of the line in the input, cleaned text) for every line, wrapped lines joined."""
    raw = text.splitlines()
    lines = [clean_line(line) for line in raw]
    width = wrap_width([line.rstrip("\r") for line in raw])
    out: list[tuple[int, str]] = []
    joining = False
    for number, (original, line) in enumerate(zip(raw, lines, strict=True), 1):
        if joining and out:
            first, joined = out[-1]
            out[-1] = (first, joined + line)
        else:
            out.append((number, line))
        joining = width is not None and len(original.rstrip("\r")) == width
    return out
