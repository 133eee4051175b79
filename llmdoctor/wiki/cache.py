"""Where llmdoctor keeps derived files: the wiki index and unsaved `wiki add` drafts.

$XDG_CACHE_HOME/llmdoctor (default ~/.cache/llmdoctor). Everything here can be deleted.
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """The llmdoctor cache folder (created on demand; falls back to the temp folder)."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    root = Path(base) if base and os.path.isabs(base) else Path.home() / ".cache"
    folder = root / "llmdoctor"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if os.access(folder, os.W_OK):
            return folder
    except OSError:
        pass
    # a read-only home must not stop a search at 3 a.m.
    import tempfile

    uid = os.getuid() if hasattr(os, "getuid") else 0
    folder = Path(tempfile.gettempdir()) / f"llmdoctor-{uid}"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def drafts_dir() -> Path:
    """Where `wiki add` keeps a draft that did not validate, so nothing typed is lost."""
    folder = cache_dir() / "drafts"
    folder.mkdir(parents=True, exist_ok=True)
    return folder
