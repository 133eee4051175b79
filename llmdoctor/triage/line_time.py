"""When a log line says it was written, in the forms the logs explain reads put first on a line,
so that two lines can be ordered in time where their clocks can be compared: only within one
form (a vLLM line's `05-14 03:00:05` and a kernel's `[Tue May 14 03:41:11 2024]` may be written
by clocks in two time zones; a log shown newest first, as RunPod's console does, makes line
order no proof either).
"""

from __future__ import annotations

import re

MONTHS = {
    m: i
    for i, m in enumerate(
        ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), 1
    )
}
PREFIX = 120  # characters of a line its time is looked for in (not a time in its message)

# (form, pattern); the first that matches a line's prefix gives its time. ISO before vLLM's form,
# whose `05-14 03:00:05` an ISO `2024-05-14 03:00:05` also holds
_FORMS = (
    # ISO 8601 (kubectl --timestamps, TGI, Ray, most JSON loggers), with or without the `T`; one
    # that says its zone (`Z`, `+08:00`) is another form than one that does not
    (
        "iso",
        re.compile(
            r"\b(\d{4})-(\d\d)-(\d\d)[T ](\d\d):(\d\d):(\d\d)(?:[.,]\d+)?(Z|[+-]\d\d:?\d\d)?"
        ),
    ),
    # `dmesg -T`, and any C `ctime()`: `Tue May 14 03:41:11 2024`
    (
        "ctime",
        re.compile(r"\b[A-Z][a-z]{2} ([A-Z][a-z]{2}) +(\d{1,2}) (\d\d):(\d\d):(\d\d) (\d{4})\b"),
    ),
    # glog, as the kubelet writes it (`E0514 03:10:02.612000`) and PyTorch's c10d, its month unpadded (`E514`)
    ("glog", re.compile(r"\b[IWEF](\d{1,2})(\d\d) (\d\d):(\d\d):(\d\d)\.\d+")),
    # vLLM's logger: `ERROR 05-14 03:00:05 [core.py:400]`
    ("vllm", re.compile(r"\b(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)\b")),
    # syslog and journald's short form at the start of a line: `May 14 02:58:33 gpu-node-7 kernel:`
    ("syslog", re.compile(r"^([A-Z][a-z]{2}) +(\d{1,2}) (\d\d):(\d\d):(\d\d)\b")),
)


def line_time(text: str) -> tuple[str, int] | None:
    """(form, seconds) of the time a line starts with; the seconds compare only within one form
    (those without a year count from the start of theirs: a log that runs over New Year is out
    of order there). None where the line's prefix holds none of the forms."""
    head = text[:PREFIX]
    for form, pattern in _FORMS:
        m = pattern.search(head)
        if m is None:
            continue
        east = 0  # seconds the clock is ahead of UTC, where the line says
        if form == "iso":
            year, month, day, h, mi, s = map(int, m.groups()[:6])
            if (zone := m[7]) is not None:  # compared in UTC, with other times that say a zone
                form = "iso-utc"
                if zone != "Z":
                    digits = zone[1:].replace(":", "")
                    east = (1 if zone[0] == "+" else -1) * (int(digits[:2]) * 60 + int(digits[2:]))
                    east *= 60
        elif form == "ctime":
            month = MONTHS.get(m[1], 0)
            day, h, mi, s, year = map(int, m.groups()[1:])
        elif form == "syslog":
            year, month = 0, MONTHS.get(m[1], 0)
            day, h, mi, s = map(int, m.groups()[1:])
        else:
            year = 0
            month, day, h, mi, s = map(int, m.groups())
        if not (1 <= month <= 12 and 1 <= day <= 31 and h < 24 and mi < 60 and s < 61):
            return None
        return form, ((((year * 12 + month) * 31 + day) * 24 + h) * 60 + mi) * 60 + s - east
    return None


YEARLESS = frozenset({"vllm", "glog", "syslog"})
HALF_A_YEAR = 183 * 24 * 3600  # a year-less time further on than this may be the year before's


def written_after(later: list[str], earlier: list[str], margin: int) -> bool:
    """Whether every line of `later` was written more than `margin` seconds after every line of
    `earlier`, by a clock both show in one form; False where no form is common to them, and for
    a form without a year where the gap is half a year or more (12-31 then 01-01 reads as a
    year back)."""
    first: dict[str, int] = {}
    for text in later:
        if (found := line_time(text)) is not None:
            form, at = found
            first[form] = min(first.get(form, at), at)
    last: dict[str, int] = {}
    for text in earlier:
        if (found := line_time(text)) is not None:
            form, at = found
            last[form] = max(last.get(form, at), at)
    return any(
        form in last
        and at > last[form] + margin
        and (form not in YEARLESS or at - last[form] < HALF_A_YEAR)
        for form, at in first.items()
    )
