"""NVIDIA Xid / SXid events and "fallen off the bus" messages in a kernel log (fact `node/xid`).

Real input lines (sources in tests/fixtures/kernel/SOURCES.md):

    May 18 19:02:39 kernel: NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus.
    [Sun Feb 23 16:24:18 2025] NVRM: Xid (PCI:0000:9b:00): 119, pid=2024380, name=nvidia-smi, Timeout after 6s ...
    NVRM: Xid (PCI:0000:01:00 GPU-I:05): 94, pid=7194, Contained: CE User Channel (0x9). RST: No, D-RST: No
    kern  :err   : 2025-01-25T10:34:54,859532+00:00 nvidia-nvswitch1: SXid (PCI:0000:84:00.0): 12028, Data {...}
    [ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0
                   NVRM: (PCI ID: 10de:26b5) installed in this system has
                   NVRM: fallen off the bus and is not responding to commands.

The log is streamed in blocks by llmdoctor's one log-scanning engine (llmdoctor.wiki.signatures, RE2):
the few lines holding `Xid (` or `off the bus` (and the lines starting the three-line form) are
found at memory speed, and only those are decoded and parsed; memory stays flat. Events are
aggregated per (kind, code, PCI bus id) with a count and the first and last occurrence; the
events themselves are not kept.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from llmdoctor.engine.derive import derived_fact
from llmdoctor.engine.facts import FactMissing, Facts
from llmdoctor.engine.textsource import TextSource
from llmdoctor.parsers.pci import pci_key

BLOCK_BYTES = 1024 * 1024  # small enough to stay in the CPU cache across the passes
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


# What the scan looks for, matched by the one log-scanning engine (llmdoctor.wiki.signatures); each
# match carries the two lines before it, for the driver 570+ three-line fallen-off form.
EVENT_SIGNATURES = (r"Xid \(", r"off the bus")


def _scanner():
    from types import SimpleNamespace

    from llmdoctor.wiki.signatures import SignatureSet

    event = SimpleNamespace(id="event", signatures=list(EVENT_SIGNATURES), path="")
    return SignatureSet([event], before_lines=2)


def scan_xid(source: TextSource, workers: int | None = None) -> XidScan:
    """Stream a kernel log and aggregate every Xid/SXid/fallen-off event in it.

    The log is read in blocks of whole lines by llmdoctor.wiki.signatures (RE2; `workers` threads
    for the block filter); only the candidate lines are decoded and parsed, memory stays flat.
    """
    from llmdoctor.wiki.signatures import ScanStats

    scan = XidScan()
    stats = ScanStats()
    for m in _scanner().scan(source, workers or 1, stats, BLOCK_BYTES):
        text = m.text.rstrip("\r")
        event = parse_xid_line(text, m.line)
        if event is None and "off the bus" in text:
            event = _fallen_multi_line([*m.before, text], m.line)
        if event is not None:
            scan.add(event)
        elif len(scan.unparsed) < MAX_UNPARSED and "Xid (" in text:
            scan.unparsed.append({"line": m.line, "text": text.strip()})
    scan.lines, scan.bytes = stats.lines, stats.bytes
    return scan


COMPRESSED = {
    b"\x1f\x8b": ("gzip", "zcat"),
    b"\xfd7zXZ\x00": ("xz", "xzcat"),
    b"\x28\xb5\x2f\xfd": ("zstd", "zstdcat"),
    b"BZh": ("bzip2", "bzcat"),
}
SNIFF_BYTES = 64 * 1024
MAX_BINARY_SHARE = 0.3


KERNEL_LOG_TEXT = "kernel log text (dmesg -T, journalctl -k or /var/log/kern.log)"


BINARY_DATA = "is binary data"
EMPTY_LOG = "is empty"


def not_text_reason(
    log: TextSource, text: str = KERNEL_LOG_TEXT, empty: bool = False
) -> str | None:
    """Why the log cannot be read as `text`: compressed or binary, judged on its first 64 KiB;
    with `empty`, also a log with nothing in it (a container's log: nothing in it was seen, so
    nothing in it is fine either; a kernel log cut to a --since window may rightly be empty)."""
    with log.open_binary() as fh:
        head = fh.read(SNIFF_BYTES)
        if empty and not head.strip() and not fh.read(1):
            return f"{EMPTY_LOG}: there was nothing in it to read"
    if not head:
        return None
    for magic, (kind, cat) in COMPRESSED.items():
        if head.startswith(magic):
            return f"is {kind}-compressed; decompress it first ({cat} FILE > kernel.log)"
    control = sum(1 for b in head if b < 32 and b not in (9, 10, 13, 27))
    undecodable = head.decode("utf-8", errors="replace").count("\ufffd")
    if (control + undecodable) / len(head) > MAX_BINARY_SHARE:
        return f"{BINARY_DATA}, not {text}"
    return None


def read_for_lines(why: str | None) -> bool:
    """Whether a log `not_text_reason` judged `why` is still read for its text lines: binary
    noise around text (a process dumping bytes to stdout before its error) is, and is said
    not read only when nothing matched in it; a compressed or empty log is not read at all."""
    return why is None or why.startswith(BINARY_DATA)


@derived_fact("node/xid", needs=("node/kernel.log",))
def xid_from_kernel_log(facts: Facts) -> dict[str, Any]:
    log = facts.require("node/kernel.log")
    if isinstance(log, TextSource) and (why := not_text_reason(log)):
        raise FactMissing("node/kernel.log", why)
    return scan_xid(log).to_json(getattr(log, "name", "node/kernel.log"))
