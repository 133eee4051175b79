"""The kernel log (`node/kernel.log`), where the NVIDIA driver writes Xid errors.

Tried in order: `--kernel-log FILE`, `dmesg -T`, `journalctl -k`, /var/log/kern.log,
/var/log/messages. Output goes to a temporary file that checks stream, so a large log is never
held in memory. When nothing is readable the fact says why and how to get the log.
"""

from __future__ import annotations

import atexit
import os
import re
import subprocess
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from llmdoctor.collectors.command import run_command
from llmdoctor.engine.collect import CollectContext
from llmdoctor.engine.facts import Missing
from llmdoctor.engine.textsource import MAX_LINE_CHARS, TextSource

DEFAULT_SINCE_SECONDS = 24 * 3600
TEXT_LOGS = ("/var/log/kern.log", "/var/log/messages")
HOW_TO_GET_IT = (
    "run llmdoctor as root, or read it from a privileged debug pod: kubectl debug node/NODE -it "
    "--profile=sysadmin --image=ubuntu -- chroot /host dmesg -T > kernel.log, then pass "
    "--kernel-log kernel.log"
)

_DMESG_TIME = re.compile(r"^\[(\w{3} \w{3} +\d{1,2} \d\d:\d\d:\d\d \d{4})\]")
_ISO_TIME = re.compile(r"^(\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d)")
_SYSLOG_TIME = re.compile(r"^(\w{3} +\d{1,2} \d\d:\d\d:\d\d)")


def _temp_log() -> Path:
    fd, name = tempfile.mkstemp(prefix="llmdoctor-kernel-", suffix=".log")
    os.close(fd)
    atexit.register(lambda: Path(name).unlink(missing_ok=True))
    return Path(name)


def line_time(line: str, now: float) -> float | None:
    """Unix time of a kernel log line from `dmesg -T`, journalctl or syslog; None if it has none."""
    try:
        m = _DMESG_TIME.match(line)
        if m:
            return datetime.strptime(
                " ".join(m.group(1).split()), "%a %b %d %H:%M:%S %Y"
            ).timestamp()
        m = _ISO_TIME.match(line)
        if m:
            return datetime.fromisoformat(m.group(1).replace(" ", "T")).timestamp()
        m = _SYSLOG_TIME.match(line)
        if m:
            year = datetime.fromtimestamp(now).year
            stamp = datetime.strptime(f"{year} {' '.join(m.group(1).split())}", "%Y %b %d %H:%M:%S")
            if stamp.timestamp() > now + 86400:  # December lines read in January
                stamp = stamp.replace(year=year - 1)
            return stamp.timestamp()
    except ValueError:
        return None
    return None


def keep_since(src: Path, dst: Path, cutoff: float, now: float) -> int:
    """Copy the lines of src written at or after `cutoff` to dst (streaming); return lines kept.

    A line without a timestamp (a continuation line) goes with the line before it.
    """
    kept = 0
    keep = True
    with (
        open(src, encoding="utf-8", errors="replace", newline="") as fin,
        open(dst, "w", encoding="utf-8") as fout,
    ):
        while line := fin.readline(MAX_LINE_CHARS):  # never a whole endless line in memory
            if len(line) == MAX_LINE_CHARS and not line.endswith(("\n", "\r")):
                line += "\n"  # an over-long line is cut here; its rest is skipped
                while (rest := fin.readline(MAX_LINE_CHARS)) and not rest.endswith(("\n", "\r")):
                    pass
            stamp = line_time(line, now)
            if stamp is not None:
                keep = stamp >= cutoff
            if keep:
                fout.write(line)
                kept += 1
    return kept


def _run_to_file(argv: list[str], dest: Path, timeout: float) -> tuple[int, str]:
    """Run a command with stdout into dest; (exit code, stderr). Raises OSError, TimeoutExpired."""
    with open(dest, "wb") as out:
        proc = run_command(argv, timeout, stdout=out)
    return proc.returncode, proc.stderr.strip()


def _try_dmesg(timeout: float, since: float, now: float) -> tuple[Path | None, str]:
    raw = _temp_log()
    try:
        code, err = _run_to_file(["dmesg", "-T"], raw, timeout)
    except FileNotFoundError:
        return None, "dmesg: not installed"
    except subprocess.TimeoutExpired:
        return None, f"dmesg: timed out after {timeout:.0f}s"
    except OSError as exc:
        return None, f"dmesg: {exc.strerror or exc}"
    if code != 0:
        detail = err.splitlines()[-1] if err else f"exit code {code}"
        hint = " (needs CAP_SYSLOG: kernel.dmesg_restrict=1)" if "not permitted" in err else ""
        return None, f"dmesg: {detail}{hint}"
    kept = _temp_log()
    keep_since(raw, kept, now - since, now)
    raw.unlink(missing_ok=True)
    return kept, "dmesg -T"


def _try_journalctl(timeout: float, since: float, now: float) -> tuple[Path | None, str]:
    out = _temp_log()
    start = datetime.fromtimestamp(now - since).strftime("%Y-%m-%d %H:%M:%S")
    argv = ["journalctl", "-k", "--no-pager", "-o", "short-iso", "--since", start]
    try:
        code, err = _run_to_file(argv, out, timeout)
    except FileNotFoundError:
        return None, "journalctl: not installed"
    except subprocess.TimeoutExpired:
        return None, f"journalctl: timed out after {timeout:.0f}s"
    except OSError as exc:
        return None, f"journalctl: {exc.strerror or exc}"
    text = err.lower()
    if code != 0 or "insufficient permissions" in text or "not seeing messages" in text:
        detail = err.splitlines()[-1] if err else f"exit code {code}"
        return None, f"journalctl -k: {detail} (needs root or group adm/systemd-journal)"
    if "no journal files" in text:
        return None, "journalctl -k: no journal files on this machine"
    return out, "journalctl -k"


def _try_text_logs(since: float, now: float) -> tuple[Path | None, str]:
    reasons = []
    for name in TEXT_LOGS:
        path = Path(name)
        if not path.exists():
            reasons.append(f"{name}: not present")
            continue
        out = _temp_log()
        try:
            keep_since(path, out, now - since, now)
        except PermissionError:
            reasons.append(f"{name}: permission denied")
            continue
        except OSError as exc:
            reasons.append(f"{name}: {exc.strerror or exc}")
            continue
        return out, name
    return None, "; ".join(reasons)


def _describe_since(seconds: float) -> str:
    if seconds >= 2 * 86400 and seconds % 86400 == 0:
        return f"{int(seconds // 86400)}d"
    if seconds % 3600 == 0:
        return f"{int(seconds // 3600)}h"
    return f"{int(seconds // 60)}m"


def collect_kernel_log(ctx: CollectContext) -> dict[str, Any]:
    """node/kernel.log from the first readable source, or the reasons none was readable."""
    options = ctx.options or {}
    now = time.time()
    since = options.get("since_seconds")
    given = options.get("kernel_log")
    if given:
        path = Path(given)
        if since is None:
            return {
                "node/kernel.log": TextSource.from_file("node/kernel.log", path),
                "node/kernel-log-source": f"{path} (--kernel-log)",
            }
        kept = _temp_log()
        keep_since(path, kept, now - since, now)
        return {
            "node/kernel.log": TextSource.from_file("node/kernel.log", kept),
            "node/kernel-log-source": f"{path} (--kernel-log, last {_describe_since(since)})",
        }
    since = since or DEFAULT_SINCE_SECONDS
    deadline = now + max(1.0, ctx.timeout - 0.5)
    reasons = []
    for attempt in (_try_dmesg, _try_journalctl):
        remaining = max(0.5, deadline - time.time())
        path, what = attempt(remaining, since, now)
        if path is not None:
            return {
                "node/kernel.log": TextSource.from_file("node/kernel.log", path),
                "node/kernel-log-source": f"{what} (last {_describe_since(since)})",
            }
        reasons.append(what)
    path, what = _try_text_logs(since, now)
    if path is not None:
        return {
            "node/kernel.log": TextSource.from_file("node/kernel.log", path),
            "node/kernel-log-source": f"{what} (last {_describe_since(since)})",
        }
    reasons.append(what)
    why = f"kernel log not readable: {'; '.join(reasons)}. To get it, {HOW_TO_GET_IT}"
    return {"node/kernel.log": Missing(why)}
