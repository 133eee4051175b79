"""The `llmdoctor wiki` commands: search, show, list, index, lint, add — through the real CLI."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from cli_runs import explain_json
from cli_runs import run_cli as run_cli_checked
from team_wiki import team_entry
from typer.testing import CliRunner

from llmdoctor.cli import app, run
from llmdoctor.cli import run as cli_run
from llmdoctor.errors import BadInput
from llmdoctor.wiki.entry import parse_entry_file
from llmdoctor.wiki.library import builtin_dir
from llmdoctor.wiki.search import search

runner = CliRunner()

GOOD = """---
id: {id}
title: {title}
severity: warning
tags: [gateway, latency]
aliases: [网关超时]
signatures:
  - 'upstream request timeout'
---
## Symptom
The gateway answers `upstream request timeout` after 60 s.

## Cause
The route timeout is shorter than a long generation.

## Fix
Raise the route timeout to 300 s:

```yaml
timeout: 300s
```
"""


def write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def cli(*args: str, input: str | None = None):
    return runner.invoke(app, list(args), input=input)


def run_cli(capsys, *args: str) -> tuple[int, str, str]:
    """Run through llmdoctor.cli.run, as the installed command does (exit codes, one-line errors)."""
    with pytest.raises(SystemExit) as exc:
        run(list(args))
    out, err = capsys.readouterr()
    return exc.value.code, out, err


@pytest.fixture
def team(tmp_path: Path) -> Path:
    wiki = tmp_path / "team"
    write(wiki, "route-timeout.md", GOOD.format(id="route-timeout", title="Gateway route timeout"))
    return wiki


# --- search / show / list / index ---------------------------------------------------------------


def test_search_json_contract(team):
    result = cli("wiki", "search", "upstream", "request", "timeout", "--json", "--wiki", str(team))
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert list(data) == ["results"]
    first = data["results"][0]
    assert first["id"] == "route-timeout"
    assert {"id", "title", "score", "snippet"} <= set(first)
    scores = [r["score"] for r in data["results"]]
    assert scores == sorted(scores, reverse=True)


def test_search_terminal_output_names_entry_and_snippet(team):
    result = cli("wiki", "search", "网关超时", "--wiki", str(team), "--no-color")
    assert result.exit_code == 0
    assert "route-timeout" in result.output
    assert "\x1b[" not in result.output
    assert "llmdoctor wiki show" in result.output


def test_search_reads_a_pasted_log_from_stdin(team):
    # `kubectl logs ... | llmdoctor wiki search -`
    log = "2024-05-01T03:00:00Z [gw] upstream request timeout\n" * 3
    result = cli("wiki", "search", "-", "--json", "--wiki", str(team), input=log)
    assert json.loads(result.output)["results"][0]["id"] == "route-timeout"


def test_search_with_no_match_says_so(team):
    result = cli("wiki", "search", "zzzqqqxxx", "--wiki", str(team))
    assert result.exit_code == 0
    assert "no runbook entry matches" in result.output


def test_show_renders_sections_code_and_path(team):
    result = cli("wiki", "show", "route-timeout", "--wiki", str(team), "--no-color")
    assert result.exit_code == 0, result.output
    out = result.output
    assert "Gateway route timeout" in out
    assert "route-timeout.md" in out
    assert "Symptom" in out and "Cause" in out and "Fix" in out
    assert "timeout: 300s" in out


def test_show_says_when_a_team_entry_overrides_a_builtin(tmp_path):
    # the team folder holds an entry with a built-in id
    builtin = sorted(builtin_dir().glob("*.md"))
    if not builtin:
        pytest.skip("no built-in entries yet")
    entry_id = builtin[0].stem
    wiki = tmp_path / "team"
    write(wiki, f"{entry_id}.md", GOOD.format(id=entry_id, title="Our own version"))
    result = cli("wiki", "show", entry_id, "--wiki", str(wiki), "--no-color")
    assert "Our own version" in result.output
    assert "overrides" in result.output and "built-in" in result.output
    data = json.loads(cli("wiki", "show", entry_id, "--wiki", str(wiki), "--json").output)
    assert data["builtin"] is False
    assert data["overrides"] and data["overrides"][0].endswith(f"{entry_id}.md")


def test_show_json_has_every_field(team):
    data = json.loads(cli("wiki", "show", "route-timeout", "--json", "--wiki", str(team)).output)
    assert data["id"] == "route-timeout"
    assert data["signatures"] == ["upstream request timeout"]
    assert "timeout: 300s" in data["fix"]
    assert data["path"].endswith("route-timeout.md")


def test_show_unknown_id_is_a_one_line_error_with_a_suggestion(team, capsys):
    code, _, err = run_cli(capsys, "wiki", "show", "route-timeot", "--wiki", str(team))
    assert code == 3
    assert err.count("\n") == 1
    assert "route-timeout" in err


def test_list_json_and_tag_filter(team):
    data = json.loads(cli("wiki", "list", "--json", "--tag", "gateway", "--wiki", str(team)).output)
    assert "route-timeout" in [e["id"] for e in data["entries"]]
    assert all("gateway" in e["tags"] for e in data["entries"])


def test_index_reports_counts_and_rebuilds(team):
    result = cli("wiki", "index", "--rebuild", "--json", "--wiki", str(team))
    data = json.loads(result.output)
    assert data["entries"] >= 1 and data["files"] >= 1
    assert Path(data["path"]).is_file()
    assert str(team) in data["dirs"]


# --- lint ---------------------------------------------------------------------------------------

BAD_CASES = [
    # (file name, text, expected line, message fragment)
    (
        "no-sev.md",
        GOOD.format(id="no-sev", title="t").replace("severity: warning\n", ""),
        2,
        "severity",
    ),
    (
        "bad-sev.md",
        GOOD.format(id="bad-sev", title="t").replace("warning", "urgent"),
        4,
        "severity",
    ),
    ("wrong-name.md", GOOD.format(id="other-id", title="t"), 2, "file name"),
    (
        "no-cause.md",
        GOOD.format(id="no-cause", title="t").replace("## Cause", "## Notes"),
        10,
        "Cause",
    ),
    (
        "empty-fix.md",
        GOOD.format(id="empty-fix", title="t").split("## Fix")[0] + "## Fix\n\n",
        16,
        "empty",
    ),
    (
        "bad-regex.md",
        GOOD.format(id="bad-regex", title="t").replace("'upstream request timeout'", "'timeout ('"),
        8,
        "not a valid Python regex",
    ),
    (
        "empty-regex.md",
        GOOD.format(id="empty-regex", title="t").replace(
            "'upstream request timeout'", "'(error)?'"
        ),
        8,
        "empty string",
    ),
    ("bad-yaml.md", "---\nid: bad-yaml\ntitle: [unclosed\n---\n## Symptom\nx\n", 4, "YAML"),
    (
        "unknown-key.md",
        GOOD.format(id="unknown-key", title="t").replace("tags:", "tagz: [x]\ntags:"),
        5,
        "unknown front matter key",
    ),
    (
        "bad-check.md",
        GOOD.format(id="bad-check", title="t").replace(
            "---\n## Symptom", "detected_by: [no-such-check]\n---\n## Symptom"
        ),
        9,
        "not a check id",
    ),
    (
        # two `signatures:` lists (a hand-merged conflict): YAML keeps the second only
        "twice.md",
        GOOD.format(id="twice", title="t").replace(
            "---\n## Symptom", "signatures:\n  - 'gateway said 504'\n---\n## Symptom"
        ),
        7,
        "written 2 times (lines 7, 9)",
    ),
    ("no-front.md", "## Symptom\nx\n", 1, "front matter"),
    ("Bad_ID.md", GOOD.format(id="Bad_ID", title="t"), 2, "lower-case"),
]


@pytest.mark.parametrize(
    ("name", "text", "line", "fragment"), BAD_CASES, ids=[c[0] for c in BAD_CASES]
)
def test_lint_reports_file_and_line(tmp_path, capsys, name, text, line, fragment):
    # each broken entry yields `file:line: message` and exit 1
    path = write(tmp_path / "wiki", name, text)
    code, out, _ = run_cli(capsys, "wiki", "lint", str(tmp_path / "wiki"))
    assert code == 1
    lines = [ln for ln in out.splitlines() if fragment in ln]
    assert lines, out
    assert lines[0].startswith(f"{path}:{line}: "), out


def test_lint_clean_folder_exits_0(team, capsys):
    code, out, err = run_cli(capsys, "wiki", "lint", str(team))
    assert code == 0, out
    assert "no problems" in err


def test_lint_duplicate_id_in_one_folder_is_an_error(tmp_path, capsys):
    # two files claim one id: the second also fails the id == file name rule
    wiki = tmp_path / "wiki"
    write(wiki, "dup-a.md", GOOD.format(id="dup-a", title="t"))
    write(wiki, "dup-b.md", GOOD.format(id="dup-a", title="t"))
    code, out, _ = run_cli(capsys, "wiki", "lint", str(wiki))
    assert code == 1
    assert "also used by" in out


@pytest.mark.parametrize(
    ("title", "shown"),
    [
        ('"Gateway \\x1b[31mred\\x1b[0m timeout"', "\\x1b"),  # an escape sequence
        ('"Gateway\\u200b timeout"', "\\u200b"),  # a zero-width space: unsearchable
        ('"Gateway \\u202etimeout"', "\\u202e"),  # a bidi override
    ],
)
def test_lint_refuses_control_characters_in_a_title(tmp_path, capsys, title, shown):
    wiki = tmp_path / "wiki"
    write(wiki, "ctl.md", GOOD.format(id="ctl", title=title))
    code, out, _ = run_cli(capsys, "wiki", "lint", str(wiki))
    assert code == 1
    (line,) = [ln for ln in out.splitlines() if "control or invisible" in ln]
    assert line.startswith(f"{wiki / 'ctl.md'}:3: title") and shown in line
    assert "\x1b" not in out and "\u200b" not in out and "\u202e" not in out  # shown, not obeyed


def test_lint_override_across_folders_is_a_note_not_an_error(tmp_path, capsys):
    base, team = tmp_path / "base", tmp_path / "team"
    write(base, "same-id.md", GOOD.format(id="same-id", title="base"))
    write(team, "same-id.md", GOOD.format(id="same-id", title="team"))
    code, out, _ = run_cli(capsys, "wiki", "lint", str(base), str(team))
    assert code == 0
    assert f"{team / 'same-id.md'}:2: note: entry 'same-id' overrides {base / 'same-id.md'}" in out


def test_lint_json(tmp_path, capsys):
    write(tmp_path / "w", "x.md", GOOD.format(id="y", title="t"))
    code, out, _ = run_cli(capsys, "wiki", "lint", "--json", str(tmp_path / "w"))
    data = json.loads(out)
    assert code == 1 and data["ok"] is False
    assert data["problems"][0]["line"] == 2


def test_lint_missing_folder_is_bad_input(tmp_path, capsys):
    code, _, err = run_cli(capsys, "wiki", "lint", str(tmp_path / "nope"))
    assert code == 3 and "no such file or folder" in err


def test_builtin_runbooks_lint_clean(capsys):
    # CI runs `llmdoctor wiki lint runbooks/`
    if not list(builtin_dir().glob("*.md")):
        pytest.skip("no built-in entries yet")
    code, out, _ = run_cli(capsys, "wiki", "lint", str(builtin_dir()))
    assert code == 0, out


# --- add ----------------------------------------------------------------------------------------

FLAGS = [
    "--id", "redis-timeout",
    "--title", "Gateway times out on Redis",
    "--severity", "critical",
    "--tag", "gateway,redis",
    "--alias", "缓存超时",
    "--signature", r"redis\.exceptions\.TimeoutError",
    "--symptom", "Requests fail with `redis.exceptions.TimeoutError: Timeout reading from socket`.",
    "--cause", "The rate limiter's Redis is saturated.",
    "--fix", "Scale Redis to 3 replicas; set `socket_timeout=2`.",
]  # fmt: skip


def test_add_with_flags_writes_a_valid_searchable_entry(tmp_path):
    wiki = tmp_path / "team"
    result = cli("wiki", "add", "--wiki", str(wiki), *FLAGS)
    assert result.exit_code == 0, result.output
    path = wiki / "redis-timeout.md"
    assert f"wrote {path}" in result.output
    assert "git -C" in result.output and "add redis-timeout.md" in result.output
    entry = parse_entry_file(path)
    assert entry.tags == ["gateway", "redis"]
    assert entry.signatures == [r"redis\.exceptions\.TimeoutError"]
    assert entry.severity == "critical"
    assert search("缓存超时", wiki_dirs=[wiki])[0].id == "redis-timeout"
    assert not [p for p in wiki.iterdir() if p.name.startswith(".")]  # no temp file left


def test_add_interactive_prompts_for_every_field(tmp_path):
    wiki = tmp_path / "team"
    typed = "\n".join(
        [
            "disk-full",  # id
            "Model cache disk is full",  # title
            "warning",  # severity
            "storage, disk",  # tags
            "磁盘满",  # aliases
            r"No space left on device",  # signatures...
            "",
            "Downloads stop with `OSError: [Errno 28] No space left on device`.",  # symptom
            "",
            "The emptyDir for /root/.cache/huggingface is too small.",  # cause
            "",
            "Mount a 200Gi PVC at /root/.cache/huggingface.",  # fix
            "",
        ]
    )
    result = cli("wiki", "add", "--wiki", str(wiki), input=typed + "\n")
    assert result.exit_code == 0, result.output
    entry = parse_entry_file(wiki / "disk-full.md")
    assert entry.title == "Model cache disk is full"
    assert entry.aliases == ["磁盘满"]
    assert entry.signatures == ["No space left on device"]
    assert "200Gi PVC" in entry.fix


def test_add_interactive_reasks_an_invalid_id_at_a_terminal(tmp_path):
    # a person at a terminal (a real pseudo-terminal here) is asked again
    import pty
    import subprocess

    wiki = tmp_path / "team"
    typed = "Bad Id\ngood-id\nTitle\n\n\n\n\nsymptom\n\ncause\n\nfix\n\n"
    master, slave = pty.openpty()
    cmd = [sys.executable, "-m", "llmdoctor", "wiki", "add", "--wiki", str(wiki)]
    proc = subprocess.Popen(cmd, stdin=slave, stdout=slave, stderr=slave, close_fds=True)
    os.close(slave)
    os.write(master, typed.encode())
    seen = b""
    try:
        while True:  # until the command ends and its side of the terminal closes
            try:
                chunk = os.read(master, 4096)
            except OSError:  # the terminal closed: the command has ended
                break
            if not chunk:
                break
            seen += chunk
    finally:
        os.close(master)
        proc.wait(timeout=60)
    assert proc.returncode == 0, seen.decode(errors="replace")
    assert b"lower-case" in seen
    assert (wiki / "good-id.md").is_file()


def test_add_refuses_an_existing_id_unless_forced(tmp_path):
    wiki = tmp_path / "team"
    assert cli("wiki", "add", "--wiki", str(wiki), *FLAGS).exit_code == 0
    before = (wiki / "redis-timeout.md").read_text()
    again = cli("wiki", "add", "--wiki", str(wiki), *FLAGS[:-2], "--fix", "Something else.")
    assert again.exit_code == 3
    assert "already exists" in again.output and "--force" in again.output
    assert (wiki / "redis-timeout.md").read_text() == before
    assert "draft is saved" in again.output  # what was typed is kept
    forced = cli("wiki", "add", "--wiki", str(wiki), "--force", *FLAGS[:-2], "--fix", "New fix.")
    assert forced.exit_code == 0
    assert "New fix." in (wiki / "redis-timeout.md").read_text()


def test_add_keeps_the_draft_when_validation_fails(tmp_path):
    # an invalid regex: nothing is written, the draft is saved and its path printed
    wiki = tmp_path / "team"
    flags = [f if f != r"redis\.exceptions\.TimeoutError" else "TimeoutError(" for f in FLAGS]
    result = cli("wiki", "add", "--wiki", str(wiki), *flags)
    assert result.exit_code == 3
    assert not (wiki / "redis-timeout.md").exists()
    draft = Path(result.output.split("your draft is saved in ")[1].split()[0].rstrip(";"))
    assert draft.is_file()
    assert Path(os.environ["XDG_CACHE_HOME"]) in draft.parents
    assert "The rate limiter's Redis is saturated." in draft.read_text()
    assert f"{draft}:" in result.output and "not a valid Python regex" in result.output
    # fixing the draft and adding it from the file works
    draft.write_text(draft.read_text().replace("TimeoutError(", "TimeoutError"), encoding="utf-8")
    assert cli("wiki", "add", "--wiki", str(wiki), "--from-file", str(draft)).exit_code == 0
    assert (wiki / "redis-timeout.md").is_file()


def test_add_from_file_validates_like_lint(tmp_path):
    src = write(tmp_path, "draft.md", GOOD.format(id="from-file", title="From a file"))
    wiki = tmp_path / "team"
    result = cli("wiki", "add", "--wiki", str(wiki), "--from-file", str(src), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == {
        "written": True,
        "id": "from-file",
        "path": str(wiki / "from-file.md"),
        "overrides": [],
    }
    broken = write(
        tmp_path, "broken.md", GOOD.format(id="broken", title="t").replace("warning", "meh")
    )
    result = cli("wiki", "add", "--wiki", str(wiki), "--from-file", str(broken))
    assert result.exit_code == 3
    assert "severity" in result.output
    assert not (wiki / "broken.md").exists()


def test_add_without_a_wiki_folder_never_writes_the_builtin_one(tmp_path, capsys):
    before = sorted(p.name for p in builtin_dir().iterdir())
    code, _, err = run_cli(capsys, "wiki", "add", *FLAGS)
    assert code == 3
    assert "--wiki DIR" in err and "LLMDOCTOR_WIKI" in err
    assert sorted(p.name for p in builtin_dir().iterdir()) == before


def test_add_uses_the_first_llmdoctor_wiki_folder(tmp_path, monkeypatch):
    first, second = tmp_path / "first", tmp_path / "second"
    monkeypatch.setenv("LLMDOCTOR_WIKI", os.pathsep.join([str(first), str(second)]))
    assert cli("wiki", "add", *FLAGS).exit_code == 0
    assert (first / "redis-timeout.md").is_file() and not second.exists()


def test_add_with_editor_uses_the_edited_template(tmp_path, monkeypatch):
    # $EDITOR is run on a template file, as `git commit` does
    editor = write(
        tmp_path,
        "fake_editor.py",
        "import sys, pathlib\n"
        "p = pathlib.Path(sys.argv[1])\n"
        "t = p.read_text()\n"
        "t = t.replace('id:\\n', 'id: edited-entry\\n').replace('title:\\n', 'title: Edited\\n')\n"
        "for name in ('Symptom', 'Cause', 'Fix'):\n"
        "    t = t.replace(f'## {name}\\n', f'## {name}\\n{name} text here.\\n', 1)\n"
        "p.write_text(t)\n",
    )
    monkeypatch.setenv("EDITOR", f"{sys.executable} {editor}")
    monkeypatch.delenv("VISUAL", raising=False)
    wiki = tmp_path / "team"
    result = cli("wiki", "add", "--wiki", str(wiki), "--editor")
    assert result.exit_code == 0, result.output
    text = (wiki / "edited-entry.md").read_text()
    assert "<!--" not in text  # the help comments are removed
    assert parse_entry_file(wiki / "edited-entry.md").cause == "Cause text here."


def test_add_with_editor_unchanged_template_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("EDITOR", "true")
    monkeypatch.delenv("VISUAL", raising=False)
    result = cli("wiki", "add", "--wiki", str(tmp_path / "team"), "--editor")
    assert result.exit_code != 0
    assert not (tmp_path / "team").exists() or not list((tmp_path / "team").glob("*.md"))


def test_add_interrupted_keeps_what_was_typed(tmp_path):
    # input ends after the title: the prompt aborts, the draft holds id and title
    result = cli(
        "wiki", "add", "--wiki", str(tmp_path / "team"), input="half-done\nHalf a lesson\n"
    )
    said = str(result.exception)  # no terminal: a usage error (exit 3) that names the draft
    assert isinstance(result.exception, BadInput) and "what you typed is saved in" in said
    draft = Path(said.split("what you typed is saved in ")[1].split()[0])
    assert "Half a lesson" in draft.read_text()


def test_add_with_editor_problem_points_at_the_line_of_the_edited_draft(tmp_path, monkeypatch):
    # Cause left empty: the message names the edited file and the line of its '## Cause'
    editor = write(
        tmp_path,
        "lazy_editor.py",
        "import sys, pathlib\n"
        "p = pathlib.Path(sys.argv[1])\n"
        "t = p.read_text().replace('id:\\n', 'id: lazy-entry\\n').replace('title:\\n', 'title: T\\n')\n"
        "for name in ('Symptom', 'Fix'):\n"
        "    t = t.replace(f'## {name}\\n', f'## {name}\\ntext\\n', 1)\n"
        "p.write_text(t)\n",
    )
    monkeypatch.setenv("EDITOR", f"{sys.executable} {editor}")
    monkeypatch.delenv("VISUAL", raising=False)
    result = cli("wiki", "add", "--wiki", str(tmp_path / "team"), "--editor")
    assert result.exit_code == 3
    draft = Path(result.output.split("your draft is saved in ")[1].split()[0])
    cause_line = draft.read_text().splitlines().index("## Cause") + 1
    assert f"{draft}:{cause_line}: section '## Cause' is empty" in result.output


@pytest.mark.parametrize("hints", ["hints: 42\n", "hints: {a: b}\n", "hints:\n  -\n"])
def test_a_bad_hints_field_is_said_not_silently_dropping_the_entry(tmp_path, hints):
    wiki = tmp_path / "team"
    path = team_entry(wiki, "team-widget", "signatures:\n  - 'TEAMERR widget exploded'\n" + hints)
    result = runner.invoke(
        app,
        ["explain", "-", "--wiki", str(wiki), "--json"],
        input="ERROR TEAMERR widget exploded\n",
    )
    said = f"{path.name}:" in result.stderr or result.exit_code == 3
    named = [m["id"] for m in json.loads(result.stdout)["matches"]] == ["team-widget"]
    assert said or named


def test_lint_names_the_line_of_an_empty_hint(tmp_path):
    wiki = tmp_path / "team"
    team_entry(wiki, "team-widget", "signatures:\n  - 'TEAMERR widget exploded'\nhints:\n  - ''\n")
    result = runner.invoke(app, ["wiki", "lint", str(wiki)])
    assert result.exit_code == 1
    assert "team-widget.md:9: hint ''" in result.output, result.output


def test_a_bad_hint_is_called_a_hint(tmp_path):
    wiki = tmp_path / "team"
    team_entry(
        wiki, "team-widget", "signatures:\n  - 'TEAMERR widget exploded'\nhints:\n  - 'foo(bar'\n"
    )
    _, _, stderr = explain_json("ERROR TEAMERR widget exploded\n", "--wiki", str(wiki))
    assert "team-widget.md:9" in stderr
    assert "hint 'foo(bar' ignored" in stderr, stderr


def test_show_of_an_entry_with_bad_hints_names_the_file_and_line(tmp_path, capsys):
    wiki = tmp_path / "team"
    path = team_entry(
        wiki, "team-widget", "signatures:\n  - 'TEAMERR widget exploded'\nhints: 42\n"
    )
    with pytest.raises(SystemExit) as stop:
        cli_run(["wiki", "show", "team-widget", "--wiki", str(wiki)])
    said = capsys.readouterr()
    assert stop.value.code == 3
    assert f"{path.name}:8" in said.err + said.out, said.err


def test_wiki_add_into_a_file_keeps_the_draft_and_exits_3(tmp_path, capsys):
    # --wiki pointing at a file used to end in "internal error: FileExistsError", draft lost.
    target = tmp_path / "runbooks.md"
    target.write_text("not a folder\n", encoding="utf-8")
    args = ["--id", "redis-timeout", "--title", "Gateway times out on Redis"]
    args += ["--severity", "warning", "--symptom", "s", "--cause", "c", "--fix", "f"]
    code, out, _ = run_cli_checked(capsys, "wiki", "add", "--wiki", str(target), "--json", *args)
    assert code == 3
    data = json.loads(out)
    assert data["written"] is False and "is a file" in data["reason"]
    assert Path(data["draft"]).is_file()


def test_missing_wiki_folders_are_warned_about_not_silently_dropped(tmp_path, capsys, monkeypatch):
    # A typo in LLMDOCTOR_WIKI or --wiki used to leave the team's entries out without a word.
    env_dir, flag_dir = tmp_path / "no-such-env-wiki", tmp_path / "no-such-flag-wiki"
    monkeypatch.setenv("LLMDOCTOR_WIKI", str(env_dir))
    code, out, err = run_cli_checked(capsys, "wiki", "search", "OOM", "--wiki", str(flag_dir))
    assert code == 0 and "cuda-oom-runtime" in out  # the built-in entries still answer
    assert f"wiki folder {env_dir} does not exist" in err
    assert f"wiki folder {flag_dir} does not exist" in err


EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "bundles"


OOM_LINE = (
    # PyTorch's message, as in examples/bundles/crashloop-cuda-oom/logs/vllm.previous.log
    "ERROR 03-13 09:00:43 [core.py:330] torch.OutOfMemoryError: CUDA out of memory. "
    "Tried to allocate 1.16 GiB. GPU 0 has a total capacity of 7.75 GiB of which 1.17 GiB is free."
)


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
    # the answers came from no terminal: a usage error (exit 3 through llmdoctor.cli.run) that
    # says where the draft is
    assert isinstance(result.exception, BadInput), result.output
    draft = saved_draft(str(result.exception)).read_text()
    assert "Mount a 200Gi PVC" in draft and "kubectl rollout restart deploy/vllm" in draft
    assert "No space left on device" in draft


def test_an_invalid_answer_from_a_pipe_stops_instead_of_shifting_the_next_answers(tmp_path):
    # asked again, the id prompt used to take the title as the id, the severity as the title …
    typed = "\x1b[2Jevil\nA title\nwarning\n\n\n\nsymptom\n\ncause\n\nfix\n\n"
    result = wiki_add("--wiki", str(tmp_path / "team"), input=typed)
    assert isinstance(result.exception, BadInput), result.output
    said = str(result.exception)
    assert said.startswith("id '\\x1b[2Jevil': use lower-case letters"), said
    assert not (tmp_path / "team").exists() or not list((tmp_path / "team").iterdir())
    # a later field refused keeps what came before it
    result = wiki_add("--wiki", str(tmp_path / "team"), input="good-id\nA title\nbogus\n")
    said = str(result.exception)
    assert said.startswith("severity 'bogus': one of info, warning, critical"), said
    assert "A title" in saved_draft(said).read_text()


@pytest.mark.parametrize("stdin", ["closed", "empty"])
def test_wiki_add_without_answers_on_stdin_is_one_line_exit_3(tmp_path, stdin):
    # a script that forgot --id: `<&-` used to end in 'internal error: input(): lost sys.stdin',
    # `< /dev/null` in 'aborted' (exit 130, as if a person pressed Ctrl-C)
    import subprocess

    cmd = [sys.executable, "-m", "llmdoctor", "wiki", "add", "--wiki", str(tmp_path / "team")]
    done = subprocess.run(
        cmd,
        stdin=subprocess.DEVNULL if stdin == "empty" else None,
        close_fds=True,
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=(lambda: os.close(0)) if stdin == "closed" else None,
    )
    errors = [ln for ln in done.stderr.splitlines() if ln.startswith("llmdoctor: ")]
    assert done.returncode == 3, done.stderr
    assert len(errors) == 1 and "--id" in errors[0] and "internal error" not in errors[0]
    assert not (tmp_path / "team").exists() or not list((tmp_path / "team").iterdir())


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
    # the command to run once it is fixed writes to the same folder
    assert (
        f"fix it, then: llmdoctor wiki add --wiki {tmp_path / 'team'} --from-file" in result.output
    )
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


@pytest.mark.parametrize("source", ["/dev/zero", "folder"])
def test_wiki_add_from_a_device_or_folder_is_refused_at_once(capsys, tmp_path, source):
    path = str(tmp_path) if source == "folder" else source
    with pytest.raises(SystemExit) as done:
        cli_run(["wiki", "add", "--wiki", str(tmp_path / "team"), "--from-file", path])
    err = capsys.readouterr().err
    assert done.value.code == 3 and "not a regular file" in err


def test_an_entry_linked_out_of_the_wiki_folder_is_refused_by_lint_show_search_and_explain(
    tmp_path, capsys
):
    # a team wiki is untrusted: a link in it to a file elsewhere (a private note, a kubeconfig)
    # must not be read by any command, even after the same name was a plain entry (warm caches)
    private = tmp_path / "private"
    team_entry(private, "team-widget", "signatures:\n  - 'TEAMERR widget exploded'\n")
    wiki = tmp_path / "team"
    team_entry(wiki, "team-widget", "signatures:\n  - 'TEAMERR widget exploded'\n")
    code, out, _ = run_cli(capsys, "wiki", "show", "team-widget", "--wiki", str(wiki))
    assert code == 0 and "Team team-widget" in out  # the plain file: shown, and now cached
    (wiki / "team-widget.md").unlink()
    (wiki / "team-widget.md").symlink_to(private / "team-widget.md")
    refusal = "the file is a link to outside its wiki folder; not read"

    code, out, err = run_cli(capsys, "wiki", "lint", str(wiki))
    assert code == 1 and f"team-widget.md:1: {refusal}" in out + err

    code, out, err = run_cli(capsys, "wiki", "show", "team-widget", "--wiki", str(wiki))
    assert code == 3 and out == "" and err.count("\n") == 1 and refusal in err

    code, out, err = run_cli(capsys, "wiki", "search", "widget exploded", "--wiki", str(wiki))
    assert "team-widget" not in out and refusal in err

    report, _, _ = explain_json("ERROR TEAMERR widget exploded\n", "--wiki", str(wiki))
    assert "team-widget" not in json.dumps(report)


def test_show_says_when_a_refused_team_file_shares_a_builtin_id(tmp_path, capsys):
    # a team's engine-dead.md that is a link out of its folder is refused; show then finds the
    # built-in entry of that id, and says the team's file was not read rather than passing
    # the built-in off as the team's
    private = tmp_path / "private"
    private.mkdir()
    (private / "engine-dead.md").write_text("---\nid: engine-dead\ntitle: Ours\n---\n")
    wiki = tmp_path / "team"
    wiki.mkdir()
    (wiki / "engine-dead.md").symlink_to(private / "engine-dead.md")
    code, out, err = run_cli(capsys, "wiki", "show", "engine-dead", "--wiki", str(wiki))
    assert code == 0 and "EngineDeadError" in out and "Ours" not in out
    assert "link to outside its wiki folder" in err and "shown instead" in err


def test_a_link_between_two_files_of_the_wiki_folder_is_an_entry(tmp_path, capsys):
    # a link that stays inside the folder (an alias file) reads nothing from elsewhere
    wiki = tmp_path / "team"
    team_entry(wiki, "team-widget", "")
    (wiki / "widget-notes").mkdir()
    (wiki / "team-widget.md").rename(wiki / "widget-notes" / "team-widget.md")
    (wiki / "team-widget.md").symlink_to(Path("widget-notes") / "team-widget.md")
    code, out, _ = run_cli(capsys, "wiki", "show", "team-widget", "--wiki", str(wiki))
    assert code == 0 and "Team team-widget" in out
    code, out, err = run_cli(capsys, "wiki", "lint", str(wiki))
    assert code == 0, out + err


def test_show_of_an_id_typed_in_capitals_suggests_the_entry(capsys):
    # ids are lower-case; "CUDA-OOM-RUNTIME" (typed from a title or a shout) found nothing close
    code, out, err = run_cli_checked(capsys, "wiki", "show", "CUDA-OOM-RUNTIME")
    assert code == 3 and out == "" and "did you mean: cuda-oom-runtime?" in err
