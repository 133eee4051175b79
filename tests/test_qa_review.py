"""What the on-call reads on the shipped example bundles: no duplicate, no misleading line.

Each test pins one defect found by reading the reports of examples/bundles/ (real captured data,
sources in each bundle's SOURCES.md) as an on-call engineer would.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from llmdoctor.cli import run as cli_run
from llmdoctor.gpus.tables import toolkit_driver

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "bundles"


def diagnose(capsys, path: Path | str) -> dict:
    with pytest.raises(SystemExit):
        cli_run(["diagnose", "--bundle", str(path), "--json"])
    return json.loads(capsys.readouterr().out)


def by_check(report: dict, check: str) -> list[dict]:
    return [f for f in report["findings"] if f["check"] == check]


def test_saturated_queue_is_reported_once_not_again_by_log_signatures(capsys):
    # the loggers.py lines say the same as the /metrics window; vllm-queue knows more
    report = diagnose(capsys, EXAMPLES / "saturated-queue")
    assert by_check(report, "vllm-queue")[0]["runbooks"] == ["queue-saturation"]
    assert not [
        f for f in by_check(report, "log-signatures") if "queue-saturation" in f["runbooks"]
    ]


def test_slow_queue_summary_names_ttft_once(capsys):
    # before: "...; TTFT p95 32.0 s includes it; time to first token p95 32.0 s also over"
    (latency,) = by_check(diagnose(capsys, EXAMPLES / "saturated-queue"), "vllm-latency")
    summary = latency["summary"]
    assert summary.startswith("slow queue time: p95 23.8 s > 1.0 s")
    assert summary.count("32.0 s") == 1 and "TTFT" not in summary


def test_log_tail_without_the_start_gives_no_load_time(capsys):
    # the saturated pod's log is 9 loggers.py lines from a running server: before, the report
    # said "ran 350s" next to a stats line, as if loading had taken that long
    (probes,) = by_check(diagnose(capsys, EXAMPLES / "saturated-queue"), "pod-probes")
    assert not [e for e in probes["evidence"] if e["text"].startswith(("ran ", "ready after"))]


def test_healthy_start_still_measures_the_load(capsys):
    # the healthy pod's log has the whole start: 137 s from the first line to ready
    (probes,) = by_check(diagnose(capsys, EXAMPLES / "healthy-vllm-7b"), "pod-probes")
    assert probes["severity"] == "ok" and "137s load" in probes["summary"]


def test_oom_finding_names_the_container_and_says_why_free_memory_did_not_help(capsys):
    # "tried 1.16 GiB with 1.17 GiB free" reads as a contradiction without the last clause;
    # the subject is the container, as pod-restarts names it (was "vllm.previous")
    (oom,) = by_check(diagnose(capsys, EXAMPLES / "crashloop-cuda-oom"), "memory-fragmentation")
    assert oom["subject"] == "container vllm (previous run)"
    assert "tried 1.16 GiB with 1.17 GiB free of 7.75 GiB" in oom["summary"]
    assert "the GPU is full" in oom["summary"]


def test_pod_shm_single_worker_names_its_container(capsys):
    # every pod-shm finding says which container it is about
    (shm,) = by_check(diagnose(capsys, EXAMPLES / "healthy-vllm-7b"), "pod-shm")
    assert shm["subject"] == "container vllm"


def test_image_tag_ok_lists_only_real_images(capsys, tmp_path):
    # a sidecar without an image field must not print as an empty image name
    path = tmp_path / "b"
    shutil.copytree(EXAMPLES / "healthy-vllm-7b", path)
    pod = json.loads((path / "k8s" / "pod.json").read_text())
    pod["spec"]["containers"].append({"name": "sidecar"})
    (path / "k8s" / "pod.json").write_text(json.dumps(pod))
    (tag,) = by_check(diagnose(capsys, path), "pod-image-tag")
    assert tag["summary"] == "images pinned: vllm/vllm-openai:v0.10.1.1"


def test_cuda_11_0_driver_is_the_ga_driver():
    # CUDA release notes Table 3: 11.0.2 GA >= 450.51.05 (450.36.06 was the 11.0.1 RC driver)
    assert toolkit_driver("11.0") == "450.51.05"
    assert toolkit_driver("12.8") == "570.26" and toolkit_driver("12.2") == "535.54.03"
