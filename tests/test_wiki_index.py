"""The wiki index: where it lives, freshness, incremental refresh, corruption, two processes."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from llmdoctor.cli import run as cli_run
from llmdoctor.wiki import index
from llmdoctor.wiki.catalog import find_entry, list_entries, summarize_index
from llmdoctor.wiki.search import search

REPO = Path(__file__).resolve().parents[1]


def write_entry(folder: Path, entry_id: str, symptom: str = "Something is wrong.", **extra) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{entry_id}.md"
    title = extra.get("title", entry_id.replace("-", " "))
    path.write_text(
        f"---\nid: {entry_id}\ntitle: {title}\nseverity: warning\ntags: [{extra.get('tag', 'x')}]\n"
        f"---\n## Symptom\n{symptom}\n\n## Cause\nA cause.\n\n## Fix\nA fix.\n",
        encoding="utf-8",
    )
    return path


def touch_later(path: Path) -> None:
    """Make sure an edit shows in the mtime even on coarse file systems."""
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 2_000_000_000))


def test_index_lives_in_the_xdg_cache_folder(tmp_path):
    # conftest points XDG_CACHE_HOME at a temp folder; the index must be inside it
    path = index.ensure_index([tmp_path / "wiki"])
    assert path.is_file()
    assert Path(os.environ["XDG_CACHE_HOME"]) / "llmdoctor" in path.parents


def test_unusable_cache_folder_falls_back_to_the_temp_folder(tmp_path, monkeypatch):
    # XDG_CACHE_HOME pointing at a file: search still works, from the temp folder
    import tempfile

    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    wiki = tmp_path / "wiki"
    write_entry(wiki, "fallback-entry", "ptarmigan")
    assert [r.id for r in search("ptarmigan", wiki_dirs=[wiki])] == ["fallback-entry"]
    assert list((tmp_path / "tmp").glob("llmdoctor-*/wiki-*.sqlite3"))


def test_different_folder_sets_get_different_indexes(tmp_path):
    # the database is keyed by the ordered set of wiki folders
    a = index.ensure_index([tmp_path / "a"])
    b = index.ensure_index([tmp_path / "b"])
    assert a != b


def test_added_changed_and_removed_entries_are_picked_up(tmp_path):
    wiki = tmp_path / "wiki"
    write_entry(wiki, "entry-one", "The walrus engine stalls.")
    assert [r.id for r in search("walrus", wiki_dirs=[wiki])] == ["entry-one"]
    # added
    write_entry(wiki, "entry-two", "Another walrus problem.")
    assert {r.id for r in search("walrus", wiki_dirs=[wiki])} == {"entry-one", "entry-two"}
    # changed in place
    path = write_entry(wiki, "entry-one", "Now it is about a narwhal.")
    touch_later(path)
    assert [r.id for r in search("walrus", wiki_dirs=[wiki])] == ["entry-two"]
    assert [r.id for r in search("narwhal", wiki_dirs=[wiki])] == ["entry-one"]
    # removed
    (wiki / "entry-two.md").unlink()
    assert search("walrus", wiki_dirs=[wiki]) == []


def test_fresh_index_is_not_rewritten(tmp_path):
    # the freshness check is a scan and one query; no rebuild when nothing changed
    wiki = tmp_path / "wiki"
    write_entry(wiki, "calm-entry")
    path = index.ensure_index([wiki])
    inode = path.stat().st_ino
    assert index.ensure_index([wiki]) == path
    assert path.stat().st_ino == inode


def test_refresh_parses_only_changed_files(tmp_path, monkeypatch):
    # incremental: one edited file out of many is the only one parsed again
    wiki = tmp_path / "wiki"
    for n in range(20):
        write_entry(wiki, f"entry-{n:02d}")
    index.ensure_index([wiki])
    parsed: list[list[str]] = []
    real = index.parse_files
    monkeypatch.setattr(index, "parse_files", lambda paths: parsed.append(paths) or real(paths))
    touch_later(write_entry(wiki, "entry-07", "edited"))
    index.ensure_index([wiki])
    assert parsed == [[str(wiki / "entry-07.md")]]


def test_override_is_recorded_and_undone_when_the_team_file_goes(tmp_path, monkeypatch):
    base, team = tmp_path / "base", tmp_path / "team"
    write_entry(base, "shared-id", "base text", title="Base title")
    write_entry(team, "shared-id", "team text", title="Team title")
    monkeypatch.setenv("LLMDOCTOR_WIKI", str(base))
    record = find_entry("shared-id", [team])
    assert record.title == "Team title"
    assert record.overrides == [str(Path(os.path.abspath(base)) / "shared-id.md")]
    (team / "shared-id.md").unlink()
    record = find_entry("shared-id", [team])
    assert record.title == "Base title" and record.overrides == []


def test_unparsable_file_is_recorded_not_fatal(tmp_path):
    # one broken file must not hide the others
    wiki = tmp_path / "wiki"
    write_entry(wiki, "good-entry", "quokka words")
    (wiki / "broken.md").write_text("no front matter here\n", encoding="utf-8")
    assert [r.id for r in search("quokka", wiki_dirs=[wiki])] == ["good-entry"]
    problems = summarize_index([wiki]).problems
    assert [Path(p).name for p, _ in problems] == ["broken.md"]
    assert problems[0][1].startswith("1: ")


def test_unreadable_files_are_listed_from_their_own_index_and_kept_current(tmp_path):
    # every search lists them: a scan of all of `files` cost ~2-3 ms of a 10,000-entry search
    wiki = tmp_path / "wiki"
    write_entry(wiki, "good-entry", "quokka words")
    (wiki / "b-broken.md").write_text("no front matter here\n", encoding="utf-8")
    path = index.ensure_index([wiki])
    with sqlite3.connect(path) as conn:
        plan = conn.execute(
            "EXPLAIN QUERY PLAN SELECT path, error FROM files WHERE error IS NOT NULL ORDER BY path"
        ).fetchall()
        assert "USING INDEX files_unreadable" in plan[0][3]
        assert not any("TEMP B-TREE" in row[3] for row in plan)
    # a refresh (an incremental update of a copy) keeps the index in step
    (wiki / "a-broken.md").write_text("---\nid: [\n---\n", encoding="utf-8")
    (wiki / "b-broken.md").unlink()
    unreadable: list[tuple[str, str]] = []
    search("quokka", wiki_dirs=[wiki], unreadable=unreadable)
    assert [Path(p).name for p, _ in unreadable] == ["a-broken.md"]


@pytest.mark.parametrize(
    "damage",
    [
        lambda p: p.write_bytes(b"this is not a database at all\n" * 100),
        lambda p: p.write_bytes(p.read_bytes()[: len(p.read_bytes()) // 2]),
        lambda p: p.write_bytes(b""),
        lambda p: p.write_bytes(os.urandom(8192)),
    ],
    ids=["garbage", "truncated", "empty", "random"],
)
def test_corrupt_index_is_rebuilt_never_fatal(tmp_path, damage):
    # the index is a cache: whatever is at its path, search rebuilds and answers
    wiki = tmp_path / "wiki"
    for n in range(30):
        write_entry(wiki, f"otter-{n:02d}", f"otter number {n} words " * 20)
    path = index.ensure_index([wiki])
    damage(path)
    assert len(search("otter", limit=50, wiki_dirs=[wiki])) == 30
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()


def test_index_with_damaged_pages_behind_a_readable_header_is_rebuilt(tmp_path):
    # the freshness check still reads its fingerprint; the search itself hits bad pages
    wiki = tmp_path / "wiki"
    for n in range(30):
        write_entry(wiki, f"otter-{n:02d}", f"otter number {n} words " * 20)
    path = index.ensure_index([wiki])
    data = bytearray(path.read_bytes())
    data[3 * 4096 :] = b"\xff" * (len(data) - 3 * 4096)
    path.write_bytes(bytes(data))
    assert index._stored_fingerprint(path) is not None
    assert len(search("otter", limit=50, wiki_dirs=[wiki])) == 30
    assert len(list_entries(None, [wiki])) >= 30


def test_index_from_an_older_schema_is_rebuilt(tmp_path):
    wiki = tmp_path / "wiki"
    write_entry(wiki, "schema-entry", "beluga")
    path = index.ensure_index([wiki])
    conn = sqlite3.connect(path)
    conn.execute("UPDATE meta SET value = '0:old' WHERE key = 'fingerprint'")
    conn.commit()
    conn.close()
    assert [r.id for r in search("beluga", wiki_dirs=[wiki])] == ["schema-entry"]


def test_rebuild_replaces_the_file(tmp_path):
    wiki = tmp_path / "wiki"
    write_entry(wiki, "rebuild-entry")
    path = index.ensure_index([wiki])
    inode = path.stat().st_ino
    assert index.ensure_index([wiki], rebuild=True) == path
    assert path.stat().st_ino != inode
    assert not list(path.parent.glob("*.tmp-*"))


def test_list_entries_by_tag(tmp_path):
    wiki = tmp_path / "wiki"
    write_entry(wiki, "tagged-a", tag="rare-tag")
    write_entry(wiki, "tagged-b", tag="other-tag")
    assert [e.id for e in list_entries("rare-tag", [wiki])] == ["tagged-a"]


WORKER = r"""
import os, sys, time
from pathlib import Path
from llmdoctor.wiki.index import ensure_index
from llmdoctor.wiki.search import search

role, wiki, rounds = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
for n in range(rounds):
    if role == "writer":
        # rewrite an entry and add one, so every round forces a refresh
        (wiki / "moving.md").write_text(
            "---\nid: moving\ntitle: moving target\nseverity: info\n---\n"
            f"## Symptom\nround{n} puffin\n\n## Cause\nc\n\n## Fix\nf\n", encoding="utf-8")
        st = (wiki / "moving.md").stat()
        os.utime(wiki / "moving.md", ns=(st.st_atime_ns, st.st_mtime_ns + n + 1))
        if n % 5 == 0:
            ensure_index([wiki], rebuild=True)
    results = search("puffin", wiki_dirs=[wiki], limit=50)
    assert len(results) >= 40, (role, n, len(results))
print(role, "ok")
"""


def test_two_processes_indexing_and_searching_at_once(tmp_path):
    # a writer (edits + rebuilds) and a reader race on one index: no crash, no corruption
    wiki = tmp_path / "wiki"
    for n in range(40):
        write_entry(wiki, f"puffin-{n:02d}", f"puffin {n} " * 30)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, role, str(wiki), "25"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for role in ("writer", "reader", "reader")
    ]
    outputs = [p.communicate(timeout=240) for p in procs]
    for proc, (out, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err
        assert out.strip().endswith("ok")
    path = index.ensure_index([wiki])
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()
    top = search("round24 puffin", wiki_dirs=[wiki])[0]
    assert top.id == "moving"
    assert not [p for p in path.parent.glob("*.tmp-*") if time.time() - p.stat().st_mtime < 600]


def test_two_processes_building_a_missing_index_at_once(tmp_path):
    # both find no index and build it; the last rename wins and both answer
    wiki = tmp_path / "wiki"
    for n in range(200):
        write_entry(wiki, f"gannet-{n:03d}", f"gannet {n} " * 10)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    script = (
        "import sys; from llmdoctor.wiki.search import search; "
        "print(len(search('gannet', limit=500, wiki_dirs=[sys.argv[1]])))"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(wiki)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    for proc in procs:
        out, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err
        assert out.strip() == "200"


def test_an_index_path_that_is_a_folder_is_a_one_line_error(capsys):
    from llmdoctor.wiki.index import index_path, resolve_dirs

    index_path(resolve_dirs(None)).mkdir(parents=True)
    with pytest.raises(SystemExit) as done:
        cli_run(["wiki", "search", "oom"])
    err = capsys.readouterr().err
    assert done.value.code == 3
    assert "the wiki index is not a file" in err and "internal error" not in err
