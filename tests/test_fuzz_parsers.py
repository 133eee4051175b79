"""Fuzzing every parser with random and hostile input: a result or a one-line error, never an
exception or a hang.

Each parser gets real captured documents from tests/fixtures/ and examples/bundles/ (see their
SOURCES.md), mangled by hypothesis — bytes inserted, lines cut, duplicated or dropped,
numbers replaced with NaN, infinities, huge or negative values, control characters and
invalid UTF-8 — and also plain random text. Examples per parser and the time per example are
bounded, so the whole file runs in well under a minute on two cores.
"""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from llmdoctor.engine.facts import Facts
from llmdoctor.engine.findings import Finding
from llmdoctor.errors import BadBundle, BadInput

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
EXAMPLES = ROOT / "examples" / "bundles"

FUZZ = settings(
    max_examples=120,
    deadline=10_000,  # ms per example: a slowness guard that a loaded 2-core machine still passes
    database=None,  # nothing written into the working tree
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def seeds(*patterns: str) -> list[str]:
    found = sorted(p for pattern in patterns for p in ROOT.glob(pattern))
    assert found, patterns
    return [p.read_text(encoding="utf-8", errors="replace") for p in found]


HOSTILE_TOKENS = [
    "NaN",
    "nan",
    "+Inf",
    "-Inf",
    "inf",
    "1e309",
    "-1",
    "0",
    "99999999999999999999999999",
    "-0.0",
    "0x1F",
    "\x00",
    "\x1b[2J",
    "\u202e",
    "\ufffd",
    '"',
    "{",
    "}",
    "[",
    "<",
    ">",
    "&",
    "\\",
    "\n",
    "\r",
    "",
    " " * 50,
    "null",
    "true",
    "é显存",
]


@st.composite
def mangled(draw, corpus: list[str]) -> str:
    """A real document with a few random edits."""
    text = draw(st.sampled_from(corpus))
    lines = text.splitlines(keepends=True) or [""]
    for _ in range(draw(st.integers(0, 6))):
        edit = draw(st.integers(0, 5))
        i = draw(st.integers(0, max(len(lines) - 1, 0)))
        if edit == 0:  # replace a number-looking token or insert a hostile one
            line = lines[i]
            j = draw(st.integers(0, len(line)))
            lines[i] = line[:j] + draw(st.sampled_from(HOSTILE_TOKENS)) + line[j:]
        elif edit == 1:
            lines[i] = lines[i].replace(
                draw(st.sampled_from(["0", "1", "2", "5", "."])),
                draw(st.sampled_from(HOSTILE_TOKENS)),
            )
        elif edit == 2 and len(lines) > 1:
            del lines[i]
        elif edit == 3:
            lines.insert(i, lines[i])
        elif edit == 4:
            lines[i] = lines[i][: draw(st.integers(0, len(lines[i])))]
        else:
            lines.insert(i, draw(st.text(max_size=80)) + "\n")
    if draw(st.booleans()):
        cut = draw(st.integers(0, sum(len(line) for line in lines)))
        return "".join(lines)[:cut]
    return "".join(lines)


def documents(corpus: list[str]):
    return st.one_of(mangled(corpus), st.text(max_size=2000))


# --- vLLM /metrics ---------------------------------------------------------------------------------

METRICS = seeds("tests/fixtures/vllm/metrics_*.txt", "examples/bundles/*/vllm/metrics-*.txt")


@FUZZ
@given(first=documents(METRICS), second=documents(METRICS))
def test_metrics_parser_and_window_take_anything(first, second):
    from llmdoctor.parsers.vllm_metrics import parse_scrape, window_from_scrapes

    scrapes = [parse_scrape("vllm/metrics-0.txt", first, 0.0)]
    scrapes.append(parse_scrape("vllm/metrics-1.txt", second, 5.0))
    try:
        window = window_from_scrapes(scrapes)
    except ValueError as exc:  # documented: why there is no window (shown as the reason)
        assert str(exc) and "\n" not in str(exc)
        return
    assert isinstance(window, dict)


@FUZZ
@given(first=documents(METRICS), second=documents(METRICS))
def test_metrics_never_break_a_vllm_check(first, second):
    from llmdoctor.engine.derive import derive_all
    from llmdoctor.engine.registry import checks_for_scopes
    from llmdoctor.engine.runner import run_checks

    facts = Facts()
    facts.set("vllm/metrics-0.txt", first)
    facts.set("vllm/metrics-1.txt", second)
    facts.set("time/now", 1_757_000_000.0)
    derive_all(facts)
    report = run_checks(facts, checks_for_scopes(("vllm",)), "http://fuzz", timeout=30)
    crashed = [e for e in report.errors if "check" in e]
    assert not crashed, crashed


# --- kernel log (Xid) --------------------------------------------------------------------------

KERNEL = seeds("tests/fixtures/kernel/*.log", "examples/bundles/*/node/kernel.log")


@FUZZ
@given(text=documents(KERNEL), junk=st.binary(max_size=300))
def test_kernel_log_scanner_takes_anything(text, junk):
    from llmdoctor.engine.textsource import TextSource
    from llmdoctor.parsers.xid import parse_xid_line, scan_xid

    data = text.encode("utf-8", errors="surrogatepass") + junk
    scan = scan_xid(TextSource.from_text("kernel.log", data.decode("utf-8", errors="replace")))
    assert scan.lines >= 0
    for n, line in enumerate(text.splitlines()[:50], 1):
        parse_xid_line(line, n)


# --- nvidia-smi -q -x ---------------------------------------------------------------------------

SMI = seeds("tests/fixtures/nvidia-smi/*.xml")


@FUZZ
@given(text=documents(SMI))
def test_nvidia_smi_xml_parser_returns_or_says_why(text):
    from llmdoctor.parsers.nvidia_smi_xml import parse_nvidia_smi_xml

    try:
        doc = parse_nvidia_smi_xml(text)
    except ValueError as exc:  # documented: "not valid XML (...)", "root element is <x>"
        assert str(exc) and "\n" not in str(exc)
        return
    assert isinstance(doc["gpus"], list)


def test_an_xml_entity_bomb_is_refused_quickly():
    import time

    from llmdoctor.parsers.nvidia_smi_xml import parse_nvidia_smi_xml

    entities = '<!ENTITY a0 "lol">' + "".join(
        f'<!ENTITY a{n} "{f"&a{n - 1};" * 10}">' for n in range(1, 10)
    )
    bomb = f'<?xml version="1.0"?><!DOCTYPE r [{entities}]><nvidia_smi_log>&a9;</nvidia_smi_log>'
    started = time.monotonic()
    with pytest.raises(ValueError):
        parse_nvidia_smi_xml(bomb)
    assert time.monotonic() - started < 5


# --- pod JSON, through every Kubernetes check ------------------------------------------------------

PODS = seeds("tests/fixtures/k8s/pod-*.json")

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=30),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=25,
)


@st.composite
def pods(draw):
    """A real pod with one field somewhere replaced by a random JSON value."""
    pod = json.loads(draw(st.sampled_from(PODS)))
    for _ in range(draw(st.integers(1, 4))):
        node = pod
        path = []
        while isinstance(node, dict | list) and node and draw(st.booleans()):
            key = draw(
                st.sampled_from(list(node.keys()) if isinstance(node, dict) else range(len(node)))
            )
            path.append(key)
            node = node[key]
        if not path:
            continue
        parent = pod
        for key in path[:-1]:
            parent = parent[key]
        parent[path[-1]] = draw(json_values)
    return pod


def k8s_checks():
    from llmdoctor.engine.registry import checks_for_scopes

    return checks_for_scopes(("k8s",))


@FUZZ
@given(pod=st.one_of(pods(), json_values))
def test_pod_json_never_breaks_a_kubernetes_check(pod):
    from llmdoctor.engine.derive import derive_all
    from llmdoctor.engine.runner import run_checks

    facts = Facts()
    facts.set("k8s/pod.json", pod)
    facts.set("time/now", 1_757_000_000.0)
    derive_all(facts)
    report = run_checks(facts, k8s_checks(), "pod/fuzz", timeout=30)
    crashed = [e for e in report.errors if "check" in e]
    assert not crashed, crashed
    assert all(isinstance(f, Finding) for f in report.findings)


# --- runbook front matter ------------------------------------------------------------------------

RUNBOOKS = seeds("runbooks/*.md")


@FUZZ
@given(text=documents(RUNBOOKS))
def test_runbook_parser_and_lint_return_or_name_the_line(text):
    from llmdoctor.wiki.entry import EntryError, parse_entry
    from llmdoctor.wiki.lint import lint_text

    try:
        parse_entry(text, "fuzz.md")
    except EntryError as exc:
        assert str(exc)
    entry, problems = lint_text(text, "fuzz.md")
    assert entry is not None or problems
    assert all(p.line >= 1 for p in problems)


# --- bundles ---------------------------------------------------------------------------------------

member_names = st.one_of(
    st.sampled_from(
        [
            "b/manifest.json",
            "b/k8s/pod.json",
            "b/logs/vllm.log",
            "b/node/kernel.log",
            "b/vllm/metrics-0.txt",
            "/etc/passwd",
            "../escape.txt",
            "b/../../escape",
            "b/logs/../../x",
            "C:/windows",
            "b/" + "d/" * 40 + "deep.log",
        ]
    ),
    st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=40),
)


@st.composite
def archives(draw) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for _ in range(draw(st.integers(0, 6))):
            name = draw(member_names)
            kind = draw(st.sampled_from(["file", "file", "file", "dir", "sym", "hard", "fifo"]))
            info = tarfile.TarInfo(name)
            if kind == "file":
                data = draw(
                    st.one_of(
                        st.binary(max_size=200),
                        st.sampled_from(
                            [b'{"format": "llmdoctor-bundle/1"}', b"[" * 5000, b"{}", b"null"]
                        ),
                    )
                )
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
                continue
            if kind == "dir":
                info.type = tarfile.DIRTYPE
            elif kind in ("sym", "hard"):
                info.type = tarfile.SYMTYPE if kind == "sym" else tarfile.LNKTYPE
                info.linkname = draw(member_names)
            else:
                info.type = tarfile.FIFOTYPE
            tar.addfile(info)
    data = buffer.getvalue()
    if draw(st.booleans()):
        data = data[: draw(st.integers(0, len(data)))]
    return data


@FUZZ
@given(data=st.one_of(archives(), st.binary(max_size=500)))
def test_a_bundle_archive_opens_or_is_refused_in_one_line(tmp_path_factory, data):
    from llmdoctor.collectors.bundle import Bundle

    path = tmp_path_factory.mktemp("fuzz") / "bundle.tar.gz"
    path.write_bytes(data)
    try:
        with Bundle(path) as bundle:
            facts = bundle.to_facts()
    except BadBundle as exc:
        assert str(exc) and "\n" not in str(exc)
        return
    assert facts.has("target")


# --- explain input ---------------------------------------------------------------------------------

LOGS = seeds("tests/fixtures/logs/*.log", "tests/fixtures/kernel/*.log")


@FUZZ
@given(
    text=documents(LOGS),
    junk=st.binary(max_size=400),
    encoding=st.sampled_from(["utf-8", "utf-16", "utf-16-le", "gzip"]),
    max_line=st.integers(1, 300),
)
def test_log_stream_reads_anything_with_every_line_capped(text, junk, encoding, max_line):
    import gzip

    from llmdoctor.triage.log_input import LogStream

    data = text.encode("utf-8", errors="replace") + junk
    if encoding == "gzip":
        data = gzip.compress(data)
    elif encoding != "utf-8":
        data = text.encode(encoding)
    try:
        stream = LogStream(io.BufferedReader(io.BytesIO(data)), "fuzz", max_line=max_line)
    except BadInput as exc:
        assert "\n" not in str(exc)
        return
    out = b""
    while chunk := stream.read(97):
        out += chunk
    assert all(len(line) <= max_line for line in out.split(b"\n"))


# --- other line parsers ------------------------------------------------------------------------------


@FUZZ
@example(
    # found by this test: a mangled size (`7-0.0.31 GiB`) reached float() as "0.0.31"
    line="torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.96 GiB. Of the allocated"
    " memory 7-0.0.31 GiB is allocated by PyTorch, and 1.83 GiB is reserved by PyTorch but "
    "unallocated."
)
@given(line=st.one_of(mangled(seeds("tests/fixtures/logs/*.log")), st.text(max_size=400)))
def test_torch_oom_parser_takes_any_line(line):
    from llmdoctor.parsers.torch_oom import parse_torch_oom

    for one in line.splitlines()[:40] or [line]:
        parse_torch_oom(one)


@FUZZ
@given(
    argv=st.lists(
        st.one_of(
            st.sampled_from(
                [
                    "--max-model-len",
                    "--tensor-parallel-size",
                    "-tp",
                    "--dtype",
                    "--max-num-seqs",
                    "--gpu-memory-utilization",
                    "serve",
                    "vllm",
                    "=",
                    "--",
                    "-",
                ]
            ),
            st.text(max_size=20),
        ),
        max_size=12,
    ),
    positional=st.booleans(),
)
def test_vllm_argv_parser_takes_any_argv(argv, positional):
    from llmdoctor.parsers.serving_args import parse_vllm_argv

    assert isinstance(parse_vllm_argv(argv, positional), dict)
