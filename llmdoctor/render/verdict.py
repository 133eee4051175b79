"""The verdict that leads every report: the root cause in one line, what to do now, the line of
evidence that proves it, the other independent problems, and the blind spots that matter.

Pure: a Report in (its findings already linked by engine/story.py), plain data out; the
terminal and markdown renderers lay it out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from llmdoctor.engine.findings import Finding, Severity
from llmdoctor.engine.report import Report
from llmdoctor.engine.story import Chapter, chapters
from llmdoctor.render.fix_text import FixStep, first_step

# what makes a skipped check a blind spot worth naming beside the headline: llmdoctor was
# refused or could not reach a source, so a problem there would go unseen (as opposed to a
# source that is simply absent from a bundle or does not apply)
_BLIND = re.compile(
    r"forbidden|\b403\b|\b401\b|unauthori[sz]ed|refused|unreachable|timed out|timeout|"
    r"could not (?:connect|resolve|reach)|no route|name resolution|reset by peer",
    re.IGNORECASE,
)


@dataclass
class Verdict:
    """One independent problem, told as a story."""

    chapter: Chapter
    runbook: str | None  # the root cause's runbook id, when one applies
    title: str  # the root cause in one line
    do_now: FixStep | None  # the runbook's first step
    proof: dict[str, Any] | None  # the evidence item that proves it

    @property
    def severity(self) -> Severity:
        return self.chapter.severity

    @property
    def root(self) -> Finding:
        return self.chapter.root


def _entries(report: Report) -> dict:
    if report.facts is None:
        return {}
    return report.facts.get("wiki/entries") or {}


def proof_line(finding: Finding) -> dict[str, Any] | None:
    """The evidence item that proves the finding: the first one quoting a line of a file (a
    log line, a kernel message) when there is one, else the first item."""
    quoted = [e for e in finding.evidence if "line" in e]
    if quoted:
        return quoted[0]
    return finding.evidence[0] if finding.evidence else None


def verdicts(report: Report) -> list[Verdict]:
    """Every independent problem of warning or worse, worst first."""
    entries = _entries(report)
    out = []
    for chapter in chapters(report.findings, entries):
        if chapter.severity.rank < Severity.WARNING.rank:
            continue
        rid = chapter.runbook
        entry = entries.get(rid) if rid else None
        root = chapter.root
        title = entry.title if entry is not None else root.summary
        step = first_step(entry) if entry is not None else None
        out.append(Verdict(chapter, rid, title, step, proof_line(root)))
    return out


def blind_spots(report: Report) -> list[str]:
    """The reasons llmdoctor was refused or could not reach a source, each with the checks
    it left blind ("logs/vllm.log: forbidden: …: log-signatures, memory-fragmentation")."""
    lines = []
    by_reason: dict[str, list[str]] = {}
    for s in report.skipped:
        if _BLIND.search(s["reason"]):
            by_reason.setdefault(s["reason"], []).append(s["check"])
    for reason, checks in by_reason.items():
        lines.append(f"{reason} (not checked: {', '.join(dict.fromkeys(checks))})")
    for e in report.errors:
        if "collector" in e and _BLIND.search(e["message"]):
            lines.append(f"collector {e['collector']}: {e['message']}")
    return lines
