"""Chinese (and Japanese) text for FTS5: overlapping bigrams, because unicode61 does not split CJK.

FTS5's unicode61 tokenizer keeps a run such as 显存不足 as one token, so a search for 显存 would
not find it. Both sides are therefore written as grams: the document 显存不足 is indexed as
"显 存 不 足 显存 存不 不足", and the query 显存 becomes the gram "显存".
"""

from __future__ import annotations

import re
from functools import lru_cache

CJK_CHARS = (
    "\u3040-\u30ff"  # hiragana, katakana
    "\u3400-\u4dbf"  # CJK extension A
    "\u4e00-\u9fff"  # CJK unified ideographs
    "\uf900-\ufaff"  # compatibility ideographs
)
CJK_RUN = re.compile(f"[{CJK_CHARS}]+")


def has_cjk(text: str) -> bool:
    return CJK_RUN.search(text) is not None


def run_grams(run: str) -> list[str]:
    """Bigrams of one CJK run; a one-character run is its own gram."""
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


def document_grams(text: str) -> str:
    """Every single character and bigram of every CJK run, space-separated, for indexing."""
    grams: list[str] = []
    for run in CJK_RUN.findall(text):
        if len(run) > 1:
            grams.extend(run)
        grams.extend(run_grams(run))
    return " ".join(grams)


@lru_cache(maxsize=1)
def _script_boundary() -> re.Pattern:
    # compiled on first use: only indexing needs it, and a search should start fast
    return re.compile(f"(?<=[A-Za-z0-9])(?=[{CJK_CHARS}])|(?<=[{CJK_CHARS}])(?=[A-Za-z0-9])")


def separate_scripts(text: str) -> str:
    """'TTFT高' -> 'TTFT 高', so the Latin word is its own token for FTS5 (the query does the same)."""
    return _script_boundary().sub(" ", text)
