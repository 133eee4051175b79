"""Render a Report: a rich terminal view, the stable JSON contract, or markdown for an incident doc."""

from __future__ import annotations

import json
import re
from typing import Any

from llmdoctor.engine.findings import Finding, Severity
from llmdoctor.engine.report import Report
from llmdoctor.engine.story import Chapter, chapters, previous_run_only
from llmdoctor.exit_codes import ExitCode
from llmdoctor.render.fix_text import CodeBlock, display_lines
from llmdoctor.render.verdict import Verdict, blind_spots, shown_steps, verdicts
from llmdoctor.terminal_text import visible
from llmdoctor.wiki.links import page_url

SCHEMA = "llmdoctor/2"
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
    """The documented `llmdoctor/2` object (`timeline` only with Prometheus history)."""
    from llmdoctor.timeline import view as timeline_view

    out = {
        "schema": SCHEMA,
        "target": report.target,
        "status": report.status,
        "findings": [f.to_json() for f in report.findings],
        "skipped": report.skipped,
        "errors": report.errors,
    }
    stories = _stories_json(report)
    if stories:
        out["stories"] = stories
    found = timeline_view.histories(report)
    if found:
        out["timeline"] = timeline_view.timeline_json(found[0][1])
    if len(found) > 1:  # a deployment: every pod's timeline, by pod
        out["timelines"] = {
            str(facts.get("target")): timeline_view.timeline_json(timeline)
            for facts, timeline, _ in found
        }
    return out


def _stories_json(report: Report) -> list[dict[str, Any]]:
    """The independent problems in the order the reports tell them (the first is the verdict's
    root cause), each with its root finding's name, its runbook and what is folded under it."""
    out = []
    for chapter in chapters(report.findings, _entries(report)):
        root = chapter.root
        story: dict[str, Any] = {"severity": str(chapter.severity), **root.ref()}
        story["runbook"] = chapter.runbook
        story["summary"] = root.summary
        if previous_run_only(root):
            story["previous_run"] = True
        story["folded"] = [f.ref() for f in chapter.folded]
        out.append(story)
    return out


def render_json(report: Report) -> str:
    return json.dumps(to_json(report), indent=2, ensure_ascii=False)


MAX_TERMINAL_TEXT = 160  # an evidence line in a pipe; on a terminal, one screen line
MAX_PROOF_TEXT = 240  # the verdict's line of evidence, wrapped on a terminal


def _evidence_line(item: dict[str, Any], limit: int | None = None) -> str:
    where = item.get("source", "")
    if "line" in item:
        where = f"{where}:{item['line']}"
    line = f"{where}  {item['text']}" if where else str(item["text"])
    if limit is not None and len(line) > limit:
        line = line[: max(limit - 1, 20)] + "…"
    return line


def _counts(report: Report) -> str:
    """Counted by story, each at its worst severity (the one its headline shows: a warning
    cause of a critical effect is a critical story); a finding folded under its cause counts
    once, as folded."""
    counts: dict[str, int] = {}
    folded = 0
    for chapter in chapters(report.findings):
        counts[str(chapter.severity)] = counts.get(str(chapter.severity), 0) + 1
        folded += len(chapter.folded)
    oks = [f for f in report.findings if f.severity is Severity.OK]
    doubted = sum(1 for f in oks if f.contradicted_by)  # listed under "Cannot tell"
    parts = [f"{counts[s]} {s}" for s in ("critical", "warning", "info") if counts.get(s)]
    if folded:
        parts.append(f"{folded} folded under their cause")
    if len(oks) > doubted:
        parts.append(f"{len(oks) - doubted} ok")
    if doubted:
        parts.append(f"{doubted} cannot tell")
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


def _subject(f: Finding) -> str:
    return f" [{f.subject}]" if f.subject else ""


def _verdict_subject(f: Finding) -> str:
    """A verdict's subject, and "(previous run)" for a story only the restarted container's
    log tells: the running container is not (yet) failing that way."""
    said = "(previous run)" in (f.subject or "")  # memory-fragmentation's subject says it
    return _subject(f) + (" (previous run)" if previous_run_only(f) and not said else "")


_LIST_MARKER = re.compile(r"^(?:[-*+]|[0-9]{1,3}[.)]) +")  # "1. " before the step's first line


def _step_lines(verdict: Verdict) -> list[tuple[str, str]]:
    """The first Fix step in source order: ("prose", one line) and ("code", a line kept
    exactly, its indentation included)."""
    step = verdict.do_now
    if step is None:
        return []
    out: list[tuple[str, str]] = []
    for part in step.parts:
        if isinstance(part, CodeBlock):
            out += [("code", line) for line in part.code.splitlines()]
        else:
            for n, line in enumerate(part.lines):
                text = line.strip()
                if not out:
                    out.append(("prose", _LIST_MARKER.sub("", text, count=1)))
                elif n and out[-1][0] == "prose" and not _LIST_MARKER.match(text):
                    out[-1] = ("prose", f"{out[-1][1]} {text}")  # a wrapped line: one sentence
                else:
                    out.append(("prose", text))  # a nested item keeps its own line
    return out


class _Screen:
    """Prints lines wrapped to the terminal's width with a hanging indent; in a pipe (no
    width to fit) every line stays whole, so a grep finds what it looks for."""

    def __init__(self, console):
        from rich.markup import escape as rich_escape

        self.console = console
        self.width = console.width if console.is_terminal else None
        self._rich_escape = rich_escape

    def escape(self, text: object) -> str:
        return self._rich_escape(visible(text))

    def line(self, lead: str, text: str = "", hang: int | None = None, style: str = "") -> None:
        """`lead` (rich markup) then `text` (plain, escaped here), wrapped under `hang`."""
        from rich.text import Text

        lead_width = Text.from_markup(lead).cell_len
        hang = lead_width if hang is None else hang
        open_, close = (f"[{style}]", "[/]") if style else ("", "")
        if self.width is None or lead_width + len(text) <= self.width:
            self.console.print(f"{lead}{open_}{self.escape(text)}{close}", soft_wrap=True)
            return
        import textwrap

        rest = max(self.width - hang, 20)
        if self.width - lead_width < 20:  # a long lead (a check and its subject): text below it
            self.console.print(lead.rstrip(), soft_wrap=lead_width <= self.width)
            chunks = ["", *textwrap.wrap(text, rest, break_on_hyphens=False)]
        else:
            chunks = textwrap.wrap(text, self.width - lead_width, break_on_hyphens=False)
            chunks = chunks or [""]
            self.console.print(f"{lead}{open_}{self.escape(chunks[0])}{close}", soft_wrap=True)
        tail = textwrap.wrap(" ".join(chunks[1:]), rest, break_on_hyphens=False)
        for chunk in tail:
            self.console.print(f"{' ' * hang}{open_}{self.escape(chunk)}{close}", soft_wrap=True)

    def verbatim(self, lead: str, text: str) -> None:
        """A line that must not be wrapped or cut (a command to paste)."""
        self.console.print(f"{lead}{self.escape(text)}", soft_wrap=True)

    def evidence_limit(self, indent: int) -> int:
        return MAX_TERMINAL_TEXT if self.width is None else max(self.width - indent, 40)


def render_terminal(report: Report, console, verbose: bool = False) -> None:
    """Print the report with rich: the verdict first (root cause, what to do now, the line
    that proves it, the other independent problems, blind spots), then each story with what
    follows from it folded under its cause, then what was fine and what was not checked.

    Text that llmdoctor did not write (targets, log lines, wiki entries) is printed with its
    control characters escaped (see terminal_text).
    """
    screen = _Screen(console)
    escape = screen.escape
    entries = _entries(report)
    style = STYLE.get(report.status, "bold")
    screen.line(
        f"[{style}] {escape(headline(report))} [/]  ",
        f"{report.target}  ({_counts(report)})",
        hang=2,
    )
    _print_verdict(screen, report)
    fixes_shown: set[str] = set()
    for n, chapter in enumerate(chapters(report.findings, entries)):
        console.print()
        # the first story's first step is the verdict's "Do now": not printed twice
        _print_chapter(screen, chapter, entries, fixes_shown, lead=n == 0 and _has_verdict(chapter))
    from llmdoctor.timeline import view as timeline_view

    timeline_view.render_terminal(report, screen)
    _print_fine(screen, report, verbose)
    _print_not_checked(screen, report)


def _has_verdict(chapter: Chapter) -> bool:
    """Whether the verdict names this story (warning or worse; see verdict.verdicts)."""
    return chapter.severity.rank >= Severity.WARNING.rank


def _no_runbook_text(verdict: Verdict) -> str:
    """'Do now' when the verdict names no runbook: none covers it, or several are places to
    look and the evidence proves none (Finding.runbooks_unproven)."""
    books = verdict.root.runbooks
    if verdict.root.runbooks_unproven and len(books) == 1:
        return (
            f"no cause is proven: rule out what {books[0]} covers (llmdoctor wiki show {books[0]})"
        )
    if verdict.root.runbooks_unproven and books:
        listed = ", ".join(books)
        return f"no cause is proven: rule out, in order, what the runbooks below cover ({listed})"
    return "no runbook covers it: read the evidence below"


def _print_verdict(screen: _Screen, report: Report) -> None:
    found = verdicts(report)
    blind = blind_spots(report)
    if not found and not blind:
        return
    screen.console.print()
    for n, v in enumerate(found):
        if n == 0:
            book = f" (runbook {v.runbook})" if v.runbook else ""
            screen.line("[bold]Root cause[/]  ", f"{v.title}{_verdict_subject(v.root)}{book}")
            step = _step_lines(v)
            for m, (kind, text) in enumerate(step):
                label = "[bold]Do now[/]      " if m == 0 else "            "
                if kind == "code":
                    screen.verbatim(label + "    ", text)
                else:
                    screen.line(label, text)
            if not step and v.runbook is None:
                screen.line("[bold]Do now[/]      ", _no_runbook_text(v))
            if v.proof is not None:  # wrapped, not cut to one line: it is the proof
                text = _evidence_line(v.proof, MAX_PROOF_TEXT)
                screen.line("[bold]Evidence[/]    ", text, style="dim")
            continue
        label = "[bold]Also[/]        " if n == 1 else "            "
        book = f" (runbook {v.runbook})" if v.runbook else ""
        sev = str(v.severity).upper()
        screen.line(label, f"{sev}: {v.title}{_verdict_subject(v.root)}{book}")
    for n, why in enumerate(blind):
        label = "[bold]Blind spot[/]  " if n == 0 else "            "
        screen.line(label, why, style="yellow")


def _print_chapter(
    screen: _Screen, chapter: Chapter, entries: dict, fixes_shown: set, lead: bool
) -> None:
    f = chapter.root
    escape = screen.escape
    sev = str(chapter.severity)
    screen.line(
        f"[{STYLE[sev]}] {sev.upper()} [/] [bold]{escape(f.check)}{escape(_subject(f))}[/]: ",
        f.summary,
        hang=4,
    )
    limit = screen.evidence_limit(6)
    for item in f.evidence[:MAX_EVIDENCE]:
        screen.verbatim("    [dim]│[/] ", _evidence_line(item, limit))
    if len(f.evidence) > MAX_EVIDENCE:
        screen.console.print(f"    [dim]│ … {len(f.evidence) - MAX_EVIDENCE} more (see --json)[/]")
    if chapter.runbook is not None:
        _print_runbook(screen, chapter, entries, fixes_shown, lead)
    for rid in f.runbooks:  # what the cause leads to: named, its Fix one command away
        if rid != chapter.runbook:
            entry = entries.get(rid)
            title = f"{entry.title}: " if entry is not None else ""
            screen.line(
                f"    [cyan]runbook[/] [bold]{escape(rid)}[/]: ",
                f"{title}llmdoctor wiki show {rid}",
                hang=6,
            )
    if chapter.folded:
        screen.console.print(f"    [bold]Follows from it[/] [dim]({len(chapter.folded)})[/]")
    for folded in chapter.folded:
        why = ", ".join(dict.fromkeys(c.check for c in folded.explained_by))
        screen.line(
            f"    ↳ [dim]{escape(str(folded.severity))}[/] "
            f"[bold]{escape(folded.check)}{escape(_subject(folded))}[/]: ",
            f"{folded.summary} (explained by {why})",
            hang=6,
        )
        for item in folded.evidence[:2]:
            screen.verbatim("        [dim]│[/] ", _evidence_line(item, screen.evidence_limit(10)))
        books = [r for r in folded.runbooks if r not in fixes_shown]
        if books:
            screen.line(
                "        [dim]more:[/] ", "; ".join(f"llmdoctor wiki show {r}" for r in books)
            )


def _print_runbook(
    screen: _Screen, chapter: Chapter, entries: dict, fixes_shown: set, lead: bool
) -> None:
    """The story's runbook: its title, and its Fix's leading whole steps (after the first
    when the verdict showed that one as "Do now")."""
    escape = screen.escape
    rid = chapter.runbook or ""
    entry = entries.get(rid)
    if entry is None:
        screen.console.print(f"    [cyan]runbook[/] {escape(rid)} [dim](not in the wiki)[/]")
        return
    screen.line(f"    [cyan]runbook[/] [bold]{escape(rid)}[/]: ", entry.title, hang=6)
    if url := page_url(rid):
        screen.verbatim("      [dim]page:[/] ", url)
    if rid in fixes_shown:
        screen.console.print("      [dim](its Fix is shown above)[/]")
        return
    if chapter.severity.rank < Severity.WARNING.rank:
        # an info (rejections in the past, nothing now) names its runbook, it prescribes nothing
        screen.console.print(f"      [dim]more: llmdoctor wiki show {escape(rid)}[/]")
        return
    fixes_shown.add(rid)
    steps, rest = shown_steps(chapter, entry)
    if lead and steps:
        steps = steps[1:]
        screen.console.print("      [dim]Fix: the first step is 'Do now' above[/]")
    # the prose re-flowed to the terminal (11 columns of lead), code as written
    width = None if screen.width is None else screen.width - 11
    for n, line in enumerate(display_lines(steps, width)):
        label = "[dim]Fix: [/]" if n == 0 and not lead else "     "
        screen.verbatim(f"      {label}", line)
    more = f"more (steps {rest})" if rest else "more"
    screen.console.print(f"      [dim]{more}: llmdoctor wiki show {escape(rid)}[/]")


def _print_fine(screen: _Screen, report: Report, verbose: bool) -> None:
    """One counted line for what was fine (each with -v); a check mark is never printed
    beside a subject another finding contradicts: that one says "cannot tell"."""
    escape = screen.escape
    fine = [f for f in report.findings if f.severity is Severity.OK and not f.contradicted_by]
    doubted = [f for f in report.findings if f.severity is Severity.OK and f.contradicted_by]
    if doubted:
        screen.console.print()
        screen.console.print("[bold]Cannot tell[/] [dim](a problem above contradicts it)[/]")
        for f in doubted:
            by = ", ".join(c.check for c in f.contradicted_by)
            screen.line(
                f"  [yellow]?[/] {escape(f.check)}{escape(_subject(f))}: ",
                f"said '{f.summary}', but {by} reports a problem there",
                hang=4,
            )
    if not fine:
        return
    screen.console.print()
    if not verbose:
        # a check that also reported a problem is named with its subject here ("vllm-health
        # fine" beside "vllm-health CRITICAL" reads as a contradiction); a repeated one counted
        flagged = {f.check for f in report.findings if f.severity is not Severity.OK}
        counts: dict[str, int] = {}
        for f in fine:
            name = f.check + (_subject(f) if f.check in flagged else "")
            counts[name] = counts.get(name, 0) + 1
        names = ", ".join(n + (f" (×{k})" if k > 1 else "") for n, k in counts.items())
        screen.line(
            f"[bold]Checked and fine[/] ({len(fine)}): ", f"{names} (-v shows each)", hang=2
        )
        return
    screen.console.print("[bold]Checked and fine[/]")
    for f in fine:
        screen.line(f"  [green]✓[/] {escape(f.check)}{escape(_subject(f))}: ", f.summary, hang=4)
        for item in f.evidence[:MAX_EVIDENCE]:
            screen.verbatim("      [dim]│[/] ", _evidence_line(item, screen.evidence_limit(8)))


def _print_not_checked(screen: _Screen, report: Report) -> None:
    """Every check that did not run, grouped by why (a skipped check is never called fine)."""
    escape = screen.escape
    if not (report.skipped or report.errors):
        return
    screen.console.print()
    screen.console.print("[bold]Not checked[/]")
    for reason, checks in group_skipped(report.skipped):
        screen.line("  [dim]-[/] ", f"{reason}: {checks}", hang=4)
    for e in report.errors:
        name = e.get("check") or f"collector {e.get('collector')}"
        screen.line(f"  [red]![/] {escape(name)}: ", e["message"], hang=4)


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


def _fence(lines: list[str]) -> str:
    """A code fence longer than any run of backticks in the lines, so none can close it."""
    longest = max((len(run) for line in lines for run in re.findall(r"`+", line)), default=0)
    return "`" * max(3, longest + 1)


def _markdown_evidence(items: list[dict[str, Any]], indent: str) -> list[str]:
    if not items:
        return []
    lines = [visible(_evidence_line(i)) for i in items[:MAX_EVIDENCE]]
    fence = _fence(lines)
    return ["", f"{indent}{fence}text", *[f"{indent}{line}" for line in lines], f"{indent}{fence}"]


def _inline_code(text: str) -> str:
    """Text as markdown inline code that no backtick inside it can close (log text carries
    `<`, `*`, `_` that would otherwise be read as markup)."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    tick = "`" * (longest + 1)
    return f"{tick} {text} {tick}" if longest else f"{tick}{text}{tick}"


def _markdown_verdict(report: Report) -> list[str]:
    v = visible
    out: list[str] = []
    for n, verdict in enumerate(verdicts(report)):
        book = f" (runbook `{v(verdict.runbook)}`)" if verdict.runbook else ""
        subject = v(_verdict_subject(verdict.root))
        if n > 0:
            label = "**Also:** " if n == 1 else ""
            sev = str(verdict.severity).upper()
            out.append(f"- {label}{sev}: {v(verdict.title)}{subject}{book}")
            continue
        out.append(f"- **Root cause:** {v(verdict.title)}{subject}{book}")
        step = _step_lines(verdict)
        if not step and verdict.runbook is None:
            out.append(f"- **Do now:** {v(_no_runbook_text(verdict))}")
        code: list[str] = []
        for m, (kind, text) in enumerate([*step, ("end", "")]):
            if kind == "code":
                code.append(text)
                continue
            if code:
                fence = _fence(code)
                out += ["", f"  {fence}", *[f"  {v(line)}" for line in code], f"  {fence}", ""]
                code = []
            if kind == "prose":
                out.append(f"- **Do now:** {v(text)}" if m == 0 else f"  {v(text)}")
        if verdict.proof is not None:
            out.append(f"- **Evidence:** {_inline_code(v(_evidence_line(verdict.proof)))}")
    for n, why in enumerate(blind_spots(report)):
        label = "**Blind spot:** " if n == 0 else ""
        out.append(f"- {label}{v(why)}")
    return [*out, ""] if out else []


def _markdown_steps(steps: list) -> list[str]:
    """Whole Fix steps as markdown lines: prose as written, code in fences byte for byte."""
    out: list[str] = []
    for step in steps:
        for part in step.parts:
            if isinstance(part, CodeBlock):
                code = part.code.splitlines()
                fence = _fence(code)
                out += [f"{fence}{part.info}", *code, fence]
            else:
                out += list(part.lines)
    return out


def _markdown_chapter(
    chapter: Chapter, entries: dict, fixes_shown: set[str], lead: bool
) -> list[str]:
    v = visible
    f = chapter.root
    sev = str(chapter.severity).upper()
    out = [f"- **{sev}** `{v(f.check)}`{v(_subject(f))}: {v(f.summary)}"]
    out += _markdown_evidence(f.evidence, "  ")
    books = [chapter.runbook] if chapter.runbook else []
    books += [r for r in f.runbooks if r not in books]
    for rid in books:
        entry = entries.get(rid)
        title = f": {v(entry.title)}" if entry else ""
        url = page_url(rid)
        out.append(
            f"  - runbook [`{v(rid)}`]({url}){title}" if url else f"  - runbook `{v(rid)}`{title}"
        )
        if entry and rid == chapter.runbook and rid not in fixes_shown:
            fixes_shown.add(rid)
            steps, rest = shown_steps(chapter, entry)
            if lead and steps:  # the first step is the verdict's "Do now"
                steps = steps[1:]
                out.append("    > (the first step is **Do now** above)")
            out += [f"    > {v(line)}" for line in _markdown_steps(steps)]
            if rest:
                out.append(f"    > (steps {rest}: `llmdoctor wiki show {v(rid)}`)")
    if chapter.folded:
        out.append(f"  - follows from it ({len(chapter.folded)}):")
    for folded in chapter.folded:
        why = ", ".join(dict.fromkeys(f"`{v(c.check)}`" for c in folded.explained_by))
        out.append(
            f"    - {v(str(folded.severity))} `{v(folded.check)}`{v(_subject(folded))}: "
            f"{v(folded.summary)} (explained by {why})"
        )
        out += _markdown_evidence(folded.evidence, "      ")
    out.append("")
    return out


def render_markdown(report: Report, charts: list[tuple[str, str]] | None = None) -> str:
    """Markdown for pasting into an incident document or a retro: the verdict first, then each
    story with what follows from it folded under its cause (`charts`: SVGs to link; control
    characters in what llmdoctor did not write are escaped, as on the terminal)."""
    from llmdoctor.timeline import view as timeline_view

    entries = _entries(report)
    v = visible
    out = [
        f"## llmdoctor: {v(report.target)}",
        "",
        f"**Status: {headline(report)}** ({_counts(report)})",
        "",
    ]
    out += _markdown_verdict(report)
    stories = chapters(report.findings, entries)
    fixes_shown: set[str] = set()
    if stories:
        out += ["### Findings", ""]
        for n, chapter in enumerate(stories):
            lead = n == 0 and _has_verdict(chapter)
            out += _markdown_chapter(chapter, entries, fixes_shown, lead=lead)
    out += timeline_view.render_markdown(report, charts)
    fine = [f for f in report.findings if f.severity is Severity.OK and not f.contradicted_by]
    doubted = [f for f in report.findings if f.severity is Severity.OK and f.contradicted_by]
    if doubted:
        out += ["### Cannot tell (a problem above contradicts it)", ""]
        for f in doubted:
            by = ", ".join(f"`{v(c.check)}`" for c in f.contradicted_by)
            out.append(
                f"- `{v(f.check)}`{v(_subject(f))}: said '{v(f.summary)}', but {by} "
                "reports a problem there"
            )
        out.append("")
    if fine:
        out += ["### Checked and fine", ""]
        out += [f"- `{v(f.check)}`{v(_subject(f))}: {v(f.summary)}" for f in fine]
        out.append("")
    if report.skipped or report.errors:
        out += ["### Not checked", ""]
        out += [f"- {v(reason)}: {v(checks)}" for reason, checks in group_skipped(report.skipped)]
        for e in report.errors:
            name = e.get("check") or f"collector {e.get('collector')}"
            out.append(f"- `{v(name)}`: error: {v(e['message'])}")
        out.append("")
    return "\n".join(out)
