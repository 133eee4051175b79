"""Run collectors concurrently, each with a timeout; a failure marks its keys missing."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields
from typing import Any

from llmdoctor.engine.deadline import Background
from llmdoctor.engine.facts import Facts, Missing
from llmdoctor.errors import BadInput

API_KEY_FROM_ENV = "$LLMDOCTOR_API_KEY"  # CollectOptions.api_key: the environment's key


@dataclass(frozen=True)
class CollectOptions:
    """What the user asked the collectors for; every option any collector reads, declared once.

    Read as attributes. `get(name)` stays for the collectors written against the old options
    dict, but an option name declared nowhere here is an error, not a silent None.
    """

    # Kubernetes (diagnose, collect)
    namespace: str | None = None
    context: str | None = None
    selector: str | None = None
    port: int | None = None
    tail: int = 2000
    no_exec: bool = False
    # the vLLM endpoint (diagnose, probe, exporter)
    window: float | None = None
    model: str | None = None
    chat: bool = False
    max_latency_ms: float | None = None
    tokenizer: str | None = None
    # the team's Prometheus
    prometheus: str | None = None
    prometheus_since: float | None = None
    prometheus_selector: str | None = None
    # the node (node)
    python: str | None = None
    nvidia_smi_xml: str | None = None
    kernel_log: str | None = None
    since_seconds: float | None = None
    # the exporter: the key this target gets (None: none; the default: $LLMDOCTOR_API_KEY, the
    # user's own run) and its check of every address a request reaches (no DNS rebinding)
    api_key: str | None = API_KEY_FROM_ENV
    prepare_session: Callable[[Any], None] | None = None

    @classmethod
    def of(cls, values: CollectOptions | dict[str, Any] | None) -> CollectOptions:
        """The options from a mapping; ValueError names an option no collector knows."""
        if isinstance(values, CollectOptions):
            return values
        values = dict(values or {})
        unknown = sorted(set(values) - {f.name for f in fields(cls)})
        if unknown:
            raise ValueError(f"unknown collector option(s): {', '.join(unknown)}")
        return cls(**values)

    def get(self, name: str, default: Any = None) -> Any:
        if name not in self.__dataclass_fields__:
            raise AttributeError(f"no collector option {name!r} (engine/collect.py CollectOptions)")
        value = getattr(self, name)
        return default if value is None else value

    def __getitem__(self, name: str) -> Any:
        return self.get(name)


@dataclass
class CollectContext:
    """What a collector gets: the target, the per-collector timeout and the user's options."""

    target: Any
    timeout: float
    options: CollectOptions = field(default_factory=CollectOptions)

    def __post_init__(self) -> None:
        self.timeout = valid_timeout(self.timeout)
        self.options = CollectOptions.of(self.options)
        window = self.options.window
        if window is not None and not (
            isinstance(window, int | float) and 0 <= window <= MAX_WINDOW
        ):  # nan fails both comparisons
            raise BadInput(f"--window {window}: must be 0 to {MAX_WINDOW:g} seconds")


MIN_TIMEOUT = 0.1  # the shortest --timeout: below it no collector or check can do anything
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

    started = [
        (c, Background(lambda c=c: c.fn(ctx) or {}, f"collector-{c.name}")) for c in collectors
    ]
    deadline = time.monotonic() + ctx.timeout + 1.0
    for c, task in started:
        outcome = task.wait(deadline)
        if not outcome.done:
            failures[c.name] = f"timed out after {ctx.timeout:g}s"
        elif isinstance(outcome.error, Exception):
            failures[c.name] = one_line(outcome.error)
        elif outcome.error is None:
            results[c.name] = outcome.value
    for c, _ in started:
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
