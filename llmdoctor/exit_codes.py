"""Process exit codes: one place, as docs/guarantees.md documents them."""

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    WARNING = 1
    CRITICAL = 2
    CANNOT_RUN = 3
