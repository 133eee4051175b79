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
