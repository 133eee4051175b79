"""Write new runbook entries: render markdown from fields, validate, write atomically, keep drafts.

Used by `wiki add`; no terminal I/O here, so every path is testable without prompts.
"""

from __future__ import annotations

import dataclasses
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from llmdoctor.errors import BadInput
from llmdoctor.wiki.cache import drafts_dir
from llmdoctor.wiki.entry import RunbookEntry
from llmdoctor.wiki.lint import LintProblem, lint_text, registered_check_ids

EDITOR_HELP = (
    "<!-- Fill in the entry and save; close the editor to finish. Text inside these comments is "
    "removed. An empty or unchanged file writes nothing. -->"
)
SECTION_HINTS = {
    "symptom": "What the on-call sees: the exact messages, metrics, user reports.",
    "cause": "Why it happens, and how to tell the possible causes apart.",
    "fix": "Concrete steps: commands, flags with their values, manifest snippets.",
    "verify": "Optional: how to know the fix worked.",
}
_PLAIN_YAML = re.compile(r"[^\s\[\]{},:#'\"&*!|>%@`?\-][^\[\]{},:#'\"]*")
_YAML_WORDS = {"yes", "no", "true", "false", "on", "off", "null", "y", "n", "~"}
_COMMENT_LINE = re.compile(r"^[ \t]*<!--(?:(?!-->).)*-->[ \t]*(?:\n|$)", re.DOTALL | re.MULTILINE)
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)


class EntryExists(BadInput):
    """The target folder already holds an entry file with this id."""


@dataclass
class EntryDraft:
    """The fields of a new entry, as typed or given by flags."""

    id: str = ""
    title: str = ""
    severity: str = "warning"
    tags: list[str] = field(default_factory=list)
    aliases: list[str] = field(default_factory=list)
    signatures: list[str] = field(default_factory=list)
    detected_by: list[str] = field(default_factory=list)
    symptom: str = ""
    cause: str = ""
    fix: str = ""
    verify: str = ""

    def is_empty(self) -> bool:
        fields = (self.id, self.title, self.tags, self.aliases, self.signatures)
        sections = (self.symptom, self.cause, self.fix, self.verify)
        return not any((*fields, *sections))


def yaml_scalar(text: str) -> str:
    """A one-line YAML scalar: plain when that is unambiguous, else single-quoted."""
    text = " ".join(text.split())
    plain = (
        _PLAIN_YAML.fullmatch(text)
        and text.lower() not in _YAML_WORDS
        and not re.fullmatch(r"[-+.\d][\d_.eE+-]*", text)
    )
    return text if plain else "'" + text.replace("'", "''") + "'"


def _flow_list(items: list[str]) -> str:
    return "[" + ", ".join(yaml_scalar(i) for i in items) + "]"


def render_entry(draft: EntryDraft, template: bool = False) -> str:
    """The markdown file for a draft; `template` adds the editor's help comments."""
    lines = [
        "---",
        f"id: {yaml_scalar(draft.id) if draft.id else ''}".rstrip(),
        f"title: {yaml_scalar(draft.title) if draft.title else ''}".rstrip(),
        f"severity: {draft.severity or 'warning'}"
        + ("   # info, warning or critical" if template else ""),
        f"tags: {_flow_list(draft.tags)}",
        f"aliases: {_flow_list(draft.aliases)}"
        + ("   # other words people search for: 显存, 排队, ..." if template else ""),
    ]
    if draft.signatures:
        lines.append(
            "signatures:" + ("   # Python regexes, each matching one log line" if template else "")
        )
        lines += [f"  - '{s.replace(chr(39), chr(39) * 2)}'" for s in draft.signatures]
    else:
        lines.append(
            "signatures: []"
            + ("   # Python regexes, each matching one log line" if template else "")
        )
    if draft.detected_by:
        lines.append(f"detected_by: {_flow_list(draft.detected_by)}")
    lines.append("---")
    if template:
        lines.append(EDITOR_HELP)
    for name in ("symptom", "cause", "fix", "verify"):
        text = getattr(draft, name).strip()
        if name == "verify" and not text and not template:
            continue
        lines.append(f"## {name.capitalize()}")
        if template:
            lines.append(f"<!-- {SECTION_HINTS[name]} -->")
        lines.append(text)
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


def strip_editor_comments(text: str, keep_lines: bool = False) -> str:
    """Remove the template's <!-- --> help comments (whole lines when they stand alone).

    `keep_lines` leaves blank lines in their place, so problems point at the lines of the file
    the user edits.
    """
    if keep_lines:
        return _COMMENT.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    return _COMMENT.sub("", _COMMENT_LINE.sub("", text))


def split_list(text: str) -> list[str]:
    """'a, b，c' -> ['a', 'b', 'c'] (ASCII or Chinese commas)."""
    return [part.strip() for part in re.split(r"[,，、]", text or "") if part.strip()]


def validate(
    text: str, label: str, draft: EntryDraft | None = None
) -> tuple[RunbookEntry | None, list[LintProblem]]:
    """The lint rules for a new entry (`label` names it in messages); no problems: may be written."""
    entry, problems = lint_text(text, label, None, registered_check_ids)
    if entry is not None and draft is not None and not problems:
        for name in ("id", "title", "tags", "aliases", "signatures", "detected_by"):
            want = getattr(draft, name)
            want = " ".join(want.split()) if isinstance(want, str) else want
            if getattr(entry, name) != want:
                problems.append(
                    LintProblem(label, 1, f"'{name}' does not survive as YAML: {want!r}")
                )
    return entry, problems


def relabel(problems: list[LintProblem], label: str) -> list[LintProblem]:
    return [dataclasses.replace(p, file=label) for p in problems]


def save_draft(text: str, entry_id: str = "") -> Path:
    """Keep what was typed in the drafts folder; returns its path."""
    stem = re.sub(r"[^a-z0-9_-]+", "-", (entry_id or "entry").lower()).strip("-")[:60] or "entry"
    stamp = time.strftime("%Y%m%d-%H%M%S")
    folder = drafts_dir()
    path = folder / f"{stem}-{stamp}.md"
    n = 1
    while path.exists():
        n += 1
        path = folder / f"{stem}-{stamp}-{n}.md"
    path.write_text(text, encoding="utf-8")
    return path


def target_folder(wiki_dirs: list[str] | None) -> Path:
    """Where `wiki add` writes: the first --wiki folder, else the first LLMDOCTOR_WIKI folder."""
    from llmdoctor.wiki.library import ENV_WIKI

    if wiki_dirs:
        return Path(wiki_dirs[0])
    env = [p for p in os.environ.get(ENV_WIKI, "").split(os.pathsep) if p.strip()]
    if env:
        return Path(env[0])
    raise BadInput(
        "no wiki folder to write to: pass --wiki DIR (the team's runbook folder) or set "
        f"{ENV_WIKI}; the built-in runbooks are only written when named explicitly"
    )


class FolderNotWritable(BadInput):
    """The wiki folder is a file, or cannot be created or written."""


def write_entry(folder: Path, entry_id: str, text: str, force: bool = False) -> Path:
    """Write <folder>/<id>.md atomically; EntryExists unless `force`, FolderNotWritable when
    the folder is a file or cannot be written."""
    if folder.exists() and not folder.is_dir():
        raise FolderNotWritable(f"{folder} is a file, not a wiki folder")
    try:
        return _write_entry(folder, entry_id, text, force)
    except OSError as exc:
        raise FolderNotWritable(f"cannot write to {folder}: {exc.strerror or exc}") from None


def _write_entry(folder: Path, entry_id: str, text: str, force: bool) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    final = folder / f"{entry_id}.md"
    if final.exists() and not force:
        raise EntryExists(f"{final} already exists (use --force to replace it)")
    tmp = folder / f".{entry_id}.md.tmp-{os.getpid()}-{os.urandom(3).hex()}"
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        if force:
            os.replace(tmp, final)
        else:
            try:
                os.link(tmp, final)  # fails if another writer got there first: no clobbering
            except FileExistsError:
                raise EntryExists(f"{final} already exists (use --force to replace it)") from None
            except OSError:
                os.replace(tmp, final)  # a file system without hard links
    finally:
        tmp.unlink(missing_ok=True)
    return final
