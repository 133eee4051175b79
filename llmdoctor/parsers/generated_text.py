"""Whether a generation is language at all.

NaN logits leave the sampler nothing to choose from, and it falls back to token 0: in the Qwen
and Llama-3 vocabularies that is `!`, so a broken server answers 200 with `!!!!!!!!!!!!!!!!`;
llama.cpp-based servers answer `GGGGGGGG` (runbooks/nan-or-garbage-output.md). A probe that
reads such a stream must not count it as a working server.
"""

from __future__ import annotations

import unicodedata

MIN_RUN = 8  # characters: a real answer to the probe's prompt never is one character 8 times
NOT_TEXT = {"Cc", "Cf", "Co", "Cn", "Cs"}  # control, format, private use, unassigned, surrogate


def degenerate(text: str) -> str | None:
    """Why `text` is not language (one character repeated, only undecodable or control
    characters), or None. `'!!!!!!!!!!!!!!!!'` -> "one character repeated: '!' x16"."""
    visible = [c for c in text if not c.isspace()]
    if len(visible) >= MIN_RUN and len(set(visible)) == 1:
        return f"one character repeated: {visible[0]!r} x{len(visible)}"
    if visible and all(c == "\ufffd" or unicodedata.category(c) in NOT_TEXT for c in visible):
        return "only undecodable or control characters"
    return None
