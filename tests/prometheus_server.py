"""A real Prometheus for tests: OpenMetrics -> TSDB blocks (promtool) -> `prometheus` on loopback.

Skips (with the reason) when Debian's `prometheus` package is not installed, unless
LLMDOCTOR_REQUIRE_PROMETHEUS=1, where the missing tool fails the test instead (CI).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest
import requests

REQUIRE_ENV = "LLMDOCTOR_REQUIRE_PROMETHEUS"
# Prometheus' own guide (prometheus.io/docs/guides/basic-auth/): user admin, password "test"
ADMIN_BCRYPT = "$2b$12$hNf2lSsxfm0.i4a.1kVpSOVyBCfIB51VRjgBUyv6kdnyTlgWj81Ay"
READY_WAIT_S = 60.0


def tools() -> tuple[str, str]:
    """Paths of prometheus and promtool; skip or fail when they are missing."""
    found = shutil.which("prometheus"), shutil.which("promtool")
    if all(found):
        return found  # type: ignore[return-value]
    why = "Debian package 'prometheus' (prometheus, promtool) is not installed"
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{why}, and {REQUIRE_ENV}=1")
    pytest.skip(f"{why} (set {REQUIRE_ENV}=1 to make this a failure)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def create_blocks(openmetrics: str, folder: Path) -> Path:
    """Write the text and turn it into TSDB blocks under folder/data."""
    _, promtool = tools()
    source = folder / "scenarios.om.txt"
    source.write_text(openmetrics)
    data = folder / "data"
    data.mkdir()
    done = subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", str(source), str(data)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode != 0:
        raise RuntimeError(f"promtool failed: {done.stderr.strip()[-2000:]}")
    return data


class Prometheus:
    """`prometheus` over a storage folder, on 127.0.0.1 and a free port; stop() ends it."""

    def __init__(self, data: Path, folder: Path, basic_auth: bool = False):
        prometheus, _ = tools()
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = folder / f"prometheus-{self.port}.yml"
        config.write_text("global:\n  scrape_interval: 15s\n")
        args = [
            prometheus,
            f"--config.file={config}",
            f"--storage.tsdb.path={data}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--storage.tsdb.retention.time=3650d",
            "--log.level=warn",
        ]
        self.auth = None
        if basic_auth:
            web = folder / f"web-{self.port}.yml"
            web.write_text(f"basic_auth_users:\n  admin: '{ADMIN_BCRYPT}'\n")
            args.append(f"--web.config.file={web}")
            self.auth = ("admin", "test")
        self.log = open(folder / f"prometheus-{self.port}.log", "w")  # noqa: SIM115
        self.process = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + READY_WAIT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"prometheus exited with {self.process.returncode}")
            try:
                r = requests.get(f"{self.url}/-/ready", timeout=2, auth=self.auth)
                if r.status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"prometheus not ready after {READY_WAIT_S:g}s")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)
        self.log.close()
