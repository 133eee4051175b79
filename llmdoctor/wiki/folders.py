"""Which folders make up the wiki: the built-in runbooks, then LLMDOCTOR_WIKI, then --wiki.

Kept free of parsing imports: `wiki search` needs the folder list on every call.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV_WIKI = "LLMDOCTOR_WIKI"


def builtin_dir() -> Path:
    """The folder of the shipped runbooks (the repo's runbooks/ when installed editable)."""
    # importing the (empty) package is cheaper than importlib.util.find_spec on every search
    import llmdoctor.builtin_runbooks as package

    locations = list(getattr(package, "__path__", []))
    if locations:
        return Path(locations[0])
    from importlib.resources import files  # pragma: no cover - unusual installs only

    return Path(str(files("llmdoctor.builtin_runbooks")))


def configured_dirs() -> list[Path]:
    """The LLMDOCTOR_WIKI folders (os.pathsep-separated), in order."""
    env = os.environ.get(ENV_WIKI, "")
    return [Path(p) for p in env.split(os.pathsep) if p.strip()]


def wiki_dirs(extra: list[str | Path] | None = None) -> list[Path]:
    """Built-in folder first, then LLMDOCTOR_WIKI folders, then --wiki folders (later wins)."""
    dirs = [builtin_dir(), *configured_dirs(), *(Path(p) for p in extra or [])]
    _warn_missing(dirs[1:])
    seen: set[Path] = set()
    unique = []
    for d in dirs:
        key = d.resolve() if d.exists() else d
        if key not in seen:
            seen.add(key)
            unique.append(d)
    return unique


_warned: set[str] = set()


def _warn_missing(dirs: list[Path]) -> None:
    """One stderr line per missing team folder: a typo in --wiki or LLMDOCTOR_WIKI must not
    silently leave the team's runbooks out of a search at 3 a.m."""
    import sys

    for d in dirs:
        if d.is_dir() or str(d) in _warned:
            continue
        _warned.add(str(d))
        what = "is not a folder" if d.exists() else "does not exist"
        print(
            f"llmdoctor: warning: wiki folder {d} {what}; its entries are left out", file=sys.stderr
        )
