"""What the index holds for one runbook entry: display fields plus the searched text columns.

Section text is cleaned for searching and snippets (no code fences, links as their text);
Chinese is added as bigrams (llmdoctor.wiki.cjk); signatures are reduced to their literal words.
"""

from __future__ import annotations

import json
import re

from llmdoctor.wiki.cjk import document_grams, separate_scripts
from llmdoctor.wiki.query import exact_name

_FENCE = re.compile(r"^\s*(```|~~~).*$", re.MULTILINE)
_LINK = re.compile(r"\[([^\]\n]*)\]\([^)\n]*\)")
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_REGEX_CLASS = re.compile(r"\[(?:\\.|[^\]\\])*\]|\{\d*,?\d*\}|\(\?[:=!<>P]*|\\[dDsSwWbBAZ]")


def clean_markdown(text: str) -> str:
    """Section text as it is searched and shown in snippets: no fences, links as their text."""
    text = _COMMENT.sub(" ", text)
    text = _FENCE.sub("", text)
    return separate_scripts(_LINK.sub(r"\1", text)).strip()


def signature_words(pattern: str) -> str:
    """The literal words of a signature regex ('CUDA out of memory\\. Tried' -> plain words)."""
    return _REGEX_CLASS.sub(" ", pattern).replace("\\", "")


def document_row(entry, overrides: list[str]) -> dict:
    """One row of `docs` (and so of the FTS table) for a runbook entry."""
    symptom = clean_markdown(entry.symptom)
    cause = clean_markdown(entry.cause)
    fix = clean_markdown("\n\n".join(s for s in (entry.fix, entry.verify) if s))
    heads = " ".join([entry.title, *entry.aliases, *entry.tags])
    return {
        "id": entry.id,
        "heading": entry.title,
        "path": str(entry.path),
        "severity": entry.severity,
        "tags_json": json.dumps(entry.tags, ensure_ascii=False),
        "aliases_json": json.dumps(entry.aliases, ensure_ascii=False),
        # signatures only: a hint is weak evidence, neither a first-tier search hit nor, by its
        # words, text that names the entry (explain would read a cut hint line as proof)
        "signature_lines": "\n".join(" ".join(s.splitlines()) for s in entry.signatures),
        "detected_by_json": json.dumps(entry.detected_by, ensure_ascii=False),
        "overrides_json": json.dumps(overrides, ensure_ascii=False),
        # the id, title and aliases as a typed query is compared with them (one per line)
        "exact_names": "\n".join(
            sorted({exact_name(n) for n in [entry.id, entry.title, *entry.aliases]})
        ),
        "name": entry.id.replace("-", " ").replace("_", " "),
        "title": separate_scripts(entry.title),
        "aliases": separate_scripts(" ; ".join(entry.aliases)),
        "tags": separate_scripts(" ".join(entry.tags)),
        "symptom": symptom,
        "signatures": " ; ".join(signature_words(s) for s in entry.signatures),
        "cause": cause,
        "fix": fix,
        "cjk_title": document_grams(heads),
        "cjk_text": document_grams("\n".join([symptom, cause, fix])),
    }
