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

The paste is composed, not constructed (PyYAML's node tree keeps each value's line, builds no
object and expands no alias); a List of pods (`kubectl get pods -o yaml`) is read pod by pod.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import yaml

from llmdoctor.triage.describe_text import LastState

MAX_OBJECT_LINES = 5000  # a pasted pod is a few hundred lines; beyond this it is no paste


def pod_object_last_states(lines: Sequence[tuple[int, str]]) -> list[LastState]:
    """Every container's `lastState` in a paste that is a pod object, with input line numbers
    (`lines`: (input line number, text) of each line read); [] when it is none."""
    if not lines or len(lines) > MAX_OBJECT_LINES:
        return []
    text = "\n".join(t for _, t in lines)
    if "lastState" not in text:
        return []
    try:
        documents = list(yaml.compose_all(text, Loader=yaml.SafeLoader))
    except yaml.YAMLError:
        return []
    out = []
    for document in documents:
        for pod in _pods(document):
            out.extend(_last_states(pod, lines))
    return out


def _pods(node) -> Iterator[yaml.MappingNode]:
    if not isinstance(node, yaml.MappingNode):
        return
    if _scalar(_get(node, "kind")) == "List" or isinstance(_get(node, "items"), yaml.SequenceNode):
        items = _get(node, "items")
        for item in items.value if isinstance(items, yaml.SequenceNode) else []:
            yield from _pods(item)
    elif _get(_get(node, "status"), "containerStatuses") is not None:
        yield node


def _last_states(pod: yaml.MappingNode, lines: Sequence[tuple[int, str]]) -> list[LastState]:
    probes = {
        _scalar(_get(c, "name")): _get(c, "readinessProbe") is not None
        for key in ("containers", "initContainers")
        for c in _items(_get(_get(pod, "spec"), key))
    }
    status = _get(pod, "status")
    out = []
    for key in ("containerStatuses", "initContainerStatuses"):
        for cs in _items(_get(status, key)):
            last = _get(cs, "lastState")
            if not isinstance(last, yaml.MappingNode) or not last.value:
                continue
            name = _scalar(_get(cs, "name"))
            ready_key, ready = _entry(cs, "ready")
            restarts = _scalar(_get(cs, "restartCount"))
            out.append(
                LastState(
                    name,
                    range(_number(lines, last.start_mark.line), _end_number(lines, last)),
                    (
                        (
                            _number(lines, ready_key.start_mark.line),
                            lines[ready_key.start_mark.line][1],
                        )
                        if ready_key is not None and _scalar(ready) == "true"
                        else None
                    ),
                    probes.get(name, False),
                    int(restarts) if restarts is not None and restarts.isdigit() else None,
                )
            )
    return out


def _entry(node, key: str) -> tuple[yaml.Node | None, yaml.Node | None]:
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            if isinstance(k, yaml.ScalarNode) and k.value == key:
                return k, v
    return None, None


def _get(node, key: str) -> yaml.Node | None:
    return _entry(node, key)[1]


def _items(node) -> list:
    return node.value if isinstance(node, yaml.SequenceNode) else []


def _scalar(node) -> str | None:
    return str(node.value) if isinstance(node, yaml.ScalarNode) else None


def _number(lines: Sequence[tuple[int, str]], index: int) -> int:
    return lines[min(index, len(lines) - 1)][0]


def _end_number(lines: Sequence[tuple[int, str]], node: yaml.Node) -> int:
    """The input line number just past the node's last line (its end mark stands on the line
    after a block value, on the same line after a flow one)."""
    end = node.end_mark
    last = end.line - 1 if end.column == 0 and end.line > node.start_mark.line else end.line
    return _number(lines, last) + 1
