"""The built-in runbook corpus: every entry exists, parses, and its log signatures are sound.

Signatures are checked against real captured logs, with the same code `wiki lint` runs for team
wikis (llmdoctor.wiki.lint.evidence_problems, RE2 matching): each signature must fire on a line of
the entry's own excerpts under tests/fixtures/runbooks/<id>/, and no signature may fire on the
healthy corpora (tests/fixtures/healthy/, tests/fixtures/explain_corpus/_healthy/ and the copy
shipped in llmdoctor/data/healthy/). Signatures must also compile in RE2 and stay within the regex
subset shared by Python `re` and `grep -E`.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from llmdoctor.wiki.entry import parse_entry_file

ROOT = Path(__file__).resolve().parent.parent
RUNBOOK_DIR = ROOT / "runbooks"
FIXTURE_DIR = Path(__file__).resolve().parent / "fixtures" / "runbooks"
HEALTHY_DIR = Path(__file__).resolve().parent / "fixtures" / "healthy"
CORPUS_HEALTHY_DIR = Path(__file__).resolve().parent / "fixtures" / "explain_corpus" / "_healthy"
PACKAGED_HEALTHY_DIR = ROOT / "llmdoctor" / "data" / "healthy"

REQUIRED_IDS = (
    # GPU, driver, node and Kubernetes entries
    "driver-cuda-mismatch",
    "no-kernel-image",
    "nvml-driver-library-mismatch",
    "xid-fallen-off-bus",
    "xid-ecc-memory",
    "illegal-memory-access",
    "nccl-failure",
    "gsp-timeout",
    "gpu-memory-taken-by-other-process",
    "vllm-startup-memory-insufficient",
    "kv-cache-too-small-for-max-model-len",
    "gpu-not-visible",
    "k8s-gpu-unschedulable",
    "k8s-oomkilled",
    "probe-killed-during-load",
    "image-pull-slow",
    # serving, model and gateway entries
    "cuda-oom-runtime",
    "gpu-memory-fragmentation",
    "kv-cache-preemption",
    "queue-saturation",
    "context-length-exceeded",
    "model-name-not-found",
    "shm-too-small",
    "tokenizer-problem",
    "chat-template-missing",
    "trust-remote-code",
    "model-download-failure",
    "engine-dead",
    "gateway-timeout",
    "unsupported-quantization-or-dtype",
    "nan-or-garbage-output",
    "enforce-eager-in-production",
)

# Constructs that Python `re` accepts but POSIX ERE (`grep -E`) does not, or reads differently.
NOT_PORTABLE = (
    (re.compile(r"\\d"), r"\d (use [0-9])"),
    (
        re.compile(r"\(\?"),
        "(?...) groups: inline flags, lookarounds, named or non-capturing groups",
    ),
    (re.compile(r"[*+?}]\?"), "non-greedy quantifier"),
    (re.compile(r"\\[1-9]"), "backreference"),
)

RUNBOOK_FILES = sorted(RUNBOOK_DIR.glob("*.md"))
ENTRIES = [parse_entry_file(p) for p in RUNBOOK_FILES]
HEALTHY_FILES = sorted(
    p
    for folder in (HEALTHY_DIR, CORPUS_HEALTHY_DIR, PACKAGED_HEALTHY_DIR)
    if folder.is_dir()
    for p in folder.iterdir()
    if p.is_file() and p.name != "SOURCES.md"
)


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8", errors="replace").splitlines()


def _fixture_files(entry_id: str) -> list[Path]:
    folder = FIXTURE_DIR / entry_id
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.is_file() and p.name != "SOURCES.md")


def _by_id(entries):
    return pytest.mark.parametrize("entry", entries, ids=[e.id for e in entries])


def test_all_required_runbook_entries_exist():
    # The report and the checks link to these ids; a missing file is a dangling link.
    present = {e.id for e in ENTRIES}
    missing = [i for i in REQUIRED_IDS if i not in present]
    assert not missing, f"runbook entries missing: {missing}"


@_by_id(ENTRIES)
def test_entry_id_matches_its_file_name(entry):
    # The id is how checks and teams' overrides refer to an entry, so it must equal the file name.
    assert Path(entry.path).stem == entry.id


@_by_id(ENTRIES)
def test_entry_has_symptom_cause_and_fix(entry):
    # An on-call reader needs all three sections; an empty one is a broken entry.
    assert entry.severity in ("info", "warning", "critical")
    assert entry.symptom.strip() and entry.cause.strip() and entry.fix.strip()


def _patterns(entry) -> list[str]:
    """An entry's signatures and hints: both are matched against logs."""
    return [*entry.signatures, *entry.hints]


@_by_id(ENTRIES)
def test_entry_leaves_detected_by_to_the_checks(entry):
    # Checks point at runbooks, not the other way round, so entries carry no detected_by list.
    assert "detected_by" not in entry.front_matter


@_by_id(ENTRIES)
def test_signatures_compile_and_never_match_an_empty_line(entry):
    # A signature that matches "" would fire on every blank line of every log.
    assert entry.signatures, "an entry needs at least one log signature"
    for sig in _patterns(entry):
        pattern = re.compile(sig)
        assert pattern.search("") is None, f"{sig!r} matches the empty string"


@_by_id(ENTRIES)
def test_signatures_stay_in_the_regex_subset_grep_shares(entry):
    # The same signatures are used with `grep -E` on nodes, so Python-only syntax is not allowed.
    for sig in _patterns(entry):
        for construct, why in NOT_PORTABLE:
            assert not construct.search(sig), f"{sig!r} uses {why}"


@pytest.mark.skipif(shutil.which("grep") is None, reason="grep is not installed")
@_by_id(ENTRIES)
def test_signatures_are_accepted_by_grep_extended_regex(entry):
    # grep exits 2 on a pattern it cannot compile; 0 or 1 (match / no match) means it is valid.
    grep = shutil.which("grep")
    for sig in _patterns(entry):
        done = subprocess.run(
            [grep, "-E", "-e", sig, "/dev/null"], capture_output=True, text=True, timeout=10
        )
        assert done.returncode in (0, 1), f"grep -E rejects {sig!r}: {done.stderr.strip()}"


@_by_id(ENTRIES)
def test_signatures_compile_in_re2_the_engine_that_matches_them(entry):
    from llmdoctor.wiki.signatures import compile_problem

    problems = [f"{sig!r}: {why}" for sig in _patterns(entry) if (why := compile_problem(sig))]
    assert not problems


@_by_id(ENTRIES)
def test_every_signature_fires_on_the_entrys_own_real_excerpts(entry):
    # Each entry ships real log excerpts; a signature that matches none of them is unproven.
    from llmdoctor.wiki.lint import evidence_problems

    files = _fixture_files(entry.id)
    assert files, f"no excerpts under {FIXTURE_DIR / entry.id}"
    assert (FIXTURE_DIR / entry.id / "SOURCES.md").is_file(), "excerpts need a SOURCES.md"
    # hints too: weak evidence, still proven on real excerpts
    signatures = list(enumerate(_patterns(entry)))
    problems = evidence_problems(signatures, FIXTURE_DIR / entry.id, healthy=[])
    assert not problems, "\n".join(message for _, message in problems)


def test_healthy_corpus_is_present_and_cites_sources():
    # Without healthy logs the false-positive test below would pass vacuously.
    assert len(HEALTHY_FILES) >= 5
    for folder in (HEALTHY_DIR, PACKAGED_HEALTHY_DIR):
        sources = (folder / "SOURCES.md").read_text(encoding="utf-8")
        for path in folder.iterdir():
            if path.name != "SOURCES.md":
                assert f"| {path.name} |" in sources, f"{path} is not in {folder}/SOURCES.md"


@pytest.mark.parametrize("healthy_file", HEALTHY_FILES, ids=[p.name for p in HEALTHY_FILES])
def test_no_signature_fires_on_healthy_logs(healthy_file):
    # Normal start-up, serving and driver-load lines must never be reported as a problem.
    from llmdoctor.wiki.signatures import SignatureSet

    signatures = SignatureSet(ENTRIES)
    false_hits = [
        f"{m.entry_ids} line {m.line}: {m.text.strip()[:160]}"
        for m in signatures.scan_text(healthy_file.read_bytes().decode("utf-8", errors="replace"))
    ]
    assert not false_hits, "signatures fire on healthy logs:\n" + "\n".join(false_hits)
