"""The use cases: the CLI, the exporter and the MCP server build the same typed requests."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from llmdoctor.engine.collect import CollectContext, CollectOptions
from llmdoctor.engine.target import Target
from llmdoctor.errors import BadInput, BadTarget
from llmdoctor.render.report import exit_code, render_json
from llmdoctor.usecases.capacity import CapacityRequest, capacity
from llmdoctor.usecases.diagnose import DiagnoseRequest, diagnose, report_label
from llmdoctor.usecases.probe import ProbeRequest, diagnose_request, probe_target

ROOT = Path(__file__).resolve().parent.parent
BUNDLE = ROOT / "examples" / "bundles" / "crashloop-cuda-oom"
CONFIG = ROOT / "tests" / "fixtures" / "capacity"


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "llmdoctor", *args], capture_output=True, text=True, timeout=120
    )


def test_a_diagnose_request_gives_the_report_the_command_prints():
    # the command is a thin caller: same findings, same status, same exit code
    report = diagnose(DiagnoseRequest(Target("bundle", name=str(BUNDLE))))
    done = _cli("diagnose", "--bundle", str(BUNDLE), "--json")
    printed = json.loads(done.stdout)
    ours = json.loads(render_json(report))
    assert done.returncode == int(exit_code(report)) == 2
    assert [f["check"] for f in ours["findings"]] == [f["check"] for f in printed["findings"]]
    assert ours["status"] == printed["status"]


def test_a_bundle_report_is_named_after_the_pod_it_holds():
    # the label says which pod the bundle was collected from, and from where it was read
    report = diagnose(DiagnoseRequest(Target("bundle", name=str(BUNDLE))))
    assert report.target == report_label(Target("bundle", name=str(BUNDLE)), [report.facts])
    assert report.target.endswith(f"(bundle {BUNDLE})")


def test_a_request_restricted_to_one_check_runs_only_that_check():
    # --only travels in the request, as the command line gives it
    request = DiagnoseRequest(Target("bundle", name=str(BUNDLE)), only=("pod-restarts",))
    report = diagnose(request)
    assert {f.check for f in report.findings} == {"pod-restarts"}


def test_a_collector_option_no_collector_knows_is_refused():
    # a misspelt option would otherwise be silently ignored by every collector
    with pytest.raises(ValueError, match="no_exce"):
        CollectOptions.of({"no_exce": True})
    with pytest.raises(AttributeError, match="windw"):
        CollectOptions().get("windw")


def test_collect_context_turns_an_options_dict_into_typed_options():
    # collectors written against the old dict still read it, now typed
    ctx = CollectContext(None, 5.0, {"window": 0, "no_exec": True})
    assert isinstance(ctx.options, CollectOptions)
    assert ctx.options.no_exec is True and ctx.options.get("window") == 0


def test_a_probe_request_drops_a_trailing_v1_and_says_so():
    # the OpenAI client's base URL is the server's URL plus /v1
    target, note = probe_target("http://vllm:8000/v1")
    assert target.url == "http://vllm:8000" and "/v1" in note
    request = diagnose_request(ProbeRequest("http://vllm:8000/v1", model="m", max_latency_ms=5.0))
    assert request.target.url == "http://vllm:8000"
    assert request.settings.max_latency_ms == 5.0 and request.options.model == "m"


@pytest.mark.parametrize("url", ["pod/x", "node"])
def test_a_probe_of_anything_but_a_url_is_a_bad_target(url):
    # probe and the exporter's /probe take a URL only
    with pytest.raises(BadTarget, match="http"):
        probe_target(url)


def test_a_probe_of_a_missing_tokenizer_folder_is_refused_before_collecting():
    # bad input is a one-line error before any request is made
    with pytest.raises(BadInput, match="--tokenizer"):
        diagnose_request(ProbeRequest("http://127.0.0.1:9", tokenizer="/no/such/folder"))


def test_the_capacity_command_declares_exactly_the_request_fields():
    # the command builds the request from its options; a field on one side only would be lost
    from llmdoctor.commands.capacity import CapacityOptions

    assert [f.name for f in dataclasses.fields(CapacityOptions)] == [
        f.name for f in dataclasses.fields(CapacityRequest)
    ]
    defaults = {f.name: f.default for f in dataclasses.fields(CapacityRequest)}
    assert {f.name: f.default for f in dataclasses.fields(CapacityOptions)} == defaults


def test_a_capacity_request_plans_as_the_command_does():
    # the same arithmetic through the use case and through the CLI
    config = CONFIG / "qwen2-7b-instruct-config.json"
    plan = capacity(CapacityRequest(model_config=str(config), gpu="A100-80GB", max_model_len=4096))
    done = _cli("capacity", "--model-config", str(config), "--gpu", "A100-80GB",
                "--max-model-len", "4096", "--json")  # fmt: skip
    assert json.loads(done.stdout) == plan.to_json()
    assert done.returncode == (0 if plan.fits else 2)


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        (CapacityRequest(gpu="A100-80GB"), "--model-config"),  # no model at all
        (CapacityRequest(model_config="x.json", gpu="Z9000"), None),  # no such config file
        (CapacityRequest(model_config=str(CONFIG / "qwen2-7b-instruct-config.json")), "--gpu"),
    ],
)
def test_a_capacity_request_without_a_model_or_gpu_is_bad_input(request_, message):
    # bad input is a one-line BadInput, never a traceback
    with pytest.raises(BadInput) as caught:
        capacity(request_)
    if message:
        assert re.search(re.escape(message), str(caught.value))
