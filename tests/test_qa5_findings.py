"""QA pass on `wiki search` without `re` (hand-written scans in llmdoctor/wiki/query.py) and on the
`llmdoctor` command installed from scripts/llmdoctor, as a hostile new user would try them.

Each test pins one problem found by running the installed wheel and by comparing the old
regex-based cuts (commit 4bd87ae) with the new scans; all are fixed. `--json` still loads `re`
(through the json module): docs/architecture.md section 7 says so.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

from llmdoctor.wiki import query

REPO = Path(__file__).resolve().parent.parent


def test_a_line_of_schemeless_urls_is_cut_in_linear_time():
    # the cut read every character after each '://' before checking its scheme: a 200 KB line
    # would have taken ~15 minutes; bounded, not timed (10 s is far from either)
    line = "1://" * 50_000  # 200 KB, no whitespace: no '://' here has a scheme URL accepts
    started = time.perf_counter()
    parsed = query.parse_query(line)
    assert parsed.words == []  # only "1"s: digits of a long text are noise
    assert query._without_urls_ascii(line) == re.sub(query.URL, " ", line)  # (the same cut)
    slashes = "/ " * 100_000  # the path cut looked for the next backslash at every slash
    assert query._without_paths_ascii(slashes) == re.sub(query.PATH, " ", slashes)
    assert time.perf_counter() - started < 10


def test_search_of_stdin_with_invalid_utf8_does_not_crash(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "llmdoctor", "wiki", "search", "-"],
        input=b"torch.OutOfMemoryError: CUDA out of memory. \xff\n",
        capture_output=True,
        cwd=tmp_path,
        timeout=120,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert b"Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.returncode == 0
    assert b"cuda-oom-runtime" in proc.stdout
