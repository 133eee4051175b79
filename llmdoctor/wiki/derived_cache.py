"""Values derived from text by pure functions, kept in the cache folder so that a command does not
work them out again on every run: what each signature is (usable or why not, digit-blind, its
plain text, its fixed-text weight) and each Fix section's steps.

Worked out, the ~800 built-in signatures and hints cost ~35 ms of each `explain` (an RE2 Set
compiled to find the unusable ones, each pattern read atom by atom) and the first Fix shown
~35 ms (markdown-it loaded and set up); read back, ~1 ms. A value depends on its text and on the
code that derives it: each kind's file is keyed by the files of that code (a new version works
them out again). Everything here can be deleted; a file that cannot be read or written only
costs the next run the work.
"""

from __future__ import annotations

import contextlib
import marshal
import os
from collections.abc import Callable

MAX_KEPT = 50_000  # values kept per kind over every wiki a machine uses; beyond it, this run's
# the values of each kind's file that this process read or wrote: path -> (version, values)
_held: dict[str, tuple[list, dict]] = {}


def code_version(sources: list[str | None]) -> list:
    """What identifies the code in these files (path, mtime, size of each)."""
    stamps: list = [1]
    for path in sources:
        try:
            st = os.stat(path) if path else None
        except OSError:
            st = None
        stamps += [path, st.st_mtime_ns, st.st_size] if st else [path]
    return stamps


def kept_values(
    kind: str,
    keys: list,
    work_out: Callable[[list], list],
    sources: list[str | None],
    valid: Callable[[object], bool],
) -> list:
    """`work_out(keys)`, each value read back when an earlier run kept it. `kind` names the
    file; `sources` are the files of the code that decides the values (every one of them: a
    file left out leaves the values stale when only it changes); `valid` says whether a value
    read back has the shape `work_out` gives (one that does not is worked out again). Values
    must be what marshal writes (tuples, str, int, bool, None); keys that are not str are
    worked out every time, never kept.
    """
    from llmdoctor.wiki.cache import cache_dir_path

    path = os.path.join(cache_dir_path(), f"{kind}.marshal")
    held = _held.get(path)
    if held is None:  # the code's files are read once a process: it does not change under it
        version = code_version(sources)
        held = _held[path] = (version, _read(path, version, valid))
    version = held[0]
    values = held[1]
    missing = [k for k in dict.fromkeys(k for k in keys if isinstance(k, str)) if k not in values]
    if missing:
        values.update(zip(missing, work_out(missing), strict=True))
        if len(values) > MAX_KEPT:
            values = {k: values[k] for k in keys if isinstance(k, str)}
            _held[path] = (version, values)
        _write(path, version, values)
    others = [k for k in keys if not isinstance(k, str)]
    worked = dict(zip(map(id, others), work_out(others), strict=True)) if others else {}
    return [values[k] if isinstance(k, str) else worked[id(k)] for k in keys]


def _read(path: str, version: list, valid: Callable[[object], bool]) -> dict:
    """The kept values of this version of the code that have the shape `valid` asks for (a
    file edited or damaged by hand costs the work, never a wrong type)."""
    from llmdoctor.wiki.cache import read_kept

    stored = read_kept(path)
    if not isinstance(stored, dict) or stored.get("version") != version:
        return {}  # none yet, unreadable, or of other code: worked out again
    values = stored.get("values")
    if not isinstance(values, dict):
        return {}
    return {k: v for k, v in values.items() if isinstance(k, str) and valid(v)}


def _write(path: str, version: list, values: dict) -> None:
    tmp = f"{path}.{os.getpid()}"
    try:
        with open(tmp, "wb") as fh:
            fh.write(marshal.dumps({"version": version, "values": values}))
        os.replace(tmp, path)
    except (OSError, ValueError):
        with contextlib.suppress(OSError):
            os.unlink(tmp)
