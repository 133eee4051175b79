"""A log given on the command line or stdin, read within bounds, whatever it turns out to be.

`explain` accepts a file, `-`, a pipe (`<(zcat …)`) or a named FIFO. Here that input becomes
something the scanners can read in blocks, with bounds on every axis: gzip expansion, bytes
read from a source of unknown size, line length, time waiting for a FIFO's writer; UTF-16 is read
as text and binary data or devices are refused (BadInput, one line). What was cut is reported by
`LogStream.notes()`.
"""

from __future__ import annotations

import contextlib
import io
import os
import zlib
from pathlib import Path
from typing import Any, BinaryIO

from llmdoctor.engine.textsource import TextSource
from llmdoctor.errors import BadInput
from llmdoctor.input_files import human_size, stat_of

MAX_LINE_BYTES = 1024 * 1024  # a longer line is cut here (and the cut is reported)
LINE_PROBE_BYTES = 4096  # has_line_over's first read at each point it looks near
CUT_IN_LINE = b" [...] "  # where an over-long line's middle was left out
MAX_STREAM_BYTES = 8 * 1024**3  # read at most this much from a pipe, a FIFO or a gzip file
MAX_GZIP_RATIO = 200  # real logs compress 5-50x; far more than this is a decompression bomb
GZIP_RATIO_FROM = 64 * 1024 * 1024  # ... judged once this much has come out
MAX_NUL_PREFIX = 64 * 1024 * 1024  # from a pipe, that many NUL bytes and nothing else: not a log
FIFO_WRITER_WAIT = 10.0  # seconds a named pipe may go without a writer
SNIFF_BYTES = 64 * 1024
BLOCK = 8 * 1024 * 1024
GZIP_MAGIC = b"\x1f\x8b"
BINARY_SHARE = 0.3  # above this share of non-text characters the input is not a log
TEXT_CONTROLS = frozenset("\t\n\r\x0c\x1b\x08")


def looks_binary(sample: bytes) -> bool:
    """True when bytes are not text: many control characters or invalid UTF-8.

    NUL bytes are ignored: a log rotated with copytruncate often starts with a run of them.
    """
    text = sample.replace(b"\x00", b"").decode("utf-8", errors="replace")
    if len(sample) >= 4 and text.endswith("\ufffd"):
        text = text[:-1]  # a character cut by the sample's end
    if not text:
        return False
    bad = sum(1 for c in text if c == "\ufffd" or (c < " " and c not in TEXT_CONTROLS))
    return bad / len(text) > BINARY_SHARE


def utf16_codec(sample: bytes) -> str | None:
    """'utf-16-le' / 'utf-16-be' when the bytes are UTF-16 (a BOM, or ASCII text with every
    other byte NUL, as PowerShell's Out-File and `>` write), else None.
    """
    if sample.startswith(b"\xff\xfe"):
        return "utf-16-le"
    if sample.startswith(b"\xfe\xff"):
        return "utf-16-be"
    head = sample[: 4096 - 4096 % 2]
    if len(head) < 8:
        return None
    even, odd = head[0::2], head[1::2]
    if odd.count(0) > 0.9 * len(odd) and even.count(0) < 0.1 * len(even):
        return "utf-16-le"
    if even.count(0) > 0.9 * len(even) and odd.count(0) < 0.1 * len(odd):
        return "utf-16-be"
    return None


class _Counting:
    """Counts the bytes read through it (the compressed side of a gzip stream)."""

    def __init__(self, raw: BinaryIO):
        self.raw, self.count = raw, 0

    def read(self, n: int = -1) -> bytes:
        data = self.raw.read(n)
        self.count += len(data)
        return data


class LogStream:
    """A log as a bounded binary stream, for scanners that read blocks of lines.

    Whatever the source — a file, a pipe, a FIFO, stdin, gzip — reading it is bounded:
    gzip may expand at most MAX_GZIP_RATIO times, at most MAX_STREAM_BYTES are read from a
    source of unknown size (then `truncated` is set), a line longer than MAX_LINE_BYTES is cut
    there (counted in `lines_cut`), UTF-16 is read as text, and binary data or an endless run
    of NUL bytes is refused (BadInput). `notes()` says what was cut, for the user.
    """

    def __init__(
        self,
        raw: BinaryIO,
        name: str,
        *,
        known_size: int | None = None,
        max_bytes: int | None = None,
        max_line: int | None = None,
    ):
        self.name = name
        self._owned = raw
        self._max_bytes = MAX_STREAM_BYTES if max_bytes is None else max_bytes
        self._max_line = MAX_LINE_BYTES if max_line is None else max_line
        self._bounded = known_size is not None
        self._compressed: _Counting | None = None
        head = _peek(raw, SNIFF_BYTES)
        self._source: Any = raw
        self.compression = None
        if head.startswith(GZIP_MAGIC):
            import gzip

            self._compressed = _Counting(raw)
            self._source = gzip.GzipFile(fileobj=self._compressed, mode="rb")  # type: ignore[arg-type]
            self.compression = "gzip"
            self._bounded = False
        self._pending = b""  # decoded bytes read ahead for sniffing
        self._decoder = None
        self.encoding = "utf-8"
        self.read_bytes = 0  # from the (decompressed) source
        self.lines_cut = 0
        self.truncated = False
        self._run = 0  # bytes of the current line already passed on
        self._skipping = False  # inside an over-long line, discarding up to its newline
        self._tail = b""  # ... all but its last bytes, kept here (at most _tail_keep)
        self._tail_keep = 0
        self._seen_text = False
        self._eof = False
        first = self._read_source(SNIFF_BYTES)
        codec = utf16_codec(first)
        if codec is not None:
            import codecs

            self._decoder = codecs.getincrementaldecoder(codec)(errors="replace")
            self.encoding = codec
            first = self._decode(first)
        elif looks_binary(first):
            self.close()
            # text among binary bytes (a crashed process's dump before its error): `strings`
            # keeps the text; `diagnose` reads such a log's text lines itself
            raise BadInput(
                f"{name}: looks like binary data, not a text log "
                f"(text among binary bytes: strings FILE | llmdoctor explain -)"
            )
        self._pending = first

    # -- reading -----------------------------------------------------------------------------

    def read(self, n: int = -1) -> bytes:
        """Up to about `n` bytes of whole-or-cut lines (b"" at the end)."""
        want = BLOCK if n is None or n < 0 else max(n, 1)
        while True:
            if self._pending:
                chunk, self._pending = self._pending, b""
            elif self._eof:
                return b""
            else:
                chunk = self._read_source(want)
                if self._decoder is not None:
                    chunk = self._decode(chunk, final=not chunk)
                if not chunk:
                    self._eof = True
                    return self._end_cut_line() if self._skipping else b""
            if b"\x00" in chunk:  # copytruncate's NUL runs carry no text; drop them
                chunk = chunk.replace(b"\x00", b"")
            out = self._cap_lines(chunk)
            if out:
                return out

    def _read_source(self, n: int) -> bytes:
        if self._eof:
            return b""
        if not self._bounded and self.read_bytes >= self._max_bytes:
            self.truncated = True
            self._eof = True
            return b""
        if not self._bounded:
            n = min(n, self._max_bytes - self.read_bytes)
        try:
            data = self._source.read(n)
        except EOFError:
            raise BadInput(f"{self.name}: cannot be read (the gzip data is truncated)") from None
        except (OSError, zlib.error) as exc:
            if not self.compression:
                raise
            raise BadInput(f"{self.name}: cannot be read (corrupt gzip data: {exc})") from None
        self.read_bytes += len(data)
        if not self._seen_text and not self._bounded:  # a file of known size ends anyway
            if data.strip(b"\x00"):
                self._seen_text = True
            elif self.read_bytes >= MAX_NUL_PREFIX:
                raise BadInput(
                    f"{self.name}: {MAX_NUL_PREFIX >> 20} MiB of NUL bytes and nothing else; "
                    "not a log (/dev/zero?)"
                )
        compressed = self._compressed.count if self._compressed is not None else 0
        if compressed and self.read_bytes >= max(GZIP_RATIO_FROM, MAX_GZIP_RATIO * compressed):
            raise BadInput(
                f"{self.name}: gzip data expands more than {MAX_GZIP_RATIO}x "
                f"({compressed >> 10} KiB to {self.read_bytes >> 20} MiB so far); "
                "refusing it as a decompression bomb. Decompress it yourself if you trust it"
            )
        return data

    def _decode(self, data: bytes, final: bool = False) -> bytes:
        assert self._decoder is not None
        text = self._decoder.decode(data, final)
        return text.lstrip("\ufeff").encode("utf-8") if text else b""

    def _cap_lines(self, chunk: bytes) -> bytes:
        """The chunk with every line over max_line bytes cut to its head and its tail (the
        error a long JSON record or an echoed prompt ends with), joined by CUT_IN_LINE."""
        limit = self._max_line
        if not self._skipping and _no_line_over(chunk, self._run, limit):
            last = chunk.rfind(b"\n")
            self._run = self._run + len(chunk) if last < 0 else len(chunk) - last - 1
            return chunk
        out = []
        pos = 0
        size = len(chunk)
        while pos < size:
            nl = chunk.find(b"\n", pos)
            if self._skipping:
                end = size if nl < 0 else nl
                if keep_tail := self._tail_keep:
                    self._tail = (self._tail + chunk[max(pos, end - keep_tail) : end])[-keep_tail:]
                if nl < 0:
                    return b"".join(out)
                out.append(self._end_cut_line())
                pos = nl + 1
                continue
            end = size if nl < 0 else nl
            if self._run + (end - pos) > limit:
                # the line keeps its head and its last quarter, `limit` bytes in all (a head
                # already passed on in earlier chunks leaves less room for the tail)
                keep = max(0, limit - limit // 4 - self._run)
                room = limit - self._run - keep - len(CUT_IN_LINE)
                self._tail_keep = min(limit // 4, room) if room > 0 else 0
                mark = CUT_IN_LINE if self._tail_keep else b""
                out.append(chunk[pos : pos + keep] + mark)
                self.lines_cut += 1
                self._skipping, self._run = True, 0
                pos += keep
                continue
            if nl < 0:
                out.append(chunk[pos:])
                self._run += size - pos
                return b"".join(out)
            out.append(chunk[pos : nl + 1])
            self._run = 0
            pos = nl + 1
        return b"".join(out)

    def _end_cut_line(self) -> bytes:
        """The kept tail of the over-long line just ended, with its newline."""
        tail, self._tail, self._skipping, self._run = self._tail, b"", False, 0
        return tail + b"\n"

    def notes(self) -> list[str]:
        """What the user should know about how the input was read: its encoding, the parts of
        it never read (`unread`)."""
        said = []
        if self.encoding != "utf-8":
            said.append(f"{self.name}: read as {self.encoding.upper()} text")
        said.extend(f"{self.name}: not read: {part}" for part in self.unread())
        if self.truncated:  # a file is read whole; a stream, compressed or not, up to the cap
            said[-1] += (
                "; decompress it and pass the file"
                if self.compression
                else "; split it or pass a file"
            )
        return said

    def unread(self) -> list[str]:
        """The parts of the input that were never read, for the report: an answer that found no
        error there must not read as if it had looked at them."""
        said = []
        if self.lines_cut:
            said.append(
                f"the middle of {self.lines_cut} line(s) longer than "
                f"{human_size(self._max_line)} (only their beginning and their end were read)"
            )
        if self.truncated:
            said.append(f"everything after the first {human_size(self._max_bytes)} of the input")
        return said

    def close(self) -> None:
        for stream in (self._source, self._owned):
            with contextlib.suppress(OSError, ValueError, AttributeError):
                stream.close()

    def __enter__(self) -> LogStream:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _no_line_over(chunk: bytes, run: int, limit: int) -> bool:
    """Cheaply: does no line in `chunk` (the first continuing a line of `run` bytes) exceed
    `limit`? Windows of limit/2 bytes each holding a newline bound every line under `limit`;
    on ordinary text each look ends at the first newline, so this costs a few finds a block.
    """
    first = chunk.find(b"\n")
    if first < 0:
        return run + len(chunk) <= limit
    if run + first > limit:
        return False
    step = max(limit // 2, 1)
    for start in range(first + 1, len(chunk) - step + 1, step):
        if chunk.find(b"\n", start, start + step) < 0:
            return False
    return len(chunk) - chunk.rfind(b"\n") - 1 <= limit


def _peek(raw: BinaryIO, n: int) -> bytes:
    peek = getattr(raw, "peek", None)
    if peek is None:
        return b""
    try:
        return peek(n)[:n]
    except (OSError, ValueError):
        return b""


def has_line_over(fd: int, limit: int = MAX_LINE_BYTES) -> bool:
    """Whether the open file `fd` has a line longer than about `limit` bytes, looking only near
    every limit/2-th byte (on a normal log, one page read per half-MiB). Read with pread, not
    mmap: a mapped file's pages, read a few bytes apart, counted as this process's own (the
    kernel maps the page cache around each touch), 190 MiB of RSS for a 192 MiB log. The file
    already open, a log removed meanwhile is still the one read.
    """
    size = os.fstat(fd).st_size
    if size <= limit:
        return False
    step = max(limit // 2, 1)
    return any(not _newline_within(fd, start, step) for start in range(0, size - step, step))


def _newline_within(fd: int, start: int, length: int) -> bool:
    """Whether the file holds a newline in [start, start + length): read a page, then more."""
    read, window = 0, LINE_PROBE_BYTES
    while read < length:
        want = min(window, length - read)
        chunk = os.pread(fd, want, start + read)
        if b"\n" in chunk:
            return True
        if len(chunk) < want:  # the file ends (or shrank) before it
            return False
        read, window = read + want, window * 2
    return False


def open_log(path: str, fifo_wait: float | None = None) -> TextSource | LogStream:
    """A log named on the command line, ready to scan, or BadInput with the reason.

    A plain UTF-8 file with normal lines stays a TextSource (scanned in parallel when big);
    gzip, UTF-16, a file with over-long lines, a pipe (`<(zcat …)`) and a FIFO become a
    bounded LogStream. A device (/dev/zero) is refused; a FIFO with no writer is waited for
    `fifo_wait` seconds, then refused.
    """
    import stat

    if not path:  # Path("") is the current folder
        raise BadInput("no log named: give a FILE, or - for standard input")
    p = Path(path)
    mode = stat_of("", path).st_mode
    if stat.S_ISDIR(mode):
        raise BadInput(f"{path}: is a directory, not a log file")
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) or stat.S_ISSOCK(mode):
        raise BadInput(f"{path}: is a device, not a log file")
    try:
        if stat.S_ISFIFO(mode):
            wait = FIFO_WRITER_WAIT if fifo_wait is None else fifo_wait
            return LogStream(_open_fifo(p, wait), path)
        fh = open(p, "rb")  # noqa: SIM115 - handed to the stream, which closes it
    except OSError as exc:
        raise BadInput(f"{path}: cannot be read ({exc.strerror or exc})") from None
    head = _peek(fh, SNIFF_BYTES)
    try:  # the open file's size: a log removed meanwhile is still the one read
        if (
            head.startswith(GZIP_MAGIC)
            or utf16_codec(head)
            or looks_binary(head)
            or has_line_over(fh.fileno())
        ):
            return LogStream(fh, path, known_size=os.fstat(fh.fileno()).st_size)
    except OSError as exc:
        fh.close()
        raise BadInput(f"{path}: cannot be read ({exc.strerror or exc})") from None
    fh.close()
    return TextSource.from_file(p.name, p)


def open_log_stdin(stream: BinaryIO | None, name: str = "<stdin>") -> LogStream:
    """Standard input as a bounded LogStream (BadInput when it is closed or binary)."""
    if stream is None:
        raise BadInput("standard input is closed: give a FILE, or pipe a log into `explain -`")
    if not hasattr(stream, "peek"):
        stream = io.BufferedReader(stream, SNIFF_BYTES)  # type: ignore[arg-type]
    return LogStream(stream, name)


def _open_fifo(path: Path, wait: float) -> BinaryIO:
    """Open a named pipe without blocking forever: wait up to `wait` seconds for a writer."""
    import fcntl
    import time

    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    deadline = time.monotonic() + wait
    first = b""
    while True:
        try:
            first = os.read(fd, SNIFF_BYTES)
        except BlockingIOError:
            break  # a writer is there; its data is on the way
        if first:
            break
        if time.monotonic() >= deadline:  # EOF: nobody has the pipe open for writing
            os.close(fd)
            raise BadInput(
                f"{path}: a named pipe with no writer (waited {wait:g}s); nothing to read"
            )
        time.sleep(0.05)
    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    raw = io.FileIO(fd, "rb", closefd=True)
    return io.BufferedReader(_Prefixed(first, raw), SNIFF_BYTES)  # type: ignore[arg-type]


class _Prefixed(io.RawIOBase):
    """A raw stream that first returns bytes already read from it."""

    def __init__(self, prefix: bytes, raw):
        self._prefix, self._raw = prefix, raw

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if self._prefix:
            n = min(len(buffer), len(self._prefix))
            buffer[:n] = self._prefix[:n]
            self._prefix = self._prefix[n:]
            return n
        return self._raw.readinto(buffer)

    def close(self) -> None:
        self._raw.close()
        super().close()


def keep_freed_blocks(path: str) -> None:
    """In a short-lived process about to read a big log: ask glibc's allocator to keep the
    memory of freed multi-megabyte buffers (each block read, keyed and split) and reuse it,
    instead of handing it back to the kernel and faulting in fresh zeroed pages for the next
    block (about a fifth of the CPU of reading a crash-loop log). Peak memory is unchanged;
    nothing happens for a small file, or where the C library has no `mallopt` (musl, macOS).
    """
    with contextlib.suppress(OSError, ValueError):
        if os.stat(path).st_size < KEEP_FREED_FROM:
            return
    import ctypes

    with contextlib.suppress(OSError, AttributeError, TypeError):
        mallopt = ctypes.CDLL(None).mallopt
        mallopt(M_MMAP_THRESHOLD, KEEP_FREED_BYTES)
        mallopt(M_TRIM_THRESHOLD, 2 * KEEP_FREED_BYTES)


M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's malloc.h
KEEP_FREED_BYTES = 32 * 1024 * 1024  # glibc's own ceiling for the mmap threshold
KEEP_FREED_FROM = 32 * 1024 * 1024  # a smaller log is read in a few blocks: not worth it
