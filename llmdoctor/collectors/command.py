"""Run an external command with a hard timeout that also ends its children.

`subprocess.run(timeout=...)` kills only the direct child; a wrapper script's own children keep
the output pipes open and the call keeps waiting. Here the command gets its own process group,
and the whole group is killed when the time is up.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from typing import IO


def run_command(
    argv: list[str], timeout: float, stdout: IO[bytes] | int = subprocess.PIPE
) -> subprocess.CompletedProcess:
    """Run argv (stdin closed); output decoded as UTF-8 text; TimeoutExpired after `timeout` s."""
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    return subprocess.CompletedProcess(argv, proc.returncode, _text(out), _text(err))


def _text(data: bytes | None) -> str:
    return data.decode("utf-8", errors="replace") if data else ""
