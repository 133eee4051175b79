"""What a pasted `kubectl describe pod` says of the container a line belongs to.

A container's block in describe's text is indented fields, the details of a state one level
deeper:

        State:          Running
          Started:      Mon, 31 Aug 2020 16:33:09 -0500
        Last State:     Terminated
          Reason:       OOMKilled
          Exit Code:    137
        Ready:          True
        Restart Count:  1

A kill told in `Last State` is the container's previous run; `Ready: True` in the same block says
it was started again and passes its readiness probe now.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

FIELD = re.compile(r"^( *)([A-Z][A-Za-z ]*):(?: +(.*))?$")
STATE_DETAILS_WITHIN = 8  # a state's details (Reason, Message, Exit Code, Started, Finished …)
BLOCK_WITHIN = 40  # a container block's fields after its Last State's details


def ready_after_last_state(lines: Sequence[tuple[int, str]], line: int) -> tuple[int, str] | None:
    """The `Ready: True` line of the container whose `Last State:` details hold input line
    `line`, or None: the line is no detail of a Last State (a current `State: Terminated`, an
    Events row, a log line), or the container is not Ready, or the block does not say."""
    at = next((i for i, (n, _) in enumerate(lines) if n == line), None)
    if at is None or (detail := FIELD.match(lines[at][1])) is None:
        return None
    depth = len(detail.group(1))
    header = None
    for i in range(at - 1, max(at - STATE_DETAILS_WITHIN, -1), -1):
        field = FIELD.match(lines[i][1])
        if field is None:
            return None
        if len(field.group(1)) < depth:
            header = field
            break
    if header is None or header.group(2) != "Last State":
        return None
    level = len(header.group(1))
    for n, text in lines[at + 1 : at + 1 + STATE_DETAILS_WITHIN + BLOCK_WITHIN]:
        indent = len(text) - len(text.lstrip(" "))
        if not text.strip() or indent < level:
            return None  # the block ended without a word of readiness
        if indent > level:
            continue  # a detail of the last state, or of a field after it (Limits' `memory:`)
        field = FIELD.match(text)
        if field is None or field.group(2) in ("State", "Last State"):
            return None  # no container field, or another container's block
        if field.group(2) == "Ready":
            return (n, text) if (field.group(3) or "").strip() == "True" else None
    return None
