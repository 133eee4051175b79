"""NVIDIA Xid / SXid events and "fallen off the bus" messages in a kernel log (fact `node/xid`).

Real input lines (sources in tests/fixtures/kernel/SOURCES.md):

    May 18 19:02:39 kernel: NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus.
    [Sun Feb 23 16:24:18 2025] NVRM: Xid (PCI:0000:9b:00): 119, pid=2024380, name=nvidia-smi, Timeout after 6s ...
    NVRM: Xid (PCI:0000:01:00 GPU-I:05): 94, pid=7194, Contained: CE User Channel (0x9). RST: No, D-RST: No
    kern  :err   : 2025-01-25T10:34:54,859532+00:00 nvidia-nvswitch1: SXid (PCI:0000:84:00.0): 12028, Data {...}
    [ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0
                   NVRM: (PCI ID: 10de:26b5) installed in this system has
                   NVRM: fallen off the bus and is not responding to commands.

The log is streamed in binary blocks: a fast search for the literals `Xid (` and `off the bus`
finds the few candidate lines, and only those are decoded and parsed; memory stays flat (one
block at a time per process), and a large file is cut into ranges scanned in parallel. Events are
aggregated per (kind, code, PCI bus id) with a count and the first and last occurrence; the
events themselves are not kept.
"""

from __future__ import annotations

import itertools
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from llmdoctor.derive import derived_fact
from llmdoctor.facts import FactMissing, Facts
from llmdoctor.parsers.pci import pci_key
from llmdoctor.textsource import TextSource

BLOCK_BYTES = 1024 * 1024  # small enough to stay in the CPU cache across the passes
PARALLEL_MIN_BYTES = 256 * 1024 * 1024
MIN_PARALLEL_CPUS = 4
MAX_LINE_BYTES = 64 * 1024 * 1024
MAX_WORKERS = 8
MAX_PROCESSES = 8
MAX_UNPARSED = 10
MAX_TIMES = 500  # the last occurrence times per group, for a team policy's "N within a window"

_XID = re.compile(
    r"(?P<s>S?)Xid \((?:PCI:)?(?P<pci>[0-9a-fA-F]{1,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})"
    r"(?:\.[0-7])?(?: GPU-I:(?P<gi>\d+))?\):\s*(?P<code>\d+)\s*,?\s*(?P<rest>.*)"
)
_PID_NAME = re.compile(
    r"^pid=(?P<pid>'?<[^>]*>'?|\d+)(?:,\s*name=(?P<name>'?<[^>]*>'?|[^,]*))?,?\s*(?P<msg>.*)"
)
_CHANNEL = re.compile(r"\b(?:Ch|channel) (?:0x)?(?P<ch>[0-9a-fA-F]{8})\b")
_CAUSED_BY = re.compile(r"caused by previous Xid (?P<code>\d+)")
_RECOVERY = re.compile(r"recovery action changed from 0x[0-9a-fA-F]+ .*? to (?P<to>0x[0-9a-fA-F]+)")
_FALLEN_ONE_LINE = re.compile(
    r"GPU (?:at )?(?:PCI:)?(?P<pci>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})(?:\.[0-7])?:?"
    r"(?: GPU)? has fallen off the bus"
)
_FALLEN_HEAD = re.compile(
    r"NVIDIA GPU (?:at )?(?:PCI:)?(?P<pci>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})"
)
_FATALITY = re.compile(r"\b(Fatal|Nonfatal|Non-fatal)\b")
_TIME_BRACKET = re.compile(r"\[\s*([^\]]+?)\s*\]")
_TIME_SYSLOG = re.compile(r"^([A-Z][a-z]{2} +\d{1,2} \d\d:\d\d:\d\d)")
_TIME_ISO = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)")


@dataclass(frozen=True)
class XidEvent:
    """One Xid, SXid or fallen-off-the-bus message, as it appeared in the log."""

    kind: str  # "xid" | "sxid" | "fallen-off-bus"
    code: int  # Xid/SXid number; 79 for a fallen-off-the-bus message
    pci: str | None  # '0000:3b:00'
    line: int  # 1-based line number in the log
    text: str  # the raw line (three joined lines for the multi-line form)
    time: str | None = None
    gpu_instance: int | None = None  # MIG GPU instance ("GPU-I:05")
    pid: int | None = None
    process: str | None = None
    channel: str | None = None
    message: str = ""
    caused_by: int | None = None  # Xid 45 "caused by previous Xid 149"
    fatality: str | None = None  # NVLink5 / SXid "Fatal" | "Nonfatal"
    recovery_action: int | None = None  # Xid 154 "... to 0x2 (Node Reboot Required)"


def _timestamp(prefix: str) -> str | None:
    for pattern in (_TIME_BRACKET, _TIME_SYSLOG, _TIME_ISO):
        m = pattern.search(prefix)
        if m:
            return m.group(1)
    return None


def _unknown(value: str | None) -> bool:
    return value is None or "<" in value or value.strip("' ") == ""


def parse_xid_line(text: str, line: int = 0) -> XidEvent | None:
    """The event on one log line, or None if the line holds no Xid/SXid/fallen-off message."""
    m = _XID.search(text)
    if m:
        rest = m["rest"].strip()
        pid = name = None
        pm = _PID_NAME.match(rest)
        if pm:
            pid = None if _unknown(pm["pid"]) else int(pm["pid"])
            name = None if _unknown(pm["name"]) else pm["name"].strip().strip("'")
            rest = pm["msg"]
        channel = _CHANNEL.search(rest)
        caused = _CAUSED_BY.search(rest)
        fatal = _FATALITY.search(rest)
        recovery = _RECOVERY.search(rest)
        return XidEvent(
            kind="sxid" if m["s"] else "xid",
            code=int(m["code"]),
            pci=pci_key(m["pci"]),
            line=line,
            text=text.strip(),
            time=_timestamp(text[: m.start()]),
            gpu_instance=int(m["gi"]) if m["gi"] else None,
            pid=pid,
            process=name,
            channel=channel["ch"] if channel else None,
            message=rest.strip(),
            caused_by=int(caused["code"]) if caused else None,
            fatality=("Nonfatal" if fatal[1].lower() != "fatal" else "Fatal") if fatal else None,
            recovery_action=int(recovery["to"], 16) if recovery else None,
        )
    m = _FALLEN_ONE_LINE.search(text)
    if m:
        return XidEvent(
            kind="fallen-off-bus",
            code=79,
            pci=pci_key(m["pci"]),
            line=line,
            text=text.strip(),
            time=_timestamp(text[: m.start()]),
            message="GPU has fallen off the bus",
        )
    return None


def _fallen_multi_line(lines: list[str], line: int) -> XidEvent | None:
    """The driver 570+ form: 'The NVIDIA GPU <bus id>' two lines before 'fallen off the bus'."""
    for back, previous in enumerate(reversed(lines), start=1):
        m = _FALLEN_HEAD.search(previous)
        if m:
            joined = " ".join(p.strip() for p in [*lines[len(lines) - back :]])
            return XidEvent(
                kind="fallen-off-bus",
                code=79,
                pci=pci_key(m["pci"]),
                line=line - (back - 1),
                text=joined,
                time=_timestamp(previous[: m.start()]),
                message="GPU has fallen off the bus (reported without an Xid line)",
            )
    return None


@dataclass
class XidGroup:
    """All events of one kind and code on one PCI device."""

    kind: str
    code: int
    pci: str | None
    count: int = 0
    first: XidEvent | None = None
    last: XidEvent | None = None
    processes: list[str] = field(default_factory=list)
    gpu_instances: list[int] = field(default_factory=list)
    caused_by: list[int] = field(default_factory=list)
    fatal: int = 0
    recovery_actions: list[int] = field(default_factory=list)
    times: list[str | None] = field(default_factory=list)

    def add(self, event: XidEvent) -> None:
        self.count += 1
        self.times.append(event.time)
        if len(self.times) > 2 * MAX_TIMES:
            del self.times[:-MAX_TIMES]
        if self.first is None:
            self.first = event
        self.last = event
        if event.process or event.pid:
            if event.pid is None:
                label = event.process
            else:
                label = (
                    f"{event.process} (pid {event.pid})" if event.process else f"pid {event.pid}"
                )
            if label not in self.processes and len(self.processes) < MAX_PROCESSES:
                self.processes.append(label)
        for value, bucket in (
            (event.gpu_instance, self.gpu_instances),
            (event.caused_by, self.caused_by),
            (event.recovery_action, self.recovery_actions),
        ):
            if value is not None and value not in bucket:
                bucket.append(value)
        if event.fatality == "Fatal":
            self.fatal += 1

    def to_json(self) -> dict[str, Any]:
        def occurrence(e: XidEvent | None) -> dict[str, Any] | None:
            return None if e is None else {"line": e.line, "time": e.time, "text": e.text}

        return {
            "kind": self.kind,
            "code": self.code,
            "pci": self.pci,
            "count": self.count,
            "first": occurrence(self.first),
            "last": occurrence(self.last),
            "processes": self.processes,
            "gpu_instances": self.gpu_instances,
            "caused_by": self.caused_by,
            "fatal": self.fatal,
            "recovery_actions": self.recovery_actions,
            "times": self.times[-MAX_TIMES:],
        }


@dataclass
class XidScan:
    """What a scan of one kernel log found."""

    lines: int = 0
    bytes: int = 0
    events: int = 0
    groups: dict[tuple, XidGroup] = field(default_factory=dict)
    unparsed: list[dict[str, Any]] = field(default_factory=list)

    def add(self, event: XidEvent) -> None:
        self.events += 1
        key = (event.kind, event.code, event.pci)
        group = self.groups.get(key)
        if group is None:
            group = self.groups[key] = XidGroup(event.kind, event.code, event.pci)
        group.add(event)

    def to_json(self, source: str) -> dict[str, Any]:
        groups = sorted(self.groups.values(), key=lambda g: g.first.line if g.first else 0)
        return {
            "source": source,
            "lines": self.lines,
            "bytes": self.bytes,
            "events": self.events,
            "groups": [g.to_json() for g in groups],
            "unparsed": self.unparsed,
        }


def _candidates(block: bytearray, end: int) -> list[int]:
    """Sorted offsets in block[:end] of 'Xid (' (also in 'SXid (') and of 'off the bus'.

    'X' is rare in kernel logs, so a memchr-speed search for it, checked in place, is much
    faster than a substring search for the whole needle.
    """
    found: list[int] = []
    find, startswith = block.find, block.startswith
    pos = find(b"X", 0, end)
    while pos >= 0:
        if startswith(b"Xid (", pos):
            found.append(pos)
        pos = find(b"X", pos + 1, end)
    pos = find(b"off the bus", 0, end)
    if pos >= 0:
        while pos >= 0:
            found.append(pos)
            pos = find(b"off the bus", pos + 1, end)
        found.sort()
    return found


def _scan_block(
    block: bytes | bytearray, end: int, line_base: int, tail: list[str], scan: XidScan
) -> tuple[int, list[str]]:
    """Parse the candidate lines of block[:end] (whole lines); return the next line number."""
    counted_to = 0
    line_no = line_base
    last_line_start = -1
    for pos in _candidates(block, end):
        start = block.rfind(b"\n", 0, pos) + 1
        if start == last_line_start:
            continue  # both needles on one line
        last_line_start = start
        line_no += _newlines(block, counted_to, start)
        counted_to = start
        stop = block.find(b"\n", pos, end)
        raw = bytes(block[start:stop])
        text = raw.decode("utf-8", errors="replace").rstrip("\r")
        event = parse_xid_line(text, line_no)
        if event is None and b"off the bus" in raw:
            before = _previous_lines(block, start, 2, tail)
            event = _fallen_multi_line([*before, text], line_no)
        if event is not None:
            scan.add(event)
        elif len(scan.unparsed) < MAX_UNPARSED and b"Xid (" in raw:
            scan.unparsed.append({"line": line_no, "text": text.strip()})
    line_no += _newlines(block, counted_to, end)
    return line_no, _previous_lines(block, end, 2, tail)


def _newlines(block: bytes | bytearray, start: int, end: int) -> int:
    """Newlines in block[start:end]. replace() finds them with memchr, about 3x faster than
    count(), which compares byte by byte."""
    part = block[start:end] if start or end != len(block) else block
    return len(part) - len(part.replace(b"\n", b""))


def _previous_lines(block: bytes | bytearray, start: int, n: int, tail: list[str]) -> list[str]:
    """Up to n lines ending just before offset `start` (borrowing from the previous block)."""
    lines: list[str] = []
    stop = start - 1  # the newline that ends the previous line
    while len(lines) < n and stop >= 0:
        begin = block.rfind(b"\n", 0, stop) + 1
        lines.insert(0, bytes(block[begin:stop]).decode("utf-8", errors="replace").rstrip("\r"))
        stop = begin - 1
    if len(lines) < n and tail:
        lines = [*tail[len(tail) - (n - len(lines)) :], *lines]
    return lines


def scan_bytes(data: bytes) -> XidScan:
    """Scan a log held in memory."""
    scan = XidScan()
    if not data:
        return scan
    if not data.endswith(b"\n"):
        data += b"\n"
    scan.bytes = len(data)
    scan.lines = _scan_block(data, len(data), 1, [], scan)[0] - 1
    return scan


def _lines_before(fh, offset: int, n: int) -> list[str]:
    """The n lines that end just before byte `offset` of an open binary file."""
    if offset <= 0:
        return []
    back = min(offset, 64 * 1024)
    fh.seek(offset - back)
    data = fh.read(back)
    lines = data.decode("utf-8", errors="replace").split("\n")
    return [line.rstrip("\r") for line in lines[-(n + 1) : -1]]


def scan_range(path: str | Path, start: int = 0, end: int | None = None) -> XidScan:
    """Scan the whole lines in bytes [start, end) of a file; line numbers count from `start`."""
    scan = XidScan()
    line_base = 1
    block = bytearray(BLOCK_BYTES)  # one block, reused: memory stays flat
    view = memoryview(block)
    kept = 0  # bytes of an unfinished line carried to the front of the block
    with open(path, "rb") as fh:
        tail = _lines_before(fh, start, 2)
        fh.seek(start)
        remaining = None if end is None else end - start
        while remaining is None or remaining > 0:
            if kept == len(block) >= MAX_LINE_BYTES:  # not a log line: take it as one anyway
                line_base, tail = _scan_block(block + b"\n", kept + 1, line_base, tail, scan)
                kept = 0
            elif kept == len(block):  # one line longer than a block: make room for it
                view.release()
                block.extend(bytes(BLOCK_BYTES))
                view = memoryview(block)
            want = len(block) - kept if remaining is None else min(len(block) - kept, remaining)
            got = fh.readinto(view[kept : kept + want])
            if not got:
                break
            scan.bytes += got
            if remaining is not None:
                remaining -= got
            filled = kept + got
            cut = block.rfind(b"\n", 0, filled) + 1
            if cut == 0:
                kept = filled
                continue
            line_base, tail = _scan_block(block, cut, line_base, tail, scan)
            kept = filled - cut
            block[:kept] = block[cut:filled]
        if kept:
            last = bytearray(block[:kept]) + b"\n"
            line_base, _ = _scan_block(last, len(last), line_base, tail, scan)
    view.release()
    scan.lines = line_base - 1
    return scan


def _split_points(path: Path, size: int, parts: int) -> list[int]:
    """Byte offsets that cut the file into `parts` ranges at line starts."""
    points = [0]
    with open(path, "rb") as fh:
        for i in range(1, parts):
            fh.seek(max(points[-1], size * i // parts))
            while True:
                chunk = fh.read(1024 * 1024)
                if not chunk:
                    points.append(size)
                    break
                nl = chunk.find(b"\n")
                if nl >= 0:
                    points.append(fh.tell() - len(chunk) + nl + 1)
                    break
    points.append(size)
    return sorted(set(points))


def merge_scans(parts: list[XidScan]) -> XidScan:
    """One scan from scans of consecutive ranges: line numbers shifted, groups merged in order."""
    total = XidScan()
    offset = 0
    for part in parts:
        for key, group in part.groups.items():
            first = replace(group.first, line=group.first.line + offset) if group.first else None
            last = replace(group.last, line=group.last.line + offset) if group.last else None
            have = total.groups.get(key)
            if have is None:
                have = total.groups[key] = XidGroup(group.kind, group.code, group.pci)
                have.first = first
            have.count += group.count
            have.last = last
            have.fatal += group.fatal
            have.times = [*have.times, *group.times][-MAX_TIMES:]
            for name in ("processes", "gpu_instances", "caused_by", "recovery_actions"):
                bucket = getattr(have, name)
                for value in getattr(group, name):
                    if value not in bucket and len(bucket) < MAX_PROCESSES:
                        bucket.append(value)
        for item in part.unparsed:
            if len(total.unparsed) < MAX_UNPARSED:
                total.unparsed.append({**item, "line": item["line"] + offset})
        total.events += part.events
        total.bytes += part.bytes
        offset += part.lines
    total.lines = offset
    return total


def _parallel_workers(size: int) -> int:
    """Worker processes for a file of `size` bytes: only where cores are plenty (startup costs)."""
    cpus = os.cpu_count() or 1
    if cpus < MIN_PARALLEL_CPUS or size < PARALLEL_MIN_BYTES:
        return 1
    return min(cpus, MAX_WORKERS, size // (64 * 1024 * 1024))


def scan_xid(source: TextSource, workers: int | None = None) -> XidScan:
    """Stream a kernel log and aggregate every Xid/SXid/fallen-off event in it.

    A large file is cut at line starts into ranges scanned by parallel processes (each holding
    one block), then merged; anything that stops the processes falls back to one serial pass.
    """
    if source.path is None:
        return scan_bytes((source.text or "").encode("utf-8", errors="replace"))
    path = Path(source.path)
    size = path.stat().st_size
    count = workers or _parallel_workers(size)
    if count > 1:
        points = _split_points(path, size, count)
        ranges = list(itertools.pairwise(points))
        try:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            context = multiprocessing.get_context("spawn")  # no fork: collector threads may run
            with ProcessPoolExecutor(max_workers=len(ranges), mp_context=context) as pool:
                parts = list(pool.map(scan_range, [path] * len(ranges), *zip(*ranges, strict=True)))
            return merge_scans(parts)
        except Exception:
            pass  # no processes here (sandbox, frozen app): one pass instead
    return scan_range(path)


COMPRESSED = {
    b"\x1f\x8b": ("gzip", "zcat"),
    b"\xfd7zXZ\x00": ("xz", "xzcat"),
    b"\x28\xb5\x2f\xfd": ("zstd", "zstdcat"),
    b"BZh": ("bzip2", "bzcat"),
}
SNIFF_BYTES = 64 * 1024
MAX_BINARY_SHARE = 0.3


def not_text_reason(log: TextSource) -> str | None:
    """Why the log is not kernel log text (compressed or binary), judged on its first 64 KiB."""
    with log.open_binary() as fh:
        head = fh.read(SNIFF_BYTES)
    if not head:
        return None
    for magic, (kind, cat) in COMPRESSED.items():
        if head.startswith(magic):
            return f"is {kind}-compressed; decompress it first ({cat} FILE > kernel.log)"
    control = sum(1 for b in head if b < 32 and b not in (9, 10, 13, 27))
    undecodable = head.decode("utf-8", errors="replace").count("\ufffd")
    if (control + undecodable) / len(head) > MAX_BINARY_SHARE:
        return "is binary data, not kernel log text (dmesg -T, journalctl -k or /var/log/kern.log)"
    return None


@derived_fact("node/xid", needs=("node/kernel.log",))
def xid_from_kernel_log(facts: Facts) -> dict[str, Any]:
    log = facts.require("node/kernel.log")
    if isinstance(log, TextSource) and (why := not_text_reason(log)):
        raise FactMissing("node/kernel.log", why)
    return scan_xid(log).to_json(getattr(log, "name", "node/kernel.log"))
