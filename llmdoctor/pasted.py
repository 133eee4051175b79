"""Undo what terminals, web pages and log shippers do to a pasted log, before it is read.

* ANSI colour and cursor codes (``\\x1b[31mERROR\\x1b[0m``) are removed;
* HTML entities from a copied web page or a JSON-escaped message (``&quot;``, ``&#39;``) are
  decoded;
* docker-compose's ``service-1  | `` prefix is removed;
* a structured log record (Docker's json-file ``{"log": "...\\n", "stream": ...}``, or a JSON
  line with a ``message`` / ``msg`` / ``MESSAGE`` / ``textPayload`` field, as log shippers and
  cloud consoles export them) is replaced by its message, one line per line of the message;
* lines a terminal or a web form wrapped at a fixed width (several lines of exactly the same,
  longest length) are joined back, so a signature split by the wrap matches again.

Line numbers keep pointing at the input: a joined line keeps the number of its first piece.
"""

from __future__ import annotations

import html
import json
import re

ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][A-Z0-9]|\x1b[=>]")
COMPOSE_PREFIX = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*(?:[-_][0-9]+)? {1,40}\| ")
ENTITY = re.compile(r"&(?:quot|amp|lt|gt|apos|nbsp|#[0-9]{1,6}|#x[0-9a-fA-F]{1,5});")
# the fields that hold the message in Docker's json-file, journald's JSON export, Fluent Bit /
# Vector / Loki records and Cloud Logging (GKE) exports, in that order of preference
MESSAGE_FIELDS = ("log", "message", "msg", "MESSAGE", "textPayload")
MAX_RECORD_CHARS = 64 * 1024  # a longer line is kept as it is, never parsed
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


def record_message(line: str) -> list[str] | None:
    """The lines of a JSON log record's message, or None when the line is not such a record."""
    text = line.strip()
    if not (text.startswith("{") and text.endswith("}")) or len(text) > MAX_RECORD_CHARS:
        return None
    try:
        record = json.loads(text)
    except ValueError:
        return None
    if not isinstance(record, dict):
        return None
    for field in MESSAGE_FIELDS:
        message = record.get(field)
        if isinstance(message, str):
            return message.rstrip("\n").split("\n")
    return None


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
        message = record_message(original) if original.lstrip()[:1] == "{" else None
        if message is not None:  # a record keeps its line number for each of its lines
            out.extend((number, clean_line(piece)) for piece in message)
            joining = False
            continue
        if joining and out:
            first, joined = out[-1]
            out[-1] = (first, joined + line)
        else:
            out.append((number, line))
        joining = width is not None and len(original.rstrip("\r")) == width
    return out
