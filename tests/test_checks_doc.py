"""docs/checks.md lists every registered check, and only those, with its scope, title and runbooks."""

from __future__ import annotations

import re
from pathlib import Path

from llmdoctor.engine.registry import all_checks

DOC = Path(__file__).resolve().parents[1] / "docs" / "checks.md"
ROW = re.compile(r"^\| `([a-z0-9-]+)` \|", re.M)


def _builtin():
    # a site's --checks-dir checks, loaded by other tests in this process, are not built in
    return [s for s in all_checks() if s.fn.__module__.startswith("llmdoctor.checks.")]


def _row(spec) -> str:
    runbooks = ", ".join(f"`{r}`" for r in spec.runbooks) or "—"
    return f"| `{spec.id}` | {spec.scope} | {spec.title} | {runbooks} |"


def test_every_registered_check_is_in_the_doc_and_every_listed_check_is_registered():
    # a check added in code but not documented, or a documented check that is gone, fails here
    text = DOC.read_text(encoding="utf-8")
    listed = ROW.findall(text)
    registered = [spec.id for spec in _builtin()]
    assert len(listed) == len(set(listed)), "a check is listed twice"
    assert sorted(set(registered) - set(listed)) == [], "add these rows to docs/checks.md"
    assert sorted(set(listed) - set(registered)) == [], "no such check: remove these rows"


def test_each_row_says_what_the_code_says():
    # a retitled check or a new runbook link must change its row (the expected row is printed)
    lines = set(DOC.read_text(encoding="utf-8").splitlines())
    stale = [_row(spec) for spec in _builtin() if _row(spec) not in lines]
    assert stale == []
