"""Runbook signatures as programs for the site's page, run there by a Pike VM (search.js's
`matchesProgram`): a set of NFA states stepped over the line once, so a search costs at most
(line length x program size) steps whatever a team's signature is. JavaScript's own `RegExp`
backtracks: `(a|aa)+$` on a pasted line froze every reader's tab.

A program is a list of instructions, each a JSON array:

    97                                      the code point 97 (a literal: most instructions)
    ["c", [lo, hi, lo, hi, ...], negated]   one code point in (or, negated, not in) the ranges
    ["s", x, y]                             go on at both x and y
    ["j", x]                                go on at x
    ["a", "^" | "$" | "b" | "B"]             start, end, word boundary, not a boundary
    ["m"]                                   a match

Semantics are RE2's (the CLI matches signatures with RE2): `.` is any code point but a newline,
`\\d \\s \\w` and `\\b` are ASCII. A signature using what RE2 and `grep -E` do not have either
(back-references, lookarounds, inline flags, possessive repeats) gets no program: the page
leaves it to `llmdoctor wiki search` and `explain`, as does one over MAX_INSTRUCTIONS.
"""

from __future__ import annotations

MAX_INSTRUCTIONS = 4000
MAX_CODE_POINT = 0x10FFFF
_ASCII = {
    "digit": [(48, 57)],
    "space": [(9, 10), (12, 13), (32, 32)],  # RE2's \s: [\t\n\f\r ]
    "word": [(48, 57), (65, 90), (95, 95), (97, 122)],
}


class Unsupported(Exception):
    """A signature the page's matcher does not run (the CLI still does)."""


def signature_program(signature: str) -> list | None:
    """The page's program for one signature, or None when it cannot have one."""
    import re._constants as c
    import re._parser as parser

    from llmdoctor.wiki.re2_patterns import line_pattern

    if "[:" in signature or line_pattern(signature) is None:
        return None  # POSIX classes parse differently in Python; what RE2 refuses, the CLI does
    try:
        parsed = parser.parse(signature)
    except Exception:  # `wiki lint` reports a signature that does not compile
        return None
    if parsed.state.flags & ~(c.SRE_FLAG_UNICODE):
        return None
    builder = _Builder(c)
    try:
        builder.sequence(list(parsed))
        builder.emit(["m"])
    except (Unsupported, RecursionError):
        return None
    return builder.program


def _negate(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out, start = [], 0
    for lo, hi in sorted(ranges):
        if lo > start:
            out.append((start, lo - 1))
        start = max(start, hi + 1)
    if start <= MAX_CODE_POINT:
        out.append((start, MAX_CODE_POINT))
    return out


def _merge(ranges: list[tuple[int, int]]) -> list[int]:
    flat: list[int] = []
    for lo, hi in sorted(ranges):
        if flat and lo <= flat[-1] + 1:
            flat[-1] = max(flat[-1], hi)
        else:
            flat += [lo, hi]
    return flat


class _Builder:
    def __init__(self, constants):
        self.c = constants
        self.program: list = []

    def emit(self, instruction: list | int) -> int:
        if len(self.program) >= MAX_INSTRUCTIONS:
            raise Unsupported("too large")
        self.program.append(instruction)
        return len(self.program) - 1

    def sequence(self, items: list) -> None:
        for op, arg in items:
            self.node(op, arg)

    def category(self, name) -> list[tuple[int, int]]:
        c = self.c
        table = {
            c.CATEGORY_DIGIT: ("digit", False),
            c.CATEGORY_NOT_DIGIT: ("digit", True),
            c.CATEGORY_SPACE: ("space", False),
            c.CATEGORY_NOT_SPACE: ("space", True),
            c.CATEGORY_WORD: ("word", False),
            c.CATEGORY_NOT_WORD: ("word", True),
        }
        if name not in table:
            raise Unsupported(str(name))
        key, negated = table[name]
        return _negate(_ASCII[key]) if negated else list(_ASCII[key])

    def char_class(self, items: list) -> None:
        c = self.c
        ranges: list[tuple[int, int]] = []
        negated = False
        for op, arg in items:
            if op is c.NEGATE:
                negated = True
            elif op is c.LITERAL:
                ranges.append((arg, arg))
            elif op is c.RANGE:
                ranges.append(arg)
            elif op is c.CATEGORY:
                ranges += self.category(arg)
            else:
                raise Unsupported(str(op))
        self.emit(["c", _merge(ranges), negated])

    def node(self, op, arg) -> None:
        c = self.c
        if op is c.LITERAL:
            self.emit(arg)
        elif op is c.NOT_LITERAL:
            self.emit(["c", [arg, arg], True])
        elif op is c.ANY:
            self.emit(["c", [10, 10], True])
        elif op is c.IN:
            self.char_class(arg)
        elif op is c.SUBPATTERN:
            _group, add_flags, del_flags, pattern = arg
            if add_flags or del_flags:
                raise Unsupported("inline flags")
            self.sequence(list(pattern))
        elif op is c.BRANCH:
            self.branch(arg[1])
        elif op in (c.MAX_REPEAT, c.MIN_REPEAT):
            self.repeat(*arg)
        elif op is c.AT:
            anchors = {
                c.AT_BEGINNING: "^",
                c.AT_BEGINNING_STRING: "^",
                c.AT_END: "$",
                c.AT_END_STRING: "$",
                c.AT_BOUNDARY: "b",
                c.AT_NON_BOUNDARY: "B",
            }
            if arg not in anchors:
                raise Unsupported(str(arg))
            self.emit(["a", anchors[arg]])
        else:  # back-references, lookarounds, atomic groups, possessive repeats
            raise Unsupported(str(op))

    def branch(self, alternatives: list) -> None:
        jumps = []
        for n, alternative in enumerate(alternatives):
            if n < len(alternatives) - 1:
                split = self.emit(["s", 0, 0])
                self.program[split][1] = split + 1
                self.sequence(list(alternative))
                jumps.append(self.emit(["j", 0]))
                self.program[split][2] = len(self.program)
            else:
                self.sequence(list(alternative))
        for jump in jumps:
            self.program[jump][1] = len(self.program)

    def repeat(self, low: int, high, pattern) -> None:
        body = list(pattern)
        for _ in range(low):
            self.sequence(body)
        if high == self.c.MAXREPEAT:
            split = self.emit(["s", 0, 0])
            self.program[split][1] = split + 1
            self.sequence(body)
            self.emit(["j", split])
            self.program[split][2] = len(self.program)
            return
        splits = []
        for _ in range(high - low):
            split = self.emit(["s", 0, 0])
            self.program[split][1] = split + 1
            splits.append(split)
            self.sequence(body)
        for split in splits:
            self.program[split][2] = len(self.program)
