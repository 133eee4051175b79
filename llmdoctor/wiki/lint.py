"""Check runbook entries: schema, sections, ids, signatures. Problems are `file:line: message`.

The same rules guard `wiki lint` (CI) and `wiki add` (before anything is written). Signatures
must compile in RE2 (the engine that matches them, in linear time) and in Python `re`; they must
never fire on the healthy corpus shipped in llmdoctor/data/healthy/ (real logs of working
systems), and when an entry keeps real excerpts beside it (`<id>.examples/` next to `<id>.md`),
each of its signatures must fire on at least one line of them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from llmdoctor.terminal_text import hidden_characters, visible
from llmdoctor.wiki.entry import (
    HOLDING_KEYS,
    SEVERITIES,
    EntryError,
    RunbookEntry,
    parse_entry,
    split_front_matter,
)
from llmdoctor.wiki.fix_params import PARAMETERS, SUBJECT_KINDS, parameters_in, step_tag

KNOWN_KEYS = (
    "id", "title", "severity", "tags", "aliases", "signatures", "hints", "detected_by", "explains",
    "applies_to", "ruled_out_by", "overruled_by", "at_startup",
)  # fmt: skip
LIST_KEYS = (
    "tags", "aliases", "signatures", "hints", "detected_by", "explains", "applies_to",
    "ruled_out_by", "overruled_by",
)  # fmt: skip
REQUIRED_SECTIONS = ("symptom", "cause", "fix")
ID_PATTERN = re.compile(r"^[a-z0-9]+(?:[-_][a-z0-9]+)*$")
# zero-width matches on ordinary lines betray a signature that would fire everywhere
EMPTY_PROBES = ("", "x", "INFO 05-01 12:00:00 engine.py:310] Avg prompt throughput: 0.0 tokens/s")


@dataclass(frozen=True)
class LintProblem:
    """One problem (`level` 'error') or remark (`level` 'note', e.g. an override)."""

    file: str
    line: int
    message: str
    level: str = "error"

    def __str__(self) -> str:
        prefix = "note: " if self.level == "note" else ""
        return f"{self.file}:{self.line}: {prefix}{self.message}"

    def to_json(self) -> dict:
        return {"file": self.file, "line": self.line, "level": self.level, "message": self.message}


@dataclass
class LintReport:
    problems: list[LintProblem] = field(default_factory=list)
    notes: list[LintProblem] = field(default_factory=list)
    files: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems


def _fix_line(entry: RunbookEntry, body_line: int, offset: int) -> int:
    """The file line of the Fix section's `offset`-th line (the section starts at its first
    non-blank line after the heading)."""
    heading = entry.section_lines["fix"]
    lines = entry.body.splitlines()
    first = heading - body_line + 1
    while first < len(lines) and not lines[first].strip():
        first += 1
    return body_line + first + offset


def _key_line(fm_lines: list[str], key: str) -> int:
    for i, line in enumerate(fm_lines):
        if line.startswith(f"{key}:"):
            return i + 2
    return 2


def _signature_line(
    fm_lines: list[str], signature: str, index: int, key: str = "signatures"
) -> int:
    """The front-matter line holding this signature or hint (best effort: text, else list
    position under `key`).
    """
    for i, line in enumerate(fm_lines):
        if signature.strip() and signature in line and not line.startswith(f"{key}:"):
            return i + 2
    return _key_line(fm_lines, key) + 1 + index


def _item_line(fm_lines: list[str], key: str, item: str) -> int:
    """The front-matter line naming `item` in the list under `key` (`[a, b]` or `- a` lines)."""
    first = _key_line(fm_lines, key) - 2  # index of the key's own line
    for i in range(first, len(fm_lines)):
        line = fm_lines[i]
        if i > first and not line.startswith((" ", "\t", "-")):
            break  # the next key
        if item in (line.split(":", 1)[-1] if i == first else line):
            return i + 2
    return first + 2


def signature_problem(signature: str, kind: str = "signature") -> str | None:
    """Why a signature is unusable (does not compile in RE2 or Python, or can match the empty
    string), or None.
    """
    from llmdoctor.wiki.re2_patterns import line_pattern
    from llmdoctor.wiki.signatures import compile_problem

    try:
        re.compile(signature)  # compiling is safe; matching is left to RE2 (linear time)
    except (re.error, OverflowError) as exc:  # a{4294967296}
        return f"{kind} {signature!r} is not a valid Python regex: {exc}"
    except RecursionError:
        return f"{kind} {signature!r} is nested too deeply to compile"
    why = compile_problem(signature)
    if why:
        return f"{kind} {signature!r}: {why}"
    pattern = line_pattern(signature)
    for probe in EMPTY_PROBES:
        for m in pattern.finditer(probe):
            if m.end() == m.start():
                return f"{kind} {signature!r} can match an empty string (it fires on any line)"
    return None


def _step_tag_problem(line: str) -> str | None:
    """What is wrong with a Fix step's subject tag (`1. [pod] …`), if it has one that the
    reports would not read: another word, other case, no space after it."""
    tag = step_tag(line)
    if tag is None or tag[1]:
        return None
    word = tag[0]
    return (
        f"Fix step tag [{word}] is not read (use `[pod] ` or `[node] `, lower case, then a "
        "space): the step is shown under every finding, tag and all"
    )


TOP_LEVEL_KEY = re.compile(r"([A-Za-z_][A-Za-z0-9_-]*)\s*:(\s|$)")


def _repeated_keys(fm_lines: list[str]) -> dict[str, list[int]]:
    """Top-level front matter keys written more than once, with their file lines (the front
    matter starts on line 2): two `hints:` lists merged by hand keep only the second."""
    seen: dict[str, list[int]] = {}
    for n, line in enumerate(fm_lines):
        m = TOP_LEVEL_KEY.match(line)
        if m:
            seen.setdefault(m.group(1), []).append(n + 2)
    return {key: lines for key, lines in seen.items() if len(lines) > 1}


def _shown(text: str, limit: int = 200) -> str:
    """A value quoted in a problem: a 200,000-character title is not printed whole."""
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} characters)"


def lint_text(
    text: str,
    path: str | Path,
    expected_id: str | None = None,
    known_checks: Callable[[], set[str] | None] | None = None,
) -> tuple[RunbookEntry | None, list[LintProblem]]:
    """Parse and check one entry. `known_checks` returns the check ids (None: cannot tell)."""
    file = str(path)
    try:
        entry = parse_entry(text, path)
    except EntryError as exc:
        return None, [LintProblem(file, exc.line, exc.message)]
    fm_text, _, body_line = split_front_matter(text, path)
    fm_lines = fm_text.splitlines()
    meta = entry.front_matter
    problems: list[LintProblem] = []

    def add(line: int, message: str) -> None:
        problems.append(LintProblem(file, line, message))

    for key, lines in _repeated_keys(fm_lines).items():
        add(
            lines[0],
            f"front matter key {key!r} is written {len(lines)} times (lines "
            f"{', '.join(map(str, lines))}): YAML keeps only the last, the others are lost",
        )
    for key in meta:
        if key not in KNOWN_KEYS:
            add(
                _key_line(fm_lines, str(key)),
                f"unknown front matter key {key!r} (known: {', '.join(KNOWN_KEYS)})",
            )
    if not ID_PATTERN.match(entry.id):
        add(
            _key_line(fm_lines, "id"),
            f"id {entry.id!r} must be lower-case letters and digits joined by '-' (e.g. cuda-oom-runtime)",
        )
    if expected_id is not None and entry.id != expected_id:
        add(
            _key_line(fm_lines, "id"),
            f"id {entry.id!r} does not match the file name {expected_id + '.md'!r}",
        )
    if "severity" not in meta:
        add(2, f"front matter needs a 'severity' ({', '.join(SEVERITIES)})")
    elif entry.severity not in SEVERITIES:
        add(
            _key_line(fm_lines, "severity"),
            f"severity {meta['severity']!r} must be one of {', '.join(SEVERITIES)}",
        )
    # what a team writes is printed, searched and published: an escape sequence in a title
    # recolours the terminal of whoever reads it, a zero-width space hides it from search
    for key, values in (("title", [entry.title]), ("aliases", entry.aliases), ("tags", entry.tags)):
        for value in values:
            if hidden := hidden_characters(value):
                add(
                    _key_line(fm_lines, key),
                    f"{key} holds control or invisible characters "
                    f"({', '.join(dict.fromkeys(hidden))}): '{_shown(visible(value))}'",
                )
    for key in LIST_KEYS:
        if key in meta and meta[key] is not None and not isinstance(meta[key], list):
            add(
                _key_line(fm_lines, key),
                f"'{key}' must be a YAML list, e.g. {key}: [first, second]",
            )
    for name in REQUIRED_SECTIONS:
        heading = name.capitalize()
        if name not in entry.section_lines:
            add(body_line, f"missing section '## {heading}'")
        elif not getattr(entry, name).strip():
            add(entry.section_lines[name], f"section '## {heading}' is empty")
    examples = examples_of(Path(path))
    for key in HOLDING_KEYS:  # never matched as evidence: compile only
        for n, pattern in enumerate(getattr(entry, key)):
            why = signature_problem(pattern, f"{key} pattern")
            if why:
                add(_signature_line(fm_lines, pattern, n, key), why)
    for key, kind, patterns in (
        ("signatures", "signature", entry.signatures),
        ("hints", "hint", entry.hints),
    ):
        usable = []
        for n, signature in enumerate(patterns):
            why = signature_problem(signature, kind)
            if why:
                add(_signature_line(fm_lines, signature, n, key), why)
            else:
                usable.append((n, signature))
        # a hint is weak evidence, but it must still fire on its examples and never on health
        for n, message in evidence_problems(usable, examples, healthy_corpus(), kind):
            add(_signature_line(fm_lines, patterns[n], n, key), message)
    explains = meta.get("explains")
    if isinstance(explains, list):
        for item in explains:
            if not isinstance(item, str):
                add(
                    _key_line(fm_lines, "explains"),
                    f"explains must list entry ids, not {type(item).__name__} {item!r}",
                )
    at_startup = meta.get("at_startup")
    if at_startup is not None and not (isinstance(at_startup, str) and at_startup.strip()):
        add(
            _key_line(fm_lines, "at_startup"),
            f"at_startup must be one entry id, not {type(at_startup).__name__} {at_startup!r}",
        )
    elif at_startup == entry.id:
        add(_key_line(fm_lines, "at_startup"), "at_startup names the entry itself")
    for kind in entry.applies_to:
        if kind not in SUBJECT_KINDS:
            add(
                _key_line(fm_lines, "applies_to"),
                f"applies_to names unknown subject kind {kind!r} (known: {', '.join(SUBJECT_KINDS)})",
            )
    if "fix" in entry.section_lines:
        for offset, line in enumerate(entry.fix.splitlines()):
            tag = _step_tag_problem(line)
            if tag:
                add(_fix_line(entry, body_line, offset), tag)
            for name in parameters_in(line):
                if name not in PARAMETERS:
                    add(
                        _fix_line(entry, body_line, offset),
                        f"unknown Fix parameter {{{name}}} (known: {', '.join(PARAMETERS)}; "
                        "other braces need a space or a capital, e.g. {type: Recreate})",
                    )
    if entry.detected_by and known_checks is not None:
        checks = known_checks()
        if checks is not None:
            for check_id in entry.detected_by:
                if check_id not in checks:
                    add(
                        _key_line(fm_lines, "detected_by"),
                        f"detected_by names {check_id!r}, which is not a check id",
                    )
    return entry, problems


EXAMPLES_SUFFIX = ".examples"
HEALTHY_DIR = Path(__file__).resolve().parent.parent / "data" / "healthy"


def examples_of(entry_path: Path) -> Path | None:
    """The folder of real excerpts kept beside an entry (`<id>.examples/`), if there is one."""
    folder = entry_path.with_name(entry_path.stem + EXAMPLES_SUFFIX)
    return folder if folder.is_dir() else None


def _text_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_file() and p.suffix in (".log", ".txt"))


def read_lines(files: list[Path]) -> list[tuple[str, int, str]]:
    """(file name, line number, text) of every line of these files."""
    out = []
    for path in files:
        text = path.read_bytes().decode("utf-8", errors="replace")
        out.extend((path.name, n, line) for n, line in enumerate(text.splitlines(), 1))
    return out


_HEALTHY: list[tuple[str, int, str]] = []


def healthy_corpus() -> list[tuple[str, int, str]]:
    """The lines of the healthy corpus that ships with llmdoctor (llmdoctor/data/healthy/)."""
    if not _HEALTHY and HEALTHY_DIR.is_dir():
        _HEALTHY.extend(read_lines(_text_files(HEALTHY_DIR)))
    return _HEALTHY


def evidence_problems(
    signatures: list[tuple[int, str]],
    examples: Path | None,
    healthy: list[tuple[str, int, str]],
    kind: str = "signature",
) -> list[tuple[int, str]]:
    """(signature index, message) for each signature (or hint: `kind`) that fires on a healthy
    line, or, when the entry keeps examples, fires on none of them. Matched with the same RE2
    engine as explain and diagnose.
    """
    from types import SimpleNamespace

    from llmdoctor.wiki.signatures import SignatureSet

    problems: list[tuple[int, str]] = []
    example_lines = read_lines(_text_files(examples)) if examples else []
    for n, signature in signatures:
        one = SignatureSet([SimpleNamespace(id="x", signatures=[signature], path="")])
        false_hit = next(((f, i, t) for f, i, t in healthy if one.match_line(t)), None)
        if false_hit:
            name, number, text = false_hit
            problems.append(
                (
                    n,
                    f"{kind} {signature!r} fires on a healthy log line ({name}:{number}: "
                    f"{text.strip()[:120]!r})",
                )
            )
        if examples is not None and not any(one.match_line(t) for _, _, t in example_lines):
            problems.append(
                (n, f"{kind} {signature!r} fires on no line of its examples in {examples}")
            )
    return problems


def registered_check_ids() -> set[str] | None:
    """Ids of every built-in check, or None when the checks cannot be loaded."""
    try:
        from llmdoctor.engine.registry import all_checks

        return {c.id for c in all_checks()}
    except Exception:
        return None


def lint_paths(
    paths: list[Path], known_checks: Callable[[], set[str] | None] | None = registered_check_ids
) -> LintReport:
    """Lint every entry file of these folders (or files); ids are compared across all of them."""
    from llmdoctor.wiki.folders import LINKED_OUT, linked_out_of_folder
    from llmdoctor.wiki.library import entry_files

    report = LintReport()
    cached: dict[str, set[str] | None] = {}

    def checks() -> set[str] | None:
        if "ids" not in cached:
            cached["ids"] = known_checks() if known_checks else None
        return cached["ids"]

    seen: dict[str, tuple[Path, str]] = {}  # id -> (folder, file) of the entry in effect
    explaining: list[tuple[str, list[str], list]] = []  # (file, front matter lines, explains)
    at_startup: list[tuple[str, list[str], str]] = []  # (file, front matter lines, the id named)
    for target in paths:
        files = [target] if target.is_file() else entry_files(target)
        folder = target.parent if target.is_file() else target
        for file in files:
            report.files += 1
            if linked_out_of_folder(file):
                report.problems.append(LintProblem(str(file), 1, LINKED_OUT))
                continue
            try:
                text = file.read_text(encoding="utf-8")
            except UnicodeDecodeError as exc:
                report.problems.append(LintProblem(str(file), 1, f"not UTF-8 text ({exc.reason})"))
                continue
            except OSError as exc:
                report.problems.append(LintProblem(str(file), 1, f"cannot read: {exc.strerror}"))
                continue
            entry, problems = lint_text(text, file, file.stem, checks)
            report.problems.extend(problems)
            if entry is None:
                continue
            fm_lines = split_front_matter(text, file)[0].splitlines()
            if isinstance(entry.front_matter.get("explains"), list):
                explaining.append((str(file), fm_lines, entry.front_matter["explains"]))
            if isinstance(entry.front_matter.get("at_startup"), str):
                at_startup.append((str(file), fm_lines, entry.front_matter["at_startup"]))
            line = _key_line(fm_lines, "id")
            previous = seen.get(entry.id)
            if previous is not None and previous[0] == folder:
                report.problems.append(
                    LintProblem(str(file), line, f"id {entry.id!r} is also used by {previous[1]}")
                )
            elif previous is not None:
                report.notes.append(
                    LintProblem(
                        str(file), line, f"entry {entry.id!r} overrides {previous[1]}", "note"
                    )
                )
            seen[entry.id] = (folder, str(file))
    if explaining or at_startup:
        known = set(seen) | wiki_entry_ids()
        for file, fm_lines, explains in explaining:
            for item in explains:
                if isinstance(item, str) and item not in known:
                    line = _item_line(fm_lines, "explains", item)
                    report.problems.append(
                        LintProblem(file, line, f"explains names unknown entry {item!r}")
                    )
        for file, fm_lines, named in at_startup:
            if named not in known:
                report.problems.append(
                    LintProblem(
                        file,
                        _key_line(fm_lines, "at_startup"),
                        f"at_startup names unknown entry {named!r}",
                    )
                )
    return report


def wiki_entry_ids() -> set[str]:
    """Ids of the entries in the wiki folders (built-in and LLMDOCTOR_WIKI), by file name."""
    from llmdoctor.wiki.folders import wiki_dirs
    from llmdoctor.wiki.library import entry_files

    return {path.stem for folder in wiki_dirs() for path in entry_files(folder)}
