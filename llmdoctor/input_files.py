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


def _size(n: int) -> str:
    if n >= 1 << 20:
        return f"{n / (1 << 20):.1f}".removesuffix(".0") + " MiB"
    return f"{n / (1 << 10):.1f}".removesuffix(".0") + " KiB"


def _named(label: str, path: str) -> str:
    """`--option path` or, for a variable given as `NAME=`, `NAME=path`."""
    return f"{label}{path}" if label.endswith("=") else f"{label} {path}"


def regular_file(label: str, path: str, max_bytes: int | None = None) -> Path:
    """`path` when it is a readable regular file (at most `max_bytes`); BadInput otherwise,
    one line starting with `label path:` (`NAME=path:` for a label `NAME=`)."""
    p = Path(path)
    try:
        st = p.stat()
    except FileNotFoundError:
        raise BadInput(f"{_named(label, path)}: no such file") from None
    except OSError as exc:
        raise BadInput(f"{_named(label, path)}: cannot be read ({exc.strerror or exc})") from None
    kind = what_it_is(st.st_mode)
    if kind is not None:
        raise BadInput(f"{_named(label, path)}: is {kind}, not a regular file; refusing to read it")
    if max_bytes is not None and st.st_size > max_bytes:
        raise BadInput(
            f"{_named(label, path)}: {_size(st.st_size)} is over the {_size(max_bytes)} cap for this "
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
            f"{_named(label, path)}: over the {_size(max_bytes)} cap; refusing to read it"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadInput(
            f"{_named(label, path)}: not UTF-8 text ({exc.reason} at byte {exc.start})"
        ) from None
