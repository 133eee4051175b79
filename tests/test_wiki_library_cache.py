"""load_library keeps parsed entries in the cache folder: the same entries as a fresh parse, and
a changed, added, removed or unreadable file is never served stale."""

from __future__ import annotations

import os
import shutil
from dataclasses import asdict
from pathlib import Path

import pytest

from llmdoctor.wiki.entry import parse_entry_file
from llmdoctor.wiki.library import load_library

RUNBOOKS = Path(__file__).resolve().parent.parent / "runbooks"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(folder))
    return folder / "llmdoctor"


@pytest.fixture
def team(tmp_path):
    folder = tmp_path / "team"
    folder.mkdir()
    for name in ("cuda-oom-runtime.md", "nccl-failure.md"):
        shutil.copy(RUNBOOKS / name, folder / name)
    return folder


def _fields(lib) -> dict:
    return {i: asdict(e) for i, e in lib.entries.items()}


def test_a_cached_load_gives_the_entries_a_fresh_parse_gives(cache, team):
    first = load_library([team])
    [stored] = cache.glob("entries-*.marshal")
    written = stored.stat().st_mtime_ns
    second = load_library([team])
    assert stored.stat().st_mtime_ns == written  # every entry came from the cache: not rewritten
    assert _fields(second) == _fields(first)
    fresh = {p.stem: asdict(parse_entry_file(p)) for p in sorted(team.glob("*.md"))}
    for entry_id, fields in fresh.items():
        assert _fields(second)[entry_id] == fields  # the team's copies override the built-ins
    assert second.overridden == first.overridden


def test_an_edited_added_or_removed_file_is_read_again(cache, team):
    load_library([team])
    path = team / "cuda-oom-runtime.md"
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("title: CUDA out of memory", "title: GPU OOM (team)", 1))
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))  # a same-second edit too
    (team / "nccl-failure.md").unlink()
    shutil.copy(RUNBOOKS / "shm-too-small.md", team / "shm-too-small.md")
    lib = load_library([team])
    assert lib.entries["cuda-oom-runtime"].title == "GPU OOM (team) while serving"
    assert lib.entries["nccl-failure"].path == str(RUNBOOKS / "nccl-failure.md")
    assert lib.entries["shm-too-small"].path == str(team / "shm-too-small.md")


def test_a_file_replaced_with_the_same_size_and_mtime_is_read_again(cache, team):
    # `cp -p` / `rsync -t` keep a source's mtime: a one-letter change in a copy put in place
    # has the size and mtime of the file it replaces, but not its inode
    path = team / "cuda-oom-runtime.md"
    load_library([team])
    st = path.stat()
    text = path.read_text(encoding="utf-8").replace("while serving", "while servinG", 1)
    replacement = team / ".cuda-oom-runtime.md.new"
    replacement.write_text(text, encoding="utf-8")
    os.utime(replacement, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(replacement, path)
    assert (path.stat().st_size, path.stat().st_mtime_ns) == (st.st_size, st.st_mtime_ns)
    assert load_library([team]).entries["cuda-oom-runtime"].title.endswith("while servinG")


def test_a_corrupt_cache_is_ignored_and_a_bad_entry_still_reported(cache, team):
    load_library([team])
    for stored in cache.glob("entries-*.marshal"):
        stored.write_bytes(b"\x00not marshal")
    (team / "broken.md").write_text("---\nid: [unclosed\n---\n", encoding="utf-8")
    lib = load_library([team])
    assert "cuda-oom-runtime" in lib.entries
    assert [e.path for e in lib.errors] == [str(team / "broken.md")]
    again = load_library([team])
    assert [e.path for e in again.errors] == [str(team / "broken.md")]


def test_an_entry_whose_front_matter_marshal_cannot_keep_is_parsed_each_time(cache, team):
    # YAML turns an unquoted date into a datetime.date: loaded right, only not kept
    path = team / "nccl-failure.md"
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("---\n", "---\nreviewed: 2026-11-30\n", 1), encoding="utf-8")
    first = load_library([team])
    second = load_library([team])
    assert str(second.entries["nccl-failure"].front_matter["reviewed"]) == "2026-11-30"
    assert _fields(second) == _fields(first)


@pytest.fixture(scope="module")
def module_scoped_cache():
    # module fixtures run before the per-test autouse one; they must not see the real cache
    from llmdoctor.wiki.cache import cache_dir

    return cache_dir()


def test_no_fixture_of_any_scope_writes_into_the_users_cache(module_scoped_cache):
    import pwd

    real_home = Path(pwd.getpwuid(os.getuid()).pw_dir)
    assert not module_scoped_cache.is_relative_to(real_home / ".cache")
    assert not Path.home().is_relative_to(real_home) or Path.home() != real_home
    assert os.environ["KUBECONFIG"] != str(real_home / ".kube" / "config")
