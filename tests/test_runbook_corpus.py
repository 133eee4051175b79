"""The built-in runbook corpus: every entry exists, parses, and its log signatures are sound.

Signatures are checked against real captured logs: each entry's own excerpts under
tests/fixtures/runbooks/<id>/ must trigger it, and the healthy corpus under tests/fixtures/healthy/
(normal vLLM start-up and serving, clean NVIDIA driver load, normal Kubernetes events) must trigger
nothing. Signatures must also stay within the regex subset shared by Python `re` and `grep -E`.
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
HEALTHY_FILES = sorted(p for p in HEALTHY_DIR.iterdir() if p.is_file() and p.name != "SOURCES.md")


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


@_by_id(ENTRIES)
def test_entry_leaves_detected_by_to_the_checks(entry):
    # Checks point at runbooks, not the other way round, so entries carry no detected_by list.
    assert "detected_by" not in entry.front_matter


@_by_id(ENTRIES)
def test_signatures_compile_and_never_match_an_empty_line(entry):
    # A signature that matches "" would fire on every blank line of every log.
    assert entry.signatures, "an entry needs at least one log signature"
    for sig in entry.signatures:
        pattern = re.compile(sig)
        assert pattern.search("") is None, f"{sig!r} matches the empty string"


@_by_id(ENTRIES)
def test_signatures_stay_in_the_regex_subset_grep_shares(entry):
    # The same signatures are used with `grep -E` on nodes, so Python-only syntax is not allowed.
    for sig in entry.signatures:
        for construct, why in NOT_PORTABLE:
            assert not construct.search(sig), f"{sig!r} uses {why}"


@pytest.mark.skipif(shutil.which("grep") is None, reason="grep is not installed")
@_by_id(ENTRIES)
def test_signatures_are_accepted_by_grep_extended_regex(entry):
    # grep exits 2 on a pattern it cannot compile; 0 or 1 (match / no match) means it is valid.
    grep = shutil.which("grep")
    for sig in entry.signatures:
        done = subprocess.run(
            [grep, "-E", "-e", sig, "/dev/null"], capture_output=True, text=True, timeout=10
        )
        assert done.returncode in (0, 1), f"grep -E rejects {sig!r}: {done.stderr.strip()}"


@_by_id(ENTRIES)
def test_signatures_fire_on_the_entrys_own_real_excerpts(entry):
    # Each entry ships real log excerpts; if none of its signatures matches them, they are wrong.
    files = _fixture_files(entry.id)
    assert files, f"no excerpts under {FIXTURE_DIR / entry.id}"
    assert (FIXTURE_DIR / entry.id / "SOURCES.md").is_file(), "excerpts need a SOURCES.md"
    patterns = [re.compile(s) for s in entry.signatures]
    hits = [
        (f.name, line) for f in files for line in _lines(f) if any(p.search(line) for p in patterns)
    ]
    assert hits, f"no signature of {entry.id} fires on any line of {[f.name for f in files]}"


def test_healthy_corpus_is_present_and_cites_sources():
    # Without healthy logs the false-positive test below would pass vacuously.
    assert len(HEALTHY_FILES) >= 5
    assert (HEALTHY_DIR / "SOURCES.md").is_file()


@pytest.mark.parametrize("healthy_file", HEALTHY_FILES, ids=[p.name for p in HEALTHY_FILES])
def test_no_signature_fires_on_healthy_logs(healthy_file):
    # Normal start-up, serving and driver-load lines must never be reported as a problem.
    patterns = [(e.id, s, re.compile(s)) for e in ENTRIES for s in e.signatures]
    false_hits = [
        f"{entry_id} {sig!r}: {line.strip()[:160]}"
        for line in _lines(healthy_file)
        for entry_id, sig, pattern in patterns
        if pattern.search(line)
    ]
    assert not false_hits, "signatures fire on healthy logs:\n" + "\n".join(false_hits)
