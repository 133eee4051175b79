"""Match runbook signatures (one-line regexes) against logs, streaming, with line numbers.

Python's `re` is slow on a 100-way alternation, so a scan never runs the regexes over the
whole text. Instead every signature gets a *required literal* (a piece of text any match must
contain, e.g. ``CUDA out of memory`` in ``'CUDA out of memory\\. Tried to allocate'``). Big
blocks of the log are searched for a few short *gates* shared by those literals (``str.find``
/ ``bytes.find`` run at memory speed); only the lines around a gate hit are checked for the
literals, and only the signatures whose literal is on the line run their regex. A signature
without a usable literal is checked on every line. The result is exactly that of calling
`re.search` per line (tests compare the two on every fixture).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import BinaryIO

from llmdoctor.textsource import TextSource

BLOCK_BYTES = 8 * 1024 * 1024
MIN_LITERAL = 3  # shorter literals would make nearly every line a candidate
MAX_EXPANSION = 16  # most strings one regex piece may expand into ([Ee]rror -> 2)
SAMPLE_CHARS = 64 * 1024  # text the cost of each candidate gate is measured on
PLAN_FROM = 2 * 1024 * 1024  # below this much text, every literal is its own gate
PARALLEL_CHUNK = 4 * 1024 * 1024


@dataclass(frozen=True)
class LineMatch:
    """A log line on which one or more entries' signatures fired."""

    line: int
    text: str
    entry_ids: tuple[str, ...]


# --- required literals -----------------------------------------------------------------------


def _char_set(item) -> set[str] | None:
    """The characters of a small positive character class ([Ee], [0-3]); None if not small."""
    from re import _constants as c

    chars: set[str] = set()
    for op, av in item:
        if op is c.LITERAL:
            chars.add(chr(av))
        elif op is c.RANGE and av[1] - av[0] < MAX_EXPANSION:
            chars.update(chr(x) for x in range(av[0], av[1] + 1))
        else:  # NEGATE, CATEGORY (\d \w \s), big ranges
            return None
    return chars if 0 < len(chars) <= MAX_EXPANSION else None


def _times(left: set[str], right: set[str]) -> set[str] | None:
    out = {a + b for a in left for b in right}
    return out if len(out) <= MAX_EXPANSION else None


def _analyze(seq) -> tuple[set[str] | None, list[set[str]]]:
    """(every string `seq` can match if that set is small and finite, else None;
    the runs: sets of strings one of which any match of `seq` contains).
    """
    from re import _constants as c

    runs: list[set[str]] = []
    current: set[str] = {""}
    exact = True

    def close() -> None:
        nonlocal current
        if current and "" not in current:
            runs.append(current)
        current = {""}

    def extend(strings: set[str]) -> None:
        nonlocal current
        nonlocal exact
        joined = _times(current, strings)
        if joined is None:
            exact = False
            close()
            current = set(strings)
        else:
            current = joined

    for op, av in seq:
        if op is c.LITERAL:
            extend({chr(av)})
        elif op is c.IN and (chars := _char_set(av)) is not None:
            extend(chars)
        elif op is c.AT or op in (c.ASSERT, c.ASSERT_NOT):
            continue  # zero-width: the text on both sides stays adjacent
        elif op is c.SUBPATTERN:
            _group, add_flags, _del, sub = av
            if add_flags & c.SRE_FLAG_IGNORECASE:
                close()
                exact = False
                continue
            inner_exact, inner_runs = _analyze(sub)
            if inner_exact is not None:
                extend(inner_exact)
            else:
                close()
                runs.extend(inner_runs)
                exact = False
        elif op is c.BRANCH:
            branches = [_analyze(b) for b in av[1]]
            if all(e is not None for e, _ in branches):
                union = set().union(*(e for e, _ in branches))
                if len(union) <= MAX_EXPANSION:
                    extend(union)
                    continue
            close()
            exact = False
            best = [_best_run(b_runs if e is None else [*b_runs, e]) for e, b_runs in branches]
            if all(b is not None for b in best):
                runs.append(set().union(*best))
        elif op in (c.MAX_REPEAT, c.MIN_REPEAT, getattr(c, "POSSESSIVE_REPEAT", None)):
            low, high, sub = av
            inner_exact, inner_runs = _analyze(sub)
            if inner_exact is not None and low >= 1:
                # the first `low` repetitions are always there, right after what came before
                reps, repeated = 0, {""}
                while reps < min(low, 8):
                    joined = _times(repeated, inner_exact)
                    if joined is None:
                        break
                    reps, repeated = reps + 1, joined
                extend(repeated if reps else inner_exact)
                if not (low == high == reps):
                    exact = False
                    close()
                continue
            exact = False
            close()
            if low >= 1:
                runs.extend(inner_runs)
        else:  # ANY, NOT_LITERAL, CATEGORY, big IN, GROUPREF ...: breaks the text
            close()
            exact = False
    if exact:
        return current, [*runs, current] if "" not in current else runs
    close()
    return None, runs


def _best_run(runs: list[set[str]]) -> set[str] | None:
    """The run most likely to be rare: longest shortest-string, then fewest alternatives."""
    usable = [r for r in runs if r and min(len(s) for s in r) >= MIN_LITERAL]
    if not usable:
        return None
    return max(usable, key=lambda r: (min(len(s) for s in r), -len(r)))


def required_literals(pattern: str | re.Pattern) -> tuple[str, ...] | None:
    """Strings one of which every match of `pattern` contains; None when there is no such
    usable set (too short, case-insensitive, or only character classes).

    >>> required_literals(r'NCCL error.*unhandled (system|cuda) error')
    ('NCCL error',)
    """
    from re import _parser

    source = pattern.pattern if isinstance(pattern, re.Pattern) else pattern
    if not isinstance(source, str):
        return None
    try:
        parsed = _parser.parse(source)
    except (re.error, RecursionError):
        return None
    flags = parsed.state.flags
    if isinstance(pattern, re.Pattern):
        flags |= pattern.flags
    if flags & (re.IGNORECASE | re.VERBOSE):
        return None
    exact, runs = _analyze(parsed)
    best = _best_run(runs if exact is None else [*runs, exact])
    if best is None or any("\ufffd" in s or "\n" in s for s in best):
        return None
    return tuple(sorted(best))


# --- gate plan ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Gate:
    """A short string searched for in whole blocks, and the literals that contain it.

    A literal contains the gate at offset k; at a gate hit p the literal is checked with
    `startswith(literal, p - k)`. To keep hits cheap the literals are looked up by the two
    characters after the gate (`follow`), else the two before it (`precede`), else always.
    """

    text: str | bytes
    follow: dict  # two chars after the gate -> [(literal, k, signature indexes)]
    precede: dict  # two chars before the gate -> [(literal, k, signature indexes)]
    always: tuple  # [(literal, k, signature indexes)]

    @classmethod
    def build(cls, gate: str, covered: list[tuple[str, tuple[int, ...]]], as_bytes: bool):
        enc = (lambda t: t.encode()) if as_bytes else (lambda t: t)
        follow: dict = {}
        precede: dict = {}
        always = []
        gate_e = enc(gate)
        for literal, indexes in covered:
            lit_e = enc(literal)
            k = len(enc(literal[: literal.find(gate)]))
            after = lit_e[k + len(gate_e) : k + len(gate_e) + 2]
            before = lit_e[max(k - 2, 0) : k]
            item = (lit_e, k, indexes)
            if len(after) == 2:
                follow.setdefault(after, []).append(item)
            elif len(before) == 2:
                precede.setdefault(before, []).append(item)
            else:
                always.append(item)
        return cls(enc(gate), follow, precede, tuple(always))


HIT_COST = 400.0  # nanoseconds a gate hit costs beyond the find loop (measured: 90-800)
WINDOW = 16  # long literals are also tried as gates by their first and last 16 characters
MAX_HIT_RATE = 1 / 256  # a shared gate found more often than this per character is not tried


def plan_gates(literals: Iterable[str], sample: str) -> list[tuple[str, list[str]]]:
    """Pick a few gates that cover every literal and are cheap to search for in text like
    `sample`.

    Greedy weighted set cover. Candidates: single characters and substrings shared by several
    literals (the longest per set of literals covered), each literal and its first/last 16
    characters. A candidate's cost is measured on the sample: the time of a find() loop over
    it (a one-character find is a memchr; short needles and needles ending in a common
    character skip less) plus the hits it would bring. Returns [(gate, [literals covered])].
    """
    import time

    strings = sorted(set(literals))
    covers: dict[str, set[str]] = {}
    for s in strings:
        for length in range(1, min(len(s), 12) + 1):
            for i in range(len(s) - length + 1):
                covers.setdefault(s[i : i + length], set()).add(s)
    longest: dict[frozenset, str] = {}
    for gate, covered in covers.items():
        key = frozenset(covered)
        if len(gate) == 1:
            longest[key | {gate}] = gate  # single characters are always tried
        elif len(covered) >= 2 and (key not in longest or len(gate) > len(longest[key])):
            longest[key] = gate
    candidates = {gate: covers[gate] for gate in longest.values()}
    for s in strings:
        # the literal, its ends, and the same without edge spaces (a needle ending in a space
        # skips little: ' 504 ' is slower to find than '504')
        windows = {s, s[:WINDOW], s[-WINDOW:]}
        for gate in {*windows, *(w.strip() for w in windows)}:
            if len(gate) >= MIN_LITERAL and gate not in candidates:
                candidates[gate] = {t for t in strings if gate in t}
    size = max(len(sample), 1)
    find = sample.find
    cost: dict[str, float] = {}
    for gate in list(candidates):
        hits = sample.count(gate)
        if hits > size * MAX_HIT_RATE and gate not in strings:
            del candidates[gate]
            continue
        started = time.perf_counter()
        pos = find(gate)
        while pos >= 0:
            pos = find(gate, pos + 1)
        elapsed = time.perf_counter() - started
        cost[gate] = elapsed * 1e9 / size + HIT_COST * hits / size + 1e-3
    uncovered = set(strings)
    chosen: list[tuple[str, list[str]]] = []
    while uncovered:
        gate = max(candidates, key=lambda g: (len(candidates[g] & uncovered) / cost[g], len(g)))
        got = candidates.pop(gate) & uncovered
        chosen.append((gate, sorted(got)))
        uncovered -= got
    return chosen


# --- the signature set -------------------------------------------------------------------------


class SignatureSet:
    """The compiled signatures of a set of runbook entries."""

    def __init__(self, entries: Iterable):
        self.patterns: list[tuple[str, re.Pattern]] = []
        self.invalid: list[tuple[str, str, str]] = []  # (entry id, signature, error)
        for entry in entries:
            for sig in entry.signatures:
                try:
                    compiled = re.compile(sig)
                except (re.error, OverflowError, RecursionError) as exc:  # a{4294967296}
                    self.invalid.append((entry.id, sig, str(exc)))
                    continue
                if compiled.search(""):
                    self.invalid.append((entry.id, sig, "matches an empty line"))
                    continue
                self.patterns.append((entry.id, compiled))
        self._literals: dict[str, list[int]] = {}  # literal -> signature indexes
        self.unfiltered: list[int] = []  # signatures checked on every line
        for index, (_id, pattern) in enumerate(self.patterns):
            found = required_literals(pattern)
            if found is None:
                self.unfiltered.append(index)
            else:
                for literal in found:
                    self._literals.setdefault(literal, []).append(index)

    def __bool__(self) -> bool:
        return bool(self.patterns)

    def __getstate__(self):
        return {"sources": [(i, p.pattern) for i, p in self.patterns], "invalid": self.invalid}

    def __setstate__(self, state):
        entries = [_Sig(i, [p]) for i, p in state["sources"]]
        self.__init__(entries)
        self.invalid = state["invalid"]

    def match_line(self, text: str) -> tuple[str, ...]:
        """Ids of the entries whose signatures match this one line, in registration order."""
        ids: list[str] = []
        for entry_id, pattern in self.patterns:
            if entry_id not in ids and pattern.search(text):
                ids.append(entry_id)
        return tuple(ids)

    def _ids(self, text: str, indexes: Iterable[int]) -> tuple[str, ...]:
        ids: list[str] = []
        for index in sorted(indexes):
            entry_id, pattern = self.patterns[index]
            if entry_id not in ids and pattern.search(text):
                ids.append(entry_id)
        return tuple(ids)

    def _gates(self, sample: str, as_bytes: bool, size: int) -> list[_Gate]:
        """Gates for a text of `size` characters/bytes: planned on a sample of it when it is
        big enough to repay the planning, else one per literal.
        """
        if size >= PLAN_FROM:
            plan = plan_gates(self._literals, sample)
        else:
            plan = [(literal, [literal]) for literal in sorted(self._literals)]
        return [
            _Gate.build(gate, [(lit, tuple(self._literals[lit])) for lit in covered], as_bytes)
            for gate, covered in plan
        ]

    def _scan_block(self, block, first_line: int, gates: list[_Gate]) -> list[LineMatch]:
        """Every matching line of a block of whole lines (str or bytes), 1-based numbers."""
        as_bytes = isinstance(block, bytes)
        nl = b"\n" if as_bytes else "\n"
        candidates: dict[int, set[int]] = {}
        find, rfind, startswith = block.find, block.rfind, block.startswith
        for gate in gates:
            text, glen = gate.text, len(gate.text)
            follow, precede, always = gate.follow, gate.precede, gate.always
            pos = find(text)
            while pos >= 0:
                after = pos + glen
                found = follow.get(block[after : after + 2], ())
                if precede and pos >= 2:
                    found = [*found, *precede.get(block[pos - 2 : pos], ())]
                for literal, k, indexes in (*found, *always) if always else found:
                    at = pos - k
                    if at >= 0 and startswith(literal, at):
                        start = rfind(nl, 0, at) + 1
                        if start in candidates:
                            candidates[start].update(indexes)
                        else:
                            candidates[start] = set(indexes)
                pos = find(text, pos + 1)
        if self.unfiltered:
            start = 0
            size = len(block)
            while start < size:
                end = find(nl, start)
                if end < 0:
                    end = size
                candidates.setdefault(start, set()).update(self.unfiltered)
                start = end + 1
        found_lines: list[LineMatch] = []
        line_no, counted_to = first_line, 0
        for start in sorted(candidates):
            line_no += block.count(nl, counted_to, start)
            counted_to = start
            end = find(nl, start)
            raw = block[start:end] if end >= 0 else block[start:]
            text = raw.decode("utf-8", errors="replace") if as_bytes else raw
            text = text.rstrip("\r")
            ids = self._ids(text, candidates[start])
            if ids:
                found_lines.append(LineMatch(line_no, text, ids))
        return found_lines

    def scan_text(self, text: str, first_line: int = 1) -> Iterator[LineMatch]:
        """Every matching line of a block of text (complete lines), with 1-based numbers."""
        if not self.patterns or not text:
            return
        gates = self._gates(text[:SAMPLE_CHARS], False, len(text))
        yield from self._scan_block(text, first_line, gates)

    def scan_stream(self, stream: BinaryIO) -> Iterator[LineMatch]:
        """Every matching line of a binary stream (a file, a pipe, stdin), read in blocks."""
        return self._scan_stream(stream, None)

    def _scan_stream(self, stream: BinaryIO, gates: list[_Gate] | None) -> Iterator[LineMatch]:
        if not self.patterns:
            return
        line_no = 1
        for block in _stream_blocks(stream):
            if gates is None:
                sample = block[:SAMPLE_CHARS].decode("utf-8", errors="replace")
                gates = self._gates(sample, True, len(block))
            yield from self._scan_block(block, line_no, gates)
            line_no += _newlines(block)

    def scan(
        self, source: TextSource, workers: int = 1, chunk_bytes: int = PARALLEL_CHUNK
    ) -> Iterator[LineMatch]:
        """Stream a log in blocks of whole lines; memory stays flat whatever the size.

        With `workers` > 1, a file of at least two chunks is scanned `chunk_bytes` at a time in
        that many forked processes (only when no other thread runs; else in this one); matches
        still come in file order with the same line numbers.
        """
        if not self.patterns:
            return
        if source.text is not None:
            yield from self.scan_text(source.text)
            return
        assert source.path is not None
        path = str(source.path)
        size = os.path.getsize(path)
        with open(path, "rb") as fh:
            gates = self._gates(_file_sample(fh, size), True, size)
            if workers > 1 and size >= 2 * chunk_bytes and _can_fork():
                yield from self._scan_parallel(path, gates, workers, chunk_bytes)
                return
            fh.seek(0)
            yield from self._scan_stream(fh, gates)

    def _scan_parallel(
        self, path: str, gates: list[_Gate], workers: int, chunk_bytes: int
    ) -> Iterator[LineMatch]:
        import multiprocessing

        size = os.path.getsize(path)
        jobs = [(path, a, min(a + chunk_bytes, size)) for a in range(0, size, chunk_bytes)]
        context = multiprocessing.get_context("fork")
        with context.Pool(workers, initializer=_worker_init, initargs=(self, gates)) as pool:
            line_no = 1
            for newlines, matches in pool.imap(_worker_scan, jobs):
                for m in matches:
                    yield LineMatch(m.line + line_no - 1, m.text, m.entry_ids)
                line_no += newlines


def _can_fork() -> bool:
    """Worker processes are forked (no re-import of __main__), so only from a process with
    no other threads running, where forking is safe.
    """
    import multiprocessing
    import threading

    return "fork" in multiprocessing.get_all_start_methods() and threading.active_count() == 1


def literal_weight(pattern: str | re.Pattern) -> int:
    """How much fixed text a signature pins down (sum of its required literals' lengths): a
    rough measure of how specific it is.
    """
    from re import _parser

    source = pattern.pattern if isinstance(pattern, re.Pattern) else pattern
    try:
        exact, runs = _analyze(_parser.parse(source))
    except (re.error, RecursionError, TypeError):
        return 0
    if exact is not None:
        runs = [*runs, exact]
    return sum(min(len(s) for s in run) for run in runs if run)


@dataclass(frozen=True)
class _Sig:
    id: str
    signatures: list[str]


def _file_sample(fh: BinaryIO, size: int, parts: int = 4) -> str:
    """SAMPLE_CHARS of whole lines taken from `parts` places spread over a file: its first
    kilobytes are start-up lines, unlike the bulk of a long log.
    """
    each = SAMPLE_CHARS // parts
    pieces = []
    for i in range(parts):
        fh.seek(size * i // parts)
        piece = fh.read(each)
        if i:
            piece = piece[piece.find(b"\n") + 1 :]
        pieces.append(piece[: piece.rfind(b"\n") + 1] or piece)
    return b"".join(pieces).decode("utf-8", errors="replace")


def _stream_blocks(stream: BinaryIO) -> Iterator[bytes]:
    """Blocks of whole lines (each ending in a newline, except perhaps the last) of a stream."""
    carry = b""
    while True:
        chunk = stream.read(BLOCK_BYTES)
        if not chunk:
            if carry:
                yield carry
            return
        block = carry + chunk
        cut = block.rfind(b"\n")
        if cut < 0:
            carry = block
            continue
        carry = block[cut + 1 :]
        yield block[: cut + 1]


def _blocks(path: str, start: int, stop: int | None) -> Iterator[bytes]:
    """Blocks of whole lines (each ending in a newline, except perhaps the file's last line)
    holding the lines that *start* in the byte range [start, stop) of a file.
    """
    with open(path, "rb") as fh:
        if start > 0:
            fh.seek(start - 1)
            if fh.read(1) != b"\n":
                fh.readline()  # the line began before `start`: it belongs to the previous range
        pos = fh.tell()
        carry = b""
        while True:
            want = BLOCK_BYTES if stop is None else min(BLOCK_BYTES, max(stop - pos, 0))
            chunk = fh.read(want) if want else b""
            pos += len(chunk)
            if not chunk:
                if stop is not None and carry:
                    carry += fh.readline()  # finish the line that started inside the range
                if carry:
                    yield carry
                return
            block = carry + chunk
            cut = block.rfind(b"\n")
            if cut < 0:
                carry = block
                continue
            carry = block[cut + 1 :]
            yield block[: cut + 1]


_WORKER: tuple[SignatureSet, list[_Gate]] | None = None


def _worker_init(signatures: SignatureSet, gates: list[_Gate]) -> None:
    global _WORKER
    _WORKER = (signatures, gates)


def _newlines(block: bytes) -> int:
    """Newlines in a block: `bytes.replace` runs at memchr speed, `bytes.count` is a byte loop."""
    return len(block) - len(block.replace(b"\n", b""))


def _worker_scan(job: tuple[str, int, int]) -> tuple[int, list[LineMatch]]:
    """Scan the lines starting in one byte range; (newlines consumed, matches from line 1)."""
    assert _WORKER is not None
    signatures, gates = _WORKER
    path, start, stop = job
    found: list[LineMatch] = []
    line_no = 1
    for block in _blocks(path, start, stop):
        found += signatures._scan_block(block, line_no, gates)
        line_no += _newlines(block)
    return line_no - 1, found
