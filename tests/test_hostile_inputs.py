"""Hostile bundles and odd options: every run ends in a clear report or a one-line error (exit 3).

Each bundle starts as a copy of a shipped example (real captured data, see its SOURCES.md) and
then has one file broken the way hand-assembled bundles break: bad JSON, the wrong kubectl
command's output, nulls, wrong types, garbage metrics, a binary kernel log, truncated XML, a
Hugging Face tokenizer.json where llmdoctor's probe result belongs, a 10 MB line. Never a
traceback, never a check error, and never "ok" about something that was not seen.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
from pathlib import Path

import pytest

from llmdoctor.cli import run as cli_run

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "bundles"


def bundle(tmp_path: Path, example: str) -> Path:
    dest = tmp_path / example
    shutil.copytree(EXAMPLES / example, dest)
    return dest


def diagnose(capsys, path: Path, *extra: str) -> tuple[int, dict, str]:
    with pytest.raises(SystemExit) as done:
        cli_run(["diagnose", "--bundle", str(path), "--json", *extra])
    out = capsys.readouterr()
    assert "Traceback" not in out.out + out.err
    return int(done.value.code), json.loads(out.out), out.err


def by_check(report: dict, check: str) -> list[dict]:
    return [f for f in report["findings"] if f["check"] == check]


def skipped(report: dict) -> dict[str, str]:
    return {s["check"]: s["reason"] for s in report["skipped"]}


def check_errors(report: dict) -> list[dict]:
    return [e for e in report["errors"] if "check" in e]


POD_CHECKS = (
    "pod-image-pull",
    "pod-image-tag",
    "pod-probes",
    "pod-scheduling",
    "pod-gpu-request",
    "pod-shm",
    "pod-enforce-eager",
)


# --- k8s/pod.json ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        # `kubectl get pods -l app=vllm -o json` instead of `kubectl get pod NAME -o json`
        ({"apiVersion": "v1", "kind": "List", "items": [{}, {}]}, "is a List of 2 object(s)"),
        ([1, 2, 3], "is not a Pod object (a JSON list)"),
        # every top-level field null
        (
            {"apiVersion": None, "kind": None, "metadata": None, "spec": None, "status": None},
            "is not a Pod object",
        ),
    ],
)
def test_pod_json_that_is_not_a_pod_skips_the_pod_checks_with_the_reason(
    capsys, tmp_path, content, reason
):
    # before: "images pinned: " and "no liveness or startup probe" were reported ok, or the
    # checks crashed with AttributeError
    path = bundle(tmp_path, "healthy-vllm-7b")
    (path / "k8s" / "pod.json").write_text(json.dumps(content))
    code, report, _ = diagnose(capsys, path)
    assert code in (0, 1, 2)
    reasons = skipped(report)
    for check_id in POD_CHECKS:
        assert reason in reasons[check_id], check_id
        assert not by_check(report, check_id)
    assert not [e for e in check_errors(report) if e["check"] in POD_CHECKS]


def test_pod_with_null_container_fields_is_not_a_pod(capsys, tmp_path):
    # containers whose name/image are null: no "image  is not tagged", no "[container None]"
    path = bundle(tmp_path, "crashloop-cuda-oom")
    pod = json.loads((path / "k8s" / "pod.json").read_text())
    pod["spec"]["containers"] = [dict.fromkeys(c, None) for c in pod["spec"]["containers"]]
    (path / "k8s" / "pod.json").write_text(json.dumps(pod))
    code, report, _ = diagnose(capsys, path)
    assert code == 2  # the OOM in the previous log is still found
    assert "is not a Pod object" in skipped(report)["pod-image-tag"]
    assert not any("None" in (f.get("subject") or "") for f in report["findings"])


def test_wrong_types_inside_a_pod_do_not_crash_the_pod_checks(capsys, tmp_path):
    # a hand-edited pod: args a string, probe numbers as words, volumes with junk entries
    path = bundle(tmp_path, "crashloop-cuda-oom")
    pod = json.loads((path / "k8s" / "pod.json").read_text())
    container = pod["spec"]["containers"][0]
    container["args"] = "--model x"
    container["startupProbe"] = {"periodSeconds": "ten", "failureThreshold": None}
    pod["spec"]["volumes"] = [None, 1, {"name": "x", "emptyDir": "memory"}]
    (path / "k8s" / "pod.json").write_text(json.dumps(pod))
    code, report, _ = diagnose(capsys, path)
    assert code == 2
    assert not [e for e in check_errors(report) if e["check"] in POD_CHECKS]
    assert not [e for e in report["errors"] if "serving/args" in e.get("collector", "")]
    (probe,) = by_check(report, "pod-probes")  # the defaults: 3 x 10 s
    assert "budget 30s" in probe["summary"]


def test_malformed_pod_json_is_named_and_the_rest_still_runs(capsys, tmp_path):
    path = bundle(tmp_path, "crashloop-cuda-oom")
    (path / "k8s" / "pod.json").write_text('{"kind": "Pod", ')
    code, report, _ = diagnose(capsys, path)
    assert code == 2  # the log checks still see the OOM
    assert "not valid JSON" in skipped(report)["pod-probes"]
    assert by_check(report, "memory-fragmentation")


# --- vllm/*.json, tokenizer.json, metrics -------------------------------------------------------


def test_probe_and_health_with_wrong_types_are_skipped_not_crashed(capsys, tmp_path):
    # before: "Unknown format code 'f' for object of type 'str'" and "'list' has no 'get'"
    path = bundle(tmp_path, "saturated-queue")
    (path / "vllm" / "probe.json").write_text(
        json.dumps({"status": "two hundred", "latency_ms": "slow", "text": 5})
    )
    (path / "vllm" / "health.json").write_text("[]")
    (path / "vllm" / "models.json").write_text('{"data": "x"}')
    code, report, _ = diagnose(capsys, path)
    assert code == 2  # the saturated queue is still found
    reasons = skipped(report)
    assert "is not a generation probe result: status is a string" in reasons["vllm-generation"]
    assert "is not a /health result (a JSON list)" in reasons["vllm-health"]
    assert not check_errors(report)


def test_a_models_own_tokenizer_json_is_not_read_as_the_probe_result(capsys, tmp_path):
    # a Hugging Face tokenizer.json dropped into the bundle root: before, "does not load:
    # unknown error" (critical) about a tokenizer nobody probed
    path = bundle(tmp_path, "healthy-vllm-7b")
    hf = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "model": {}}
    (path / "tokenizer.json").write_text(json.dumps(hf))
    code, report, _ = diagnose(capsys, path)
    assert code == 0
    assert not by_check(report, "tokenizer")
    assert "is not llmdoctor's tokenizer probe result" in skipped(report)["tokenizer"]


def test_non_finite_metric_values_are_not_reported_as_numbers(capsys, tmp_path):
    # NaN/Inf samples (and a scrape of random text): before, "KV cache at inf%" and
    # "waiting -inf" were findings
    path = bundle(tmp_path, "saturated-queue")
    (path / "vllm" / "metrics-0.txt").write_text(
        'vllm:num_requests_running{model_name="m"} NaN\n'
        'vllm:num_requests_waiting{model_name="m"} -Inf\n'
        'vllm:kv_cache_usage_perc{model_name="m"} 1e400\n'
    )
    (path / "vllm" / "metrics-1.txt").write_text("}}}{{ not metrics at all\n")
    code, report, _ = diagnose(capsys, path)
    assert code == 2  # the slow generation probe is still critical
    assert not by_check(report, "vllm-kv-cache") and not by_check(report, "vllm-queue")
    summaries = " ".join(f["summary"] for f in report["findings"])
    assert "inf%" not in summaries and "-inf" not in summaries
    assert "is nan (ignored)" in skipped(report)["vllm-queue"]
    assert not check_errors(report)


def test_empty_metrics_files_are_a_reason_not_a_verdict(capsys, tmp_path):
    path = bundle(tmp_path, "saturated-queue")
    for name in ("metrics-0.txt", "metrics-1.txt"):
        (path / "vllm" / name).write_text("")
    code, report, _ = diagnose(capsys, path)
    reasons = skipped(report)
    for check_id in ("vllm-queue", "vllm-kv-cache", "vllm-latency"):
        assert "no vllm: series in /metrics" in reasons[check_id]
    assert code == 2 and not check_errors(report)


def test_one_scrape_does_not_claim_no_preemptions(capsys, tmp_path):
    # with a single scrape the preemption rate is unknown: say the total, not "no preemptions"
    path = bundle(tmp_path, "saturated-queue")
    (path / "vllm" / "metrics-1.txt").unlink()
    _, report, _ = diagnose(capsys, path)
    (kv,) = by_check(report, "vllm-kv-cache")
    assert "no preemptions" not in kv["summary"]
    assert "since the server started" in kv["summary"]


# --- node/* ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ('["torch"]', "is not a JSON object (a JSON list)"),
        ('{"torch": 2.8, "torch_cuda": 12.8}', "torch version is a float"),
        ('{"torch": "2.8.0", "torch_cuda": "twelve"}', "torch_cuda 'twelve' is not a CUDA"),
    ],
)
def test_versions_json_with_wrong_types_is_skipped_with_the_reason(
    capsys, tmp_path, content, reason
):
    # before: AttributeError, or "torch banana is a CPU-only build" (critical) from "twelve"
    path = bundle(tmp_path, "torch-cu128-on-driver-535")
    (path / "node" / "versions.json").write_text(content)
    code, report, _ = diagnose(capsys, path)
    assert reason in skipped(report)["driver-cuda"]
    assert not by_check(report, "driver-cuda") and not check_errors(report)
    assert code in (0, 1)


def test_arch_list_without_any_arch_is_unknown_not_no_kernels(capsys, tmp_path):
    # before: "torch has no kernels for sm_89" (critical) from a list of junk entries
    path = bundle(tmp_path, "torch-cu128-on-driver-535")
    versions = json.loads((path / "node" / "versions.json").read_text())
    versions["torch_arch_list"] = [None, 5, "sm_xx"]
    (path / "node" / "versions.json").write_text(json.dumps(versions))
    _, report, _ = diagnose(capsys, path)
    assert not by_check(report, "gpu-arch")
    assert "torch_arch_list has no sm_/compute_ entry" in skipped(report)["gpu-arch"]


@pytest.mark.parametrize(
    "xml",
    [
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n",
        "",
        None,  # truncated after 3000 bytes
    ],
)
def test_broken_nvidia_smi_xml_skips_the_gpu_checks(capsys, tmp_path, xml):
    path = bundle(tmp_path, "xid79-gpu-fallen-off-bus")
    smi = path / "node" / "nvidia-smi.xml"
    smi.write_text(smi.read_text()[:3000] if xml is None else xml)
    code, report, _ = diagnose(capsys, path)
    assert code == 2  # the Xid 79 in the kernel log is still critical
    assert "not valid XML" in skipped(report)["gpu-health"]
    assert not by_check(report, "gpu-health") and not check_errors(report)


def test_nvidia_smi_listing_no_gpu_is_a_warning_not_silence(capsys, tmp_path):
    # nvidia-smi -q -x with no <gpu>: before, gpu-health and gpu-memory returned nothing at all
    path = bundle(tmp_path, "torch-cu128-on-driver-535")
    (path / "node" / "nvidia-smi.xml").write_text(
        '<?xml version="1.0" ?>\n<nvidia_smi_log><driver_version>535.86.05</driver_version>'
        "<cuda_version>12.2</cuda_version><attached_gpus>0</attached_gpus></nvidia_smi_log>\n"
    )
    _, report, _ = diagnose(capsys, path)
    (health,) = by_check(report, "gpu-health")
    assert health["severity"] == "warning" and health["runbooks"] == ["gpu-not-visible"]
    assert "lists no GPU" in skipped(report)["gpu-memory"]


def test_nvml_and_gpu_documents_with_wrong_types_are_skipped(capsys, tmp_path):
    path = bundle(tmp_path, "xid79-gpu-fallen-off-bus")
    (path / "node" / "nvidia-smi.xml").unlink()
    (path / "node" / "nvml.json").write_text('{"ok": "maybe", "error": "string"}')
    gpu = {"index": 0, "name": "NVIDIA A100", "memory_mib": {"total": "lots"}}
    (path / "node" / "gpus.json").write_text(json.dumps({"gpus": [gpu]}))
    code, report, _ = diagnose(capsys, path)
    reasons = skipped(report)
    assert "is not an NVML status: ok is a string" in reasons["nvml-status"]
    assert "gpus[0].memory_mib.total is not a number" in reasons["gpu-health"]
    assert code == 2 and not check_errors(report)


def test_binary_kernel_log_and_a_10mb_line_end_in_a_report(capsys, tmp_path):
    path = bundle(tmp_path, "xid79-gpu-fallen-off-bus")
    kernel = path / "node" / "kernel.log"
    real = kernel.read_bytes()
    kernel.write_bytes(bytes(range(256)) * 64 + b"\n" + b"z" * 10_000_000 + b"\n" + real)
    code, report, _ = diagnose(capsys, path)
    assert code == 2
    (xid,) = by_check(report, "xid")
    assert "Xid 79" in xid["summary"]


def test_compressed_kernel_log_is_not_read_as_a_clean_one(capsys, tmp_path):
    # `--kernel-log /var/log/kern.log.2.gz` (or a .gz dropped into a bundle): before, the xid
    # check said "no Xid or SXid error in N lines" about compressed bytes
    path = bundle(tmp_path, "xid79-gpu-fallen-off-bus")
    kernel = path / "node" / "kernel.log"
    kernel.write_bytes(gzip.compress(kernel.read_bytes()))
    _, report, _ = diagnose(capsys, path)
    assert not by_check(report, "xid")
    assert "is gzip-compressed; decompress it first (zcat" in skipped(report)["xid"]


def test_binary_kernel_log_is_not_read_as_a_clean_one(capsys, tmp_path):
    path = bundle(tmp_path, "xid79-gpu-fallen-off-bus")
    (path / "node" / "kernel.log").write_bytes(os.urandom(200_000))
    _, report, _ = diagnose(capsys, path)
    assert not by_check(report, "xid")
    assert "is binary data, not kernel log text" in skipped(report)["xid"]


def test_unknown_extra_files_are_ignored_or_named(capsys, tmp_path):
    path = bundle(tmp_path, "healthy-vllm-7b")
    (path / "notes").mkdir()
    (path / "notes" / "blob.bin").write_bytes(bytes(range(256)))
    (path / "unknown.json").write_text("{")
    (path / "logs" / "sidecar.log").write_bytes(bytes(range(256)) * 10)
    code, report, _ = diagnose(capsys, path)
    assert code == 0
    assert any("unknown.json" in e.get("collector", "") for e in report["errors"])


# --- options -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ("--tail", "0"),
        ("--tail", "-5"),
        ("--window", "-1"),
        ("--port", "0"),
        ("--port", "70000"),
        ("--timeout", "0.01"),
    ],
)
def test_odd_collection_options_are_usage_errors(capsys, args):
    # --tail 0 used to mean 2000 lines (`or 2000`); a negative window or port reached the client
    with pytest.raises(SystemExit) as done:
        cli_run(["diagnose", "pod/vllm-7b", *args])
    err = capsys.readouterr().err
    assert done.value.code == 3
    assert args[0] in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


# --- the test session itself ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def module_scoped_cache():
    # module fixtures run before the per-test autouse one; they must not see the real cache
    from llmdoctor.wiki.cache import cache_dir

    return cache_dir()


def test_no_fixture_of_any_scope_writes_into_the_users_cache(module_scoped_cache):
    import pwd

    real_home = Path(pwd.getpwuid(os.getuid()).pw_dir)
    assert not module_scoped_cache.is_relative_to(real_home / ".cache")
    assert not Path.home().is_relative_to(real_home) or Path.home() != real_home
    assert os.environ["KUBECONFIG"] != str(real_home / ".kube" / "config")


# --- checks run under a deadline -----------------------------------------------------------------

HANGING_CHECK = """
import time
from llmdoctor.engine.registry import check


@check("{id}", title="a check that never returns", scope="logs")
def hangs(facts):
    time.sleep(3600)
"""


@pytest.fixture(autouse=True)
def _forget_site_checks():
    # checks loaded with --checks-dir stay registered in this process; later tests must not
    # run (and wait for) the hanging ones
    from llmdoctor.engine import registry

    yield
    for check_id, spec in list(registry._CHECKS.items()):
        if spec.fn.__module__.startswith("llmdoctor_site_checks."):
            del registry._CHECKS[check_id]


def site_check(tmp_path: Path, check_id: str, body: str = HANGING_CHECK) -> Path:
    folder = tmp_path / f"checks-{check_id}"
    folder.mkdir()
    (folder / f"{check_id.replace('-', '_')}.py").write_text(body.format(id=check_id))
    return folder


def test_a_hung_check_times_out_and_the_report_still_completes(capsys, tmp_path):
    import time

    folder = site_check(tmp_path, "site-hangs-forever")
    started = time.monotonic()
    code, report, _ = diagnose(
        capsys,
        bundle(tmp_path, "crashloop-cuda-oom"),
        "--checks-dir",
        str(folder),
        "--timeout",
        "0.5",
    )
    assert time.monotonic() - started < 30
    (error,) = [e for e in report["errors"] if e.get("check") == "site-hangs-forever"]
    assert error["message"].startswith("timed out after 0.5s")
    assert code == 2  # the real findings are all still there
    assert by_check(report, "pod-restarts")


def test_a_check_id_defined_in_two_files_is_one_line_naming_both(capsys, tmp_path):
    first = site_check(tmp_path, "site-twice")
    second = tmp_path / "other-site"
    second.mkdir()
    (second / "again.py").write_text(HANGING_CHECK.format(id="site-twice"))
    with pytest.raises(SystemExit) as done:
        cli_run(
            [
                "diagnose",
                "--bundle",
                str(EXAMPLES / "healthy-vllm-7b"),
                "--checks-dir",
                str(first),
                "--checks-dir",
                str(second),
            ]
        )
    err = capsys.readouterr().err
    assert done.value.code == 3
    assert len(err.strip().splitlines()) == 1
    assert "'site-twice' is defined twice" in err
    assert "site_twice.py" in err and "again.py" in err


def test_a_site_check_reusing_a_builtin_id_is_refused_not_dropped(capsys, tmp_path):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "xid.py").write_text(
        "from llmdoctor.engine.registry import check\n\n\n"
        '@check("xid", title="site xid", scope="node")\n'
        "def xid(facts):\n    return None\n"
    )
    with pytest.raises(SystemExit) as done:
        cli_run(
            ["diagnose", "--bundle", str(EXAMPLES / "healthy-vllm-7b"), "--checks-dir", str(folder)]
        )
    err = capsys.readouterr().err
    assert done.value.code == 3
    assert "'xid' is defined twice" in err and "checks/xid.py" in err and str(folder) in err


# --- odd values that used to end in "internal error" ---------------------------------------------


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (
            ("diagnose", "--bundle", str(EXAMPLES / "healthy-vllm-7b"), "--timeout", "inf"),
            "--timeout inf",
        ),
        (("probe", "http://127.0.0.1:9", "--timeout", "inf"), "--timeout inf"),
        (("probe", "http://[::1"), "not a valid URL"),
    ],
)
def test_impossible_values_are_one_line_errors(capsys, args, says):
    with pytest.raises(SystemExit) as done:
        cli_run(list(args))
    err = capsys.readouterr().err
    assert done.value.code == 3
    assert says in err and "internal error" not in err and len(err.strip().splitlines()) == 1


def test_credentials_in_a_probe_url_are_never_printed(capsys):
    with pytest.raises(SystemExit):
        cli_run(["probe", "http://admin:hunter2@127.0.0.1:9", "--timeout", "1", "--window", "0"])
    out = capsys.readouterr()
    assert "hunter2" not in out.out + out.err
    assert "admin:<redacted>@127.0.0.1:9" in out.out


def test_credentials_in_a_url_are_redacted_in_a_written_bundle(tmp_path):
    from llmdoctor.collectors.bundle import write_bundle
    from llmdoctor.engine.facts import Facts

    facts = Facts()
    facts.set("vllm/health.json", {"url": "http://admin:hunter2@vllm:8000/health", "status": 200})
    facts.set("logs/vllm.log", "INFO proxy to https://svc:p4ss@upstream/v1 ok\n")
    dest = write_bundle(facts, tmp_path / "b", target="http://admin:hunter2@vllm:8000")
    written = "".join(p.read_text() for p in dest.rglob("*") if p.is_file())
    assert "hunter2" not in written and "p4ss" not in written
    assert "admin:<redacted>@vllm:8000" in written


# --- collect never overwrites what is not its own --------------------------------------------------


def small_facts():
    from llmdoctor.engine.facts import Facts

    facts = Facts()
    facts.set("logs/vllm.log", "INFO started\n")
    facts.set("k8s/pod.json", {"kind": "Pod"})
    return facts


def test_force_never_deletes_a_folder_of_other_files(tmp_path):
    from llmdoctor.collectors.bundle import write_bundle
    from llmdoctor.errors import BadBundle

    incidents = tmp_path / "incidents"
    incidents.mkdir()
    (incidents / "notes.md").write_text("retro notes")
    (incidents / "2026-11-01.tar.gz").write_bytes(b"an earlier bundle")
    with pytest.raises(BadBundle, match="not only an llmdoctor bundle"):
        write_bundle(small_facts(), incidents, target="pod/x", force=True)
    assert (incidents / "notes.md").read_text() == "retro notes"
    assert (incidents / "2026-11-01.tar.gz").exists()


def test_force_keeps_notes_added_to_an_earlier_bundle_folder(tmp_path):
    from llmdoctor.collectors.bundle import write_bundle
    from llmdoctor.errors import BadBundle

    dest = write_bundle(small_facts(), tmp_path / "incident", target="pod/x")
    (dest / "timeline.md").write_text("09:00 paged")
    with pytest.raises(BadBundle, match=r"timeline\.md"):
        write_bundle(small_facts(), dest, target="pod/x", force=True)
    assert (dest / "timeline.md").read_text() == "09:00 paged"


def test_force_replaces_an_earlier_bundle_folder_or_archive(tmp_path):
    from llmdoctor.collectors.bundle import Bundle, write_bundle

    for name in ("incident", "incident.tar.gz"):
        dest = write_bundle(small_facts(), tmp_path / name, target="pod/old")
        write_bundle(small_facts(), dest, target="pod/new", force=True)
        with Bundle(dest) as b:
            assert b.manifest["target"] == "pod/new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["incident", "incident.tar.gz"]


def test_force_never_overwrites_a_file_that_is_not_a_bundle(tmp_path):
    from llmdoctor.collectors.bundle import write_bundle
    from llmdoctor.errors import BadBundle

    dest = tmp_path / "incident.tar.gz"
    dest.write_bytes(gzip.compress(b"someone's own archive"))
    with pytest.raises(BadBundle, match="not an llmdoctor bundle"):
        write_bundle(small_facts(), dest, target="pod/x", force=True)
    assert gzip.decompress(dest.read_bytes()) == b"someone's own archive"


@pytest.mark.parametrize(
    ("output", "says"),
    [
        ("/dev/null", "not a regular file or folder"),
        (".", "give a file or folder name"),
        ("..", "give a file or folder name"),
    ],
)
def test_collect_to_a_device_or_the_current_folder_is_refused_up_front(capsys, output, says):
    with pytest.raises(SystemExit) as done:
        cli_run(["collect", "pod/vllm-7b", "-o", output, "--force", "--timeout", "1"])
    err = capsys.readouterr().err
    assert done.value.code == 3
    assert says in err and "internal error" not in err and len(err.strip().splitlines()) == 1


# --- bundles: sizes before writing, signals, links, nesting ----------------------------------------


def tar_of(path: Path, members: dict[str, bytes]) -> Path:
    import io
    import tarfile

    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


MANIFEST = json.dumps({"format": "llmdoctor-bundle/1", "target": "pod/x"}).encode()


def test_an_archive_over_the_size_cap_is_refused_before_anything_is_written(tmp_path, monkeypatch):
    import tempfile

    from llmdoctor.collectors import bundle as bundle_module
    from llmdoctor.errors import BadBundle

    # the cap scaled down: a small archive whose members add up to more than it; the big
    # member comes first, as in a bomb, and nothing of it may reach the disk
    monkeypatch.setattr(bundle_module, "MAX_TOTAL_BYTES", 3 << 20)
    monkeypatch.setattr(bundle_module, "MAX_MEMBER_BYTES", 2 << 20)
    archive = tar_of(
        tmp_path / "bomb.tar.gz",
        {
            "b/logs/a.log": b"\0" * (2 << 20),
            "b/logs/b.log": b"\0" * (2 << 20),
            "b/manifest.json": MANIFEST,
        },
    )
    assert archive.stat().st_size < 64 * 1024
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    with pytest.raises(BadBundle, match="nothing was written"):
        bundle_module.Bundle(archive)
    assert list(temp.iterdir()) == []


def test_sigterm_while_unpacking_leaves_nothing_in_the_temp_folder(tmp_path):
    import signal
    import subprocess
    import sys
    import time

    archive = tar_of(
        tmp_path / "big.tar.gz",
        {"b/manifest.json": MANIFEST, **{f"b/logs/c{n}.log": b"\0" * (90 << 20) for n in range(4)}},
    )
    temp = tmp_path / "tmp"
    temp.mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-m", "llmdoctor", "diagnose", "--bundle", str(archive)],
        env={**os.environ, "TMPDIR": str(temp)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while not any(temp.rglob("*.log")) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert any(temp.rglob("*.log")), "unpacking never started"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM
    assert b"Traceback" not in err
    assert list(temp.iterdir()) == []


def test_a_link_loop_in_a_bundle_folder_is_a_one_line_refusal(capsys, tmp_path):
    path = bundle(tmp_path, "healthy-vllm-7b")
    (path / "logs" / "a.log").symlink_to("b.log")
    (path / "logs" / "b.log").symlink_to("a.log")
    with pytest.raises(SystemExit) as done:
        cli_run(["diagnose", "--bundle", str(path)])
    err = capsys.readouterr().err
    assert done.value.code == 3
    assert "is a link loop" in err and len(err.strip().splitlines()) == 1


def test_deeply_nested_json_is_a_reason_not_an_internal_error(capsys, tmp_path):
    path = bundle(tmp_path, "healthy-vllm-7b")
    (path / "k8s" / "pod.json").write_text("[" * 100_000 + "]" * 100_000)
    _, report, _ = diagnose(capsys, path)
    assert skipped(report)["pod-restarts"] == "k8s/pod.json: JSON nested too deeply to read"
    (path / "manifest.json").write_text('{"a":' * 100_000 + "1" + "}" * 100_000)
    with pytest.raises(SystemExit) as done:
        cli_run(["diagnose", "--bundle", str(path)])
    err = capsys.readouterr().err
    assert done.value.code == 3 and "manifest.json: nested too deeply to read" in err


# --- what reaches the terminal ----------------------------------------------------------------------

HOSTILE_LINE = (
    "ERROR torch.OutOfMemoryError: CUDA out of memory. \x1b[2J\x1b]0;pwned\x07 "
    "\u202eexe.live\u202c \x9b31m"
)


def hostile_bundle(tmp_path: Path) -> Path:
    path = bundle(tmp_path, "crashloop-cuda-oom")
    log = path / "logs" / "vllm.previous.log"
    log.write_text(HOSTILE_LINE + "\n" + log.read_text())
    manifest = json.loads((path / "manifest.json").read_text())
    manifest["target"] = "pod/\x1b]0;title\x07vllm"
    (path / "manifest.json").write_text(json.dumps(manifest))
    return path


@pytest.mark.parametrize("form", [[], ["--markdown"], ["--verbose", "--no-color"]])
def test_escape_sequences_from_logs_and_targets_are_shown_not_obeyed(capsys, tmp_path, form):
    with pytest.raises(SystemExit):
        cli_run(["diagnose", "--bundle", str(hostile_bundle(tmp_path)), *form])
    out = capsys.readouterr().out
    for raw in ("\x1b", "\x07", "\u202e", "\u202c", "\x9b"):
        assert raw not in out
    assert "\\x1b[2J\\x1b]0;pwned\\x07 \\u202eexe.live\\u202c \\x9b31m" in out
    assert "pod/\\x1b]0;title\\x07vllm" in out


def test_explain_shows_escape_sequences_escaped(capsys, tmp_path):
    log = tmp_path / "crash.log"
    log.write_text(HOSTILE_LINE + "\n")
    with pytest.raises(SystemExit):
        cli_run(["explain", str(log)])
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\u202e" not in out
    # the paste cleaner drops colour codes; what is left is shown escaped, never obeyed
    assert "\\u202eexe.live\\u202c" in out


def test_markdown_evidence_cannot_close_its_code_fence(tmp_path):
    from llmdoctor.engine.findings import Finding, Severity
    from llmdoctor.engine.report import Report
    from llmdoctor.render.report import render_markdown

    finding = Finding("x", Severity.WARNING, "s", [{"text": "```\n# injected heading"}])
    text = render_markdown(Report("t", [finding], [], []))
    assert "````text" in text and "\\x0a# injected heading" in text


def test_the_fix_excerpt_includes_the_code_block_with_the_command():
    from llmdoctor.render.fix_text import fix_excerpt

    fix = "1. Reset the GPU:\n\n   ```bash\n   nvidia-smi -r -i 0\n   ```\n2. Then restart.\n"
    assert fix_excerpt(fix) == ["1. Reset the GPU:", "    nvidia-smi -r -i 0", "2. Then restart."]
    long_block = "Run:\n```\n" + "".join(f"cmd {n}\n" for n in range(20)) + "```\n"
    assert fix_excerpt(long_block)[-1] == "    …" and len(fix_excerpt(long_block)) == 10


def test_a_diagnose_report_shows_the_command_of_the_fix(capsys):
    with pytest.raises(SystemExit):
        cli_run(["diagnose", "--bundle", str(EXAMPLES / "xid79-gpu-fallen-off-bus"), "--no-color"])
    out = capsys.readouterr().out
    assert "kubectl drain <node> --ignore-daemonsets" in out


def test_piped_output_keeps_the_headline_whole_and_the_exit_code_under_head():
    import subprocess
    import sys

    args = [sys.executable, "-m", "llmdoctor", "diagnose", "--bundle"]
    args.append(str(EXAMPLES / "crashloop-cuda-oom"))
    full = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert full.returncode == 2
    headline = full.stdout.splitlines()[0]  # longer than 80 columns, and still one line
    assert (
        len(headline) > 80 and "crashloop-cuda-oom)  (" in headline and "not checked)" in headline
    )
    # the reader goes away before anything is written: the exit code is still the report's
    proc = subprocess.Popen([*args, "--verbose"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 2, err
    assert b"Error" not in err and b"Traceback" not in err


# --- explain: bounded reading of whatever it is given ------------------------------------------------

OOM_LINE = (
    # PyTorch's message, as in examples/bundles/crashloop-cuda-oom/logs/vllm.previous.log
    "ERROR 03-13 09:00:43 [core.py:330] torch.OutOfMemoryError: CUDA out of memory. "
    "Tried to allocate 1.16 GiB. GPU 0 has a total capacity of 7.75 GiB of which 1.17 GiB is free."
)


def explain_cli(capsys, *args: str, stdin: bytes | None = None, monkeypatch=None):
    import io
    import sys

    if stdin is not None:
        assert monkeypatch is not None
        fake = io.TextIOWrapper(io.BufferedReader(io.BytesIO(stdin)))
        monkeypatch.setattr(sys, "stdin", fake)
    with pytest.raises(SystemExit) as done:
        cli_run(["explain", *args])
    out = capsys.readouterr()
    assert "Traceback" not in out.err
    return int(done.value.code), out.out, out.err


def test_a_utf16_log_is_read_as_text(capsys, tmp_path):
    # PowerShell's `kubectl logs ... > crash.log` writes UTF-16 LE with a BOM
    log = tmp_path / "crash.log"
    log.write_bytes(("INFO starting\r\n" + OOM_LINE + "\r\n").encode("utf-16"))
    code, out, err = explain_cli(capsys, str(log), "--json")
    assert code == 2
    assert json.loads(out)["matches"][0]["id"] == "cuda-oom-runtime"
    assert "read as UTF-16-LE text" in err


def test_utf16_without_a_bom_on_stdin_is_read_as_text(capsys, monkeypatch):
    data = (OOM_LINE + "\n").encode("utf-16-le")
    code, out, _ = explain_cli(capsys, "-", "--json", stdin=data, monkeypatch=monkeypatch)
    assert code == 2 and json.loads(out)["matches"][0]["id"] == "cuda-oom-runtime"


def test_gzip_from_a_pipe_is_not_consumed_by_sniffing(capsys, tmp_path):
    # `llmdoctor explain <(gzip -c crash.log)`: the path is a pipe, readable once
    import threading

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    data = gzip.compress((OOM_LINE + "\n").encode())

    def writer():
        with open(fifo, "wb") as fh:
            fh.write(data)

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    code, out, _ = explain_cli(capsys, str(fifo), "--json")
    thread.join(5)
    assert code == 2 and json.loads(out)["matches"][0]["id"] == "cuda-oom-runtime"


def test_binary_on_stdin_is_refused_not_searched(capsys, monkeypatch):
    blob = bytes(range(256)) * 400
    code, _, err = explain_cli(capsys, "-", stdin=blob, monkeypatch=monkeypatch)
    assert code == 3 and "looks like binary data" in err


def test_dev_zero_is_refused_at_once(capsys):
    code, _, err = explain_cli(capsys, "/dev/zero")
    assert code == 3 and "is a device, not a log file" in err


def test_endless_nul_bytes_on_stdin_stop_with_a_reason(capsys, monkeypatch):
    from llmdoctor.triage import log_input

    monkeypatch.setattr(log_input, "MAX_NUL_PREFIX", 1 << 20)
    code, _, err = explain_cli(capsys, "-", stdin=b"\0" * (3 << 20), monkeypatch=monkeypatch)
    assert code == 3 and "NUL bytes and nothing else" in err


def test_a_fifo_without_a_writer_is_refused_after_a_wait(capsys, tmp_path, monkeypatch):
    import time

    from llmdoctor.triage import log_input

    monkeypatch.setattr(log_input, "FIFO_WRITER_WAIT", 0.3)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    started = time.monotonic()
    code, _, err = explain_cli(capsys, str(fifo))
    assert time.monotonic() - started < 10
    assert code == 3 and "a named pipe with no writer (waited 0.3s)" in err


def test_a_gzip_bomb_is_refused_by_its_ratio(capsys, tmp_path, monkeypatch):
    from llmdoctor.triage import log_input

    monkeypatch.setattr(log_input, "GZIP_RATIO_FROM", 1 << 20)
    bomb = tmp_path / "vllm.log.1.gz"
    bomb.write_bytes(gzip.compress(b"INFO x\n" * (4 << 20), 9))  # 28 MiB from ~50 KiB
    code, _, err = explain_cli(capsys, str(bomb))
    assert code == 3 and "refusing it as a decompression bomb" in err


def test_a_stream_of_unknown_size_is_read_up_to_the_cap_and_says_so(capsys, monkeypatch):
    from llmdoctor.triage import log_input

    monkeypatch.setattr(log_input, "MAX_STREAM_BYTES", 1 << 20)
    data = (OOM_LINE + "\n").encode() + b"INFO fine\n" * 300_000
    code, _, err = explain_cli(capsys, "-", stdin=data, monkeypatch=monkeypatch)
    assert code == 2
    assert "only the first" in err and "were read" in err


def test_a_huge_line_is_cut_and_said_so_in_linear_time(capsys, tmp_path):
    # 192 MiB on one line: before, the block reader re-copied the growing line (quadratic)
    import time

    log = tmp_path / "one-line.log"
    with open(log, "wb") as fh:
        fh.write(OOM_LINE.encode() + b" ")
        for _ in range(24):
            fh.write(b"y" * (8 << 20))
        fh.write(b"\nINFO after\n")
    started = time.monotonic()
    code, out, err = explain_cli(capsys, str(log), "--json")
    assert time.monotonic() - started < 30
    assert code == 2 and json.loads(out)["matches"][0]["id"] == "cuda-oom-runtime"
    assert "1 line(s) longer than 1 MiB were cut" in err


def test_line_capping_keeps_every_short_line_exact():
    import io

    from llmdoctor.triage.log_input import LogStream

    text = b"".join(b"x" * n + b"\n" for n in (0, 5, 30, 31, 64, 65, 200, 3)) + b"tail"
    stream = LogStream(io.BufferedReader(io.BytesIO(text)), "t", max_line=64)
    got = b""
    while chunk := stream.read(7):
        got += chunk
    lines = got.split(b"\n")
    assert [len(x) for x in lines] == [0, 5, 30, 31, 64, 64, 64, 3, 4]
    assert stream.lines_cut == 2


# --- wiki add keeps what was typed; YAML round-trips ---------------------------------------------


def wiki_add(*args: str, input: str | None = None):
    from typer.testing import CliRunner

    from llmdoctor.cli import build_app

    return CliRunner().invoke(build_app(("wiki",)), ["wiki", "add", *args], input=input)


def saved_draft(output: str) -> Path:
    return Path(output.split("saved in ")[1].split()[0])


def test_ctrl_d_in_the_fix_keeps_the_fix_lines_typed(tmp_path):
    typed = "\n".join(
        [
            "disk-full",
            "Model cache disk is full",
            "warning",
            "storage",
            "",
            "No space left on device",
            "",
            "Downloads stop with Errno 28.",
            "",
            "The emptyDir is too small.",
            "",
            "Mount a 200Gi PVC at /root/.cache/huggingface.",
            "kubectl rollout restart deploy/vllm",
        ]
    )  # ... and Ctrl-D instead of the empty line that ends the Fix
    result = wiki_add("--wiki", str(tmp_path / "team"), input=typed + "\n")
    assert result.exit_code != 0
    draft = saved_draft(result.output).read_text()
    assert "Mount a 200Gi PVC" in draft and "kubectl rollout restart deploy/vllm" in draft
    assert "No space left on device" in draft


@pytest.mark.parametrize("signature", ["a{4294967296}", "x{99999999999999999999}"])
def test_a_signature_with_an_absurd_repeat_count_is_a_problem_and_the_draft_is_kept(
    tmp_path, signature
):
    result = wiki_add(
        *("--wiki", str(tmp_path / "team"), "--id", "absurd", "--title", "Absurd"),
        *("--signature", signature, "--symptom", "s", "--cause", "c", "--fix", "f"),
    )
    assert result.exit_code == 3, result.output
    assert "repetition number is too large" in result.output
    assert signature in saved_draft(result.output).read_text()
    assert not (tmp_path / "team" / "absurd.md").exists()


def test_yaml_special_values_come_back_exactly_as_typed(tmp_path):
    from llmdoctor.wiki.entry import parse_entry_file

    odd = [".inf", "0x1F", "=", "<<", "yes", "~", "null", "1e3", "- x", "a: b", "#c", "'q'"]
    result = wiki_add(
        *("--wiki", str(tmp_path / "team"), "--id", "odd-values", "--title", "<<"),
        *[arg for value in odd for arg in ("--tag", value)],
        *("--alias", "=", "--alias", ".NaN"),
        *("--signature", r"'quoted' \\ back\slash: \[x\]", "--signature", "0x1F"),
        *("--symptom", "s", "--cause", "c", "--fix", "f"),
    )
    assert result.exit_code == 0, result.output
    entry = parse_entry_file(tmp_path / "team" / "odd-values.md")
    assert entry.title == "<<"
    assert entry.tags == odd
    assert entry.aliases == ["=", ".NaN"]
    assert entry.signatures == [r"'quoted' \\ back\slash: \[x\]", "0x1F"]


def test_an_index_path_that_is_a_folder_is_a_one_line_error(capsys):
    from llmdoctor.wiki.index import index_path, resolve_dirs

    index_path(resolve_dirs(None)).mkdir(parents=True)
    with pytest.raises(SystemExit) as done:
        cli_run(["wiki", "search", "oom"])
    err = capsys.readouterr().err
    assert done.value.code == 3
    assert "the wiki index is not a file" in err and "internal error" not in err


def test_mdit_py_plugins_is_not_a_dependency():
    import tomllib

    pyproject = tomllib.loads((EXAMPLES.parent.parent / "pyproject.toml").read_text())
    assert not any(d.startswith("mdit-py-plugins") for d in pyproject["project"]["dependencies"])


ABSURD_ENTRY = """---
id: absurd-repeat
title: A signature past the regex compiler's repeat limit
severity: warning
signatures:
  - 'a{4294967296}'
---
## Symptom
s
## Cause
c
## Fix
f
"""


def test_lint_explain_and_diagnose_name_a_signature_with_an_absurd_repeat_count(capsys, tmp_path):
    team = tmp_path / "team"
    team.mkdir()
    (team / "absurd-repeat.md").write_text(ABSURD_ENTRY)
    log = tmp_path / "crash.log"
    log.write_text(OOM_LINE + "\n")
    runs = {
        "lint": (["wiki", "lint", str(team)], 1),
        "explain": (["explain", str(log), "--wiki", str(team)], 2),
        "diagnose": (
            ["diagnose", "--bundle", str(EXAMPLES / "crashloop-cuda-oom"), "--wiki", str(team)],
            2,
        ),
    }
    for name, (args, expected) in runs.items():
        with pytest.raises(SystemExit) as done:
            cli_run(args)
        out = capsys.readouterr()
        assert "internal error" not in out.err, name
        assert done.value.code == expected, (name, out.err)
    # lint says which line and why
    with pytest.raises(SystemExit):
        cli_run(runs["lint"][0])
    assert "repetition number is too large" in capsys.readouterr().out


def test_wiki_show_search_and_list_escape_a_team_entrys_control_characters(capsys, tmp_path):
    team = tmp_path / "team"
    team.mkdir()
    (team / "kestrel-title.md").write_text(
        '---\nid: kestrel-title\ntitle: "Kestrel \\e]0;pwned\\a gateway \\u202Eevil"\n'
        "severity: warning\ntags: [kestrel]\n---\n## Symptom\nkestrel \x1b[2J clears\n"
        "## Cause\nc\n## Fix\nf\n"
    )
    for args in (["show", "kestrel-title"], ["search", "kestrel"], ["list"]):
        with pytest.raises(SystemExit) as done:
            cli_run(["wiki", *args, "--wiki", str(team)])
        out = capsys.readouterr().out
        assert done.value.code == 0, args
        assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out, args
        assert "\\x1b]0;pwned\\x07" in out, args


def test_a_bundle_into_an_unwritable_folder_is_a_one_line_refusal(tmp_path):
    from llmdoctor.collectors.bundle import write_bundle
    from llmdoctor.errors import BadBundle

    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with pytest.raises(BadBundle, match="cannot write"):
        write_bundle(small_facts(), blocker / "incident.tar.gz", target="pod/x")
    assert blocker.read_text() == "not a folder"


def test_a_parser_stuck_on_a_document_times_out_like_a_check():
    import threading
    import time

    from llmdoctor.engine import derive
    from llmdoctor.engine.facts import Facts

    release = threading.Event()
    stuck = derive.Derivation("fuzz/stuck", ("logs/vllm.log",), lambda facts: release.wait(60))
    derive.load_parsers()
    derive._DERIVATIONS.append(stuck)
    try:
        facts = Facts()
        facts.set("logs/vllm.log", "INFO x\n")
        facts.set("settings/timeout", 0.3)
        started = time.monotonic()
        derive.derive_all(facts)
        assert time.monotonic() - started < 10
    finally:
        derive._DERIVATIONS.remove(stuck)
        release.set()
    assert facts.missing_reason("fuzz/stuck").startswith("parsing timed out after 0.3s")
    assert "parse fuzz/stuck" in facts.collector_errors


def test_wiki_search_from_an_endless_pipe_stops_at_the_cap(monkeypatch):
    from typer.testing import CliRunner

    from llmdoctor.cli import build_app
    from llmdoctor.wiki import search_cli

    monkeypatch.setattr(search_cli, "MAX_SEARCH_INPUT", 1 << 20)
    piped = "\0" * (3 << 20) + OOM_LINE + "\n"  # the match lies past the cap
    result = CliRunner().invoke(build_app(("wiki",)), ["wiki", "search", "-"], input=piped)
    assert "searched the end of the first 1 MiB of stdin" in result.output
    assert "nothing to search for" in str(result.exception)  # exit 3 through llmdoctor.cli


@pytest.mark.parametrize("source", ["/dev/zero", "folder"])
def test_wiki_add_from_a_device_or_folder_is_refused_at_once(capsys, tmp_path, source):
    path = str(tmp_path) if source == "folder" else source
    with pytest.raises(SystemExit) as done:
        cli_run(["wiki", "add", "--wiki", str(tmp_path / "team"), "--from-file", path])
    err = capsys.readouterr().err
    assert done.value.code == 3 and "not a regular file" in err


def test_a_bundle_that_is_a_device_or_fifo_is_refused_at_once(capsys, tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path in ("/dev/zero", str(fifo)):
        with pytest.raises(SystemExit) as done:
            cli_run(["diagnose", "--bundle", path])
        err = capsys.readouterr().err
        assert done.value.code == 3 and "not a regular file or folder" in err


def test_a_model_config_that_is_a_device_or_deeply_nested_is_one_line(capsys, tmp_path):
    deep = tmp_path / "config.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    for path, says in (("/dev/zero", "not a regular file"), (str(deep), "nested too deeply")):
        with pytest.raises(SystemExit) as done:
            cli_run(["capacity", "--model-config", path, "--gpu", "H100"])
        err = capsys.readouterr().err
        assert done.value.code == 3 and says in err and len(err.strip().splitlines()) == 1


def test_a_copytruncated_log_file_with_a_long_nul_run_is_still_read(capsys, tmp_path, monkeypatch):
    from llmdoctor.triage import log_input

    monkeypatch.setattr(log_input, "MAX_NUL_PREFIX", 1 << 20)
    log = tmp_path / "vllm.log"
    log.write_bytes(b"\0" * (3 << 20) + (OOM_LINE + "\n").encode())
    code, out, _ = explain_cli(capsys, str(log), "--json")
    assert code == 2 and json.loads(out)["matches"][0]["id"] == "cuda-oom-runtime"
