"""Find and load runbook entries: the built-in ones plus the team's folders, with overrides.

Parsed entries are kept in the cache folder (one file per set of wiki folders, marshal of each
entry's fields, keyed by the file's path, inode, mtime and size and by the parser's own file), so a
command that needs the whole wiki does not parse every markdown file again: 45 built-in entries
cost ~0.2 s to parse and ~1 ms to load; a 10,000-entry team wiki minutes against a second.
"""

from __future__ import annotations

import marshal
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from llmdoctor.wiki import entry as entry_module
from llmdoctor.wiki.entry import EntryError, RunbookEntry, parse_entry_file, refuse_linked_out
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

    def dropped_signatures(self) -> list[str]:
        """One line per entry that replaces another without all of its signatures: a team file
        of a built-in's id takes its place whole, so the log lines only the replaced entry
        matched are then matched by nothing."""
        said = []
        for entry_id, replaced in self.overridden.items():
            entry = self.entries[entry_id]
            kept = set(entry.signatures)
            lost: list[str] = []
            for path in replaced:
                try:
                    lost += [s for s in parse_entry_file(Path(path)).signatures if s not in kept]
                except (EntryError, OSError):
                    continue
            if lost:
                count = len(dict.fromkeys(lost))
                said.append(
                    f"{entry.path} replaces entry {entry_id!r} of {replaced[-1]} without "
                    f"{count} of its signature{'s' if count != 1 else ''}: log lines only they "
                    "matched are matched by nothing (copy them in, or give the file another id)"
                )
        return said


def load_library(extra_dirs: list[str | Path] | None = None) -> Library:
    """Parse every entry in every wiki folder; bad files are collected, not fatal."""
    lib = Library()
    dirs = wiki_dirs(extra_dirs)
    parsed = _ParsedEntries(dirs)
    for directory in dirs:
        for path in entry_files(directory):
            try:
                entry = parsed.entry(path)
            except EntryError as exc:
                lib.errors.append(exc)
                continue
            previous = lib.entries.get(entry.id)
            if previous is not None:
                lib.overridden.setdefault(entry.id, []).append(previous.path)
            lib.entries[entry.id] = entry
    parsed.save()
    return lib


class _ParsedEntries:
    """The entries parsed by an earlier run, reused while their file is unchanged."""

    def __init__(self, dirs: list[Path]):
        from llmdoctor.wiki.cache import folders_file, read_kept

        parser = Path(entry_module.__file__).stat()
        self.version = [3, parser.st_mtime_ns, parser.st_size]  # a new parser: parse again
        self.file = folders_file("entries", [d.resolve() for d in dirs], ".marshal")
        self.kept: dict[str, list] = {}  # path -> [inode, mtime_ns, size, fields]
        self.seen: dict[str, list] = {}
        self.changed = False
        stored = read_kept(self.file)  # None: no cache, or an unreadable one: parse
        if isinstance(stored, dict) and stored.get("version") == self.version:
            kept = stored.get("entries")
            self.kept = kept if isinstance(kept, dict) else {}

    def entry(self, path: Path) -> RunbookEntry:
        refuse_linked_out(path)  # before the cache: a file once parsed may be a link now
        st = path.stat()
        name = str(path)
        row = self.kept.get(name)
        stamp = [st.st_ino, st.st_mtime_ns, st.st_size]
        if (
            isinstance(row, list)
            and len(row) == 4
            and row[:3] == stamp
            and isinstance(row[3], dict)
        ):
            try:
                entry = RunbookEntry(**row[3])
            except TypeError:
                pass  # fields of another shape: parse
            else:
                self.seen[name] = row
                return entry
        entry = parse_entry_file(path)
        fields = asdict(entry)
        try:
            marshal.dumps(fields)  # front matter YAML may hold dates: such an entry is not kept
        except ValueError:
            return entry
        self.seen[name] = [*stamp, fields]
        self.changed = True
        return entry

    def save(self) -> None:
        """Write what this run saw (files gone from the folders drop out), if anything changed."""
        if not self.changed and self.seen.keys() == self.kept.keys():
            return
        tmp = f"{self.file}.{os.getpid()}"
        try:
            with open(tmp, "wb") as fh:
                fh.write(marshal.dumps({"version": self.version, "entries": self.seen}))
            os.replace(tmp, self.file)
        except OSError:
            pass  # an unwritable cache only costs the next run a parse
