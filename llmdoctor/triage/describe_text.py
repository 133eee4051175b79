"""What a pasted `kubectl describe pod` says of the container a line belongs to.

A container's block in describe's text is indented fields under the container's name, the
details of a state one level deeper:

      vllm:
        State:          Running
          Started:      Mon, 31 Aug 2020 16:33:09 -0500
        Last State:     Terminated
          Reason:       OOMKilled
          Exit Code:    137
        Ready:          True
        Restart Count:  1
        Readiness:      http-get http://:8000/health delay=0s timeout=1s period=10s …

A kill told in `Last State` is the container's previous run; `Ready: True` in the same block,
where a readiness probe is set, says it was started again and its probe passes now (without a
probe, Ready is only "the process runs", true seconds into each turn of a crash loop).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

FIELD = re.compile(r"^( *)([A-Z][A-Za-z ]*):(?: +(.*))?$")
CONTAINER = re.compile(r"^( *)([a-z0-9]([-a-z0-9.]*[a-z0-9])?):\s*$")  # a DNS-1123 label
# a container block's `Ready: False`, or the Conditions table's `Ready  False` /
# `ContainersReady  False`: some part of the pod is not serving now
NOT_READY = re.compile(r"^\s*(Ready:\s+False|(Ready|ContainersReady)\s+False)\s*$")
STATE_DETAILS_WITHIN = 8  # a state's details (Reason, Message, Exit Code, Started, Finished …)
BLOCK_WITHIN = 60  # a container block's fields around its Last State


@dataclass(frozen=True)
class LastState:
    """A container's `Last State:` in a pasted describe: its name (None where the paste cut
    it), the input lines of the Last State and its details, the block's `Ready: True` line
    (None: not Ready, or not said) and whether the block sets a readiness probe."""

    container: str | None
    lines: range
    ready: tuple[int, str] | None
    readiness_probe: bool
    restarts: int | None = None  # the block's `Restart Count`, where the paste gives it


def last_state_of(lines: Sequence[tuple[int, str]], line: int) -> LastState | None:
    """The Last State whose details hold input line `line`, or None: the line is no detail of a
    Last State (a current `State: Terminated`, an Events row, a log line)."""
    at = next((i for i, (n, _) in enumerate(lines) if n == line), None)
    if at is None or (detail := FIELD.match(lines[at][1])) is None:
        return None
    depth = len(detail.group(1))
    head = None
    for i in range(at - 1, max(at - STATE_DETAILS_WITHIN, -1), -1):
        field = FIELD.match(lines[i][1])
        if field is None:
            return None
        if len(field.group(1)) < depth:
            head = i
            break
    if head is None or (header := FIELD.match(lines[head][1])).group(2) != "Last State":
        return None
    level = len(header.group(1))
    start, end = _block(lines, head, level)
    details_end = head
    while details_end + 1 < end and _indent(lines[details_end + 1][1]) > level:
        details_end += 1
    ready, probe, restarts = None, False, None
    for i in range(start, end):
        field = FIELD.match(lines[i][1])
        if field is None or len(field.group(1)) != level:
            continue
        value = (field.group(3) or "").strip()
        if field.group(2) == "Ready" and value == "True":
            ready = lines[i]
        if field.group(2) == "Restart Count" and value.isdigit():
            restarts = int(value)
        probe = probe or field.group(2) == "Readiness"
    name = CONTAINER.match(lines[start - 1][1]) if start > 0 else None
    return LastState(
        name.group(2) if name is not None else None,
        range(lines[head][0], lines[details_end][0] + 1),
        ready,
        probe,
        restarts,
    )


def _indent(text: str) -> int:
    return len(text) - len(text.lstrip(" "))


def _block(lines: Sequence[tuple[int, str]], head: int, level: int) -> tuple[int, int]:
    """The container block around line index `head` (a field at indent `level`): from its first
    field to the line after its last, bounded by a shallower line, a blank one or another
    block's `State:` / `Last State:`."""

    def inside(i: int) -> bool:
        return bool(lines[i][1].strip()) and _indent(lines[i][1]) >= level

    start = head
    while start > 0 and head - start < BLOCK_WITHIN and inside(start - 1):
        field = FIELD.match(lines[start - 1][1])
        if field and len(field.group(1)) == level and field.group(2) == "Last State":
            break
        start -= 1
    end = head + 1
    while end < len(lines) and end - head < BLOCK_WITHIN and inside(end):
        field = FIELD.match(lines[end][1])
        if field and len(field.group(1)) == level and field.group(2) in ("State", "Last State"):
            break  # another container's block (its header cut from the paste)
        end += 1
    return start, end


def pod_not_ready(lines: Sequence[tuple[int, str]]) -> bool:
    """Whether a pasted describe says a container, or the pod, is not Ready now."""
    return any(NOT_READY.match(text) for _, text in lines)
