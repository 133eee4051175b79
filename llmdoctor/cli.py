"""The typer application. Commands live in llmdoctor/commands/<name>.py, each with register(app).

Only typer (and rich, for help) are imported here; every heavy module is imported inside the
command that needs it, so `llmdoctor --help` starts fast.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys

import typer

from llmdoctor import __version__
from llmdoctor.exit_codes import ExitCode

COMMANDS = (
    "diagnose",
    "node",
    "probe",
    "explain",
    "wiki",
    "collect",
    "capacity",
    "alerts",
    "exporter",
    "mcp",
    "completion",
)

HELP = """Diagnose vLLM inference services on NVIDIA GPUs and Kubernetes, and keep the team's runbooks.

Examples:

\b
  llmdoctor diagnose pod/vllm-7b -n serving     # during an incident
  llmdoctor diagnose --bundle incident.tgz      # a saved incident, offline
  llmdoctor node                                 # on a GPU node: driver/CUDA/torch, memory, Xid
  llmdoctor probe http://vllm:8000               # one vLLM endpoint: queues, health, generation
  llmdoctor explain crash.log                    # any log -> matching runbook entries
  llmdoctor wiki search OOM                      # the runbook wiki

Exit codes: 0 healthy, 1 warnings, 2 critical findings, 3 could not run.
"""


def _version(value: bool) -> None:
    if value:
        typer.echo(f"llmdoctor {__version__}")
        raise typer.Exit(0)


def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Show the version and exit."
    ),
) -> None:
    """Diagnose vLLM inference services on NVIDIA GPUs and Kubernetes."""


def build_app(commands: tuple[str, ...] = COMMANDS) -> typer.Typer:
    """The typer app with the given commands (all by default) registered."""
    application = typer.Typer(
        name="llmdoctor",
        help=HELP,
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    application.callback()(_root)
    for name in commands:
        module_name = f"llmdoctor.commands.{name}"
        if importlib.util.find_spec(module_name) is None:
            continue
        importlib.import_module(module_name).register(application)
    return application


def __getattr__(name: str):
    # `llmdoctor.cli.app` (all commands) is built on first use: run() builds only the one
    # command it is about to run, which keeps start-up short.
    if name == "app":
        globals()["app"] = build_app()
        return globals()["app"]
    raise AttributeError(name)


def fail(message: str) -> None:
    """Print a one-line error to stderr and exit 3."""
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
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())  # the interpreter's final flush goes nowhere
            os.close(devnull)
        except (OSError, ValueError, AttributeError):
            pass

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def _terminated(signum, frame) -> None:
    # SIGTERM unwinds like Ctrl-C: `finally` blocks and context managers (an unpacked bundle's
    # temporary folder, a half-written archive) clean up before the process ends
    raise SystemExit(128 + signum)


def run(argv: list[str] | None = None) -> None:
    """Run the app: user errors become one line and exit 3, never a traceback."""
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
        _run(argv)
    finally:
        if sys.stdout is not stdout and isinstance(sys.stdout, PipeSafeStdout):
            sys.stdout.flush()
            sys.stdout = stdout
        if in_main and previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _run(argv: list[str] | None) -> None:
    from llmdoctor.errors import LlmdoctorError

    args = sys.argv[1:] if argv is None else argv
    if os.environ.get("_LLMDOCTOR_COMPLETE") or os.environ.get("_KUBECTL_LLMDOCTOR_COMPLETE"):
        from llmdoctor.commands.shell_completion import enable_shell_completion

        enable_shell_completion()  # the shell asks for completions (llmdoctor completion SHELL)
    commands = (args[0],) if args and args[0] in COMMANDS else COMMANDS
    try:
        application = build_app(commands)
        rv = application(args=args or ["--help"], prog_name="llmdoctor", standalone_mode=False)
    except LlmdoctorError as exc:
        fail(str(exc))
    except typer.Exit as exc:
        raise SystemExit(exc.exit_code) from None
    except typer.Abort:
        sys.stderr.write("llmdoctor: aborted\n")
        raise SystemExit(130) from None
    except typer.TyperException as exc:
        # usage errors exit 3 here: 2 means "critical findings" in llmdoctor's contract
        message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
        if type(exc).__name__ == "NoSuchOption":
            from llmdoctor.commands.option_aliases import unknown_option_message

            message = unknown_option_message(exc) or message
        fail(message.replace("\n", " "))
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
    raise SystemExit(rv if isinstance(rv, int) else 0)
