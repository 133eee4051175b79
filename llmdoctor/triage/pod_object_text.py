"""What a pasted pod object (`kubectl get pod -o yaml` or `-o json`) says of the container a
line belongs to: the same `LastState` a pasted describe gives (describe_text.py).

    spec:
      containers:
      - name: vllm
        readinessProbe: {httpGet: {path: /health, port: 8000}}
    status:
      containerStatuses:
      - name: vllm
        lastState:
          terminated: {exitCode: 137, reason: OOMKilled}
        ready: true
        restartCount: 1

The paste is composed, not constructed (PyYAML's node tree keeps each value's place, builds no
object and expands no alias; a node an alias shares is read once); a List of pods (`kubectl get
pods -o yaml`) is read pod by pod. A pod is past its kill only when all of it says so: every
container ready, no condition False, each restart count a plain number.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator, Sequence
from itertools import accumulate

import yaml

from llmdoctor.triage.describe_text import LastState

MAX_OBJECT_LINES = 5000  # a pasted pod is a few hundred lines; beyond this it is no paste
MAX_OBJECTS = 1000  # pods and Lists read at most


def pod_object_last_states(lines: Sequence[tuple[int, str]]) -> list[LastState]:
    """Every container's `lastState` in a paste that is a pod object, with input line numbers
    (`lines`: (input line number, text) of each line read); [] when it is none. A state's
    `ready` is None unless its pod is whole and well now (`_well`)."""
    if not lines or len(lines) > MAX_OBJECT_LINES:
        return []
    text = "\n".join(t for _, t in lines)
    if "lastState" not in text:
        return []
    try:
        documents = list(yaml.compose_all(text, Loader=yaml.SafeLoader))
    except (yaml.YAMLError, RecursionError):
        return []
    # PyYAML also breaks lines at a lone CR, NEL, U+2028: a node's line is counted from its
    # offset in the text, in the paste's own lines (each ends at its length + its newline)
    ends = list(accumulate(len(t) + 1 for _, t in lines))

    def line_at(index: int) -> tuple[int, str]:
        return lines[min(bisect_right(ends, index), len(lines) - 1)]

    out: list[LastState] = []
    for pod in _pods(documents):
        out.extend(_last_states(pod, line_at))
    return out


def _pods(documents: list) -> Iterator[yaml.MappingNode]:
    """The pods of the documents, a List's items among them, each node read once."""
    seen: set[int] = set()
    pending = list(reversed(documents))
    while pending and len(seen) < MAX_OBJECTS:
        node = pending.pop()
        if not isinstance(node, yaml.MappingNode) or id(node) in seen:
            continue
        seen.add(id(node))
        items = _get(node, "items")
        if isinstance(items, yaml.SequenceNode):
            pending.extend(reversed(items.value))
        elif _get(_get(node, "status"), "containerStatuses") is not None:
            yield node


def _last_states(pod: yaml.MappingNode, line_at) -> list[LastState]:
    probes = {
        _scalar(_get(c, "name")): _get(c, "readinessProbe") is not None
        for key in ("containers", "initContainers")
        for c in _items(_get(_get(pod, "spec"), key))
    }
    status = _get(pod, "status")
    well = _well(status)
    out = []
    for key in ("containerStatuses", "initContainerStatuses"):
        for cs in _items(_get(status, key)):
            last_key, last = _entry(cs, "lastState")
            if last_key is None or not isinstance(last, yaml.MappingNode) or not last.value:
                continue
            name = _scalar(_get(cs, "name"))
            ready_key, ready = _entry(cs, "ready")
            restarts = _count(_get(cs, "restartCount"))
            start = line_at(last_key.start_mark.index)[0]
            end = line_at(max(_last_mark(last).index - 1, 0))[0]
            ready_line = None
            if well and restarts is not None and ready_key is not None and _scalar(ready) == "true":
                ready_line = line_at(ready_key.start_mark.index)
            out.append(
                LastState(
                    name,
                    range(start, max(end, start) + 1),
                    ready_line,
                    probes.get(name, False),
                    restarts,
                )
            )
    return out


def _last_mark(node):
    """Where a node's last value ends (a block collection's own end mark stands on the line
    of what follows it)."""
    while isinstance(node, yaml.CollectionNode) and not node.flow_style and node.value:
        node = node.value[-1][1] if isinstance(node, yaml.MappingNode) else node.value[-1]
    return node.end_mark


def _well(status) -> bool:
    """Whether nothing in the pod's status says it fails now: every container ready, no
    condition False (Ready, ContainersReady)."""
    if any(
        _scalar(_get(cs, "ready")) != "true" for cs in _items(_get(status, "containerStatuses"))
    ):
        return False
    return not any(
        _scalar(_get(c, "status")) == "False"
        and _scalar(_get(c, "type")) in ("Ready", "ContainersReady")
        for c in _items(_get(status, "conditions"))
    )


def _count(node) -> int | None:
    """A restart count written as a plain number (kubectl writes no other), else None."""
    text = _scalar(node)
    return int(text) if text is not None and text.isascii() and text.isdecimal() else None


def _entry(node, key: str) -> tuple[yaml.Node | None, yaml.Node | None]:
    """The key and value nodes of `key` in a mapping (its last, as YAML, JSON and Go read a
    repeated key)."""
    found: tuple[yaml.Node | None, yaml.Node | None] = (None, None)
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            if isinstance(k, yaml.ScalarNode) and k.value == key:
                found = (k, v)
    return found


def _get(node, key: str) -> yaml.Node | None:
    return _entry(node, key)[1]


def _items(node) -> list:
    return node.value if isinstance(node, yaml.SequenceNode) else []


def _scalar(node) -> str | None:
    return str(node.value) if isinstance(node, yaml.ScalarNode) else None
