"""One redactor (llmdoctor/redact.py) for every path that can carry a secret: bundles, argv in
both spellings, `wiki add --from-log`, Prometheus selectors and URL errors; precise enough that
evidence (`max_num_batched_tokens=2048`, `tokenizer_mode=auto`) stays."""

from __future__ import annotations

import json
import string
import time
from pathlib import Path

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from llmdoctor.cli import app
from llmdoctor.cli import run as cli_run
from llmdoctor.collectors.bundle import write_bundle
from llmdoctor.collectors.prometheus import default_selector
from llmdoctor.engine.facts import Facts
from llmdoctor.engine.textsource import TextSource
from llmdoctor.redact import REDACTED, is_secret_name, redact_json, redact_text

FIXTURES = Path(__file__).parent / "fixtures"
STARTUP_LOG = FIXTURES / "k8s" / "logs" / "qwen2-7b-tp1-startup.log"
UNDEFINED_SYMBOL = FIXTURES / "from_log" / "vllm-c-undefined-symbol-issue5501.log"
EXAMPLES = Path(__file__).parent.parent / "examples" / "bundles"

SECRET = st.text(string.ascii_letters + string.digits, min_size=12, max_size=40)
# the shapes a secret takes in logs, argv and config text; {} is the secret
SHAPES = [
    "http://admin:{}@vllm.serving:8000/v1",
    "https://u:{}@hub.example/org/model",
    "Authorization: Bearer {}",
    "authorization={}",
    "curl -H 'Authorization: Basic {}' x",
    "--api-key {}",
    "--api-key={}",
    "--hf-token '{}'",
    "OPENAI_API_KEY={}",
    "hf_token='{}'",
    '{{"api_key": "{}"}}',
    "?access_token={}&x=1",
    "curl -H 'X-Api-Key: {}' http://x",
    "curl -H 'Cookie: sid={}; theme=dark' http://x",
    "{{'hf_token': '{}', 'model': 'm'}}",
    "\n  token: {}",  # YAML (a kubeconfig): a name at the start of a line
    "\nclient-key-data: {}",
]
AROUND = st.text(string.printable.replace("\r", ""), max_size=40)


@settings(max_examples=300, deadline=None)
@given(secret=SECRET, shape=st.sampled_from(SHAPES), before=AROUND, after=AROUND)
@example(secret="hunter2hunter2", shape="http://admin:{}@vllm.serving:8000/v1", before="", after="")
@example(secret="000000000000", shape="hf_token='{}'", before="A=", after="")  # a seed found it
def test_no_shape_of_secret_survives_redaction_in_any_context(secret, shape, before, after):
    # whatever text surrounds it, a secret in a known shape is gone and redacting twice is a no-op
    assume(secret not in before + after + shape)
    text = before + " " + shape.format(secret) + "\n" + after
    once = redact_text(text)
    assert secret not in once
    assert redact_text(once) == once


@settings(max_examples=200, deadline=None)
@given(token=st.text(string.ascii_letters + string.digits, min_size=24, max_size=40), before=AROUND)
def test_token_shapes_are_redacted_without_a_name(token, before):
    # an hf_/sk-/ghp_ token pasted anywhere in a line is a secret by its shape alone
    assume(token not in before)
    for prefix in ("hf_", "sk-", "ghp_"):
        assert prefix + token not in redact_text(f"{before} {prefix}{token} tail")


@settings(max_examples=200, deadline=None)
@given(
    name=st.sampled_from(
        [
            "max_num_batched_tokens",
            "max_tokens",
            "num_tokens",
            "tokenizer_mode",
            "tokenizer",
            "TOKENIZERS_PARALLELISM",
            "kv_cache_dtype",
            "max_model_len",
            "--max-num-batched-tokens",
            "ssl_keyfile",
        ]
    ),
    value=st.integers(min_value=0, max_value=10**9).map(str) | st.sampled_from(["auto", "fp8"]),
)
def test_evidence_named_like_a_secret_is_kept(name, value):
    # *_tokens, tokenizer*, keyfile paths: settings a diagnosis reads, not secrets
    for text in (f"{name}={value}", f"{name} {value}", f"x {name}='{value}', y"):
        assert redact_text(text) == text


def test_a_real_vllm_startup_log_is_not_changed_by_redaction():
    # its config lines hold max_num_batched_tokens=2048, tokenizer='…': evidence, no secret
    text = STARTUP_LOG.read_text()
    assert "max_num_batched_tokens=2048" in text
    assert redact_text(text) == text


# real files holding words a name-based redactor mistakes for secrets; none of them holds one
EVIDENCE_FILES = [
    "explain_corpus/_unknown/sglang-scheduler-transformers-keyerror-qwen3-moe.log",  # KeyError:
    "k8s/pod-vllm-1-pending-aks.json",  # "topologyKey"
    "runbooks/k8s-gpu-unschedulable/describe-pod-vllm-pending-insufficient-gpu-aks.txt",
    "runbooks/gsp-timeout/gsp-heartbeat-timeout-h100-595-ogkm1230.log",  # startToken = 0x3
    "explain_corpus/_healthy/sglang-musa-piecewise-graph-captured-max-total-tokens.log",
    "explain_corpus/_healthy/r5a-llamacpp-server-qwen15-14b-two-gpu-offload-41-layers.log",
    "explain_corpus/_unknown/sglang-early-kv-cache-pool-leak-detected.log",
    "explain_corpus/enforce-eager-in-production/r4b-openrlhf-grpo-ray-job-enforce-eager-slow-rollout.log",
    "runbooks/nvidia-container-toolkit/docker-run-runtime-nvidia-not-registered-3dgrut.log",  # $PWD
    "explain_corpus/_healthy/tgi-llama2-13b-4-shards-startup.log",  # Args { …: None }
    "explain_corpus/_unknown/r4a-litellm-proxy-no-api-key-passed-health-401.log",  # api_key_auth.py
]


@pytest.mark.parametrize("name", EVIDENCE_FILES)
def test_real_logs_with_key_and_token_words_keep_their_evidence(name):
    # KeyError: 'qwen3_moe', BOS token = 151643, add_bos_token=True, --input_key prompt,
    # TokenExpirationSeconds: 3607: the evidence a diagnosis reads, redacted by a word match
    text = (FIXTURES / name).read_text()
    assert redact_text(text) == text


@pytest.mark.parametrize(
    "name,secret",
    [
        ("HF_TOKEN", True),  # the Hugging Face token
        ("OPENAI_API_KEY", True),
        ("hfToken", True),  # camelCase words
        ("client-key-data", True),  # a kubeconfig's private key
        ("DB_PASSWORD", True),
        ("max_num_batched_tokens", False),  # a budget in tokens, not a token
        ("TOKENIZERS_PARALLELISM", False),
        ("key", False),  # a toleration's or selector's key names a label
        ("KeyError", False),  # Python's exception, not a key
        ("input_key", False),  # a dataset column
        ("TokenExpirationSeconds", False),  # a duration
        ("secretName", False),  # a reference to a Secret, not its value
    ],
)
def test_secret_names_are_told_by_their_words(name, secret):
    assert is_secret_name(name) is secret


def test_api_key_in_both_argv_spellings_is_redacted_in_a_bundle(tmp_path):
    # the pod's args as Kubernetes lists them: --api-key and its value as two elements
    pod = json.loads((EXAMPLES / "healthy-vllm-7b" / "k8s" / "pod.json").read_text())
    container = pod["spec"]["containers"][0]
    container["args"] = [
        "--api-key",
        "s3cr3t-two-elements",
        "--hf-token=s3cr3t-one-element",
        "--max-num-batched-tokens",
        "8192",
    ]
    facts = Facts()
    facts.set("k8s/pod.json", pod)
    facts.set("time/now", 1756949400.0)
    out = write_bundle(facts, tmp_path / "b", target="pod/x", namespace="serving")
    text = (out / "k8s" / "pod.json").read_text()
    args = json.loads(text)["spec"]["containers"][0]["args"]
    assert "s3cr3t" not in text
    assert args == [
        "--api-key",
        REDACTED,
        f"--hf-token={REDACTED}",
        "--max-num-batched-tokens",
        "8192",
    ]


def test_a_bundles_log_keeps_its_evidence_and_loses_its_tokens(tmp_path):
    log = STARTUP_LOG.read_text() + "curl -H 'Authorization: Bearer abc.def.123456789' http://x\n"
    facts = Facts({"time/now": 0.0})
    facts.set("logs/vllm.log", TextSource.from_text("logs/vllm.log", log))
    out = write_bundle(facts, tmp_path / "b", target="pod/x")
    text = (out / "logs" / "vllm.log").read_text()
    assert "abc.def.123456789" not in text
    assert "max_num_batched_tokens=2048" in text  # the old redactor blanked it


def test_redaction_stays_linear_on_a_line_built_to_backtrack():
    # 'a.' repeated: each word start began a URL-scheme scan to the end of the line (quadratic
    # in `re`: 40 KB took 26 s); RE2 redacts a megabyte at once
    line = "a." * 500_000 + "KEY" * 100_000
    started = time.monotonic()
    assert redact_text(line) == line
    assert time.monotonic() - started < 10


def test_json_documents_keep_tolerations_and_lose_env_secrets():
    doc = {
        "env": [{"name": "HF_TOKEN", "value": "abc"}, {"name": "VLLM_PORT", "value": "8000"}],
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
        "headers": {"Authorization": "Bearer xyz"},
    }
    assert redact_json(doc) == {
        "env": [{"name": "HF_TOKEN", "value": REDACTED}, {"name": "VLLM_PORT", "value": "8000"}],
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
        "headers": {"Authorization": REDACTED},
    }


def test_url_userinfo_never_becomes_a_prometheus_selector():
    # Prometheus labels a scrape of vllm:8000 instance="vllm:8000"; the password is no label
    assert default_selector("http", None, None, "http://u:hunter2@vllm:8000") == (
        'instance="vllm:8000"'
    )


@pytest.mark.parametrize(
    "args",
    [
        ["probe", "http://admin:hunter2@vllm:99999"],  # a port out of range
        ["probe", "http://admin:hunter2@[::1"],  # an invalid IPv6 URL
        ["probe", "ftp://admin:hunter2@vllm:21"],  # not a target at all
        ["probe", "http://127.0.0.1:9", "--prometheus", "ftp://admin:hunter2@prom:9090"],
    ],
)
def test_invalid_url_errors_echo_no_password(capsys, args):
    with pytest.raises(SystemExit) as done:
        cli_run([*args, "--timeout", "1", "--window", "0"])
    err = capsys.readouterr().err
    assert done.value.code == 3
    assert "hunter2" not in err and REDACTED in err


def test_a_probe_url_ending_in_v1_is_noted_without_its_password(capsys):
    with pytest.raises(SystemExit):
        cli_run(["probe", "http://admin:hunter2@127.0.0.1:9/v1", "--timeout", "1", "--window", "0"])
    out = capsys.readouterr()
    assert "hunter2" not in out.out + out.err


def test_from_log_carries_no_secret_into_the_entry_examples_or_signature(tmp_path):
    # the real undefined-symbol log, its failing line carrying what a log does carry: a URL
    # password, a Bearer and an hf_ token
    secret_line = (
        "ERROR 06-13 11:42:21 [api_server.py:88] OSError: cannot fetch "
        "https://bot:Sup3rS3cret@hub.example/org/m with Authorization: Bearer tok.en123456789 "
        "(HF_TOKEN=hf_AbCdEfGhIjKlMnOpQrStUvWxYz01)\n"
    )
    log = tmp_path / "incident.log"
    log.write_text(UNDEFINED_SYMBOL.read_text() + secret_line)
    team = tmp_path / "team"
    team.mkdir()
    added = CliRunner().invoke(
        app,
        [
            *("wiki", "add", "--wiki", str(team), "--from-log", str(log)),
            *("--severity", "critical", "--tag", "x", "--cause", "A cause.", "--fix", "A fix."),
        ],
    )
    assert added.exit_code == 0, added.output
    written = "".join(p.read_text() for p in team.rglob("*") if p.is_file())
    assert "OSError: cannot fetch" in written  # the line itself is kept
    for secret in ("Sup3rS3cret", "tok.en123456789", "hf_AbCdEfGhIjKlMnOpQrStUvWxYz01"):
        assert secret not in written and secret not in added.output


def test_a_signature_made_from_a_redacted_line_still_fires_on_the_real_line():
    from llmdoctor.usecases.from_log import generalize
    from llmdoctor.wiki.re2_patterns import line_pattern

    line = "ERROR 06-13 11:42:21 [x.py:8] OSError: cannot fetch https://bot:Sup3rS3cret@hub/m now"
    signature = generalize(redact_text(line))
    assert signature and "Sup3rS3cret" not in signature and REDACTED not in signature
    assert line_pattern(signature).search(line)


def test_a_url_password_holding_an_at_sign_is_redacted_whole():
    # urlsplit reads userinfo to the last @: so must the redactor, or half the password shows
    assert redact_text("fetch http://bot:p@ss@hub.example/m ok") == (
        f"fetch http://bot:{REDACTED}@hub.example/m ok"
    )


def test_reports_never_print_a_secret_a_log_carries(tmp_path):
    # a final new-user pass: wiki add redacted, but diagnose/explain printed log tokens in full
    import shutil

    from typer.testing import CliRunner

    from llmdoctor.cli import app

    bundle = tmp_path / "b"
    shutil.copytree(
        Path(__file__).parents[1] / "examples" / "bundles" / "crashloop-cuda-oom", bundle
    )
    log = bundle / "logs" / "vllm.previous.log"
    lines = log.read_text().splitlines()
    lines[30] = (
        "ERROR hf_abcdefghijklmnopqrstuvwxyz123456 "
        + lines[30]
        + " Authorization: Bearer sk-live-0123456789abcdefghij"
    )
    log.write_text("\n".join(lines) + "\n")
    runner = CliRunner()
    outputs = [
        runner.invoke(app, ["diagnose", "--bundle", str(bundle), *fmt]).stdout
        for fmt in ([], ["--json"], ["--markdown"], ["-v"])
    ]
    outputs += [runner.invoke(app, ["explain", str(log), *fmt]).stdout for fmt in ([], ["--json"])]
    assert all("CUDA out of memory" in out for out in outputs)  # the evidence is still there
    for out in outputs:
        assert "hf_abcdefghijklmnop" not in out and "sk-live-0123" not in out


def test_a_bare_aws_access_key_id_is_redacted():
    # a final new-user pass: AKIA… stayed in what wiki add --from-log wrote; a word that merely
    # contains the prefix, or is too short, is evidence and stays
    text = "creds AKIAIOSFODNN7EXAMPLE and ASIAABCDEFGHIJKLMNOP; AKIAshort MAKIAIOSFODNN7EXAMPLEX"
    out = redact_text(text)
    assert "IOSFODNN7EXAMPLE and" not in out and "ABCDEFGHIJKLMNOP" not in out
    assert "AKIAshort" in out and "MAKIAIOSFODNN7EXAMPLEX" in out


def test_a_collected_manifest_keeps_our_reasons_and_loses_the_secrets_they_quote(
    tmp_path, monkeypatch
):
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from k8s_server import Running, scenario_healthy
    from vllm_server import FakeVllmServer, Reply, Scenario

    # a sidecar whose name has a secret's word ("credential") has not started: the reason is
    # our own sentence, evidence, and was written as <redacted> for the key's name
    name = "vllm-7b-7d9f8c6b5-x2kqp"
    scenario = scenario_healthy()
    pod = scenario.cluster.pods[("serving", name)]
    pod["spec"]["containers"].append({"name": "credential-helper", "image": "helper:1"})
    waiting = {"waiting": {"reason": "ContainerCreating"}}
    pod["status"]["containerStatuses"].append(
        {"name": "credential-helper", "ready": False, "restartCount": 0, "state": waiting}
    )
    with Running(scenario, tmp_path / "kubeconfig") as running:
        monkeypatch.setenv("KUBECONFIG", str(running.kubeconfig))
        argv = ["collect", f"pod/{name}", "-n", "serving", "--window", "0"]
        with pytest.raises(SystemExit) as done:
            cli_run([*argv, "-o", str(tmp_path / "pod-b")])
    assert done.value.code == 0
    missing = json.loads((tmp_path / "pod-b" / "manifest.json").read_text())["missing"]
    assert missing["logs/credential-helper.log"] == (
        "container credential-helper has not started (ContainerCreating)"
    )

    # a URL's tokenizer.json is missing because nobody asked for it (our words: kept); a
    # proxy's non-JSON /version answer quoted in a reason carries a token (untrusted: redacted)
    token = "Bearer abcdefgh12345678"
    proxy = Reply(200, f"proxy error: Authorization: {token}", "text/plain")
    server = FakeVllmServer(Scenario(routes={"GET /version": proxy}))
    with server, pytest.raises(SystemExit) as done:
        cli_run(["collect", server.url, "--window", "0", "-o", str(tmp_path / "url-b")])
    assert done.value.code == 0
    missing = json.loads((tmp_path / "url-b" / "manifest.json").read_text())["missing"]
    assert missing["tokenizer.json"] == "not requested (llmdoctor probe --tokenizer PATH)"
    assert "proxy error" in missing["vllm/version.json"]
    assert "abcdefgh12345678" not in json.dumps(missing)


@pytest.mark.parametrize(
    "text",
    [
        "A= OPENAI_API_KEY=000000000000",  # found by the property test above: A swallowed the key
        "x=1 y= z= HF_TOKEN=abcdefghijklmnopqrstu",  # a short chain of plain names before it
        "env: MODE= api_key=s3cr3tvalue99",
    ],
)
def test_a_plain_assignment_does_not_hide_a_secret_assigned_in_its_value(text):
    # NAME= allows blanks after `=`, so a plain name's value may be another NAME=SECRET
    out = redact_text(text)
    assert out.endswith("=<redacted>") and redact_text(out) == out


def test_a_long_chain_of_assignments_is_redacted_in_linear_time():
    # `a=a=a=…` is looked into a few levels deep only: a megabyte of it takes well under a second
    start = time.perf_counter()
    redact_text("a=" * 500_000 + "b")
    assert time.perf_counter() - start < 2.0
