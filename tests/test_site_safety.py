"""The published wiki hands nothing to an attacker: entry ids never become paths outside the
site, nothing is followed through links out of the wiki folder, examples are redacted, `wiki
serve` serves only the site's own files, remote images are links, tag pages never overwrite
each other, and a team's regex never runs in a reader's backtracking engine."""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest

from llmdoctor.wiki.site import SITE_MARKER, build_site

ENTRY = """---
id: {id}
title: {title}
severity: warning
tags: [{tags}]
signatures:
  - '{signature}'
---
## Symptom
{symptom}

## Cause
A cause.

## Fix
A fix.
"""


def entry(folder: Path, file_id: str, *, id=None, title="A team entry", tags="team", **kw) -> Path:
    path = folder / f"{file_id}.md"
    path.write_text(
        ENTRY.format(
            id=id or file_id,
            title=title,
            tags=tags,
            signature=kw.get("signature", f"{file_id} failed hard"),
            symptom=kw.get("symptom", "Requests fail."),
        ),
        encoding="utf-8",
    )
    return path


def site_text(site: Path) -> str:
    return "".join(p.read_text(encoding="utf-8") for p in site.rglob("*") if p.is_file())


def test_an_entry_id_with_dots_and_slashes_writes_nothing_outside_the_site(tmp_path):
    # id ../../x once wrote x.html two folders above the site
    wiki = tmp_path / "a" / "b" / "wiki"
    wiki.mkdir(parents=True)
    entry(wiki, "escape", id="../../escaped")
    summary = build_site(tmp_path / "a" / "b" / "site", [wiki])
    assert not list(tmp_path.rglob("escaped.html"))
    assert any("../../escaped" in p and "no page" in p for p in summary.problems)
    assert "../../escaped" not in (summary.path / "search-index.js").read_text()


def test_an_entry_whose_id_differs_from_its_file_name_has_no_page(tmp_path):
    # the lint rule (id = file name) holds at build: one file cannot take another entry's page
    wiki = tmp_path / "wiki"
    wiki.mkdir()
    entry(wiki, "mine", id="cuda-oom-runtime")
    summary = build_site(tmp_path / "site", [wiki])
    page = summary.path / "cuda-oom-runtime.html"
    assert not page.exists() or "A team entry" not in page.read_text()
    assert not (summary.path / "mine.html").exists()
    assert any("does not match the file name" in p for p in summary.problems)


def test_an_entry_linked_from_outside_the_wiki_folder_is_not_published(tmp_path):
    # a link in the wiki to a file elsewhere (a kubeconfig, a private note) is not a runbook
    outside = tmp_path / "private"
    outside.mkdir()
    entry(outside, "leak", symptom="token: PRIVATE-abc123")
    wiki = tmp_path / "wiki"
    wiki.mkdir()
    (wiki / "leak.md").symlink_to(outside / "leak.md")
    summary = build_site(tmp_path / "site", [wiki])
    assert "PRIVATE-abc123" not in site_text(summary.path)
    assert not (summary.path / "leak.html").exists()
    assert any("link to outside" in p for p in summary.problems)


def test_example_files_linked_from_outside_are_not_read(tmp_path):
    # example files (and the examples folder) linked out of the wiki are not followed
    private = tmp_path / "home"
    (private / "kube").mkdir(parents=True)
    (private / "kube" / "config").write_text("users:\n- name: admin\n  user:\n    secret-word\n")
    wiki = tmp_path / "wiki"
    wiki.mkdir()
    entry(wiki, "linked-file")
    (wiki / "linked-file.examples").mkdir()
    (wiki / "linked-file.examples" / "kubeconfig").symlink_to(private / "kube" / "config")
    entry(wiki, "linked-folder")
    (wiki / "linked-folder.examples").symlink_to(private / "kube")
    summary = build_site(tmp_path / "site", [wiki])
    assert "secret-word" not in site_text(summary.path)


def test_example_files_are_redacted_like_bundles(tmp_path):
    # an example kept from an incident log still carries its tokens: the page shows none
    wiki = tmp_path / "wiki"
    wiki.mkdir()
    entry(wiki, "fetch-fails")
    examples = wiki / "fetch-fails.examples"
    examples.mkdir()
    (examples / "incident.log").write_text(
        "ERROR fetch-fails failed hard: https://bot:Sup3rS3cret@hub.example/m\n"
        "curl -H 'Authorization: Bearer abc.def.123456789'\n"
        "HF_TOKEN=hf_AbCdEfGhIjKlMnOpQrStUvWxYz01 max_num_batched_tokens=8192\n"
    )
    summary = build_site(tmp_path / "site", [wiki])
    page = (summary.path / "fetch-fails.html").read_text()
    for secret in ("Sup3rS3cret", "abc.def.123456789", "hf_AbCdEfGhIjKlMnOpQrStUvWxYz01"):
        assert secret not in page
    assert "max_num_batched_tokens=8192" in page  # evidence stays


def test_a_remote_image_becomes_a_link_and_loads_nothing(tmp_path):
    # the site promises no external assets: an <img> from elsewhere tells that host who reads
    wiki = tmp_path / "wiki"
    wiki.mkdir()
    entry(wiki, "with-image", symptom="See ![the graph](https://tracker.example/p.png?u=1) here.")
    summary = build_site(tmp_path / "site", [wiki])
    page = (summary.path / "with-image.html").read_text()
    assert "<img" not in page
    assert '<a class="image" href="https://tracker.example/p.png?u=1">the graph</a>' in page


def test_tags_differing_only_in_case_each_keep_their_page(tmp_path):
    # GPU and gpu once wrote the same tags/gpu.html: one tag's entries vanished
    wiki = tmp_path / "wiki"
    wiki.mkdir()
    entry(wiki, "upper-tag", tags="GPU")
    entry(wiki, "lower-tag", tags="gpu")
    site = build_site(tmp_path / "site", [wiki]).path
    pages = {p.name: p.read_text() for p in (site / "tags").glob("*.html")}
    holding = [name for name, text in pages.items() if "upper-tag.html" in text]
    holding_lower = [name for name, text in pages.items() if "lower-tag.html" in text]
    assert holding and holding_lower and set(holding).isdisjoint(holding_lower)
    for page in (site / "upper-tag.html", site / "lower-tag.html"):
        href = re.search(r'href="(tags/[^"]+)"', page.read_text()).group(1)
        assert (site / href).is_file()


@contextmanager
def serving(site: Path, wiki: Path):
    from llmdoctor.wiki.site_serve import serve

    messages: list[str] = []
    stop = threading.Event()
    thread = threading.Thread(
        target=serve, args=(site, [wiki], None, "127.0.0.1", 0, messages.append, stop), daemon=True
    )
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not messages and time.monotonic() < deadline:
            time.sleep(0.05)
        yield re.search(r"http://\S+/", messages[0]).group(0)
    finally:
        stop.set()
        thread.join(10)


def status_of(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_serve_serves_only_the_files_the_site_wrote(tmp_path):
    # the site folder is a git checkout with credentials in .git/config and a team's notes
    wiki = tmp_path / "wiki"
    wiki.mkdir()
    entry(wiki, "served")
    site = tmp_path / "site"
    build_site(site, [wiki])
    (site / ".git").mkdir()
    (site / ".git" / "config").write_text("url = https://deploy:ghp_secret@git.example/x\n")
    (site / "notes.txt").write_text("private notes\n")
    with serving(site, wiki) as url:
        assert status_of(url)[0] == 200  # / is the index
        assert status_of(url + "served.html")[0] == 200
        assert status_of(url + "tags/team.html")[0] == 200
        for path in (".git/config", "notes.txt", SITE_MARKER, "tags/", ".git/", "%2e%2e/x"):
            code, body = status_of(url + path)
            assert code == 404, path  # never served, never listed
            assert b"ghp_secret" not in body and b"private notes" not in body


def test_site_marker_lists_every_file_served(tmp_path):
    # what serve may answer is exactly what build_site wrote
    wiki = tmp_path / "wiki"
    wiki.mkdir()
    entry(wiki, "listed")
    site = build_site(tmp_path / "site", [wiki]).path
    listed = json.loads((site / SITE_MARKER).read_text())["files"]
    on_disk = sorted(str(p.relative_to(site)) for p in site.rglob("*") if p.is_file())
    assert sorted([*listed, SITE_MARKER]) == on_disk


@pytest.mark.parametrize("tag", [".", "..", "../../x", "/", "..hidden"])
def test_a_tag_never_names_a_file_outside_tags_or_a_hidden_one(tmp_path, tag):
    # tags are team text too: their page names are slugs, never a path
    wiki = tmp_path / "wiki"
    wiki.mkdir()
    entry(wiki, "odd-tag", tags=json.dumps(tag))
    site = build_site(tmp_path / "site", [wiki]).path
    names = [p.name for p in (site / "tags").iterdir()]
    assert all(not n.startswith(".") for n in names)
    assert not list(tmp_path.glob("x.html")) and not list(site.glob("x.html"))
