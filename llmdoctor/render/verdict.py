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
from llmdoctor.render.fix_text import FixStep, evidence_texts, fix_steps, shown_and_left_out

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
    """The evidence item that proves the finding: the first Warning event (what Kubernetes
    itself reported), else the error a request got, else the first line quoted from a file (a
    log line, a kernel message), else the first item."""
    quoted = [e for e in finding.evidence if "line" in e]
    warned = [
        e
        for e in finding.evidence
        if e.get("source") == "k8s/events.json" and str(e["text"]).startswith("Warning ")
    ]
    failed = [e for e in finding.evidence if str(e["text"]).startswith("error: ")]
    for found in (warned, failed, quoted, finding.evidence):
        if found:
            return found[0]
    return None


def story_params(chapter: Chapter) -> dict[str, Any]:
    """The values this incident gives a Fix's parameters: every finding's of the story, the
    root's winning."""
    return {k: v for f in (*chapter.folded, chapter.root) for k, v in f.params.items()}


def shown_steps(chapter: Chapter, entry) -> tuple[list[FixStep], str]:
    """The whole leading steps of `entry`'s Fix a report shows for this story, filled (those
    its lines name first), and the numbers of the steps left to `wiki show` ("4-7", or "")."""
    lines = evidence_texts(chapter.root)
    return shown_and_left_out(fix_steps(entry, params=story_params(chapter), lines=lines))


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
        steps = shown_steps(chapter, entry)[0] if entry is not None else []
        out.append(Verdict(chapter, rid, title, steps[0] if steps else None, proof_line(root)))
    return out


def blind_spots(report: Report, most: int = 3) -> list[str]:
    """What llmdoctor was refused or could not reach, each reason once with the checks it
    left blind ("connection refused: vllm/health.json, vllm/window (not checked: …)")."""
    by_why: dict[str, tuple[list[str], list[str]]] = {}
    for s in report.skipped:
        if not _BLIND.search(s["reason"]):
            continue
        key, sep, why = s["reason"].partition(": ")
        if not (sep and ("/" in key or key.endswith(".json")) and " " not in key):
            key, why = "", s["reason"]
        keys, checks = by_why.setdefault(why, ([], []))
        if key and key not in keys:
            keys.append(key)
        if s["check"] not in checks:
            checks.append(s["check"])
    lines = [
        f"{why}{': ' + ', '.join(keys) if keys else ''} (not checked: {', '.join(checks)})"
        for why, (keys, checks) in by_why.items()
    ]
    for e in report.errors:
        if "collector" in e and _BLIND.search(e["message"]):
            lines.append(f"collector {e['collector']}: {e['message']}")
    # a check that did not finish may hold the cause of what is named above (a busy node, a
    # huge log: pod-restarts and log-signatures timed out, the root cause read pod-not-ready)
    unfinished = [e["check"] for e in report.errors if "check" in e and "timed out" in e["message"]]
    if unfinished:
        lines.append(
            f"timed out, their findings missing from the story: {', '.join(unfinished)} "
            "(a longer --timeout gives them more)"
        )
    if len(lines) > most:
        lines = [*lines[: most - 1], f"and {len(lines) - most + 1} more (see 'Not checked')"]
    return lines
