"""Every check id and runbook id that code refers to exists."""

from __future__ import annotations

from llmdoctor.engine.registry import SCOPES, all_checks
from llmdoctor.wiki.library import builtin_dir, load_library


def test_every_runbook_a_check_links_to_exists():
    entries = load_library().entries
    missing = {(c.id, rid) for c in all_checks() for rid in c.runbooks if rid not in entries}
    assert not missing, f"checks link to runbooks that do not exist: {sorted(missing)}"


def test_check_ids_are_unique_and_scoped():
    checks = all_checks()
    ids = [c.id for c in checks]
    assert len(ids) == len(set(ids))
    assert all(c.scope in SCOPES for c in checks)
    assert all(c.title for c in checks)


def test_builtin_runbooks_parse_without_errors():
    lib = load_library()
    assert not lib.errors, [str(e) for e in lib.errors]
    assert builtin_dir().is_dir()


def test_detected_by_names_existing_checks():
    ids = {c.id for c in all_checks()}
    bad = {
        (e.id, c) for e in load_library().entries.values() for c in e.detected_by if c not in ids
    }
    assert not bad, sorted(bad)
