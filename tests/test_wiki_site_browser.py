"""The static wiki site in a real headless Chromium (Debian's `chromium`, driven by Playwright).

Required in CI (.ci/run installs chromium and sets LLMDOCTOR_REQUIRE_BROWSER=1); on a machine
without the browser these tests skip and say why. Screenshots go to $LLMDOCTOR_SCREENSHOTS (the
README's pictures are made that way) or to the test's temporary folder.
"""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
from pathlib import Path

import pytest

from llmdoctor.wiki.search import search
from llmdoctor.wiki.site import build_site

ROOT = Path(__file__).resolve().parent.parent
RUNBOOK_FIXTURES = ROOT / "tests" / "fixtures" / "runbooks"
QUERIES = [
    "OOM", "显存", "xid 79", "CUDA out of memory", "tokenizer", "排队", "掉卡", "preempted",
    "fallen off the bus", "nccl timeout", "image pull", "ImagePullBackOff", "超时",
    "Insufficient nvidia.com/gpu", "max_model_len", "chat template", "kv cache", "liveness probe",
    "shm", "bf16", "trust_remote_code", "garbage output", "ECC", "GSP", "gateway timeout 504",
    "Failed to initialize NVML: Driver/library version mismatch",
    "no kernel image is available for execution on the device",
    "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.",
    'SELECT * FROM "docs" AND NEAR( "', "0x7f3a 12345 /usr/lib/python3/site.py",
    "requests are slow", "slow", "high latency", "hangs", "crashed", "gibberish", "ttft",
    "502", "502 bad gateway", "fell off", "GPU disappeared", "keeps restarting", "startup slow",
    "server hangs", "gpu ran out of memory", "what does Xid 79 mean", "how do I fix NCCL timeout",
    "pods stuck in Pending", "vllm stuck at loading", "the log says Xid 79", "how to fix OOM",
    "what is OOM", "pod stuck in Pending state", "hung in Pending", "requests stuck in running",
    "why can't the container see the GPU", "what does it mean", "log says No space left on device",
]  # fmt: skip
CHROMIUM_ARGS = [
    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


@pytest.fixture(scope="module")
def browser():
    required = os.environ.get("LLMDOCTOR_REQUIRE_BROWSER") == "1"
    executable = _chromium()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        sync_playwright = None
    missing = (
        "Debian's chromium is not installed (apt-get install chromium)"
        if executable is None
        else "playwright is not installed (pip install -e '.[test]')"
        if sync_playwright is None
        else None
    )
    if missing:
        if required:
            pytest.fail(f"browser tests are required here but {missing}")
        pytest.skip(f"browser tests skipped: {missing}")
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("wiki-site") / "site"
    return build_site(out).path


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    pg = context.new_page()
    pg.problems = []
    pg.on("pageerror", lambda e: pg.problems.append(f"page error: {e}"))
    pg.on(
        "console",
        lambda m: (
            pg.problems.append(f"console {m.type}: {m.text}")
            if m.type in ("error", "warning")
            else None
        ),
    )
    pg.on("requestfailed", lambda r: pg.problems.append(f"request failed: {r.url}"))
    yield pg
    context.close()


def result_ids(pg) -> list[str]:
    return pg.locator("#results li").evaluate_all("els => els.map(e => e.dataset.id)")


def type_query(pg, text: str) -> list[str]:
    pg.fill("#q", text)
    pg.wait_for_function(
        "q => document.getElementById('results').dataset.query === q", arg=text, timeout=5000
    )
    return result_ids(pg)


def screenshot_dir(tmp_path: Path) -> Path:
    wanted = os.environ.get("LLMDOCTOR_SCREENSHOTS")
    folder = Path(wanted) if wanted else tmp_path
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def test_typing_oom_lists_cuda_oom_runtime_first(page, site, tmp_path):
    page.goto((site / "index.html").as_uri())
    ids = type_query(page, "OOM")
    assert ids[0] == "cuda-oom-runtime", ids
    assert page.locator("#results mark").count() > 0  # the matched words are highlighted
    shot = screenshot_dir(tmp_path) / "wiki-site-search.png"
    page.screenshot(path=str(shot))
    assert shot.stat().st_size > 10_000
    assert page.problems == []


def test_chinese_query_returns_entries(page, site):
    page.goto((site / "index.html").as_uri())
    ids = type_query(page, "显存")
    assert ids and "cuda-oom-runtime" in ids[:3], ids
    assert type_query(page, "掉卡")[0] == "xid-fallen-off-bus"
    assert page.problems == []


def test_linked_query_opens_with_its_results(page, site):
    # index.html?q=xid 79 is a link an alert or a chat message can carry
    page.goto((site / "index.html").as_uri() + "?q=xid%2079")
    page.wait_for_selector("#results li")
    assert result_ids(page)[0] == "xid-fallen-off-bus"
    assert page.input_value("#q") == "xid 79"
    assert page.problems == []


def test_pasting_an_error_line_finds_its_entry(page, site):
    page.goto((site / "index.html").as_uri())
    line = (
        "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.33 GiB. "
        "GPU 0 has a total capacity of 79.15 GiB of which 1.17 GiB is free."
    )
    assert type_query(page, line)[0] == "cuda-oom-runtime"
    nvml = "Failed to initialize NVML: Driver/library version mismatch"
    assert type_query(page, nvml)[0] == "nvml-driver-library-mismatch"
    assert page.locator("#results li .sigmatch").count() >= 1  # a signature matched the line


def test_clicking_a_result_opens_its_page_with_the_fix(page, site, tmp_path):
    page.goto((site / "index.html").as_uri() + "?q=OOM")
    page.wait_for_selector("#results li a")
    page.locator("#results li a").first.click()
    page.wait_for_load_state()
    assert page.url.endswith("/cuda-oom-runtime.html")
    assert page.locator("#fix").is_visible()
    assert "Fix" in page.locator("#fix h2").inner_text()
    shot = screenshot_dir(tmp_path) / "wiki-site-entry.png"
    page.screenshot(path=str(shot), full_page=False)
    assert shot.stat().st_size > 10_000
    # the header search box of an entry page goes back to the index with the query
    page.fill("header input[name=q]", "nccl")
    page.press("header input[name=q]", "Enter")
    page.wait_for_selector("#results li")
    assert result_ids(page)[0] == "nccl-failure"
    assert page.problems == []


def test_every_internal_link_opens_without_errors(page, site):
    # follow every link of the index and of one entry and one tag page, in the browser
    seen: set[str] = set()
    for start in ("index.html", "engine-dead.html", "tags/memory.html"):
        page.goto((site / start).as_uri())
        hrefs = page.locator("a[href]").evaluate_all("els => els.map(e => e.href)")
        seen.update(h.split("#")[0].split("?")[0] for h in hrefs if h.startswith("file://"))
    assert len(seen) > 40
    for url in sorted(seen):
        response = page.goto(url)
        assert response is None or response.ok, url
        assert page.locator("main").count() == 1, url
    assert page.problems == []


def test_in_page_ranking_equals_wiki_search(page, site):
    # the same top three as `llmdoctor wiki search` for typed words, Chinese and pasted logs
    queries = list(QUERIES)
    for path in sorted(RUNBOOK_FIXTURES.glob("*/*.log"))[::3]:
        lines = [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
        queries.append("\n".join(lines[-15:]))
    page.goto((site / "index.html").as_uri())
    differ = []
    for q in queries:
        js = page.evaluate("q => window.llmdoctorSearch.search(q, 5).results.map(r => r.id)", q)
        py = [r.id for r in search(q, limit=5)]
        if js[:3] != py[:3]:
            differ.append(f"{q[:60]!r}: page {js[:3]} cli {py[:3]}")
    assert len(queries) > 50
    assert differ == []


def test_in_page_stemmer_equals_sqlites_porter(page, site):
    # every word of every runbook, stemmed by the page and by SQLite FTS5's own tokenizer
    text = " ".join(p.read_text(encoding="utf-8") for p in (ROOT / "runbooks").glob("*.md"))
    words = sorted(
        {w for w in re.findall(r"[^\W_]+", text) if not re.search(r"[\u3040-\u9fff]", w)}
    )
    words += ["preempted", "preemption", "fragmentation", "relational", "hopefulness", "ponies"]
    conn = sqlite3.connect(":memory:")
    conn.execute(
        "CREATE VIRTUAL TABLE t USING fts5(x, tokenize='porter unicode61 remove_diacritics 2')"
    )
    conn.executemany("INSERT INTO t(rowid, x) VALUES (?, ?)", list(enumerate(words, 1)))
    conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
    sqlite_stem = {words[doc - 1]: term for term, doc in conn.execute("SELECT term, doc FROM v")}
    page.goto((site / "index.html").as_uri())
    page_stem = page.evaluate("ws => ws.map(w => window.llmdoctorSearch.stem(w))", words)
    differ = [
        (w, s, sqlite_stem[w]) for w, s in zip(words, page_stem, strict=True) if s != sqlite_stem[w]
    ]
    assert len(words) > 1000
    assert differ == []
