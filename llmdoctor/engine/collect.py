"""Run collectors concurrently, each with a timeout; a failure marks its keys missing."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from llmdoctor.engine.facts import Facts, Missing
from llmdoctor.errors import BadInput


@dataclass
class CollectContext:
    """What a collector gets: the target, the per-collector timeout and the user's options."""

    target: Any
    timeout: float
    options: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.timeout = valid_timeout(self.timeout)
        window = self.options.get("window")
        if window is not None and not (
            isinstance(window, int | float) and 0 <= window <= MAX_WINDOW
        ):  # nan fails both comparisons
            raise BadInput(f"--window {window}: must be 0 to {MAX_WINDOW:g} seconds")


MAX_TIMEOUT = 24 * 3600.0
MAX_WINDOW = 3600.0  # seconds between two /metrics scrapes (the --window of every command)


def valid_timeout(seconds: float) -> float:
    """A usable --timeout: a finite, positive number of seconds (BadInput otherwise)."""
    if not isinstance(seconds, int | float) or math.isnan(seconds) or seconds <= 0:
        raise BadInput(f"--timeout {seconds}: must be a positive number of seconds")
    if math.isinf(seconds) or seconds > MAX_TIMEOUT:
        raise BadInput(f"--timeout {seconds:g}: must be at most {MAX_TIMEOUT:g} seconds (a day)")
    return float(seconds)


@dataclass(frozen=True)
class Collector:
    """A named function returning {fact key: value or Missing}.

    `provides` names the keys (or key prefixes ending in '/') it is responsible for, so that
    when it fails or times out, checks needing those keys are skipped with the reason.
    """

    name: str
    provides: tuple[str, ...]
    fn: Callable[[CollectContext], dict[str, Any]]


def one_line(exc: BaseException) -> str:
    """An exception as one line: type and first line of the message."""
    text = str(exc).strip().splitlines()
    message = text[0] if text else ""
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


def run_collectors(collectors: Iterable[Collector], ctx: CollectContext, facts: Facts) -> Facts:
    """Run all collectors at once; each is given ctx.timeout (plus a grace second) to finish.

    Collectors run on daemon threads, so one that ignores its own timeout is abandoned rather
    than waited for: its keys are marked missing and the run goes on.
    """
    collectors = list(collectors)
    results: dict[str, dict[str, Any]] = {}
    failures: dict[str, str] = {}

    def work(c: Collector) -> None:
        try:
            results[c.name] = c.fn(ctx) or {}
        except Exception as exc:
            failures[c.name] = one_line(exc)

    threads = []
    for c in collectors:
        t = threading.Thread(target=work, args=(c,), name=f"collector-{c.name}", daemon=True)
        t.start()
        threads.append((c, t))
    deadline = time.monotonic() + ctx.timeout + 1.0
    for c, t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
        if t.is_alive():
            failures.setdefault(c.name, f"timed out after {ctx.timeout:g}s")
    for c, _ in threads:
        if c.name in failures:
            reason = f"collector {c.name} failed: {failures[c.name]}"
            facts.collector_errors[c.name] = failures[c.name]
            for key in c.provides:
                facts.mark_missing(key, reason)
            continue
        for key, value in results.get(c.name, {}).items():
            if isinstance(value, Missing):
                facts.mark_missing(key, value.reason)
            else:
                facts.set(key, value)
        for key in c.provides:
            if not key.endswith("/") and not facts.has(key):
                facts.mark_missing(key, f"collector {c.name} returned nothing")
    return facts


def submit_abandonable(fn: Callable[..., Any], *args: Any) -> Future:
    """fn(*args) on a daemon thread, as a Future.

    A ThreadPoolExecutor's workers are joined when the interpreter exits, so a Ctrl-C during
    collection used to wait out the /metrics window and every timeout first; a daemon thread is
    abandoned instead, as run_collectors abandons a collector that overruns.
    """
    future: Future = Future()

    def work() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(fn(*args))
        except BaseException as exc:  # handed to whoever reads the result
            future.set_exception(exc)

    threading.Thread(
        target=work, name=f"collect-{getattr(fn, '__name__', 'task')}", daemon=True
    ).start()
    return future


def map_abandonable(fn: Callable[[Any], Any], items: Iterable[Any], max_workers: int) -> list[Any]:
    """[fn(item) for item in items], at most `max_workers` at once on daemon threads (see
    submit_abandonable); an exception of fn is raised here."""
    slots = threading.BoundedSemaphore(max(1, max_workers))

    def limited(item: Any) -> Any:
        with slots:
            return fn(item)

    futures = [submit_abandonable(limited, item) for item in items]
    return [f.result() for f in futures]
