"""Derived facts: pure parsers that turn raw documents into typed facts before checks run.

A parser module registers `@derived_fact("node/gpus", needs=("node/nvidia-smi.xml",))`; the
function receives the Facts and returns the value. Live collectors may set the derived key
directly (NVML gives GPUs without XML); then the derivation does not run. Derivations are tried
in registration order, so one may build on another.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass

from llmdoctor.engine.facts import FactMissing, Facts


@dataclass(frozen=True)
class Derivation:
    key: str
    needs: tuple[str, ...]
    fn: Callable[[Facts], object]


_DERIVATIONS: list[Derivation] = []


def derived_fact(key: str, *, needs: tuple[str, ...] = ()):
    def register(fn):
        if not any(d.key == key and d.fn.__qualname__ == fn.__qualname__ for d in _DERIVATIONS):
            _DERIVATIONS.append(Derivation(key, tuple(needs), fn))
        return fn

    return register


def load_parsers() -> None:
    import llmdoctor.parsers as package

    for info in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{package.__name__}.{info.name}")


def derive_all(facts: Facts) -> None:
    """Compute every derived fact whose inputs are present; record why the others are missing.

    Each parser runs under the run's --timeout (the fact settings/timeout), like a check.
    """
    from llmdoctor.engine.runner import DEFAULT_CHECK_TIMEOUT, CheckTimedOut, call_with_deadline

    timeout = facts.get("settings/timeout") or DEFAULT_CHECK_TIMEOUT
    load_parsers()
    for d in _DERIVATIONS:
        if facts.has(d.key):
            continue
        absent = [k for k in d.needs if not facts.has(k)]
        if absent:
            facts.mark_missing(d.key, facts.missing_reason(absent[0]))
            continue
        try:
            facts.set(d.key, call_with_deadline(d.fn, facts, timeout, d.key))
        except FactMissing as exc:
            facts.mark_missing(d.key, exc.reason)
        except CheckTimedOut as exc:  # a parser stuck on a hostile document
            reason = f"parsing {exc}"
            facts.mark_missing(d.key, reason)
            facts.collector_errors.setdefault(f"parse {d.key}", reason)
        except Exception as exc:  # a bad document must not stop the other derivations
            reason = f"could not parse: {type(exc).__name__}: {exc}"
            facts.mark_missing(d.key, reason)
            facts.collector_errors.setdefault(f"parse {d.key}", reason)
