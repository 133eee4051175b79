"""Run collectors concurrently (each with a timeout), derive facts, run checks, build a Report."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from llmdoctor.errors import BadInput
from llmdoctor.facts import FactMissing, Facts
from llmdoctor.findings import Finding, Severity
from llmdoctor.registry import KINDS, CheckSpec, check_kind


class Missing:
    """A collector's way to say 'I looked for this key and here is why it is not there'."""

    def __init__(self, reason: str):
        self.reason = reason


@dataclass
class CollectContext:
    """What a collector gets: the target, the per-collector timeout and the user's options."""

    target: Any
    timeout: float
    options: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.timeout = valid_timeout(self.timeout)


DEFAULT_CHECK_TIMEOUT = 10.0
MAX_TIMEOUT = 24 * 3600.0


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


@dataclass
class Report:
    """Everything a run concluded, ready to render as terminal text, JSON or markdown."""

    target: str
    findings: list[Finding]
    skipped: list[dict[str, str]]
    errors: list[dict[str, str]]
    facts: Facts | None = None
    # the facts of every pod of a merged report (a deployment), first = `facts`
    pod_facts: list[Facts] = field(default_factory=list)

    @property
    def status(self) -> str:
        """ok | warning | critical, or unknown when no check could run at all."""
        if not self.findings:
            return "unknown"
        worst = max((f.severity for f in self.findings), key=lambda s: s.rank)
        if worst is Severity.CRITICAL:
            return "critical"
        check_errors = any("check" in e for e in self.errors)
        if worst is Severity.WARNING or check_errors:
            return "warning"
        return "ok"


def finding_order(f: Finding) -> tuple:
    """Worst first; within a severity, causes, then symptoms, then generic log matches; then
    what started first (a finding's `since`, from Prometheus history)."""
    since = f.since if f.since is not None else float("inf")
    return (-f.severity.rank, KINDS.index(check_kind(f.check)), since, f.subject or "", f.check)


def drop_superseded(findings: list[Finding], specs: dict[str, CheckSpec]) -> list[Finding]:
    """Remove a generic check's finding when a specific check reported the same runbook."""
    covered = {
        (generic, rid)
        for f in findings
        if f.severity is not Severity.OK and f.check in specs
        for generic in specs[f.check].supersedes
        for rid in f.runbooks
    }
    return [
        f
        for f in findings
        if not (f.runbooks and all((f.check, rid) in covered for rid in f.runbooks))
    ]


class CheckTimedOut(Exception):
    """A check did not return within its deadline; its thread is abandoned."""


def call_with_deadline(fn: Callable, arg: Any, seconds: float, name: str):
    """fn(arg) on a daemon thread; its result, its exception re-raised, or CheckTimedOut.

    A check is a pure function, but a pathological input (a regex on a huge line, a parser
    loop) can still take forever; the thread is abandoned so the report completes.
    """
    outcome: dict[str, Any] = {}

    def work() -> None:
        try:
            outcome["value"] = fn(arg)
        except BaseException as exc:  # handed to the caller, which decides what it means
            outcome["error"] = exc

    thread = threading.Thread(target=work, name=f"check-{name}", daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise CheckTimedOut(f"timed out after {seconds:g}s (a longer --timeout gives it more)")
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


def run_checks(
    facts: Facts,
    checks: Iterable[CheckSpec],
    target: str,
    only: Iterable[str] = (),
    skip: Iterable[str] = (),
    timeout: float = DEFAULT_CHECK_TIMEOUT,
) -> Report:
    """Run every selected check, each under `timeout` seconds.

    A missing fact skips a check, an exception or a timeout records an error; neither stops
    the others.
    """
    timeout = valid_timeout(timeout)
    checks = list(checks)
    only, skip = set(only), set(skip)
    findings: list[Finding] = []
    skipped: list[dict[str, str]] = []
    errors: list[dict[str, str]] = [
        {"collector": name, "message": why} for name, why in sorted(facts.collector_errors.items())
    ]
    for spec in checks:
        if (only and spec.id not in only) or spec.id in skip:
            skipped.append({"check": spec.id, "reason": "not selected (--only/--skip)"})
            continue
        absent = [k for k in spec.needs if not facts.has(k)]
        if absent:
            skipped.append(
                {"check": spec.id, "reason": f"{absent[0]}: {facts.missing_reason(absent[0])}"}
            )
            continue
        try:
            produced = call_with_deadline(spec.fn, facts, timeout, spec.id)
        except FactMissing as exc:
            skipped.append({"check": spec.id, "reason": f"{exc.key}: {exc.reason}"})
            continue
        except CheckTimedOut as exc:
            errors.append({"check": spec.id, "message": str(exc)})
            continue
        except RecursionError:
            errors.append({"check": spec.id, "message": "input nested too deeply to read"})
            continue
        except Exception as exc:
            errors.append({"check": spec.id, "message": one_line(exc)})
            continue
        if produced is None:
            produced = [Finding(spec.id, Severity.OK, f"{spec.title}: no problem found")]
        elif isinstance(produced, Finding):
            produced = [produced]
        findings.extend(produced)
    findings = drop_superseded(findings, {spec.id: spec for spec in checks})
    findings.sort(key=finding_order)
    return Report(target=target, findings=findings, skipped=skipped, errors=errors, facts=facts)
