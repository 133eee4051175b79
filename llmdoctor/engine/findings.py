"""The result type of every check: a Finding with a severity, evidence and runbook links."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class Severity(StrEnum):
    OK = "ok"
    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"

    @property
    def rank(self) -> int:
        return _RANK[self]


_RANK = {Severity.OK: 0, Severity.INFO: 1, Severity.WARNING: 2, Severity.CRITICAL: 3}


def evidence(text: str, source: str | None = None, line: int | None = None) -> dict[str, Any]:
    """One evidence item: the exact text, and where it came from (a fact key, a line number).

    Secrets a log or an object carries (tokens, passwords, keys) are redacted here, once, so no
    report format (terminal, JSON, markdown, the exporter) can print them."""
    from llmdoctor.redact import redact_text

    item: dict[str, Any] = {"text": redact_text(text)}
    if source is not None:
        item["source"] = source
    if line is not None:
        item["line"] = line
    return item


@dataclass
class Finding:
    """What one check concluded about one subject (a pod, a GPU, a container, a model)."""

    check: str
    severity: Severity
    summary: str
    evidence: list[dict[str, Any]] = field(default_factory=list)
    runbooks: list[str] = field(default_factory=list)
    subject: str | None = None
    since: float | None = None  # unix seconds the problem started (from Prometheus history)
    # values this incident gives a runbook's Fix parameters ({max_model_len}: 5632)
    params: dict[str, Any] = field(default_factory=dict)
    # the runbooks are places to look, none proven by the evidence (a slow first token with no
    # queue in the scrapes): the story names no root-cause runbook for this finding
    runbooks_unproven: bool = False
    # when the problem began on its source's own clock, (clock kind, seconds): a kernel log's
    # "uptime", "wall" or "syslog" time (llmdoctor.gpus.xid_policy.log_seconds); comparable only
    # within one kind. The story never lets a cause begin after its effect did.
    began: tuple[str, float] | None = field(default=None, repr=False, compare=False)
    # set by engine/story.py once every check has run: the findings that cause this one, the
    # findings it causes, and (for an ok finding) the problems that contradict it
    explained_by: list[Finding] = field(default_factory=list, repr=False, compare=False)
    explains: list[Finding] = field(default_factory=list, repr=False, compare=False)
    contradicted_by: list[Finding] = field(default_factory=list, repr=False, compare=False)

    def ref(self) -> dict[str, str]:
        """{"check", "subject"}: how JSON names this finding from another one."""
        out = {"check": self.check}
        if self.subject is not None:
            out["subject"] = self.subject
        return out

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "check": self.check,
            "severity": str(self.severity),
            "summary": self.summary,
            "evidence": self.evidence,
            "runbooks": self.runbooks,
        }
        if self.runbooks_unproven:
            out["runbooks_unproven"] = True
        if self.subject is not None:
            out["subject"] = self.subject
        if self.since is not None:
            out["since"] = rfc3339(self.since)
        if self.params:
            out["params"] = self.params
        out["explained_by"] = _refs(self.explained_by)
        out["explains"] = _refs(self.explains)
        if self.contradicted_by:
            out["contradicted_by"] = _refs(self.contradicted_by)
        links = _runbook_links(self.runbooks)
        if links:
            out["runbook_links"] = links
        return out


def rfc3339(seconds: float) -> str:
    """Unix seconds as RFC 3339 UTC: 2026-11-30T02:41:00Z."""
    from datetime import UTC, datetime

    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _refs(findings: list[Finding]) -> list[dict[str, str]]:
    """The findings as JSON names them, each name once (two Xid codes of one GPU are both
    `{"check": "xid", "subject": "GPU 0 …"}`)."""
    seen = {tuple(f.ref().items()): f.ref() for f in findings}
    return list(seen.values())


def _runbook_links(runbooks: list[str]) -> list[dict[str, str]]:
    """[{"id", "url"}] for each runbook when a wiki site address is set (--wiki-url)."""
    from llmdoctor.wiki.links import page_url

    return [{"id": rid, "url": url} for rid in runbooks if (url := page_url(rid))]


def ok(check: str, summary: str, evidence_items=(), subject: str | None = None) -> Finding:
    return Finding(check, Severity.OK, summary, list(evidence_items), [], subject)


def info(check: str, summary: str, evidence_items=(), runbooks=(), subject=None) -> Finding:
    return Finding(check, Severity.INFO, summary, list(evidence_items), list(runbooks), subject)


def warning(check: str, summary: str, evidence_items=(), runbooks=(), subject=None) -> Finding:
    return Finding(check, Severity.WARNING, summary, list(evidence_items), list(runbooks), subject)


def critical(check: str, summary: str, evidence_items=(), runbooks=(), subject=None) -> Finding:
    return Finding(check, Severity.CRITICAL, summary, list(evidence_items), list(runbooks), subject)
