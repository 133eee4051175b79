"""The front matter's lines that hold an entry back, never evidence for it.

`ruled_out_by`: lines its cause never prints (a guess from an error's words alone stays a guess
beside one); `overruled_by`: lines that, anywhere in the input, say the entry's own signature
lines mean another cause (its signature match stays a guess). explain and diagnose's
log-signatures read them here, compiled once by RE2 (linear time, as every team-written pattern).
"""

from __future__ import annotations

from llmdoctor.wiki.entry import HOLDING_KEYS
from llmdoctor.wiki.signatures import InvalidSignature, compile_problem, signature_line

_COMPILED: dict[tuple[str, ...], list] = {}


def holding_patterns(entry, key: str = "ruled_out_by") -> list:
    """The entry's `key` patterns compiled by RE2; one that does not compile, or would match
    every line, is left out and named by `unusable_holding_patterns`."""
    patterns = tuple(getattr(entry, key, ()) or ())
    if patterns not in _COMPILED:
        from llmdoctor.wiki.re2_patterns import line_pattern

        usable = [p for p in patterns if isinstance(p, str) and compile_problem(p) is None]
        _COMPILED[patterns] = [line_pattern(p) for p in usable]
    return _COMPILED[patterns]


def unusable_holding_patterns(entries: dict) -> list[InvalidSignature]:
    """The holding patterns left out, and why: said with the result, as an unusable signature
    is, so a team does not rely on a rule that is not applied."""
    unusable = []
    for entry in entries.values():
        for key in HOLDING_KEYS:
            for pattern in getattr(entry, key, ()) or ():
                why = compile_problem(pattern) if isinstance(pattern, str) else "it is not text"
                if why:
                    path = str(getattr(entry, "path", "") or "")
                    at = signature_line(path, pattern) if path and isinstance(pattern, str) else 0
                    unusable.append(
                        InvalidSignature(entry.id, str(pattern), why, path, at, f"{key} pattern")
                    )
    return unusable
