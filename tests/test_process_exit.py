"""A process that abandoned a thread at its deadline still ends with its own exit code.

Shell completion against a silent API server (CI, 2026-12-02) exited -6 instead of 0 after
printing its answer: the lookup thread, left running at its deadline, was still inside the
Kubernetes client when the interpreter shut down, and a daemon thread that touches stderr or a
lock then aborts the process. llmdoctor.__main__.end_process skips the shutdown in that case.
"""

from __future__ import annotations

import subprocess
import sys
import time

# a thread abandoned at its deadline that keeps writing to stderr (as a client's retry warnings
# do) while the main thread ends the process with code 2
SCRIPT = """
import sys, time
from llmdoctor.__main__ import end_process
from llmdoctor.engine.deadline import run_with_deadline

def chatty():
    while True:
        sys.stderr.write("retrying\\n")
        time.sleep(0.0005)

assert not run_with_deadline(chatty, 0.05, "chatty").done
print("answer")
end_process(2)
"""


def test_an_abandoned_thread_does_not_change_the_exit_code_or_lose_output():
    for _ in range(5):
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 2 and done.stdout == "answer\n"
        assert time.monotonic() - started < 30


def test_without_abandoned_threads_the_exit_is_the_usual_one():
    # nothing left running: a plain SystemExit, so atexit work and finalisers still run
    script = (
        "import atexit\n"
        "from llmdoctor.__main__ import end_process\n"
        "atexit.register(lambda: print('atexit ran'))\n"
        "end_process(3)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 3 and done.stdout == "atexit ran\n"
