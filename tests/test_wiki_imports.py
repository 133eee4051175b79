"""`wiki search` and `--help` stay light: no cluster, GPU, HTTP or markdown libraries loaded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# loaded by the command in a child process; prints the heavy modules that got imported
PROBE = r"""
import json, sys
from llmdoctor.cli import run
try:
    run(sys.argv[1:])
except SystemExit:
    pass
loaded = sorted({m.split(".")[0] for m in sys.modules})
sys.stderr.write("LOADED=" + json.dumps(loaded) + "\n")
"""
# never at import time of the CLI (CONTEXT rules)
HEAVY = {"kubernetes", "pynvml", "requests", "sqlite_utils", "markdown_it", "re2"}
# a warm search reads the index only: no entry parsing, no rich rendering
SEARCH_HEAVY = HEAVY | {"yaml", "rich"}


def loaded_modules(*args: str, env: dict) -> set[str]:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    line = [ln for ln in proc.stderr.splitlines() if ln.startswith("LOADED=")]
    assert line, proc.stderr
    return set(json.loads(line[-1][len("LOADED=") :]))


def child_env() -> dict:
    return dict(os.environ, PYTHONPATH=str(REPO), NO_COLOR="1")


def light_wiki(folder: Path, symptom: str) -> Path:
    """A one-entry wiki folder."""
    wiki = folder / "wiki"
    wiki.mkdir()
    (wiki / "light.md").write_text(
        "---\nid: light\ntitle: Light entry\nseverity: info\n---\n"
        f"## Symptom\n{symptom}\n\n## Cause\nc\n\n## Fix\nf\n",
        encoding="utf-8",
    )
    return wiki


def test_warm_wiki_search_imports_nothing_heavy(tmp_path):
    # the first call builds the index (and may parse markdown); the next ones only read it
    wiki = light_wiki(tmp_path, "kestrel")
    env = child_env()
    loaded_modules("wiki", "index", "--wiki", str(wiki), env=env)
    search = loaded_modules("wiki", "search", "kestrel", "--wiki", str(wiki), env=env)
    assert not search & SEARCH_HEAVY
    assert "_sqlite3" in search  # the probe did run the search (SQLite's C module)
    as_json = loaded_modules("wiki", "search", "显存 OOM", "--json", "--wiki", str(wiki), env=env)
    assert not as_json & SEARCH_HEAVY


def test_help_imports_nothing_heavy():
    env = child_env()
    assert not loaded_modules("--help", env=env) & HEAVY
    assert not loaded_modules("wiki", "--help", env=env) & HEAVY
    assert not loaded_modules("wiki", "search", "--help", env=env) & HEAVY


def package_without_site(folder: Path) -> Path:
    """The package as the wheel lays it out (runbooks/ as llmdoctor/builtin_runbooks), in links."""
    package = folder / "llmdoctor"
    package.mkdir(parents=True)
    for item in (REPO / "llmdoctor").iterdir():
        (package / item.name).symlink_to(item)
    (package / "builtin_runbooks").symlink_to(REPO / "runbooks")
    (package / "checks").symlink_to(REPO / "checks")
    return folder


def test_a_search_never_imports_re(tmp_path):
    # ASCII text is cut without `re` (llmdoctor/wiki/query.py, tests/test_wiki_query_scan.py),
    # and scripts/llmdoctor, the installed console script, does not import it either. The child
    # runs with -S: no .pth file runs (an editable install's finder loads `re` before us); our
    # package and its dependencies are plain folders on PYTHONPATH
    wiki = light_wiki(tmp_path, "torch.OutOfMemoryError: CUDA out of memory")
    path = os.pathsep.join([str(package_without_site(tmp_path / "path")), purelib()])
    env = {"PYTHONPATH": path, "NO_COLOR": "1", "HOME": str(tmp_path)}

    def imported_by(*args: str, **more_env: str) -> set[str]:
        proc = subprocess.run(
            [sys.executable, "-S", "-X", "importtime", "-c", RUN_MAIN, *args],
            env=env | more_env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode in (0, 1) and "Traceback" not in proc.stderr, proc.stderr[-3000:]
        return {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines()}

    imported_by("wiki", "index", "--wiki", str(wiki))
    # a signature that is a regex is run by RE2 (google-re2 does not load `re` either)
    loaded_re2 = []
    for text in [
        "OOM",
        "显存 OOM",
        "vLLM 显存不足, KV cache 满了",
        "NCCL timeout",
        "Error one\nfailed two\nthird line",
        "see https://pytorch.org/docs/stable/notes/cuda.html#environment-variables, /dev/shm, "
        "C:\\x\\y and 0/8 nodes are available: 8 Insufficient nvidia.com/gpu.",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0",
    ]:
        imported = imported_by("wiki", "search", text, "--wiki", str(wiki))
        assert "llmdoctor.wiki.search" in imported
        loaded_re2.append("re2" in imported)
        assert not imported & {"re", "enum"}, (text, sorted(imported))
    assert any(loaded_re2)  # the torch line's signatures were run
    # a team's site address (docs/commands.md: set LLMDOCTOR_WIKI_URL) is checked without urllib.parse
    site = "https://runbooks.example.com/llm"
    for imported in (
        imported_by("wiki", "search", "OOM", "--wiki", str(wiki), LLMDOCTOR_WIKI_URL=site),
        imported_by(
            "wiki", "search", "OOM", "--wiki", str(wiki), "--wiki-url", "http://wiki:8443/"
        ),
    ):
        assert "llmdoctor.wiki.links" in imported
        assert not imported & {"re", "enum"}, sorted(imported)


def purelib() -> str:
    import sysconfig

    return sysconfig.get_paths()["purelib"]


RUN_MAIN = "import sys; from llmdoctor.__main__ import main; sys.argv[0] = 'llmdoctor'; main()"


def test_explain_of_a_log_imports_no_thread_machinery(tmp_path):
    # explain reads a file on the main thread (a big one with --jobs); the exit asks whether a
    # thread was abandoned only of a deadline module something imported (llmdoctor/__main__.py
    # end_process): concurrent.futures is ~4 ms of explain's start-up
    log = tmp_path / "vllm.log"
    log.write_text("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB\n")
    path = os.pathsep.join([str(package_without_site(tmp_path / "path")), purelib()])
    env = {"PYTHONPATH": path, "NO_COLOR": "1", "HOME": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-S", "-X", "importtime", "-c", RUN_MAIN, "explain", str(log)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "cuda-oom-runtime" in proc.stdout, proc.stderr[-3000:]
    imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines()}
    assert "llmdoctor.triage.explain" in imported
    assert not imported & {"concurrent.futures", "llmdoctor.engine.deadline"}, sorted(imported)
