"""Small input files named by an option or a variable: a regular file of sane size, or a
one-line refusal (BadInput) that says what the path is instead (a device, a FIFO, a folder).

A device such as /dev/zero never ends, a FIFO without a writer blocks forever: neither is
opened. What is read is read with a cap, so a file that grows while it is read cannot blow up
memory either.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

from llmdoctor.errors import BadInput


def what_it_is(mode: int) -> str | None:
    """'a folder' / 'a device' / 'a named pipe (FIFO)' / 'a socket' for a mode that is not a
    regular file, else None."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def human_size(n: int) -> str:
    """'64 MiB', '1.5 KiB', '512 bytes': sizes in the one-line messages."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.1f}".removesuffix(".0") + f" {unit}"
    return f"{n} bytes"


def _named(label: str, path: str) -> str:
    """`--option path`, `NAME=path` for a variable given as `NAME=`, or the bare path."""
    if not label:
        return path
    return f"{label}{path}" if label.endswith("=") else f"{label} {path}"


def stat_of(label: str, path: str, missing: str = "no such file") -> os.stat_result:
    """The stat of a path the user named, or BadInput, one line: `label path: no such file`
    (or `missing`), `label path: cannot be read (why)`."""
    try:
        return Path(path).stat()
    except FileNotFoundError:
        raise BadInput(f"{_named(label, path)}: {missing}") from None
    except OSError as exc:
        raise BadInput(f"{_named(label, path)}: cannot be read ({exc.strerror or exc})") from None


def regular_file(label: str, path: str, max_bytes: int | None = None) -> Path:
    """`path` when it is a readable regular file (at most `max_bytes`); BadInput otherwise,
    one line starting with `label path:` (`NAME=path:` for a label `NAME=`)."""
    p = Path(path)
    st = stat_of(label, path)
    kind = what_it_is(st.st_mode)
    if kind is not None:
        raise BadInput(f"{_named(label, path)}: is {kind}, not a regular file; refusing to read it")
    if max_bytes is not None and st.st_size > max_bytes:
        raise BadInput(
            f"{_named(label, path)}: {human_size(st.st_size)} is over the {human_size(max_bytes)} cap for this "
            "file; refusing to read it"
        )
    if not os.access(p, os.R_OK):
        raise BadInput(f"{_named(label, path)}: cannot be read (permission denied)")
    return p


def read_small_text(label: str, path: str, max_bytes: int) -> str:
    """The UTF-8 text of a regular file of at most `max_bytes`, or BadInput (one line)."""
    p = regular_file(label, path, max_bytes)
    try:
        with open(p, "rb") as fh:
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        raise BadInput(f"{_named(label, path)}: cannot be read ({exc.strerror or exc})") from None
    if len(data) > max_bytes:
        raise BadInput(
            f"{_named(label, path)}: over the {human_size(max_bytes)} cap; refusing to read it"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadInput(
            f"{_named(label, path)}: not UTF-8 text ({exc.reason} at byte {exc.start})"
        ) from None


def read_small_json(label: str, path: str, max_bytes: int) -> Any:
    """The parsed JSON of a regular file of at most `max_bytes`, or BadInput (one line)."""
    import json

    text = read_small_text(label, path, max_bytes)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadInput(
            f"{_named(label, path)}: not valid JSON (line {exc.lineno}: {exc.msg})"
        ) from None
    except RecursionError:
        raise BadInput(f"{_named(label, path)}: JSON nested too deeply to read") from None
