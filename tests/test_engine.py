"""The engine end to end: targets, bundles (and their refusals), collectors, checks, reports."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
from example_bundles import bundle, diagnose_json, skipped

from llmdoctor.cli import run as cli_run
from llmdoctor.collectors.bundle import Bundle, write_bundle
from llmdoctor.engine.collect import CollectContext, Collector, run_collectors
from llmdoctor.engine.facts import Facts, Missing
from llmdoctor.engine.findings import Finding, Severity
from llmdoctor.engine.registry import CheckSpec
from llmdoctor.engine.runner import run_checks
from llmdoctor.engine.target import parse_target
from llmdoctor.engine.textsource import TextSource
from llmdoctor.errors import BadBundle, BadTarget

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "bundles"


def run_cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "llmdoctor", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


# --- targets -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "kind", "name"),
    [
        ("pod/vllm-7b", "pod", "vllm-7b"),
        ("deploy/vllm", "deployment", "vllm"),
        ("deployment/vllm", "deployment", "vllm"),
        ("sts/vllm", "statefulset", "vllm"),
        ("statefulset/vllm-0", "statefulset", "vllm-0"),
        ("node", "node", ""),
    ],
)
def test_target_forms_are_recognised(text, kind, name):
    target = parse_target(text)
    assert (target.kind, target.name) == (kind, name)


def test_http_target_keeps_the_url():
    assert parse_target("http://vllm:8000/").url == "http://vllm:8000"


@pytest.mark.parametrize("text", ["vllm-7b", "svc/vllm", "pod/Bad_Name", "http://:80", "ftp://x"])
def test_unrecognised_targets_list_the_accepted_forms(text):
    # a typo must say what would have been accepted, not just "invalid"
    with pytest.raises(BadTarget) as err:
        parse_target(text)
    assert (
        "pod/NAME" in str(err.value) or "not a valid" in str(err.value) or "URL" in str(err.value)
    )


def test_cli_bad_target_is_one_line_exit_3():
    proc = run_cli("diagnose", "svc/vllm")
    assert proc.returncode == 3
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert "pod/NAME" in proc.stderr


def test_cli_usage_error_exits_3_not_2():
    # exit 2 means "critical findings" in llmdoctor; a typo in an option must not look like that
    proc = run_cli("diagnose", "--no-such-option")
    assert proc.returncode == 3
    assert "Traceback" not in proc.stderr


# --- bundles: reading and refusing ------------------------------------------------------------


def make_tar(path: Path, members: list[tuple[str, bytes]], links=(), fmt="llmdoctor-bundle/1"):
    manifest = json.dumps(
        {"format": fmt, "target": "pod/x", "collected_at": "2025-09-04T01:30:00Z"}
    )
    with tarfile.open(path, "w:gz") as tar:
        for name, data in [("b/manifest.json", manifest.encode()), *members]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for name, target in links:
            info = tarfile.TarInfo(name)
            info.type = tarfile.SYMTYPE
            info.linkname = target
            tar.addfile(info)
    return path


def test_bundle_archive_is_read_like_a_folder(tmp_path):
    archive = tmp_path / "b.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(EXAMPLES / "crashloop-cuda-oom", arcname="crashloop")
    with Bundle(archive) as bundle:
        facts = bundle.to_facts()
        assert facts.get("k8s/pod.json")["kind"] == "Pod"
        assert isinstance(facts.get("logs/vllm.previous.log"), TextSource)
        assert facts.get("time/now") == pytest.approx(1756949400.0)


def test_bundle_member_escaping_with_dotdot_is_refused(tmp_path):
    archive = make_tar(tmp_path / "evil.tar.gz", [("../../etc/passwd", b"root:x:0:0")])
    with pytest.raises(BadBundle, match="escapes the bundle"):
        Bundle(archive)
    assert not (tmp_path.parent.parent / "etc" / "passwd").exists()


def test_bundle_member_with_absolute_path_is_refused(tmp_path):
    archive = make_tar(tmp_path / "abs.tar.gz", [("/etc/cron.d/x", b"* * * * * root id")])
    with pytest.raises(BadBundle, match="absolute path"):
        Bundle(archive)


def test_bundle_symlink_pointing_outside_is_refused(tmp_path):
    archive = make_tar(tmp_path / "link.tar.gz", [], links=[("b/logs/vllm.log", "/etc/shadow")])
    with pytest.raises(BadBundle, match="links outside"):
        Bundle(archive)


def test_bundle_folder_with_symlink_outside_is_refused(tmp_path):
    folder = tmp_path / "b"
    (folder / "logs").mkdir(parents=True)
    (folder / "manifest.json").write_text(json.dumps({"format": "llmdoctor-bundle/1"}))
    (folder / "logs" / "vllm.log").symlink_to("/etc/hostname")
    with pytest.raises(BadBundle, match="links outside"):
        Bundle(folder).to_facts()


def test_truncated_archive_is_refused_as_corrupt(tmp_path):
    good = tmp_path / "good.tar.gz"
    with tarfile.open(good, "w:gz") as tar:
        tar.add(EXAMPLES / "crashloop-cuda-oom", arcname="b")
    data = good.read_bytes()
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(BadBundle, match="corrupt or truncated"):
        Bundle(cut)


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (b"", "empty file, not an llmdoctor bundle"),
        (b"garbage\n", "(not a tar, tar.gz, tar.bz2 or tar.xz archive)"),
    ],
)
def test_an_archive_that_is_none_says_why_in_one_clause(tmp_path, content, said):
    # tarfile's own message ends in a colon with its reasons on the lines below
    archive = tmp_path / "bundle.tar.gz"
    archive.write_bytes(content)
    with pytest.raises(BadBundle) as refused:
        Bundle(archive)
    assert str(refused.value) == f"{archive}: " + (
        said if said.startswith("empty") else f"corrupt or truncated archive {said}"
    )


def test_oversized_member_is_refused(tmp_path, monkeypatch):
    import llmdoctor.collectors.bundle as bundle_module

    monkeypatch.setattr(bundle_module, "MAX_MEMBER_BYTES", 1024)
    archive = make_tar(tmp_path / "big.tar.gz", [("b/logs/vllm.log", b"x" * 4096)])
    with pytest.raises(BadBundle, match="over the"):
        Bundle(archive)


def test_wrong_format_string_is_refused(tmp_path):
    archive = make_tar(tmp_path / "v2.tar.gz", [], fmt="llmdoctor-bundle/2")
    with pytest.raises(BadBundle, match="expected 'llmdoctor-bundle/1'"):
        Bundle(archive)


@pytest.mark.parametrize("case", ["dotdot", "truncated", "format", "missing"])
def test_cli_refuses_bad_bundles_with_one_line_and_exit_3(tmp_path, case):
    if case == "dotdot":
        path = make_tar(tmp_path / "evil.tar.gz", [("../../etc/passwd", b"root")])
    elif case == "format":
        path = make_tar(tmp_path / "v2.tar.gz", [], fmt="something-else")
    elif case == "missing":
        path = tmp_path / "nope.tar.gz"
    else:
        good = make_tar(tmp_path / "g.tar.gz", [("b/logs/vllm.log", os.urandom(200_000))])
        path = tmp_path / "cut.tar.gz"
        path.write_bytes(good.read_bytes()[:5000])
    proc = run_cli("diagnose", "--bundle", str(path))
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert proc.stderr.strip().count("\n") == 0, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stderr.startswith("llmdoctor: ")


# --- bundles: writing ---------------------------------------------------------------------------


def test_write_bundle_redacts_secrets_and_round_trips(tmp_path):
    facts = Facts()
    pod = json.loads((EXAMPLES / "healthy-vllm-7b" / "k8s" / "pod.json").read_text())
    pod["spec"]["containers"][0]["env"] = [
        {"name": "HF_TOKEN", "value": "hf_abcdefghijklmnopqrstuvwxyz123456"},
        {"name": "OPENAI_API_KEY", "value": "plain-secret"},
        {"name": "VLLM_LOGGING_LEVEL", "value": "INFO"},
    ]
    facts.set("k8s/pod.json", pod)
    log = "curl -H 'Authorization: Bearer sk-live-0123456789abcdefghij' http://x\nnormal line\n"
    facts.set("logs/vllm.log", TextSource.from_text("logs/vllm.log", log))
    facts.set("time/now", 1756949400.0)
    facts.mark_missing("logs/vllm.previous.log", "forbidden: cannot get pods/log")
    out = write_bundle(facts, tmp_path / "incident.tar.gz", target="pod/x", namespace="serving")
    with Bundle(out) as bundle:
        back = bundle.to_facts()
        env = {
            e["name"]: e["value"] for e in back.get("k8s/pod.json")["spec"]["containers"][0]["env"]
        }
        text = back.get("logs/vllm.log").read_text()
        reason = back.missing_reason("logs/vllm.previous.log")
    assert env["HF_TOKEN"] == "<redacted>" and env["OPENAI_API_KEY"] == "<redacted>"
    assert env["VLLM_LOGGING_LEVEL"] == "INFO"
    assert "sk-live" not in text and "normal line" in text
    assert reason == "forbidden: cannot get pods/log"


def test_write_bundle_never_overwrites(tmp_path):
    dest = tmp_path / "incident.tar.gz"
    dest.write_text("the user's file")
    facts = Facts({"time/now": 0.0})
    with pytest.raises(BadBundle, match="already exists"):
        write_bundle(facts, dest, target="pod/x")
    assert dest.read_text() == "the user's file"


# --- collectors and checks ----------------------------------------------------------------------


def test_a_hanging_collector_is_abandoned_and_the_others_still_report():
    def hangs(ctx):
        time.sleep(30)
        return {}

    def works(ctx):
        return {"k8s/pod.json": {"kind": "Pod"}, "logs/vllm.log": Missing("403 pods/log forbidden")}

    def breaks(ctx):
        raise ConnectionRefusedError("connection refused")

    facts = Facts()
    started = time.monotonic()
    run_collectors(
        [
            Collector("slow", ("node/nvidia-smi.xml",), hangs),
            Collector("k8s", ("k8s/pod.json",), works),
            Collector("http", ("vllm/",), breaks),
        ],
        CollectContext(target=None, timeout=0.5),
        facts,
    )
    assert time.monotonic() - started < 2.0
    assert facts.get("k8s/pod.json") == {"kind": "Pod"}
    assert "timed out after 0.5s" in facts.missing_reason("node/nvidia-smi.xml")
    assert facts.missing_reason("logs/vllm.log") == "403 pods/log forbidden"
    assert "connection refused" in facts.missing_reason("vllm/metrics-0.txt")
    assert set(facts.collector_errors) == {"slow", "http"}


def spec(check_id, fn, needs=()):
    return CheckSpec(check_id, fn, check_id, "k8s", tuple(needs), ())


def test_missing_facts_skip_a_check_with_the_reason_and_a_raising_check_is_an_error():
    facts = Facts({"k8s/pod.json": {}})
    facts.mark_missing("logs/", "forbidden: cannot get pods/log")

    def needs_logs(f):
        f.require("logs/vllm.log")

    def raises(f):
        raise KeyError("status")

    report = run_checks(
        facts,
        [
            spec("a", needs_logs),
            spec("b", raises),
            spec("c", lambda f: None, needs=("k8s/pod.json",)),
        ],
        "pod/x",
    )
    assert report.skipped == [
        {"check": "a", "reason": "logs/vllm.log: forbidden: cannot get pods/log"}
    ]
    assert report.errors == [{"check": "b", "message": "KeyError: 'status'"}]
    assert [f.severity for f in report.findings] == [Severity.OK]
    # a check that crashed means we cannot vouch for health
    assert report.status == "warning"


def test_nothing_checked_is_unknown_never_ok():
    report = run_checks(Facts(), [spec("a", lambda f: None, needs=("k8s/pod.json",))], "pod/x")
    assert report.status == "unknown"


# --- the example bundles through the CLI --------------------------------------------------------


def test_crashloop_bundle_exits_2_and_names_the_oom_with_its_lines():
    proc = run_cli("diagnose", "--bundle", str(EXAMPLES / "crashloop-cuda-oom"), "--json")
    assert proc.returncode == 2, proc.stderr
    out = json.loads(proc.stdout)
    assert set(out) == {"schema", "target", "status", "findings", "skipped", "errors", "stories"}
    assert out["schema"] == "llmdoctor/2" and out["status"] == "critical"
    oom = [f for f in out["findings"] if "cuda-oom-runtime" in f["runbooks"]]
    assert oom, out["findings"]
    lines = [e for f in oom for e in f["evidence"] if "line" in e]
    assert any("torch.OutOfMemoryError: CUDA out of memory" in e["text"] for e in lines)
    assert all(e["source"] == "logs/vllm.previous.log" for e in lines)
    crash = next(f for f in out["findings"] if f["check"] == "pod-restarts")
    assert crash["severity"] == "critical" and "CrashLoopBackOff" in crash["summary"]
    for f in out["findings"]:
        assert set(f) >= {"check", "severity", "summary", "evidence", "runbooks"}


def test_crashloop_terminal_report_shows_fix_from_the_runbook():
    proc = run_cli("diagnose", "--bundle", str(EXAMPLES / "crashloop-cuda-oom"), "--no-color")
    assert proc.returncode == 2
    # the OOM came before the server served: the start-up story (cuda-oom-runtime's at_startup)
    assert "CRITICAL" in proc.stdout and "runbook vllm-startup-memory-insufficient" in proc.stdout
    assert "Fix:" in proc.stdout
    assert "Not checked" in proc.stdout  # node and vLLM facts are not in this bundle


def test_healthy_bundle_is_ok_in_what_was_checked_and_lists_what_was_not():
    proc = run_cli("diagnose", "--bundle", str(EXAMPLES / "healthy-vllm-7b"), "--json")
    out = json.loads(proc.stdout)
    assert out["status"] == "ok", out
    assert proc.returncode == 0
    assert out["skipped"], "checks without facts must be listed, not silently passed"


def test_oomkilled_bundle_links_the_k8s_oomkilled_runbook():
    proc = run_cli("diagnose", "--bundle", str(EXAMPLES / "oomkilled-host-memory"), "--json")
    out = json.loads(proc.stdout)
    assert proc.returncode == 2
    finding = next(f for f in out["findings"] if "k8s-oomkilled" in f["runbooks"])
    assert "16Gi" in finding["summary"]


def test_markdown_report_is_pasteable():
    proc = run_cli("diagnose", "--bundle", str(EXAMPLES / "crashloop-cuda-oom"), "--markdown")
    assert proc.stdout.startswith("## llmdoctor: ")
    assert "- **CRITICAL** `pod-restarts`" in proc.stdout
    assert "```text" in proc.stdout


def test_only_and_skip_select_checks():
    proc = run_cli(
        "diagnose",
        "--bundle",
        str(EXAMPLES / "crashloop-cuda-oom"),
        "--json",
        "--only",
        "pod-restarts",
    )
    out = json.loads(proc.stdout)
    assert {f["check"] for f in out["findings"]} == {"pod-restarts"}
    proc = run_cli("diagnose", "--bundle", str(EXAMPLES / "crashloop-cuda-oom"), "--only", "nope")
    assert proc.returncode == 3 and "unknown check" in proc.stderr
    # a list as an SRE types it: commas, and repeated
    bundle = str(EXAMPLES / "crashloop-cuda-oom")
    only = ["--only", "pod-restarts, pod-shm", "--only", "pod-probes"]
    proc = run_cli("diagnose", "--bundle", bundle, "--json", *only)
    checks = {f["check"] for f in json.loads(proc.stdout)["findings"]}
    assert checks == {"pod-restarts", "pod-shm", "pod-probes"}
    proc = run_cli("diagnose", "--bundle", bundle, "--only", "pod-shm,nope")
    assert proc.returncode == 3 and "unknown check(s): nope " in proc.stderr
    for empty in ("", " ", ","):  # `--only "$CHECKS"` with the variable empty: never all checks
        proc = run_cli("diagnose", "--bundle", bundle, "--only", empty)
        assert proc.returncode == 3 and "--only names no check" in proc.stderr, empty
    proc = run_cli("diagnose", "--bundle", bundle, "--skip", "")
    assert proc.returncode == 3 and "--skip names no check" in proc.stderr


def test_site_checks_dir_adds_a_check(tmp_path):
    (tmp_path / "team_policy.py").write_text(
        "from llmdoctor.engine.registry import check\n"
        "from llmdoctor.engine.findings import warning\n"
        "@check('team-no-latest', title='Team policy', scope='k8s', needs=('k8s/pod.json',))\n"
        "def team(facts):\n"
        "    return warning('team-no-latest', 'team policy says hello')\n"
    )
    proc = run_cli(
        "diagnose",
        "--bundle",
        str(EXAMPLES / "healthy-vllm-7b"),
        "--json",
        "--checks-dir",
        str(tmp_path),
    )
    out = json.loads(proc.stdout)
    assert any(f["check"] == "team-no-latest" for f in out["findings"])
    assert proc.returncode == 1


# --- fast start -----------------------------------------------------------------------------------


def test_help_imports_none_of_the_heavy_modules():
    code = (
        "import sys\n"
        "from llmdoctor.cli import run\n"
        "try:\n    run(['--help'])\nexcept SystemExit:\n    pass\n"
        "heavy = ['kubernetes', 'pynvml', 'requests', 'httpx', 'sqlite_utils', 'markdown_it',"
        " 'prometheus_client', 'yaml']\n"
        "print('HEAVY=' + ','.join(m for m in heavy if m in sys.modules))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "HEAVY=", proc.stdout


def test_version_prints_the_package_version():
    from llmdoctor import __version__

    proc = run_cli("--version")
    assert proc.returncode == 0 and proc.stdout.strip() == f"llmdoctor {__version__}"


# --- report shape -------------------------------------------------------------------------------


def test_specific_findings_come_before_generic_log_matches_and_fixes_print_once():
    proc = run_cli("diagnose", "--bundle", str(EXAMPLES / "crashloop-cuda-oom"), "--markdown")
    out = proc.stdout
    # the crash loop (which names its cause) leads; the Fix text of a runbook is not repeated
    first = out.index("- **CRITICAL**")
    assert out[first:].startswith("- **CRITICAL** `pod-restarts`")
    fix_line = "    > 1. Find the request that triggered it"
    assert out.count(fix_line) <= 1


def test_manifest_with_wrongly_typed_fields_is_refused(tmp_path):
    folder = tmp_path / "b"
    folder.mkdir()
    (folder / "manifest.json").write_text(
        json.dumps({"format": "llmdoctor-bundle/1", "collector_errors": [1, 2]})
    )
    proc = run_cli("diagnose", "--bundle", str(folder))
    assert proc.returncode == 3 and "'collector_errors' must be a JSON object" in proc.stderr


def test_a_binary_log_is_said_to_be_unscanned_not_clean(tmp_path):

    folder = tmp_path / "b"
    shutil.copytree(EXAMPLES / "healthy-vllm-7b", folder)
    (folder / "logs" / "sidecar.log").write_bytes(os.urandom(4096))
    proc = run_cli("diagnose", "--bundle", str(folder), "--json", "--only", "log-signatures")
    out = json.loads(proc.stdout)
    (finding,) = out["findings"]
    # one note: what was read and found clean, and what was not read (never "fine" alone)
    assert finding["severity"] == "info"
    assert finding["summary"] == (
        "no known error signature in logs/vllm.log; not read: logs/sidecar.log"
    )
    assert "is binary data" in finding["evidence"][0]["text"]


def test_a_manifest_target_that_is_no_string_is_refused(tmp_path):
    folder = tmp_path / "b"
    shutil.copytree(EXAMPLES / "healthy-vllm-7b", folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["target"] = ["pod/x"]
    (folder / "manifest.json").write_text(json.dumps(manifest))
    proc = run_cli("diagnose", "--bundle", str(folder))
    assert proc.returncode == 3 and "'target' must be a string" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_binary_log_is_read_for_the_text_it_holds(tmp_path):
    # a previous log of bytes a dying process dumped around its real error: the crash loop
    # named the OOM from it while log-signatures and memory-fragmentation refused it as binary
    # ("not read"); every check now reads its text lines, and says "not read" only of a
    # binary log where nothing matched
    folder = tmp_path / "b"
    shutil.copytree(EXAMPLES / "crashloop-cuda-oom", folder)
    previous = folder / "logs" / "vllm.previous.log"
    noise = bytes(b % 32 for b in os.urandom(80_000) if b % 32 not in (9, 10, 13, 27))
    previous.write_bytes(noise + b"\n" + previous.read_bytes() + noise[:2000])
    checks = ("log-signatures", "memory-fragmentation", "pod-restarts")
    proc = run_cli("diagnose", "--bundle", str(folder), "--json", "--only", ",".join(checks))
    findings = json.loads(proc.stdout)["findings"]
    restarts = next(f for f in findings if f["check"] == "pod-restarts")
    assert "CUDA out of memory" in " ".join(e["text"] for e in restarts["evidence"])
    fragmentation = next(f for f in findings if f["check"] == "memory-fragmentation")
    assert fragmentation["severity"] == "critical", fragmentation
    # (log-signatures' OOM lines are the two checks' above: superseded, never "not read")
    assert not [f for f in findings if "not read" in f["summary"]], findings


def test_a_line_is_numbered_as_grep_numbers_it_by_every_check_and_explain(tmp_path):
    # a progress bar's `\r` redraws (in nearly every start-up log) and 20 KB of random bytes
    # (form feeds, `\x1c`-`\x1e`) before the text: checks that read lines with str.splitlines
    # put the OOM at :99 where grep says :32, and the start-up phase read off those numbers
    # flipped the crash loop's verdict to "CUDA out of memory while serving"
    import random

    rng = random.Random(16)
    folder = tmp_path / "b"
    shutil.copytree(EXAMPLES / "crashloop-cuda-oom", folder)
    previous = folder / "logs" / "vllm.previous.log"
    text = previous.read_bytes()
    bar = b"".join(b"\rLoading safetensors shards: %d%%|" % n for n in range(0, 100, 10))
    noise = bytes(rng.randrange(256) for _ in range(20_000)).replace(b"\n", b" ")
    previous.write_bytes(noise + b"\n" + bar + b"\n" + text)
    wanted = next(
        n
        for n, line in enumerate(previous.read_bytes().split(b"\n"), 1)
        if b"OutOfMemoryError" in line
    )
    proc = run_cli("diagnose", "--bundle", str(folder), "--json")
    report = json.loads(proc.stdout)
    cited = {
        (f["check"], e["line"])
        for f in report["findings"]
        for e in f["evidence"]
        if "OutOfMemoryError" in (e.get("text") or "") and e.get("line")
    }
    assert cited and {line for _, line in cited} == {wanted}, cited
    assert report["stories"][0]["runbook"] == "vllm-startup-memory-insufficient"
    # explain numbers a pasted log's lines as grep does too (the noise alone it refuses, and
    # says how to keep the text: `strings`)
    refused = run_cli("explain", str(previous))
    assert refused.returncode == 3 and "strings FILE | llmdoctor explain -" in refused.stderr
    previous.write_bytes(bar + b"\n" + text)
    explained = run_cli("explain", str(previous), "--json")
    lines = {e["line"] for m in json.loads(explained.stdout)["matches"] for e in m["evidence"]}
    assert wanted - 1 in lines and max(lines) <= wanted + 4, lines


def test_a_previous_log_the_api_refused_is_said_not_read_not_clean(tmp_path):
    # `kubectl logs --previous` refused (403): the crash loop says why it names no cause, and
    # the log checks list the log as not read instead of calling the pod's logs fine
    folder = tmp_path / "b"
    shutil.copytree(EXAMPLES / "crashloop-cuda-oom", folder)
    (folder / "logs" / "vllm.previous.log").unlink()
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["missing"] = {"logs/vllm.previous.log": "403 forbidden: cannot get pods/log"}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    proc = run_cli("diagnose", "--bundle", str(folder), "--json")
    by_check = {}
    for f in json.loads(proc.stdout)["findings"]:
        by_check.setdefault(f["check"], []).append(f)
    (restarts,) = by_check["pod-restarts"]
    assert "the previous log was not read (403 forbidden" in restarts["summary"]
    for check in ("log-signatures", "memory-fragmentation"):
        (finding,) = by_check[check]
        assert finding["severity"] == "info", finding
        assert "logs/vllm.previous.log" in finding["summary"], finding
    # a bundle without the file and without a word on it in the manifest (made by hand, cut
    # down): the pod restarted, so its previous log was wanted, and the same is said
    del manifest["missing"]
    (folder / "manifest.json").write_text(json.dumps(manifest))
    proc = run_cli("diagnose", "--bundle", str(folder), "--json")
    findings = json.loads(proc.stdout)["findings"]
    for check in ("log-signatures", "memory-fragmentation"):
        (finding,) = [f for f in findings if f["check"] == check]
        assert finding["severity"] == "info" and "vllm.previous.log" in finding["summary"]
    (restarts,) = [f for f in findings if f["check"] == "pod-restarts"]
    assert "not in the bundle, though the container restarted" in restarts["summary"]


def test_a_consequence_in_the_same_logs_is_demoted_below_its_cause(tmp_path):

    # real lines: an Xid 79 (open-gpu-kernel-modules#1151) and vLLM's dead-engine shutdown (#10596);
    # the engine died because the GPU fell off the bus, so the Xid is what to act on
    fixtures = ROOT / "tests" / "fixtures" / "runbooks"
    folder = tmp_path / "b"
    shutil.copytree(EXAMPLES / "healthy-vllm-7b", folder)
    xid = (fixtures / "xid-fallen-off-bus" / "xid79-journal-595-ogkm1151.log").read_text()
    dead = (
        fixtures / "engine-dead" / "vllm-v0-mq-engine-dead-terminating-server-issue10596.log"
    ).read_text()
    (folder / "logs" / "vllm.log").write_text(xid + dead)
    proc = run_cli("diagnose", "--bundle", str(folder), "--json", "--only", "log-signatures")
    found = {f["runbooks"][0]: f for f in json.loads(proc.stdout)["findings"]}
    assert found["xid-fallen-off-bus"]["severity"] == "critical"
    assert found["engine-dead"]["severity"] == "warning"
    assert "follows from xid-fallen-off-bus" in found["engine-dead"]["summary"]


def test_the_cause_leads_the_symptoms_it_explains():
    # the full queue is what is wrong; the slow probe and the latency percentiles are how users
    # feel it, so at equal severity the queue finding comes first
    proc = run_cli("diagnose", "--bundle", str(EXAMPLES / "saturated-queue"), "--json")
    checks = [
        f["check"] for f in json.loads(proc.stdout)["findings"] if f["severity"] == "critical"
    ]
    assert checks[0] == "vllm-queue"
    assert set(checks[1:]) >= {"vllm-generation", "vllm-latency"}


def test_a_bare_killed_line_in_a_log_is_a_warning_not_a_host_oom_verdict():
    # the shell prints `Killed` after any SIGKILL (a `kill -9` too): one-word signatures are
    # weak evidence in diagnose as in explain; the kernel's own OOM report stays critical
    from llmdoctor.engine.facts import Facts
    from llmdoctor.engine.textsource import TextSource
    from llmdoctor.usecases.diagnose import diagnose

    facts = Facts({"time/now": 0, "target": "pod/x"})
    facts.set("logs/app.log", TextSource.from_text("logs/app.log", "loading\nKilled\n"))
    report = diagnose([facts], "pod/x", scopes=("logs",))
    (found,) = [f for f in report.findings if "host-oom-killer" in f.runbooks]
    assert str(found.severity) == "warning" and "weak evidence" in found.summary
    kernel = "Out of memory: Killed process 4242 (python3) total-vm:8000kB, anon-rss:7000kB\n"
    facts = Facts({"time/now": 0, "target": "node"})
    facts.set("node/kernel.log", TextSource.from_text("node/kernel.log", "Killed\n" + kernel))
    report = diagnose([facts], "node", scopes=("logs",))
    (found,) = [f for f in report.findings if "host-oom-killer" in f.runbooks]
    assert str(found.severity) == "critical" and "weak evidence" not in found.summary


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
    _, report, _ = diagnose_json(capsys, path)
    assert skipped(report)["pod-restarts"] == "k8s/pod.json: JSON nested too deeply to read"
    (path / "manifest.json").write_text('{"a":' * 100_000 + "1" + "}" * 100_000)
    with pytest.raises(SystemExit) as done:
        cli_run(["diagnose", "--bundle", str(path)])
    err = capsys.readouterr().err
    assert done.value.code == 3 and "manifest.json: nested too deeply to read" in err


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
    # waiting uses no CPU: stopped by the limit on the clock, three times the budget
    reason = facts.missing_reason("fuzz/stuck")
    assert reason.startswith("parsing timed out: no result after 0.9s") or reason.startswith(
        "parsing timed out: no result after 1."
    ), reason
    assert "parse fuzz/stuck" in facts.collector_errors


def test_a_check_is_timed_by_the_cpu_it_uses_not_by_a_busy_machine():
    import threading

    release = threading.Event()

    def loops(facts):
        while not release.is_set():
            pass

    def waits_for_a_core(facts):  # off the CPU for twice its budget, as on an overloaded node
        time.sleep(0.6)
        return Finding("slow", Severity.WARNING, "finished")

    started = time.monotonic()
    try:
        checks = [spec("loops", loops), spec("slow", waits_for_a_core)]
        report = run_checks(Facts(), checks, "t", timeout=0.3)
    finally:
        release.set()
    assert time.monotonic() - started < 5
    assert [f.summary for f in report.findings] == ["finished"]
    assert report.errors == [
        {"check": "loops", "message": "timed out after 0.3s (a longer --timeout gives it more)"}
    ]


def test_a_bundle_that_is_a_device_or_fifo_is_refused_at_once(capsys, tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path in ("/dev/zero", str(fifo)):
        with pytest.raises(SystemExit) as done:
            cli_run(["diagnose", "--bundle", path])
        err = capsys.readouterr().err
        assert done.value.code == 3 and "not a regular file or folder" in err
