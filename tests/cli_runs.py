"""The command line run in this process, as the installed `llmdoctor` runs it (llmdoctor.cli.run:
exit codes, one-line errors), for tests that check what a user sees on bad input."""

from __future__ import annotations

import pytest

from llmdoctor.cli import run


def run_cli(capsys, *args: str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr); never a traceback, never an internal error."""
    with pytest.raises(SystemExit) as done:
        run(list(args))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    assert "internal error" not in err, err
    return int(done.value.code), out, err


def one_line_error(err: str) -> str:
    """The one `llmdoctor: …` line a refusal prints (asserted to be exactly one)."""
    lines = [ln for ln in err.splitlines() if ln.startswith("llmdoctor: ")]
    assert len(lines) == 1, err
    return lines[0]


def explain_json(text: str, *extra: str) -> tuple[dict, int, str]:
    """`llmdoctor explain - --json` of `text`: (the JSON, exit code, stderr)."""
    import json

    from typer.testing import CliRunner

    from llmdoctor.cli import app

    result = CliRunner().invoke(app, ["explain", "-", "--json", *extra], input=text)
    return json.loads(result.stdout), result.exit_code, result.stderr


def command_options(*path: str) -> set[str]:
    """The --options of the typer command at `path` ("wiki", "search"), less --help: what a
    start-up path without typer must read alike."""
    import typer.main

    from llmdoctor.cli import build_app

    command = typer.main.get_command(build_app((path[0],)))
    for name in path:
        command = command.commands[name]
    return {opt for p in command.params for opt in p.opts if opt.startswith("--")} - {"--help"}


def run_without_typer(*argv: str):
    """`llmdoctor ARGV` through llmdoctor.__main__ in a child process that ends at once with
    exit 9 when typer is imported, 8 when main() returns (the fast path not taken)."""
    import subprocess
    import sys

    code = (
        "import os, sys\n"
        "class NoTyper:\n"
        "    def find_spec(self, name, *args):\n"
        "        if name.partition('.')[0] == 'typer':\n"
        "            sys.stderr.write(f'{name} was imported\\n'); sys.stderr.flush(); os._exit(9)\n"
        "sys.meta_path.insert(0, NoTyper())\n"
        f"sys.argv = ['llmdoctor', *{list(argv)!r}]\n"
        "from llmdoctor.__main__ import main\n"
        "main()\n"
        "sys.exit(8)\n"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)


def through_both_doors(capsys, monkeypatch, fast_path, typer_path, args) -> list:
    """[the fast path's (exit code, stdout, stderr), typer's] for the same ARGS, each run with
    LLMDOCTOR_WIKI_URL unset (a --wiki-url sets it)."""
    results = []
    for path in (fast_path, typer_path):
        monkeypatch.delenv("LLMDOCTOR_WIKI_URL", raising=False)
        results.append(path(capsys, args))
    return results


# `llmdoctor ARGS` in a child process through each front door: the fast path, then typer
FAST = "import sys; from llmdoctor.__main__ import main; sys.argv = ['llmdoctor', *sys.argv[1:]]; main()"
TYPER = "import sys; from llmdoctor.cli import run; run(sys.argv[1:])"


def unwritable_stdout_runs(stdout: str, *args: str) -> list[tuple[int, str]]:
    """(exit code, stderr) of `llmdoctor ARGS` through each door, its stdout closed
    (`stdout="closed"`) or /dev/full; each asserted to say one line, never a traceback."""
    import os
    import subprocess
    import sys

    results = []
    for code in (FAST, TYPER):
        with open("/dev/full", "w") as full:
            done = subprocess.run(
                [sys.executable, "-c", code, *args],
                stdout=full if stdout == "/dev/full" else None,
                stderr=subprocess.PIPE, text=True, timeout=60,
                preexec_fn=(lambda: os.close(1)) if stdout == "closed" else None,
            )  # fmt: skip
        assert "Traceback" not in done.stderr and "internal error" not in done.stderr, done.stderr
        assert done.stderr.count("\n") == 1, done.stderr
        results.append((done.returncode, done.stderr))
    return results
