"""Match runbook signatures (one-line regexes) against logs, streaming, with line numbers.

One combined regex finds candidate lines in large blocks of text; each candidate line is then
checked against every signature alone, so results are exactly those of per-line `re.search`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from llmdoctor.textsource import TextSource

BLOCK_CHARS = 4 * 1024 * 1024


@dataclass(frozen=True)
class LineMatch:
    """A log line on which one or more entries' signatures fired."""

    line: int
    text: str
    entry_ids: tuple[str, ...]


class SignatureSet:
    """The compiled signatures of a set of runbook entries."""

    def __init__(self, entries: Iterable):
        self.patterns: list[tuple[str, re.Pattern]] = []
        self.invalid: list[tuple[str, str, str]] = []  # (entry id, signature, error)
        for entry in entries:
            for sig in entry.signatures:
                try:
                    self.patterns.append((entry.id, re.compile(sig)))
                except re.error as exc:
                    self.invalid.append((entry.id, sig, str(exc)))
        combined = "|".join(f"(?:{p.pattern})" for _, p in self.patterns)
        self._combined = re.compile(combined, re.MULTILINE) if combined else None

    def __bool__(self) -> bool:
        return bool(self.patterns)

    def match_line(self, text: str) -> tuple[str, ...]:
        """Ids of the entries whose signatures match this one line, in registration order."""
        ids: list[str] = []
        for entry_id, pattern in self.patterns:
            if entry_id not in ids and pattern.search(text):
                ids.append(entry_id)
        return tuple(ids)

    def scan_text(self, text: str, first_line: int = 1) -> Iterator[LineMatch]:
        """Every matching line of a block of text (complete lines), with 1-based numbers."""
        if self._combined is None:
            return
        search = self._combined.search
        pos = 0
        counted_to = 0
        line_no = first_line
        while True:
            m = search(text, pos)
            if m is None:
                return
            start = text.rfind("\n", 0, m.start()) + 1
            end = text.find("\n", m.start())
            if end < 0:
                end = len(text)
            line_no += text.count("\n", counted_to, start)
            counted_to = start
            line = text[start:end].rstrip("\r")
            ids = self.match_line(line)
            if ids:
                yield LineMatch(line_no, line, ids)
            pos = end + 1
            if pos > len(text):
                return

    def scan(self, source: TextSource) -> Iterator[LineMatch]:
        """Stream a log in blocks of whole lines; memory stays flat whatever the size."""
        if self._combined is None:
            return
        if source.text is not None:
            yield from self.scan_text(source.text)
            return
        assert source.path is not None
        line_no = 1
        carry = ""
        with open(source.path, encoding="utf-8", errors="replace", newline="") as fh:
            while True:
                block = fh.read(BLOCK_CHARS)
                if not block:
                    break
                block = carry + block
                cut = block.rfind("\n")
                if cut < 0:
                    carry = block
                    continue
                carry = block[cut + 1 :]
                whole = block[: cut + 1]
                yield from self.scan_text(whole, line_no)
                line_no += whole.count("\n")
        if carry:
            yield from self.scan_text(carry, line_no)
