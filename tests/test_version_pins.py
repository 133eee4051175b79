"""torch against vLLM's pin, compared as PEP 440 versions (pre-releases and nightlies included)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from llmdoctor.checks.torch_vllm_versions import satisfies

from llmdoctor.engine.facts import Facts
from llmdoctor.usecases.diagnose import diagnose

# vllm-project/vllm#31700: torch 2.9.0+cu128 with vLLM 0.11.2 (pin ==2.9.0)
H100 = (
    Path(__file__).parent
    / "fixtures"
    / "versions"
    / "h100-torch2.9.0-cu128-driver550-vllm31700.json"
)


def verdict(torch: str, pin: str):
    versions = json.loads(H100.read_text())
    versions.update(torch=torch, vllm_requires_torch=pin)
    facts = Facts({"time/now": 0, "target": "node", "node/versions.json": versions})
    report = diagnose([facts], "node", scopes=("node",), only=["torch-vllm-versions"])
    return report.findings, {s["check"]: s["reason"] for s in report.skipped}


@pytest.mark.parametrize(
    ("torch", "pin", "fits"),
    [
        # issue 12: both were judged equal when letters were stripped
        ("2.9.0.dev20250715", "==2.9.0.dev20250801", False),
        ("2.8.0rc1", "==2.8.0", False),
        ("2.9.0.dev20250801+cu128", "==2.9.0.dev20250801", True),
        ("2.9.0+cu128", "==2.9.0", True),
        ("2.8.0rc1", ">=2.8.0", False),  # a release candidate comes before its release
        ("2.8.0", ">=2.8.0rc1", True),
        ("2.9.0.dev20250715", "<2.9.0", False),  # PEP 440: <V excludes V's own pre-releases
    ],
)
def test_pep440_comparison(torch, pin, fits):
    assert satisfies(torch, pin) is fits


def test_nightly_torch_against_another_nightly_pin_is_a_warning():
    (f,), _ = verdict("2.9.0.dev20250715+cu128", "==2.9.0.dev20250801")
    assert f.severity == "warning" and "2.9.0.dev20250715" in f.summary


def test_release_candidate_against_the_release_pin_is_a_warning():
    (f,), _ = verdict("2.8.0rc1", "==2.8.0")
    assert f.severity == "warning"


def test_unreadable_version_is_skipped_with_the_reason():
    found, skipped = verdict("2.9.0-custom build", "==2.9.0")
    assert found == [] and "cannot read the torch version" in skipped["torch-vllm-versions"]
