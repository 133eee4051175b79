"""`wiki search` has two front doors: the fast one (llmdoctor.__main__, no CLI framework) and the
typer command. They must accept the same options and print the same thing."""

from __future__ import annotations

import io
import os
import subprocess
import sys

import pytest
from cli_runs import (
    command_options,
    one_line_error,
    run_cli,
    run_without_typer,
    through_both_doors,
    unwritable_stdout_runs,
)

from llmdoctor.cli import build_app, run
from llmdoctor.wiki.search_cli import FLAGS, OPTIONS_WITH_VALUE, fast_main

CASES = [
    ["OOM"],
    ["CUDA", "out", "of", "memory", "--limit", "3"],
    ["--limit=2", "显存"],
    ["nccl", "--json"],
    ["xid", "79", "--no-color", "--tag", "hardware"],
    ["--tag=memory", "--json", "fragmentation"],
    ["no-such-word-anywhere"],
    ["OOM", "--wiki-url", "https://runbooks.example.com", "--json", "--limit", "1"],
    ["OOM", "--limit", "1000"],  # the documented maximum
]


def typer_path(capsys, args):
    with pytest.raises(SystemExit) as exc:
        run(["wiki", "search", *args])
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


def fast_path(capsys, args):
    code = fast_main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("args", CASES, ids=[" ".join(c) for c in CASES])
def test_both_paths_print_the_same(capsys, monkeypatch, args):
    fast, slow = through_both_doors(capsys, monkeypatch, fast_path, typer_path, args)
    assert fast[0] is not None, "the fast path should have handled these arguments"
    assert fast == slow


def test_the_fast_path_knows_every_option_of_the_command():
    # an option added to the typer command must be added to the fast parser too
    assert command_options("wiki", "search") == set(OPTIONS_WITH_VALUE) | set(FLAGS)


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["-h"],
        ["OOM", "--limit", "0"],
        ["OOM", "--limit", "x"],
        ["OOM", "--bogus"],
        ["--tag"],
        [],
        ["OOM", "--wiki-url", "ftp://nope"],
        ["OOM", "--limit", "99999999999999999999"],
        ["OOM", "--limit=1001"],
        ["OOM", "--limit", "\u00b2"],  # a digit to str.isdigit(), not to int()
        ["OOM", "--limit", "\u0663"],  # ARABIC-INDIC THREE: int() takes it, typer's answer
        ["OOM", "--limit", "9" * 5000],  # over int()'s 4300-digit limit
    ],
)
def test_what_the_fast_path_does_not_handle_goes_to_typer(capsys, monkeypatch, args):
    monkeypatch.delenv("LLMDOCTOR_WIKI_URL", raising=False)
    assert fast_path(capsys, args)[0] is None
    code, out, err = typer_path(capsys, args)
    assert code in (0, 3)  # help, or a one-line usage error: never a traceback
    assert "Traceback" not in out + err


def test_bad_input_is_one_line_and_exit_3_on_the_fast_path(capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO("   \n"))
    code, _out, err = fast_path(capsys, ["-"])
    assert code == 3 and err.startswith("llmdoctor: nothing to search for")


def test_the_installed_command_takes_the_fast_path():
    # the console script runs llmdoctor.__main__.main: no typer import for a plain search
    # (the fast path ends the process itself: an import of typer is caught as it happens)
    done = run_without_typer("wiki", "search", "OOM", "--limit", "1")
    assert done.returncode == 0, done.stderr
    assert "cuda-oom-runtime" in done.stdout


def test_a_limit_over_the_maximum_is_one_line_exit_3_on_both_paths(capsys, monkeypatch):
    from llmdoctor.wiki.search_cli import MAX_LIMIT

    monkeypatch.delenv("LLMDOCTOR_WIKI_URL", raising=False)
    for args in (["wiki", "search", "OOM"], ["explain", "tests/fixtures/from_log/"
                 "vllm-c-undefined-symbol-issue5501.log"]):  # fmt: skip
        with pytest.raises(SystemExit) as exc:
            run([*args, "--limit", "99999999999999999999"])
        err = capsys.readouterr().err
        assert exc.value.code == 3 and "Traceback" not in err and "internal error" not in err
        assert err.count("\n") == 1 and f"1<=x<={MAX_LIMIT}" in err


@pytest.mark.parametrize("stdout", ["closed", "/dev/full"])
def test_an_unwritable_stdout_is_one_line_and_the_same_exit_on_both_paths(stdout):
    results = unwritable_stdout_runs(stdout, "wiki", "search", "OOM")
    assert results[0] == results[1] and results[0][0] == 3


def test_search_of_stdin_with_invalid_utf8_does_not_crash(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "llmdoctor", "wiki", "search", "-"],
        input=b"torch.OutOfMemoryError: CUDA out of memory. \xff\n",
        capture_output=True,
        cwd=tmp_path,
        timeout=120,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert b"Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.returncode == 0
    assert b"cuda-oom-runtime" in proc.stdout


@pytest.mark.parametrize("query", ["", "   ", "\t"])
def test_wiki_search_empty_query_is_a_one_line_error(capsys, query):
    # An empty query used to answer "no runbook entry matches", as if the wiki had nothing.
    code, _, err = run_cli(capsys, "wiki", "search", query)
    assert code == 3
    assert "nothing to search for" in one_line_error(err)


OOM_LINE = (
    # PyTorch's message, as in examples/bundles/crashloop-cuda-oom/logs/vllm.previous.log
    "ERROR 03-13 09:00:43 [core.py:330] torch.OutOfMemoryError: CUDA out of memory. "
    "Tried to allocate 1.16 GiB. GPU 0 has a total capacity of 7.75 GiB of which 1.17 GiB is free."
)


def test_wiki_search_from_an_endless_pipe_stops_at_the_cap(monkeypatch):
    from typer.testing import CliRunner

    from llmdoctor.wiki import search_cli

    monkeypatch.setattr(search_cli, "MAX_SEARCH_INPUT", 1 << 20)
    piped = "\0" * (3 << 20) + OOM_LINE + "\n"  # the match lies past the cap
    result = CliRunner().invoke(build_app(("wiki",)), ["wiki", "search", "-"], input=piped)
    assert "searched the end of the first 1 MiB of stdin" in result.output
    assert "nothing to search for" in str(result.exception)  # exit 3 through llmdoctor.cli


def test_the_terminal_hides_raw_scores_and_json_keeps_them(capsys, monkeypatch):
    # a bm25 number means nothing to the reader at 3 a.m.; scripts still get it with --json
    import json

    monkeypatch.setenv("NO_COLOR", "1")
    fast_main(["fell", "off", "--limit", "2"])
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith(" 1. xid-fallen-off-bus ") and first.endswith("[critical]")
    fast_main(["fell", "off", "--limit", "2", "--json"])
    scores = [r["score"] for r in json.loads(capsys.readouterr().out)["results"]]
    assert len(scores) == 2 and scores[0] > scores[1] > 0
