"""Shared test setup: the whole session runs with its own HOME, caches and kubeconfig, so no
test (nor a module- or session-scoped fixture, nor a child process) touches the user's files.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

ISOLATED = ("HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME")


def pytest_configure(config):
    # set before collection, so fixtures of any scope and every subprocess inherit it
    root = Path(tempfile.mkdtemp(prefix="llmdoctor-tests-"))
    config._llmdoctor_saved_env = {k: os.environ.get(k) for k in (*ISOLATED, "KUBECONFIG")}
    for name in ISOLATED:
        folder = root / name.lower()
        folder.mkdir()
        os.environ[name] = str(folder)
    os.environ["KUBECONFIG"] = str(root / "no-kubeconfig")
    os.environ["LLMDOCTOR_TEST_ROOT"] = str(root)


def pytest_unconfigure(config):
    import shutil

    for name, value in getattr(config, "_llmdoctor_saved_env", {}).items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    root = os.environ.pop("LLMDOCTOR_TEST_ROOT", None)
    if root:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    cache = tmp_path_factory.mktemp("xdg-cache")
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    monkeypatch.delenv("LLMDOCTOR_WIKI", raising=False)
    monkeypatch.delenv("NO_COLOR", raising=False)
    yield


@pytest.fixture(autouse=True)
def _forget_site_checks():
    # checks loaded with --checks-dir stay registered in this process; later tests must not
    # run (and wait for) the hanging ones
    from llmdoctor.engine import registry

    yield
    for check_id, spec in list(registry._CHECKS.items()):
        if spec.fn.__module__.startswith("llmdoctor_site_checks."):
            del registry._CHECKS[check_id]


@pytest.fixture(scope="module")
def entries():
    """The wiki's entries (the shipped runbooks), loaded once per test module."""
    from llmdoctor.wiki.library import load_library

    return load_library().entries
