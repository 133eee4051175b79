"""Render a Report: a rich terminal view, the stable JSON contract, or markdown for an incident doc."""

from __future__ import annotations

import json
import re
from typing import Any

from llmdoctor.engine.findings import Finding, Severity
from llmdoctor.engine.report import Report
from llmdoctor.exit_codes import ExitCode
from llmdoctor.terminal_text import visible
from llmdoctor.wiki.links import page_url

SCHEMA = "llmdoctor/1"
MAX_EVIDENCE = 8
STYLE = {
    "critical": "bold white on red",
    "warning": "bold black on yellow",
    "info": "bold white on blue",
    "ok": "bold black on green",
    "unknown": "bold white on magenta",
}


def exit_code(report: Report) -> ExitCode:
    return {
        "ok": ExitCode.OK,
        "warning": ExitCode.WARNING,
        "critical": ExitCode.CRITICAL,
    }.get(report.status, ExitCode.CANNOT_RUN)


def _entries(report: Report) -> dict:
    if report.facts is None:
        return {}
    return report.facts.get("wiki/entries") or {}


def to_json(report: Report) -> dict[str, Any]:
    """The documented `llmdoctor/1` object (`timeline` only with Prometheus history)."""
    from llmdoctor.timeline import view as timeline_view

    out = {
        "schema": SCHEMA,
        "target": report.target,
        "status": report.status,
        "findings": [f.to_json() for f in report.findings],
        "skipped": report.skipped,
        "errors": report.errors,
    }
    found = timeline_view.histories(report)
    if found:
        out["timeline"] = timeline_view.timeline_json(found[0][1])
    if len(found) > 1:  # a deployment: every pod's timeline, by pod
        out["timelines"] = {
            str(facts.get("target")): timeline_view.timeline_json(timeline)
            for facts, timeline, _ in found
        }
    return out


def render_json(report: Report) -> str:
    return json.dumps(to_json(report), indent=2, ensure_ascii=False)


MAX_TERMINAL_TEXT = 240


def _evidence_line(item: dict[str, Any], limit: int | None = None) -> str:
    where = item.get("source", "")
    if "line" in item:
        where = f"{where}:{item['line']}"
    text = str(item["text"])
    if limit is not None and len(text) > limit:
        text = text[: limit - 1] + "…"
    return f"{where}  {text}" if where else text


def _counts(report: Report) -> str:
    counts: dict[str, int] = {}
    for f in report.findings:
        counts[str(f.severity)] = counts.get(str(f.severity), 0) + 1
    parts = [f"{counts[s]} {s}" for s in ("critical", "warning", "info", "ok") if counts.get(s)]
    if report.skipped:
        parts.append(f"{len(report.skipped)} not checked")
    if report.errors:
        parts.append(f"{len(report.errors)} errors")
    return ", ".join(parts) or "nothing checked"


def headline(report: Report) -> str:
    if report.status == "unknown":
        return "UNKNOWN: no check could run, so nothing is known to be healthy"
    if report.status == "ok":
        if report.skipped or report.errors:
            return "OK in what was checked (see 'Not checked')"
        return "OK: no problems found"
    return report.status.upper()


def fix_excerpt(fix: str, max_lines: int = 4, max_code_lines: int = 8) -> list[str]:
    """The first lines of a Fix section for the report, with a code block it reaches shown
    whole (fences dropped, code indented; cut with "…" past `max_code_lines`): the command
    is usually in the code block, after the line that introduces it.
    """
    out: list[str] = []
    prose = code = 0
    in_code = False
    for raw in fix.splitlines():
        stripped = raw.strip()
        if stripped.startswith(("```", "~~~")):
            in_code = not in_code
            code = 0
            if not in_code and prose >= max_lines:
                break
            continue
        if in_code:
            code += 1
            if code <= max_code_lines:
                out.append("    " + stripped)
            elif code == max_code_lines + 1:
                out.append("    …")
            continue
        if not stripped:
            continue
        if prose >= max_lines:
            break
        out.append(raw.rstrip())
        prose += 1
    return out


def render_terminal(report: Report, console, verbose: bool = False) -> None:
    """Print the report with rich; problems first, each with evidence and the runbook's Fix.

    Text that llmdoctor did not write (targets, log lines, wiki entries) is printed with its
    control characters escaped (see terminal_text).
    """
    from rich.markup import escape as rich_escape

    def escape(text: object) -> str:
        return rich_escape(visible(text))

    entries = _entries(report)
    style = STYLE.get(report.status, "bold")
    console.print(
        f"[{style}] {escape(headline(report))} [/]  [bold]{escape(report.target)}[/]  "
        f"[dim]({escape(_counts(report))})[/]"
    )
    problems = [f for f in report.findings if f.severity is not Severity.OK]
    fine = [f for f in report.findings if f.severity is Severity.OK]
    fixes_shown: set[str] = set()
    for f in problems:
        console.print()
        _print_finding(console, f, entries, escape, fixes_shown)
    from llmdoctor.timeline import view as timeline_view

    timeline_view.render_terminal(report, console, escape)
    if fine:
        console.print()
        console.print("[bold]Checked and fine[/]")
        for f in fine:
            subject = f" [{f.subject}]" if f.subject else ""
            console.print(f"  [green]✓[/] {escape(f.check)}{escape(subject)}: {escape(f.summary)}")
            if verbose:
                for item in f.evidence[:MAX_EVIDENCE]:
                    line = _evidence_line(item, MAX_TERMINAL_TEXT)
                    console.print(f"      [dim]{escape(line)}[/]")
    if report.skipped or report.errors:
        console.print()
        console.print("[bold]Not checked[/]")
        for reason, checks in group_skipped(report.skipped):
            console.print(f"  [dim]-[/] {escape(reason)}: {escape(checks)}")
        for e in report.errors:
            name = e.get("check") or f"collector {e.get('collector')}"
            console.print(f"  [red]![/] {escape(name)}: {escape(e['message'])}")


def group_skipped(skipped: list[dict[str, str]]) -> list[tuple[str, str]]:
    """(reason, checks) pairs: checks that share a reason on one line, in first-seen order.

    A reason is "<fact key>: <why>"; checks are grouped by the why and then by key, so
    "not in the bundle" is said once: "driver-cuda, gpu-arch (node/versions.json); xid (node/xid)".
    """
    groups: dict[str, dict[str, list[str]]] = {}
    for s in skipped:
        name = s["check"] + (f" [{s['subject']}]" if s.get("subject") else "")
        key, sep, why = s["reason"].partition(": ")
        if not (sep and ("/" in key or key.endswith(".json")) and " " not in key):
            key, why = "", s["reason"]
        groups.setdefault(why, {}).setdefault(key, []).append(name)
    lines = []
    for why, by_key in groups.items():
        parts = [", ".join(names) + (f" ({key})" if key else "") for key, names in by_key.items()]
        lines.append((why, "; ".join(parts)))
    return lines


def _print_finding(console, f: Finding, entries: dict, escape, fixes_shown: set[str]) -> None:
    sev = str(f.severity)
    subject = f" [{f.subject}]" if f.subject else ""
    console.print(
        f"[{STYLE[sev]}] {sev.upper()} [/] [bold]{escape(f.check)}{escape(subject)}[/]: "
        f"{escape(f.summary)}"
    )
    for item in f.evidence[:MAX_EVIDENCE]:
        line = _evidence_line(item, MAX_TERMINAL_TEXT)
        console.print(f"    [dim]│[/] {escape(line)}", soft_wrap=True)
    if len(f.evidence) > MAX_EVIDENCE:
        console.print(f"    [dim]│ … {len(f.evidence) - MAX_EVIDENCE} more (see --json)[/]")
    for rid in f.runbooks:
        entry = entries.get(rid)
        if entry is None:
            console.print(f"    [cyan]runbook[/] {escape(rid)} [dim](not in the wiki)[/]")
            continue
        console.print(f"    [cyan]runbook[/] [bold]{escape(rid)}[/]: {escape(entry.title)}")
        if url := page_url(rid):
            console.print(f"      [dim]page:[/] {escape(url)}", soft_wrap=True)
        if rid in fixes_shown:
            console.print("      [dim](its Fix is shown above)[/]")
            continue
        fixes_shown.add(rid)
        for n, line in enumerate(fix_excerpt(entry.fix)):
            label = "Fix: " if n == 0 else "     "
            console.print(f"      [dim]{label}[/]{escape(line)}", soft_wrap=True)
        console.print(f"      [dim]more: llmdoctor wiki show {escape(rid)}[/]")


def _fence(lines: list[str]) -> str:
    """A code fence longer than any run of backticks in the lines, so none can close it."""
    longest = max((len(run) for line in lines for run in re.findall(r"`+", line)), default=0)
    return "`" * max(3, longest + 1)


def render_markdown(report: Report, charts: list[tuple[str, str]] | None = None) -> str:
    """Markdown for pasting into an incident document or a retro (`charts`: SVGs to link;
    control characters in what llmdoctor did not write are escaped, as on the terminal)."""
    from llmdoctor.timeline import view as timeline_view

    entries = _entries(report)
    v = visible
    out = [
        f"## llmdoctor: {v(report.target)}",
        "",
        f"**Status: {headline(report)}** ({_counts(report)})",
        "",
    ]
    problems = [f for f in report.findings if f.severity is not Severity.OK]
    fine = [f for f in report.findings if f.severity is Severity.OK]
    fixes_shown: set[str] = set()
    if problems:
        out += ["### Findings", ""]
        for f in problems:
            subject = f" [{v(f.subject)}]" if f.subject else ""
            out.append(f"- **{str(f.severity).upper()}** `{v(f.check)}`{subject}: {v(f.summary)}")
            if f.evidence:
                lines = [v(_evidence_line(i)) for i in f.evidence[:MAX_EVIDENCE]]
                fence = _fence(lines)
                out.append("")
                out.append(f"  {fence}text")
                out += [f"  {line}" for line in lines]
                out.append(f"  {fence}")
            for rid in f.runbooks:
                entry = entries.get(rid)
                title = f": {v(entry.title)}" if entry else ""
                url = page_url(rid)
                out.append(
                    f"  - runbook [`{v(rid)}`]({url}){title}"
                    if url
                    else f"  - runbook `{v(rid)}`{title}"
                )
                if entry and rid not in fixes_shown:
                    fixes_shown.add(rid)
                    out += [f"    > {v(line)}" for line in fix_excerpt(entry.fix)]
            out.append("")
    out += timeline_view.render_markdown(report, charts)
    if fine:
        out += ["### Checked and fine", ""]
        out += [
            f"- `{v(f.check)}`{f' [{v(f.subject)}]' if f.subject else ''}: {v(f.summary)}"
            for f in fine
        ]
        out.append("")
    if report.skipped or report.errors:
        out += ["### Not checked", ""]
        out += [f"- {v(reason)}: {v(checks)}" for reason, checks in group_skipped(report.skipped)]
        for e in report.errors:
            name = e.get("check") or f"collector {e.get('collector')}"
            out.append(f"- `{v(name)}`: error: {v(e['message'])}")
        out.append("")
    return "\n".join(out)
