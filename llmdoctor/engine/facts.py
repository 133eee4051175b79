"""Facts: the plain data that collectors produce and checks read.

Keys are the bundle paths of docs/architecture.md §6 (`k8s/pod.json`, `logs/vllm.previous.log`,
`vllm/metrics-0.txt`, `node/kernel.log` ...), plus a few non-file keys:

* `time/now` — unix seconds the facts describe (collection time; from the manifest for a bundle)
* `target` — the target string
* `wiki/entries` — the runbook entries, so signature checks stay pure
* `settings/<name>` — user options that checks use (thresholds, serving arguments given by flag)
* derived keys computed from the raw ones by parsers (see llmdoctor.engine.derive)

JSON files are parsed dicts/lists, XML and metrics are strings, logs are TextSource objects.
A key that could not be collected is recorded as missing with the reason, so a check that needs
it is reported as skipped *because* of that reason.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


class Missing:
    """A collector's way to say 'I looked for this key and here is why it is not there'."""

    def __init__(self, reason: str):
        self.reason = reason


class FactMissing(Exception):
    """Raised by Facts.require; the runner turns it into a 'skipped, because …' entry."""

    def __init__(self, key: str, reason: str):
        super().__init__(f"{key}: {reason}")
        self.key = key
        self.reason = reason


class Facts:
    """A mapping of fact keys to values, with the reason for every key that is missing."""

    def __init__(self, values: dict[str, Any] | None = None):
        self._values: dict[str, Any] = dict(values or {})
        self._missing: dict[str, str] = {}
        self.collector_errors: dict[str, str] = {}
        self.bundle = None  # an open Bundle whose files back some facts; closed after the checks

    def set(self, key: str, value: Any) -> None:
        self._values[key] = value
        self._missing.pop(key, None)

    def mark_missing(self, key: str, reason: str) -> None:
        if key not in self._values:
            self._missing.setdefault(key, reason)

    def has(self, key: str) -> bool:
        return key in self._values

    def get(self, key: str, default: Any = None) -> Any:
        return self._values.get(key, default)

    def require(self, key: str) -> Any:
        """The value of `key`, or FactMissing carrying why it is not there."""
        if key in self._values:
            return self._values[key]
        raise FactMissing(key, self.missing_reason(key))

    def missing_reason(self, key: str) -> str:
        if key in self._missing:
            return self._missing[key]
        for prefix, reason in self._missing.items():
            if prefix.endswith("/") and key.startswith(prefix):
                return reason
        return "not collected"

    def keys(self, prefix: str = "") -> list[str]:
        return sorted(k for k in self._values if k.startswith(prefix))

    def require_any(self, prefixes: Iterable[str]) -> list[str]:
        """Keys under any of the prefixes (a prefix may also be an exact key); FactMissing if none."""
        prefixes = list(prefixes)
        found = sorted({k for p in prefixes for k in self._values if k == p or k.startswith(p)})
        if found:
            return found
        reasons = sorted({self.missing_reason(p) for p in prefixes})
        raise FactMissing(" or ".join(prefixes), "; ".join(reasons))

    def missing(self) -> dict[str, str]:
        return dict(self._missing)

    def missing_under(self, prefix: str) -> dict[str, str]:
        """The keys under `prefix` that were wanted and not collected, with why (a previous
        container's log the API refused); not the prefix's own "nothing there" mark."""
        return {k: why for k, why in self._missing.items() if k.startswith(prefix) and k != prefix}

    def items(self):
        return self._values.items()
