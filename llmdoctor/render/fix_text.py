"""A runbook's Fix section as whole steps, for the reports: each step keeps its prose and its
code blocks (indentation included), so what is printed can be pasted as it is.

A step is one item of a top-level list, or one paragraph outside a list together with the code
block that follows it (an introducing line, then the command). Example (runbooks/gsp-timeout.md)::

    1. Reset the GPU (drains it first):
       ```
       nvidia-smi -r -i 0
       ```
    2. Then restart the pod.

gives two steps; the first has the prose "1. Reset the GPU (drains it first):" and the code
block "nvidia-smi -r -i 0\\n".
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache

from llmdoctor.wiki.fix_params import fill, fills, is_list_marker, step_tag

FENCES = ("```", "~~~")
MAX_FIX_LINES = 8


@dataclass(frozen=True)
class CodeBlock:
    """A fenced block exactly as its source holds it, less the list item's indentation."""

    info: str  # the fence's language ("yaml", "bash", or "")
    code: str  # the lines between the fences, each ending in "\n"


@dataclass(frozen=True)
class Prose:
    """Lines of text: the first starts with the list marker ("1. ", "- ") when there is one."""

    lines: tuple[str, ...]


@dataclass(frozen=True)
class FixStep:
    """One step of a Fix: prose and code blocks in source order; shown whole or not at all.
    `filled`: a value from this incident's evidence was put into it (a command to run now)."""

    parts: tuple[Prose | CodeBlock, ...]
    filled: bool = False
    applies_to: str | None = None  # "pod" or "node": the step acts only on that (`[pod] …`)

    @property
    def code_blocks(self) -> list[CodeBlock]:
        return [p for p in self.parts if isinstance(p, CodeBlock)]

    @property
    def text(self) -> str:
        """The prose on one line, list marker dropped (for a one-line "what to do now")."""
        words = " ".join(
            line.strip() for p in self.parts if isinstance(p, Prose) for line in p.lines
        )
        return _drop_marker(words)

    @property
    def number(self) -> int | None:
        """The step's number in its Fix (`5.` → 5); None for a bullet or unnumbered step."""
        first = next((p.lines[0] for p in self.parts if isinstance(p, Prose) and p.lines), "")
        head = first.lstrip().partition(" ")[0]
        return int(head[:-1]) if is_list_marker(head) and head[:-1].isdigit() else None

    def lines(self, code_indent: str = "    ") -> list[str]:
        """The step as display lines: prose as written, code with `code_indent` before each
        line and its own indentation kept."""
        out: list[str] = []
        for part in self.parts:
            if isinstance(part, Prose):
                out += list(part.lines)
            else:
                out += [code_indent + line if line else "" for line in part.code.splitlines()]
        return out


# the bundle folder a log line was read from, and what it is about (engine/fact_keys.py)
LOG_FOLDER_KINDS = {"node": "node", "logs": "pod"}


def _subject_tag(prose: list[str]) -> str | None:
    """The `[pod]`/`[node]` tag just after a step's list marker: the kind of subject the step
    acts on. The tag stays in the text: where a report shows the step, the reader sees it."""
    tag = step_tag(prose[0]) if prose else None
    return tag[0] if tag and tag[1] else None


def _drop_marker(text: str) -> str:
    head, sep, rest = text.partition(" ")
    return rest if sep and is_list_marker(head) else text


@lru_cache(maxsize=1)
def _block_parser():
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").disable(["inline", "text_join"])


def _step_from_lines(lines: list[str], start: int, end: int, fences: list) -> FixStep:
    """Source lines [start, end) as prose parts around the fence tokens that lie inside."""
    parts: list[Prose | CodeBlock] = []
    prose: list[str] = []
    cursor = start
    kind = None
    for tok in fences:
        f_start, f_end = tok.map
        prose += [line.rstrip() for line in lines[cursor:f_start] if line.strip()]
        if prose:
            if not parts:
                kind = _subject_tag(prose)
            parts.append(Prose(tuple(prose)))
            prose = []
        parts.append(CodeBlock(info=tok.info.strip(), code=tok.content))
        cursor = f_end
    prose += [line.rstrip() for line in lines[cursor:end] if line.strip()]
    if prose:
        if not parts:
            kind = _subject_tag(prose)
        parts.append(Prose(tuple(prose)))
    return FixStep(tuple(parts), applies_to=kind)


def steps_of(fix: str) -> list[FixStep]:
    """The Fix section's text as steps, in order (see the module docstring); read back from
    the cache folder when an earlier run worked them out (markdown-it costs ~35 ms to load)."""
    from llmdoctor.wiki.derived_cache import kept_values

    (kept,) = kept_values(
        "fix-steps",
        [fix],
        lambda fixes: [tuple(map(_kept_step, _parsed_steps(f))) for f in fixes],
        _deriving_files(),
        _is_kept_steps,
    )
    return [_step_from_kept(step) for step in kept]


@lru_cache(maxsize=1)
def _deriving_files() -> list[str | None]:
    """The files of the code that turns a Fix into steps (markdown-it found, not loaded)."""
    from importlib.util import find_spec

    parser = find_spec("markdown_it")
    return [__file__, sys.modules[step_tag.__module__].__file__, parser.origin if parser else None]


def _is_kept_steps(value: object) -> bool:
    """Whether a value read back has the shape `_kept_step` gives, for every step."""

    def part(p: object) -> bool:
        if not isinstance(p, tuple) or not p:
            return False
        if p[0] == "p":
            return len(p) == 2 and isinstance(p[1], tuple) and all(isinstance(x, str) for x in p[1])
        return p[0] == "c" and len(p) == 3 and isinstance(p[1], str) and isinstance(p[2], str)

    return isinstance(value, tuple) and all(
        isinstance(step, tuple)
        and len(step) == 2
        and (step[0] is None or isinstance(step[0], str))
        and isinstance(step[1], tuple)
        and all(map(part, step[1]))
        for step in value
    )


def _kept_step(step: FixStep) -> tuple:
    """A parsed step as marshal writes it: (applies_to, ("p", lines) or ("c", info, code)...)."""
    parts = tuple(
        ("p", part.lines) if isinstance(part, Prose) else ("c", part.info, part.code)
        for part in step.parts
    )
    return (step.applies_to, parts)


def _step_from_kept(kept: tuple) -> FixStep:
    applies_to, parts = kept
    return FixStep(
        tuple(Prose(tuple(p[1])) if p[0] == "p" else CodeBlock(p[1], p[2]) for p in parts),
        applies_to=applies_to,
    )


def _parsed_steps(fix: str) -> list[FixStep]:
    tokens = _block_parser().parse(fix)
    lines = fix.splitlines()
    spans: list[tuple[int, int, list]] = []  # (start, end, fence tokens inside)
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok.level == 0 and tok.type in ("bullet_list_open", "ordered_list_open"):
            close = tok.type.replace("_open", "_close")
            j = i + 1
            while not (tokens[j].type == close and tokens[j].level == 0):
                item = tokens[j]
                if item.type == "list_item_open" and item.level == 1 and item.map:
                    spans.append((item.map[0], item.map[1], []))
                elif item.type == "fence" and spans:
                    spans[-1][2].append(item)
                j += 1
            i = j + 1
            continue
        if tok.level == 0 and tok.map and not tok.type.endswith("_close"):
            if tok.type == "fence" and spans and spans[-1][1] == tok.map[0] and not spans[-1][2]:
                # a code block right after its introducing paragraph belongs to that step
                start, _, fences = spans.pop()
                spans.append((start, tok.map[1], [*fences, tok]))
            else:
                spans.append((tok.map[0], tok.map[1], [tok] if tok.type == "fence" else []))
        i += 1
    return [_step_from_lines(lines, start, end, fences) for start, end, fences in spans]


def _filled(step: FixStep, values: Mapping[str, object]) -> FixStep:
    parts: list[Prose | CodeBlock] = []
    filled = False
    for part in step.parts:
        texts = part.lines if isinstance(part, Prose) else (part.code,)
        filled = filled or any(fills(text, values) for text in texts)
        if isinstance(part, Prose):
            parts.append(Prose(tuple(fill(line, values) for line in part.lines)))
        else:
            parts.append(CodeBlock(part.info, fill(part.code, values)))
    return FixStep(tuple(parts), filled, step.applies_to)


def _subject_kind(finding) -> str | None:
    """The kind of subject ("pod", "node") the finding is about: its check's scope, or for a
    log line the log it was read from (node/kernel.log: the node; a container's log: the pod);
    None when that is not known."""
    from llmdoctor.engine.registry import check_spec
    from llmdoctor.engine.runbook_fit import SCOPE_KIND

    spec = check_spec(finding.check) if finding is not None else None
    kind = SCOPE_KIND.get(spec.scope) if spec is not None else None
    if kind is None and finding is not None:
        sources = {
            str(item.get("source") or "").split("/", 1)[0]
            for item in finding.evidence
            if isinstance(item, dict) and item.get("source")
        }
        kinds = {LOG_FOLDER_KINDS[s] for s in sources if s in LOG_FOLDER_KINDS}
        kind = kinds.pop() if len(kinds) == 1 else None
    return kind


def fix_steps(
    entry,
    finding=None,
    params: Mapping[str, object] | None = None,
    lines: Iterable[str] = (),
) -> list[FixStep]:
    """The steps of a runbook entry's Fix that act on the finding's kind of subject (a
    `[node]` step is left out under a pod's finding, a `[pod]` one under a node's), its
    parameters filled from the finding's values (`Finding.params`, then `params`) or shown as
    what they stand for; a step written for a wording that this incident's lines (`lines`, the
    finding's evidence) carry comes first (see for_lines)."""
    values = {**(getattr(finding, "params", None) or {}), **(params or {})}
    kind = _subject_kind(finding)
    steps = [
        _filled(step, values)
        for step in steps_of(entry.fix)
        if kind is None or step.applies_to in (None, kind)
    ]
    seen = [*lines, *evidence_texts(finding)]
    return for_lines(steps, seen) if seen else steps


def evidence_texts(finding) -> list[str]:
    """The lines a finding quotes as its evidence."""
    items = getattr(finding, "evidence", None) or []
    return [str(item.get("text") or "") for item in items if isinstance(item, dict)]


_CODE_SPAN = re.compile(r"`([^`]+)`")
MIN_WORDING = 10  # shorter spans (`/health`, `--tp`) are names and flags, not an error's words


def step_wordings(step: FixStep) -> list[str]:
    """The wordings a step is written for: the code spans of a lead that opens with one and ends
    at the step's first colon (`` `invalid device ordinal`: make the GPUs asked for… ``); a
    setting (`NAME=1`) or a flag (`--x`) is no wording. A subject tag before the lead
    (`[node] `…`: `) is passed over."""
    text = step.text
    if step.applies_to and text.startswith(f"[{step.applies_to}] "):
        text = text[len(step.applies_to) + 3 :]
    if not text.startswith("`"):
        return []
    inside, end = False, len(text)
    for i, char in enumerate(text):
        if char == "`":
            inside = not inside
        elif char == ":" and not inside and text[i + 1 : i + 2] in (" ", ""):
            end = i
            break
    return [
        span
        for span in _CODE_SPAN.findall(text[:end])
        if len(span) >= MIN_WORDING and "=" not in span and not span.startswith("-")
    ]


def _names(wording: str, line: str) -> bool:
    """Whether `line` carries the wording, its `…` standing for any text between the parts."""
    at = 0
    for part in (p.strip() for p in wording.split("…")):
        found = line.find(part, at)
        if found < 0:
            return False
        at = found + len(part)
    return True


def for_lines(steps: list[FixStep], lines: Iterable[str]) -> list[FixStep]:
    """The steps with those written for a wording one of `lines` carries first, each group in
    the Fix's order: the step for this incident's own error is the one to do now (an FP8 line's
    step before the bf16 one above it in the same Fix). Their numbers stay the Fix's own."""
    lines = [line for line in lines if line]
    ahead = [
        n
        for n, step in enumerate(steps)
        if any(_names(w, line) for w in step_wordings(step) for line in lines)
    ]
    return [steps[n] for n in ahead] + [s for n, s in enumerate(steps) if n not in ahead]


def first_step(entry, finding=None, params: Mapping[str, object] | None = None) -> FixStep | None:
    """The Fix's first step, filled: what to do now, for the verdict block."""
    steps = fix_steps(entry, finding, params)
    return steps[0] if steps else None


def leading_steps(steps: list[FixStep], max_lines: int = MAX_FIX_LINES) -> list[FixStep]:
    """The steps a report shows, in order and whole, never a step cut before its command
    (`wiki show ID` has the rest): the first step and every step a value from the evidence
    was filled into (that value is this incident's answer), whatever their length; then the
    steps after the first, in order, while the lines stay within `max_lines`."""
    kept = {n for n, step in enumerate(steps) if n == 0 or step.filled}
    used = sum(len(steps[n].lines()) for n in kept)
    for n, step in enumerate(steps):
        if n in kept:
            continue
        size = len(step.lines())
        if used + size > max_lines:
            break
        kept.add(n)
        used += size
    return [step for n, step in enumerate(steps) if n in kept]


def shown_and_left_out(steps: list[FixStep]) -> tuple[list[FixStep], str]:
    """The leading steps a report or explain shows, and the numbers of those it leaves to
    `wiki show` ("3-7", or "")."""
    shown = leading_steps(steps)
    return shown, numbers_left_out(steps, shown)


def numbers_left_out(steps: list[FixStep], shown: list[FixStep]) -> str:
    """The numbers of the steps not shown, as ranges ("4-7", "2, 5-6"); "" when every step is
    shown or those left out are not numbered. A step that says "then 5-7" names steps the
    reader must know are not printed."""
    numbers = sorted(n for s in steps if s not in shown and (n := s.number) is not None)
    ranges: list[list[int]] = []
    for n in numbers:
        if ranges and n == ranges[-1][1] + 1:
            ranges[-1][1] = n
        else:
            ranges.append([n, n])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in ranges)


def terminal_lines(
    entry, finding=None, max_lines: int = MAX_FIX_LINES, params: Mapping | None = None
) -> list[str]:
    """The Fix's leading whole steps as plain lines; code indented 4 more, its own
    indentation kept."""
    return display_lines(leading_steps(fix_steps(entry, finding, params), max_lines), None)


def display_lines(steps: list[FixStep], width: int | None, code_indent: str = "    ") -> list[str]:
    """The steps as lines for a terminal `width` columns wide (None, a pipe: as written):
    prose re-flowed, each list item's continuation under its text (the runbook's own line
    breaks are for an editor, not this terminal); code exactly as written, never wrapped or
    cut, so a YAML block keeps its nesting and a command can be pasted."""
    if width is None:
        return [line for step in steps for line in step.lines(code_indent)]
    import textwrap

    out: list[str] = []
    for step in steps:
        for part in step.parts:
            if isinstance(part, CodeBlock):
                out += [code_indent + line if line else "" for line in part.code.splitlines()]
                continue
            for lead, words in _items(part.lines):
                wrapped = textwrap.wrap(
                    _spans_joined(words),
                    max(width, len(lead) + 20),
                    initial_indent=lead,
                    subsequent_indent=" " * len(lead),
                    break_on_hyphens=False,
                    break_long_words=False,
                )
                out += [line.replace(SPAN_SPACE, " ") for line in wrapped] or [lead.rstrip()]
    return out


SPAN_SPACE = "\x00"  # a space inside a `code span` while prose is wrapped: never a line break


def _spans_joined(text: str) -> str:
    """The text with the spaces of its `code spans` held together (a command is pasted
    whole: it may overrun the line, it is never split over two)."""
    pieces = text.split("`")
    for i in range(1, len(pieces) - 1, 2):  # inside a span (an unclosed one stays as it is)
        pieces[i] = pieces[i].replace(" ", SPAN_SPACE)
    return "`".join(pieces)


def _items(lines: tuple[str, ...]) -> list[tuple[str, str]]:
    """A prose part as its list items and paragraphs: (the lead, indentation and marker, that
    the text wraps under; the text on one line)."""
    items: list[tuple[str, list[str]]] = []
    for line in lines:
        stripped = line.lstrip()
        head = stripped.split(" ", 1)[0]
        if not stripped:
            items.append(("", []))
        elif not items or (is_list_marker(head) and " " in stripped):
            indent = line[: len(line) - len(stripped)]
            marker = head + " " if is_list_marker(head) and " " in stripped else ""
            items.append((indent + marker, [stripped[len(marker) :]]))
        else:
            items[-1][1].append(stripped)
    return [(lead, " ".join(words)) for lead, words in items if words or lead]


def shown_key(entry, finding=None) -> tuple:
    """What makes two printed Fixes the same: the entry and the text printed for it (a second
    finding whose values change that text gets its own Fix, not "shown above")."""
    return (entry.id, tuple(terminal_lines(entry, finding)))


def _fence_for(code: str) -> str:
    """A backtick fence longer than any run of backticks in the code, so none can close it."""
    longest = run = 0
    for char in code:
        run = run + 1 if char == "`" else 0
        longest = max(longest, run)
    return "`" * max(3, longest + 1)


def markdown_lines(entry, finding=None, max_lines: int = MAX_FIX_LINES) -> list[str]:
    """The Fix's leading whole steps as markdown (code in fences, byte for byte)."""
    out: list[str] = []
    for step in leading_steps(fix_steps(entry, finding), max_lines):
        for part in step.parts:
            if isinstance(part, Prose):
                out += list(part.lines)
            else:
                fence = _fence_for(part.code)
                out += [f"{fence}{part.info}", *part.code.splitlines(), fence]
    return out


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
        if stripped.startswith(FENCES):
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
