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


# --- team regexes in the page ---------------------------------------------------------------

SEARCH_JS = Path(__file__).resolve().parents[1] / "llmdoctor" / "wiki" / "site_assets" / "search.js"
# search.js's matchesProgram, run by node over every (program, line) pair given on stdin
NODE_MATCHER = """
globalThis.window = {};
globalThis.document = { readyState: "complete", getElementById: () => null };
const fs = require("fs");
eval(fs.readFileSync(process.argv[1], "utf8"));
const { programs, lines } = JSON.parse(fs.readFileSync(0, "utf8"));
const codes = lines.map((l) => Array.from(l, (c) => c.codePointAt(0)));
const started = Date.now();
const out = programs.map((p) => codes.map((l) => window.llmdoctorMatchesProgram(p, l)));
process.stdout.write(JSON.stringify({ out, ms: Date.now() - started }));
"""


def page_matches(programs: list, lines: list[str]) -> tuple[list[list[bool]], float]:
    """What the page's matcher answers for each program on each line, and how long it took."""
    import shutil
    import subprocess

    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed (apt-get install nodejs)")
    done = subprocess.run(
        [node, "-e", NODE_MATCHER, str(SEARCH_JS)],
        input=json.dumps({"programs": programs, "lines": lines}),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    answer = json.loads(done.stdout)
    return answer["out"], answer["ms"]


def test_the_page_matches_every_builtin_signature_exactly_as_re2_does():
    # the page's ranking equals `wiki search` only if its matcher agrees with RE2 on real lines
    from llmdoctor.wiki.library import load_library
    from llmdoctor.wiki.re2_patterns import line_pattern
    from llmdoctor.wiki.site_regex import signature_program

    root = Path(__file__).resolve().parent / "fixtures" / "runbooks"
    lines = [
        line
        for path in sorted(root.glob("*/*"))
        if path.is_file() and path.name != "SOURCES.md"
        for line in path.read_text(errors="replace").splitlines()[:40]
        if line.strip()
    ]
    signatures = sorted(
        {s for e in load_library().entries.values() for s in [*e.signatures, *e.hints]}
    )
    programs = [signature_program(s) for s in signatures]
    assert all(programs), "every built-in signature runs in the page"
    got, _ = page_matches(programs, lines)
    for signature, answers in zip(signatures, got, strict=True):
        pattern = line_pattern(signature)
        assert answers == [bool(pattern.search(line)) for line in lines], signature


@pytest.mark.parametrize(
    "signature",
    [
        r"^(a|aa)+$",  # exponential in a backtracking engine
        r"(a+)+b",
        r"(x+x+)+y",
        r"^(\w+\s?)*$",
        r"(.*a){12}",  # polynomial of degree 12
    ],
)
def test_a_catastrophic_signature_is_linear_in_the_page(signature):
    # 20,000 characters that almost match: JavaScript's RegExp would not return
    from llmdoctor.wiki.re2_patterns import line_pattern
    from llmdoctor.wiki.site_regex import signature_program

    program = signature_program(signature)
    assert program is not None
    line = "a" * 20_000 + "!"
    (answer,), ms = page_matches([program], [line])
    assert answer == [bool(line_pattern(signature).search(line))]
    assert ms < 20_000


@pytest.mark.parametrize(
    "signature",
    [
        r"(a)\1",  # a back-reference: no linear matcher exists
        r"foo(?=bar)",  # lookahead
        r"(?i)cuda",  # inline flags
        r"a{0,5000}",  # larger than the page runs
        r"[[:digit:]]+ GPUs",  # a POSIX class: RE2 and Python's parser read it differently
        r"end\Z",  # RE2 refuses it, so the CLI never matches it: neither may the page
    ],
)
def test_a_signature_without_a_linear_program_is_left_to_the_cli(signature):
    from llmdoctor.wiki.site_regex import signature_program

    assert signature_program(signature) is None


def _regexes():
    from hypothesis import strategies as st

    atoms = st.sampled_from(["a", "b", ".", "[ab]", "[^a]", r"\w", r"\s", r"\b", "^", "$", " "])

    def grow(inner):
        return st.one_of(
            st.tuples(inner, inner).map("".join),
            st.tuples(inner, inner).map(lambda t: f"(?:{t[0]}|{t[1]})"),
            st.tuples(inner, st.sampled_from(["*", "+", "?", "{2}", "{1,3}", "{0,2}"])).map(
                lambda t: f"({t[0]}){t[1]}"
            ),
        )

    return st.recursive(atoms, grow, max_leaves=8)


def test_the_page_matcher_agrees_with_re2_on_generated_regexes():
    # property: for any regex of the shared subset and any line, page and CLI agree
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from llmdoctor.wiki.re2_patterns import line_pattern
    from llmdoctor.wiki.site_regex import signature_program

    @settings(max_examples=15, deadline=None)
    @given(
        regexes=st.lists(_regexes(), min_size=20, max_size=40),
        lines=st.lists(st.text("ab !é", max_size=12), min_size=10, max_size=20),
    )
    def agree(regexes, lines):
        kept = [(r, signature_program(r)) for r in regexes if line_pattern(r) is not None]
        got, _ = page_matches([p for _, p in kept], lines)
        for (regex, _), answers in zip(kept, got, strict=True):
            pattern = line_pattern(regex)
            assert answers == [bool(pattern.search(line)) for line in lines], regex

    agree()


def test_a_catastrophic_team_signature_does_not_freeze_the_page(tmp_path):
    # real Chromium: a team signature that passes lint, `(a|aa)+$`, and a pasted line that
    # almost matches it. RegExp took exponential time and froze the tab; the page answers.
    pytest.importorskip("playwright.sync_api")
    from playwright.sync_api import sync_playwright
    from test_wiki_site_browser import CHROMIUM_ARGS, _chromium

    executable = _chromium()
    if executable is None:
        if __import__("os").environ.get("LLMDOCTOR_REQUIRE_BROWSER") == "1":
            pytest.fail("browser tests are required here but chromium is not installed")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    wiki = tmp_path / "wiki"
    wiki.mkdir()
    entry(wiki, "gateway-stall", signature="gateway stalled (a|aa)+$")
    site = build_site(tmp_path / "site", [wiki]).path
    query = "gateway stalled " + "a" * 40 + "!"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.goto((site / "index.html").as_uri())
            page.fill("#q", query)
            page.wait_for_function(
                "q => document.getElementById('results').dataset.query === q",
                arg=query,
                timeout=10_000,
            )
            ids = page.locator("#results li").evaluate_all("els => els.map(e => e.dataset.id)")
            assert "gateway-stall" in ids  # found by its words, not by the signature
            page.fill("#q", "gateway stalled aaaa")
            page.wait_for_function(
                "() => document.querySelector('#results li .sigmatch') !== null", timeout=10_000
            )
        finally:
            browser.close()


def test_a_planted_marker_cannot_make_a_rebuild_delete_outside_the_site(tmp_path, capsys):
    # the marker is a file in the site folder: one listing ../victim once had it deleted
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    site = tmp_path / "site"
    site.mkdir()
    (site / SITE_MARKER).write_text(json.dumps({"files": ["../victim.txt"]}))
    wiki = tmp_path / "wiki"
    wiki.mkdir()
    entry(wiki, "planted")
    from llmdoctor.errors import BadInput

    with pytest.raises(BadInput, match="not a file of a site"):
        build_site(site, [wiki])
    assert victim.read_text() == "keep me\n"


def test_a_rebuild_writes_nothing_through_a_linked_subfolder(tmp_path):
    # a site folder whose tags/ is a link elsewhere: the pages would land outside the site
    wiki = tmp_path / "wiki"
    wiki.mkdir()
    entry(wiki, "linked-tags")
    site = build_site(tmp_path / "site", [wiki]).path
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    import shutil

    shutil.rmtree(site / "tags")
    (site / "tags").symlink_to(elsewhere)
    from llmdoctor.errors import BadInput

    with pytest.raises(BadInput, match="link out of the folder"):
        build_site(site, [wiki])
    assert list(elsewhere.iterdir()) == []
