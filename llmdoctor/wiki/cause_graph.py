"""Which runbook entry explains which: the cause graph, read from each entry's front matter.

    ---
    id: xid-fallen-off-bus
    explains: [engine-dead, nccl-failure, gpu-not-visible]
    ---

An edge cause -> effect says: when both are seen, the effect follows from the cause, so the
cause is the story and the effect is folded under it. Built-in entries and a team's entries
add edges the same way; explain, the checks, the report's folding and the site all read this
one graph (there is no second table in code).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping


class CauseGraph:
    """cause -> the entries it explains (direct edges), with lookups both ways."""

    def __init__(self, edges: Mapping[str, Iterable[str]]):
        self._effects: dict[str, frozenset[str]] = {
            cause: frozenset(e for e in effects if e != cause) for cause, effects in edges.items()
        }
        causes: dict[str, set[str]] = {}
        for cause, effects in self._effects.items():
            for effect in effects:
                causes.setdefault(effect, set()).add(cause)
        self._causes = {effect: frozenset(c) for effect, c in causes.items()}

    @classmethod
    def from_entries(cls, entries: Mapping) -> CauseGraph:
        """The graph of every entry's `explains:` list (a bare string counts as one id)."""
        edges: dict[str, set[str]] = {}
        for entry in entries.values():
            listed = (getattr(entry, "front_matter", None) or {}).get("explains") or []
            if isinstance(listed, str):
                listed = [listed]
            if isinstance(listed, list):
                edges.setdefault(entry.id, set()).update(str(e) for e in listed)
        return cls(edges)

    def without(self, cut: Iterable[tuple[str, str]]) -> CauseGraph:
        """The same graph less the direct edges `cut` (cause, effect)."""
        edges = {cause: set(effects) for cause, effects in self._effects.items()}
        for cause, effect in cut:
            edges.get(cause, set()).discard(effect)
        return CauseGraph(edges)

    def effects(self, cause: str) -> frozenset[str]:
        """The entries `cause` explains directly."""
        return self._effects.get(cause, frozenset())

    def causes(self, effect: str) -> frozenset[str]:
        """The entries that explain `effect` directly."""
        return self._causes.get(effect, frozenset())

    def explains(self, cause: str, effect: str) -> bool:
        """Whether `cause` explains `effect`, directly or through a chain of entries
        (xid-fallen-off-bus -> engine-dead -> gateway-timeout)."""
        seen: set[str] = set()
        todo = [cause]
        while todo:
            current = todo.pop()
            for nxt in self.effects(current):
                if nxt == effect:
                    return True
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return False

    def is_consequence(self, entry_id: str) -> bool:
        """Whether some entry explains this one (engine-dead, gateway-timeout, …)."""
        return bool(self.causes(entry_id))

    def consequences(self, ids: Iterable[str]) -> dict[str, list[str]]:
        """For each of `ids` that another of `ids` explains directly: the ids that explain it,
        in the order given."""
        ids = list(ids)
        found: dict[str, list[str]] = {}
        for effect in ids:
            by = [cause for cause in ids if cause != effect and effect in self.effects(cause)]
            if by:
                found[effect] = by
        return found

    def as_table(self) -> dict[str, set[str]]:
        """cause -> effects, for pages and JSON."""
        return {cause: set(effects) for cause, effects in self._effects.items() if effects}
