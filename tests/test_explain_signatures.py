"""The RE2 signature scan (a block-wide Set, then the lines it points at) equals matching every
line on its own, and it is linear whatever a signature says.

These tests hold the block scan to exactly the answer of Python's `re.search` on every line, on
every real fixture, across block boundaries, with threads, on a stream, and on hostile bytes
(CRLF, invalid UTF-8, a 20,000-character line, no trailing newline); and show that a signature
with nested quantifiers, which makes Python's `re` backtrack for minutes, is matched at once.
"""

from __future__ import annotations

import io
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from llmdoctor.engine.textsource import TextSource
from llmdoctor.triage.explain import explain
from llmdoctor.wiki import signatures as sig
from llmdoctor.wiki.library import load_library
from llmdoctor.wiki.signatures import LineMatch, SignatureSet, literal_weight

FIXTURES = Path(__file__).parent / "fixtures"
EXTRA_LINES = [
    "caf\u00e9 CUDA out of memory. Tried to allocate 2 GiB\r",
    "\udcff bad byte line NCCL error: x",
    "x" * 20000 + "NVRM: Xid (PCI:0000:01:00): 79, pid=1",
    "",
    "\r",
    "Engine core proc EngineCore_DP0 died unexpectedly \u2014 \u00fcn\u00efcode",
]


@pytest.fixture(scope="module")
def signatures():
    return SignatureSet(load_library().entries.values())


def fixture_bytes() -> bytes:
    """Every real log fixture of the repository, joined, plus the hostile lines."""
    parts = []
    for path in sorted(FIXTURES.rglob("*")):
        if path.is_file() and path.suffix in (".log", ".txt"):
            parts.append(path.read_bytes())
    parts.append("\n".join(EXTRA_LINES).encode("utf-8", errors="surrogateescape"))
    return b"\n".join(parts)


def naive(signatures: SignatureSet, data: bytes) -> list[LineMatch]:
    """Python `re.search` per '\\n'-split line, decoded like the scanner decodes them."""
    compiled = [(entry_id, re.compile(p)) for entry_id, p in signatures.patterns]
    pieces = data.split(b"\n")
    if data.endswith(b"\n"):
        pieces.pop()
    out = []
    for number, raw in enumerate(pieces, 1):
        line = raw.decode("utf-8", errors="replace").rstrip("\r")
        ids: list[str] = []
        for entry_id, pattern in compiled:
            if entry_id not in ids and pattern.search(line):
                ids.append(entry_id)
        if ids:
            out.append(LineMatch(number, line, tuple(ids)))
    return out


def test_builtin_signatures_all_compile_in_re2(signatures):
    assert signatures.invalid == []
    assert len(signatures.patterns) >= 60


def test_fast_scan_equals_naive_on_every_fixture(signatures, tmp_path):
    # One file of all real fixtures: same lines, numbers, texts and entry ids.
    data = fixture_bytes()
    path = tmp_path / "all.log"
    path.write_bytes(data)
    assert list(signatures.scan(TextSource.from_file("all", path))) == naive(signatures, data)


def test_scan_equals_naive_across_small_blocks(signatures, tmp_path, monkeypatch):
    # Small blocks put lines across block boundaries and a 20,000-character line over several.
    monkeypatch.setattr(sig, "BLOCK_BYTES", 4096)
    data = fixture_bytes() * 2
    path = tmp_path / "big.log"
    path.write_bytes(data)
    assert list(signatures.scan(TextSource.from_file("big", path))) == naive(signatures, data)


def test_threaded_scan_keeps_order_and_line_numbers(signatures, tmp_path, monkeypatch):
    monkeypatch.setattr(sig, "BLOCK_BYTES", 64 * 1024)
    data = fixture_bytes() * 4
    path = tmp_path / "par.log"
    path.write_bytes(data)
    threaded = list(signatures.scan(TextSource.from_file("par", path), workers=3))
    assert threaded == naive(signatures, data)


def test_stream_and_text_scans_agree_with_the_file_scan(signatures, tmp_path):
    data = fixture_bytes()
    expected = naive(signatures, data)
    assert list(signatures.scan_stream(io.BytesIO(data))) == expected
    text = data.decode("utf-8", errors="replace")
    assert list(signatures.scan_text(text)) == expected


def test_literal_weight_grows_with_fixed_text():
    assert literal_weight(r"NVRM: Xid \([^)]*\): 79,") > literal_weight(r"Xid")


def test_literal_weight_counts_only_what_every_match_contains():
    assert literal_weight(r"NCCL error") == 10
    assert literal_weight(r"ab?c") == 2  # the optional b does not count
    assert literal_weight(r"x(abc|de)y") == 4  # the shorter branch
    assert literal_weight(r"[0-9]+ GiB\.") == 5  # class and repeat do not count, '\.' does
    assert literal_weight(r"\bKilled\b") == 6  # \b is an anchor


def test_a_signature_matching_every_line_is_rejected_as_invalid():
    # 'x*' would fire on every line of every log: refused, with the reason.
    entries = [SimpleNamespace(id="bad", signatures=["x*", "fine signature"])]
    found = SignatureSet(entries)
    assert [(w.entry_id, w.signature) for w in found.invalid] == [("bad", "x*")]
    assert "empty string" in found.invalid[0].error
    assert len(found.patterns) == 1


def test_signatures_checked_together_get_the_reasons_each_gets_alone(entries):
    # One RE2 Set checks a wiki's signatures at start-up: every built-in one usable, and each
    # bad one (RE2 refuses it, it matches every line, it is no text) refused with the reason
    # compile_problem gives it alone.
    written = [s for e in entries.values() for s in [*e.signatures, *e.hints]]
    bad = [r"(ab)\1 failed", "x*", r"(?=look)ahead", "a|", "fine", r"[unclosed", 7, r"^$", "é+"]
    checked = written + bad
    assert sig.compile_problems(checked) == [
        sig.compile_problem(s) if isinstance(s, str) else "it is not text" for s in checked
    ]
    assert sig.compile_problems(written) == [None] * len(written)


def test_a_signature_re2_cannot_compile_is_reported_with_file_and_line(tmp_path):
    # A backreference compiles in Python but not in RE2: never dropped silently.
    entry = tmp_path / "team-thing.md"
    entry.write_text(
        "---\nid: team-thing\nsignatures:\n  - 'fine one'\n  - '(ab)\\1 failed'\n---\n",
        encoding="utf-8",
    )
    found = SignatureSet(
        [SimpleNamespace(id="team-thing", signatures=["fine one", r"(ab)\1 failed"], path=entry)]
    )
    (bad,) = found.invalid
    assert str(bad).startswith(f"{entry}:5: signature")
    assert "RE2 cannot compile" in str(bad)


def test_nested_quantifiers_are_matched_in_linear_time():
    # Python's re needs minutes for this line (exponential backtracking); RE2 is linear.
    import time

    entries = [SimpleNamespace(id="team", signatures=[r"([A-Za-z]+ ?)+ failed$"])]
    found = SignatureSet(entries)
    line = "Warming up the model weights and the cache for serving requests now" * 3 + "!"
    started = time.perf_counter()
    assert list(found.scan_text((line + "\n") * 2000)) == []
    assert found.match_line("model load failed") == ("team",)
    assert time.perf_counter() - started < 5


def test_a_signature_ending_in_a_dollar_matches_the_lines_of_a_windows_log(tmp_path):
    # `$` over a block of lines (`(?m)`) ends a line only before its newline: in a CRLF log
    # (PowerShell's `kubectl logs > x.log`, a paste from Windows) a signature ending in it
    # matched no line at all, though the same line alone does
    entries = [SimpleNamespace(id="team", signatures=[r"unknown model : [a-z0-9]+$"])]
    found = SignatureSet(entries)
    lines = [f"INFO ok line {n}" for n in range(2000)]
    lines[1000] = "ERROR Request for unknown model : llama3"
    data = ("\r\n".join(lines) + "\r\n").encode()
    path = tmp_path / "windows.log"
    path.write_bytes(data)
    expected = naive(found, data)
    assert [m.line for m in expected] == [1001]
    assert list(found.scan(TextSource.from_file("windows", path))) == expected
    assert list(found.scan_stream(io.BytesIO(data))) == expected
    grouped = list(found.scan(TextSource.from_file("windows", path), kinds=True))
    assert [m.line for m in grouped] == [1001] and grouped[0].text == lines[1000]


def test_tail_entries_keep_at_least_the_last_lines_of_each_block(monkeypatch):
    # explain keeps only the last 40 salient lines; a tail entry is searched from each block's
    # end, so the last `tail_keep` lines of the whole log are exactly those of a full scan
    monkeypatch.setattr(sig, "BLOCK_BYTES", 4096)
    monkeypatch.setattr(sig, "TAIL_CHUNK", 256)
    entries = [
        SimpleNamespace(id="sig", signatures=["CUDA out of memory"]),
        SimpleNamespace(id="salient", signatures=[r"[Ee]rror", "[Ff]ailed"]),
    ]
    lines = [
        f"{n} request failed: user error {n}" if n % 3 else f"{n} INFO ok" for n in range(3000)
    ]
    lines[1500] = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
    data = ("\n".join(lines) + "\n").encode()
    full = naive(SignatureSet(entries), data)
    tailed = list(
        SignatureSet(entries, tail_ids=["salient"], tail_keep=10).scan_stream(io.BytesIO(data))
    )
    pick = [m.line for m in full if "salient" in m.entry_ids][-10:]
    assert [m.line for m in tailed if "salient" in m.entry_ids][-10:] == pick
    assert [m for m in tailed if "sig" in m.entry_ids] == [m for m in full if "sig" in m.entry_ids]
    assert len(tailed) < len(full) / 3  # most salient-only lines were never looked at


def run(text: str, entries):
    return explain(TextSource.from_text("paste", text), entries)


def named(result) -> list[tuple[str, str, str]]:
    """(id, severity, how) of every entry explain names (not the "too weak" guesses)."""
    return [(m.id, m.severity, m.how) for m in result.matches]


# https://github.com/InternLM/lmdeploy/issues/3950 (the TurboMind start-up log). LlamaBatch.cc
# prints it with TM_LOG_WARNING, shortens session_len and goes on starting:
# https://github.com/InternLM/lmdeploy/blob/main/src/turbomind/models/llama/LlamaBatch.cc
LMDEPLOY_SESSION_LEN_TRUNCATED = """\
[TM][INFO] [BlockManager] block_size = 0.844 MB
[TM][INFO] [BlockManager] max_block_count = 1740
[TM][INFO] [BlockManager] chunk_size = 1740
[TM][WARNING] [SegMgr] prefix caching is enabled
[TM][WARNING] No enough blocks for `session_len` (131072), `session_len` truncated to 111360.
"""


def test_lmdeploy_session_len_truncation_warning_is_not_a_critical_start_up_failure(entries):
    result = run(LMDEPLOY_SESSION_LEN_TRUNCATED, entries)
    assert result.exit_code < 2, named(result)


# https://github.com/ray-project/kuberay/issues/3151: a CPU-only Ray Serve deployment whose
# replica waits to be scheduled ("This may be due to waiting for the cluster to auto-scale").
RAY_SERVE_WAITING_TO_BE_SCHEDULED = (
    "WARNING 2025-03-04 01:04:33,560 controller 306 -- Deployment "
    "'demoRetrievalVoyagerIndexServiceHandler' in application "
    "'demo_recsys_retrieval_voyager_index_service' has 1 replicas that have taken more than 30s to "
    "be scheduled. This may be due to waiting for the cluster to auto-scale or for a runtime "
    'environment to be installed. Resources required for each replica: {"CPU": 2.0}, total '
    'resources available: {"CPU": 10.0}. Use `ray status` for more details.\n'
)


def test_ray_serve_scheduling_wait_warning_is_not_a_lost_worker(entries):
    result = run(RAY_SERVE_WAITING_TO_BE_SCHEDULED, entries)
    assert result.exit_code < 2, named(result)


# https://github.com/astral-sh/uv/issues/18523: uv (clap) rejects an option it never had.
UV_UNEXPECTED_ARGUMENT = """\
$ uv pip install pandas --target=./test --platform=x86_64
error: unexpected argument '--platform' found

  tip: to pass '--platform' as a value, use '-- --platform'

Usage: uv pip install --target <TARGET> <PACKAGE|--requirements <REQUIREMENTS>|--editable <EDITABLE>|--group <GROUP>>

For more information, try '--help'.
"""


def test_uv_usage_error_is_not_a_vllm_flag_removed_on_upgrade(entries):
    result = run(UV_UNEXPECTED_ARGUMENT, entries)
    assert all(
        m.id != "vllm-flag-removed-on-upgrade" or m.how != "signature" for m in result.matches
    ), named(result)


# https://docs.gitlab.com/charts/troubleshooting/ (source: gitlab-org/charts/gitlab,
# doc/troubleshooting/_index.md, "Git over SSH"): the kubelet's SystemOOM event next to the
# kernel's memory-cgroup kill, "caused by memory limits" (gitlab-shell's limits.memory too low).
SYSTEM_OOM_EVENT_FOR_A_CGROUP_LIMIT = """\
System OOM encountered, victim process: gitlab-shell
Memory cgroup out of memory: Killed process 3141592 (gitlab-shell)
"""


def test_system_oom_event_next_to_a_memory_cgroup_kill_is_the_container_limit(entries):
    result = run(SYSTEM_OOM_EVENT_FOR_A_CGROUP_LIMIT, entries)
    assert result.matches and result.matches[0].id == "k8s-oomkilled", named(result)


# https://github.com/VoltaML/voltaML-fast-stable-diffusion/issues/15: TensorRT's builder while
# it tries tactics; the maintainer: "These are warnings. Not a big issue. It should still work."
# (TensorRT-LLM says the same of the tactic warnings: NVIDIA/TensorRT-LLM#493.)
TRT_BUILDER_TACTIC_WARNINGS = """\
[12/09/2022-20:25:24] [TRT] [E] 2: [virtualMemoryBuffer.cpp::resizePhysical::145] Error Code 2: OutOfMemory (no further information)
[12/09/2022-20:25:24] [TRT] [E] 2: [virtualMemoryBuffer.cpp::resizePhysical::145] Error Code 2: OutOfMemory (no further information)
[12/09/2022-20:25:24] [TRT] [W] Requested amount of GPU memory (17179869184 bytes) could not be allocated. There may not be enough free memory for allocation to succeed.
[12/09/2022-20:25:25] [TRT] [W] Skipping tactic 8 due to insufficient memory on requested size of 17179869184 detected for tactic 0x000000000000003c.
Try decreasing the workspace size with IBuilderConfig::setMemoryPoolLimit().
"""


def test_tensorrt_builder_tactic_memory_warning_is_not_a_serving_oom(entries):
    result = run(TRT_BUILDER_TACTIC_WARNINGS, entries)
    assert result.exit_code < 2, named(result)


# https://github.com/ollama/ollama/issues/10368: Ollama truncates the prompt to num_ctx and
# answers (the request before it got 200); a WARN, not an HTTP 400, yet the model never read most
# of the prompt: named, at the entry's warning severity (blind rounds labelled two more so).
OLLAMA_TRUNCATING_INPUT_PROMPT = """\
time=2025-04-22T11:21:46.411Z level=INFO source=server.go:619 msg="llama runner started in 0.25 seconds"
[GIN] 2025/04/22 - 11:21:46 | 200 |  444.455595ms |    10.130.41.81 | POST     "/api/embeddings"
time=2025-04-22T11:21:47.546Z level=WARN source=runner.go:131 msg="truncating input prompt" limit=2048 prompt=5065 keep=5 new=2048
"""


def test_ollama_prompt_truncation_is_named_as_a_warning(entries):
    result = run(OLLAMA_TRUNCATING_INPUT_PROMPT, entries)
    assert result.matches[0].id == "context-length-exceeded", named(result)
    assert result.matches[0].severity == "warning" and result.exit_code == 1
