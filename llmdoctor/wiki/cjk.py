"""Chinese (and Japanese) text for FTS5: overlapping bigrams, because unicode61 does not split CJK.

FTS5's unicode61 tokenizer keeps a run such as 显存不足 as one token, so a search for 显存 would
not find it. Both sides are therefore written as grams: the document 显存不足 is indexed as
"显 存 不 足 显存 存不 不足", and the query 显存 becomes the gram "显存".

The regexes here are compiled on first use, not at import: compiling the CJK character class
costs ~1.5 ms (Python builds a 64K-entry bitmap for it), paid anew by every `wiki search`
process, and a query of plain ASCII never needs it.
"""

from __future__ import annotations

from llmdoctor.lazy_regex import compiled

TYPE_CHECKING = False
if TYPE_CHECKING:
    import re

CJK_RANGES = (
    (0x3040, 0x30FF),  # hiragana, katakana
    (0x3400, 0x4DBF),  # CJK extension A
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0xF900, 0xFAFF),  # compatibility ideographs
)
CJK_CHARS = "".join(f"{chr(lo)}-{chr(hi)}" for lo, hi in CJK_RANGES)
# words this long or longer are cut by the compiled regex; shorter ones character by character
REGEX_MIN_CHARS = 64


def cjk_run() -> re.Pattern:
    """A run of CJK characters."""
    return compiled(f"[{CJK_CHARS}]+")


def is_cjk(char: str) -> bool:
    code = ord(char)
    return any(lo <= code <= hi for lo, hi in CJK_RANGES)


def has_cjk(text: str) -> bool:
    return not text.isascii() and cjk_run().search(text) is not None


def split_runs(word: str) -> tuple[list[str], list[str]]:
    """(the pieces of `word` outside CJK runs, its CJK runs), each in order: 'A显存B' ->
    (['A', 'B'], ['显存'])."""
    if word.isascii():
        return [word] if word else [], []
    if len(word) >= REGEX_MIN_CHARS:
        pattern = cjk_run()
        return [p for p in pattern.split(word) if p], pattern.findall(word)
    other: list[str] = []
    runs: list[str] = []
    start, in_run = 0, None
    for n, char in enumerate(word):
        cjk = is_cjk(char)
        if cjk is not in_run:
            if n > start:
                (runs if in_run else other).append(word[start:n])
            start, in_run = n, cjk
    if len(word) > start:
        (runs if in_run else other).append(word[start:])
    return other, runs


def run_grams(run: str) -> list[str]:
    """Bigrams of one CJK run; a one-character run is its own gram."""
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


def document_grams(text: str) -> str:
    """Every single character and bigram of every CJK run, space-separated, for indexing."""
    grams: list[str] = []
    for run in cjk_run().findall(text):
        if len(run) > 1:
            grams.extend(run)
        grams.extend(run_grams(run))
    return " ".join(grams)


def _script_boundary() -> re.Pattern:
    return compiled(f"(?<=[A-Za-z0-9])(?=[{CJK_CHARS}])|(?<=[{CJK_CHARS}])(?=[A-Za-z0-9])")


def separate_scripts(text: str) -> str:
    """'TTFT高' -> 'TTFT 高', so the Latin word is its own token for FTS5 (the query does the same)."""
    return _script_boundary().sub(" ", text)
