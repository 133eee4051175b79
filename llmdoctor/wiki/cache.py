"""Where llmdoctor keeps derived files: the wiki index, parsed entries and unsaved `wiki add` drafts.

$XDG_CACHE_HOME/llmdoctor (default ~/.cache/llmdoctor). Everything here can be deleted.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (3 ms per search)

if TYPE_CHECKING:
    from pathlib import Path


def cache_dir_path() -> str:
    """The llmdoctor cache folder as a string (plain os.path: `wiki search` needs no pathlib)."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    root = base if base and os.path.isabs(base) else os.path.join(os.path.expanduser("~"), ".cache")
    folder = os.path.join(root, "llmdoctor")
    try:
        os.makedirs(folder, exist_ok=True)
        if os.access(folder, os.W_OK):
            return folder
    except OSError:
        pass
    # a read-only home must not stop a search at 3 a.m.
    import tempfile

    uid = os.getuid() if hasattr(os, "getuid") else 0
    folder = os.path.join(tempfile.gettempdir(), f"llmdoctor-{uid}")
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as exc:
        from llmdoctor.errors import BadInput

        raise BadInput(
            f"no folder for llmdoctor's cache: {os.path.join(root, 'llmdoctor')} and {folder} "
            f"cannot be used ({exc.strerror or exc}); set XDG_CACHE_HOME to a writable folder"
        ) from None
    return folder


MAX_CACHE_FILE = 256 * 1024 * 1024  # a kept file larger than this is not read: worked out again


def read_kept(path: str, limit: int = MAX_CACHE_FILE):
    """The value marshal wrote to a cache file, or None when there is none usable: not a
    regular file (a FIFO or /dev/zero put there would hang the read), larger than `limit`,
    unreadable or not marshal (a file that lies about its sizes may ask for more memory than
    there is). Whatever it holds is still to be checked by the caller."""
    import marshal
    import stat

    try:
        with open(path, "rb", opener=_opener_no_wait) as fh:
            st = os.fstat(fh.fileno())
            if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
                return None
            return marshal.loads(fh.read(limit + 1))
    except (OSError, ValueError, EOFError, TypeError, MemoryError, OverflowError):
        return None


def _opener_no_wait(path: str, flags: int) -> int:
    # O_NONBLOCK: opening a FIFO without a writer returns at once (then refused as no file)
    return os.open(path, flags | getattr(os, "O_NONBLOCK", 0))


def folders_file(kind: str, dirs: list, suffix: str) -> str:
    """The cache file of `kind` for this ordered set of (absolute) folders: named by a 64-bit
    FNV-1a of the folder list (stable across runs, and no import on a search's path)."""
    h = 0xCBF29CE484222325
    for byte in os.pathsep.join(map(str, dirs)).encode():
        h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return os.path.join(cache_dir_path(), f"{kind}-{h:016x}{suffix}")


def cache_dir() -> Path:
    """The llmdoctor cache folder (created on demand; falls back to the temp folder)."""
    from pathlib import Path

    return Path(cache_dir_path())


def drafts_dir() -> Path:
    """Where `wiki add` keeps a draft that did not validate, so nothing typed is lost."""
    folder = cache_dir() / "drafts"
    folder.mkdir(parents=True, exist_ok=True)
    return folder
