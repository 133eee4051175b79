"""Which signatures cannot tell one ASCII digit from another (RE2 syntax).

A signature is *digit-blind* when every atom in it (a literal, a class, `.`, an escape) holds
either all ten ASCII digits or none of them. Such a signature matches a line exactly when it
matches the line with every digit replaced by `0` (`DIGITS_TO_ZERO`): its automaton moves the same
way on any digit, and the assertions (`^ $ \\b \\B`) see digits only as word characters. So the
lines of a crash loop (`Tried to allocate 20.00 MiB`, `... 900.00 MiB`) can be matched once per
shape instead of once per line. Counted repetition (`[0-9]{3,}`) is blind: the replacement keeps
a line's length. A literal digit, a range such as `[1-9]`, a hex or octal escape, a Unicode class
(`\\pN`) or anything this reader does not know makes a signature *not* blind; that answer is
always safe (the signature is then matched on every line as it is).
"""

from __future__ import annotations

import re

DIGITS_TO_ZERO = bytes.maketrans(b"123456789", b"000000000")
TEXT_DIGITS_TO_ZERO = str.maketrans("123456789", "000000000")  # the same, for str
_DIGIT_CODES = range(ord("0"), ord("9") + 1)
_REPEAT = re.compile(r"\{[0-9]+(,[0-9]*)?\}")
# escapes that hold all digits (\d \w \S), none (\D \W \s) or are assertions (\b \B \A \z)
_ALL_DIGITS, _NO_DIGITS, _ASSERTIONS = set("dwS"), set("DWs"), set("bBAz")
_CONTROL = {"a": 7, "f": 12, "t": 9, "n": 10, "r": 13, "v": 11}
_PLAIN_ESCAPES = set(_CONTROL)  # control characters, never digits
_POSIX = re.compile(r"\[:\^?[a-z]+:\]")  # each POSIX class holds all digits or none


def digit_blind(pattern: str) -> bool:
    """True when the RE2 pattern provably cannot tell ASCII digits apart (module docstring)."""
    return all(kind == "blind" for _, _, kind in _atoms(pattern))


def digit_blind_cover(pattern: str) -> str | None:
    """A digit-blind pattern that matches every line `pattern` matches (each literal digit and
    each class holding some digits widened to all ten), or None when the pattern holds an atom
    this reader cannot widen (a negated class holding some digits, an escape written in hex,
    octal or a Unicode class).
    A line whose digits written 0 this cover does not match cannot match the pattern.
    """
    out = []
    for start, end, kind in _atoms(pattern):
        text = pattern[start:end]
        if kind == "blind":
            out.append(text)
        elif kind == "digit":
            out.append("[0-9]")
        elif kind == "class" and not text.startswith("[^"):
            # the ten digits first (after a leading `]`, which is a literal there)
            body = text[1:-1]
            lead = "]" if body.startswith("]") else ""
            out.append(f"[{lead}0-9{body[len(lead) :]}]")
        else:  # a negated class holding some digits, or an atom not read
            return None
    return "".join(out)


def _atoms(pattern: str) -> list[tuple[int, int, str]]:
    """The pattern cut into (start, end, kind): "blind" (holds all digits or none, or is no
    atom), "digit" (a literal digit), "class" (a class holding some digits, not all) or
    "unknown" (the rest of the pattern, from an atom this reader does not know).
    """
    atoms: list[tuple[int, int, str]] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            if i + 1 >= n:
                return [*atoms, (i, n, "unknown")]
            e = pattern[i + 1]
            if e == "Q":  # \Q...\E: literal text
                end = pattern.find("\\E", i + 2)
                quoted = pattern[i + 2 : n if end < 0 else end]
                if any(ch.isdigit() for ch in quoted):
                    return [*atoms, (i, n, "unknown")]
                atoms.append((i, n if end < 0 else end + 2, "blind"))
                i = n if end < 0 else end + 2
                continue
            if e in _ALL_DIGITS or e in _NO_DIGITS or e in _ASSERTIONS or e in _PLAIN_ESCAPES:
                atoms.append((i, i + 2, "blind"))
            elif e.isalnum() or not e.isascii():  # \x41 \p{N} \123 \C ...: not worth reading
                return [*atoms, (i, n, "unknown")]
            else:
                atoms.append((i, i + 2, "blind"))  # an escaped punctuation character
            i += 2
            continue
        if c == "[":
            end = _class_end(pattern, i)
            if end < 0:
                return [*atoms, (i, n, "unknown")]
            blind = _class_blind(pattern[i + 1 : end])
            if blind is None:
                return [*atoms, (i, n, "unknown")]
            atoms.append((i, end + 1, "blind" if blind else "class"))
            i = end + 1
            continue
        if c == "{" and (repeat := _REPEAT.match(pattern, i)):
            # a valid repetition in RE2 is always one (or a compile error)
            atoms.append((i, repeat.end(), "blind"))
            i = repeat.end()
            continue
        if c == "(" and pattern.startswith(("(?P<", "(?<"), i):
            close = pattern.find(">", i)
            if close < 0:
                return [*atoms, (i, n, "unknown")]
            atoms.append((i, close + 1, "blind"))  # a group's name is no atom
            i = close + 1
            continue
        atoms.append((i, i + 1, "digit" if c in "0123456789" else "blind"))
        i += 1
    return atoms


def _class_end(pattern: str, start: int) -> int:
    """Index of the `]` closing the class opened at `start` (-1 when unsure)."""
    i = start + 1
    if pattern.startswith("^", i):
        i += 1
    if pattern.startswith("]", i):  # a leading ] is a literal
        i += 1
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if c == "[" and (posix := _POSIX.match(pattern, i)):
            i = posix.end()
            continue
        if c == "]":
            return i
        i += 1
    return -1


def _class_blind(body: str) -> bool | None:
    """Whether a class body (between the brackets) holds all ASCII digits or none (None: an
    escape this reader does not know)."""
    if body.startswith("^"):
        body = body[1:]  # the complement of a blind class is blind
    whole = False  # an item holding every digit (\d, \w, [:alnum:] ...)
    # (code point, written as an escape) of each single character; None for a class item
    items: list[tuple[int, bool] | None] = []
    i = 0
    while i < len(body):
        c = body[i]
        if c == "[" and (posix := _POSIX.match(body, i)):
            items.append(None)
            i = posix.end()
            continue
        if c == "\\":
            if i + 1 >= len(body):
                return None
            e = body[i + 1]
            if e in _ALL_DIGITS:
                whole = True
                items.append(None)
            elif e in _NO_DIGITS:
                items.append(None)
            elif e in _PLAIN_ESCAPES:
                items.append((_CONTROL[e], True))
            elif e.isascii() and not e.isalnum():
                items.append((ord(e), True))
            else:
                return None
            i += 2
            continue
        items.append((ord(c), False))
        i += 1
    covered: set[int] = set()
    k = 0
    while k < len(items):
        item = items[k]
        dash = items[k + 1] if k + 1 < len(items) else None
        hi = items[k + 2] if k + 2 < len(items) else None
        if item is not None and dash == (ord("-"), False) and hi is not None:
            covered.update(d for d in _DIGIT_CODES if item[0] <= d <= hi[0])
            k += 3
            continue
        if item is not None and item[0] in _DIGIT_CODES:
            covered.add(item[0])
        k += 1
    return whole or len(covered) in (0, 10)
