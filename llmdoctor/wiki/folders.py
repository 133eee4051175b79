"""Which folders make up the wiki: the built-in runbooks, then LLMDOCTOR_WIKI, then --wiki.

Kept free of parsing imports: `wiki search` needs the folder list on every call.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (3 ms per search)

if TYPE_CHECKING:
    from pathlib import Path

ENV_WIKI = "LLMDOCTOR_WIKI"


def builtin_dir_path() -> str:
    """The folder of the shipped runbooks (the repo's runbooks/ when installed editable)."""
    # importing the (empty) package is cheaper than importlib.util.find_spec on every search
    import llmdoctor.builtin_runbooks as package

    locations = list(getattr(package, "__path__", []))
    if locations:
        return str(locations[0])
    from importlib.resources import files  # pragma: no cover - unusual installs only

    return str(files("llmdoctor.builtin_runbooks"))


def builtin_dir() -> Path:
    """The folder of the shipped runbooks, as a Path."""
    from pathlib import Path

    return Path(builtin_dir_path())


LINKED_OUT = "the file is a link to outside its wiki folder; not read"


def within_folder(path: str | Path, folder: str | Path) -> bool:
    """Whether `path`, every link followed, is within `folder` (its links followed as well)."""
    real, root = os.path.realpath(path), os.path.realpath(folder)
    return real.startswith(root.rstrip(os.sep) + os.sep)


def linked_out_of_folder(path: str | Path) -> bool:
    """Whether a wiki file is a link that resolves outside its own folder. A team's wiki is
    untrusted: a link in it to a kubeconfig or a private note must not be read as a runbook.
    Only a link costs more than one lstat (a plain file is in its folder by being listed)."""
    if not os.path.islink(path):
        return False
    return not within_folder(path, os.path.dirname(os.path.abspath(path)))


def configured_dir_paths() -> list[str]:
    """The LLMDOCTOR_WIKI folders (os.pathsep-separated), in order."""
    env = os.environ.get(ENV_WIKI, "")
    return [p for p in env.split(os.pathsep) if p.strip()]


def configured_dirs() -> list[Path]:
    from pathlib import Path

    return [Path(p) for p in configured_dir_paths()]


def wiki_dir_paths(extra: list[str | Path] | None = None) -> list[str]:
    """Built-in folder first, then LLMDOCTOR_WIKI folders, then --wiki folders (later wins);
    plain strings, so the search path needs no pathlib."""
    dirs = [builtin_dir_path(), *configured_dir_paths(), *(os.fspath(p) for p in extra or [])]
    _warn_missing(dirs[1:])
    seen: set[str] = set()
    unique = []
    for d in dirs:
        key = os.path.realpath(d) if os.path.exists(d) else os.path.normpath(d)
        if key not in seen:
            seen.add(key)
            unique.append(d)
    return unique


def wiki_dirs(extra: list[str | Path] | None = None) -> list[Path]:
    """Built-in folder first, then LLMDOCTOR_WIKI folders, then --wiki folders (later wins)."""
    from pathlib import Path

    return [Path(d) for d in wiki_dir_paths(extra)]


_warned: set[str] = set()


def expect_new_folder(path: str | Path) -> None:
    """A folder `wiki add` is about to create: not a typo to warn about."""
    _warned.add(os.fspath(path))


def _warn_missing(dirs: list[str]) -> None:
    """One stderr line per missing team folder: a typo in --wiki or LLMDOCTOR_WIKI must not
    silently leave the team's runbooks out of a search at 3 a.m."""
    import sys

    for d in dirs:
        if os.path.isdir(d) or str(d) in _warned:
            continue
        _warned.add(str(d))
        what = "is not a folder" if os.path.exists(d) else "does not exist"
        print(
            f"llmdoctor: warning: wiki folder {d} {what}; its entries are left out", file=sys.stderr
        )
