"""The wiki's SQLite FTS5 index: a cache of the markdown entries, rebuilt whenever in doubt.

One database per ordered set of wiki folders, in $XDG_CACHE_HOME/llmdoctor/wiki-<key>.sqlite3.
Every call checks freshness cheaply (the paths, mtimes and sizes of the *.md files, hashed and
compared with the hash stored in the index); only added or changed files are parsed again.

A database at its final path is never modified: a refresh copies it (or starts empty), applies the
changes to the copy and renames the copy into place. Readers open it immutable, so two processes
searching and indexing at once never see a half-written index, never wait on a lock, and the last
rename simply wins. A missing, foreign or corrupt file at the path is replaced by a full rebuild.

Writing uses sqlite-utils (imported only then); reading uses SQLite's C module alone, so a warm
`wiki search` never imports yaml, markdown-it or sqlite-utils (nor datetime, which the `sqlite3`
package imports for its date adapters: ~2 ms of every search).
"""

from __future__ import annotations

import marshal
import os
import time
from stat import S_ISREG

try:  # the C module behind `sqlite3`: the same connection and error classes
    from _sqlite3 import DatabaseError, Error
    from _sqlite3 import connect as _open
except ImportError:  # pragma: no cover - an interpreter that has only the package
    from sqlite3 import DatabaseError, Error
    from sqlite3 import connect as _open

from llmdoctor.wiki.cache import folders_file
from llmdoctor.wiki.folders import wiki_dir_paths

# the read path (`wiki search`) uses plain os.path strings: pathlib and typing cost ~12 ms there
TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Callable, Iterator
    from pathlib import Path
    from typing import TypeVar

    T = TypeVar("T")

SCHEMA_VERSION = "7"
TOKENIZER = "porter unicode61 remove_diacritics 2"
# FTS5 columns and their bm25 weights: names, titles, aliases and tags count most, then what the
# on-call sees (symptom, log signatures), then the explanation (cause, fix).
FTS_WEIGHTS = {
    "name": 10.0,
    "title": 10.0,
    "aliases": 10.0,
    "tags": 8.0,
    "symptom": 4.0,
    "signatures": 4.0,
    "cause": 1.5,
    "fix": 1.5,
    "cjk_title": 10.0,  # bigrams of Chinese in title, aliases, tags
    "cjk_text": 3.0,  # bigrams of Chinese in the sections
}
FTS_COLUMNS = tuple(FTS_WEIGHTS)
PARALLEL_PARSE_MIN_FILES = 400
STALE_TEMP_SECONDS = 600


# One *.md file as the freshness check sees it: (folder index, path, mtime_ns, size).
WikiFile = tuple[int, str, int, int]


def resolve_dir_paths(extra_dirs: list[str | Path] | None = None) -> list[str]:
    """The wiki folders searched, absolute, in override order: built-in, LLMDOCTOR_WIKI, --wiki."""
    return [os.path.abspath(d) for d in wiki_dir_paths(extra_dirs)]


def resolve_dirs(extra_dirs: list[str | Path] | None = None) -> list[Path]:
    """The wiki folders searched, in override order: built-in, LLMDOCTOR_WIKI, then --wiki."""
    from pathlib import Path

    return [Path(d) for d in resolve_dir_paths(extra_dirs)]


def _checksum(data: bytes) -> str:
    import zlib  # (a shared library to load: only a file-by-file check needs it)

    return f"{zlib.crc32(data):08x}{zlib.adler32(data):08x}"


def index_file(dirs: list[str | Path]) -> str:
    """The database file for this ordered set of (absolute) folders."""
    return folders_file("wiki", dirs, ".sqlite3")


def index_path(dirs: list[Path]) -> Path:
    """The database file for this ordered set of folders, as a Path."""
    from pathlib import Path

    return Path(index_file(dirs))


def scan(dirs: list[Path]) -> list[WikiFile]:
    """Every entry file (*.md, not hidden) of every folder, with its mtime and size, sorted.

    This runs on every search: one scandir per folder and one stat per file, nothing else.
    """
    found: list[WikiFile] = []
    for n, directory in enumerate(dirs):
        base = str(directory) + os.sep
        try:
            listing = os.scandir(directory)
        except OSError:
            continue
        with listing:
            for item in listing:
                name = item.name
                if name.endswith(".md") and name[0] != ".":
                    try:
                        st = item.stat()
                    except OSError:
                        continue  # removed while scanning
                    if S_ISREG(st.st_mode):
                        found.append((n, base + name, st.st_mtime_ns, st.st_size))
    found.sort()
    return found


def fingerprint(files: list[WikiFile]) -> str:
    """A checksum of the scan (marshal is C-fast; a new Python version just means one rebuild)."""
    return f"{SCHEMA_VERSION}:{len(files)}:{_checksum(marshal.dumps(files))}"


def connect(path: str | Path) -> sqlite3.Connection:
    """A read-only connection; `immutable` because a published index file is never changed."""
    # an SQLite URI: only %, ? and # are special in a file name
    name = os.path.abspath(path).replace("%", "%25").replace("?", "%3f").replace("#", "%23")
    return _open(f"file:{name}?mode=ro&immutable=1", uri=True)


def _stored_fingerprint(path: str | Path) -> str | None:
    """The fingerprint recorded in the index, or None when it is missing, foreign or corrupt."""
    if not os.path.isfile(path):
        return None
    try:
        conn = connect(path)
        try:
            row = conn.execute("SELECT value FROM meta WHERE key = 'fingerprint'").fetchone()
        finally:
            conn.close()
    except Error:
        return None
    return row[0] if row else None


def ensure_index(wiki_dirs: list[str | Path] | None = None, *, rebuild: bool = False) -> Path:
    """Make the index of these wiki folders current and return its path.

    `wiki_dirs` are the extra folders (--wiki); the built-in and LLMDOCTOR_WIKI folders are
    always included. Fresh index: one scandir per folder and one small query (for a large wiki
    checked a moment ago, one stat per folder; see LARGE_WIKI_FILES). `rebuild` ignores what
    exists and builds from scratch.
    """
    from pathlib import Path

    return Path(_ensure(wiki_dirs, rebuild))


def _ensure(wiki_dirs: list[str | Path] | None, rebuild: bool) -> str:
    dirs = resolve_dir_paths(wiki_dirs)
    path = index_file(dirs)
    if os.path.lexists(path) and not os.path.isfile(path):
        from llmdoctor.errors import BadInput

        raise BadInput(f"{path}: the wiki index is not a file; remove it (it is only a cache)")
    folders = _folder_state(dirs)
    if not rebuild and _recently_verified(path, folders):
        return path
    files = scan(dirs)
    digest = fingerprint(files)
    stored = None if rebuild else _stored_fingerprint(path)
    if stored != digest:
        usable = stored is not None and stored.startswith(f"{SCHEMA_VERSION}:")
        _publish(path, dirs, files, digest, start_from=path if usable else None)
    if len(files) >= LARGE_WIKI_FILES:
        _write_verified(path, folders, digest)
    return path


# A large wiki is checked file by file at most every FULL_CHECK_SECONDS: in between, one stat
# per folder sees every added, removed or renamed file (and so every atomic save: editors, git,
# `wiki add`); only an edit written in place into an existing file waits up to that long (or
# `llmdoctor wiki index --rebuild`). Below LARGE_WIKI_FILES the file-by-file check costs under a
# millisecond and always runs.
LARGE_WIKI_FILES = 2000
FULL_CHECK_SECONDS = 2.0


def _folder_state(dirs: list[str]) -> list[list]:
    state = []
    for d in dirs:
        try:
            st = os.stat(d)
            state.append([str(d), st.st_mtime_ns, st.st_ino])
        except OSError:
            state.append([str(d), None, None])
    return state


def _verified_path(path: str) -> str:
    return path + ".verified"


def _recently_verified(path: str, folders: list[list]) -> bool:
    """The index was checked file by file less than FULL_CHECK_SECONDS ago, against these same
    folders, and is still the file that check saw."""
    from llmdoctor.wiki.cache import read_kept

    stamp = read_kept(_verified_path(path), 1 << 20)
    try:
        st = os.stat(path)
    except OSError:
        return False
    if not isinstance(stamp, dict) or stamp.get("folders") != folders:
        return False
    if stamp.get("index") != [st.st_mtime_ns, st.st_ino, st.st_size]:
        return False
    age = time.time() - stamp.get("at", 0.0)
    return 0.0 <= age < FULL_CHECK_SECONDS


def _write_verified(path: str, folders: list[list], digest: str) -> None:
    try:
        st = os.stat(path)
        stamp = {
            "folders": folders,
            "index": [st.st_mtime_ns, st.st_ino, st.st_size],
            "digest": digest,
            "at": time.time(),
        }
        tmp = f"{path}.verified-{os.getpid()}"
        with open(tmp, "wb") as fh:
            fh.write(marshal.dumps(stamp))
        os.replace(tmp, _verified_path(path))
    except OSError:
        pass  # no stamp: the next search checks file by file again


def with_index(wiki_dirs: list[str | Path] | None, read: Callable[[sqlite3.Connection], T]) -> T:
    """Run `read` on a fresh index; a corrupt index is rebuilt and `read` tried once more."""
    path = _ensure(wiki_dirs, False)
    try:
        return _read(path, read)
    except DatabaseError:
        path = _ensure(wiki_dirs, True)
        return _read(path, read)


def _read(path: str | Path, read: Callable[[sqlite3.Connection], T]) -> T:
    conn = connect(path)
    try:
        return read(conn)
    finally:
        conn.close()


# --- writing ------------------------------------------------------------------------------


def _publish(
    path: str | Path,
    dirs: list[str],
    files: list[WikiFile],
    digest: str,
    start_from: str | Path | None,
) -> None:
    """Build the new index in a private temp file, then rename it over `path` (atomic)."""
    import shutil
    from pathlib import Path

    path = Path(path)
    tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}-{os.urandom(4).hex()}")
    try:
        built = False
        if start_from is not None:
            try:
                shutil.copyfile(start_from, tmp)
                _apply(tmp, dirs, files, digest, fresh=False)
                built = True
            except (Error, OSError, KeyError, ValueError):
                tmp.unlink(missing_ok=True)  # corrupt or replaced under us: start over
        if not built:
            _apply(tmp, dirs, files, digest, fresh=True)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    _remove_stale_temps(path)


def _remove_stale_temps(path: Path) -> None:
    """Temp files of processes that died mid-build; old enough that nobody is writing them."""
    cutoff = time.time() - STALE_TEMP_SECONDS
    for leftover in path.parent.glob(f"{path.name}.tmp-*"):
        try:
            if leftover.stat().st_mtime < cutoff:
                leftover.unlink()
        except OSError:
            pass


def _create_schema(db) -> None:
    db["meta"].create({"key": str, "value": str}, pk="key")
    db["files"].create(
        {
            "path": str,
            "dir_index": int,
            "mtime_ns": int,
            "size": int,
            "entry_id": str,
            "error": str,
        },
        pk="path",
    )
    db["files"].create_index(["entry_id"])
    # every search lists the files that could not be parsed: without this (partial) index that
    # reads all of `files` in path order, ~2-3 ms of a 10,000-entry wiki's search
    db.conn.execute(f"CREATE INDEX files_unreadable ON files(path) WHERE {_UNREADABLE}")
    columns: dict[str, type] = {
        "id": str,
        "heading": str,  # the title as written (the FTS column `title` is prepared for search)
        "path": str,
        "severity": str,
        "tags_json": str,
        "aliases_json": str,
        "signature_lines": str,
        "detected_by_json": str,
        "overrides_json": str,
        "exact_names": str,
    }
    columns.update({name: str for name in FTS_COLUMNS if name not in columns})
    db["docs"].create(columns)
    db["docs"].create_index(["id"], unique=True)
    db["docs"].enable_fts(list(FTS_COLUMNS), tokenize=TOKENIZER, create_triggers=True)


def _apply(dbfile: Path, dirs: list[Path], files: list[WikiFile], digest: str, fresh: bool) -> None:
    """Bring the database at `dbfile` in line with `files`, parsing only what changed."""
    import json

    import sqlite_utils

    conn = _open(dbfile)
    try:
        conn.execute("PRAGMA journal_mode=MEMORY")
        conn.execute("PRAGMA synchronous=OFF")
        db = sqlite_utils.Database(conn)
        with conn:
            if fresh:
                _create_schema(db)
            _apply_changes(conn, db, files)
            entries = conn.execute("SELECT count(*) FROM docs").fetchone()[0]
            db["meta"].upsert_all(
                [
                    {"key": "schema", "value": SCHEMA_VERSION},
                    # read by every search (bm25's N); counting 10,000 rows costs ~0.2 ms each time
                    {"key": "entries", "value": str(entries)},
                    {"key": "fingerprint", "value": digest},
                    {"key": "dirs", "value": json.dumps([str(d) for d in dirs])},
                    {"key": "built_at", "value": str(int(time.time()))},
                ],
                pk="key",
            )
        if fresh:
            conn.execute("INSERT INTO docs_fts(docs_fts) VALUES('optimize')")
    finally:
        conn.close()


def _apply_changes(conn: sqlite3.Connection, db, files: list[WikiFile]) -> None:
    stored = {
        row[0]: row[1:]
        for row in conn.execute("SELECT path, dir_index, mtime_ns, size, entry_id FROM files")
    }
    current = {f[1]: f for f in files}
    gone = {
        path
        for path, (dir_index, mtime_ns, size, _) in stored.items()
        if path not in current or current[path] != (dir_index, path, mtime_ns, size)
    }
    affected = {stored[path][3] for path in gone if stored[path][3]}
    conn.executemany("DELETE FROM files WHERE path = ?", [(p,) for p in sorted(gone)])
    todo = [f for f in files if f[1] not in stored or f[1] in gone]
    results = parse_files([f[1] for f in todo])
    if not stored:
        _insert_new(conn, db, todo, results)
        return
    parsed: dict[str, dict] = {}
    rows = []
    for f, result in zip(todo, results, strict=True):
        rows.append(_file_row(f, result))
        if isinstance(result, dict):
            parsed[f[1]] = result
            affected.add(result["id"])
    if rows:
        db["files"].insert_all(rows, pk="path", replace=True)
    _update_docs(conn, db, affected, parsed)


def _file_row(f: WikiFile, result: dict | str) -> dict:
    dir_index, path, mtime_ns, size = f
    row = {"path": path, "dir_index": dir_index, "mtime_ns": mtime_ns, "size": size}
    if isinstance(result, str):
        return row | {"entry_id": None, "error": result}
    return row | {"entry_id": result["id"], "error": None}


def _insert_new(conn: sqlite3.Connection, db, todo: list[WikiFile], results) -> None:
    """Fill an empty index, streaming: files come in override order, so for each id the file
    seen last wins, and memory stays flat however many entries there are."""
    import json

    earlier: dict[str, list[str]] = {}  # id -> paths already indexed under it
    file_rows: list[dict] = []
    doc_rows: list[dict] = []

    def flush() -> None:
        if file_rows:
            db["files"].insert_all(file_rows, pk="path")
        if doc_rows:
            db["docs"].insert_all(doc_rows)
        file_rows.clear()
        doc_rows.clear()

    for f, result in zip(todo, results, strict=True):
        file_rows.append(_file_row(f, result))
        if isinstance(result, dict):
            paths = earlier.setdefault(result["id"], [])
            if paths:  # an override: the later folder's entry replaces the earlier one
                flush()
                conn.execute("DELETE FROM docs WHERE id = ?", (result["id"],))
                result = result | {"overrides_json": json.dumps(paths, ensure_ascii=False)}
            paths.append(f[1])
            doc_rows.append(result)
        if len(file_rows) >= 500:
            flush()
    flush()


def _update_docs(conn: sqlite3.Connection, db, affected: set[str], parsed: dict) -> None:
    """Recompute the winning file (the last folder wins) of every affected id."""
    import json

    if not affected:
        return
    sources: dict[str, list[str]] = {}
    for entry_id, path in conn.execute(
        "SELECT entry_id, path FROM files WHERE error IS NULL AND entry_id IS NOT NULL "
        "ORDER BY dir_index, path"
    ):
        if entry_id in affected:
            sources.setdefault(entry_id, []).append(path)
    conn.executemany("DELETE FROM docs WHERE id = ?", [(i,) for i in sorted(affected)])
    rows = []
    for entry_id in sorted(sources):
        paths = sources[entry_id]
        row = parsed.get(paths[-1]) or index_one(paths[-1])
        if isinstance(row, str):
            continue  # changed since the scan; the next freshness check catches it
        overrides = json.dumps(paths[:-1], ensure_ascii=False)
        rows.append(row | {"overrides_json": overrides})
    if rows:
        db["docs"].insert_all(rows)


def parse_files(paths: list[str]) -> Iterator[dict | str]:
    """Each file's `docs` row (see index_one), in order; big batches use all CPUs."""
    if len(paths) >= PARALLEL_PARSE_MIN_FILES and (os.cpu_count() or 1) > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        if "fork" in multiprocessing.get_all_start_methods():
            workers = min(os.cpu_count() or 1, 8)
            ctx = multiprocessing.get_context("fork")
            with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
                yield from pool.map(index_one, paths, chunksize=64)
            return
    for path in paths:
        yield index_one(path)


def index_one(path: str) -> dict | str:
    """Parse one entry file into its `docs` row, or 'line: message' when it is unusable."""
    from llmdoctor.wiki.document import document_row
    from llmdoctor.wiki.entry import EntryError, parse_entry_file

    try:
        return document_row(parse_entry_file(path), overrides=[])
    except EntryError as exc:
        return f"{exc.line}: {exc.message}"
    except OSError as exc:
        return f"1: cannot read: {exc.strerror or exc}"


_UNREADABLE = "error IS NOT NULL"


def index_problems(conn: sqlite3.Connection) -> list[tuple[str, str]]:
    """(path, 'line: message') of every entry file the index could not parse."""
    query = f"SELECT path, error FROM files WHERE {_UNREADABLE} ORDER BY path"
    return list(conn.execute(query))
