"""Start a runbook entry from an incident log that `explain` could not explain (the retro loop).

`wiki add --from-log FILE|BUNDLE` reads the log (or every log of an incident bundle) the way
explain does, and pre-fills a draft:

* the symptom: the lines explain judged salient, quoted;
* signatures generalized from the most telling of those lines: numbers, hex, paths, long
  symbols, pod names and timestamps become patterns, the rest stays literal (escaped for RE2,
  Python and `grep -E` alike). Each is proved before it is offered: it compiles, it fires on its
  source line, and it fires on nothing in the shipped healthy corpus;
* an id and a title from the error's own words.

After the entry is written, the salient lines are kept beside it as its examples
(`<id>.examples/<log name>`, never overwriting a file), so `wiki lint` keeps proving the
signatures on them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from llmdoctor.errors import BadInput
from llmdoctor.redact import REDACTED, redact_text

MAX_SIGNATURES = 2
MAX_SYMPTOM_LINES = 8
LITERAL_CHARS = 90  # a signature keeps about this many characters of the message
TITLE_CHARS = 70
ID_WORDS = 6
EXAMPLES_SUFFIX = ".examples"

# the log prefix before the message: timestamps, levels, [file.py:12], (process pid=1)
_PREFIX = re.compile(
    r"^(?:\s*(?:\([^)]{0,80}\)|\[[^\]]{0,80}\]|[0-9][0-9:.,/TZ+-]*[0-9Z]|[A-Z][a-z]{2}"
    r"|[A-Z]{4,8}|[A-Za-z_.-]+\.py:[0-9]+\]?|[a-z0-9.-]+ kernel:|kernel:)(?=\s|$))+\s*"
)
_EXCEPTION = re.compile(r"\b[A-Za-z_][A-Za-z0-9_.]*(?:Error|Exception)\b")
# variable parts of a message, in the order they are tried, and the pattern each becomes
_VARIABLE = (
    (re.compile(re.escape(REDACTED)), r"[^ '\"@]+"),  # a secret the redactor took out
    (re.compile(r"\s{2,}|\t"), " +"),  # column padding (kubectl tables) varies with content
    (
        re.compile(r"\b[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?\b"),
        r"[0-9a-fA-F:.]+",
    ),  # PCI bus id
    (re.compile(r"(?:[A-Za-z]:)?(?:/[^/\s:'\",()\[\]]+){2,}/?"), r"[^ :']+"),
    (re.compile(r"\b0x[0-9a-fA-F]+\b"), r"0x[0-9a-fA-F]+"),
    (
        re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"),
        r"[0-9a-f-]+",
    ),
    (re.compile(r"\b[a-z0-9]+(?:-[a-z0-9]+)*-[a-z0-9]{6,10}-[a-z0-9]{5}\b"), r"[a-z0-9-]+"),
    (re.compile(r"\b(?=[A-Za-z0-9_]*[0-9])[A-Za-z0-9_]{20,}\b"), r"[A-Za-z0-9_]+"),
    (
        re.compile(r"\b(?=[0-9a-fA-F]*[a-fA-F])(?=[0-9a-fA-F]*[0-9])[0-9a-fA-F]{8,}\b"),
        r"[0-9a-fA-F]+",
    ),
    (re.compile(r"'[^'\s]{1,60}'"), r"'[^']*'"),
    (re.compile(r'"[^"\s]{1,60}"'), r'"[^"]*"'),
    (re.compile(r"[0-9]+(?:[.:,][0-9]+)+"), r"[0-9.:,]+"),
    (re.compile(r"[0-9]+"), r"[0-9]+"),
)
_SPECIAL = set("\\.[]()*+?{}|^$")


@dataclass
class LogDraft:
    """What a log proposes for a new entry, and the proof of its signatures."""

    source: str
    salient: list[tuple[str, int, str]] = field(default_factory=list)  # (file, line, text)
    signatures: list[str] = field(default_factory=list)
    rejected: list[tuple[str, str]] = field(default_factory=list)  # (candidate, why)
    explained_by: list[tuple[str, float]] = field(default_factory=list)  # confident entries
    entry_id: str = ""
    title: str = ""

    @property
    def symptom(self) -> str:
        shown = self.salient[-MAX_SYMPTOM_LINES:]
        lines = "\n".join(text for _, _, text in shown)
        seen = log_name(self.source) if self.source == "-" else f"`{Path(self.source).name}`"
        return f"Seen in {seen} (lines explain judged salient):\n\n```\n{lines}\n```"

    def keep_examples(self, folder: Path, text: str) -> Path | None:
        """Once the entry (`text`) is written in `folder`: its examples beside it."""
        import sys

        from llmdoctor.wiki.authoring import strip_editor_comments
        from llmdoctor.wiki.entry import EntryError, parse_entry
        from llmdoctor.wiki.lint import ID_PATTERN

        try:
            entry_id = parse_entry(strip_editor_comments(text), "entry").id
        except EntryError:
            return None
        if not isinstance(entry_id, str) or not ID_PATTERN.match(entry_id):
            return None  # the id names the examples folder: never a path
        try:
            path = write_examples(folder, entry_id, self)
        except OSError as exc:
            print(f"warning: examples not kept: {exc}", file=sys.stderr)
            return None
        print(f"kept the log's salient lines as {path}", file=sys.stderr)
        return path


def message_of(line: str) -> str:
    """The message of a log line, without its timestamp/level/source prefix."""
    from llmdoctor.triage.pasted import clean_line

    text = clean_line(line).strip()
    found = _EXCEPTION.search(text)
    stripped = _PREFIX.sub("", text, count=1)
    if found and found.start() < len(text) - len(stripped):
        return text[found.start() :]  # the prefix ran into the exception name
    return stripped or text


def generalize(line: str) -> str | None:
    """A signature for one log line: its message with the variable parts made patterns, about
    LITERAL_CHARS characters long; None when too little fixed text would be left.
    """
    message = message_of(line)
    pieces: list[tuple[bool, str]] = []  # (literal?, regex text)
    literal = 0
    pos = 0
    while pos < len(message) and literal < LITERAL_CHARS:
        best = None
        for pattern, replacement in _VARIABLE:
            m = pattern.search(message, pos)
            if m and m.end() > m.start() and (best is None or m.start() < best[0].start()):
                best = (m, replacement)
        end = best[0].start() if best else len(message)
        text = message[pos:end]
        if literal + len(text) > LITERAL_CHARS:
            text = text[: LITERAL_CHARS - literal]
            pieces.append((True, text[: max(text.rfind(" "), 0)]))  # never half a word
            break
        pieces.append((True, text))
        literal += len(text)
        if best is None:
            break
        pieces.append((False, best[1]))
        pos = best[0].end()
    while pieces and (not pieces[-1][0] or not pieces[-1][1].strip()):
        pieces.pop()  # a trailing pattern or space pins nothing down
    if pieces:
        pieces[-1] = (True, pieces[-1][1].rstrip())
    signature = "".join(_escape(text) if is_literal else text for is_literal, text in pieces)
    from llmdoctor.wiki.signatures import literal_weight

    return signature if literal_weight(signature) >= 12 else None


def _escape(text: str) -> str:
    return "".join("\\" + c if c in _SPECIAL else c for c in text)


def prove(signature: str, line: str, healthy: list[tuple[str, int, str]]) -> str | None:
    """Why a proposed signature cannot be offered (does not compile, misses its own line,
    fires on a healthy line), or None.
    """
    from types import SimpleNamespace

    from llmdoctor.triage.pasted import clean_line
    from llmdoctor.wiki.lint import evidence_problems, signature_problem
    from llmdoctor.wiki.signatures import SignatureSet

    why = signature_problem(signature)
    if why:
        return why
    one = SignatureSet([SimpleNamespace(id="draft", signatures=[signature], path="")])
    if not one.match_line(clean_line(line)):
        return "it does not fire on the line it was made from"
    problems = evidence_problems([(0, signature)], None, healthy)
    return problems[0][1] if problems else None


def log_name(path: str) -> str:
    """The log as the messages name it: `-` is standard input."""
    return "standard input" if path == "-" else path


def log_sources(path: str) -> Iterator[tuple[str, str]]:
    """(name, path on disk) of the log file, of standard input (`-`), or of every log in an
    incident bundle (folder or .tar.gz): logs/* and node/kernel.log. Each is then read through
    `log_input.open_log`.
    """
    import stat

    from llmdoctor.input_files import stat_of

    if path == "-":  # `kubectl logs POD | llmdoctor wiki add --from-log -`, as explain reads it
        yield "stdin", path
        return
    p = Path(path)
    mode = stat_of("--from-log", path, missing="no such file or folder").st_mode
    bundle_archive = stat.S_ISREG(mode) and p.name.endswith((".tar.gz", ".tgz"))
    if not (stat.S_ISDIR(mode) or bundle_archive):
        yield p.name, path
        return
    from llmdoctor.collectors.bundle import Bundle

    with Bundle(p) as bundle:
        names = [f for f in bundle.files() if f.startswith("logs/") or f == "node/kernel.log"]
        if not names:
            raise BadInput(f"--from-log {path}: the bundle holds no logs/*.log or node/kernel.log")
        for name in names:
            yield name, str(bundle.root / name)


def _explain_log(name: str, file: str, entries: dict, stdin=None):
    """explain's result for one log, read within explain's bounds (devices, FIFOs without a
    writer, gzip bombs and binary data refused; streams capped), and the source read; `stdin`
    is read for the file `-`.
    """
    from llmdoctor.usecases.explain import ExplainRequest, explain_log, print_source_notes

    try:
        result, source, _ = explain_log(
            ExplainRequest(file=file, limit=3, jobs=0, name=name), entries, stdin=stdin
        )
    except BadInput as exc:
        raise BadInput(f"--from-log {exc}") from None
    print_source_notes(source)
    return result, source


def _original_lines(source, numbers: set[int]) -> dict[int, str]:
    """The lines (by number) of a plain text file as written, before explain cleaned them;
    read again line by line and only up to the last line wanted. Only a TextSource (a plain
    UTF-8 file whose lines open_log found of sane length) is read again; a stream cannot be.
    """
    from llmdoctor.engine.textsource import TextSource, split_log_lines
    from llmdoctor.triage.explain import CLEAN_BYTES

    if not numbers or not isinstance(source, TextSource):
        return {}
    last = max(numbers)
    found: dict[int, str] = {}
    try:
        if source.text is not None:
            lines = split_log_lines(source.text)
        elif source.path is not None and source.size_bytes() <= CLEAN_BYTES:
            lines = split_log_lines(source.path.read_bytes().decode("utf-8", "replace"))
        elif source.path is not None:
            with open(source.path, "rb") as fh:
                for n, raw in enumerate(fh, 1):
                    if n in numbers:
                        found[n] = raw.decode("utf-8", "replace").rstrip("\r\n")
                    if n >= last:
                        break
            return found
        else:
            return {}
    except OSError:
        return {}
    return {n: lines[n - 1] for n in numbers if 0 < n <= len(lines)}


def draft_from_log(path: str, entries: dict, stdin=None) -> LogDraft:
    """Read a log (or a bundle's logs) like explain and propose an entry for it.

    Each log goes through explain's bounded reading and scan; only the salient lines explain
    keeps (its last SALIENT_KEPT) are carried further, so memory does not grow with the log.
    """
    from llmdoctor.triage.explain import _looks_like_exception
    from llmdoctor.triage.pasted import clean_line
    from llmdoctor.wiki.lint import healthy_corpus

    draft = LogDraft(source=path)
    empty = True
    for name, file in log_sources(path):
        result, source = _explain_log(name, file, entries, stdin)
        empty = empty and result.empty
        draft.explained_by += [(m.id, m.confidence) for m in result.matches]
        # explain names entries: the error lines none of them quotes are the new lesson; when
        # there are none, their evidence lines are the salient ones, each once (two entries
        # often quote one line) and in the log's order
        salient = (
            result.salient
            or result.unexplained
            or sorted(
                {e.line: e for m in result.matches for e in m.evidence}.values(),
                key=lambda e: e.line,
            )
        )
        originals = _original_lines(source, {e.line for e in salient})
        for e in salient:
            original = originals.get(e.line)
            if original is None or e.text[:200] not in clean_line(original):
                original = e.text  # a stream, or a line explain joined: its cleaned text
            # a log carries tokens and URL passwords: none may reach the entry, its examples,
            # its signatures or the notes printed about them
            draft.salient.append((name, e.line, redact_text(original)))
    if not draft.salient:
        what = "it is empty" if empty else "no line in it looks like an error"
        raise BadInput(
            f"--from-log {log_name(path)}: {what}, so there is nothing to start an entry from"
        )
    exceptions = [s for s in draft.salient if _looks_like_exception(message_of(s[2]))]
    candidates = list(reversed(exceptions or draft.salient))
    healthy = healthy_corpus()
    seen: set[str] = set()
    for _, _, line in candidates:
        if len(draft.signatures) >= MAX_SIGNATURES:
            break
        signature = generalize(line)
        if signature is None or signature in seen:
            continue
        seen.add(signature)
        why = prove(signature, line, healthy)
        if why:
            draft.rejected.append((signature, why))
        else:
            draft.signatures.append(signature)
    main = message_of(candidates[0][2])
    draft.title = _title(main)
    draft.entry_id = _slug(main)
    return draft


def _title(message: str) -> str:
    text = " ".join(message.split())
    return text if len(text) <= TITLE_CHARS else text[: TITLE_CHARS - 1].rsplit(" ", 1)[0] + "…"


def _slug(message: str) -> str:
    words = re.findall(r"[a-z]+", re.sub(r"(?<=[a-z])(?=[A-Z])", " ", message).lower())
    words = [w for w in words if len(w) > 1][:ID_WORDS]
    return "-".join(words)[:48].strip("-") or "new-entry"


def write_examples(folder: Path, entry_id: str, draft: LogDraft) -> Path:
    """Keep the salient lines beside the entry, as `<id>.examples/<log name>` with a SOURCES.md
    line; an existing file is never overwritten (a numbered name is used instead).
    """
    examples = folder / f"{entry_id}{EXAMPLES_SUFFIX}"
    examples.mkdir(exist_ok=True)
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", Path(draft.source).name).strip("-") or "incident"
    stem = stem.removesuffix(".gz").removesuffix(".log")
    target = examples / f"{stem}.log"
    n = 2
    while target.exists():
        target = examples / f"{stem}-{n}.log"
        n += 1
    lines = "\n".join(text for _, _, text in draft.salient) + "\n"
    with open(target, "x", encoding="utf-8") as fh:
        fh.write(lines)
    where = ", ".join(sorted({f"{name}" for name, _, _ in draft.salient}))
    with open(examples / "SOURCES.md", "a", encoding="utf-8") as fh:
        fh.write(
            f"| {target.name} | {draft.source} ({where}) | salient lines kept by "
            "`llmdoctor wiki add --from-log` |\n"
        )
    return target


def hinted_lines(draft: LogDraft, entries: dict) -> list[tuple[str, str]]:
    """(entry id, line) for each salient line that an existing entry's hint (or one-word
    signature) matches while no signature of it does: weak evidence, whoever writes it down.
    """
    from llmdoctor.wiki.signatures import SignatureSet

    scanner = SignatureSet(entries.values())
    found: list[tuple[str, str]] = []
    for _, _, line in draft.salient:
        fired = scanner.matching(line)
        strong = scanner.strong_ids(fired)
        weak = {scanner.patterns[i][0] for i in fired} - strong
        found += [(entry_id, line) for entry_id in sorted(weak)]
    return found


def prefill(path: str, given: dict, wiki_dirs: list[str] | None, stdin=None) -> LogDraft:
    """Fill the `wiki add` fields the user did not give from a log; say on stderr what was
    read, proposed and rejected. Returns the draft (its `keep_examples` runs once written).
    """
    import sys

    from llmdoctor.wiki.library import load_library

    entries = load_library(wiki_dirs).entries
    draft = draft_from_log(path, entries, stdin)
    out = sys.stderr
    for entry_id, line in hinted_lines(draft, entries):
        print(
            f"note: {line.strip()[:160]!r} is only a hint of {entry_id} (lines any such failure "
            "prints, proof of nothing): a signature made from it is as weak; consider listing "
            "it under hints: instead",
            file=out,
        )
    known = ", ".join(f"{i} ({c:.2f})" for i, c in draft.explained_by)
    if known:
        print(f"note: explain already names {known} for this log", file=out)
    # what the user gave is kept as given (below): say so rather than announce what is not used
    if given.get("symptom"):
        print("the symptom is yours (--symptom); the log's salient lines are not added", file=out)
    else:
        print(
            f"{len(draft.salient)} salient line(s) from {log_name(path)} go into the symptom",
            file=out,
        )
    for signature in [] if given.get("signatures") else draft.signatures:
        print(f"proposed signature (fires on the log, on no healthy line): {signature}", file=out)
    for signature, why in draft.rejected:
        print(f"not proposed: {signature}: {why}", file=out)
    defaults = {
        "entry_id": draft.entry_id,
        "title": draft.title,
        "signatures": draft.signatures,
        "symptom": draft.symptom,
    }
    for key, value in defaults.items():
        if not given.get(key) and value:
            given[key] = value
    return draft
