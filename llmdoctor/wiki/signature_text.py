"""What text a runbook signature needs in a line, told without compiling it.

The log-scanning engine (llmdoctor.wiki.signatures) finds a few plain-text patterns with bytes.find.
`wiki search` checks the signatures of its best candidates against the pasted text, with RE2
(linear time, whatever a team writes). Loading RE2 costs ~2.5 ms, more than the rest of a typed
search, so a signature is first read as text:

* `plain_text`: most signatures are a quoted message, their punctuation perhaps escaped
  ('Received sigquit from a child process\\. It usually'); such a signature matches a line
  exactly where that text is a substring of it, and no regex engine is needed at all;
* `required_texts`: for any other, the plain runs at its top level that no quantifier makes
  optional ('NCCL WARN Call to ibv_[a-z_]+ failed' needs 'NCCL WARN Call to ibv_' and ' failed');
  a line lacking one of them cannot match, so the signature need not be compiled for it;
* `literal_words`: its words of four ASCII letters or more outside escapes, of which a text must
  hold one (in any case) before the signature is compiled for it.

Both read RE2's syntax conservatively: whatever they do not fully understand (a top-level `|`,
flags such as (?i), \\Q...\\E, \\x and \\p escapes, POSIX classes) yields None or no texts, and the
signature is compiled as before. tests/test_wiki_signature_text.py holds them to RE2.
"""

from __future__ import annotations

METACHARACTERS = frozenset("\\.+*?()|[]{}^$")
ESCAPED_LITERALLY = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^`{|}~")  # ASCII punctuation, not _
# escapes that stand for one character or a position and take no argument (\d, \b, \n ...)
SIMPLE_ESCAPES = frozenset("dDsSwWbBAzntrfva")
QUANTIFIERS = frozenset("?*+{")


def plain_text(signature: str) -> str | None:
    """The text a signature stands for when it is plain text, its punctuation perhaps escaped
    ('CUDA error: out of memory \\(oom\\)'), so that RE2 matches a line exactly where this text
    is a substring of it; None when it uses any other regex syntax."""
    out: list[str] = []
    chars = iter(signature)
    for char in chars:
        if char == "\\":
            char = next(chars, "")
            if char not in ESCAPED_LITERALLY:
                return None
        elif char in METACHARACTERS:
            return None
        out.append(char)
    return "".join(out)


def required_texts(signature: str) -> list[str]:
    """Texts that every line the signature matches holds (case as written); [] when none can
    be told for sure."""
    if "\\Q" in signature or "[:" in signature:
        return []
    runs: list[str] = []
    run: list[str] = []
    end = len(signature)
    i = 0
    while i < end:
        char = signature[i]
        literal = None
        if char == "\\":
            escaped = signature[i + 1 : i + 2]
            if escaped and escaped in ESCAPED_LITERALLY:
                literal = escaped
            elif not escaped or escaped not in SIMPLE_ESCAPES:
                return []  # \x41, \pL, \1, a trailing backslash: not read here
            i += 2
        elif char == "(":
            if _sets_flags(signature, i):
                return []  # (?i) changes how everything after it matches
            close = _group_end(signature, i)
            if close is None:
                return []
            i = close + 1
        elif char == "[":
            close = _class_end(signature, i)
            if close is None:
                return []
            i = close + 1
        elif char == "{":
            close = signature.find("}", i)
            if close < 0:
                return []
            i = close + 1
        elif char in "|)":
            return []  # an alternative at the top level: no text is required
        else:
            if char not in METACHARACTERS:
                literal = char
            i += 1
        if literal is not None and signature[i : i + 1] not in QUANTIFIERS:
            run.append(literal)
        elif run:
            runs.append("".join(run))
            run = []
    if run:
        runs.append("".join(run))
    return runs


def _sets_flags(signature: str, start: int) -> bool:
    """A group such as (?i) or (?-s): flags for the rest of the enclosing group."""
    if not signature.startswith("(?", start):
        return False
    i = start + 2
    while i < len(signature) and (signature[i].isalpha() or signature[i] == "-"):
        i += 1
    return signature[i : i + 1] == ")"


def _group_end(signature: str, start: int) -> int | None:
    """Index of the ) closing the group opened at `start`."""
    depth = 0
    i = start
    while i < len(signature):
        char = signature[i]
        if char == "\\":
            i += 2
            continue
        if char == "[":
            close = _class_end(signature, i)
            if close is None:
                return None
            i = close + 1
            continue
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return None


def _class_end(signature: str, start: int) -> int | None:
    """Index of the ] closing the character class opened at `start` ([]a] and [^]a] hold ])."""
    i = start + 1
    if signature[i : i + 1] == "^":
        i += 1
    if signature[i : i + 1] == "]":
        i += 1
    while i < len(signature):
        if signature[i] == "\\":
            i += 2
            continue
        if signature[i] == "]":
            return i
        i += 1
    return None


_ASCII_LETTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


def literal_words(signature: str) -> list[str]:
    """The runs of four ASCII letters or more in `signature` once each escape (a backslash and
    the character after it, but a newline) is a space: `[A-Za-z]{4,}` found in `\\\\.` replaced."""
    out: list[str] = []
    run: list[str] = []
    chars = iter(signature)
    for char in chars:
        if char == "\\":  # an escape; or a backslash before a newline or at the end, which stay:
            next(chars, None)  # either way no letter (a newline is none either)
            char = " "
        if char in _ASCII_LETTERS:
            run.append(char)
            continue
        if len(run) >= 4:
            out.append("".join(run))
        run = []
    if len(run) >= 4:
        out.append("".join(run))
    return out
