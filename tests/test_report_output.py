"""What reaches the terminal, a markdown file or a pipe: escape sequences from logs and targets
are shown, not obeyed; evidence cannot close its fence; the headline and exit code survive `| head`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from example_bundles import bundle

from llmdoctor.cli import run as cli_run

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "bundles"


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
