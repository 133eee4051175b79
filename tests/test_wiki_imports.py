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


def test_warm_wiki_search_imports_nothing_heavy(tmp_path):
    # the first call builds the index (and may parse markdown); the next ones only read it
    wiki = tmp_path / "wiki"
    wiki.mkdir()
    (wiki / "light.md").write_text(
        "---\nid: light\ntitle: Light entry\nseverity: info\n---\n"
        "## Symptom\nkestrel\n\n## Cause\nc\n\n## Fix\nf\n",
        encoding="utf-8",
    )
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
