"""Fact keys are declared once (llmdoctor/engine/fact_keys.py): a misspelt key is an error."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from llmdoctor.collectors.bundle import is_bundle_path
from llmdoctor.engine import fact_keys
from llmdoctor.engine.derive import derived_fact
from llmdoctor.engine.registry import check, load_checks_dir
from llmdoctor.errors import BadInput
from llmdoctor.parsers.vllm_serving import DEFAULTS

ROOT = Path(__file__).resolve().parent.parent
CODE = sorted([*(ROOT / "llmdoctor").rglob("*.py"), *(ROOT / "checks").glob("*.py")])
KEY_LITERAL = re.compile(
    r"\bfacts\.(?:get|require|has|missing_reason|set|mark_missing)\(\s*\"([^\"]+)\""
)
THRESHOLD_CALL = re.compile(r"\bthreshold\(\s*facts,\s*\"([^\"]+)\"")


def _literals(pattern: re.Pattern[str]) -> list[tuple[str, str]]:
    found = []
    for path in CODE:
        for key in pattern.findall(path.read_text(encoding="utf-8")):
            found.append((str(path.relative_to(ROOT)), key))
    return found


def test_every_key_the_code_reads_or_writes_by_name_is_declared():
    # the scan must see the code's keys at all, or it proves nothing
    literals = _literals(KEY_LITERAL)
    assert len(literals) > 100
    undeclared = [(path, key) for path, key in literals if fact_keys.declared(key) is None]
    assert undeclared == []


def test_every_threshold_the_checks_read_is_declared_with_a_default():
    # a threshold without a default would make threshold() raise KeyError inside a check
    names = {name for _, name in _literals(THRESHOLD_CALL)}
    assert "image_pull_slow_seconds" in names
    assert names <= set(DEFAULTS)
    assert all(fact_keys.declared(f"settings/{name}") for name in names)


def test_every_setting_is_written_by_a_command_or_has_a_default():
    # a setting that is read but neither written nor defaulted is dead configuration
    import dataclasses

    from llmdoctor.commands.options import GpuOptions, ProbeOptions
    from llmdoctor.usecases.diagnose import CheckSettings

    for name in fact_keys.THRESHOLD_SETTINGS:
        assert name in DEFAULTS, name
    given = {f.name for f in dataclasses.fields(CheckSettings)}
    assert set(fact_keys.WRITTEN_SETTINGS) == given | {"timeout"}  # gather() writes the timeout
    command_text = "\n".join(
        p.read_text(encoding="utf-8") for p in (ROOT / "llmdoctor" / "commands").glob("*.py")
    )
    by_options = set(ProbeOptions().settings()) | set(GpuOptions().settings())
    for name in given:
        assert name in by_options or f"{name}=" in command_text, name


def test_a_check_needing_a_misspelt_key_fails_at_import():
    # "k8s/pods.json" would otherwise skip the check on every run, silently
    with pytest.raises(ValueError, match=re.escape("k8s/pods.json")):

        @check("misspelt-need", title="t", scope="k8s", needs=("k8s/pods.json",))
        def misspelt(facts):
            return None


def test_a_derived_fact_with_a_misspelt_input_fails_at_import():
    # a derivation whose input never exists would never run
    with pytest.raises(ValueError, match=re.escape("node/kernel-log")):

        @derived_fact("node/xid", needs=("node/kernel-log",))
        def misspelt(facts):
            return None


def test_a_site_check_with_a_misspelt_key_is_a_one_line_error(tmp_path):
    # a team's --checks-dir check is held to the same declared keys
    (tmp_path / "team.py").write_text(
        "from llmdoctor.engine.registry import check\n"
        "@check('team-typo', title='t', scope='k8s', needs=('k8s/event.json',))\n"
        "def team_typo(facts):\n    return None\n"
    )
    with pytest.raises(BadInput, match=re.escape("k8s/event.json")):
        load_checks_dir(tmp_path)


def test_placeholders_match_concrete_keys_only():
    # logs/<name>.log covers any container; it must not swallow other folders
    assert fact_keys.declared("logs/vllm.log").key == fact_keys.CONTAINER_LOG
    assert fact_keys.declared("logs/vllm.previous.log") is not None
    assert fact_keys.declared("vllm/metrics-1.txt").key == fact_keys.VLLM_METRICS
    assert fact_keys.declared("vllm/metrics-x.txt") is None
    assert fact_keys.declared("k8s/pods.json") is None


def test_bundle_keys_are_the_paths_a_bundle_holds():
    # a bundle key the bundle reader refuses would be lost between collect and diagnose
    for fk in fact_keys.DECLARED:
        concrete = fk.key.replace("<name>", "vllm").replace("<n>", "0")
        assert is_bundle_path(concrete) == (fk.kind == "bundle"), fk.key


def test_every_file_in_the_shipped_bundles_is_a_declared_bundle_key():
    # the example bundles are real captures: each of their files is a known raw key
    files = [
        p.relative_to(b).as_posix()
        for b in (ROOT / "examples" / "bundles").iterdir()
        if b.is_dir()
        for p in b.rglob("*")
        if p.is_file() and p.name not in ("manifest.json", "SOURCES.md")
    ]
    assert files
    for rel in files:
        fk = fact_keys.declared(rel)
        assert fk is not None and fk.kind == "bundle", rel


def test_the_bundle_format_doc_lists_exactly_the_declared_bundle_keys():
    # docs/bundle-format.md is what people assemble bundles by hand from: it must hold with the code
    doc = (ROOT / "docs" / "bundle-format.md").read_text(encoding="utf-8")
    table = doc[doc.index("| path | content |") :].split("\n\n")[0]
    first_cells = re.findall(r"^\| ([^|]+) \|", table, re.M)
    paths = {
        re.sub(r"<(?!n>)[a-z]+>", "<name>", p)
        for cell in first_cells
        for p in re.findall(r"`([^`]+)`", cell)
    }
    paths.discard("manifest.json")
    bundle_keys = {fk.key for fk in fact_keys.DECLARED if fk.kind == "bundle"}
    undeclared = sorted(
        p for p in paths if (fk := fact_keys.declared(p)) is None or fk.kind != "bundle"
    )
    assert undeclared == []
    assert sorted(bundle_keys - paths) == []
