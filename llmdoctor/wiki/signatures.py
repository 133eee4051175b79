"""Match runbook signatures (one-line regexes) against logs, streaming, with line numbers.

The one log-scanning engine of llmdoctor (explain, the log-signatures check, the Xid scan).
Signatures are matched with RE2 (google-re2), whose automata run in time linear in the text
whatever a team writes: a nested quantifier such as ``([A-Za-z]+ ?)+ failed$`` cannot backtrack.

A scan reads the log in blocks of whole lines. Each block goes once through an RE2 `Set` of every
signature (compiled with ``(?m)`` so ``^``/``$`` still mean a line's ends): almost every block of
a healthy log comes back empty at memory speed. For a block with hits, each signature that hit is
searched in the block to find the lines, and each such line is checked alone against the per-line
`Set`, which gives exactly the answer of matching every line on its own.

With `kinds=True` (explain), a dense block comes back grouped (`BlockKinds`): its lines are keyed
by their shape, every ASCII digit written 0; a digit-blind signature (llmdoctor.wiki.digit_blind)
is matched once per shape, any other on each line whose shape its digit-blind cover matches. A
crash loop of a million lines whose numbers vary then costs a few matches per block, with the
exact answer of matching each line alone.

An entry's `hints` are scanned like its signatures but flagged weak (`SignatureSet.weak`), as is
a signature that is one short word (`^Killed$`): lines that point at the entry without proving it.

Signatures that RE2 cannot compile (backreferences, lookarounds) are not dropped silently: they
are kept in `SignatureSet.invalid` with their entry and file:line, for the caller to report.
"""

from __future__ import annotations

import contextlib
import heapq
import io
import os
import re
import stat
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from itertools import compress, islice
from pathlib import Path
from typing import BinaryIO

from llmdoctor.engine.textsource import UTF8_BOM, TextSource
from llmdoctor.wiki.derived_cache import kept_values
from llmdoctor.wiki.digit_blind import DIGITS_TO_ZERO, digit_blind, digit_blind_cover
from llmdoctor.wiki.re2_patterns import re2_module, re2_options
from llmdoctor.wiki.signature_text import plain_text, required_texts

BLOCK_BYTES = 4 * 1024 * 1024
LINE_END_WINDOW = 64 * 1024  # read past a block to find where its last line ends
GROWN_RETRIES = 3  # reads of a file's unended last line while a writer appends to it
# A signature that is one short word (`^Killed$`, `Error`) fires on lines any program prints (the
# shell's `Killed` follows every SIGKILL, a user's `kill -9` too): weak evidence, like a hint.
WEAK_SIGNATURE = re.compile(r"\^?[A-Za-z]{1,7}\$?")


@dataclass(frozen=True)
class LineMatch:
    """A log line on which one or more entries' signatures fired."""

    line: int
    text: str
    entry_ids: tuple[str, ...]
    before: tuple[str, ...] = ()  # the lines just before it, when the set keeps them
    # indexes (into SignatureSet.patterns) of the signatures that fired, ascending: a caller
    # weighs them without matching the line again
    fired: tuple[int, ...] = field(default=(), compare=False)


@dataclass
class LineKind:
    """Lines of one block that read the same but for their digits and on which the same
    signatures fired (`scan(..., kinds=True)`): how many; the first and last few of them
    come from BlockKinds.first_of and last_of, numbered only when asked for.
    """

    fired: tuple[int, ...]
    entry_ids: tuple[str, ...]
    count: int
    sample: str  # the lines' text with every digit written 0
    id: int = 0  # for BlockKinds.first_of and last_of


@dataclass
class BlockKinds:
    """The matching lines of a dense block, grouped: `kinds`, plus `singles`, the lines on
    which only tail entries' signatures fired (as the line-by-line scan finds them: the last
    ones). `line_matches()` gives every line one by one, exactly as the line-by-line scan does.
    """

    kinds: list[LineKind]
    singles: list[LineMatch]
    line_matches: Callable[[], list[LineMatch]]
    # the first `keep` lines, in order, of the kinds with these ids: (line number, text)
    first_of: Callable[[set[int], int], list[tuple[int, str]]]
    # ... and the last `keep` of them, in order
    last_of: Callable[[set[int], int], list[tuple[int, str]]]


@dataclass
class ScanStats:
    """What a scan read: bytes and lines (a last line without a newline counts), and where each
    block began (its first line, its byte offset): a second reading of part of a file starts
    at the block that holds its line instead of counting lines from the start."""

    bytes: int = 0
    lines: int = 0
    blocks: list[tuple[int, int]] = field(default_factory=list)


@dataclass(frozen=True)
class InvalidSignature:
    """A signature that cannot be used, and where it is written."""

    entry_id: str
    signature: str
    error: str
    path: str = ""
    line: int = 0
    kind: str = "signature"  # or "hint"

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}: " if self.path else f"entry {self.entry_id}: "
        return f"{where}{self.kind} {self.signature!r} ignored: {self.error}"


def compile_problem(signature: str) -> str | None:
    """Why RE2 cannot use this signature (does not compile, or matches an empty line), or None."""
    re2 = re2_module()
    try:
        pattern = re2.compile(signature, re2_options())
    except re2.error as exc:
        return f"RE2 cannot compile it ({exc})"
    except (TypeError, ValueError) as exc:
        return f"it is not a regex ({exc})"
    if pattern.search("") is not None:
        return "it matches the empty string, so it would fire on every line"
    return None


def compile_problems(signatures: list) -> list[str | None]:
    """`compile_problem` of each signature (or "it is not text"), the usable ones checked
    together: one RE2 Set takes them all and says which match the empty string, instead of a
    regex compiled for each (most of explain's start-up otherwise).
    """
    re2 = re2_module()
    problems: list[str | None] = [None] * len(signatures)
    together = re2.Set.SearchSet(re2_options())
    added = []
    for k, sig in enumerate(signatures):
        if not isinstance(sig, str):
            problems[k] = "it is not text"
            continue
        try:
            together.Add(sig)
        except (re2.error, TypeError, ValueError):
            problems[k] = compile_problem(sig)
            continue
        added.append(k)
    if added:
        together.Compile()
        for j in together.Match(b"") or ():
            problems[added[j]] = compile_problem(signatures[added[j]])
    return problems


def _work_out_facts(patterns: list) -> list[tuple]:
    """(why RE2 cannot use it or None, digit-blind, plain text or "", literal_weight) of each
    pattern: what llmdoctor.wiki.derived_cache keeps of it."""
    out: list[tuple] = []
    for sig, why in zip(patterns, compile_problems(patterns), strict=True):
        if why:
            out.append((why, False, "", 0))
        else:
            out.append((None, digit_blind(sig), plain_text(sig) or "", literal_weight(sig)))
    return out


def _is_facts(value: object) -> bool:
    """Whether a value read back has the shape `_work_out_facts` gives."""
    return (
        isinstance(value, tuple)
        and len(value) == 4
        and (value[0] is None or isinstance(value[0], str))
        and isinstance(value[1], bool)
        and isinstance(value[2], str)
        and isinstance(value[3], int)
    )


def signature_line(path: str | Path, signature: str) -> int:
    """The line of an entry file on which a signature is written (0 when it cannot be told)."""
    try:
        lines = Path(path).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return 0
    quoted = (f"'{signature}'", f'"{signature}"', signature)
    for needle in quoted:
        for number, line in enumerate(lines, 1):
            if needle in line:
                return number
    return 0


TAIL_CHUNK = 64 * 1024
TAIL_PASSED_OVER = 64  # tail lines passed over as no error in one block (each is decoded)
# A block with this many candidate lines in its first DENSE_PROBE bytes is dense: with
# `kinds=True` its lines are grouped by shape (LineKind) instead of being yielded one by one.
DENSE_PROBE = 64 * 1024
DENSE_LINES = 24
# ... and when one line in this many of the probe is a candidate, every line of the block is
# keyed (one split); below that, only the candidate lines found by the searches are
WHOLE_BLOCK_SHARE = 3
MIN_FIND_TEXT = 6  # a required text this long is looked for with bytes.find
MAX_CACHED = 4096  # combined searches and fired-set lookups kept per SignatureSet
MAX_FIND_LITERALS = 4
# A block whose probe has at most one shape (digits written 0) per this many lines is
# repetitive: read by shape first (SignatureSet._scan_shapes), without the block-wide Set
REPEATS = 8
# a block's lines counted by shape with one bytes.count each while there are at most this many
# (~0.4 ms a shape on a 4 MiB block; keying every line costs ~5 ms)
MAX_TILED_SHAPES = 8
TILE_WINDOW = 256 * 1024
RARE_SAMPLE = 64 * 1024
RARE_RATE = 2000  # a byte seen less than once in this many is rare enough to search for alone


def _anchor(literal: bytes, sample: bytes) -> tuple[bytes, int]:
    """(what to find, its offset in the literal): the literal's rarest byte in `sample` when
    it is rare enough (a one-byte find runs at memchr speed), else the literal itself.
    """
    counts = {c: sample.count(bytes([c])) for c in set(literal)}
    k = min(range(len(literal)), key=lambda i: counts[literal[i]])
    if counts[literal[k]] * RARE_RATE > max(len(sample), 1):
        return literal, 0
    return literal[k : k + 1], k


class SignatureSet:
    """The compiled signatures of a set of runbook entries (anything with `.id`, `.signatures`).

    Entries named in `tail_ids` are only looked for among the last `tail_keep` matching lines of
    each block (searched backwards in growing chunks): for lines of which only the last few are
    kept (explain's salient lines), a log whose every line matches costs no more than one with
    a few. A line `tail_uncounted` says yes to (explain: one that says it is no error, `0
    failed`) is passed on but not counted, up to TAIL_PASSED_OVER in a block, so such lines
    cannot crowd out the last real ones (`tail_cut`: a block had more).
    """

    def __init__(
        self,
        entries: Iterable,
        tail_ids: Iterable[str] = (),
        tail_keep: int = 0,
        before_lines: int = 0,
        tail_uncounted: Callable[[bytes], bool] | None = None,
    ):
        re2 = re2_module()
        self.patterns: list[tuple[str, str]] = []  # (entry id, signature), in set index order
        self.weak: list[bool] = []  # per pattern: a hint or a one-word signature (weak evidence)
        self.invalid: list[InvalidSignature] = []
        written = []  # (entry, signature, is a hint)
        for entry in entries:
            hints = list(getattr(entry, "hints", None) or ())
            written += [
                (entry, sig, n >= len(entry.signatures))
                for n, sig in enumerate([*entry.signatures, *hints])
            ]
        facts = kept_values(
            "signature-facts",
            [sig for _, sig, _ in written],
            _work_out_facts,
            [
                __file__,
                *(
                    sys.modules[f.__module__].__file__
                    for f in (digit_blind, plain_text, re2_options)
                ),
                getattr(re2, "__file__", None),
            ],
            _is_facts,
        )
        self._blind: list[bool] = []  # per pattern: digit-blind (llmdoctor.wiki.digit_blind)
        self.weights: list[int] = []  # per pattern: its literal_weight
        literals: list[str | None] = []
        for (entry, sig, is_hint), (why, blind, plain, weight) in zip(written, facts, strict=True):
            if why:
                path = str(getattr(entry, "path", "") or "")
                line = signature_line(path, sig) if path else 0
                kind = "hint" if is_hint else "signature"
                self.invalid.append(InvalidSignature(entry.id, str(sig), why, path, line, kind))
                continue
            self.patterns.append((entry.id, sig))
            self.weak.append(is_hint or bool(WEAK_SIGNATURE.fullmatch(sig)))
            self._blind.append(blind)
            self.weights.append(weight)
            literals.append(plain or None)
        self._line_set = self._compiled_block_set = self._tail_set = None
        self._searchers: dict[int, object] = {}
        # per set of signatures that hit a block: one regex of them all (a dense block's lines
        # are then found with one search each, not one per signature); per set of fired
        # signatures: the entry ids (a repeated line is looked up, not worked out again)
        self._combined: dict[frozenset[int], list] = {}
        self._ids_of: dict[tuple[int, ...], tuple[str, ...]] = {}
        tail = set(tail_ids) if tail_keep > 0 else set()
        self._tail = frozenset(
            i for i, (entry_id, _) in enumerate(self.patterns) if entry_id in tail
        )
        self._tail_order = sorted(self._tail)  # tail Set index -> pattern index
        # digit-blind signatures (llmdoctor.wiki.digit_blind) match a line's shape (its digits
        # written 0) exactly as they match the line; the others are matched on each line
        self._exact_all = tuple(i for i, blind in enumerate(self._blind) if not blind)
        # signatures that may match a line alone but not the block that holds it (whole-text
        # anchors, inline flags): always matched on the lines of a dense block
        self._unfaithful = frozenset(
            i for i, (_, sig) in enumerate(self.patterns) if _UNFAITHFUL.search(sig)
        )
        self._exact_sets: dict[tuple[int, ...], tuple[Callable, Callable]] = {}
        # per shape: what the signatures say of every line of that shape (_shape_reading)
        self._readings: dict[bytes, tuple[tuple[int, ...], tuple[int, ...]]] = {}
        self._finders_of: dict[frozenset[int], tuple[list[bytes], list]] = {}
        self._held_keys: list[bytes] = []
        self._known_shapes: set[bytes] = set()  # the shapes of the last block read by shape
        self.tail_keep = tail_keep
        self._tail_uncounted = tail_uncounted
        # a block's tail search stopped passing over such lines (TAIL_PASSED_OVER of them): lines
        # above them in that block may have been left unread
        self.tail_cut = False
        self.before_lines = before_lines  # each match carries this many lines before it
        if self.patterns:
            self._line_set = _compiled_set(s for _, s in self.patterns)
            self._set_match = _raw_set_match(self._line_set)
        if self._tail:
            self._tail_set = _compiled_set(f"(?m){self.patterns[i][1]}" for i in self._tail_order)
        # a few plain strings (the Xid scan): bytes.find beats any automaton on them
        self._literals: list[bytes] | None = None
        self._anchors: list[tuple[bytes, int]] | None = None  # chosen on the first block
        if (
            self.patterns
            and len(literals) <= MAX_FIND_LITERALS
            and None not in literals
            and not self._tail
        ):
            self._literals = [lit.encode() for lit in literals if lit is not None]
        self._re2 = re2

    def _block_set(self):
        """The Set of every signature over whole blocks (multi-line), compiled when a block
        first needs it: a crash loop read by shape never does."""
        if self._compiled_block_set is None:
            self._compiled_block_set = _compiled_set(f"(?m){s}" for _, s in self.patterns)
        return self._compiled_block_set

    def __bool__(self) -> bool:
        return bool(self.patterns)

    # --- one line ----------------------------------------------------------------------------

    def matching(self, text: str | bytes) -> list[int]:
        """Indexes (into `patterns`) of the signatures that match this one line, ascending."""
        if self._line_set is None:
            return []
        if isinstance(text, str):
            text = text.encode("utf-8", errors="surrogateescape")
        return sorted(self._set_match(text))

    def strong_ids(self, fired: Iterable[int]) -> set[str]:
        """Ids of the entries of which a signature other than a weak one is among `fired`."""
        return {self.patterns[i][0] for i in fired if not self.weak[i]}

    def match_line(self, text: str | bytes) -> tuple[str, ...]:
        """Ids of the entries whose signatures match this one line, in registration order."""
        return self._entry_ids(tuple(self.matching(text)))

    def _entry_ids(self, fired: tuple[int, ...]) -> tuple[str, ...]:
        ids = self._ids_of.get(fired)
        if ids is None:
            seen: list[str] = []
            for index in fired:
                entry_id = self.patterns[index][0]
                if entry_id not in seen:
                    seen.append(entry_id)
            ids = tuple(seen)
            if len(self._ids_of) < MAX_CACHED:
                self._ids_of[fired] = ids
        return ids

    # --- blocks ------------------------------------------------------------------------------

    def _searcher(self, index: int):
        found = self._searchers.get(index)
        if found is None:
            found = _raw_search(self._re2.compile(f"(?m){self.patterns[index][1]}", re2_options()))
            self._searchers[index] = found
        return found

    def _combined_searchers(self, indexes: frozenset[int]) -> list:
        """Searches that together find any of these signatures: one alternation of them all
        (still linear time), or one each when RE2 will not build the alternation.
        """
        found = self._combined.get(indexes)
        if found is None:
            found = [self._searcher(i) for i in sorted(indexes)]
            if len(indexes) > 1:
                either = "|".join(f"(?:{self.patterns[i][1]})" for i in sorted(indexes))
                with contextlib.suppress(self._re2.error):  # then one search each
                    found = [_raw_search(self._re2.compile(f"(?m){either}", re2_options()))]
            if len(self._combined) < MAX_CACHED:
                self._combined[indexes] = found
        return found

    def _finders(self, indexes: frozenset[int]) -> tuple[list[bytes], list]:
        """How to find the lines these signatures may match: a text each needs (its longest
        required text, MIN_FIND_TEXT characters or more), and searches for those without one.
        """
        found = self._finders_of.get(indexes)
        if found is None:
            literals: set[bytes] = set()
            rest = []
            for i in sorted(indexes):
                texts = [t for t in required_texts(self.patterns[i][1]) if "\n" not in t]
                longest = max(texts, key=len, default="")
                if len(longest) >= MIN_FIND_TEXT:
                    literals.add(longest.encode("utf-8"))
                else:
                    rest.append(i)
            searchers = self._combined_searchers(frozenset(rest)) if rest else []
            found = (sorted(literals), searchers)
            if len(self._finders_of) < MAX_CACHED:
                self._finders_of[indexes] = found
        return found

    def _scan_block(
        self,
        block: bytes,
        first_line: int,
        previous: tuple[str, ...] = (),
        hit: list[int] | None = None,
        kinds: bool = False,
    ) -> tuple[list, int | None]:
        """Every matching line of a block of whole lines, with 1-based numbers, and the block's
        newlines when they were counted on the way (None: not counted); `previous` are the last
        lines of the block before (for `before_lines`), `hit` the block Set's answer when it is
        known. With `kinds`, a dense block comes back as one BlockKinds.
        """
        assert self.patterns
        if self._literals is not None:
            return self._scan_literals(block, first_line, previous)
        if hit is None:
            hit = self._block_set().Match(block)
        if not hit:
            return [], None
        starts: set[int] = set()
        tail_found: set[int] = set()
        plain = frozenset(index for index in hit if index not in self._tail)
        searchers = self._combined_searchers(plain) if plain else []
        done = 0
        if kinds and searchers and not self.before_lines and b"\r" not in block:
            # candidates: the lines holding a text each signature needs (found at memchr
            # speed), or where its search matches; a superset, verified when grouped
            literals, searchers = self._finders(plain)
            done = block.find(b"\n", DENSE_PROBE) + 1 or len(block)
            for literal in literals:
                _literal_starts(block, literal, 0, done, starts)
            for search in searchers:
                self._line_starts(search, block, 0, done, starts)
        if self._tail and any(index in self._tail for index in hit):
            self._tail_starts(block, tail_found)
        grouped = len(starts) >= DENSE_LINES
        if grouped and len(starts) * WHOLE_BLOCK_SHARE >= block.count(b"\n", 0, done):
            return self._scan_dense(block, first_line, frozenset(hit), tail_found)
        if done and done < len(block):
            for literal in literals:
                _literal_starts(block, literal, done, len(block), starts)
        for search in searchers if done < len(block) else ():
            self._line_starts(search, block, done, len(block), starts)
        if grouped:
            return self._scan_candidates(block, first_line, frozenset(hit), starts, tail_found)
        return self._verified(block, first_line, starts | tail_found, previous, tail_found)

    def _scan_literals(
        self, block: bytes, first_line: int, previous: tuple[str, ...]
    ) -> tuple[list[LineMatch], int | None]:
        """_scan_block for a set of plain strings: candidate lines by bytes.find."""
        assert self._literals is not None
        starts: set[int] = set()
        find, rfind, startswith = block.find, block.rfind, block.startswith
        if self._anchors is None:
            self._anchors = [_anchor(literal, block[:RARE_SAMPLE]) for literal in self._literals]
        for literal, (anchor, k) in zip(self._literals, self._anchors, strict=True):
            pos = find(anchor)
            while pos >= 0:
                if pos >= k and startswith(literal, pos - k):
                    starts.add(rfind(b"\n", 0, pos) + 1)
                pos = find(anchor, pos + 1)
        return self._verified(block, first_line, starts, previous, set()) if starts else ([], None)

    def _verified(
        self,
        block: bytes,
        first_line: int,
        starts: set[int],
        previous: tuple[str, ...],
        tail_found: set[int],
    ) -> tuple[list[LineMatch], int]:
        """The candidate lines (by start offset) on which a signature really matches, and the
        block's newlines (counted on the way). A line on which only tail entries' signatures
        fired counts only when the tail search found it (`tail_found`), never because another
        signature's block-wide match began on it (across a newline).
        """
        tail_only = self._tail.issuperset
        found: list[LineMatch] = []
        line_no, counted_to = first_line, 0
        for start in sorted(starts):
            line_no += block.count(b"\n", counted_to, start)
            counted_to = start
            end = block.find(b"\n", start)
            raw = block[start:end] if end >= 0 else block[start:]
            if raw.endswith(b"\r"):
                raw = raw[:-1]
            fired = tuple(sorted(self._set_match(raw)))
            if fired and (start in tail_found or not tail_only(fired)):
                text = raw.decode("utf-8", errors="replace")
                before = self._lines_before(block, start, previous) if self.before_lines else ()
                found.append(LineMatch(line_no, text, self._entry_ids(fired), before, fired))
        line_no += block.count(b"\n", counted_to)
        return found, line_no - first_line

    def _scan_dense(
        self, block: bytes, first_line: int, hit: frozenset[int], tail_found: set[int]
    ) -> tuple[list, int]:
        """A dense block's lines grouped (`_grouped`), every line of it keyed at once; and the
        block's newlines.
        """
        raw = block.split(b"\n")
        keys = block.translate(DIGITS_TO_ZERO).split(b"\n")
        newlines = len(raw) - 1
        if not raw[-1]:
            raw.pop()
            keys.pop()
        # the tail lines' indexes, counted back from the block's end (they are near it)
        tail: list[int] = []
        index, counted_from = len(raw) - (0 if block.endswith(b"\n") else 1), len(block)
        for start in sorted(tail_found, reverse=True):
            index -= block.count(b"\n", start, counted_from)
            counted_from = start
            tail.append(index)
        tail.reverse()
        numbers = range(first_line, first_line + len(raw))
        return [self._grouped(raw, keys, numbers, tail, hit)], newlines

    def _scan_shapes(self, block: bytes, first_line: int) -> tuple[list, int] | None:
        """A repetitive dense block (a crash loop: a few shapes, most of them matching) read by
        shape before any block-wide match: the lines of each shape (digits written 0) counted
        in C (`_tiled_counts`; every line keyed when the probe's shapes are not all of them),
        each shape matched once (`_shape_reading`, `_verdict`). None when the block is not such a block
        (its probe has many shapes or few matching lines, a shape needs its lines matched one
        by one, a CRLF line): the caller then reads it with the block `Set`.

        Exact as matching each line alone: a line's signatures are those of its shape, because
        every shape here is either a kind (only digit-blind signatures can fire on its lines)
        or matches no signature but tail ones (kind 0, its lines only counted; the tail search
        finds the last of them, checked one by one as `_grouped` does).
        """
        shaped = None
        if self._known_shapes and block.endswith(b"\n"):
            # every line one of the shapes of the block before (a crash loop goes on): no probe
            shaped = block.translate(DIGITS_TO_ZERO)
            counts = _tiled_counts(shaped, self._known_shapes)
            if counts is not None:
                return self._read_by_shape(block, shaped, first_line, counts)
        probe_end = block.find(b"\n", DENSE_PROBE) + 1 or len(block)
        probe = block[:probe_end].translate(DIGITS_TO_ZERO).split(b"\n")
        if not probe[-1]:
            probe.pop()
        seen = Counter(probe)
        if len(seen) * REPEATS > len(probe):
            return None
        verdicts = self._verdicts_in(seen, block, probe_end)
        if verdicts is None:
            return None
        in_kinds = sum(n for key, n in seen.items() if verdicts[key][0] == _KIND)
        if in_kinds * WHOLE_BLOCK_SHARE < len(probe) or b"\r" in block:
            return None
        if shaped is None:
            shaped = block.translate(DIGITS_TO_ZERO)
        # the shapes of the probe and of the blocks before (a rare shape the probe missed)
        shapes = self._known_shapes.union(seen)
        if block.endswith(b"\n") and len(shapes) <= MAX_TILED_SHAPES:
            counts = _tiled_counts(shaped, shapes)
            if counts is not None:
                return self._read_by_shape(block, shaped, first_line, counts)
        # a shape not known yet, or too many to count one by one: every line keyed
        keys = shaped.split(b"\n")
        # the previous block's keys are let go only now that these exist: freed first, the
        # interpreter hands their memory back to the kernel and takes it again zeroed, page by
        # page (a third more CPU on a crash loop)
        self._held_keys = keys
        if not keys[-1]:
            keys.pop()
        counted = Counter(keys)
        if len(counted) * REPEATS > len(keys):
            return None
        return self._read_by_shape(block, shaped, first_line, counted)

    def _read_by_shape(
        self, block: bytes, shaped: bytes, first_line: int, counts: dict[bytes, int]
    ) -> tuple[list, int] | None:
        """_scan_shapes of a block whose lines are counted by shape (`counts`, every line of
        the block in one of them; shapes counted 0 are dropped)."""
        counts = {key: n for key, n in counts.items() if n}
        lines = sum(counts.values())
        self._known_shapes = set(counts) if len(counts) <= MAX_TILED_SHAPES else set()
        verdicts = self._verdicts_in(counts, block, len(block))
        if verdicts is None:
            return None
        newlines = lines - (0 if block.endswith(b"\n") else 1)
        found = _ShapeBlock(self, block, shaped, first_line, lines, counts, verdicts)
        return [found.kinds()], newlines

    def _verdicts_in(self, shapes: Iterable[bytes], block: bytes, end: int) -> dict | None:
        """Each shape's verdict (`_verdict`) in block[:end], or None when a shape is mixed. A
        signature that tells digits apart and whose cover matches a shape (an access line's
        `HTTP/1.1" 200` under gateway-timeout's `HTTP/1\\.1" 50[234]`) is searched for in the
        block once: found nowhere, it cannot fire on any of its lines.
        """
        tail = self._tail
        readings = {key: self._shape_reading(key) for key in shapes}
        verdicts = {key: _verdict(tail, *reading, frozenset()) for key, reading in readings.items()}
        if None not in verdicts.values():
            return verdicts
        doubtful = frozenset(
            i for key, verdict in verdicts.items() if verdict is None for i in readings[key][1]
        )
        if not doubtful or doubtful & self._unfaithful:
            return None
        if any(search(block, 0, end) >= 0 for search in self._combined_searchers(doubtful)):
            return None
        verdicts = {key: _verdict(tail, *reading, doubtful) for key, reading in readings.items()}
        return None if None in verdicts.values() else verdicts

    def _shape_reading(self, key: bytes) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """(the digit-blind signatures that fire on every line of this shape, the others whose
        cover matches it: they may fire on some of its lines), kept per shape.
        """
        found = self._readings.get(key)
        if found is None:
            fired = tuple(sorted(i for i in self._set_match(key) if self._blind[i]))
            maybe: tuple[int, ...] = ()
            if self._exact_all:
                _, cover_match = self._exact_sets_of(self._exact_all)
                maybe = tuple(self._exact_all[j] for j in cover_match(key))
            found = (fired, maybe)
            if len(self._readings) < MAX_CACHED:
                self._readings[key] = found
        return found

    def _scan_candidates(
        self,
        block: bytes,
        first_line: int,
        hit: frozenset[int],
        starts: set[int],
        tail_found: set[int],
    ) -> tuple[list, int]:
        """The candidate lines of a block (found by the searches, starting at `starts`)
        grouped (`_grouped`); and the block's newlines.
        """
        raw: list[bytes] = []
        numbers: list[int] = []
        tail: list[int] = []
        line_no, counted_to = first_line, 0
        find, count = block.find, block.count
        for start in sorted(starts | tail_found):
            line_no += count(b"\n", counted_to, start)
            counted_to = start
            if start in tail_found:
                tail.append(len(raw))
            end = find(b"\n", start)
            raw.append(block[start:end] if end >= 0 else block[start:])
            numbers.append(line_no)
        line_no += count(b"\n", counted_to)
        keys = [line.translate(DIGITS_TO_ZERO) for line in raw]
        return [self._grouped(raw, keys, numbers, tail, hit)], line_no - first_line

    def _grouped(
        self,
        raw: list[bytes],
        keys: list[bytes],
        numbers: list[int] | range,
        tail: list[int],
        hit: frozenset[int],
    ) -> BlockKinds:
        """Lines of a block (`raw`, their shapes `keys`: digits written 0, their `numbers`),
        grouped by kind. Lines are matched once per shape by the signatures that can fire on
        the block and are digit-blind; the others are matched on the lines themselves, only on
        the lines whose shape their digit-blind cover matches. The answer is the same as
        matching each line alone: each signature that can fire is either blind or matched on
        the line (one that cannot fire on the block, the block Set says so, is not counted).
        Lines on which only tail signatures fired are kept only when the tail search found
        them (`tail`: their indexes), as `singles`.
        """
        considered = hit | self._unfaithful
        blind = frozenset(i for i in considered if self._blind[i])
        exact = tuple(sorted(considered - blind))
        # kind 0: no signature, or only tail ones; every other kind has its id, its fired
        fired_of: list[tuple[int, ...]] = [()]
        kind_of: dict = {}  # a line's key (its shape, or (shape, exact fired)) -> kind id
        tail_fired: dict = {}  # key -> fired, for the lines only tail signatures fired on

        def kind(key, fired: frozenset) -> None:
            if not fired or self._tail >= fired:
                kind_of[key] = 0
                if fired:
                    tail_fired[key] = tuple(sorted(fired))
            else:
                kind_of[key] = len(fired_of)
                fired_of.append(tuple(sorted(fired)))

        shapes = dict.fromkeys(keys)
        shape_fired = {key: blind.intersection(self._set_match(key)) for key in shapes}
        maybe: set[bytes] = set()
        if exact:
            exact_match, cover_match = self._exact_sets_of(exact)
            maybe = {key for key in shapes if cover_match(key)}
        for key in shapes:
            if key not in maybe:
                kind(key, shape_fired[key])
        ids = list(map(kind_of.get, keys))  # None: a line matched on its own, below
        line_key: dict[int, object] = {}  # line index -> its key, where not its shape
        if maybe:
            flags = list(map(maybe.__contains__, keys))
            where = list(compress(range(len(keys)), flags))
            pairs = list(
                zip(
                    compress(keys, flags),
                    map(frozenset, map(exact_match, compress(raw, flags))),
                    strict=True,
                )
            )
            for pair in dict.fromkeys(pairs):
                more = frozenset(exact[j] for j in pair[1])
                kind(pair, shape_fired[pair[0]] | more)
            for i, pair in zip(where, pairs, strict=True):
                ids[i] = kind_of[pair]
                line_key[i] = pair
        counts = Counter(ids)
        counts.pop(0, None)
        matching = list(compress(range(len(ids)), ids))
        firsts = _first_positions(ids, counts, matching)

        def numbered(i: int) -> tuple[int, str]:
            return numbers[i], raw[i].decode("utf-8", errors="replace")

        kinds = []
        for kind_id in sorted(counts, key=firsts.__getitem__):
            fired = fired_of[kind_id]
            kinds.append(
                LineKind(
                    fired,
                    self._entry_ids(fired),
                    counts[kind_id],
                    keys[firsts[kind_id]].decode("utf-8", errors="replace"),
                    kind_id,
                )
            )
        singles = []
        for i in tail:
            fired = tail_fired.get(line_key.get(i, keys[i]), ())
            if fired:
                line, text = numbered(i)
                singles.append(LineMatch(line, text, self._entry_ids(fired), (), fired))

        def line_matches() -> list[LineMatch]:
            single = {m.line: m for m in singles}
            out = []
            for i, kind_id in enumerate(ids):
                if kind_id:
                    fired = fired_of[kind_id]
                    line, text = numbered(i)
                    out.append(LineMatch(line, text, self._entry_ids(fired), (), fired))
                elif numbers[i] in single:
                    out.append(single[numbers[i]])
            return out

        def first_of(kind_ids: set[int], keep: int) -> list[tuple[int, str]]:
            found: list[tuple[int, str]] = []
            for i in matching if keep > 0 else ():
                if ids[i] in kind_ids:
                    found.append(numbered(i))
                    if len(found) == keep:
                        break
            return found

        def last_of(kind_ids: set[int], keep: int) -> list[tuple[int, str]]:
            found: list[tuple[int, str]] = []
            for i in reversed(matching) if keep > 0 else ():
                if ids[i] in kind_ids:
                    found.append(numbered(i))
                    if len(found) == keep:
                        break
            return found[::-1]

        return BlockKinds(kinds, singles, line_matches, first_of, last_of)

    def _exact_sets_of(self, indexes: tuple[int, ...]) -> tuple[Callable, Callable]:
        """Two `match(line)` -> positions in `indexes`: of the signatures that match the line,
        and of those whose digit-blind cover may (always all of them for a signature without a
        cover).
        """
        found = self._exact_sets.get(indexes)
        if found is None:
            covers = [digit_blind_cover(self.patterns[i][1]) for i in indexes]
            exact = _raw_set_match(_compiled_set(self.patterns[i][1] for i in indexes))
            try:
                if None in covers:
                    raise ValueError("a signature without a cover")
                cover = _raw_set_match(_compiled_set(c for c in covers if c is not None))
            except (ValueError, self._re2.error):
                everything = list(range(len(indexes)))

                def cover(_line: bytes) -> list[int]:
                    return everything

            found = (exact, cover)
            if len(self._exact_sets) < MAX_CACHED:
                self._exact_sets[indexes] = found
        return found

    def _lines_before(self, block: bytes, start: int, previous: tuple[str, ...]) -> tuple:
        """The `before_lines` lines ending just before offset `start` (from the previous block
        when this one does not hold them all).
        """
        lines: list[str] = []
        stop = start - 1  # the newline ending the line before
        while len(lines) < self.before_lines and stop >= 0:
            begin = block.rfind(b"\n", 0, stop) + 1
            lines.insert(0, block[begin:stop].decode("utf-8", errors="replace").rstrip("\r"))
            stop = begin - 1
        missing = self.before_lines - len(lines)
        if missing and previous:
            lines = [*previous[-missing:], *lines]
        return tuple(lines)

    def _line_starts(self, search, block: bytes, begin: int, end: int, starts: set[int]) -> None:
        """Add the start of each line of block[begin:end] where `search` (a _raw_search) may
        match (one search per line).
        """
        rfind, find, add = block.rfind, block.find, starts.add
        pos = begin
        while pos < end:
            at = search(block, pos, end)
            if at < 0:
                break
            add(rfind(b"\n", 0, at) + 1)
            stop = find(b"\n", at, end)  # the end of the line the match starts on
            pos = end if stop < 0 else stop + 1

    def _tail_starts(self, block: bytes, starts: set[int]) -> None:
        """Lines of the tail entries, searched from the block's end backwards in chunks that
        double, until `tail_keep` candidates are found or the block is done.
        """
        assert self._tail_set is not None
        found: set[int] = set()
        uncounted, not_counted = self._tail_uncounted, 0
        passed_left = TAIL_PASSED_OVER if uncounted is not None else 0
        end, chunk = len(block), TAIL_CHUNK
        while end > 0 and len(found) - not_counted < self.tail_keep:
            begin = 0 if end <= chunk else block.rfind(b"\n", 0, end - chunk) + 1
            hit = self._tail_set.Match(block[begin:end])
            in_chunk: set[int] = set()
            for n in hit or ():
                self._line_starts(self._searcher(self._tail_order[n]), block, begin, end, in_chunk)
            if uncounted is not None and passed_left > 0:  # the lines still wanted, last first
                wanted = self.tail_keep - (len(found) - not_counted)
                for start in sorted(in_chunk, reverse=True)[: wanted + passed_left]:
                    stop = block.find(b"\n", start, end)
                    if uncounted(block[start : end if stop < 0 else stop]):
                        not_counted += 1
                        passed_left -= 1
                    else:
                        wanted -= 1
                    if wanted <= 0 or passed_left <= 0:
                        break
            found |= in_chunk
            end, chunk = begin, chunk * 2
        if uncounted is not None and passed_left <= 0 and end > 0:
            self.tail_cut = True  # the lines above those passed over were not all searched
        starts.update(found)

    def scan_text(
        self,
        text: str,
        stats: ScanStats | None = None,
        block_bytes: int | None = None,
        kinds: bool = False,
    ) -> Iterator[LineMatch | BlockKinds]:
        """Every matching line of a text, with 1-based numbers (`kinds`: see `scan`)."""
        data = text.encode("utf-8", errors="surrogateescape")
        yield from self.scan_stream(_BytesReader(data), stats, block_bytes, kinds)

    def scan_stream(
        self,
        stream: BinaryIO,
        stats: ScanStats | None = None,
        block_bytes: int | None = None,
        kinds: bool = False,
    ) -> Iterator[LineMatch | BlockKinds]:
        """Every matching line of a binary stream (a file, a pipe, stdin), read in blocks."""
        yield from self._scan_blocks(read_blocks(stream, block_bytes), 1, stats, kinds)

    def scan(
        self,
        source: TextSource,
        workers: int = 1,
        stats: ScanStats | None = None,
        block_bytes: int | None = None,
        kinds: bool = False,
    ) -> Iterator[LineMatch | BlockKinds]:
        """Stream a log (text or file) in blocks of whole lines; memory stays flat whatever the
        size. `workers` > 1 runs the block filter of that many blocks at once in threads (RE2
        releases the GIL while it matches); matches still come in file order. `stats`, when
        given, is filled with the bytes and lines read. With `kinds`, a dense block (a crash
        loop, a loaded server's stats lines) comes as one BlockKinds instead of line by line.
        """
        if source.text is not None:
            yield from self.scan_text(source.text, stats, block_bytes, kinds)
            return
        assert source.path is not None
        with open(source.path, "rb") as fh:
            yield from self._scan_blocks(read_blocks(fh, block_bytes), workers, stats, kinds)

    def _scan_blocks(
        self, blocks: Iterator[bytes], workers: int, stats: ScanStats | None, kinds: bool = False
    ) -> Iterator[LineMatch | BlockKinds]:
        """Matches of a sequence of blocks of whole lines, the filter run in `workers` threads."""
        stats = stats if stats is not None else ScanStats()
        line_no = 1
        last = b""
        previous: tuple[str, ...] = ()
        # with threads, a block is read by shape first while that works (a crash loop is read
        # faster so than by the threads' block Sets) and tried again every SHAPE_RETRY blocks
        by_shape = {"works": True, "since": 0}

        def filtered(pending: list) -> Iterator[LineMatch]:
            nonlocal line_no, previous
            for block, hit, size in pending:
                stats.blocks.append((line_no, stats.bytes))
                counted = None
                if hit is _SHAPES_FIRST:
                    shaped = self._scan_shapes(block, line_no)
                    by_shape["works"] = shaped is not None
                    if shaped is not None:
                        found, counted = shaped
                        yield from found
                        hit = None
                    else:
                        hit = self._block_set().Match(block)
                if hasattr(hit, "result"):
                    hit = hit.result()
                if hit:
                    known = None if hit is True else hit
                    found, counted = self._scan_block(block, line_no, previous, known, kinds)
                    yield from found
                line_no += newlines(block) if counted is None else counted
                stats.bytes += size
                if self.before_lines:
                    end = len(block) + (0 if block.endswith(b"\n") else 1)
                    previous = (*previous, *self._lines_before(block, end, ()))[
                        -self.before_lines :
                    ]

        pool = None
        if workers > 1 and self.patterns:
            from concurrent.futures import ThreadPoolExecutor

            pool = ThreadPoolExecutor(workers)
        try:
            pending: list = []
            for index, block in enumerate(blocks):
                last, size = block, len(block)
                if index == 0 and block.startswith(UTF8_BOM):
                    block = block[len(UTF8_BOM) :]
                if b"\r" in block:  # (memchr: no cost on a Unix log)
                    # a Windows log: `$` (`(?m)`) ends a line only before a newline, so a
                    # signature ending in it would match no line of the block; its lines are
                    # read without their CR, as a line alone is
                    block = block.replace(b"\r\n", b"\n")
                if self._literals is not None:
                    pending.append((block, True, size))  # _scan_literals finds the lines itself
                elif not self.patterns:
                    pending.append((block, False, size))
                elif kinds and not self.before_lines and (pool is None or by_shape["works"]):
                    pending.append((block, _SHAPES_FIRST, size))
                elif pool is None:
                    pending.append((block, self._block_set().Match(block), size))
                else:
                    pending.append((block, pool.submit(self._block_set().Match, block), size))
                    by_shape["since"] += 1
                    if kinds and by_shape["since"] % SHAPE_RETRY == 0:
                        by_shape["works"] = True
                if len(pending) >= max(workers, 1):
                    yield from filtered(pending)
                    pending = []
            yield from filtered(pending)
        finally:
            if pool is not None:
                pool.shutdown(cancel_futures=True)
        stats.lines = line_no - 1 + (1 if last and not last.endswith(b"\n") else 0)


_SHAPES_FIRST = object()  # a block to read by shape first, else with the block Set
SHAPE_RETRY = 16  # with threads, blocks read by the Set before one is tried by shape again
_KIND, _ZERO = 1, 0


def _verdict(
    tail: frozenset[int], fired: tuple[int, ...], maybe: tuple[int, ...], absent: frozenset[int]
) -> tuple[int, tuple[int, ...]] | None:
    """What the signatures say of every line of a shape, given the digit-blind ones that fire
    on it (`fired`), the others that may (`maybe`) and those not in the block (`absent`):
    (_KIND, the signatures that fire) when only digit-blind ones can and one of them is no
    tail signature; (_ZERO, the tail signatures that may fire) when no other can; None (mixed)
    when its lines must be matched one by one.
    """
    maybe = tuple(i for i in maybe if i not in absent)
    if not maybe and any(i not in tail for i in fired):
        return _KIND, fired
    if tail.issuperset(fired) and tail.issuperset(maybe):
        return _ZERO, fired + maybe
    return None


def _tiled_counts(shaped: bytes, shapes: Iterable[bytes]) -> dict[bytes, int] | None:
    """How many lines of `shaped` (whole lines, digits written 0) are each of `shapes`, when
    every line is one of them; else None. Counted with bytes.count, no split: when no shape's
    line is a proper suffix of another's, an occurrence can only be a whole line (a line holds
    one newline, at its end), so occurrences never overlap, and lengths that add up to the
    block's say that they are all of its lines.
    """
    lines = [shape + b"\n" for shape in shapes]
    if any(a is not b and b.endswith(a) for a in lines for b in lines):
        return None
    found = dict.fromkeys(lines, 0)
    # counted a window at a time, every shape over a window still in the CPU's cache (8%
    # less time a crash-loop block than each shape over the whole block); a window ends
    # after a newline, so no occurrence (a whole line) spans two
    start, end = 0, len(shaped)
    while start < end:
        stop = shaped.find(b"\n", start + TILE_WINDOW - 1) + 1 or end
        for line in lines:
            found[line] += shaped.count(line, start, stop)
        start = stop
    covered = sum(n * len(line) for line, n in found.items())
    return {line[:-1]: n for line, n in found.items()} if covered == end else None


class _ShapeBlock:
    """A repetitive block read by shape (SignatureSet._scan_shapes): its kinds, the tail lines
    that are singles, and its lines one by one on demand. A shape's lines are found in the
    block with its digits written 0 (`shaped`: the same offsets), their text cut from the
    block, their numbers counted once for all of them: no split of the block itself.
    """

    def __init__(self, scanner, block, shaped, first_line, lines, counts, verdicts):
        self.scanner, self.block, self.shaped, self.first_line = scanner, block, shaped, first_line
        self.lines, self.counts, self.verdicts = lines, counts, verdicts
        self.newlines = lines - (0 if shaped.endswith(b"\n") else 1)

    def _starts(self, key: bytes, from_end: bool = False) -> Iterator[int]:
        """The offsets of this shape's lines, from the block's first line (or its last)."""
        shaped, line, inner = self.shaped, key + b"\n", b"\n" + key + b"\n"
        last = shaped.rfind(b"\n") + 1  # a last line without a newline starts here
        unended = 0 < last < len(shaped) and shaped[last:] == key
        if from_end:
            if unended:
                yield last
            end = last
            while (at := shaped.rfind(inner, 0, end)) >= 0:
                yield at + 1
                end = at + 1
            if shaped.startswith(line) or (last == 0 and shaped == key):
                yield 0
            return
        if shaped.startswith(line) or (last == 0 and shaped == key):
            yield 0
        at = 0
        while (at := shaped.find(inner, at)) >= 0:
            yield at + 1
            at += len(line)
        if unended:
            yield last

    def _numbered(self, starts: Iterable[int]) -> dict[int, tuple[int, str]]:
        """offset -> (line number, text) of the lines at these offsets; the newlines before
        each counted once, from the nearer end of the block."""
        shaped, order = self.shaped, sorted(set(starts))
        half, index_of = len(shaped) // 2, {}
        index = counted = 0
        for start in order:
            if start > half:
                break
            index += shaped.count(b"\n", counted, start)
            counted = start
            index_of[start] = index
        index, counted = self.newlines, len(shaped)
        for start in reversed(order):
            if start <= half:
                break
            index -= shaped.count(b"\n", start, counted)
            counted = start
            index_of[start] = index
        block, out = self.block, {}
        for start, index in index_of.items():
            stop = block.find(b"\n", start)
            text = block[start : stop if stop >= 0 else len(block)]
            out[start] = (self.first_line + index, text.decode("utf-8", errors="replace"))
        return out

    def kinds(self) -> BlockKinds:
        scanner, verdicts = self.scanner, self.verdicts
        found = []
        for key, count in self.counts.items():
            state, fired = verdicts[key]
            if state != _KIND:
                continue
            found.append((next(self._starts(key)), key, count, fired))
        found.sort()
        self.by_id: dict[int, bytes] = {}
        kinds = []
        for kind_id, (_, key, count, fired) in enumerate(found, 1):
            text = key.decode("utf-8", errors="replace")
            kinds.append(LineKind(fired, scanner._entry_ids(fired), count, text, kind_id))
            self.by_id[kind_id] = key
        return BlockKinds(kinds, self.singles(), self.line_matches, self.first_of, self.last_of)

    def singles(self) -> list[LineMatch]:
        """The lines the tail search finds on which only tail signatures fire."""
        scanner = self.scanner
        if not any(v[0] == _ZERO and v[1] for v in map(self.verdicts.get, self.counts)):
            return []
        found: set[int] = set()
        scanner._tail_starts(self.block, found)
        block, shaped, out = self.block, self.shaped, []
        index, counted_from = self.newlines, len(block)
        for start in sorted(found, reverse=True):
            index -= block.count(b"\n", start, counted_from)
            counted_from = start
            stop = block.find(b"\n", start)
            stop = stop if stop >= 0 else len(block)
            if self.verdicts[shaped[start:stop]][0] != _ZERO:
                continue
            raw = block[start:stop]
            fired = tuple(sorted(scanner._set_match(raw)))
            if fired:
                text = raw.decode("utf-8", errors="replace")
                out.append(
                    LineMatch(self.first_line + index, text, scanner._entry_ids(fired), (), fired)
                )
        out.reverse()
        return out

    def first_of(self, kind_ids: set[int], keep: int) -> list[tuple[int, str]]:
        """The first `keep` lines of these kinds, in order."""
        starts = list(islice(heapq.merge(*(self._starts(self.by_id[k]) for k in kind_ids)), keep))
        lines = self._numbered(starts)
        return [lines[at] for at in starts]

    def last_of(self, kind_ids: set[int], keep: int) -> list[tuple[int, str]]:
        """The last `keep` lines of these kinds, in order."""
        from_end = [self._starts(self.by_id[k], from_end=True) for k in kind_ids]
        starts = list(islice(heapq.merge(*from_end, reverse=True), keep))
        lines = self._numbered(starts)
        return [lines[at] for at in sorted(starts)]

    def line_matches(self) -> list[LineMatch]:
        scanner, out = self.scanner, []
        single = {m.line: m for m in self.singles()}
        raw = self.block.split(b"\n")
        for i, key in enumerate(self.shaped.split(b"\n")[: self.lines]):
            state, fired = self.verdicts[key]
            if state == _KIND:
                text = raw[i].decode("utf-8", errors="replace")
                out.append(
                    LineMatch(self.first_line + i, text, scanner._entry_ids(fired), (), fired)
                )
            elif self.first_line + i in single:
                out.append(single[self.first_line + i])
        return out


# a whole-text anchor or an inline flag group (not `(?:`, `(?P<`, `(?<`): the block-wide Set may
# miss what the signature matches on a line alone
_UNFAITHFUL = re.compile(r"\\[Az]|\(\?[a-zA-Z-]")


def _literal_starts(block: bytes, literal: bytes, begin: int, end: int, starts: set[int]) -> None:
    """Add the start of each line of block[begin:end] that holds `literal`."""
    rfind, find, add = block.rfind, block.find, starts.add
    pos = find(literal, begin, end)
    while pos >= 0:
        add(rfind(b"\n", 0, pos) + 1)
        stop = find(b"\n", pos, end)
        if stop < 0:
            break
        pos = find(literal, stop + 1, end)


def _first_positions(ids: list[int], counts: Counter, matching: list[int]) -> dict[int, int]:
    """The index of the first line of each kind id counted in `counts`."""
    found: dict[int, int] = {}
    for i in matching:
        if ids[i] not in found:
            found[ids[i]] = i
            if len(found) == len(counts):
                break
    return found


def _raw_search(compiled):
    """`search(block, pos, end)` -> the offset of the first match in block[pos:end], or -1.

    google-re2's Python wrapper costs more per call than the match itself on a short line, and
    a busy log searches once per matching line: its compiled RE2 object is called directly
    when it is there (`_regexp`, google-re2 1.x), through the wrapper otherwise.
    """
    raw = getattr(compiled, "_regexp", None)
    anchor = getattr(getattr(re2_module(), "_re2", None), "RE2", None)
    anchor = getattr(getattr(anchor, "Anchor", None), "UNANCHORED", None)
    if raw is None or anchor is None:

        def wrapped(block: bytes, pos: int, end: int) -> int:
            m = compiled.search(block, pos, end)
            return -1 if m is None else m.start()

        return wrapped
    match = raw.Match

    def direct(block: bytes, pos: int, end: int) -> int:
        return match(anchor, block, pos, end)[0][0]

    return direct


def _raw_set_match(compiled):
    """`match(line_bytes)` -> the indexes of the set's patterns that match (possibly empty),
    calling google-re2's compiled Set directly when it can (see _raw_search)."""
    raw = getattr(compiled, "_set", None)
    if raw is not None:
        return raw.Match
    return lambda text: compiled.Match(text) or ()


def _compiled_set(patterns: Iterable[str]):
    re2 = re2_module()
    compiled = re2.Set.SearchSet(re2_options())
    for pattern in patterns:
        compiled.Add(pattern)
    compiled.Compile()
    return compiled


# --- specificity -------------------------------------------------------------------------------


def literal_weight(pattern: str) -> int:
    """How much fixed text every match of a signature must contain (characters outside
    classes, optional parts and repeats; the shortest branch of an alternation): a rough
    measure of how specific it is. Reads the grep -E subset signatures are written in.
    """
    weight, _ = _required(pattern, 0)
    return weight


def _required(pattern: str, i: int) -> tuple[int, int]:
    """(required literal characters of the alternation starting at i, index after it)."""
    branches: list[int] = []
    current = 0
    last = 0  # weight of the last atom (a quantifier may take it back)
    n = len(pattern)
    while i < n:
        c = pattern[i]
        if c == ")":
            break
        if c == "|":
            branches.append(current)
            current = last = 0
            i += 1
            continue
        if c in "*?":
            current -= last
            last = 0
            i += 1
            continue
        if c == "+":
            i += 1
            continue
        if c == "{":
            close = pattern.find("}", i)
            body = pattern[i + 1 : close] if close > 0 else ""
            if body.split(",")[0].strip() in ("", "0"):
                current -= last
            last = 0
            i = close + 1 if close > 0 else n
            continue
        if c == "(":
            last, i = _required(pattern, i + 1)
            i += 1  # the ')'
            current += last
            continue
        if c == "[":
            j = i + 1
            if j < n and pattern[j] == "^":
                j += 1
            if j < n and pattern[j] == "]":
                j += 1
            close = pattern.find("]", j)
            i = close + 1 if close >= 0 else n
            last = 0
            continue
        if c == "\\":
            nxt = pattern[i + 1 : i + 2]
            last = 0 if nxt.isalnum() else 1  # \d \w \s \b are classes or anchors
            i += 2
            current += last
            continue
        last = 0 if c in ".^$" else 1
        current += last
        i += 1
    branches.append(current)
    return max(min(branches), 0), i


# --- reading ----------------------------------------------------------------------------------


class _BytesReader:
    """A minimal binary stream over bytes already in memory."""

    def __init__(self, data: bytes):
        self._data = data
        self._pos = 0

    def read(self, size: int = -1) -> bytes:
        end = len(self._data) if size < 0 else self._pos + size
        chunk = self._data[self._pos : end]
        self._pos += len(chunk)
        return chunk


def newlines(block: bytes) -> int:
    """Newlines in a block: `bytes.replace` finds them with memchr, about 3x faster than
    `bytes.count`, which compares byte by byte.
    """
    return len(block) - len(block.replace(b"\n", b""))


def read_blocks(stream: BinaryIO, block_bytes: int | None = None) -> Iterator[bytes]:
    """Blocks of whole lines of a stream, each ending in a newline except perhaps the last:
    `block_bytes` read at once, then the rest of the line they stop in (a line longer than a
    block stays one line). A stream without `readline` (a LogStream over gzip or stdin) is cut
    after each block's last newline instead, the rest starting the next block.
    """
    size = block_bytes or BLOCK_BYTES
    if isinstance(stream, io.BufferedReader) and isinstance(stream.raw, io.FileIO):
        with contextlib.suppress(OSError):
            if stat.S_ISREG(os.fstat(stream.fileno()).st_mode):
                yield from _file_blocks(stream, size)
                return
    readline = getattr(stream, "readline", None)
    carry = b""
    while True:
        chunk = stream.read(size)
        if not chunk:
            if carry:
                yield carry
            return
        if carry:
            chunk, carry = carry + chunk, b""
        if chunk.endswith(b"\n"):
            yield chunk
        elif readline is not None:
            yield chunk + readline()
        elif (cut := chunk.rfind(b"\n")) < 0:  # one line longer than the block so far
            carry = chunk
        else:
            yield chunk[: cut + 1]
            carry = chunk[cut + 1 :]


def _file_blocks(stream: io.BufferedReader, size: int) -> Iterator[bytes]:
    """read_blocks of a regular file: each block read at once up to the end of the line it stops
    in (found first by a small read there), so no block is copied to join its cut last line.
    The stream is left where the last block ends.
    """
    fd, pos = stream.fileno(), stream.tell()
    try:
        retries = 0
        while block := os.pread(fd, _line_end(fd, pos + size - 1) - pos, pos):
            # a block that ends unended is the file's last line, unless a writer is adding to
            # it: then it is read again, whole
            grown = not block.endswith(b"\n") and os.pread(fd, 1, pos + len(block))
            if grown and retries < GROWN_RETRIES:
                retries += 1
                continue
            retries = 0
            pos += len(block)
            yield block
    finally:
        stream.seek(pos)


def _line_end(fd: int, at: int) -> int:
    """The offset just past the first newline at or after `at` (the file's end when none)."""
    while True:
        window = os.pread(fd, LINE_END_WINDOW, at)
        newline = window.find(b"\n")
        if newline >= 0:
            return at + newline + 1
        if len(window) < LINE_END_WINDOW:
            return at + len(window)
        at += len(window)
