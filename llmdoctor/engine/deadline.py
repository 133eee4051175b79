"""Run a function on a daemon thread and wait for it until a deadline, never longer.

The one way llmdoctor bounds work it cannot interrupt: checks and derived facts
(engine/runner.py), collectors (engine/collect.py), the vLLM endpoint's requests
(collectors/vllm_endpoint.py), the local tokenizer probe, shell completion's cluster lookup, and
the Kubernetes and Prometheus collectors' parallel requests (submit_abandonable). A thread that
overruns is abandoned: it is a daemon, so neither a deadline nor a Ctrl-C waits for it (a
ThreadPoolExecutor's workers are joined when the interpreter exits).
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from concurrent.futures import wait as wait_for
from dataclasses import dataclass
from typing import Any

_THREADS: weakref.WeakSet[threading.Thread] = weakref.WeakSet()


def submit_abandonable(fn: Callable[..., Any], *args: Any, name: str | None = None) -> Future:
    """fn(*args) on a daemon thread, as a Future (its exception, of any kind, kept in it)."""
    future: Future = Future()

    def work() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(fn(*args))
        except BaseException as exc:  # handed to whoever reads the result
            future.set_exception(exc)

    label = name or f"collect-{getattr(fn, '__name__', 'task')}"
    thread = threading.Thread(target=work, name=label, daemon=True)
    _THREADS.add(thread)
    thread.start()
    return future


def abandoned_threads_running() -> bool:
    """Whether a thread started here (and perhaps abandoned at its deadline) still runs."""
    return any(thread.is_alive() for thread in list(_THREADS))


def map_abandonable(fn: Callable[[Any], Any], items: Iterable[Any], max_workers: int) -> list[Any]:
    """[fn(item) for item in items], at most `max_workers` at once on daemon threads (see
    submit_abandonable); an exception of fn is raised here."""
    slots = threading.BoundedSemaphore(max(1, max_workers))

    def limited(item: Any) -> Any:
        with slots:
            return fn(item)

    futures = [submit_abandonable(limited, item) for item in items]
    return [f.result() for f in futures]


@dataclass(frozen=True)
class Outcome:
    """What a background call came to by its deadline: still running, a value, or an error."""

    done: bool
    value: Any = None
    error: BaseException | None = None


class Background:
    """fn() started on a daemon thread at once; wait(until) gives its Outcome by then."""

    def __init__(self, fn: Callable[[], Any], name: str):
        self.started = time.monotonic()
        self._future = submit_abandonable(fn, name=name)

    def wait(self, until: float) -> Outcome:
        """Wait until the monotonic time `until` at the latest."""
        done, _ = wait_for([self._future], timeout=max(0.0, until - time.monotonic()))
        if not done:
            return Outcome(done=False)
        error = self._future.exception()
        return Outcome(done=True, value=None if error else self._future.result(), error=error)


def run_with_deadline(fn: Callable[[], Any], seconds: float, name: str) -> Outcome:
    """fn() on a daemon thread, waited for `seconds` at most."""
    return Background(fn, name).wait(time.monotonic() + seconds)
