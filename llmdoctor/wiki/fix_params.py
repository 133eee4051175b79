"""Parameters in a runbook's Fix: `{max_model_len}` stands for a value a finding can fill from
its evidence (vLLM's own "estimated maximum model length is 5632"); where no finding filled it,
the text shows what the value is, never a stock number that reads as this incident's.

    1. Set the context you serve: `--max-model-len {max_model_len}`

prints `--max-model-len 5632` under a finding that read the estimate, and
`--max-model-len <the estimated maximum model length in vLLM's error>` everywhere else.

A parameter is `{` + a known lowercase name + `}`; other braces (YAML flow maps, JSON, `${VAR}`)
are text. Scanning is plain string search (no regex: the text is a team's own).

A step may also say what it acts on, just after its list marker: `2. [node] Reload the driver`
(`step_tag`); reports leave it out under a finding about the other kind of subject.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

# name -> (what the value is, shown where it is unknown; how a value is written)
PARAMETERS: dict[str, tuple[str, str]] = {
    "max_model_len": ("the estimated maximum model length in vLLM's error", "int"),
    "gpu_memory_utilization": ("a fraction that fits the GPU memory free at startup", "fraction"),
    "pid": ("the pid holding the memory", "int"),
    "gpu_memory": ("the GPU's memory", "gib"),  # PyTorch's OOM: 'a total capacity of'
}
NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_")
SUBJECT_KINDS = ("pod", "node")  # a pod and the server in it; a machine and its GPUs


def is_list_marker(word: str) -> bool:
    """Whether `word` starts a Markdown list item: `-`, `*`, `+`, `1.` or `1)`."""
    return word in ("-", "*", "+") or (word[:-1].isdigit() and word[-1:] in ".)")


def step_tag(line: str) -> tuple[str, bool] | None:
    """A Fix step's tag, the bracketed word just after its list marker (`1. [pod] …`), and
    whether the reports read it (a subject kind, lower case, a space after it); None when the
    line has no such tag."""
    head, sep, rest = line.lstrip().partition(" ")
    if not sep or not is_list_marker(head) or not rest.startswith("["):
        return None
    close = rest.find("]", 0, 12)
    word = rest[1:close] if close > 1 else ""
    if not word.isalpha():
        return None
    return word, word in SUBJECT_KINDS and rest[close + 1 : close + 2] == " "


def _candidates(text: str) -> Iterator[tuple[int, int, str]]:
    """(start, end, name) for every `{name}` whose name is lowercase letters, digits and _."""
    start = text.find("{")
    while start != -1:
        end = text.find("}", start + 1)
        if end == -1:
            return
        name = text[start + 1 : end]
        if name and name[0].isalpha() and set(name) <= NAME_CHARS:
            yield start, end + 1, name
            start = text.find("{", end + 1)
        else:
            start = text.find("{", start + 1)


def parameters_in(text: str) -> list[str]:
    """Every `{name}` in the text, known or not, in order (lint says which are unknown)."""
    return [name for _, _, name in _candidates(text)]


def placeholder(name: str) -> str:
    """How an unfilled parameter reads: its meaning in angle brackets."""
    return f"<{PARAMETERS[name][0]}>"


def format_value(name: str, value: object) -> str | None:
    """The value as the Fix prints it, or None when it is not a valid value for the name
    (values come from logs and GPU readings: a number of the right kind, nothing else)."""
    kind = PARAMETERS[name][1]
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if kind == "int":
        return str(int(value)) if value == int(value) and value > 0 else None
    if kind == "fraction":
        return f"{value:.2f}" if 0 < value <= 1 else None
    if kind == "gib":
        return f"{value:g}GiB" if 0 < value < 100_000 else None
    return None


def fills(text: str, values: Mapping[str, object] | None) -> bool:
    """Whether `fill` puts at least one of these values (a valid one) into the text."""
    return (
        any(
            name in PARAMETERS and name in values and format_value(name, values[name]) is not None
            for _, _, name in _candidates(text)
        )
        if values
        else False
    )


def fill(text: str, values: Mapping[str, object] | None = None) -> str:
    """The text with each known parameter replaced by its value, else by its placeholder."""
    values = values or {}
    out: list[str] = []
    cursor = 0
    for start, end, name in _candidates(text):
        if name not in PARAMETERS:
            continue
        shown = format_value(name, values[name]) if name in values else None
        out += [text[cursor:start], shown if shown is not None else placeholder(name)]
        cursor = end
    out.append(text[cursor:])
    return "".join(out)
