"""The report model: every finding of a run, what was skipped and why, and the overall status."""

from __future__ import annotations

from dataclasses import dataclass, field

from llmdoctor.engine.facts import Facts
from llmdoctor.engine.findings import Finding, Severity
from llmdoctor.engine.registry import KINDS, check_kind


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
