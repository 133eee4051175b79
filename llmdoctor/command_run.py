"""How every command runs, whichever front door it came through (the typer application, or a
start-up path that skips it): SIGTERM unwinds like Ctrl-C, stdout survives its reader going
away, and a user's error is one line and exit 3, never a traceback.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (`wiki search` writes here)
if TYPE_CHECKING:
    from collections.abc import Callable


def shell_completing() -> bool:
    """A shell asks for completions (`llmdoctor completion SHELL`, kubectl's plugin): typer's
    to answer, whatever the words typed so far."""
    return bool(
        os.environ.get("_LLMDOCTOR_COMPLETE") or os.environ.get("_KUBECTL_LLMDOCTOR_COMPLETE")
    )


def fail(message: str) -> None:
    """Print a one-line error to stderr and exit 3."""
    from llmdoctor.exit_codes import ExitCode
    from llmdoctor.terminal_text import visible

    sys.stderr.write(f"llmdoctor: {visible(message)}\n")
    raise SystemExit(int(ExitCode.CANNOT_RUN))


class PipeSafeStdout:
    """stdout that survives its reader going away (`llmdoctor ... | head`).

    The first BrokenPipeError switches writing to /dev/null, so the command finishes and
    exits with its own code rather than 1 or 120 from a failed flush at exit.
    """

    def __init__(self, stream):
        self._stream = stream
        self.broken = False

    def write(self, text: str) -> int:
        if not self.broken:
            try:
                return self._stream.write(text)
            except BrokenPipeError:
                self._drop()
        return len(text)

    def flush(self) -> None:
        if getattr(self._stream, "closed", False):
            return  # closed by its owner (the MCP SDK closes stdout when the session ends)
        if not self.broken:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._drop()

    def _drop(self) -> None:
        self.broken = True
        _point_at_devnull(self._stream)  # the interpreter's final flush goes nowhere

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def write_stdout(text: str, what: str = "the results") -> None:
    """Write `text` to stdout and flush it; a closed stdout (`>&-`) or one that cannot take it
    (`> /dev/full`, a disk that filled up) is BadInput: one line, exit 3, never an internal error.
    A reader that went away (BrokenPipeError) is left to PipeSafeStdout or the caller."""
    from llmdoctor.errors import BadInput

    out = sys.stdout
    if out is None:  # `>&-`: fd 1 closed, Python has no stdout at all
        raise BadInput(f"standard output is closed: nowhere to print {what}")
    try:
        out.write(text)
        out.flush()
    except BrokenPipeError:
        raise
    except OSError as exc:
        # the interpreter's last flush of what is still buffered must not fail again (and
        # print 'Exception ignored' at exit)
        _point_at_devnull(out)
        raise BadInput(f"cannot write {what} to standard output ({exc.strerror or exc})") from None


def _point_at_devnull(stream) -> None:
    """Point the stream's file descriptor at /dev/null (best effort)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


def _terminated(signum, frame) -> None:
    # SIGTERM unwinds like Ctrl-C: `finally` blocks and context managers (an unpacked bundle's
    # temporary folder, a half-written archive) clean up before the process ends
    raise SystemExit(128 + signum)


def run_command(body: Callable[[], int | None]) -> None:
    """Run a command's body; always ends in SystemExit with its exit code."""
    import signal
    import threading

    previous = None
    in_main = threading.current_thread() is threading.main_thread()
    if in_main:
        previous = signal.signal(signal.SIGTERM, _terminated)
    stdout = sys.stdout
    if stdout is not None and not isinstance(stdout, PipeSafeStdout):
        sys.stdout = PipeSafeStdout(stdout)
    try:
        code = _guarded(body)
    finally:
        if sys.stdout is not stdout and isinstance(sys.stdout, PipeSafeStdout):
            sys.stdout.flush()
            sys.stdout = stdout
        if in_main and previous is not None:
            signal.signal(signal.SIGTERM, previous)
    raise SystemExit(code)


def _guarded(body: Callable[[], int | None]) -> int:
    from llmdoctor.errors import LlmdoctorError

    try:
        code = body()
    except LlmdoctorError as exc:
        fail(str(exc))
    except KeyboardInterrupt:
        sys.stderr.write("llmdoctor: interrupted\n")
        raise SystemExit(130) from None
    except RecursionError:
        fail("the input is nested too deeply to read")
    except Exception as exc:
        if os.environ.get("LLMDOCTOR_DEBUG"):
            raise
        first = str(exc).splitlines()[0] if str(exc) else ""
        fail(f"internal error: {type(exc).__name__}: {first} (set LLMDOCTOR_DEBUG=1 for details)")
    return code if isinstance(code, int) else 0
