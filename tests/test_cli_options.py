"""The option blocks shared by diagnose, node, probe and collect, and the options the report
tells a user to pass: every one of them exists on the command that printed it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from llmdoctor.cli import run

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
