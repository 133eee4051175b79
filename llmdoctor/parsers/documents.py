"""Shape checks for the JSON documents llmdoctor itself writes into a bundle.

A bundle can be assembled by hand, so `vllm/probe.json`, `vllm/health.json`, `node/nvml.json` or
`tokenizer.json` may hold anything: a list, nulls, strings where numbers belong, or a different
file of the same name (a Hugging Face `tokenizer.json`). `require_document` turns such a file into
a skipped check with a reason the reader can act on, instead of a crash or a made-up verdict.
Real input (vllm/probe.json, abridged):

    {"request": {"path": "/v1/completions", "model": "Qwen2-7B-Instruct", "max_tokens": 16},
     "status": 200, "latency_ms": 17053.2, "ttft_ms": 15562.0, "text": " Paris. It is ...",
     "chunks": 16, "finish_reason": "length", "error": null}
"""

from __future__ import annotations

from typing import Any

from llmdoctor.engine.facts import FactMissing, Facts

NUMBER = (int, float)
TEXT = (str,)
OBJECT = (dict,)
LIST = (list,)


def kind_of(value: Any) -> str:
    """A JSON type name for a Python value: 'null', 'string', 'number', 'list', 'object'."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "list" if isinstance(value, list) else "object" if isinstance(value, dict) else "value"


def require_document(
    facts: Facts,
    key: str,
    fields: dict[str, tuple[type, ...]],
    what: str,
    marker: tuple[str, ...] = (),
) -> dict[str, Any]:
    """The JSON object at `key`, checked: each present, non-null field has one of its types.

    `marker` names fields at least one of which must be present (so that a different document
    with the same file name is recognised as not ours). FactMissing says what is wrong.
    """
    doc = facts.require(key)
    if not isinstance(doc, dict):
        raise FactMissing(key, f"is not {what} (a JSON {kind_of(doc)})")
    if marker and not any(m in doc for m in marker):
        raise FactMissing(key, f"is not {what} (none of the fields {', '.join(marker)})")
    for name, types in fields.items():
        value = doc.get(name)
        if value is None:
            continue
        if isinstance(value, bool) and bool not in types:
            value_ok = False
        else:
            value_ok = isinstance(value, types)
        if not value_ok:
            raise FactMissing(
                key, f"is not {what}: {name} is a {kind_of(value)} ({str(value)[:40]!r})"
            )
    return doc
