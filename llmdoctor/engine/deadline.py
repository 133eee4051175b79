"""Run a function on a daemon thread and wait for it until a deadline, never longer.

The one way llmdoctor bounds work it cannot interrupt: checks and derived facts
(engine/runner.py), collectors (engine/collect.py), the vLLM endpoint's requests
(collectors/vllm_endpoint.py), the local tokenizer probe and shell completion's cluster lookup.
A thread that overruns is abandoned (it is a daemon, so it never holds the process open).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Outcome:
    """What a background call came to by its deadline: still running, a value, or an error."""

    done: bool
    value: Any = None
    error: BaseException | None = None


class Background:
    """fn() started on a daemon thread at once; wait(until) gives its Outcome by then."""

    def __init__(self, fn: Callable[[], Any], name: str):
        self._value: Any = None
        self._error: BaseException | None = None
        self.started = time.monotonic()
        self._thread = threading.Thread(target=self._run, args=(fn,), name=name, daemon=True)
        self._thread.start()

    def _run(self, fn: Callable[[], Any]) -> None:
        try:
            self._value = fn()
        except BaseException as exc:  # handed to whoever waits, which decides what it means
            self._error = exc

    def wait(self, until: float) -> Outcome:
        """Wait until the monotonic time `until` at the latest."""
        self._thread.join(max(0.0, until - time.monotonic()))
        if self._thread.is_alive():
            return Outcome(done=False)
        return Outcome(done=True, value=self._value, error=self._error)


def run_with_deadline(fn: Callable[[], Any], seconds: float, name: str) -> Outcome:
    """fn() on a daemon thread, waited for `seconds` at most."""
    return Background(fn, name).wait(time.monotonic() + seconds)
