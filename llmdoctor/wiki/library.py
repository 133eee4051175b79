"""Find and load runbook entries: the built-in ones plus the team's folders, with overrides."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from llmdoctor.wiki.entry import EntryError, RunbookEntry, parse_entry_file

ENV_WIKI = "LLMDOCTOR_WIKI"


def builtin_dir() -> Path:
    """The folder of the shipped runbooks (the repo's runbooks/ when installed editable)."""
    from importlib.resources import files

    return Path(str(files("llmdoctor.builtin_runbooks")))


def wiki_dirs(extra: list[str | Path] | None = None) -> list[Path]:
    """Built-in folder first, then LLMDOCTOR_WIKI folders, then --wiki folders (later wins)."""
    dirs = [builtin_dir()]
    env = os.environ.get(ENV_WIKI, "")
    dirs += [Path(p) for p in env.split(os.pathsep) if p.strip()]
    dirs += [Path(p) for p in (extra or [])]
    seen: set[Path] = set()
    unique = []
    for d in dirs:
        key = d.resolve() if d.exists() else d
        if key not in seen:
            seen.add(key)
            unique.append(d)
    return unique


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
