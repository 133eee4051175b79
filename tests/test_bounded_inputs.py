"""Bad input ends in bounded time with a one-line error, never a hang or an internal error, and
nothing a user typed is lost (issue 24, "Hangs and internal errors").

A full disk is a real one: a 16 KiB tmpfs filled to the last block (mounting needs root; the
tests that need it skip, saying so, where the suite does not run as root).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from k8s_server import Running, scenario_healthy
from vllm_server import FakeVllmServer, Reply, Scenario, SilentServer

from llmdoctor.cli import run as cli_run

ROOT = Path(__file__).resolve().parents[1]
LLMDOCTOR = [sys.executable, "-m", "llmdoctor"]
XID79 = ROOT / "examples" / "bundles" / "xid79-gpu-fallen-off-bus"
HISTORY = ROOT / "examples" / "bundles" / "saturated-queue-history"
PROM = "http://127.0.0.1:9"  # nothing listens: only the options are under test


def run(capsys, *argv: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as done:
        cli_run(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err and "internal error" not in err
    return int(done.value.code or 0), out, err


def _mount_tmpfs(folder: Path, options: str) -> None:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root (the full-disk and read-only cases)")
    folder.mkdir(parents=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")


@pytest.fixture
def full_disk(tmp_path):
    """A folder on a file system with no free block left (folders can still be made)."""
    folder = tmp_path / "full"
    _mount_tmpfs(folder, "size=16k")
    try:
        fd = os.open(folder / "filler", os.O_WRONLY | os.O_CREAT)
        try:
            while os.write(fd, b"\0" * 4096):
                pass
        except OSError:
            pass  # ENOSPC: full
        finally:
            os.close(fd)
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


@pytest.fixture
def read_only_folder(tmp_path):
    folder = tmp_path / "ro"
    _mount_tmpfs(folder, "ro,size=16k")
    yield folder
    subprocess.run(["umount", "-l", str(folder)], check=False)


# --- YAML a team wrote ------------------------------------------------------------------------

ALIAS_BOMB = """---
id: bomb
title: Nine levels of nine aliases
a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]
b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]
c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]
d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]
e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]
f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]
g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]
h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g]
i: &i [*h, *h, *h, *h, *h, *h, *h, *h, *h]
notes: *i
---
## Symptom
x
"""


def test_an_alias_bomb_in_one_team_entry_does_not_hang_explain(tmp_path):
    # 9^9 values once expanded: refused before anything walks them; explain still answers
    wiki = tmp_path / "team"
    wiki.mkdir()
    (wiki / "bomb.md").write_text(ALIAS_BOMB)
    log = tmp_path / "incident.log"
    log.write_text("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    started = time.monotonic()
    done = subprocess.run(
        [*LLMDOCTOR, "explain", str(log), "--wiki", str(wiki), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert time.monotonic() - started < 60
    assert done.returncode in (0, 1, 2), done.stderr
    assert "bomb.md:" in done.stderr and "alias" in done.stderr  # named, then left out
    assert json.loads(done.stdout)  # the built-in runbooks still explain the log


def test_lint_names_the_alias_bomb_with_its_file_and_line(tmp_path, capsys):
    # the team learns which entry to fix, and the rest of the wiki is still checked
    wiki = tmp_path / "team"
    wiki.mkdir()
    (wiki / "bomb.md").write_text(ALIAS_BOMB)
    code, out, err = run(capsys, "wiki", "lint", str(wiki))
    assert code == 1
    assert "bomb.md:" in out + err and "alias bomb" in out + err


def test_a_small_entry_with_an_alias_still_loads(tmp_path, capsys):
    # aliases are legal YAML: a tag list reused once is far below the cap
    from llmdoctor.wiki.entry import parse_entry

    text = "---\nid: reuse\ntitle: T\nx: &t [gpu, oom]\ntags: *t\n---\n## Symptom\ns\n"
    assert parse_entry(text).tags == ["gpu", "oom"]


def test_an_xid_policy_nested_past_the_cap_is_a_one_line_error(tmp_path, capsys):
    # a policy file is YAML a team wrote too (held before, by libyaml's own limit; guards the
    # policy's move to the bounded loader): a bad one stops `node` before it collects
    policy = tmp_path / "policy.yaml"
    policy.write_text("xids:\n  79: " + "[" * 200 + "]" * 200 + "\n")
    code, _, err = run(capsys, "node", "--bundle", str(XID79), "--xid-policy", str(policy))
    assert code == 3 and len(err.strip().splitlines()) == 1


# --- durations ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "names"),
    [
        # each would sleep for ever, never fire, or end in an OverflowError
        (["probe", "http://127.0.0.1:9", "--window", "1e9"], "--window"),
        (["probe", "http://127.0.0.1:9", "--window", "inf"], "--window"),
        (["probe", "http://127.0.0.1:9", "--window", "nan"], "--window"),
        (["probe", "http://127.0.0.1:9", "--timeout", "nan"], "--timeout"),  # held before
        (["probe", "http://127.0.0.1:9", "--max-latency-ms", "nan"], "--max-latency-ms"),
        (["diagnose", "pod/x", "--window", "nan"], "--window"),
        (["exporter", "--window", "inf"], "--window"),  # was: listening with a window for ever
        (["exporter", "--queue-wait", "1e12"], "--queue-wait"),
        (["exporter", "--timeout", "1e9"], "--timeout"),  # refused before it listens
        (["capacity", "--gpu-memory-utilization", "nan"], "--gpu-memory-utilization"),
        (["probe", "http://127.0.0.1:9", "--prometheus", PROM, "--since", "1000000d"], "--since"),
        (["node", "--bundle", str(XID79), "--since", "99999999999999999999999999d"], "--since"),
    ],
)
def test_an_unbounded_duration_is_a_one_line_error(capsys, argv, names):
    code, _, err = run(capsys, *argv)
    assert code == 3
    assert len(err.strip().splitlines()) == 1 and names in err


def test_a_long_but_bounded_since_is_still_accepted():
    # a year of history is a real question (quarterly reviews); the cap is above it
    from llmdoctor.commands.options import parse_duration

    assert parse_duration("365d") == 365 * 86400


def test_a_window_given_to_the_library_is_bounded_too():
    # the exporter and the MCP server build a CollectContext without the CLI's checks
    from llmdoctor.engine.collect import CollectContext
    from llmdoctor.engine.target import parse_target
    from llmdoctor.errors import BadInput

    target = parse_target("http://127.0.0.1:9")
    for window in (float("nan"), float("inf"), 1e9, -1.0):
        with pytest.raises(BadInput):
            CollectContext(target=target, timeout=1.0, options={"window": window})


# --- no retries past the budget ---------------------------------------------------------------


def test_a_silent_api_server_is_asked_once_within_the_timeout(tmp_path, monkeypatch, capsys):
    # urllib3 retried a read timeout 3 times: 4 connections and 4x --timeout before the answer
    with SilentServer() as silent:
        silent.write_kubeconfig(tmp_path / "kubeconfig")
        monkeypatch.setenv("KUBECONFIG", str(tmp_path / "kubeconfig"))
        started = time.monotonic()
        code, _, err = run(capsys, "diagnose", "pod/vllm-0", "-n", "serving", "--timeout", "2")
        elapsed = time.monotonic() - started
        assert code == 3 and "timed out" in err
        assert len(silent.conns) == 1
        assert elapsed < 7  # 2 s, plus importing the client on a busy machine; was over 8


def test_an_exec_credential_plugin_that_never_answers_is_bounded(tmp_path, monkeypatch, capsys):
    # the kubernetes client waits for the plugin without a timeout (a login in a browser)
    kubeconfig = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:9"}}],
        "users": [
            {
                "name": "u",
                "user": {
                    "exec": {
                        "apiVersion": "client.authentication.k8s.io/v1beta1",
                        "command": "/bin/sh",
                        "args": ["-c", "sleep 20"],
                    }
                },
            }
        ],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "c",
    }
    (tmp_path / "kubeconfig").write_text(json.dumps(kubeconfig))
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "kubeconfig"))
    started = time.monotonic()
    code, _, err = run(capsys, "diagnose", "pod/vllm-0", "--timeout", "1")
    assert code == 3 and "exec credential plugin" in err
    assert time.monotonic() - started < 10  # was: the plugin's 20 s, or for ever


# --- Ctrl-C -----------------------------------------------------------------------------------


DEFAULT_SIGINT_EXEC = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.argv[1], sys.argv[1:])"
)


def test_ctrl_c_during_collect_ends_the_window_wait_at_once(tmp_path):
    # --window 60: the second /metrics scrape is a minute away; SIGINT must not wait for it
    scenario = scenario_healthy()
    with Running(scenario, tmp_path / "kubeconfig") as running:
        env = {**os.environ, "KUBECONFIG": str(running.kubeconfig)}
        argv = [*LLMDOCTOR, "collect", "pod/vllm-7b-7d9f8c6b5-x2kqp", "-n", "serving"]
        argv += ["--window", "60", "-o", str(tmp_path / "bundle")]
        # Ctrl-C as a terminal sends it: a test run started in the background by a shell without
        # job control inherits SIGINT ignored, and Python then never raises KeyboardInterrupt;
        # the command is exec'd with SIGINT's default action back (no preexec_fn: threads run)
        argv = [sys.executable, "-c", DEFAULT_SIGINT_EXEC, *argv]
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + 60
            while running.vllms[0].scrapes < 1 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert running.vllms[0].scrapes == 1, "the first scrape never came"
            time.sleep(0.5)
            interrupted = time.monotonic()
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=90)
            waited = time.monotonic() - interrupted
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == 130, err
    assert waited < 10, f"Ctrl-C took {waited:.1f}s"


# --- node --prometheus-textfile ---------------------------------------------------------------


def _node_json(capsys, *extra: str) -> tuple[int, dict, str]:
    code, out, err = run(capsys, "node", "--bundle", str(XID79), "--json", *extra)
    return code, json.loads(out), err


def test_a_full_disk_still_prints_the_xid79_report_and_its_exit_code(full_disk, capsys):
    # the textfile is a side output: the node's critical Xid 79 must still be reported
    expected, _, _ = _node_json(capsys)
    code, report, err = _node_json(capsys, "--prometheus-textfile", str(full_disk / "n.prom"))
    assert code == expected == 2
    assert any(f["check"] == "xid" and f["severity"] == "critical" for f in report["findings"])
    assert err.strip().splitlines() == [err.strip()] and "No space left" in err
    assert sorted(p.name for p in full_disk.iterdir()) == ["filler"]  # no partial file left


def test_a_read_only_textfile_folder_still_prints_the_report(read_only_folder, capsys):
    # root ignores permission bits, a read-only mount it cannot
    code, report, err = _node_json(
        capsys, "--prometheus-textfile", str(read_only_folder / "n.prom")
    )
    assert code == 2 and report["status"] == "critical"
    assert "not written" in err and "Read-only" in err


# --- what Prometheus answers ------------------------------------------------------------------


def _history_bundle(tmp_path: Path, series=None, query=None) -> Path:
    dest = tmp_path / "bundle"
    shutil.copytree(HISTORY, dest)
    if series is not None:
        (dest / "prometheus" / "series.json").write_text(json.dumps(series))
    if query is not None:
        (dest / "prometheus" / "query.json").write_text(json.dumps(query))
    return dest


def _series() -> dict:
    return json.loads((HISTORY / "prometheus" / "series.json").read_text())


def _query() -> dict:
    return json.loads((HISTORY / "prometheus" / "query.json").read_text())


def _bad_point(value):
    series = _series()
    series["waiting"][0]["points"][5] = value
    return series


def _with(name, value):
    query = _query()
    query[name] = value
    return query


@pytest.mark.parametrize(
    ("series", "query"),
    [
        (_bad_point([float("nan"), 3.0]), None),  # a NaN timestamp (was: internal error)
        (_bad_point([1e300, 3.0]), None),  # a time no calendar holds
        (_bad_point(["x", 3.0]), None),
        (_bad_point({"t": 1}), None),
        ({**_series(), "waiting": "not a list"}, None),
        ({**_series(), "failed": [1], "absent": 5}, None),
        ({**_series(), "waiting": [{"labels": ["a"], "points": {"a": 1}}]}, None),
        (None, _with("start", float("nan"))),  # (was: internal error)
        (None, _with("end", 1e300)),  # (was: OverflowError)
        (None, _with("step", 0)),
        (None, [1, 2]),
    ],
)
def test_hostile_prometheus_history_is_a_reason_not_an_internal_error(
    tmp_path, capsys, series, query
):
    bundle = _history_bundle(tmp_path, series, query)
    for fmt in ("--json", "--markdown", "--no-color"):
        code, _, _ = run(capsys, "diagnose", "--bundle", str(bundle), fmt)
        assert code in (0, 1, 2)


def test_one_bad_point_drops_that_point_not_the_whole_history(tmp_path, capsys):
    # the queue still shows from the good points (was: the whole timeline "could not parse")
    series = _series()
    series["waiting"][0]["points"][0] = "garbage"
    bundle = _history_bundle(tmp_path, series)
    _, out, _ = run(capsys, "diagnose", "--bundle", str(bundle), "--json")
    report = json.loads(out)
    assert any(e["what"] == "queue" for e in report["timeline"]["events"])


def test_an_unusable_query_window_skips_the_history_checks_with_the_reason(tmp_path, capsys):
    bundle = _history_bundle(tmp_path, None, _with("start", float("nan")))
    _, out, _ = run(capsys, "diagnose", "--bundle", str(bundle), "--json")
    reasons = {s["check"]: s["reason"] for s in json.loads(out)["skipped"]}
    assert "finite" in reasons["history-engine"]


@pytest.mark.parametrize(
    "answer",
    [
        # the API's envelope with the wrong types inside: each must end as a reason
        {"status": "success", "data": ["not", "a", "dict"]},
        {"status": "success", "data": {"result": "nope"}},
        {"status": "success", "data": {"result": [1, "x", {"values": {"a": 1}}]}},
        {
            "status": "success",
            "data": {"result": [{"metric": [1], "values": [["NaN", "1"], [1e300, "2"]]}]},
        },
    ],
)
def test_prometheus_answers_of_the_wrong_shape_are_a_reason(answer):
    from llmdoctor.collectors.prometheus import collect_history

    body = json.dumps(answer)
    routes = {"GET /api/v1/query_range": Reply(200, body)}
    with FakeVllmServer(Scenario(routes=routes)) as prometheus:
        facts = collect_history(prometheus.url, 'pod="vllm-0"', 3600.0, 1_796_076_728.0, 5.0)
    assert "has no series" in facts["prometheus/series.json"].reason


# --- wiki add ---------------------------------------------------------------------------------


def _editor(tmp_path: Path, monkeypatch, code: str) -> None:
    script = tmp_path / "editor.py"
    script.write_text("import sys, pathlib\np = pathlib.Path(sys.argv[1])\n" + code)
    monkeypatch.setenv("EDITOR", f"{sys.executable} {script}")
    monkeypatch.delenv("VISUAL", raising=False)


def test_an_editor_that_deletes_the_draft_is_a_one_line_error(tmp_path, monkeypatch, capsys):
    # (was: FileNotFoundError as an internal error)
    _editor(tmp_path, monkeypatch, "p.unlink()\n")
    code, _, err = run(capsys, "wiki", "add", "--wiki", str(tmp_path / "team"), "--editor")
    assert code == 3 and "removed the draft" in err
    assert not (tmp_path / "team").exists()


def test_an_editor_that_corrupts_the_draft_keeps_it_and_says_how_to_resume(
    tmp_path, monkeypatch, capsys
):
    # bytes that are not UTF-8 (was: UnicodeDecodeError); the file is left for the user to fix
    _editor(tmp_path, monkeypatch, "p.write_bytes(p.read_bytes() + b'\\xff\\xfe lesson')\n")
    code, _, err = run(capsys, "wiki", "add", "--wiki", str(tmp_path / "team"), "--editor")
    assert code == 3 and "not UTF-8" in err
    draft = Path(err.split("--from-file ")[1].split()[0])
    assert draft.read_bytes().endswith(b"\xff\xfe lesson")


def test_an_editor_that_swaps_the_draft_for_a_device_is_refused(tmp_path, monkeypatch, capsys):
    # the draft now points at /dev/zero: reading it whole would never end (was: unbounded read)
    _editor(tmp_path, monkeypatch, "p.unlink()\np.symlink_to('/dev/zero')\n")
    code, _, err = run(capsys, "wiki", "add", "--wiki", str(tmp_path / "team"), "--editor")
    assert code == 3 and "no longer a regular file" in err


def test_a_full_disk_during_wiki_add_prints_what_was_typed(full_disk, monkeypatch, capsys):
    # neither the wiki folder nor the drafts folder can take the entry: the text is printed
    monkeypatch.setenv("XDG_CACHE_HOME", str(full_disk / "cache"))
    argv = ["wiki", "add", "--wiki", str(full_disk / "team"), "--id", "lost-lesson"]
    argv += ["--title", "A lesson", "--symptom", "the symptom I typed at 3am"]
    argv += ["--cause", "a cause", "--fix", "a fix"]
    code, out, err = run(capsys, *argv)
    assert code == 3
    assert "the symptom I typed at 3am" in out and "No space left" in err
    empty = [p for p in full_disk.rglob("*") if p.is_file() and p.stat().st_size == 0]
    assert empty == []  # never a 0-byte draft that looks saved


def test_save_draft_leaves_no_file_when_the_disk_is_full(full_disk, monkeypatch):
    from llmdoctor.wiki.authoring import DraftNotSaved, save_draft

    monkeypatch.setenv("XDG_CACHE_HOME", str(full_disk / "cache"))
    with pytest.raises(DraftNotSaved):
        save_draft("x" * 100_000, "big")
    assert not [p for p in full_disk.rglob("*.md")]


def test_a_full_disk_during_wiki_add_json_keeps_stdout_one_json_object(
    full_disk, monkeypatch, capsys
):
    # a script reading --json still gets valid JSON, with the text inside it
    monkeypatch.setenv("XDG_CACHE_HOME", str(full_disk / "cache"))
    argv = ["wiki", "add", "--json", "--wiki", str(full_disk / "team"), "--id", "lost-lesson"]
    argv += ["--title", "A lesson", "--symptom", "the symptom I typed at 3am"]
    argv += ["--cause", "a cause", "--fix", "a fix"]
    code, out, _ = run(capsys, *argv)
    answer = json.loads(out)
    assert code == 3 and answer["written"] is False
    assert "the symptom I typed at 3am" in answer["text"]


def test_lint_calls_a_long_plain_list_too_long_not_an_alias_bomb(tmp_path, capsys):
    # 20,001 signatures written out one by one: too many values, but no alias multiplied them
    wiki = tmp_path / "team"
    wiki.mkdir()
    items = "\n".join(f"  - 'line {n}'" for n in range(20_001))
    (wiki / "long.md").write_text(
        f"---\nid: long\ntitle: Long\nseverity: warning\nsignatures:\n{items}\n---\n# Long\n"
    )
    code, out, err = run(capsys, "wiki", "lint", str(wiki))
    assert code == 1
    assert "long.md:" in out + err and "more than 20000 values" in out + err
    assert "alias" not in out + err
