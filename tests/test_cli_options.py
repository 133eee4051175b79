"""The option blocks shared by diagnose, node, probe and collect, and the options the report
tells a user to pass: every one of them exists on the command that printed it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from llmdoctor.cli import run
from llmdoctor.cli import run as cli_run

ROOT = Path(__file__).resolve().parents[1]
BUNDLES = sorted((ROOT / "examples" / "bundles").iterdir())
HINT = re.compile(r"(?:pass|give|diagnose|not in the pod spec;) ((?:--[a-z][a-z0-9-]*/?)+)")


def cli(argv: list[str], capsys) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        run(argv)
    out, err = capsys.readouterr()
    return int(exc.value.code or 0), out, err


def help_options(command: str, capsys) -> set[str]:
    return set(re.findall(r"(--[a-z][a-z0-9-]*)", cli([command, "--help"], capsys)[1]))


def report(argv: list[str], capsys) -> dict:
    return json.loads(cli([*argv, "--json"], capsys)[1])


def hints(report: dict) -> set[str]:
    texts = [s["reason"] for s in report["skipped"]]
    for f in report["findings"]:
        texts += [f["summary"], *(e["text"] for e in f["evidence"])]
    found = set()
    for text in texts:
        for group in HINT.findall(text):
            found |= set(re.findall(r"--[a-z][a-z0-9-]*", group))
    return found


@pytest.mark.parametrize("bundle", BUNDLES, ids=lambda p: p.name)
def test_every_option_the_report_suggests_is_an_option_of_diagnose(bundle, capsys):
    # issue 12: "(pass --dtype/--quantization ...)" was printed by diagnose, which had neither
    suggested = hints(report(["diagnose", "--bundle", str(bundle)], capsys))
    accepted = help_options("diagnose", capsys)
    assert suggested <= accepted, suggested - accepted


def test_the_hints_are_found_at_all(capsys):
    healthy = str(ROOT / "examples/bundles/healthy-vllm-7b")
    assert {"--dtype", "--quantization", "--model-config"} <= hints(
        report(["diagnose", "--bundle", healthy], capsys)
    )


@pytest.mark.parametrize(
    ("command", "block"),
    [
        ("diagnose", {"--json", "--only", "--skip", "--wiki", "--checks-dir", "--timeout"}),
        ("node", {"--json", "--only", "--skip", "--wiki", "--checks-dir", "--timeout"}),
        ("probe", {"--json", "--only", "--skip", "--wiki", "--checks-dir", "--timeout"}),
        ("diagnose", {"--namespace", "--context", "--selector", "--port", "--tail", "--no-exec"}),
        ("collect", {"--namespace", "--context", "--selector", "--port", "--tail", "--no-exec"}),
        ("diagnose", {"--model", "--chat", "--max-latency-ms", "--max-num-seqs"}),
        ("probe", {"--model", "--chat", "--max-latency-ms", "--max-num-seqs"}),
        ("diagnose", {"--dtype", "--quantization", "--gpu-memory-utilization"}),
        ("node", {"--dtype", "--quantization", "--gpu-memory-utilization"}),
    ],
)
def test_each_block_is_on_each_command_that_shares_it(command, block, capsys):
    assert block <= help_options(command, capsys)


def test_diagnose_passes_the_serving_flags_to_the_checks(capsys):
    # --dtype on diagnose reaches dtype-support (before, only `node` had it)
    bundle = str(ROOT / "examples/bundles/torch-cu128-on-driver-535")
    argv = ["diagnose", "--bundle", bundle, "--only", "dtype-support"]
    plain = report(argv, capsys)
    given = report([*argv, "--dtype", "float16"], capsys)
    assert "dtype-support" in {s["check"] for s in plain["skipped"]}
    assert [f["check"] for f in given["findings"]] == ["dtype-support"]


def test_a_bad_utilization_is_one_line_and_exit_3(capsys):
    argv = ["diagnose", "--bundle", str(BUNDLES[0]), "--gpu-memory-utilization", "1.5"]
    code, out, err = cli(argv, capsys)
    assert code == 3 and out == "" and err.count("\n") == 1 and "(0, 1]" in err


@pytest.mark.parametrize(
    ("argv", "reporting"),
    [
        (["explain"], False),
        (["wiki", "search"], False),
        (["capacity"], False),
        (["diagnose"], True),
        (["node"], True),
        (["probe"], True),
    ],
)
def test_json_help_names_only_the_object_the_command_prints(argv, reporting, capsys):
    # issue 12: `explain --help` said --json prints "the llmdoctor/2 JSON object"; it does not
    text = cli([*argv, "--help"], capsys)[1]
    option = re.search(r"^ +--json +(.+(?:\n {10,}\S.*)?)", text, re.MULTILINE)
    line = " ".join(option.group(1).split())
    assert ("llmdoctor/2" in line) is reporting, line


EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "bundles"


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


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (
            ("diagnose", "--bundle", str(EXAMPLES / "healthy-vllm-7b"), "--timeout", "inf"),
            "--timeout 'inf'",
        ),
        (("probe", "http://127.0.0.1:9", "--timeout", "inf"), "--timeout 'inf'"),
        (("probe", "http://127.0.0.1:9", "--timeout", "0.05"), "must be 0.1 to 86400 seconds"),
        (("probe", "http://127.0.0.1:9", "--timeout", "2d"), "must be 0.1 to 86400 seconds"),
        (("probe", "http://127.0.0.1:9", "--timeout", "0s"), "must be 0.1 to 86400 seconds"),
        # digits of other scripts are no duration a shell user means (Python's float reads them)
        (("probe", "http://127.0.0.1:9", "--timeout", "\u0663s"), "expected a duration"),
        # a pasted blob is repeated cut short, not whole
        (("probe", "http://127.0.0.1:9", "--timeout", "9" * 5000), "'" + "9" * 40 + "…'"),
        (("probe", "http://[::1"), "not a valid URL"),
    ],
)
def test_impossible_values_are_one_line_errors(capsys, args, says):
    with pytest.raises(SystemExit) as done:
        cli_run(list(args))
    err = capsys.readouterr().err
    assert done.value.code == 3
    assert says in err and "internal error" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("given", "seconds"), [("10", 10.0), ("10s", 10.0), ("1.5m", 90.0), (".5", 0.5), ("5.", 5.0)]
)
def test_timeout_takes_a_duration_as_sre_tools_write_it(given, seconds):
    # `--timeout 10s` (kubectl's and curl's habit) was refused as "not a valid float range"
    from llmdoctor.commands.options import timeout_seconds

    assert timeout_seconds(given) == seconds


def test_window_takes_the_same_durations_as_timeout(capsys):
    # `--timeout 5s --window 5s` was half refused: "'5s' is not a valid float range"
    with pytest.raises(SystemExit) as done:
        cli_run(["probe", "http://127.0.0.1:9", "--timeout", "1s", "--window", "0s", "--json"])
    assert done.value.code != 3, capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["probe", "http://127.0.0.1:9", "--window", "2h"], "--window '2h': must be 0 to 3600"),
        (["exporter", "--window", "5 s?"], "--window '5 s?': expected a duration"),
        (["exporter", "--timeout", "0s"], "--timeout '0s': must be 0.1 to 86400"),
        (["exporter", "--request-timeout", "2h"], "--request-timeout '2h': must be 0.5 to 3600"),
        (["exporter", "--queue-wait", "2h"], "--queue-wait '2h': must be 0 to 3600"),
    ],
)
def test_every_duration_option_answers_in_the_same_words(capsys, args, says):
    with pytest.raises(SystemExit) as done:
        cli_run(args)
    err = capsys.readouterr().err
    assert done.value.code == 3 and says in err and len(err.strip().splitlines()) == 1


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


@pytest.mark.parametrize(
    "argv, meant",
    [
        # vLLM has no --num-gpus; a GPU count is -tp here, not --gpu (a GPU model)
        (["capacity", "--num-gpus", "2"], "-tp/--tensor-parallel-size"),
        (["capacity", "--num-gpus=2"], "-tp/--tensor-parallel-size"),
        # SGLang's spelling and a bare --tp
        (["capacity", "--tp", "2"], "-tp/--tensor-parallel-size"),
        (["capacity", "--context-length", "8192"], "--max-model-len"),
        # vLLM accepts underscores; click does not
        (["diagnose", "pod/x", "--max_num_seqs", "8"], "--max-num-seqs"),
    ],
)
def test_an_unknown_option_with_a_known_other_spelling_suggests_ours(argv, meant, capsys):
    code, out, err = cli(argv, capsys)
    assert code == 3 and out == "" and err.count("\n") == 1
    assert f"did you mean {meant}?" in err, err


def test_an_other_spelling_is_not_suggested_where_the_command_lacks_our_option(capsys):
    # diagnose has no -tp: click's own message stands, naming nothing that is not there
    code, _, err = cli(["diagnose", "pod/x", "--num-gpus", "2"], capsys)
    assert code == 3 and "tensor-parallel" not in err and "--num-gpus" in err


@pytest.mark.parametrize(
    "argv, suggested",
    [
        # a typo of an option is offered
        (["explain", "x", "--josn"], "--json"),
        (["diagnose", "pod/x", "--namspace", "a"], "--namespace"),
    ],
)
def test_a_typo_of_an_option_suggests_it(argv, suggested, capsys):
    code, out, err = cli(argv, capsys)
    assert code == 3 and out == "" and err.count("\n") == 1
    assert "did you mean" in err and suggested in err, err


def test_an_unrelated_unknown_option_suggests_nothing_and_points_at_help(capsys):
    # click would offer --jobs for --bogus (0.62 alike by letters): a guess that misleads
    code, out, err = cli(["explain", "x", "--bogus"], capsys)
    assert code == 3 and out == "" and err.count("\n") == 1
    assert "--jobs" not in err and "did you mean" not in err
    assert "--bogus" in err and "explain --help" in err


def test_every_other_spelling_points_at_a_real_option_and_is_none_itself(capsys):
    # a target no command has, or a spelling that is itself an option, would never help
    from llmdoctor.commands.option_aliases import OTHER_SPELLINGS

    commands = ["diagnose", "node", "probe", "explain", "collect", "capacity", "exporter"]
    real = set().union(*(help_options(c, capsys) for c in commands))
    real |= {"-tp", "-dp", "-n", "-l", "-o", "-v"}
    assert set(OTHER_SPELLINGS) <= real
    assert not real & {s for spellings in OTHER_SPELLINGS.values() for s in spellings}


def _option_claims(paragraph: str) -> list[tuple[list[str], set[str]]]:
    """('`a`, `b` and `c` take `--x`, `--y`') clauses: the commands and the options they take
    (asides in parentheses left out)."""
    text = re.sub(r"\([^)]*\)", "", paragraph)
    claims = []
    for clause in re.split(r";|\.\s", text):
        said = re.match(r"\s*((?:`[a-z]+`(?:,\s+|\s+and\s+)?)+)\s+takes?\s+(.*)", clause, re.S)
        if said:
            commands = re.findall(r"`([a-z]+)`", said[1])
            spans = re.findall(r"`([^`]*)`", said[2])
            claims.append((commands, {o for s in spans for o in re.findall(r"--[a-z][a-z-]*", s)}))
    return claims


@pytest.mark.parametrize("doc", ["README.md", "docs/guarantees.md"])
def test_the_docs_say_exactly_which_common_options_each_command_takes(doc, capsys):
    # the README once said every reporting command takes --markdown and --timeout: explain has
    # no --markdown, capacity no --timeout. Each command takes what is claimed for it and none
    # of the other options claimed in the same paragraph
    text = (ROOT / doc).read_text(encoding="utf-8")
    paragraph = next(p for p in text.split("\n\n") if "`--checks-dir DIR`" in p)
    claims = _option_claims(paragraph)
    assert {c for commands, _ in claims for c in commands} >= {"diagnose", "explain", "capacity"}
    common = set().union(*(options for _, options in claims))
    for commands, options in claims:
        for command in commands:
            real = help_options(command, capsys)
            assert options <= real, (command, options - real)
            assert not (common - options) & real, (command, (common - options) & real)
