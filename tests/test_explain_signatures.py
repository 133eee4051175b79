"""The fast signature scan (literal gates + per-line regex) equals a naive per-line re.search.

The engine never runs the 100-way alternation over whole text; these tests hold it to exactly the
answer of `re.search` on every line, on every real fixture, across block boundaries, in the
parallel path, on a stream, and on hostile bytes (CRLF, invalid UTF-8, a 20,000-character line,
no trailing newline).
"""

from __future__ import annotations

import io
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from llmdoctor import signatures as sig
from llmdoctor.signatures import (
    LineMatch,
    SignatureSet,
    literal_weight,
    plan_gates,
    required_literals,
)
from llmdoctor.textsource import TextSource
from llmdoctor.wiki.library import load_library

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
    """Per-line re.search over '\\n'-split lines, decoded like the scanner decodes them."""
    pieces = data.split(b"\n")
    if data.endswith(b"\n"):
        pieces.pop()
    out = []
    for number, raw in enumerate(pieces, 1):
        line = raw.decode("utf-8", errors="replace").rstrip("\r")
        ids = signatures.match_line(line)
        if ids:
            out.append(LineMatch(number, line, ids))
    return out


def test_builtin_signatures_all_have_a_literal_for_the_fast_path(signatures):
    # A signature without a literal is still correct but is checked on every line (slow).
    assert signatures.invalid == []
    assert [signatures.patterns[i][1].pattern for i in signatures.unfiltered] == []


def test_fast_scan_equals_naive_on_every_fixture(signatures, tmp_path):
    # One file of all real fixtures: same lines, numbers, texts and entry ids.
    data = fixture_bytes()
    path = tmp_path / "all.log"
    path.write_bytes(data)
    assert list(signatures.scan(TextSource.from_file("all", path))) == naive(signatures, data)


def test_fast_scan_equals_naive_across_blocks_with_planned_gates(signatures, tmp_path, monkeypatch):
    # Small blocks force lines across block boundaries; 3 MB forces the gate planner.
    monkeypatch.setattr(sig, "BLOCK_BYTES", 64 * 1024)
    data = fixture_bytes()
    data = data * (3 * 1024 * 1024 // len(data) + 1)
    path = tmp_path / "big.log"
    path.write_bytes(data)
    assert list(signatures.scan(TextSource.from_file("big", path))) == naive(signatures, data)


def test_parallel_scan_keeps_order_and_line_numbers(signatures, tmp_path):
    # Chunks of 256 KB in 2 processes: identical to the serial answer.
    data = fixture_bytes() * 4
    path = tmp_path / "par.log"
    path.write_bytes(data)
    source = TextSource.from_file("par", path)
    parallel = list(signatures.scan(source, workers=2, chunk_bytes=256 * 1024))
    assert parallel == naive(signatures, data)


def test_stream_and_text_scans_agree_with_the_file_scan(signatures, tmp_path):
    data = fixture_bytes()
    expected = naive(signatures, data)
    assert list(signatures.scan_stream(io.BytesIO(data))) == expected
    text = data.decode("utf-8", errors="replace")
    assert list(signatures.scan_text(text)) == expected


def test_required_literals_are_sound_and_specific():
    # Every match contains one of the literals; alternations and small classes expand.
    assert required_literals(r"NCCL [Ee]rror( [0-9]+)?( in)?:") == ("NCCL Error", "NCCL error")
    assert required_literals(r"Waiting: [0-9]{3,} reqs")[0] == "Waiting: 0"
    assert required_literals(r"!{20,}") == ("!!!!!!!!",)
    assert required_literals(r"(?i)cuda") is None  # case-insensitive: no literal filter
    assert required_literals(r"ab|cd") is None  # too short to gate on
    for pattern, line in [
        (r"GPU KV cache usage: (9[5-9]|100)\.[0-9]%", "GPU KV cache usage: 100.0%"),
        (
            r"Process [0-9]+ has [0-9.]+ [KMG]iB memory in use",
            "Process 1 has 2.5 GiB memory in use",
        ),
        (r"x(ab)+y", "xababy"),
    ]:
        assert re.search(pattern, line)
        assert any(lit in line for lit in required_literals(pattern))


def test_gate_plan_covers_every_literal():
    literals = ["CUDA out of memory", "NCCL error", "NCCL WARN Error", "fallen off the bus"]
    sample = "INFO serving request\n" * 5000
    plan = plan_gates(literals, sample)
    covered = {lit for gate, lits in plan for lit in lits if gate in lit}
    assert covered == set(literals)


def test_literal_weight_grows_with_fixed_text():
    assert literal_weight(r"NVRM: Xid \([^)]*\): 79,") > literal_weight(r"Xid")


def test_a_signature_matching_every_line_is_rejected_as_invalid():
    # 'x*' would fire on every line of every log: refused, with the reason.
    entries = [SimpleNamespace(id="bad", signatures=["x*", "fine signature"])]
    found = SignatureSet(entries)
    assert found.invalid == [("bad", "x*", "matches an empty line")]
    assert len(found.patterns) == 1
