"""Log text as a fact: iterated line by line, never loaded whole when it lives in a file."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

MAX_LINE_CHARS = 1024 * 1024  # lines() cuts a longer line here
UTF8_BOM = b"\xef\xbb\xbf"  # Windows editors start a saved log with it: no part of its first line


def split_log_lines(text: str) -> list[str]:
    """A log's lines as `grep -n` and the block scanner count them: broken at `\n` only, each
    without its trailing `\r`. A lone `\r` (a progress bar's redraw, in nearly every start-up
    log) or a form feed inside binary noise is part of its line, so line numbers point at the
    input for every check alike (`str.splitlines` breaks at eleven characters)."""
    lines = text.split("\n")
    if lines and not lines[-1]:
        lines.pop()
    return [line.rstrip("\r") for line in lines]


@dataclass(frozen=True)
class TextSource:
    """A log held either in memory (`text`) or in a file (`path`), read lazily.

    Lines are yielded without their trailing newline, at most MAX_LINE_CHARS long; undecodable
    bytes are replaced, so a binary blob inside a log never stops a scan.
    """

    name: str
    path: Path | None = None
    text: str | None = None

    @classmethod
    def from_text(cls, name: str, text: str) -> TextSource:
        return cls(name=name, text=text)

    @classmethod
    def from_file(cls, name: str, path: str | Path) -> TextSource:
        return cls(name=name, path=Path(path))

    def lines(self) -> Iterator[str]:
        """The lines as `split_log_lines` breaks them (at `\n` only)."""
        if self.text is not None:
            yield from split_log_lines(self.text)
            return
        assert self.path is not None
        with open(self.path, "rb") as fh:
            while raw := fh.readline(MAX_LINE_CHARS):
                if len(raw) == MAX_LINE_CHARS and not raw.endswith(b"\n"):
                    # an over-long line is cut here; its rest is skipped, never held whole
                    while (rest := fh.readline(MAX_LINE_CHARS)) and not rest.endswith(b"\n"):
                        pass
                yield raw.decode("utf-8", "replace").rstrip("\r\n")

    def open_binary(self):
        """A binary file object over the text, for chunked scanners."""
        if self.text is not None:
            import io

            return io.BytesIO(self.text.encode("utf-8", errors="replace"))
        assert self.path is not None
        return open(self.path, "rb")

    def read_text(self, limit: int | None = None) -> str:
        """The whole text (or its first `limit` characters); only for small logs."""
        if self.text is not None:
            return self.text if limit is None else self.text[:limit]
        assert self.path is not None
        with open(self.path, encoding="utf-8", errors="replace") as fh:
            return fh.read() if limit is None else fh.read(limit)

    def size_bytes(self) -> int:
        if self.text is not None:
            return len(self.text.encode("utf-8", errors="replace"))
        assert self.path is not None
        return self.path.stat().st_size
