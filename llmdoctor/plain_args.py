"""A command's few options read with the standard library alone, for the start-up paths that skip
the CLI framework (`wiki search`, `explain`): whatever is not plainly valid (help, `--`, an
unknown option, a missing or malformed value) is None, handed back to typer, which stays the one
authority on usage errors.
"""

from __future__ import annotations


def plain_args(
    args: list[str], flags: tuple[str, ...], with_value: tuple[str, ...], repeated=()
) -> tuple[list[str], dict] | None:
    """(the arguments, {option: its value, or a list of them when `repeated`; flag: True}),
    or None. `--name=value` and `--name value` both read; the last of a repeated option wins
    unless it is in `repeated`."""
    positional: list[str] = []
    found: dict = {}
    i = 0
    while i < len(args):
        arg = args[i]
        name, eq, inline = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        if name in flags and not eq:
            found[name] = True
        elif name in with_value:
            if eq:
                value = inline
            elif i + 1 < len(args):
                i += 1
                value = args[i]
            else:
                return None
            if name in repeated:
                found.setdefault(name, []).append(value)
            else:
                found[name] = value
        elif arg == "-" or not arg.startswith("-"):
            positional.append(arg)
        else:
            return None
        i += 1
    return positional, found


def bounded_int(value: str, low: int, high: int) -> int | None:
    """The option's value as an int when it is plain ASCII digits within [low, high], else
    None ('²' is a digit to str.isdigit(), not to int(); '٣' is one to int(): typer's answer)."""
    if not (value.isascii() and value.isdigit() and len(value) <= 6):
        return None
    number = int(value)
    return number if low <= number <= high else None
