"""`llmdoctor wiki site` / `wiki serve` and --wiki-url links, without a browser.

The browser half (search typed into the page, clicks, console errors) is tests/test_wiki_site_browser.py.
"""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.request
from contextlib import contextmanager
from html.parser import HTMLParser
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from llmdoctor.cli import run
from llmdoctor.wiki.library import load_library
from llmdoctor.wiki.site import SITE_MARKER, build_site

ROOT = Path(__file__).resolve().parent.parent
BUNDLE = ROOT / "examples" / "bundles" / "crashloop-cuda-oom"

TEAM_ENTRY = """---
id: redis-timeout
title: Gateway times out on Redis
severity: warning
tags: [gateway, redis]
aliases: [缓存超时]
signatures:
  - 'redis\\.exceptions\\.TimeoutError'
---
## Symptom
Requests fail with `redis.exceptions.TimeoutError` <script>alert(1)</script>.

## Cause
The rate limiter's Redis is saturated; see `gateway-timeout`.

## Fix
Raise the pool size.

```bash
kubectl -n gw scale deploy/redis --replicas 3
```
"""


def cli(capsys, *args):
    with pytest.raises(SystemExit) as exc:
        run(list(args))
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


class _Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.refs: list[tuple[str, str, str]] = []  # (tag, attribute, value)

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name in ("href", "src") and value is not None:
                self.refs.append((tag, name, value))


def page_refs(path: Path) -> list[tuple[str, str, str]]:
    parser = _Links()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser.refs


@pytest.fixture
def team_wiki(tmp_path):
    folder = tmp_path / "team"
    folder.mkdir()
    (folder / "redis-timeout.md").write_text(TEAM_ENTRY, encoding="utf-8")
    return folder


@pytest.fixture
def site(tmp_path, team_wiki):
    return build_site(tmp_path / "site", [team_wiki]).path


def test_site_has_a_page_per_entry_the_index_and_tag_pages(site, team_wiki):
    # every entry the CLI sees (built-in and team) gets <id>.html; tags get tags/<tag>.html
    entries = load_library([team_wiki]).entries
    assert len(entries) >= 33
    for entry_id in entries:
        assert (site / f"{entry_id}.html").is_file(), entry_id
    assert (site / "index.html").is_file()
    assert (site / "tags" / "redis.html").is_file()
    assert (site / "tags" / "memory.html").is_file()
    index = (site / "index.html").read_text(encoding="utf-8")
    assert 'id="results"' in index and 'id="q"' in index
    assert "cuda-oom-runtime.html" in index and "redis-timeout.html" in index


def test_every_internal_link_resolves_and_nothing_is_external(site):
    # works from file:// and any static host: relative links only, and each one exists
    pages = [site / "index.html", *site.glob("*.html"), *(site / "tags").glob("*.html")]
    checked = 0
    for page in pages:
        for tag, _attr, ref in page_refs(page):
            if ref.startswith(("http://", "https://", "mailto:")):
                # only links written in an entry's own text may leave the site; never assets
                assert tag == "a", f"{page.name}: external asset {ref}"
                continue
            if ref.startswith("data:") or ref.startswith("#"):
                continue
            target = ref.split("#")[0].split("?")[0]
            assert (page.parent / target).resolve().is_file(), f"{page.name}: {ref}"
            checked += 1
    assert checked > 500


def test_entry_page_shows_every_part_of_the_entry(site):
    page = (site / "cuda-oom-runtime.html").read_text(encoding="utf-8")
    for section in ('id="symptom"', 'id="cause"', 'id="fix"', 'id="signatures"', 'id="related"'):
        assert section in page, section
    assert "CUDA out of memory\\. Tried to allocate" in page  # a signature, as written
    assert "memory-fragmentation" in page  # the check that detects it
    assert 'href="engine-dead.html"' in page  # it explains engine death
    assert "runbooks/cuda-oom-runtime.md (built into llmdoctor)" in page
    assert "显存不足" in page or "爆显存" in page  # aliases
    # explained-by goes the other way
    assert 'href="cuda-oom-runtime.html"' in (site / "engine-dead.html").read_text(encoding="utf-8")


def test_team_entry_is_rendered_safely_with_its_source(site, team_wiki):
    # an entry is untrusted: raw HTML is shown as text, never run
    page = (site / "redis-timeout.html").read_text(encoding="utf-8")
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert str(team_wiki / "redis-timeout.md") in page
    assert 'href="gateway-timeout.html"' in page  # `gateway-timeout` in the text became a link
    assert "kubectl -n gw scale deploy/redis --replicas 3" in page


def test_a_team_entry_overriding_a_builtin_says_so(tmp_path):
    folder = tmp_path / "team"
    folder.mkdir()
    text = (ROOT / "runbooks" / "gsp-timeout.md").read_text(encoding="utf-8")
    (folder / "gsp-timeout.md").write_text(text.replace("## Fix", "## Fix\nOur own fix.\n"))
    site = build_site(tmp_path / "site", [folder]).path
    page = (site / "gsp-timeout.html").read_text(encoding="utf-8")
    assert "Our own fix." in page and "It overrides" in page


def test_search_index_is_sqlites_own_terms(site):
    # the page ranks on the tokens FTS5 stored (porter stems), e.g. "fragmentation" -> "fragment"
    text = (site / "search-index.js").read_text(encoding="utf-8")
    data = json.loads(text.removeprefix("window.LLMDOCTOR_INDEX=").rstrip().rstrip(";"))
    ids = [d[0] for d in data["docs"]]
    assert ids == sorted(ids)
    assert "fragment" in data["postings"] and "fragmentation" not in data["postings"]
    assert "显存" in data["postings"]
    assert data["total_tokens"] == sum(data["sizes"])
    assert "</script" not in text


def test_symptom_phrases_are_counted_as_fts5_finds_them(tmp_path):
    # "first token" (what "ttft" also searches) must be adjacent, as FTS5's phrase: an entry
    # holding both words apart is no match in the page either
    from llmdoctor.wiki.index import with_index
    from llmdoctor.wiki.query import SYMPTOMS
    from llmdoctor.wiki.site_index import build_search_data

    wiki = tmp_path / "wiki"
    wiki.mkdir()
    for name, symptom in (("apart", "the first reply; one token later"), ("near", "FIRST TOKENS")):
        (wiki / f"{name}.md").write_text(
            f"---\nid: {name}\ntitle: {name}\nseverity: info\n---\n"
            f"## Symptom\n{symptom}\n\n## Cause\nc\n\n## Fix\nf\n",
            encoding="utf-8",
        )

    def check(conn):
        data = build_search_data(conn)
        ids = [d[0] for d in data["docs"]]
        spellings = {s for spelled in SYMPTOMS.values() for s in spelled if " " in s}
        assert set(data["phrases"]) == spellings
        for spelling, flat in data["phrases"].items():
            in_page = {ids[d] for d in flat[::2]}
            rows = conn.execute(
                "SELECT docs.id FROM docs_fts JOIN docs ON docs.rowid = docs_fts.rowid "
                "WHERE docs_fts MATCH ?",
                (f'"{spelling}"',),
            ).fetchall()
            assert in_page == {r[0] for r in rows}, spelling
        found = {ids[d] for d in data["phrases"]["first token"][::2]}
        assert "near" in found and "apart" not in found

    with_index([wiki], check)


def test_base_url_sets_canonical_links_and_urls_json(tmp_path):
    site = build_site(tmp_path / "site", None, "https://runbooks.example.com/llm/").path
    urls = json.loads((site / "urls.json").read_text())
    assert urls["cuda-oom-runtime"] == "https://runbooks.example.com/llm/cuda-oom-runtime.html"
    page = (site / "cuda-oom-runtime.html").read_text(encoding="utf-8")
    assert 'rel="canonical" href="https://runbooks.example.com/llm/cuda-oom-runtime.html"' in page


def test_rebuild_replaces_only_a_site_it_wrote(tmp_path, capsys):
    out = tmp_path / "site"
    build_site(out)
    code, stdout, _ = cli(capsys, "wiki", "site", "-o", str(out), "--json")
    assert code == 0 and json.loads(stdout)["entries"] >= 32 and (out / SITE_MARKER).is_file()
    # a folder of other files is never written into
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "retro.md").write_text("keep me")
    code, _, err = cli(capsys, "wiki", "site", "-o", str(notes))
    assert code == 3 and "not written by `llmdoctor wiki site`" in err
    assert sorted(p.name for p in notes.iterdir()) == ["retro.md"]
    code, _, err = cli(capsys, "wiki", "site", "-o", str(notes / "retro.md"))
    assert code == 3 and "not a folder" in err


def test_rebuild_keeps_what_the_team_added_to_the_site_folder(tmp_path, team_wiki, capsys):
    # a Pages checkout: .git and CNAME live beside the pages and must survive every rebuild
    out = tmp_path / "pages"
    build_site(out, [team_wiki])
    (out / ".git").mkdir()
    (out / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (out / "CNAME").write_text("runbooks.example.com\n")
    (team_wiki / "redis-timeout.md").unlink()  # an entry removed: its page goes too
    code, _, err = cli(capsys, "wiki", "site", "-o", str(out), "--wiki", str(team_wiki))
    assert code == 0, err
    assert (out / ".git" / "HEAD").read_text() == "ref: refs/heads/main\n"
    assert (out / "CNAME").read_text() == "runbooks.example.com\n"
    assert not (out / "redis-timeout.html").exists() and (out / "gsp-timeout.html").is_file()
    # a file of the team's own where a new page would go: refused, nothing changed
    (out / "redis-timeout.html").write_text("our own page")
    (team_wiki / "redis-timeout.md").write_text(TEAM_ENTRY, encoding="utf-8")
    code, _, err = cli(capsys, "wiki", "site", "-o", str(out), "--wiki", str(team_wiki))
    assert code == 3 and "redis-timeout.html is there and was not written" in err
    assert (out / "redis-timeout.html").read_text() == "our own page"


def test_an_entry_called_index_cannot_replace_the_front_page(tmp_path, capsys):
    team = tmp_path / "team"
    team.mkdir()
    (team / "index.md").write_text(TEAM_ENTRY.replace("redis-timeout", "index"), encoding="utf-8")
    code, _out, err = cli(capsys, "wiki", "site", "-o", str(tmp_path / "s"), "--wiki", str(team))
    assert code == 0 and "the id 'index' is the site's own page" in err
    front = (tmp_path / "s" / "index.html").read_text(encoding="utf-8")
    assert 'id="results"' in front and "index" not in json.loads(
        (tmp_path / "s" / "urls.json").read_text()
    )


def test_a_link_to_a_folder_is_followed_and_an_unwritable_target_is_one_line(tmp_path, capsys):
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    code, _, err = cli(capsys, "wiki", "site", "-o", str(link))
    assert code == 0, err
    assert link.is_symlink() and (real / "index.html").is_file()
    code, _, err = cli(capsys, "wiki", "site", "-o", "/proc/llmdoctor-site/x")
    assert code == 3 and err.startswith("llmdoctor: -o /proc/llmdoctor-site/x: cannot write there")


def test_wiki_url_links_every_runbook_in_reports_explain_and_show(capsys, monkeypatch):
    monkeypatch.delenv("LLMDOCTOR_WIKI_URL", raising=False)
    base = "https://runbooks.example.com"
    code, out, _ = cli(capsys, "diagnose", "--bundle", str(BUNDLE), "--json", "--wiki-url", base)
    # the crash loop's root cause is its start-up that does not fit; the OOM's own entry is
    # linked beside it on the allocator's finding
    root = "vllm-startup-memory-insufficient"
    finding = next(f for f in json.loads(out)["findings"] if "cuda-oom-runtime" in f["runbooks"])
    assert {"id": "cuda-oom-runtime", "url": f"{base}/cuda-oom-runtime.html"} in finding[
        "runbook_links"
    ]
    assert finding["runbooks"] == [r["id"] for r in finding["runbook_links"]]  # unchanged key
    code, out, _ = cli(capsys, "diagnose", "--bundle", str(BUNDLE), "--no-color")
    assert code == 2 and f"page: {base}/{root}.html" in out  # the option set the env
    monkeypatch.delenv("LLMDOCTOR_WIKI_URL")
    code, out, _ = cli(capsys, "diagnose", "--bundle", str(BUNDLE), "--markdown")
    assert "page:" not in out and "](" not in out  # no address unless one is given
    monkeypatch.setenv("LLMDOCTOR_WIKI_URL", base)
    code, out, _ = cli(capsys, "diagnose", "--bundle", str(BUNDLE), "--markdown")
    assert f"[`{root}`]({base}/{root}.html)" in out
    log = str(BUNDLE / "logs" / "vllm.previous.log")
    code, out, _ = cli(capsys, "explain", log, "--json")
    assert json.loads(out)["matches"][0]["url"] == f"{base}/{root}.html"
    code, out, _ = cli(capsys, "wiki", "show", "gsp-timeout")
    assert out.rstrip().endswith(f"page: {base}/gsp-timeout.html")
    code, out, _ = cli(capsys, "wiki", "search", "OOM", "--json", "--limit", "1")
    assert json.loads(out)["results"][0]["url"] == f"{base}/cuda-oom-runtime.html"


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("runbooks.example", "http(s)://"),
        ("https://w.example.com/x?y=1#frag", "without ?query or #fragment"),
        ("http://[::1", "not a valid address"),
        ("http://u:secret@h/w", "without user:password@"),
        ("https://a\nb", "control characters"),
        ("https:///path", "names no host"),
    ],
)
def test_a_wiki_url_that_cannot_be_a_base_address_is_refused(capsys, monkeypatch, url, why):
    monkeypatch.delenv("LLMDOCTOR_WIKI_URL", raising=False)
    code, _, err = cli(capsys, "wiki", "show", "gsp-timeout", "--wiki-url", url)
    assert code == 3 and "--wiki-url" in err and why in err
    assert "secret" not in err  # a password is never echoed back


ADDRESS_PIECES = [
    "http", "https", "://", ":", "/", "a", "Z", "9", ".", "-", "_", "~", "%", "@", "?", "#", "[",
    "]", " ", "\n", "é", "65535", "65536", "99999", "0", "host.example",
]  # fmt: skip


PIECES_TEXT = st.lists(st.sampled_from(ADDRESS_PIECES), max_size=8).map("".join)


@pytest.mark.slow  # random addresses against urllib
@settings(max_examples=3000, deadline=None)
@given(
    st.one_of(
        PIECES_TEXT,
        st.tuples(
            st.sampled_from(["http://", "https://", "file://", "ftp://", "http:/"]),
            PIECES_TEXT,
            st.sampled_from(["", "/", ":", ":8080", "/llm/"]),
            PIECES_TEXT,
        ).map("".join),
    )
)
@example("https://runbooks.example.com/llm")
@example("http://h:" + "1" * 5000)
@example("http://a/?")
@example("http://a/#x")
@example("http://u@h/")
@example("http://[::1/")
@example("https://h:65536/")
def test_the_plain_address_shortcut_accepts_only_what_urllib_accepts(value):
    # what `wiki search` accepts without loading urllib.parse (and `re` with it)
    from llmdoctor.wiki.links import _plain_site_address, address_problem

    if _plain_site_address(value):
        assert address_problem(value) is None, value


def test_wiki_list_and_a_plain_wiki_search_print_page_addresses(capsys, monkeypatch):
    monkeypatch.delenv("LLMDOCTOR_WIKI_URL", raising=False)
    base = "https://runbooks.example.com/llm"
    code, out, _ = cli(capsys, "wiki", "list", "--wiki-url", base)
    assert code == 0 and f"{base}/gsp-timeout.html" in out
    code, out, _ = cli(capsys, "wiki", "search", "OOM", "--limit", "1", "--wiki-url", base)
    assert f"page: {base}/cuda-oom-runtime.html" in out


@contextmanager
def _serving(site: Path, wiki: Path):
    """`wiki serve` of `wiki` in a thread, once it has said where it listens: (its messages,
    a deadline 30 s out); stopped on leaving, and it must have stopped."""
    from llmdoctor.wiki.site_serve import serve

    messages: list[str] = []
    stop = threading.Event()
    thread = threading.Thread(
        target=serve,
        args=(site, [wiki], None, "127.0.0.1", 0, messages.append, stop),
        daemon=True,
    )
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not messages and time.monotonic() < deadline:
            time.sleep(0.05)
        yield messages, deadline
    finally:
        stop.set()
        thread.join(10)
    assert not thread.is_alive()


def test_serve_serves_the_site_and_rebuilds_when_an_entry_changes(tmp_path, team_wiki):
    with _serving(tmp_path / "site", team_wiki) as (messages, deadline):
        url = re.search(r"http://\S+/", messages[0]).group(0)
        with urllib.request.urlopen(url + "redis-timeout.html", timeout=5) as resp:
            assert resp.status == 200 and b"Raise the pool size" in resp.read()
        new = TEAM_ENTRY.replace("redis-timeout", "redis-pool").replace("Raise", "Double")
        (team_wiki / "redis-pool.md").write_text(new, encoding="utf-8")
        while time.monotonic() < deadline and not any("rebuilt" in m for m in messages):
            time.sleep(0.1)
        with urllib.request.urlopen(url + "redis-pool.html", timeout=5) as resp:
            assert b"Double the pool size" in resp.read()


def test_the_deploy_examples_commands_build_a_site(tmp_path, team_wiki, capsys):
    # deploy/wiki-site.yaml (init container) and deploy/wiki-site-gitlab-ci.yml run real commands
    import shlex

    import yaml

    deploy = ROOT / "deploy"
    docs = [d for d in yaml.safe_load_all((deploy / "wiki-site.yaml").read_text()) if d]
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    (init,) = deployment["spec"]["template"]["spec"]["initContainers"]
    shell = init["args"][0]
    words = shlex.split(shell.split("python -m llmdoctor", 1)[1])
    settings = next(d for d in docs if d["kind"] == "ConfigMap")["data"]
    words = [
        w.replace("$(WIKI_BASE_URL)", settings["WIKI_BASE_URL"])
        .replace("/team-runbooks", str(team_wiki))
        .replace("/site/public", str(tmp_path / "k8s-site"))
        for w in words
    ]
    code, _, err = cli(capsys, *words)
    assert code == 0, err
    assert (tmp_path / "k8s-site" / "redis-timeout.html").is_file()
    job = yaml.safe_load((deploy / "wiki-site-gitlab-ci.yml").read_text())["pages"]
    commands = [shlex.split(line)[1:] for line in job["script"] if line.startswith("llmdoctor ")]
    assert [c[:2] for c in commands] == [["wiki", "lint"], ["wiki", "site"]]
    for argv in commands:
        argv = [str(team_wiki) if a == "runbooks" or a == "runbooks/" else a for a in argv]
        argv = [str(tmp_path / "public") if a == "public" else a for a in argv]
        argv = ["https://team.gitlab.io/runbooks" if a == "$CI_PAGES_URL" else a for a in argv]
        code, _, err = cli(capsys, *argv)
        assert code == 0, (argv, err)
    urls = json.loads((tmp_path / "public" / "urls.json").read_text())
    assert urls["redis-timeout"] == "https://team.gitlab.io/runbooks/redis-timeout.html"


def test_serve_says_why_it_cannot_listen_in_one_line(tmp_path, capsys):
    import socket

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    try:
        for bind, port_arg in (("127.0.0.1", port), ("999.1.1.1", 0)):
            code, _, err = cli(
                capsys, "wiki", "serve", "-o", str(tmp_path / "s"), "--bind", bind,
                "--port", str(port_arg),
            )  # fmt: skip
            assert code == 3 and err.startswith(f"llmdoctor: cannot serve on {bind}:"), err
            assert "Traceback" not in err and "internal error" not in err
    finally:
        taken.close()


def test_serve_says_which_entry_a_rebuild_left_out(tmp_path, team_wiki):
    with _serving(tmp_path / "site", team_wiki) as (messages, deadline):
        (team_wiki / "broken.md").write_text("---\nid: [broken\n", encoding="utf-8")
        while time.monotonic() < deadline and not any("broken.md" in m for m in messages):
            time.sleep(0.1)
    assert any("broken.md" in m and "left out" in m for m in messages), messages


EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "bundles"


def test_mdit_py_plugins_is_not_a_dependency():
    import tomllib

    pyproject = tomllib.loads((EXAMPLES.parent.parent / "pyproject.toml").read_text())
    assert not any(d.startswith("mdit-py-plugins") for d in pyproject["project"]["dependencies"])
