"""Entry point: `llmdoctor` and `python -m llmdoctor`. Kept tiny so --help starts fast."""


def main() -> None:
    import sys

    args = sys.argv[1:]
    if args[:2] == ["wiki", "search"]:
        # the most typed command starts without the CLI framework (llmdoctor/wiki/search_cli.py)
        from llmdoctor.wiki.search_cli import fast_main

        code = fast_main(args[2:])
        if code is not None:
            # the process ends here, once what it printed is written: without the interpreter's
            # shutdown (its last garbage collection, every module torn down: ~1.5-2.5 ms of a
            # ~25 ms search); nothing of the search path registers atexit work
            import os

            for stream in (sys.stdout, sys.stderr):
                try:
                    if stream is not None:
                        stream.flush()
                except (OSError, ValueError):
                    pass  # (run_search reported an unwritable stdout already)
            os._exit(code)
    from llmdoctor.cli import run
    from llmdoctor.engine.deadline import exit_process

    try:
        run()
    except SystemExit as done:
        exit_process(done.code)
    exit_process(0)


if __name__ == "__main__":
    main()
