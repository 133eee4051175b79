"""A runbook attached to a finding matches its subject: a node or GPU finding never carries a
fix for the pod (`applies_to: [pod]`), and a consequence's runbook is not attached beside the
cause's (the cause graph); checks that know a Fix parameter's value carry it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmdoctor.collectors.bundle import Bundle
from llmdoctor.engine.facts import Facts
from llmdoctor.engine.registry import all_checks
from llmdoctor.engine.runbook_fit import SCOPE_KIND, fits, fitting_runbooks
from llmdoctor.engine.textsource import TextSource
from llmdoctor.render.report import to_json
from llmdoctor.usecases.diagnose import diagnose
from llmdoctor.wiki.cause_graph import CauseGraph
from llmdoctor.wiki.library import load_library
from llmdoctor.wiki.lint import lint_text

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "bundles"
FIXTURES = ROOT / "tests" / "fixtures"
ENTRIES = load_library().entries
GRAPH = CauseGraph.from_entries(ENTRIES)


def _diagnose_bundle(name: str):
    with Bundle(EXAMPLES / name) as bundle:
        return diagnose([bundle.to_facts()], name)


def _problems(report):
    return {(f.check, f.subject): f for f in report.findings if f.severity != "ok"}


def test_a_gpu_that_fell_off_the_bus_gets_no_pod_spec_fix():
    # xid79 bundle: gpu-health linked gpu-not-visible (a pod-spec fix); the Xid 79 runbook
    # explains the lost GPU, so its Fix is the one to act on
    report = _diagnose_bundle("xid79-gpu-fallen-off-bus")
    health = _problems(report)[("gpu-health", "GPU at 0000:2b:00.0")]
    assert health.runbooks == ["xid-fallen-off-bus"]


def test_a_crash_loop_at_startup_links_its_cause_not_engine_death():
    # crashloop bundle: CUDA OOM while loading, then "Got fatal signal": the engine never
    # served, so the OOM is a start-up that does not fit (cuda-oom-runtime's at_startup), and
    # that explains engine-dead
    report = _diagnose_bundle("crashloop-cuda-oom")
    restarts = _problems(report)[("pod-restarts", "container vllm")]
    assert restarts.runbooks == ["vllm-startup-memory-insufficient"]
    assert "then:" in restarts.summary  # the summary still says what followed


@pytest.mark.parametrize("spec", all_checks(), ids=lambda s: s.id)
def test_no_check_declares_a_runbook_whose_fix_does_not_fit_its_findings(spec):
    # a node check linking a pod-only runbook would lose it at run time: say so here instead
    wrong = [rid for rid in spec.runbooks if rid in ENTRIES and not fits(ENTRIES[rid], spec.scope)]
    assert wrong == []


def test_a_pod_only_runbook_is_dropped_from_a_node_finding_and_kept_on_a_pod_or_log_one():
    # vllm-startup-memory-insufficient says "raise the budget": the server's own, not a GPU's
    startup = "vllm-startup-memory-insufficient"
    assert ENTRIES[startup].applies_to == ["pod"]
    assert fitting_runbooks([startup], "node", ENTRIES, GRAPH) == []
    assert fitting_runbooks([startup], "k8s", ENTRIES, GRAPH) == [startup]
    assert fitting_runbooks([startup], "logs", ENTRIES, GRAPH) == [startup]  # logs name either


def test_a_runbook_without_applies_to_fits_every_finding():
    # gpu-memory-taken-by-other-process: kill the holder on the node or lower the pod's share
    assert all(fits(ENTRIES["gpu-memory-taken-by-other-process"], s) for s in SCOPE_KIND)


def test_a_cause_and_what_followed_keep_the_cause_only():
    # xid-fallen-off-bus explains engine-dead (and gateway-timeout through it)
    kept = fitting_runbooks(
        ["xid-fallen-off-bus", "engine-dead", "gateway-timeout"], "logs", ENTRIES, GRAPH
    )
    assert kept == ["xid-fallen-off-bus"]
    # listed the other way, the check's answer comes first and a possible cause beside it
    # (memory-fragmentation: an OOM whose numbers cannot tell fragmentation): both stay
    alternatives = ["cuda-oom-runtime", "gpu-memory-fragmentation"]
    assert fitting_runbooks(alternatives, "logs", ENTRIES, GRAPH) == alternatives
    # two unrelated causes both stay
    assert fitting_runbooks(["shm-too-small", "hf-gated-model"], "k8s", ENTRIES, GRAPH) == [
        "shm-too-small",
        "hf-gated-model",
    ]


def test_lint_rejects_an_unknown_subject_kind_and_an_unknown_fix_parameter():
    # a typo would silently attach a fix everywhere, or print {max_len} as it is
    text = (ROOT / "runbooks" / "kv-cache-too-small-for-max-model-len.md").read_text()
    text = text.replace("applies_to: [pod]", "applies_to: [pods]")
    text = text.replace("{max_model_len}", "{max_len}")
    _, problems = lint_text(text, "kv-cache-too-small-for-max-model-len.md")
    messages = [p.message for p in problems if p.level == "error"]
    assert any("unknown subject kind 'pods'" in m for m in messages)
    bad = next(p for p in problems if "unknown Fix parameter {max_len}" in p.message)
    assert text.splitlines()[bad.line - 1].count("{max_len}") == 1  # the right line


def test_lint_accepts_the_known_parameters_of_the_builtin_runbooks():
    # the runbooks that use {max_model_len}, {pid}, {gpu_memory_utilization} lint clean
    for entry_id in ("kv-cache-too-small-for-max-model-len", "gpu-memory-taken-by-other-process"):
        path = ROOT / "runbooks" / f"{entry_id}.md"
        _, problems = lint_text(path.read_text(), path)
        assert [p for p in problems if p.level == "error"] == []


# --- parameters from evidence ---------------------------------------------------------------


def _log_facts(fixture: Path, previous: bool = False) -> Facts:
    facts = Facts({"time/now": 0, "target": "t"})
    key = "logs/vllm.previous.log" if previous else "logs/vllm.log"
    facts.set(key, TextSource.from_file(key, fixture))
    return facts


KV_LOG = (
    FIXTURES
    / "runbooks/kv-cache-too-small-for-max-model-len"
    / "vllm-v1-estimated-max-model-len-tpu-inference223.log"
)


def test_log_signatures_fill_max_model_len_from_vllms_own_estimate():
    # the V1 error says "the estimated maximum model length is 5632": that is the value to set
    report = diagnose([_log_facts(KV_LOG)], "t", scopes=("logs",), only=["log-signatures"])
    finding = next(f for f in report.findings if f.runbooks == [KV_LOG.parent.name])
    assert finding.params == {"max_model_len": 5632}
    assert to_json(report)["findings"][0]["params"] == {"max_model_len": 5632}


def test_a_finding_without_values_has_no_params_key_in_json():
    # keys are only added: a finding with nothing to fill looks as before
    report = _diagnose_bundle("oomkilled-host-memory")
    assert all("params" not in f for f in json.loads(json.dumps(to_json(report)))["findings"])


def test_the_v0_error_gives_the_tokens_that_fit():
    # V0: "... stored in KV cache (23648)": max_model_len must be at most that
    from llmdoctor.parsers.fix_values import fix_values

    line = (
        "ValueError: The model's max seq len (29000) is larger than the maximum number of "
        "tokens that can be stored in KV cache (23648). Try increasing `gpu_memory_utilization`"
    )
    assert fix_values("kv-cache-too-small-for-max-model-len", [line]) == {"max_model_len": 23648}
    # the same words under another entry fill nothing
    assert fix_values("engine-dead", [line]) == {}


def test_a_crash_loop_on_a_kv_cache_too_small_carries_the_estimate_to_its_fix():
    # pod-restarts supersedes log-signatures for the same runbook: the value must come with it
    facts = _log_facts(KV_LOG, previous=True)
    facts.set("k8s/pod.json", json.loads((FIXTURES / "k8s/pod-vllm-7b-crashloop.json").read_text()))
    report = diagnose([facts], "t", scopes=("k8s",), only=["pod-restarts"])
    (finding,) = [f for f in report.findings if f.check == "pod-restarts"]
    assert finding.runbooks[0] == "kv-cache-too-small-for-max-model-len"
    assert finding.params == {"max_model_len": 5632}


@pytest.mark.parametrize(
    ("line", "share"),
    [
        # 31.44 of 47.38 GiB free: 0.66 fits (0.6635 rounded down), not vLLM's 0.95
        (
            "ValueError: Free memory on device (31.44/47.38 GiB) on startup is less than desired "
            "GPU memory utilization (0.95, 45.01 GiB). Decrease GPU memory utilization or reduce "
            "GPU memory used by other processes.",
            0.66,
        ),
        # 0.49 of 79.32 GiB: 0.006 rounds down to 0, which is no value to print
        (
            "Free memory on device (0.49/79.32 GiB) on startup is less than desired GPU memory "
            "utilization (0.6, 47.59 GiB)",
            None,
        ),
        # a mangled line gives nothing rather than a wrong number
        ("Free memory on device (nan/47.38 GiB) on startup", None),
    ],
)
def test_vllms_startup_refusal_gives_the_share_that_is_free(line, share):
    from llmdoctor.parsers.fix_values import fix_values

    expected = {} if share is None else {"gpu_memory_utilization": share}
    assert fix_values("gpu-memory-taken-by-other-process", [line]) == expected


@pytest.mark.parametrize(
    ("line", "gib"),
    [
        # the shipped crash loop's OOM (examples/bundles/crashloop-cuda-oom): a 7.75 GiB GPU, not
        # the 80 GiB a stock command would have sized
        (
            "ERROR 03-13 09:00:43 [core.py:330] torch.OutOfMemoryError: CUDA out of memory. "
            "Tried to allocate 1.16 GiB. GPU 0 has a total capacity of 7.75 GiB of which 1.17 GiB "
            "is free.",
            7.75,
        ),
        ("GPU 0 has a total capacity of 79.19 GiB of which 4.50 MiB is free.", 79.19),
        # a mangled number gives nothing rather than a wrong one
        ("GPU 0 has a total capacity of nan GiB of which 0 bytes is free.", None),
        ("GPU 0 has a total capacity of 123456789012345 GiB of which", None),
    ],
)
def test_pytorchs_oom_gives_the_gpus_memory_for_the_sizing_step(line, gib):
    from llmdoctor.parsers.fix_values import fix_values
    from llmdoctor.wiki.fix_params import fill

    found = fix_values("vllm-startup-memory-insufficient", [line])
    assert found == ({} if gib is None else {"gpu_memory": gib})
    text = fill("--gpu-memory {gpu_memory}", found)
    assert text == (f"--gpu-memory {gib:g}GiB" if gib else "--gpu-memory <the GPU's memory>")


PENDING_POD = FIXTURES / "k8s/pod-vllm-1-pending-aks.json"


@pytest.mark.parametrize(
    ("check_id", "key", "answer"),
    [
        ("vllm-health", "vllm/health.json", {"status": None, "latency_ms": 2.0}),
        (
            "vllm-generation",
            "vllm/probe.json",
            {"request": {"model": "m"}, "status": None, "latency_ms": 2.0},
        ),
    ],
)
def test_a_pod_that_never_started_gets_no_engine_dead(check_id, key, answer):
    # the AKS pod Pending on "2 Insufficient nvidia.com/gpu": its server never ran, so the
    # refused connection is not an engine that died; the scheduling finding is the cause
    facts = Facts({"time/now": 0, "target": "pod/vllm-1"})
    facts.set("k8s/pod.json", json.loads(PENDING_POD.read_text()))
    facts.set(key, {**answer, "error": "connection refused", "error_kind": "connect"})
    report = diagnose([facts], "pod/vllm-1", scopes=("vllm",), only=[check_id])
    (finding,) = [f for f in report.findings if f.check == check_id]
    assert finding.severity == "warning" and finding.runbooks == []
    assert "has not started" in finding.summary and "Unschedulable" in finding.summary


def test_a_running_pod_whose_endpoint_refuses_still_points_at_engine_death():
    # the same refusal from a pod that is Running and ready: the engine is the suspect
    pod = json.loads((FIXTURES / "k8s/pod-vllm-7b-healthy.json").read_text())
    facts = Facts({"time/now": 0, "target": "pod/vllm"})
    facts.set("k8s/pod.json", pod)
    facts.set(
        "vllm/health.json",
        {"status": None, "latency_ms": 2.0, "error": "connection refused", "error_kind": "connect"},
    )
    report = diagnose([facts], "pod/vllm", scopes=("vllm",), only=["vllm-health"])
    (finding,) = [f for f in report.findings if f.check == "vllm-health"]
    assert finding.runbooks == ["engine-dead"]


def test_a_fix_step_tagged_for_pods_is_left_out_under_a_node_finding_and_back():
    # gpu-not-visible serves pod and node checks: its `[pod]` step (the pod spec) is no Do now
    # for a GPU the node lost, its `[node]` steps (driver, fabric manager) none for a pod spec
    from llmdoctor.engine.findings import critical
    from llmdoctor.render.fix_text import first_step, fix_steps

    entry = ENTRIES["gpu-not-visible"]
    node = critical("gpu-health", "GPU not visible to NVML", [], ["gpu-not-visible"], "GPU 0")
    pod = critical("pod-gpu-request", "no nvidia.com/gpu limit", [], ["gpu-not-visible"], "pod")
    node_text = " ".join(step.text for step in fix_steps(entry, node))
    pod_text = " ".join(step.text for step in fix_steps(entry, pod))
    assert first_step(entry, node).text.startswith("Find the layer that lost the GPU")
    # a kernel-log line's finding is about the node too (log-signatures has no scope of its own)
    kernel = critical(
        "log-signatures",
        "Found no NVIDIA driver on your system",
        [{"source": "node/kernel.log", "line": 1, "text": "NVRM: Found no NVIDIA driver"}],
        ["gpu-not-visible"],
    )
    assert first_step(entry, kernel).text.startswith("Find the layer that lost the GPU")
    assert "nvidia-fabricmanager" in node_text and "runtimeClassName" not in node_text
    assert (
        first_step(entry, pod).text.startswith("[pod] Request the GPU")
        and "nvidia-fabricmanager" not in pod_text
    )
    # a finding of unknown kind keeps every step, each tag shown so the reader sees it
    every = fix_steps(entry)
    assert len(every) == 10 and every[0].lines()[0].startswith("1. [pod] ")
    # a node's step written for a wording leads where the kernel log carries it
    blackwell = critical(
        "log-signatures",
        "The server's process finds no GPU",
        [
            {
                "source": "node/kernel.log",
                "line": 3,
                "text": "NVRM: installed in this system requires use of the NVIDIA open kernel "
                "modules.",
            }
        ],
        ["gpu-not-visible"],
    )
    assert first_step(entry, blackwell).text.startswith("[node] `requires use of the NVIDIA open")
    assert "open kernel modules" not in pod_text


@pytest.mark.parametrize(
    ("step", "flagged"),
    [
        ("1. [pod] Recreate the pod.", False),  # the two tags the reports read
        ("2. [node] Reload the driver.", False),
        ("3. [POD] Recreate the pod.", True),  # other case: not read, shown under any finding
        ("4. [gpu] Reset the GPU.", True),  # no such subject kind
        ("5. [pod]Recreate the pod.", True),  # no space after the tag
        ("6. See [the docs] first.", False),  # brackets later in a sentence are prose
    ],
)
def test_lint_names_a_fix_step_tag_the_reports_would_not_read(step, flagged):
    text = (
        "---\nid: team-tags\ntitle: Team entry with tagged steps\nseverity: warning\n"
        "signatures:\n  - 'widget exploded'\n---\n## Symptom\nx\n## Cause\nx\n## Fix\n"
        f"{step}\n## Verify\nx\n"
    )
    _, problems = lint_text(text, "team-tags.md")
    assert any("Fix step tag" in p.message for p in problems) is flagged
