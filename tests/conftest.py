"""Shared test setup: every test gets its own cache folder, so none touches the user's cache."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    cache = tmp_path_factory.mktemp("xdg-cache")
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    monkeypatch.delenv("LLMDOCTOR_WIKI", raising=False)
    monkeypatch.delenv("NO_COLOR", raising=False)
    yield
