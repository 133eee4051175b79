"""Entry point: `llmdoctor` and `python -m llmdoctor`. Kept tiny so --help starts fast."""


def main() -> None:
    from llmdoctor.cli import run

    run()


if __name__ == "__main__":
    main()
