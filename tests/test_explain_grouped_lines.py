"""A dense block's lines grouped by shape (digits written 0) give exactly the answer of reading
each line alone.

explain reads a crash loop or a loaded server's stats lines a kind at a time
(SignatureSet.scan(kinds=True), triage.explain._LineGroups.add_kinds): a digit-blind signature
is matched once per shape, the others on each line their cover may match. These tests hold the
grouped scan to the line-by-line scan and to Python's `re` on every line, and explain's reading
to the one made line by line, on real logs (the real-vLLM captures, every fixture) whose digits
are rewritten at random, so that a signature such as `Waiting: [1-9][0-9]+ reqs` fires on some
lines of a shape and not on others.
"""

from __future__ import annotations

import dataclasses
import io
import random
import re
from collections import Counter, deque
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from llmdoctor.engine.textsource import TextSource
from llmdoctor.triage.explain import _Hits, read_input
from llmdoctor.wiki.digit_blind import DIGITS_TO_ZERO, digit_blind, digit_blind_cover
from llmdoctor.wiki.signatures import BlockKinds, SignatureSet, _tiled_counts

FIXTURES = Path(__file__).parent / "fixtures"
REAL_VLLM = sorted((FIXTURES / "real-vllm-0.32").glob("*/server.log"))
BLOCK = 64 * 1024


@pytest.fixture(scope="module")
def explain_scanner(entries):
    from llmdoctor.triage.explain import SALIENT_ID, SALIENT_KEPT, _salient_entry

    return SignatureSet(
        [*entries.values(), _salient_entry()], tail_ids=[SALIENT_ID], tail_keep=SALIENT_KEPT
    )


def fixture_lines() -> list[str]:
    lines = []
    for path in sorted(FIXTURES.rglob("*")):
        if path.is_file() and path.suffix in (".log", ".txt"):
            lines += path.read_text(encoding="utf-8", errors="replace").splitlines()
    return lines


def new_digits(line: str, rng: random.Random) -> str:
    return re.sub(r"[0-9]", lambda _: rng.choice("0123456789"), line)


def dense_log(lines: list[str], copies: int, seed: int = 5) -> str:
    """`copies` of the lines, each copy with its digits rewritten at random."""
    rng = random.Random(seed)
    return "".join("\n".join(new_digits(line, rng) for line in lines) + "\n" for _ in range(copies))


def busy_stats(n: int, seed: int = 3) -> list[str]:
    """V1 stats lines whose waiting count and KV usage cross the signatures' thresholds (9 vs
    100 waiting, 84.9 vs 85.0 vs 95.0 %): the same shape fires differently."""
    rng = random.Random(seed)
    return [
        f"(APIServer pid=1671) INFO 09-03 10:{rng.randint(10, 59)}:{rng.randint(10, 59)} "
        f"[loggers.py:123] Engine 000: Avg prompt throughput: {rng.randint(100, 999)}.0 tokens/s, "
        f"Running: {rng.randint(10, 99)} reqs, Waiting: {rng.choice((9, 10, 100, 999, 0))} reqs, "
        f"GPU KV cache usage: {rng.choice(('84.9', '85.0', '95.0', '99.9', '10.0'))}%, "
        f"Prefix cache hit rate: {rng.randint(10, 99)}.0%"
        for _ in range(n)
    ]


# --- which signatures are digit-blind ---------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "blind"),
    [
        (r"CUDA out of memory\. Tried to allocate", True),  # no digit anywhere
        (r"Waiting: [0-9]{3,} reqs", True),  # all ten digits, a count (lengths are kept)
        (r"\d+\.\d+ GiB", True),  # \d holds every digit
        (r"[[:digit:]]x", True),  # a POSIX class holds all digits or none
        (r"[!-~]", True),  # a range over all ten digits
        (r"(?P<n1>a)", True),  # a group's name is no atom
        (r"Waiting: [1-9][0-9]+ reqs", False),  # [1-9] tells 0 from the others
        (r"Xid 79", False),  # literal digits
        (r"[+-5]", False),  # a range ending inside the digits
        (r"[a\-9]", False),  # an escaped dash is no range: 9 alone
        (r"a{1,x}", False),  # no valid repetition: a literal 1
        (r"a\x31", False),  # a hex escape: not read, so not blind
        (r"\pN", False),  # a Unicode class: not read
        (r"\Qv1\E", False),  # quoted literal digits
    ],
)
def test_digit_blind_reads_re2_syntax(pattern, blind):
    assert digit_blind(pattern) is blind


def test_blind_signatures_match_a_line_and_its_shape_alike(explain_scanner):
    # Every real fixture line, digits as written and rewritten: a blind signature fires on a
    # line exactly when it fires on the line with every digit written 0.
    rng = random.Random(11)
    lines = fixture_lines()
    lines += [new_digits(line, rng) for line in lines if any(c.isdigit() for c in line)]
    blind = {i for i, (_, sig) in enumerate(explain_scanner.patterns) if digit_blind(sig)}
    assert len(blind) > 300
    fired_somewhere = set()
    for line in lines:
        raw = line.encode("utf-8", errors="surrogateescape")
        on_line = blind.intersection(explain_scanner.matching(raw))
        assert on_line == blind.intersection(
            explain_scanner.matching(raw.translate(DIGITS_TO_ZERO))
        )
        fired_somewhere |= on_line
    assert len(fired_somewhere) > 100  # the check saw many signatures fire


def test_cover_matches_the_shape_of_every_line_its_signature_matches(explain_scanner):
    # A signature that tells digits apart (`Xid 79`, `[1-9]`) is matched on a line only when
    # its cover matches the line's shape: the cover must never miss a line it matches.
    rng = random.Random(12)
    lines = fixture_lines() + busy_stats(200)
    lines += [new_digits(line, rng) for line in lines if any(c.isdigit() for c in line)]
    checked = 0
    for _, sig in explain_scanner.patterns:
        cover = digit_blind_cover(sig)
        if digit_blind(sig) or cover is None:
            continue
        assert digit_blind(cover)
        pattern, widened = re.compile(sig), re.compile(cover)
        for line in lines:
            if pattern.search(line):
                shape = line.encode("utf-8", errors="surrogateescape").translate(DIGITS_TO_ZERO)
                assert widened.search(shape.decode("utf-8", errors="surrogateescape")), (sig, line)
                checked += 1
    assert checked > 500


# --- the grouped scan ------------------------------------------------------------------------


def line_by_line(scanner: SignatureSet, data: str, block_bytes: int = BLOCK) -> list:
    return list(scanner.scan_text(data, block_bytes=block_bytes))


def grouped(scanner: SignatureSet, data: str, block_bytes: int = BLOCK) -> tuple[list, int]:
    """The grouped scan's lines, one by one, and how many blocks came grouped."""
    out, blocks = [], 0
    for item in scanner.scan_text(data, block_bytes=block_bytes, kinds=True):
        if isinstance(item, BlockKinds):
            blocks += 1
            matches = item.line_matches()
            out += matches
            # the kinds' counts and kept lines agree with the lines themselves
            singles = {m.line for m in item.singles}
            counted: Counter = Counter()
            for kind in item.kinds:
                counted[kind.fired] += kind.count
            assert counted == Counter(m.fired for m in matches if m.line not in singles)
            # the first and last few lines of the kinds of each signature set, numbered on demand
            for fired in {kind.fired for kind in item.kinds}:
                ids = {kind.id for kind in item.kinds if kind.fired == fired}
                own = [
                    (m.line, m.text) for m in matches if m.line not in singles and m.fired == fired
                ]
                for keep in (0, 1, 3):
                    assert item.first_of(ids, keep) == own[:keep]
                    assert item.last_of(ids, keep) == own[max(len(own) - keep, 0) :]
        else:
            out.append(item)
    return out, blocks


@pytest.mark.parametrize("log", REAL_VLLM, ids=lambda p: p.parent.name)
def test_grouped_scan_of_a_real_vllm_log_equals_the_line_by_line_scan(explain_scanner, log):
    # A real vLLM 0.32 capture, 100 copies with their digits rewritten: dense blocks whose
    # shapes repeat while queue and KV numbers cross the signatures' thresholds.
    # (a capture with few matching lines stays line by line: the same answer either way)
    data = dense_log(log.read_text(encoding="utf-8").splitlines(), 100)
    lines, _ = grouped(explain_scanner, data)
    assert lines == line_by_line(explain_scanner, data)


def test_real_vllm_logs_make_grouped_blocks(explain_scanner):
    # The lines of the captures (kv-full, saturation, dead ...) that a signature matches,
    # repeated as a loaded or crash-looping server repeats them, digits rewritten.
    matching = [
        line
        for p in REAL_VLLM
        for line in p.read_text(encoding="utf-8").splitlines()
        if explain_scanner.match_line(line)
    ]
    assert len(matching) > 20
    data = dense_log(matching, 100)
    lines, blocks = grouped(explain_scanner, data)
    assert blocks > 0
    assert lines == line_by_line(explain_scanner, data)


def test_grouped_scan_of_every_fixture_equals_the_line_by_line_scan(explain_scanner):
    # All real fixtures three times over (digits rewritten), plus stats lines and a crash
    # loop: every signature that fires anywhere, in dense and sparse blocks alike.
    rng = random.Random(4)
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 x"
    extra = busy_stats(3000) + [new_digits(oom, rng) for _ in range(3000)]
    data = dense_log(fixture_lines(), 3) + "\n".join(extra)  # no newline at the end
    lines, blocks = grouped(explain_scanner, data)
    assert blocks > 0
    assert lines == line_by_line(explain_scanner, data)


def test_grouped_scan_with_plain_signatures_equals_python_re_per_line(entries):
    # No tail entries: the grouped scan against Python's `re` on each line directly.
    scanner = SignatureSet(entries.values())
    data = dense_log(
        busy_stats(50) + [line for p in REAL_VLLM for line in p.read_text().splitlines()], 12
    )
    compiled = [(entry_id, re.compile(p)) for entry_id, p in scanner.patterns]
    expected = []
    for number, line in enumerate(data.splitlines(), 1):
        ids = []
        for entry_id, pattern in compiled:
            if entry_id not in ids and pattern.search(line):
                ids.append(entry_id)
        if ids:
            expected.append((number, line, tuple(ids)))
    lines, blocks = grouped(scanner, data)
    assert blocks > 0
    assert [(m.line, m.text, m.entry_ids) for m in lines] == expected


def test_grouped_scan_of_a_loaded_server_equals_the_line_by_line_scan(explain_scanner):
    # One stats line in ten among access lines: only the lines the searches find are keyed
    # (not every line of the block); the same lines, numbers and entries.
    rng = random.Random(6)
    access = '(APIServer pid=1) INFO:     10.244.3.7:40112 - "POST /v1/completions HTTP/1.1" 200 OK'
    stats = busy_stats(3000)
    lines = [stats[n // 10] if n % 10 == 9 else new_digits(access, rng) for n in range(30000)]
    data = "\n".join(lines) + "\n"
    out, blocks = [], 0
    for item in explain_scanner.scan_text(data, block_bytes=256 * 1024, kinds=True):
        blocks += isinstance(item, BlockKinds)
        out += item.line_matches() if isinstance(item, BlockKinds) else [item]
    assert blocks > 5
    assert out == list(explain_scanner.scan_text(data, block_bytes=256 * 1024))


def test_crlf_block_is_read_like_the_same_log_with_newlines(explain_scanner):
    # A CRLF log's blocks are read with their CRs taken off (a signature ending in `$` matches
    # its lines too): the same answer as line by line, grouped as the LF log is.
    unix = dense_log(busy_stats(2000), 1)
    data = unix.replace("\n", "\r\n")
    lines, blocks = grouped(explain_scanner, data)
    assert (lines, blocks) == grouped(explain_scanner, unix) and blocks > 0
    assert lines == line_by_line(explain_scanner, data)


# --- repetitive blocks: read by shape first, no block-wide Set ---------------------------------

OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total "
    "capacity of 79.15 GiB of which 9.00 MiB is free. Process 1234 has 79.06 GiB memory in use."
)
# a line only salient (tail) patterns fire on: kept only when the tail search finds it
TAIL_ONLY = "WARNING 09-03 10:00:00 [custom_all_reduce.py:130] P2P test failed, falling back."
HEALTHY = '(APIServer pid=1671) INFO:     10.244.3.7:40112 - "GET /health HTTP/1.1" 200 OK'


def crash_loop(n: int, every: dict[int, str], seed: int = 8) -> str:
    """`n` lines of the CUDA OOM message, digits rewritten, with `every[k]` on each k-th line."""
    rng = random.Random(seed)
    lines = []
    for i in range(1, n + 1):
        extra = [line for k, line in every.items() if i % k == 0]
        lines.append(new_digits(extra[0] if extra else OOM, rng))
    return "\n".join(lines) + "\n"


@contextmanager
def shape_reads(scanner: SignatureSet) -> Iterator[list[bool]]:
    """For each block the scans inside offer to read by shape, whether it was."""
    calls: list[bool] = []
    scan_shapes = scanner._scan_shapes

    def counted(block, first_line):
        found = scan_shapes(block, first_line)
        calls.append(found is not None)
        return found

    scanner._scan_shapes = counted
    try:
        yield calls
    finally:
        del scanner._scan_shapes


def shapes_first_blocks(scanner: SignatureSet, data: str, block_bytes: int = BLOCK) -> int:
    """How many blocks of `data` a fresh scan reads by shape first."""
    with shape_reads(scanner) as calls:
        list(scanner.scan_text(data, block_bytes=block_bytes, kinds=True))
    return sum(calls)


@pytest.mark.parametrize(
    "every",
    [
        {},  # the crash loop alone: one kind per shape, nothing else
        {7: HEALTHY},  # lines no signature fires on: counted as nothing, never a kind
        {5: TAIL_ONLY},  # tail-only lines: the last ones kept as singles, the others not
        {3: TAIL_ONLY, 11: HEALTHY, 13: "RuntimeError: CUDA error: out of memory"},
    ],
    ids=["alone", "healthy-lines", "tail-lines", "mixed"],
)
def test_crash_loop_read_by_shape_first_equals_the_line_by_line_scan(explain_scanner, every):
    # A crash loop whose numbers vary: a few shapes per block, each matched once; every line
    # counted and the kept lines, numbers and tail singles exactly those of the line-by-line
    # scan (the last block ends without a newline).
    data = crash_loop(6000, every).rstrip("\n")
    assert shapes_first_blocks(explain_scanner, data) > 5
    lines, blocks = grouped(explain_scanner, data)
    assert blocks > 5
    assert lines == line_by_line(explain_scanner, data)


@pytest.mark.parametrize(
    ("late", "where"),
    [
        # more digits: a shape of its own, first seen after the block's probe (its first 64 KiB)
        (OOM.replace("20.00 MiB", "20000.00 MiB"), range(700, 6000, 997)),
        # a line whose shape ends with another's: counting that shape would count it too
        ("ERROR " + OOM, range(3, 6000, 5)),
        # a tail-only line first seen after the probe, and at a block's first and last lines
        (TAIL_ONLY, (*range(900, 6000, 1301), 1379, 1380, 2759, 2760)),
    ],
    ids=["late-shape", "suffix-shape", "late-tail-line"],
)
def test_shapes_the_probe_missed_or_that_end_another_are_counted_exactly(
    explain_scanner, late, where
):
    # 256 KiB blocks (the probe a quarter of each): shapes are counted with bytes.count only
    # when the probe's shapes tile the block and none ends another; the rest keyed line by line
    rng = random.Random(4)
    lines = [new_digits(OOM, rng) for _ in range(6000)]
    for n in where:
        lines[n] = new_digits(late, rng)
    data = "\n".join(lines) + "\n"
    block = 256 * 1024
    assert shapes_first_blocks(explain_scanner, data, block) > 1
    lines_grouped, blocks = grouped(explain_scanner, data, block)
    assert blocks > 1
    assert lines_grouped == line_by_line(explain_scanner, data, block)


def test_tiled_counts_counts_whole_lines_only():
    a, b = b"x 0 y", b"z 00"
    assert _tiled_counts(b"x 0 y\nz 00\nx 0 y\n", [a, b]) == {a: 2, b: 1}
    # a line of another shape: the lengths do not add up
    assert _tiled_counts(b"x 0 y\nq\nx 0 y\n", [a]) is None
    # "x 0 y" ends "wx 0 y": an occurrence could be inside a line
    assert _tiled_counts(b"wx 0 y\nx 0 y\n", [a, b"wx 0 y"]) is None
    # an empty line ends every line
    assert _tiled_counts(b"x 0 y\n\n", [a, b""]) is None


def test_block_with_a_line_a_shape_cannot_decide_is_read_with_the_block_set(explain_scanner):
    # A crash loop interleaved with stats lines whose waiting count decides a signature
    # (`Waiting: [1-9][0-9]+ reqs`: 9 vs 10 share a shape): the shape cannot say, so the block
    # goes through the block Set and the lines are matched one by one; same answer.
    stats = busy_stats(400)
    rng = random.Random(3)
    lines = [stats[n % 400] if n % 4 == 0 else new_digits(OOM, rng) for n in range(6000)]
    data = "\n".join(lines) + "\n"
    assert shapes_first_blocks(explain_scanner, data) == 0
    lines_grouped, blocks = grouped(explain_scanner, data)
    assert blocks > 0
    assert lines_grouped == line_by_line(explain_scanner, data)


def test_shape_first_keeps_invalid_utf8_lines_as_read(explain_scanner):
    # A crash loop with bytes that are no UTF-8 in some lines: their text as the line-by-line
    # scan decodes it, their signatures matched on the bytes as they are.
    data = crash_loop(3000, {9: OOM.replace("CUDA", "CUDA \udcff")})
    raw = data.encode("utf-8", errors="surrogateescape")
    scanner = explain_scanner
    grouped_lines = []
    for item in scanner.scan_stream(io.BytesIO(raw), block_bytes=BLOCK, kinds=True):
        grouped_lines += item.line_matches() if isinstance(item, BlockKinds) else [item]
    assert "\ufffd" in grouped_lines[8].text
    assert grouped_lines == list(scanner.scan_stream(io.BytesIO(raw), block_bytes=BLOCK))


# --- explain's reading -----------------------------------------------------------------------


def same_reading(source_of, entries):
    grouped_reading, _ = read_input(source_of(), entries)
    one_by_one, _ = read_input(source_of(), entries, kinds=False)
    assert dataclasses.asdict(grouped_reading) == dataclasses.asdict(one_by_one)
    return grouped_reading


def test_reading_of_a_crash_loop_with_advice_and_empty_fields_equals_line_by_line(entries):
    # Advice lines ("If you are running out of memory, consider ...") and empty status fields
    # (`Exit Code: 0`, next to `Exit Code: 1`) are no error lines: said once per shape, or read
    # line by line when a shape could be either.
    loop = [
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 x",
        "RuntimeError: Engine core initialization failed. If you are running out of memory, "
        "consider decreasing `gpu_memory_utilization` 0.9",
        "    Exit Code: 0",
        "    Exit Code: 1",
        "ERROR 09-03 10:00:00 Xid 79 on GPU 3",
    ]
    text = dense_log(loop, 2000, seed=9)
    reading = same_reading(lambda: TextSource.from_text("loop", text), entries)
    assert reading.matched_lines >= 2000 and reading.error_lines > 2000


def test_reading_of_a_busy_server_file_equals_line_by_line(entries, tmp_path):
    # A file over explain's clean-whole size (read in 4 MB blocks as it is): stats lines
    # crossing the thresholds among access lines, then a crash loop.
    access = '(APIServer pid=1671) INFO:     10.244.3.7:40112 - "POST /v1/chat/completions HTTP/1.1" 200 OK'
    rng = random.Random(2)
    stats = busy_stats(6000)
    lines = []
    for n in range(80000):
        lines.append(stats[n % 6000] if n % 10 == 9 else new_digits(access, rng))
    path = tmp_path / "busy.log"
    path.write_text(
        "\n".join(lines)
        + "\n"
        + dense_log([lines[9], "RuntimeError: CUDA error: out of memory"], 4000),
        encoding="utf-8",
    )
    assert path.stat().st_size > 8 * 1024 * 1024
    reading = same_reading(lambda: TextSource.from_file("busy", path), entries)
    assert reading.hits["queue-saturation"].count > 2000


def test_reading_of_a_crash_loop_file_read_by_shape_first_equals_line_by_line(entries, tmp_path):
    # A crash-loop file over explain's clean-whole size (4 MB blocks, read by shape first) with
    # tail-only warnings and healthy lines among the errors: the same hits, counts, kept lines,
    # salient lines and error-line count as reading each line alone.
    path = tmp_path / "loop.log"
    path.write_text(crash_loop(60000, {6: TAIL_ONLY, 17: HEALTHY}), encoding="utf-8")
    assert path.stat().st_size > 8 * 1024 * 1024
    reading = same_reading(lambda: TextSource.from_file("loop", path), entries)
    assert reading.hits["cuda-oom-runtime"].count == 60000 - 10000 - 2941  # less the others


@pytest.mark.parametrize("log", REAL_VLLM, ids=lambda p: p.parent.name)
def test_reading_of_a_real_vllm_log_equals_line_by_line(entries, log):
    # Each real vLLM capture, 200 copies with digits rewritten, read as a paste.
    text = dense_log(log.read_text(encoding="utf-8").splitlines(), 200, seed=21)
    same_reading(lambda: TextSource.from_text(log.parent.name, text), entries)


def test_adding_lines_in_bulk_equals_adding_them_one_by_one():
    # _Hits.add_lines (a kind's count, first and last lines) against add_line on every line.
    rng = random.Random(1)
    for _ in range(200):
        one, bulk = _Hits(on_error_line=True), _Hits(on_error_line=True)
        line = 0
        for _ in range(rng.randint(1, 4)):
            batch = []
            for _ in range(rng.randint(1, 12)):
                line += rng.randint(1, 3)
                batch.append((line, f"text {line}"))
            for n, t in batch:
                one.add_line(n, t)
            bulk.add_lines(len(batch), batch[:3], batch[-2:])
        assert (one.count, one.first, list(one.last), one.last_line, one.error_lines) == (
            bulk.count,
            bulk.first,
            list(bulk.last),
            bulk.last_line,
            bulk.error_lines,
        )
        assert isinstance(bulk.last, deque)


def test_threads_read_a_crash_loop_by_shape_and_other_blocks_with_the_set(
    explain_scanner, tmp_path
):
    # `--jobs 2` on a loaded server's log that turns into a crash loop: the stats blocks go to
    # the threads' block Sets, the crash loop is read by shape once a retry finds it works;
    # every line as one thread reads it.
    block = 256 * 1024
    stats = busy_stats(400)
    rng = random.Random(6)
    loop = [new_digits(OOM, rng) for _ in range(40000)]
    path = tmp_path / "loaded-then-crashing.log"
    path.write_text("\n".join([*stats * 30, *loop]) + "\n", encoding="utf-8")

    def lines(workers: int) -> tuple[list, int]:
        with shape_reads(explain_scanner) as calls:
            source = TextSource.from_file("log", path)
            items = explain_scanner.scan(source, workers=workers, block_bytes=block, kinds=True)
            out = [
                m for i in items for m in (i.line_matches() if isinstance(i, BlockKinds) else [i])
            ]
        return out, sum(calls)

    one, _ = lines(1)
    two, by_shape = lines(2)
    assert two == one
    assert by_shape > 10
