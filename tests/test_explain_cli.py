"""`explain` has two front doors: the fast one (llmdoctor.__main__, no CLI framework) and the
typer command. They must accept the same options and print and exit the same."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_runs import (
    FAST,
    TYPER,
    command_options,
    run_without_typer,
    through_both_doors,
    unwritable_stdout_runs,
)

from llmdoctor.cli import run
from llmdoctor.commands.explain_cli import FLAGS, OPTIONS_WITH_VALUE, fast_main

FIXTURES = Path(__file__).parent / "fixtures"
DEAD = str(FIXTURES / "real-vllm-0.32" / "dead" / "server.log")
UNCOVERED = str(FIXTURES / "from_log" / "vllm-c-undefined-symbol-issue5501.log")
HEALTHY = str(sorted((FIXTURES / "healthy").glob("*.log"))[0])

CASES = [
    [DEAD],
    [DEAD, "--json"],
    ["--json", "--limit", "1", DEAD],
    [DEAD, "--limit=2", "--no-color"],
    [UNCOVERED],
    [UNCOVERED, "--json", "--jobs", "0"],
    [HEALTHY, "--jobs=2"],
    [DEAD, "--wiki-url", "https://runbooks.example.com", "--json"],
    [DEAD, "--wiki", str(FIXTURES / "runbooks"), "--json", "--limit", "1000"],
    ["/no/such/file.log"],  # one line, exit 3, on both
    [str(FIXTURES)],  # a folder: the same
]


def typer_path(capsys, args):
    with pytest.raises(SystemExit) as exc:
        run(["explain", *args])
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


def fast_path(capsys, args):
    try:
        fast_main(list(args))
    except SystemExit as exc:
        out = capsys.readouterr()
        return exc.code, out.out, out.err
    return None, "", ""


@pytest.mark.parametrize("args", CASES, ids=[" ".join(c).replace(str(FIXTURES), "") for c in CASES])
def test_both_paths_print_and_exit_the_same(capsys, monkeypatch, args):
    fast, slow = through_both_doors(capsys, monkeypatch, fast_path, typer_path, args)
    assert fast[0] is not None, "the fast path should have handled these arguments"
    assert fast == slow


def test_both_paths_read_stdin_alike(capsys, monkeypatch):
    log = Path(DEAD).read_bytes()
    results = []
    for path in (fast_path, typer_path):
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(log)))
        results.append(path(capsys, ["-", "--json"]))
    assert results[0][0] == 2 and results[0] == results[1]


def test_the_fast_path_knows_every_option_of_the_command():
    # an option added to the typer command must be added to the fast parser too
    assert command_options("explain") == set(OPTIONS_WITH_VALUE) | set(FLAGS)


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["-h"],
        [DEAD, "--limit", "0"],
        [DEAD, "--limit", "x"],
        [DEAD, "--limit=1001"],
        [DEAD, "--limit", "\u00b2"],
        [DEAD, "--jobs", "-1"],
        [DEAD, "--bogus"],
        [DEAD, DEAD],  # one log at a time
        [DEAD, "--limit"],
        [DEAD, "--wiki-url", "ftp://nope"],
        ["--", DEAD],
    ],
)
def test_what_the_fast_path_does_not_handle_goes_to_typer(capsys, monkeypatch, args):
    monkeypatch.delenv("LLMDOCTOR_WIKI_URL", raising=False)
    assert fast_path(capsys, args)[0] is None
    code, out, err = typer_path(capsys, args)
    assert "Traceback" not in out + err
    if args != ["--", DEAD]:
        assert code in (0, 3)  # help, or a one-line usage error


def test_the_installed_command_takes_the_fast_path():
    # the console script runs llmdoctor.__main__.main: no typer import for a plain explain
    done = run_without_typer("explain", DEAD, "--json")
    assert done.returncode == 2, done.stderr
    assert '"id": "vllm-worker-killed"' in done.stdout


@pytest.mark.parametrize("stdout", ["closed", "/dev/full"])
def test_an_unwritable_stdout_is_one_line_exit_3_on_both_paths(stdout):
    results = unwritable_stdout_runs(stdout, "explain", DEAD, "--json")
    assert results[0] == results[1] and results[0][0] == 3, results


def test_an_empty_file_name_is_said_so_not_read_as_the_current_folder(capsys, monkeypatch):
    fast, slow = through_both_doors(capsys, monkeypatch, fast_path, typer_path, [""])
    assert fast == slow and fast[0] == 3 and "no log named" in fast[2], fast


def test_a_reader_that_goes_away_ends_both_paths_alike():
    # `llmdoctor explain big.log | head -1`: the exit code is explain's own, no traceback
    results = []
    for code in (FAST, TYPER):
        done = subprocess.run(
            f"{sys.executable} -c {code!r} explain {DEAD} | head -c 10",
            shell=True,
            capture_output=True,
            text=True,
            timeout=60,
            executable="/bin/bash",
        )
        results.append(done.stderr)
    assert results == ["", ""], results


def test_no_usable_cache_folder_is_one_line_exit_3(tmp_path):
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "llmdoctor").write_text("a file, not a folder")
    (tmp_path / "tmp").mkdir()
    (tmp_path / "tmp" / f"llmdoctor-{os.getuid()}").write_text("neither")
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "TMPDIR": str(tmp_path / "tmp")}
    done = subprocess.run(
        [sys.executable, "-m", "llmdoctor", "explain", DEAD],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert done.returncode == 3, done.stderr
    assert done.stderr.startswith("llmdoctor: no folder for llmdoctor's cache"), done.stderr
    assert done.stderr.count("\n") == 1 and "internal error" not in done.stderr


@pytest.mark.parametrize("content", ["", "\n\n   \n"])
def test_an_empty_input_is_said_so_exit_3_not_read_as_healthy(
    capsys, monkeypatch, tmp_path, content
):
    # a hostile pass: `kubectl logs --previous` that failed (its error on stderr) left an empty
    # input, and explain said "No line in it looks like an error", exit 0
    log = tmp_path / "previous.log"
    log.write_text(content)
    fast, slow = through_both_doors(capsys, monkeypatch, fast_path, typer_path, [str(log)])
    assert fast == slow and fast[0] == 3, fast
    assert "the input is empty, nothing to explain" in fast[2] and "No line" not in fast[1]
