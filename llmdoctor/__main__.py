"""Entry point: `llmdoctor` and `python -m llmdoctor`. Kept tiny so --help starts fast."""

import os
import sys


def _exit_now(code: int) -> None:
    """End the process once what it printed is written, without the interpreter's shutdown."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            pass  # (the command reported an unwritable stdout already)
    os._exit(code)


def end_process(code: int | str | None) -> None:
    """End the process with `code`, as SystemExit would. While a thread abandoned at its
    deadline still runs, the interpreter's shutdown is skipped: a daemon thread caught inside
    the Kubernetes client or writing to stderr while the interpreter finalises aborts the
    process (SIGABRT, exit -6) instead of giving the exit code."""
    # a command that never imported the deadline module abandoned no thread: not imported
    # here only to say so (it brings concurrent.futures, ~4 ms of explain's start-up)
    deadline = sys.modules.get("llmdoctor.engine.deadline")
    if deadline is not None and deadline.abandoned_threads_running():
        if code is None or isinstance(code, int):
            _exit_now(code or 0)
        sys.stderr.write(f"{code}\n")
        _exit_now(1)
    raise SystemExit(code)


def main() -> None:
    args = sys.argv[1:]
    from llmdoctor.command_run import shell_completing

    completing = shell_completing()
    if args[:2] == ["wiki", "search"] and not completing:
        # the most typed command starts without the CLI framework (llmdoctor/wiki/search_cli.py)
        from llmdoctor.wiki.search_cli import fast_main

        code = fast_main(args[2:])
        if code is not None:
            # without the interpreter's shutdown (its last garbage collection, every module torn
            # down: ~1.5-2.5 ms of a ~25 ms search); nothing of the search path registers
            # atexit work
            _exit_now(code)
    if args[:1] == ["explain"] and not completing:
        # typed at 3 a.m. on a pasted log: starts without the CLI framework too
        # (llmdoctor/commands/explain_cli.py); returns when typer must read the arguments
        from llmdoctor.commands.explain_cli import fast_main as explain_fast

        try:
            explain_fast(args[1:])
        except SystemExit as done:
            end_process(done.code)
    from llmdoctor.cli import run

    try:
        run()
    except SystemExit as done:
        end_process(done.code)
    end_process(0)


if __name__ == "__main__":
    main()
