"""Run a function on a daemon thread and wait for it until a deadline, never longer.

The one way llmdoctor bounds work it cannot interrupt: checks and derived facts
(engine/runner.py, by the CPU time they use: `run_with_cpu_budget`), collectors
(engine/collect.py), the vLLM endpoint's requests (collectors/vllm_endpoint.py), the local
tokenizer probe, shell completion's cluster lookup, and the Kubernetes and Prometheus
collectors' parallel requests (submit_abandonable). A thread that overruns is abandoned: it is
a daemon, so neither a deadline nor a Ctrl-C waits for it (a ThreadPoolExecutor's workers are
joined when the interpreter exits).
"""

from __future__ import annotations

import contextlib
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


# how much longer than its CPU budget a computation may take on the clock, waiting for a core
WALL_PER_CPU_SECOND = 3.0


@dataclass(frozen=True)
class Budgeted:
    """What a computation came to under a CPU budget: its Outcome, and what it had used."""

    outcome: Outcome
    cpu_s: float
    wall_s: float


def run_with_cpu_budget(fn: Callable[[], Any], seconds: float, name: str) -> Budgeted:
    """fn() on a daemon thread, waited for until it has worked `seconds` of CPU time, and never
    longer than WALL_PER_CPU_SECOND × `seconds` on the clock.

    For pure computation (a check, a parser): its deadline guards against an input that makes
    it loop, not against a machine too busy to run it. On an overloaded node, or beside a
    saturated CPU server, a 60 ms parse once took more than 20 s of wall time (the real
    saturation drill on CI) and the report called /metrics unusable. Where a thread's CPU clock
    cannot be read, wall time counts as its CPU time (the plain deadline).
    """
    clock: list[int] = []

    def work() -> Any:
        with contextlib.suppress(AttributeError, OSError):  # no per-thread CPU clocks here
            clock.append(time.pthread_getcpuclockid(threading.get_ident()))
        return fn()

    task = Background(work, name)
    cap = task.started + WALL_PER_CPU_SECOND * seconds

    def used() -> float:
        if clock:
            try:
                return time.clock_gettime(clock[0])
            except OSError:  # the thread ended between the wait and this read
                pass
        return time.monotonic() - task.started

    while True:
        now = time.monotonic()
        outcome = task.wait(now)  # done already: a thread that has ended has no clock to read
        if outcome.done:
            break
        left = seconds - used()
        if left <= 0 or now >= cap:
            break
        # one thread works at most one CPU second per second: waiting `left` cannot overshoot
        outcome = task.wait(min(cap, now + left))
        if outcome.done:
            break
    return Budgeted(outcome, used(), time.monotonic() - task.started)
