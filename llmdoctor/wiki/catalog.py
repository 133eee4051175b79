"""List and look up wiki entries through the index (no markdown parsing on a warm index)."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from llmdoctor.wiki.index import ensure_index, index_problems, with_index


@dataclass
class CatalogEntry:
    """What the index knows about one effective entry; `overrides`: the files it replaces."""

    id: str
    title: str
    severity: str
    tags: list[str]
    path: str
    overrides: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {
            "id": self.id,
            "title": self.title,
            "severity": self.severity,
            "tags": self.tags,
            "path": self.path,
            "overrides": self.overrides,
        }


_COLUMNS = "id, heading, severity, tags_json, path, overrides_json"


def _entry(row: tuple) -> CatalogEntry:
    entry_id, title, severity, tags, path, overrides = row
    return CatalogEntry(entry_id, title, severity, json.loads(tags), path, json.loads(overrides))


def list_entries(
    tag: str | None = None, wiki_dirs: list[str | Path] | None = None
) -> list[CatalogEntry]:
    """Every effective entry (overrides applied), sorted by id; optionally only one tag."""

    def read(conn: sqlite3.Connection) -> list[CatalogEntry]:
        sql = f"SELECT {_COLUMNS} FROM docs"
        params: list = []
        if tag:
            sql += " WHERE EXISTS (SELECT 1 FROM json_each(docs.tags_json) WHERE lower(value) = ?)"
            params.append(tag.strip().lower())
        return [_entry(r) for r in conn.execute(sql + " ORDER BY id", params)]

    return with_index(wiki_dirs, read)


def find_entry(entry_id: str, wiki_dirs: list[str | Path] | None = None) -> CatalogEntry | None:
    """The effective entry with this id, or None."""

    def read(conn: sqlite3.Connection) -> CatalogEntry | None:
        row = conn.execute(f"SELECT {_COLUMNS} FROM docs WHERE id = ?", (entry_id,)).fetchone()
        return _entry(row) if row else None

    return with_index(wiki_dirs, read)


def all_ids(wiki_dirs: list[str | Path] | None = None) -> list[str]:
    return with_index(wiki_dirs, lambda c: [r[0] for r in c.execute("SELECT id FROM docs")])


@dataclass
class IndexSummary:
    path: str
    entries: int
    files: int
    problems: list[tuple[str, str]]  # (file, "line: message") of files that could not be parsed
    dirs: list[str]

    def to_json(self) -> dict:
        return {
            "path": self.path,
            "entries": self.entries,
            "files": self.files,
            "dirs": self.dirs,
            "problems": [{"file": f, "error": e} for f, e in self.problems],
        }


def summarize_index(
    wiki_dirs: list[str | Path] | None = None, rebuild: bool = False
) -> IndexSummary:
    """Refresh (or rebuild) the index and describe it."""
    if rebuild:
        ensure_index(wiki_dirs, rebuild=True)

    def read(conn: sqlite3.Connection) -> IndexSummary:
        path = conn.execute("PRAGMA database_list").fetchone()[2]
        dirs = conn.execute("SELECT value FROM meta WHERE key = 'dirs'").fetchone()
        return IndexSummary(
            path=path,
            entries=conn.execute("SELECT count(*) FROM docs").fetchone()[0],
            files=conn.execute("SELECT count(*) FROM files").fetchone()[0],
            problems=index_problems(conn),
            dirs=json.loads(dirs[0]) if dirs else [],
        )

    return with_index(wiki_dirs, read)
