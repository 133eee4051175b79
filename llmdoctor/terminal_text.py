"""Text from logs, bundles and wikis made safe to print: control characters shown, not obeyed.

A log line may carry an escape sequence that clears the screen or retitles the window, or a
bidi override that makes `rm -rf /` read as something else. Everything llmdoctor prints that
it did not write itself goes through `visible()`: such characters come out as `\\x1b`,
`\\u202e`, … — the evidence stays readable and exact, and the terminal stays the user's.
"""

from __future__ import annotations

_FORMAT_CHARACTERS = (
    0x061C,  # Arabic letter mark
    0x180E,  # Mongolian vowel separator
    0xFEFF,  # byte order mark / zero-width no-break space
    *range(0x200B, 0x2010),  # zero-width space and joiners, LRM, RLM
    0x2028,  # line separator
    0x2029,  # paragraph separator
    *range(0x202A, 0x202F),  # bidi embeddings and overrides
    *range(0x2060, 0x2070),  # word joiner, invisible operators, bidi isolates
)


def _escape(code: int) -> str:
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


_TABLE = {
    code: _escape(code)
    for code in [*range(0x00, 0x20), *range(0x7F, 0xA0), *_FORMAT_CHARACTERS]
    if code != 0x09  # a tab is only spacing
}


def visible(text: object) -> str:
    """`text` as a string with every control and invisible formatting character escaped."""
    return str(text).translate(_TABLE)


def hidden_characters(text: str) -> list[str]:
    """The control and invisible formatting characters in `text`, escaped, in order."""
    return [_TABLE[ord(c)] for c in text if ord(c) in _TABLE]
