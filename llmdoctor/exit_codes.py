"""Process exit codes: one place, as the README documents them."""

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    WARNING = 1
    CRITICAL = 2
    CANNOT_RUN = 3
