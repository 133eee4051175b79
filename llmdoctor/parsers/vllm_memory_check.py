"""vLLM's start-up check of free GPU memory, with its numbers.

Real inputs (tests/fixtures/runbooks/gpu-memory-taken-by-other-process/,
tests/fixtures/runbooks/vllm-startup-memory-insufficient/):

    ValueError: Free memory on device cuda:0 (1.53/22.05 GiB) on startup is less than desired
    GPU memory utilization (0.9, 19.84 GiB). Decrease GPU memory utilization or reduce GPU
    memory used by other processes.

(one line in the log; builds before 0.10 omit `cuda:0`). The check runs once the worker holds
its CUDA context and, with several GPUs, NCCL's buffers: what is in use is those and whatever
other processes hold.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_CHECK = re.compile(
    r"Free memory on device (?:[a-z]+:[0-9]+ )?\(([0-9.]+)/([0-9.]+) GiB\) on startup is less "
    r"than desired GPU memory utilization \(([0-9.]+), ([0-9.]+) GiB\)"
)
# the entry a check whose numbers show little in use is, rather than another process's memory
STARTUP_ENTRY = "vllm-startup-memory-insufficient"
# what a process itself may hold when the check runs, as a share of the GPU: its CUDA context
# (~0.5 GiB), NCCL's and a network plugin's buffers (several GiB with expert parallelism)
OWN_SHARE = 0.05


@dataclass(frozen=True)
class FreeMemoryCheck:
    """The numbers of one failed check, in GiB."""

    free: float
    total: float
    utilization: float
    desired: float

    @property
    def in_use(self) -> float:
        return self.total - self.free

    @property
    def own_overhead_only(self) -> bool:
        """Whether no more is in use than the process itself may hold (OWN_SHARE of the GPU):
        the utilization asked, above 1 - OWN_SHARE, left it no room; no other process need hold
        anything."""
        return self.in_use <= OWN_SHARE * self.total


def parse_free_memory_check(line: str) -> FreeMemoryCheck | None:
    """The numbers of vLLM's failed free-memory check on this line, or None."""
    if "on startup is less than desired" not in line:
        return None
    found = _CHECK.search(line)
    if found is None:
        return None
    try:
        free, total, utilization, desired = map(float, found.groups())
    except ValueError:  # `1.2.3`: no number
        return None
    if not 0 <= free <= total or total == 0:  # no GPU's numbers
        return None
    return FreeMemoryCheck(free, total, utilization, desired)
