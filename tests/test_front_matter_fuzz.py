"""Every front-matter field of a runbook entry, fuzzed: whatever value a team writes in any field,
parsing, lint, the cause graph, the runbook fit, explain and the site builder return or say what
is wrong in one line (issue 24: a property-based fuzz of every front-matter field)."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llmdoctor.engine.runbook_fit import fitting_runbooks
from llmdoctor.errors import LlmdoctorError
from llmdoctor.wiki.cause_graph import CauseGraph
from llmdoctor.wiki.entry import EntryError, parse_entry
from llmdoctor.wiki.lint import KNOWN_KEYS, lint_text

ROOT = Path(__file__).resolve().parents[1]
BASE = (ROOT / "runbooks" / "engine-wedged.md").read_text(encoding="utf-8")
_, _, BODY = BASE.partition("\n---\n")
FIELDS = (*KNOWN_KEYS, "unknown_key")

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=200),
    st.sampled_from(["../../etc/passwd", "(a+)+$", "[", "{max_model_len}", "é" * 50, "\x00"]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=6), st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=20,
)


def _document(front: dict) -> str:
    # json is valid YAML (flow style): every value goes in as written, whatever its type
    lines = [f"{key}: {json.dumps(value, ensure_ascii=False)}" for key, value in front.items()]
    return "---\n" + "\n".join(lines) + "\n---\n" + BODY


@settings(
    max_examples=150,
    deadline=10_000,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(field=st.sampled_from(FIELDS), value=values)
def test_any_value_in_any_field_is_read_or_refused_in_one_line(field, value):
    front = yaml.safe_load(BASE.partition("\n---\n")[0].removeprefix("---\n"))
    front[field] = value
    text = _document(front)
    try:
        entry = parse_entry(text, "fuzz.md")
    except (EntryError, LlmdoctorError) as exc:
        assert str(exc) and "\n" not in str(exc).strip()
        entry = None
    linted, problems = lint_text(text, "fuzz.md")
    assert linted is not None or problems
    assert all(p.line >= 1 and p.message for p in problems)
    if entry is not None:
        # what reads front matter downstream never breaks on it either
        entries = {entry.id: entry}
        graph = CauseGraph.from_entries(entries)
        graph.consequences([entry.id, "engine-dead"])
        fitting_runbooks([entry.id], "node", entries, graph)
