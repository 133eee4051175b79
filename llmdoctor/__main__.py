"""Entry point: `llmdoctor` and `python -m llmdoctor`. Kept tiny so --help starts fast."""


def main() -> None:
    import sys

    args = sys.argv[1:]
    if args[:2] == ["wiki", "search"]:
        # the most typed command starts without the CLI framework (llmdoctor/wiki/search_cli.py)
        from llmdoctor.wiki.search_cli import fast_main

        code = fast_main(args[2:])
        if code is not None:
            if sys.stdout is not None:
                sys.stdout.flush()
            # the process ends here: spare it the interpreter's last garbage collection, over
            # every object that start-up and the search made (~2 ms of a ~25 ms search)
            import gc

            gc.freeze()
            raise SystemExit(code)
    from llmdoctor.cli import run

    run()


if __name__ == "__main__":
    main()
