"""Find and load runbook entries: the built-in ones plus the team's folders, with overrides."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from llmdoctor.wiki.entry import EntryError, RunbookEntry, parse_entry_file
from llmdoctor.wiki.folders import ENV_WIKI, builtin_dir, wiki_dirs

__all__ = ["ENV_WIKI", "Library", "builtin_dir", "entry_files", "load_library", "wiki_dirs"]


def entry_files(directory: Path) -> list[Path]:
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.glob("*.md") if p.is_file() and not p.name.startswith("."))


@dataclass
class Library:
    """Entries by id; `overridden` maps an id to the file(s) whose entry was replaced."""

    entries: dict[str, RunbookEntry] = field(default_factory=dict)
    overridden: dict[str, list[str]] = field(default_factory=dict)
    errors: list[EntryError] = field(default_factory=list)

    def get(self, entry_id: str) -> RunbookEntry | None:
        return self.entries.get(entry_id)


def load_library(extra_dirs: list[str | Path] | None = None) -> Library:
    """Parse every entry in every wiki folder; bad files are collected, not fatal."""
    lib = Library()
    for directory in wiki_dirs(extra_dirs):
        for path in entry_files(directory):
            try:
                entry = parse_entry_file(path)
            except EntryError as exc:
                lib.errors.append(exc)
                continue
            previous = lib.entries.get(entry.id)
            if previous is not None:
                lib.overridden.setdefault(entry.id, []).append(previous.path)
            lib.entries[entry.id] = entry
    return lib
