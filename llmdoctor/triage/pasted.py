"""Undo what terminals, web pages and log shippers do to a pasted log, before it is read.

* ANSI colour and cursor codes (``\\x1b[31mERROR\\x1b[0m``) are removed;
* HTML entities from a copied web page or a JSON-escaped message (``&quot;``, ``&#39;``) are
  decoded;
* docker-compose's ``service-1  | `` prefix is removed;
* a structured log record (Docker's json-file ``{"log": "...\\n", "stream": ...}``, or a JSON
  line with a ``message`` / ``msg`` / ``MESSAGE`` / ``textPayload`` field, as log shippers and
  cloud consoles export them) is replaced by its message, one line per line of the message;
* lines a terminal or a web form wrapped at a fixed width (several lines of exactly the same,
  longest length) are joined back, so a signature split by the wrap matches again; in a short
  paste, one or two lines folded once are read joined beside their pieces where that heals a
  signature the fold split (`folded_once`);
* a record Rich's logging handler wrapped in its message column (the source file at the right
  of its first line) is read joined where that heals a signature (`rich_logged`);
* a line Rich wrapped inside the panels of a pretty traceback or an error box (`│ │ input = <repr-error 'CUDA
  error: no kernel image is available for  │ │` / `│ │  execution on the device …  │ │`) is
  read joined to the next, frames dropped, where that heals a signature (`boxed`); a panel's
  lines and edges are no fixed-width wrap;
* a Markdown code span or block inside a sentence (``I get ```RuntimeError: ...``` when``) is
  read as its own line, so a signature anchored at the line's start matches it;
* a row of `kubectl describe`'s Events table is followed by its Message column alone;
* an error body pasted as JSON or a Python dict (``Error code: 400 - {'object': 'error',
  'message': "..."}``, ``{"error": {"message": "..."}}``) is followed by its message, unescaped.

The added lines keep the number of the line they come from.
Line numbers keep pointing at the input: a joined line keeps the number of its first piece.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable

from llmdoctor.engine.textsource import UTF8_BOM, split_log_lines
from llmdoctor.wiki.digit_blind import TEXT_DIGITS_TO_ZERO

ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][A-Z0-9]|\x1b[=>]")
COMPOSE_PREFIX = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*(?:[-_][0-9]+)? {1,40}\| ")
# FastChat's servers hand everything written to stderr (uvicorn's start-up, warnings, tracebacks)
# to a logger named `stderr` at level ERROR, stdout to `stdout` at INFO (fastchat/utils.py
# build_logger): the level says where a line was written, not how bad it is; the line is what
# follows
STREAM_LOGGER_PREFIX = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2} \| (ERROR|INFO) \| (stderr|stdout) \| "
)
# ... behind what kubectl (`--timestamps`, `--prefix`), journald or a collector puts in front
STREAM_LOGGER_WITHIN = 240
ENTITY = re.compile(r"&(?:quot|amp|lt|gt|apos|nbsp|#[0-9]{1,6}|#x[0-9a-fA-F]{1,5});")
# the fields that hold the message in Docker's json-file, journald's JSON export, Fluent Bit /
# Vector / Loki records and Cloud Logging (GKE) exports, in that order of preference
MESSAGE_FIELDS = ("log", "message", "msg", "MESSAGE", "textPayload")
# a record's fields that say why, added after its message
ERROR_FIELDS = ("error", "err", "exception", "exc_info", "stack_trace", "stacktrace")
MAX_RECORD_CHARS = 64 * 1024  # a longer line is kept as it is, never parsed
# a narrow pane or a phone folds at 40-59 columns too (the corpus unfolded: the same answers)
MIN_WRAP_WIDTH = 40
MIN_WRAPPED_LINES = 3
MAX_FOLDED_ONCE_LINES = 40  # a paste this short may be one or two lines folded (folded_once)
WORD_WRAP_PIECES = 3  # a sentence wrapped at a word is read whole across at most this many lines
# ... when it opens as an error record does: an exception's name or a level word (a status
# report's `0 uncorrectable ECC error` / `encountered this week` is no log line wrapped)
EXCEPTION_NAME = re.compile(r"[A-Za-z](Error|Exception)\b")
WRAPPED_ERROR = re.compile(
    EXCEPTION_NAME.pattern + r"|\b(ERROR|FATAL|CRITICAL)\b"
    # an error an API client prints (OpenAI's Python client: `Error code: 400 - …`)
    r"|(^|\s)Error( code)?: "
)
RECORD_START = 8
# the sides of the panels Rich draws around a pretty traceback and its locals (its ROUNDED and
# HEAVY boxes): a long value wraps inside them, a frame on either side of each piece
BOX_SIDES = "│┃"
BOX_EDGE = re.compile(r"[─━╭╮╰╯┏┓┗┛]")
PANEL_CORNERS = "╭╮╰╯┏┓┗┛"
PANEL_CHARS = BOX_SIDES + PANEL_CORNERS
PREFIX_WITHIN = 100  # a log prefix before a panel's line (a time, a pod, a process tag)
# the title of a pretty traceback's panel, of its locals' or of an error's (`╭─── Traceback (most
# recent call last) ───╮`, `╭──── locals ────╮`, typer's `╭─ Error ─╮`), or a framed line naming
# an exception (a CLI's error box, Modal's `│ GatedRepoError('401 Client Error. …`): only then
# are framed lines read joined (a start-up banner's or a chart's tip panel wraps prose as well,
# and that prose is no error)
TRACEBACK_PANEL = re.compile(r"[╭┏][─━]+ (Traceback|locals|Error) ")
# a line that opens a log record: a level word, a date or a time first (`INFO:     10.0.0.1`,
# `ERROR 09-03 …`, `2025-03-24 18:30:59`, `[2026-04-13 19:52:24]`)
RECORD_OPENING = re.compile(
    r"^\[?(?:(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)\b"
    r"|[0-9]{4}-[0-9]{2}-[0-9]{2}|[0-9]{2}:[0-9]{2}:[0-9]{2})"
)
FENCE = "```"
# kubectl describe's Events header, and its rows: Type, Reason, Age, From, Message (columns
# two or more spaces apart; the Age column holds single spaces: `2m (x10 over 5m)`)
EVENTS_HEADER = re.compile(r"^\s*Type\s{2,}Reason\s{2,}Age\s{2,}From\s{2,}Message\s*$")
EVENT_ROW = re.compile(r"^\s*(Normal|Warning)\s{2,}")
COLUMNS = re.compile(r"\s{2,}")
# the message of an error body: a JSON or Python-dict string field named message / detail /
# msg (each branch consumes different characters: linear time, whatever the line)
BODY_MESSAGE = (
    re.compile(r'"(?:message|detail|msg)"\s*:\s*"((?:[^"\\]|\\.)*+)"'),
    re.compile(r"'(?:message|detail|msg)'\s*:\s*'((?:[^'\\]|\\.)*+)'"),
    re.compile(r"'(?:message|detail|msg)'\s*:\s*\"((?:[^\"\\]|\\.)*+)\""),
)
ESCAPES = {"n": "\n", "t": " ", '"': '"', "'": "'", "\\": "\\", "/": "/"}
ESCAPE = re.compile(r"\\(.)")


def clean_line(line: str) -> str:
    """One line without colour codes, HTML entities, a docker-compose prefix or FastChat's
    stream-logger prefix."""
    if "\x1b" in line:
        line = ANSI.sub("", line)
    if "&" in line and ENTITY.search(line):
        line = html.unescape(line)
    return _without_prefixes(line).rstrip("\r")


def _without_prefixes(line: str) -> str:
    """The line without a docker-compose prefix and FastChat's stream-logger prefix."""
    return _without_stream_logger_prefix(_without_compose_prefix(line))


def _without_compose_prefix(line: str) -> str:
    return COMPOSE_PREFIX.sub("", line, count=1) if " | " in line[:60] else line


def compose_services(raw_lines: list[str]) -> dict[int, str]:
    """The docker-compose service each input line (numbered from 1) came from, when lines of two
    or more services are interleaved (`docker compose logs`): the prefix is cleaned off each
    line, yet one service's start or stop says nothing of another's lines. {} for a single
    service's log (every line is its own). A level word before `| ` is a logger's column."""
    services = {}
    for number, line in enumerate(raw_lines, 1):
        # compose v1 colours the name and the bar: `ESC[36mvllm_1  |ESC[0m `
        if "\x1b" in line[:80]:
            line = ANSI.sub("", line)
        if " | " not in line[:60]:
            continue
        found = COMPOSE_PREFIX.match(line)
        if found and (name := found.group().split(" ", 1)[0]).upper() not in LEVEL_WORDS:
            services[number] = name
    return services if len(set(services.values())) > 1 else {}


LEVEL_WORDS = {"TRACE", "DEBUG", "INFO", "NOTICE", "WARN", "WARNING", "ERROR", "CRITICAL", "FATAL"}


def _without_stream_logger_prefix(line: str) -> str:
    head = line[:STREAM_LOGGER_WITHIN]
    if "| stderr | " not in head and "| stdout | " not in head:
        return line
    found = STREAM_LOGGER_PREFIX.search(line, 0, STREAM_LOGGER_WITHIN)
    return line[: found.start()] + line[found.end() :] if found else line


def record_message(line: str) -> str | None:
    """The message of a JSON log record (it may span lines), or None when the line is not one.

    Its error fields (containerd's `error`, a logger's `exception` or `stack_trace`) follow it,
    as `key=value`: they often say why. journald writes a message holding control bytes as an
    array of byte values; it is decoded. A lone UTF-16 surrogate (a record cut mid-character)
    becomes U+FFFD.
    """
    text = line.strip()
    if not (text.startswith("{") and text.endswith("}")) or len(text) > MAX_RECORD_CHARS:
        return None
    try:
        record = json.loads(text)
    except ValueError:
        return None
    if not isinstance(record, dict):
        return None
    message = next((m for f in MESSAGE_FIELDS if (m := _text(record.get(f))) is not None), None)
    if message is None:
        return None
    extra = [f"{key}={value}" for key in ERROR_FIELDS if (value := _text(record.get(key)))]
    message = " ".join([message.rstrip("\n"), *extra]) if extra else message.rstrip("\n")
    return message.encode("utf-8", "surrogatepass").decode("utf-8", "replace")


def _text(value) -> str | None:
    if isinstance(value, str):
        return value
    if (
        isinstance(value, list)
        and value
        and all(isinstance(b, int) and 0 <= b < 256 for b in value)
    ):
        return bytes(value).decode("utf-8", "replace")  # journald's bytes form
    return None


def looks_like_records(head: bytes, sample: int = 5) -> bool:
    """Whether a log is JSON records: the first `sample` non-empty whole lines of its head are."""
    whole = head.removeprefix(UTF8_BOM).split(b"\n")[:-1]  # the last piece may be cut
    lines = [ln for ln in whole[: sample * 4] if ln.strip()][:sample]
    return bool(lines) and all(
        record_message(ln.decode("utf-8", "replace")) is not None for ln in lines
    )


class RecordLines:
    """A binary stream of JSON log records read as their messages: one line per record (a
    message's own newlines become spaces, so line numbers stay the input's); a line that is not
    a record passes as it is. Used for logs too big to clean whole.
    """

    def __init__(self, raw, owned: bool = False):
        from llmdoctor.wiki.signatures import read_blocks

        self._raw, self._owned = raw, owned
        self._blocks = read_blocks(raw)
        self._buffer = b""
        self._started = False

    def close(self) -> None:
        """Close the underlying file when this stream opened it."""
        if self._owned:
            self._raw.close()

    def read(self, size: int = -1) -> bytes:
        while size < 0 or len(self._buffer) < size:
            block = next(self._blocks, None)
            if block is None:
                break
            if not self._started:
                self._started, block = True, block.removeprefix(UTF8_BOM)
            self._buffer += self._convert(block)
        if size < 0:
            out, self._buffer = self._buffer, b""
        else:
            out, self._buffer = self._buffer[:size], self._buffer[size:]
        return out

    @staticmethod
    def _convert(block: bytes) -> bytes:
        out = []
        for raw in block.split(b"\n"):
            message = record_message(raw.decode("utf-8", "replace")) if raw[:1] == b"{" else None
            out.append(raw if message is None else message.replace("\n", " ").encode("utf-8"))
        return b"\n".join(out)


def _padded(line: str) -> bool:
    """Whether a line ends in spaces a writer padded it with (Rich pads every line of its log to
    the console's width): the text ended before the edge, no wrap cut it there."""
    return line.endswith("  ")


def wrap_width(lines: list[str]) -> int | None:
    """The width a pasted text was hard-wrapped at: the longest line length, when at least
    three different lines have exactly it (a wrap leaves many lines of one length); else None.
    """
    # a Rich panel's lines and its edges share its width and are no wrap: `boxed` reads them;
    # nor are a Rich log's records, each padded to the console's width (`rich_logged`)
    boxes = _has_panels(lines)
    lengths = [
        len(line)
        for line in lines
        if line
        and not _padded(line)
        and not (boxes and (_framed(line) or _edge(line)))
        and not (".py:" in line and _rich_record(line))
    ]
    if not lengths:
        return None
    width = max(lengths)
    if width < MIN_WRAP_WIDTH or lengths.count(width) < MIN_WRAPPED_LINES:
        return None
    # the pieces of a wrap differ; one line repeated (a crash loop's error, its numbers
    # changing: same length, same shape) is no wrap
    if len({line.translate(TEXT_DIGITS_TO_ZERO) for line in lines if len(line) == width}) < (
        MIN_WRAPPED_LINES
    ):
        return None
    return width


def folded_once(
    raw: list[str], width: int | None, heals: Callable[[str, list[str]], bool] | None
) -> dict[int, str]:
    """In a short paste with no wrap found (`width` None), each line as long as the longest one
    (at least MIN_WRAP_WIDTH) that a fold may have cut, with the lines after it, where `heals`
    says the joined text matches what its pieces do not (a signature the fold split): {its
    number: the pieces joined}. One or two long lines folded at a narrow width leave too few
    lines of that width to prove a wrap; the joined text is read beside the pieces."""
    if heals is None or width is not None or len(raw) > MAX_FOLDED_ONCE_LINES:
        return {}
    joined = _word_wrapped(raw, heals)
    lengths = [len(line) for line in raw]
    longest = max(lengths, default=0)
    if longest < MIN_WRAP_WIDTH:
        return joined
    for i, length in enumerate(lengths[:-1]):
        if length != longest or not raw[i + 1].strip() or (i and lengths[i - 1] == longest):
            continue
        if not _cut_by_fold(raw[i], raw[i + 1]):
            continue
        if _record_start(raw[i]) == _record_start(raw[i + 1]):
            continue  # the next line opens a record as this one does (its time, its level)
        j = i + 1
        while lengths[j] == longest and j + 1 < len(raw) and raw[j + 1].strip():
            j += 1
        pieces = raw[i : j + 1]
        if heals("".join(pieces), pieces):
            joined[i + 1] = "".join(pieces)
    return joined


def _word_wrapped(raw: list[str], heals: Callable[[str, list[str]], bool]) -> dict[int, str]:
    """Lines a mail client, a forum or a person wrapped at a word (`OutOfMemoryError: 1 worker(s)
    were killed due to the node` / `running low on memory.`): a line that opens as an error
    record (WRAPPED_ERROR) and ends in a word, and the lines after it that go on in lower case
    (or with a command-line flag, `--tool-call-parser to be set`),
    joined with a space where `heals` says that makes a signature match that the pieces do not.
    Widths vary, so no fixed-width wrap proves it."""
    joined: dict[int, str] = {}
    i = 0
    while i < len(raw) - 1:
        j = i
        while (
            j + 1 < len(raw)
            and j - i + 1 < WORD_WRAP_PIECES
            and raw[j].rstrip()[-1:].isalnum()
            and (raw[j + 1][:1].islower() or raw[j + 1].startswith("--"))
        ):
            j += 1
        if j > i and WRAPPED_ERROR.search(raw[i]):
            pieces = raw[i : j + 1]
            sentence = " ".join(p.rstrip() for p in pieces)
            if heals(sentence, pieces):
                joined[i + 1] = sentence
        i = j + 1
    return joined


# a record Rich's logging handler (RichHandler) wrote: its time (left out, padded, when it has
# not changed), its level, the message's first piece, the source file and line at the right
# (`[10/21/24 06:53:04] ERROR    ['distilabel.pipeline'] ❌ Failed to   local.py:302`); read as
# its opening (RICH_OPENING) and its last word (RICH_SOURCE), each matched alone: no pattern
# spans the run of spaces between them
RICH_OPENING = re.compile(
    r"(?:\[[^\]]{1,40}\] +| {8,40})(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) +(?=\S)"
)
RICH_SOURCE = re.compile(r"[A-Za-z0-9_.-]{1,80}\.py:[0-9]{1,6}")
RICH_PIECES = 8  # the lines of one record Rich wrapped in its message column, read joined


def _rich_record(line: str) -> tuple[str, int] | None:
    """A Rich record's first line: (the message's first piece, the message column's width: from
    the message's start to the source file's), or None."""
    line = line.rstrip()
    if not line.endswith(tuple("0123456789")) or (opening := RICH_OPENING.match(line)) is None:
        return None
    head, _, source = line.rpartition(" ")
    if not RICH_SOURCE.fullmatch(source) or len(head) <= opening.end():
        return None
    return head[opening.end() :].rstrip(), len(head) - opening.end()


def rich_logged(raw: list[str], heals: Callable[[str, list[str]], bool] | None) -> dict[int, str]:
    """Records Rich's logging handler wrapped in its message column, between the level and the
    source file (`❌ Failed to` / `load step` / `'…': Step` / `load failed: The number of
    required` / `GPUs exceeds the total number of` / …): the message's first piece and up to
    RICH_PIECES - 1 lines after it, joined with a space where `heals` says that makes a
    signature match that the pieces do not. A piece is followed by the next line only where
    Rich would have had to wrap there: the next line's first word does not fit beside it in the
    column (as wide as the record's first line shows it, or its longest piece where a copy
    lost the padding); a blank line or a record ends it.
    """
    joined: dict[int, str] = {}
    if heals is None:
        return joined
    for i, line in enumerate(raw):
        if ".py:" not in line or (record := _rich_record(line)) is None:
            continue
        message, width = record
        pieces = [message]
        following = []
        for text in raw[i + 1 : i + RICH_PIECES]:
            if not text.strip() or RECORD_OPENING.match(text) or _rich_record(text) is not None:
                break
            following.append(text.strip())
        width = max([width, *map(len, following)])
        for text in following:
            if len(pieces[-1]) + 1 + len(text.split(" ", 1)[0]) <= width:
                break  # it would have fit on the line before: no wrap put it here
            pieces.append(text)
        sentence = " ".join(pieces)
        if len(pieces) > 1 and heals(sentence, pieces):
            joined[i + 1] = sentence
    return joined


def boxed(raw: list[str], heals: Callable[[str, list[str]], bool] | None) -> dict[int, str]:
    """Lines inside the panels of a Rich pretty traceback (its frames, its locals) whose text
    Rich wrapped at the panel's width: each line's text without its frames, joined with up to
    WORD_WRAP_PIECES - 1 framed lines after it where `heals` says that makes a signature match
    that the pieces do not, and the join starting one line later does not: {its number: the
    pieces joined}; and the exception's lines under the outer panel's bottom edge, which Rich
    wraps at the console's width, likewise. Only in a paste that shows such a panel's title
    (TRACEBACK_PANEL) or a framed line naming an exception (EXCEPTION_NAME)."""
    if heals is None or not _has_panels(raw):
        return {}
    texts = [_box_text(line) for line in raw]
    if not any(TRACEBACK_PANEL.search(line) for line in raw if "─" in line) and not any(
        text and EXCEPTION_NAME.search(text) for text in texts
    ):
        return {}
    joined: dict[int, str] = {}
    i = 0
    while i < len(texts):
        pieces = [texts[i]] if texts[i] else []
        for following in texts[i + 1 : i + WORD_WRAP_PIECES] if pieces else ():
            if not following:
                break
            pieces.append(following)
            if heals(" ".join(pieces), pieces):
                # a piece before the value's start (the tail of the local above it) is left out
                if len(pieces) > 2 and heals(" ".join(pieces[1:]), pieces[1:]):
                    break
                joined[i + 1] = " ".join(pieces)
                i += len(pieces) - 1
                break
        i += 1
    # the exception's line under the outer panel, wrapped by Rich at the console's width (each
    # line behind the prefix the panel's edge has, of the same length)
    for i, line in enumerate(raw[:-1]):
        at = _panel_start(line)
        if at >= 0 and line[at] in "╰┗" and _edge(line):
            pieces = [p[at:].strip() for p in raw[i + 1 : i + 1 + WORD_WRAP_PIECES]]
            pieces = [p for p in pieces if p]
            for n in range(2, len(pieces) + 1):
                if heals(" ".join(pieces[:n]), pieces[:n]):
                    joined.setdefault(i + 2, " ".join(pieces[:n]))
                    break
    return joined


def _has_panels(lines: list[str]) -> bool:
    """Whether any line holds a panel's side (every Rich panel has them)."""
    return any("│" in line or "┃" in line for line in lines)


def _panel_start(line: str) -> int:
    """Where a panel's part of a line begins: its first side or corner, behind at most a log
    prefix of PREFIX_WITHIN characters (`kubectl logs --timestamps`' time, CRI's `… stderr F`,
    a vLLM worker's `(VllmWorker TP0 pid=…)`, stern's pod and container); -1 where none."""
    head = line[:PREFIX_WITHIN]
    return min((i for c in PANEL_CHARS if (i := head.find(c)) >= 0), default=-1)


def _panel_part(line: str, ends: str) -> str | None:
    """The line from its panel's first side or corner on (behind a log prefix), when that part
    begins and ends with one of `ends`; else None."""
    at = _panel_start(line)
    text = line[at:].rstrip() if at >= 0 else ""
    return text if len(text) >= 3 and text[0] in ends and text[-1] in ends else None


def _edge(line: str) -> bool:
    """Whether a line is a Rich panel's top or bottom edge (`╭──── Traceback … ────╮`)."""
    return _panel_part(line, PANEL_CORNERS) is not None


def _framed(line: str) -> bool:
    """Whether a line is framed on both sides by a Rich panel's sides (behind a log prefix)."""
    return _panel_part(line, BOX_SIDES) is not None


def _box_text(line: str) -> str | None:
    """The text of a line framed by a Rich panel's sides, or None."""
    if (framed := _panel_part(line, BOX_SIDES)) is None:
        return None
    text = framed.strip(BOX_SIDES + " ")
    # a nested panel's top or bottom edge (`╭──── locals ────╮`) holds no text of a value
    return text if text and not BOX_EDGE.match(text) else None


def _cut_by_fold(line: str, following: str) -> bool:
    """Whether `following` may be the rest of `line`, cut at a fixed width: through a word,
    or just before or after one space (a line of its own ends a sentence or is indented)."""
    if line[-1:].isalnum() and following[:1].isalnum():
        return True
    if following[:1] == " " and following[1:2] not in (" ", ""):
        return line[-1:] not in (" ", "")
    return line[-1:] == " " and line[-2:-1] not in (" ", "") and following[:1].isalnum()


def _record_start(line: str) -> str:
    """A line's first characters, digits blind: two records of one log start alike
    (`11月 15 14:15:47`, `INFO 09-04`), a folded line's next piece mid-text does not."""
    return line[:RECORD_START].translate(TEXT_DIGITS_TO_ZERO)


def code_pieces(line: str) -> list[str]:
    """A line holding a Markdown code fence, as its pieces on either side of each fence (a
    fence's language tag dropped): `see ```KeyError: x``` here` -> ["see", "KeyError: x",
    "here"]. A line without one comes back whole.
    """
    if FENCE not in line:
        return [line]
    pieces = [p.strip() for p in line.split(FENCE)]
    return [p for p in pieces if p and not re.fullmatch(r"[A-Za-z0-9_+-]{1,12}", p)] or [""]


def event_message(row: str) -> str | None:
    """The Message column of a `kubectl describe` Events row, or None when it has none."""
    if not EVENT_ROW.match(row):
        return None
    cells = COLUMNS.split(row.strip(), maxsplit=4)
    return cells[4] if len(cells) == 5 and cells[4] else None


def body_messages(line: str) -> list[str]:
    """The messages of the error bodies (JSON or a Python dict) in a line, unescaped, one per
    line of each message."""
    if "message" not in line and "detail" not in line and "msg" not in line:
        return []
    out: list[str] = []
    for pattern in BODY_MESSAGE:
        for m in pattern.finditer(line):
            text = ESCAPE.sub(lambda e: ESCAPES.get(e.group(1), e.group(0)), m.group(1))
            out.extend(piece.strip() for piece in text.split("\n") if piece.strip())
    return out


def clean_lines(
    text: str, heals: Callable[[str, list[str]], bool] | None = None
) -> list[tuple[int, str]]:
    """(number of the line in the input, cleaned text) for every line, wrapped lines joined,
    code spans, Events messages and error bodies read as lines of their own; `heals`: see
    folded_once."""
    out: list[tuple[int, str]] = []
    in_events = False
    for number, line in _joined_lines(text, heals):
        in_events = bool(EVENTS_HEADER.match(line)) or (in_events and bool(line.strip()))
        for piece in code_pieces(line):
            out.append((number, piece))
            if in_events and (message := event_message(piece)) is not None:
                out.append((number, message))
            out.extend((number, message) for message in body_messages(piece))
    return out


def _joined_lines(
    text: str, heals: Callable[[str, list[str]], bool] | None
) -> list[tuple[int, str]]:
    """(number of the line in the input, cleaned text) for every line, wrapped lines joined."""
    raw = split_log_lines(text)
    lines = [clean_line(line) for line in raw]
    width = wrap_width(raw)
    maybe = boxed(lines, heals) | folded_once(lines, width, heals) | rich_logged(lines, heals)
    out: list[tuple[int, str]] = []
    joining = False
    for number, (original, line) in enumerate(zip(raw, lines, strict=True), 1):
        record = _without_prefixes(original)
        message = record_message(record) if record.lstrip()[:1] == "{" else None
        if message is not None:  # a record keeps its line number for each of its lines
            out.extend((number, clean_line(piece)) for piece in message.split("\n"))
            joining = False
            continue
        if joining and out and not _opens_a_record(lines[number - 2], line):
            first, joined = out[-1]
            out[-1] = (first, joined + line)
        else:
            out.append((number, line))
        if number in maybe:
            out.append((number, maybe[number]))  # (pieces of lines cleaned already)
        joining = width is not None and len(original) == width and not _padded(original)
    return out


def _opens_a_record(line: str, following: str) -> bool:
    """Whether `following`, after a line as long as a wrap's width, is a record of its own and
    no piece of that line: it opens as a record does (its level, its date or time) where the
    line ends as no fold cuts (V1's `Request chatcmpl-… failed (engine dead).` lines, all one
    length, had each swallowed the access log's `INFO:     … 500` line after it)."""
    return not _cut_by_fold(line, following) and RECORD_OPENING.match(following) is not None
