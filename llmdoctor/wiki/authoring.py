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


def _yaml_field(key: str, value, block: bool = False) -> str:
    """One front-matter field as YAML, by yaml.safe_dump: every value comes back as typed
    (`.inf`, `0x1F`, `=`, `<<`, `yes`, quotes and backslashes included)."""
    import yaml

    options = {"allow_unicode": True, "sort_keys": False, "width": 1 << 30}  # never folded
    if isinstance(value, list) and not block:  # tags: [a, b]
        return f"{key}: " + yaml.safe_dump(value, default_flow_style=True, **options).strip()
    return yaml.safe_dump({key: value}, default_flow_style=False, **options).rstrip("\n")


def render_entry(draft: EntryDraft, template: bool = False) -> str:
    """The markdown file for a draft; `template` adds the editor's help comments."""

    def hint(text: str) -> str:
        return f"   # {text}" if template else ""

    lines = [
        "---",
        *(  # an empty id or title stays a bare "key:" line, for the editor to fill in
            _yaml_field(key, " ".join(value.split())) if value.strip() else f"{key}:"
            for key, value in (("id", draft.id), ("title", draft.title))
        ),
        _yaml_field("severity", draft.severity or "warning") + hint("info, warning or critical"),
        _yaml_field("tags", list(draft.tags)),
        _yaml_field("aliases", list(draft.aliases))
        + hint("other words people search for: 显存, 排队, ..."),
    ]
    signatures = _yaml_field("signatures", list(draft.signatures), block=True).split("\n")
    signatures[0] += hint("Python regexes, each matching one log line")
    lines += signatures
    if draft.detected_by:
        lines.append(_yaml_field("detected_by", list(draft.detected_by)))
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
    """The lint rules for a new entry (`label` names it in messages); no problems: may be written.

    A signature that breaks the regex compiler itself (a repeat count past its limit, nesting
    past the recursion limit) is a problem like any other, so the draft is kept.
    """
    try:
        entry, problems = lint_text(text, label, None, registered_check_ids)
    except (OverflowError, RecursionError, MemoryError) as exc:
        reason = str(exc) or type(exc).__name__
        return None, [LintProblem(label, 1, f"a signature cannot be compiled: {reason}")]
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


class DraftNotSaved(BadInput):
    """The drafts folder cannot take the draft (a full disk, no permission)."""


def save_draft(text: str, entry_id: str = "") -> Path:
    """Keep what was typed in the drafts folder; returns its path. DraftNotSaved when it cannot
    be written whole: a partial file is removed, never left looking like a saved draft."""
    stem = re.sub(r"[^a-z0-9_-]+", "-", (entry_id or "entry").lower()).strip("-")[:60] or "entry"
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = None
    try:
        folder = drafts_dir()
        for n in range(1, 1000):
            path = folder / (f"{stem}-{stamp}.md" if n == 1 else f"{stem}-{stamp}-{n}.md")
            try:
                fh = open(path, "x", encoding="utf-8")  # noqa: SIM115 - closed below
            except FileExistsError:
                continue
            try:
                with fh:
                    fh.write(text)
                    fh.flush()
                    os.fsync(fh.fileno())
            except BaseException:
                path.unlink(missing_ok=True)
                raise
            return path
        raise DraftNotSaved(f"the drafts folder {folder} has no free name left")
    except OSError as exc:
        raise DraftNotSaved(f"the draft could not be saved: {exc.strerror or exc}") from None


def target_folder(wiki_dirs: list[str] | None) -> Path:
    """Where `wiki add` writes: the first --wiki folder, else the first LLMDOCTOR_WIKI folder."""
    from llmdoctor.wiki.folders import expect_new_folder
    from llmdoctor.wiki.library import ENV_WIKI

    env = [p for p in os.environ.get(ENV_WIKI, "").split(os.pathsep) if p.strip()]
    chosen = wiki_dirs[0] if wiki_dirs else env[0] if env else None
    if chosen is not None:
        expect_new_folder(chosen)  # created when the entry is written
        return Path(chosen)
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
