"""Find Prometheus' real tools (promtool, node-exporter) for the fleet tests.

Missing locally: the test is skipped with the reason. With LLMDOCTOR_REQUIRE_PROMETHEUS=1 (CI,
which installs Debian's `prometheus` and `prometheus-node-exporter`) a missing tool fails.
"""

from __future__ import annotations

import os
import shutil

import pytest

REQUIRE = "LLMDOCTOR_REQUIRE_PROMETHEUS"
NAMES = {
    "promtool": ("promtool",),
    "node-exporter": ("prometheus-node-exporter", "node_exporter"),
}


def require_tool(kind: str) -> str:
    """The path of the tool, or skip (fail when LLMDOCTOR_REQUIRE_PROMETHEUS=1)."""
    for name in NAMES[kind]:
        path = shutil.which(name)
        if path:
            return path
    reason = (
        f"{'/'.join(NAMES[kind])} not on PATH (Debian: apt-get install prometheus "
        "prometheus-node-exporter)"
    )
    if os.environ.get(REQUIRE) == "1":
        pytest.fail(f"{REQUIRE}=1 but {reason}")
    pytest.skip(reason)
