"""The query's hand-written cuts of ASCII text, held to the regexes that define them.

`wiki search` cuts plain ASCII text without `re` (importing it is ~5 ms of a ~25 ms search;
tests/test_wiki_imports.py checks that it is not imported), so each scan in
llmdoctor/wiki/query.py must give exactly what its regex gives: checked on every line of the real
excerpts under tests/fixtures/ and on random text built from the characters that matter to the
regexes (slashes, colons, quotes, drive letters, hex digits, spaces).
"""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import example, given, settings
from hypothesis import strategies as st

from llmdoctor.wiki import query
from llmdoctor.wiki.entry import parse_entry_file
from llmdoctor.wiki.search import CLOSE, OPEN, first_needle, mark_needles
from llmdoctor.wiki.signature_text import literal_words

REPO = Path(__file__).resolve().parents[1]

WORD = re.compile(query.WORD)
URL = re.compile(query.URL)
PATH = re.compile(query.PATH)
HEXLIKE = re.compile(query.HEXLIKE)
ERRORISH = re.compile(query.ERRORISH, re.IGNORECASE)
FRAME = re.compile(query.TRACEBACK_FRAME)
ESCAPE = re.compile(r"\\.")
LITERAL_WORD = re.compile(r"[A-Za-z]{4,}")

# what the regexes turn on, often enough that random text meets every branch
PIECES = st.sampled_from(
    [
        "/", "\\", ":", "://", "C:", "c:\\", "http", "s3", "x+y.z-", "_", ".", "@", "~", "-", "+",
        " ", "\t", "\x1c", "\x0b", '"', 'File "', '", line ', "12", "0x", "0xdeadbeef",
        "abcdef", "1a2b3c", "a", "Z", "9", "Error", "TIMED OUT", "times out", "xid", "not found",
        "é", "显存", "١",  # a non-ASCII letter, CJK, an Arabic-Indic digit: the regex fallback
    ]
)  # fmt: skip
TEXTS = st.lists(PIECES | st.text(max_size=4), max_size=24).map("".join)


def fixture_lines() -> list[str]:
    lines = []
    fixtures = REPO / "tests" / "fixtures"
    for path in sorted(fixtures.rglob("*")):
        if path.is_file() and path.suffix in {".log", ".txt", ".json", ".xml", ".yaml", ".md"}:
            text = path.read_text(encoding="utf-8", errors="replace")
            lines += text.splitlines()
    return lines


def assert_same_cuts(line: str) -> None:
    assert query.words_in(line) == WORD.findall(line), line
    if line.isascii():
        assert query._without_urls_ascii(line) == URL.sub(" ", line), line
        assert query._without_paths_ascii(line) == PATH.sub(" ", line), line
    assert query._errorish(line) == bool(ERRORISH.search(line)), line
    if "\n" not in line:
        assert query.is_traceback_frame(line) == bool(FRAME.match(line)), line
    assert literal_words(line) == LITERAL_WORD.findall(ESCAPE.sub(" ", line)), line
    for word in WORD.findall(line):
        for form in (word, word.lower()):
            assert query._is_hexlike(form) == bool(HEXLIKE.match(form)), form


def test_the_cuts_equal_the_regexes_on_every_real_line():
    lines = fixture_lines()
    for path in sorted((REPO / "runbooks").glob("*.md")):
        lines += parse_entry_file(path).signatures
    assert len(lines) > 15_000  # the fixtures are there
    for line in lines:
        assert_same_cuts(line)


@settings(max_examples=3000, deadline=None)
@given(TEXTS)
@example("see https://pytorch.org/docs/stable/notes/cuda.html#environment-variables now")
@example("0/8 nodes are available: 8 Insufficient nvidia.com/gpu.")
@example(r"C:\Users\me\model and C:/a/b/ and /a/b/ and //x/y and a://b x://")
@example('  File "/usr/lib/python3.11/site-packages/vllm/engine.py", line 42, in run')
@example("_http://x 1http://y +ftp://z a.b-c+d://e")
@example("NCCL WARN Call to ibv_[a-z_]+ failed\\\nabcd\\\\Word\\")
def test_the_cuts_equal_the_regexes_on_random_text(text):
    assert_same_cuts(text)
    assert_same_cuts(text.replace("\n", " "))
    assert_same_cuts(text * (query.SCAN_MAX_CHARS // max(len(text), 1) + 1))  # WORD's findall


@settings(max_examples=2000, deadline=None)
@given(
    st.lists(st.sampled_from(["显", "存", "不", "足", "a", " "]), max_size=30).map("".join),
    st.lists(st.sampled_from(["显存", "存不", "不足", "显", "足", "显存不足", "a显"]), min_size=1),
)
def test_snippet_needles_are_found_as_the_regex_finds_them(text, needles):
    # a Chinese query's snippet when FTS5 highlighted nothing: needles longest first
    needles = sorted(set(needles), key=len, reverse=True)
    regex = re.compile("|".join(re.escape(n) for n in needles))
    found = regex.search(text)
    assert first_needle(text, needles) == ((found.start(), found.group(0)) if found else None)
    assert mark_needles(text, needles) == regex.sub(lambda m: OPEN + m.group(0) + CLOSE, text)
