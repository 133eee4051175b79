"""On a real terminal, text from logs and configs is printed as written: rich must neither turn
`:ab:` into an emoji nor read `[...]` as markup (issue 25: an Xid on PCI bus `ab` printed as
`0000🆎00.0`). The CLI runs as a user runs it, with its output on a pseudo-terminal."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
XID79_BUNDLE = ROOT / "examples" / "bundles" / "xid79-gpu-fallen-off-bus"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


def run_on_a_terminal(args: list[str], timeout: float = 60.0) -> str:
    """The CLI's output as a terminal receives it (isatty true, colours on), escapes removed."""
    leader, follower = pty.openpty()
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "200", "LINES": "50"}
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "llmdoctor", *args],
        stdin=subprocess.DEVNULL,
        stdout=follower,
        stderr=follower,
        env=env,
        cwd=ROOT,
    )
    os.close(follower)
    chunks = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 0.5)
            if ready:
                try:
                    data = os.read(leader, 65536)
                except OSError:  # the follower side closed: the process is done
                    break
                if not data:
                    break
                chunks.append(data)
            elif proc.poll() is not None:
                break
    finally:
        proc.kill() if proc.poll() is None else None
        proc.wait(timeout=10)
        os.close(leader)
    return ANSI.sub("", b"".join(chunks).decode("utf-8", "replace")).replace("\r\n", "\n")


def test_an_xid_on_pci_bus_ab_prints_its_address_not_an_emoji(tmp_path):
    # the real Xid 79 lines of the example bundle (open-gpu-kernel-modules#1151), with the GPU on
    # bus ab instead of 2b: `0000:ab:00` holds rich's emoji code `:ab:` (🆎)
    bundle = tmp_path / "xid79-bus-ab"
    shutil.copytree(XID79_BUNDLE, bundle)
    log = bundle / "node" / "kernel.log"
    log.write_text(log.read_text().replace("0000:2b:00", "0000:ab:00"))
    out = run_on_a_terminal(["node", "--bundle", str(bundle)])
    assert "Xid 79" in out, out
    assert "0000:ab:00.0" in out, out
    assert "\U0001f18e" not in out, out


def test_markup_and_emoji_codes_in_a_model_config_print_as_written(tmp_path):
    # Qwen2-7B's real config with a quant_method spelled like rich markup and an emoji code:
    # capacity's note names it verbatim, neither bold nor 🆎
    config = json.loads(
        (ROOT / "tests" / "fixtures" / "capacity" / "qwen2-7b-instruct-config.json").read_text()
    )
    config["quantization_config"] = {"quant_method": "[bold]q:ab:"}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    out = run_on_a_terminal(["capacity", "--model-config", str(path), "--gpu", "H100"])
    assert "quantization [bold]q:ab:" in out, out
    assert "\U0001f18e" not in out, out
