"""What may run past a terminal's width in a report: a Fix's code, a `code span`, a URL and one
unbreakable word (never cut); prose never."""

from __future__ import annotations


def lines_past(lines: list[str], width: int, code: set[str]) -> list[str]:
    """The lines longer than `width` that are none of what may be (`code`: the code lines
    shown, stripped)."""
    return [
        line
        for line in lines
        if len(line) > width
        and line.strip() not in code
        and "`" not in line
        and "://" not in line
        and " " in line.strip()
    ]
