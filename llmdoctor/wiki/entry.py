"""Parse one runbook entry: YAML front matter plus Symptom / Cause / Fix sections.

Example (runbooks/cuda-oom-runtime.md)::

    ---
    id: cuda-oom-runtime
    title: CUDA out of memory while serving
    severity: critical
    tags: [memory, oom]
    signatures:
      - 'torch\\.OutOfMemoryError: CUDA out of memory'
    hints:          # lines that point at the entry without proving it (weak evidence)
      - 'exited with code 137'
    ruled_out_by:   # lines its cause never prints: a guess from text alone stays a guess
      - 'CUDA error: an illegal memory access'
    ---
    ## Symptom
    ...
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

# the front matter's lists of lines that hold an entry back, never evidence for it
# (llmdoctor.wiki.holding)
HOLDING_KEYS = ("ruled_out_by", "overruled_by")

SECTION_ALIASES = {
    "symptom": "symptom",
    "symptoms": "symptom",
    "症状": "symptom",
    "cause": "cause",
    "causes": "cause",
    "原因": "cause",
    "fix": "fix",
    "解法": "fix",
    "解决": "fix",
    "verify": "verify",
    "验证": "verify",
    "references": "references",
    "参考": "references",
}
SEVERITIES = ("info", "warning", "critical")


class EntryError(Exception):
    """A runbook file that cannot be parsed; carries the file and line for a one-line message."""

    def __init__(self, path: Path | str, line: int, message: str):
        super().__init__(f"{path}:{line}: {message}")
        self.path = str(path)
        self.line = line
        self.message = message


@dataclass
class RunbookEntry:
    id: str
    title: str
    severity: str = "warning"
    tags: list[str] = field(default_factory=list)
    aliases: list[str] = field(default_factory=list)
    signatures: list[str] = field(default_factory=list)
    hints: list[str] = field(default_factory=list)  # weak signatures: point at it, prove nothing
    # lines the entry's cause never prints, that prove another cause: a text-only guess of this
    # entry stays a guess when one of them is among the error lines (never a signature match)
    ruled_out_by: list[str] = field(default_factory=list)
    # lines that, anywhere in the input, say the entry's own signature lines mean another cause
    # (NGC's "driver was not detected" banner: the runtime's "insufficient driver" is then no old
    # driver but none): a signature match of this entry stays a guess beside one of them
    overruled_by: list[str] = field(default_factory=list)
    detected_by: list[str] = field(default_factory=list)
    applies_to: list[str] = field(default_factory=list)  # subject kinds its Fix fits; [] = any
    symptom: str = ""
    cause: str = ""
    fix: str = ""
    verify: str = ""
    references: str = ""
    path: str = ""
    front_matter: dict[str, Any] = field(default_factory=dict)
    section_lines: dict[str, int] = field(default_factory=dict)
    body: str = ""

    def fix_excerpt(self, max_lines: int = 4) -> list[str]:
        """The first non-blank lines of the Fix section, for the report.

        Stops before a code block that would be cut in half; `wiki show` has the rest.
        """
        lines: list[str] = []
        for raw in self.fix.splitlines():
            if not raw.strip():
                continue
            if raw.strip().startswith(("```", "~~~")):
                if lines:
                    break
                continue
            lines.append(raw.rstrip())
            if len(lines) == max_lines:
                break
        return lines


def split_front_matter(text: str, path: Path | str = "<text>") -> tuple[str, str, int]:
    """Return (yaml text, body, line number where the body starts)."""
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise EntryError(path, 1, "missing front matter: the file must start with a '---' line")
    for i in range(1, len(lines)):
        if lines[i].strip() == "---":
            return "".join(lines[1:i]), "".join(lines[i + 1 :]), i + 2
    raise EntryError(path, 1, "front matter is not closed by a '---' line")


@lru_cache(maxsize=1)
def _block_parser():
    """A shared markdown-it parser for block structure only (inline parsing is not needed)."""
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").disable(["inline", "text_join"])


def _sections(body: str, first_line: int) -> tuple[dict[str, str], dict[str, int]]:
    """Split the body at level-2 headings, using markdown-it so '#' inside code is ignored."""
    tokens = _block_parser().parse(body)
    lines = body.splitlines()
    heads: list[tuple[int, int, str]] = []  # (start line, end line, heading text)
    for i, tok in enumerate(tokens):
        if tok.type == "heading_open" and tok.tag == "h2" and tok.map:
            heads.append((tok.map[0], tok.map[1], tokens[i + 1].content.strip()))
    sections: dict[str, str] = {}
    where: dict[str, int] = {}
    for n, (start, end, title) in enumerate(heads):
        key = SECTION_ALIASES.get(title.strip().lower(), SECTION_ALIASES.get(title.strip()))
        if key is None:
            key = title.strip().lower()
        stop = heads[n + 1][0] if n + 1 < len(heads) else len(lines)
        sections[key] = "\n".join(lines[end:stop]).strip()
        where[key] = first_line + start
    return sections, where


def _string_list(value: Any, name: str, path, line: int) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str | int | float) for v in value):
        return [str(v) for v in value]
    raise EntryError(path, line, f"'{name}' must be a list of strings")


def parse_entry(text: str, path: Path | str = "<text>") -> RunbookEntry:
    """Parse markdown text into a RunbookEntry; EntryError (with file:line) if it is malformed."""
    import yaml

    from llmdoctor.bounded_yaml import load_bounded

    fm_text, body, body_line = split_front_matter(text, path)
    try:
        meta = load_bounded(fm_text) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = (mark.line + 2) if mark is not None else 2
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise EntryError(path, line, f"front matter is not valid YAML: {problem}") from None
    if not isinstance(meta, dict):
        raise EntryError(path, 2, "front matter must be a YAML mapping")

    def field_line(name: str) -> int:
        for i, ln in enumerate(fm_text.splitlines()):
            if ln.startswith(f"{name}:"):
                return i + 2
        return 2

    entry_id = meta.get("id")
    if not isinstance(entry_id, str) or not entry_id.strip():
        raise EntryError(path, field_line("id"), "front matter needs an 'id' (a string)")
    title = meta.get("title")
    if not isinstance(title, str) or not title.strip():
        raise EntryError(path, field_line("title"), "front matter needs a 'title' (a string)")
    sections, where = _sections(body, body_line)
    return RunbookEntry(
        id=entry_id.strip(),
        title=title.strip(),
        severity=str(meta.get("severity", "warning")).strip().lower(),
        tags=_string_list(meta.get("tags"), "tags", path, field_line("tags")),
        aliases=_string_list(meta.get("aliases"), "aliases", path, field_line("aliases")),
        signatures=_string_list(
            meta.get("signatures"), "signatures", path, field_line("signatures")
        ),
        hints=_string_list(meta.get("hints"), "hints", path, field_line("hints")),
        ruled_out_by=_string_list(
            meta.get("ruled_out_by"), "ruled_out_by", path, field_line("ruled_out_by")
        ),
        overruled_by=_string_list(
            meta.get("overruled_by"), "overruled_by", path, field_line("overruled_by")
        ),
        detected_by=_string_list(
            meta.get("detected_by"), "detected_by", path, field_line("detected_by")
        ),
        applies_to=_string_list(
            meta.get("applies_to"), "applies_to", path, field_line("applies_to")
        ),
        symptom=sections.get("symptom", ""),
        cause=sections.get("cause", ""),
        fix=sections.get("fix", ""),
        verify=sections.get("verify", ""),
        references=sections.get("references", ""),
        path=str(path),
        front_matter=meta,
        section_lines=where,
        body=body,
    )


def refuse_linked_out(path: str | Path) -> None:
    """EntryError when the file is a link out of its wiki folder (folders.linked_out_of_folder):
    the one rule for show, search, explain, diagnose, lint and the site."""
    from llmdoctor.wiki.folders import LINKED_OUT, linked_out_of_folder

    if linked_out_of_folder(path):
        raise EntryError(path, 1, LINKED_OUT)


def parse_entry_file(path: str | Path) -> RunbookEntry:
    """Read and parse one runbook file (never one reached through a link out of its folder)."""
    p = Path(path)
    refuse_linked_out(p)
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise EntryError(p, 1, f"not UTF-8 text ({exc.reason})") from None
    return parse_entry(text, p)
