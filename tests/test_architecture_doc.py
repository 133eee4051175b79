"""docs/architecture.md is the repository's own design document, and it stays current."""

from __future__ import annotations

import inspect
import subprocess
from pathlib import Path

from llmdoctor.engine import derive
from llmdoctor.engine.registry import KINDS, SCOPES, check

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")


def test_nothing_cites_a_design_document_the_clone_does_not_have():
    # issue 12: code and README cited DESIGN.md, which lives outside the repository
    tracked = subprocess.run(
        ["git", "ls-files", "*.py", "*.md", "*.toml", "*.yaml"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    citing = [
        name
        for name in tracked
        if name != "tests/test_architecture_doc.py"
        and (ROOT / name).is_file()
        and "DESIGN.md" in (ROOT / name).read_text(encoding="utf-8", errors="replace")
    ]
    assert citing == []
    assert "docs/architecture.md" in (ROOT / "README.md").read_text(encoding="utf-8")


def test_every_derived_fact_key_is_documented():
    derive.load_parsers()
    keys = {d.key for d in derive._DERIVATIONS}
    assert keys and {k for k in keys if f"`{k}`" not in DOC} == set()


def test_the_check_contract_names_every_decorator_argument_scope_and_kind():
    arguments = [p for p in inspect.signature(check).parameters if p not in ("id", "title")]
    for name in (*arguments, *SCOPES, *KINDS):
        assert f"`{name}" in DOC, name


def test_sections_the_issue_asks_for():
    for heading in (
        "flow of data",
        "Fact keys",
        "check contract",
        "Bundle format",
        "Runbook entries",
    ):
        assert heading.lower() in DOC.lower(), heading
    assert "Where the design changed" in DOC
