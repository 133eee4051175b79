"""Run the checks over facts, each under a deadline, and build a Report."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from llmdoctor.engine.collect import one_line, valid_timeout
from llmdoctor.engine.deadline import run_with_cpu_budget
from llmdoctor.engine.facts import FactMissing, Facts
from llmdoctor.engine.findings import Finding, Severity
from llmdoctor.engine.registry import CheckSpec
from llmdoctor.engine.report import Report, finding_order
from llmdoctor.engine.runbook_fit import keep_fitting_runbooks
from llmdoctor.engine.story import link_findings


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


DEFAULT_CHECK_TIMEOUT = 10.0


class CheckTimedOut(Exception):
    """A check did not return within its deadline; its thread is abandoned."""


def call_with_deadline(fn: Callable, arg: Any, seconds: float, name: str):
    """fn(arg) on a daemon thread; its result, its exception re-raised, or CheckTimedOut.

    A check is a pure function, but a pathological input (a regex on a huge line, a parser
    loop) can still take forever; the thread is abandoned so the report completes. `seconds`
    is CPU time: a busy machine slows a check down without making it time out (up to
    run_with_cpu_budget's limit on the clock).
    """
    budgeted = run_with_cpu_budget(lambda: fn(arg), seconds, f"check-{name}")
    outcome = budgeted.outcome
    if not outcome.done and budgeted.cpu_s >= seconds:
        raise CheckTimedOut(f"timed out after {seconds:g}s (a longer --timeout gives it more)")
    if not outcome.done:
        raise CheckTimedOut(
            f"timed out: no result after {budgeted.wall_s:.1f}s, {budgeted.cpu_s:.1f}s of them "
            "working (a busy machine, or waiting on something; a longer --timeout gives it more)"
        )
    if outcome.error is not None:
        raise outcome.error
    return outcome.value


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
    keep_fitting_runbooks(findings, {s.id: s.scope for s in checks}, facts.get("wiki/entries"))
    findings.sort(key=finding_order)
    link_findings(findings, facts.get("wiki/entries") or {})
    return Report(target=target, findings=findings, skipped=skipped, errors=errors, facts=facts)
