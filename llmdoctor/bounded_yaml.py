"""YAML a team wrote, read within bounds.

PyYAML shares an aliased node instead of copying it, so `b: [*a, *a, ...]` nested nine deep
loads in microseconds into a value of billions of elements, and whatever walks that value
afterwards (a cache key, a JSON dump) never ends. `compose_bounded` counts every node as it
would be seen with the aliases expanded, and refuses the document past MAX_NODES or
MAX_DEPTH, before anything is constructed from it.
"""

from __future__ import annotations

from typing import Any

MAX_NODES = 20_000  # a large runbook's front matter has ~200
MAX_DEPTH = 32


def _too_large(node, what: str):
    import yaml

    error = yaml.YAMLError(what)
    error.problem = what
    error.problem_mark = node.start_mark
    return error


def _check_expanded_size(root, max_nodes: int, max_depth: int) -> None:
    import yaml

    seen = 0
    distinct: set[int] = set()  # a node met twice was reached through an alias
    stack = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        seen += 1
        distinct.add(id(node))
        if seen > max_nodes:
            if len(distinct) < seen:
                what = (
                    f"more than {max_nodes} values once its aliases are expanded (an alias bomb?)"
                )
            else:
                what = f"more than {max_nodes} values (a runbook's front matter has a few hundred)"
            raise _too_large(node, what)
        if depth > max_depth:
            raise _too_large(node, f"nested more than {max_depth} levels deep")
        if isinstance(node, yaml.SequenceNode):
            stack.extend((child, depth + 1) for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                stack.append((key, depth + 1))
                stack.append((value, depth + 1))


def _loader(text: str):
    import yaml

    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)(text)  # libyaml is ~10x faster


def _single_node(loader):
    import yaml

    try:
        return loader.get_single_node()
    except RecursionError:  # the pure-Python composer (no libyaml) recurses per level
        error = yaml.YAMLError("nested too deeply")
        error.problem, error.problem_mark = "nested too deeply", None
        raise error from None


def compose_bounded(text: str, *, max_nodes: int = MAX_NODES, max_depth: int = MAX_DEPTH):
    """The node tree of one YAML document (None when empty); yaml.YAMLError with a mark when
    it is invalid or too large."""
    loader = _loader(text)
    try:
        node = _single_node(loader)
    finally:
        loader.dispose()
    if node is not None:
        _check_expanded_size(node, max_nodes, max_depth)
    return node


def load_bounded(text: str, *, max_nodes: int = MAX_NODES, max_depth: int = MAX_DEPTH) -> Any:
    """yaml.safe_load, refusing (yaml.YAMLError) a document too large once expanded."""
    loader = _loader(text)
    try:
        node = _single_node(loader)
        if node is None:
            return None
        _check_expanded_size(node, max_nodes, max_depth)
        return loader.construct_document(node)
    finally:
        loader.dispose()
