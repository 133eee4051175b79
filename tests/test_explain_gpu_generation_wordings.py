"""Wordings the blind rounds showed explain did not know (rounds 10-12: the right entry not even
first), each now a signature proven on real excerpts of other reports (tests/fixtures/runbooks/,
SOURCES.md there): a Triton kernel in bf16 refused by ptxas before Ampere, ROCm builds without
the AMD GPU's gfx target, a pod cgroup's OOM report cut before its kill line, a Triton kernel's
own out of memory."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmdoctor.engine.textsource import TextSource
from llmdoctor.triage.explain import explain

FIXTURES = Path(__file__).parent / "fixtures"
RUNBOOKS = FIXTURES / "runbooks"
FRESH = FIXTURES / "explain_fresh"

NEW_EXCERPTS = [
    ("unsupported-quantization-or-dtype", "triton-ptxas-bf16-rtx2060-unsloth-issue434.log"),
    ("unsupported-quantization-or-dtype", "triton-ptxas-cvt-bf16-f32-llamafactory-issue7417.log"),
    ("no-kernel-image", "rocblas-tensile-gfx1201-not-shipped-migraphx3517.log"),
    ("no-kernel-image", "rocblas-tensile-gfx1103-hip-sdk-rocmlibs4.log"),
    ("no-kernel-image", "hip-no-binary-for-gpu-steam-deck-rocm1815.log"),
    ("k8s-oomkilled", "kernel-memcg-stats-kubepods-pod-limit-kata2775.log"),
]

# the blind rounds' excerpts that showed the gap (measured before; tuning data since)
ROUND_EXCERPTS = [
    "round10/unsupported-quantization-or-dtype/r10-c2-lightllm-v100-bf16-ptxas-sm80.log",
    "round11/unsupported-quantization-or-dtype/r11-c2-lmdeploy-pytorch-v100-bf16-ptxas.log",
    "round12/unsupported-quantization-or-dtype/r12-c2-lmdeploy-pytorch-v100-bf16-ptxas.log",
    "round12/no-kernel-image/r12-c6-rocm-890m-gfx1150-rocblas.log",
    "round10/k8s-oomkilled/r10-c6-triton-pod-memcg-limit-128mi-oom.log",
    "round12/cuda-oom-runtime/r12-c4-qwen35-triton-autotune-oom.log",
]


def first_named(path: Path, entries) -> tuple[str | None, str]:
    result = explain(TextSource.from_file(path.name, path), entries)
    first = result.matches[0] if result.matches else None
    return (first.id if first else None), (first.how if first else "")


@pytest.mark.parametrize(("entry_id", "name"), NEW_EXCERPTS)
def test_a_real_excerpt_of_the_wording_names_its_entry_by_signature(entries, entry_id, name):
    assert first_named(RUNBOOKS / entry_id / name, entries) == (entry_id, "signature")


@pytest.mark.parametrize("relative", ROUND_EXCERPTS)
def test_the_round_excerpt_that_showed_the_gap_is_named_right(entries, relative):
    path = FRESH / relative
    assert first_named(path, entries)[0] == path.parent.name


def run_text(text: str, entries):
    return explain(TextSource.from_text("paste", text), entries)


def test_ptxas_refusing_another_feature_is_not_a_dtype_problem(entries):
    # only bf16 before sm_80 is this entry's; an FP8 instruction before sm_89 is another
    # message (fp8e4nv, the FP8 row) and a missing architecture is no-kernel-image's
    line = "ptxas /tmp/x.ptx, line 9; error   : Feature '.e4m3' requires .target sm_89 or higher\n"
    assert all(m.id != "unsupported-quantization-or-dtype" for m in run_text(line, entries).matches)


def test_a_cgroup_oom_outside_kubernetes_is_not_a_pod_limit(entries):
    # a Docker container's cgroup (`/docker/<id>`) at its limit is no Kubernetes pod
    text = (
        "[   13.957877] memory: usage 524288kB, limit 524288kB, failcnt 42\n"
        "[   13.957900] Memory cgroup stats for /docker/609e7ec068ac9642229a994438d5a1f68ab5fe9e:\n"
    )
    assert all(m.id != "k8s-oomkilled" for m in run_text(text, entries).matches)
