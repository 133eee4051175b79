"""What a drill keeps: llmdoctor's own bundle of the live server (`collect URL`), the slice of the
server's log the drill produced, and the answers its clients got. The same files are read back
by the offline tests (tests/test_real_vllm_fixtures.py) from tests/fixtures/real-vllm-0.32/.

Set LLMDOCTOR_DRILL_SAVE=tests/fixtures/real-vllm-0.32 to (re)write the fixtures from a run.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import ClassVar

import pytest

from llmdoctor.cli import run as cli_run

FIXTURES = Path(__file__).parent / "fixtures" / "real-vllm-0.32"


def save_root(tmp_root: Path) -> Path:
    """Where this run writes each drill's captures: the fixtures folder when asked, else tmp."""
    chosen = os.environ.get("LLMDOCTOR_DRILL_SAVE")
    return Path(chosen) if chosen else tmp_root


def drill_folder(root: Path, drill: str) -> Path:
    folder = root / drill
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    return folder


def run_cli(capsys, *args: str) -> tuple[int, str]:
    """llmdoctor's command line in this process: (exit code, stdout)."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        cli_run(list(args))
    return exit_info.value.code, capsys.readouterr().out


def run_json(capsys, *args: str) -> tuple[int, dict]:
    code, out = run_cli(capsys, *args, "--json")
    return code, json.loads(out)


# the child loads what `collect` needs, says so, and collects when told: loading takes seconds
# on a loaded machine, and the bundle must see the same moment as the probe beside it. It loads
# by collecting once from a port nothing listens on (refused at once, the bundle thrown away):
# importing the command's modules left ~200 more (requests, ssl, re2 ...) to the first collect,
# and on CI, their files read from a disk the drill install had just filled, a collector held in
# the kernel (state D) for minutes after its go
_COLLECT_WHEN_TOLD = """
import contextlib, faulthandler, io, signal, sys, tempfile
faulthandler.register(signal.SIGUSR1)  # a child past its time shows where it waits
from llmdoctor.__main__ import end_process
from llmdoctor.cli import run
with tempfile.TemporaryDirectory() as scratch:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            run(["collect", "http://127.0.0.1:9", "-o", scratch + "/b", "--timeout", "1"])
        except SystemExit:
            pass
print("ready", flush=True)
if sys.stdin.readline():  # "" when the test run closed the pipe (or died): nothing to collect
    # ended as `llmdoctor` ends: a request abandoned at its deadline may still be reading, and
    # the interpreter's shutdown under it aborts the process (exit -6 on CI, bundle written)
    try:
        run(sys.argv[1:])
    except SystemExit as done:
        end_process(done.code)
    end_process(0)
"""


def machine_state() -> str:
    """The load, the memory left and the busiest processes: whether a drill that overran its
    time was starved by the machine or stuck in llmdoctor."""
    parts = []
    with contextlib.suppress(OSError):
        parts.append("load " + Path("/proc/loadavg").read_text().strip())
    with contextlib.suppress(OSError):
        meminfo = Path("/proc/meminfo").read_text().splitlines()
        parts += [line for line in meminfo if line.startswith(("MemAvailable", "SwapFree"))]
    for kind in ("cpu", "io", "memory"):  # the share of time tasks stalled on each (PSI)
        with contextlib.suppress(OSError):
            some = Path(f"/proc/pressure/{kind}").read_text().splitlines()[0]
            parts.append(f"{kind} pressure {some}")
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        top = subprocess.run(
            ["ps", "-eo", "pid,ni,stat,pcpu,rss,args", "--sort=-pcpu"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.splitlines()[:8]
        parts.append("\n".join(line[:160] for line in top))
    return "; ".join(parts)


def _stat_fields(stat: Path) -> list[str]:
    """The fields of a /proc `stat` file after the command's name (state first), [] when the
    process or thread is gone."""
    try:
        return stat.read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return []


def cpu_seconds(pid: int) -> float:
    """The user and system CPU time the process has had (/proc/PID/stat), 0 when it is gone."""
    fields = _stat_fields(Path(f"/proc/{pid}/stat"))
    if len(fields) < 13:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def scheduler_state(pid: int) -> str:
    """The process's scheduler state (R, S, D, T …), "" when it is gone."""
    return next(iter(_stat_fields(Path(f"/proc/{pid}/stat"))), "")


def process_state(pid: int) -> str:
    """The process's scheduler state and where in the kernel it waits (/proc/PID/stat, wchan)."""
    parts = []
    if state := scheduler_state(pid):
        parts.append("state " + state)
    with contextlib.suppress(OSError):
        parts.append("waiting in " + (Path(f"/proc/{pid}/wchan").read_text() or "user space"))
    with contextlib.suppress(OSError):
        threads = [
            next(iter(_stat_fields(task / "stat")), "")
            for task in Path(f"/proc/{pid}/task").iterdir()
        ]
        parts.append(f"threads {''.join(sorted(threads))}")
    return ", ".join(parts) or "gone"


class Collector:
    """`llmdoctor collect URL -o BUNDLE` in a child process, imported ahead and started on cue."""

    unfinished: ClassVar[list[Collector]] = []

    def __init__(self, url: str, bundle: Path, window: float):
        command = ["collect", url, "-o", str(bundle), "--window", str(window), "--timeout", "8"]
        self.process = subprocess.Popen(
            [sys.executable, "-c", _COLLECT_WHEN_TOLD, *command],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        Collector.unfinished.append(self)
        ready = self.process.stdout.readline()
        assert ready.strip() == "ready", ready + self.process.stdout.read()

    def start(self) -> None:
        self.process.stdin.write("go\n")
        self.process.stdin.flush()

    def finish(self, timeout: float = 180) -> None:
        # `collect --window 3 --timeout 8` ends within ~15 s; a CI machine once took over 90 s
        started = time.monotonic()
        try:
            out, _ = self.process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            out, seen = self._held_by_the_machine(started + 3 * timeout)
            if out is None:
                state = process_state(self.process.pid)
                self.process.send_signal(signal.SIGUSR1)
                time.sleep(2)
                self.process.kill()
                out, _ = self.process.communicate()
                out = (
                    f"still collecting after {time.monotonic() - started:.0f} s ({state}; {seen});"
                    f" {machine_state()}\nits threads then:\n{out}"
                )
        Collector.unfinished.remove(self)
        took = time.monotonic() - started
        assert self.process.returncode == 0, f"exit {self.process.returncode} ({took:.0f} s): {out}"

    def _held_by_the_machine(self, until: float, span: float = 10) -> tuple[str | None, str]:
        """The child's output when it ends before `until` while the machine holds it: waiting
        in the kernel (state D: a disk or memory stall) or runnable without getting a core
        (state R on less than half a core's time), span after span. None, with what the last
        span saw, as soon as a span finds it sleeping (state S: waiting in llmdoctor) or
        computing (half a core or more): that is llmdoctor's own slowness."""
        seen = "not sampled"
        while time.monotonic() < until:
            states: dict[str, int] = {}
            cpu_before, span_start = cpu_seconds(self.process.pid), time.monotonic()
            while time.monotonic() - span_start < span:
                state = scheduler_state(self.process.pid) or "gone"
                states[state] = states.get(state, 0) + 1
                with contextlib.suppress(subprocess.TimeoutExpired):
                    return self.process.communicate(timeout=0.5)[0], seen
            share = (cpu_seconds(self.process.pid) - cpu_before) / (time.monotonic() - span_start)
            seen = f"the last {span:.0f} s: states {states}, {share:.0%} of a core"
            if states.get("S", 0) * 2 >= sum(states.values()) or share >= 0.5:
                return None, seen
        return None, seen

    @classmethod
    def reap_all(cls) -> None:
        """Stop the children of drills that failed before they collected."""
        for collector in cls.unfinished:
            collector.process.kill()
            collector.process.communicate()
        cls.unfinished.clear()


def write_json(path: Path, value) -> None:
    path.write_text(json.dumps(value, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def verdict(report: dict) -> list[tuple[str, str, tuple[str, ...]]]:
    """(check, severity, runbooks) of every finding that is not ok, in the report's order."""
    return [
        (f["check"], f["severity"], tuple(f.get("runbooks") or ()))
        for f in report["findings"]
        if f["severity"] != "ok"
    ]


def told(report: dict) -> str:
    """Every finding, ok ones too (check, severity, summary, runbooks, then its evidence): what a
    failed drill's assertion prints in full (pytest shortens a message that is not a string),
    so a CI log says why and not only which."""
    lines = []
    for f in report["findings"]:
        lines.append(
            f"{f['check']} {f['severity']}: {f['summary']} {list(f.get('runbooks') or ())}"
        )
        lines.extend(f"    {e.get('text')}" for e in f.get("evidence") or ())
    return "\n" + "\n".join(lines)


def ok_checks(report: dict) -> list[tuple[str, str]]:
    return [(f["check"], f["summary"]) for f in report["findings"] if f["severity"] == "ok"]


def explained(result: dict) -> list[tuple[str, str, float]]:
    """(runbook id, severity, confidence) of explain's confident matches, best first."""
    return [(m["id"], m["severity"], m["confidence"]) for m in result["matches"]]


def check_killed_worker_story(result: dict, log_text: str) -> None:
    """explain's answer on the log of a server whose worker was killed mid-request. With
    `died unexpectedly (exit code: -9)` the kill is named first and engine-dead after it. When
    vLLM's monitor read the status before the kernel had it (`exit code: None`, which a failed
    start-up prints too) no signature proves a kill: engine-dead stays critical, and the kill is
    at most a warning: first (LIKELY) when its line is the first error before the dead engine,
    else next to it (a MAYBE) or the closest guess."""
    ids = [m["id"] for m in result["matches"]]
    if "died unexpectedly (exit code: -9)" in log_text:
        assert ids[:2] == ["vllm-worker-killed", "engine-dead"], explained(result)
        return
    dead = next((m for m in result["matches"] if m["id"] == "engine-dead"), None)
    assert dead is not None and dead["severity"] == "critical", explained(result)
    if ids[:1] == ["vllm-worker-killed"]:
        cause = result["likely_cause"]
        assert cause and cause["entry"] == "vllm-worker-killed", explained(result)
        assert "died unexpectedly" in cause["text"], explained(result)
        assert ids[1] == "engine-dead" and result["matches"][0]["severity"] == "warning"
        return
    assert ids[:1] == ["engine-dead"], explained(result)
    after = [m for m in result["matches"][1:2] if m["id"] == "vllm-worker-killed"]
    if after:
        assert after[0]["severity"] == "warning", explained(result)
    else:
        guesses = [m["id"] for m in result["below_threshold"]]
        assert guesses[:1] == ["vllm-worker-killed"], result["below_threshold"]
