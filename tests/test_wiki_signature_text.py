"""The signature texts `wiki search` reads instead of compiling: held to RE2 itself.

plain_text must match exactly where RE2 does; required_texts must never name a text that a line
RE2 matches lacks. Checked on every shipped signature against the real excerpts under
tests/fixtures/runbooks/ and healthy/, and on random signatures built from RE2's syntax.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from llmdoctor.wiki.entry import parse_entry_file
from llmdoctor.wiki.re2_patterns import line_pattern
from llmdoctor.wiki.signature_text import plain_text, required_texts

REPO = Path(__file__).resolve().parents[1]


def shipped_signatures() -> list[str]:
    found = []
    for path in sorted((REPO / "runbooks").glob("*.md")):
        found += parse_entry_file(path).signatures
    return found


def fixture_lines() -> list[str]:
    lines = []
    fixtures = REPO / "tests" / "fixtures"
    for path in sorted([*fixtures.glob("runbooks/*/*"), *fixtures.glob("healthy/*")]):
        if path.is_file() and path.name != "SOURCES.md":
            text = path.read_text(encoding="utf-8", errors="replace")
            lines += [line for line in text.splitlines() if line.strip()]
    return lines


def test_examples():
    assert plain_text(r"Received sigquit from a child process\. It usually") == (
        "Received sigquit from a child process. It usually"
    )
    assert plain_text("fallen off the bus") == "fallen off the bus"
    assert plain_text(r"NCCL [Ee]rror") is None
    assert plain_text(r"a\d") is None
    assert plain_text("trailing\\") is None
    assert required_texts(r"NCCL WARN Call to ibv_[a-z_]+ failed") == [
        "NCCL WARN Call to ibv_",
        " failed",
    ]
    assert required_texts(r"preempted (by|in) PreemptionMode\.(RECOMPUTE|SWAP) mode") == [
        "preempted ",
        " PreemptionMode.",
        " mode",
    ]
    assert required_texts("colou?r") == ["colo", "r"]
    assert required_texts("a{2}b") == ["b"]
    assert required_texts("foo|bar") == []  # either will do
    assert required_texts("(?i)cuda error") == []  # any case will do
    assert required_texts(r"\x41BC") == []
    assert required_texts(r"[[:alpha:]]x") == []
    assert required_texts(r"[]a]x\]") == ["x]"]


def test_shipped_signatures_on_real_excerpts():
    signatures = shipped_signatures()
    lines = fixture_lines()
    assert len(signatures) > 100 and len(lines) > 900
    plain = 0
    for signature in signatures:
        compiled = line_pattern(signature)
        assert compiled is not None, signature
        literal = plain_text(signature)
        needed = required_texts(signature)
        plain += literal is not None
        for line in lines:
            hit = compiled.search(line) is not None
            if literal is not None:
                assert hit == (literal in line), (signature, line)
            if hit:
                assert all(text in line for text in needed), (signature, line)
    assert plain > len(signatures) // 3  # most shipped signatures need no regex engine


PIECES = [
    "a", "b", "ab", "ba", " ", ".", "\\.", "\\(", "\\|", "\\\\", "\\d", "\\s", "\\b", "^", "$",
    "?", "*", "+", "??", "{2}", "{1,2}", "(a|b)", "(ab)?", "(?:b|)", "[ab]", "[^a]", "[]a]",
    "[a-c]", "|", "(", ")", "(?i)", "(?i:a)", "a|b", "{", "}", "]", "é", "显", "\\x61", "\\pL",
    "\\Qa|\\E", "[[:alpha:]]", "1", "-", "_",
]  # fmt: skip


@pytest.mark.parametrize("seed", range(4))
def test_random_signatures_against_re2(seed):
    rng = random.Random(seed)
    alphabet = ["a", "b", "c", "ab", "ba", " ", ".", "(", ")", "|", "\\", "é", "显", "1", "A", "B"]
    checked = 0
    for _ in range(3000):
        signature = "".join(rng.choice(PIECES) for _ in range(rng.randint(1, 6)))
        compiled = line_pattern(signature)
        if compiled is None:
            continue  # RE2 refuses it: search skips it whatever these say
        literal = plain_text(signature)
        needed = required_texts(signature)
        for _ in range(20):
            line = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 10)))
            if literal is not None and rng.random() < 0.5:
                line = line[:2] + literal + line[2:]
            hit = compiled.search(line) is not None
            if literal is not None:
                assert hit == (literal in line), (signature, line)
            if hit:
                checked += 1
                assert all(text in line for text in needed), (signature, needed, line)
    assert checked > 1000
