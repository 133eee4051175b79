"""The typer application. Commands live in llmdoctor/commands/<name>.py, each with register(app).

Only typer (and rich, for help) are imported here; every heavy module is imported inside the
command that needs it, so `llmdoctor --help` starts fast.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys

import typer

from llmdoctor import __version__
from llmdoctor.command_run import PipeSafeStdout, fail, run_command, shell_completing

__all__ = ["COMMANDS", "PipeSafeStdout", "build_app", "fail", "run"]

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


def run(argv: list[str] | None = None) -> None:
    """Run the app: user errors become one line and exit 3, never a traceback."""
    run_command(lambda: _run(argv))


def _run(argv: list[str] | None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if shell_completing():
        from llmdoctor.commands.shell_completion import enable_shell_completion

        enable_shell_completion()  # the shell asks for completions (llmdoctor completion SHELL)
    commands = (args[0],) if args and args[0] in COMMANDS else COMMANDS
    try:
        application = build_app(commands)
        rv = application(args=args or ["--help"], prog_name="llmdoctor", standalone_mode=False)
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
    return rv if isinstance(rv, int) else 0
