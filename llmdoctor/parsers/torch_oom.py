"""PyTorch's CUDA out-of-memory message, with its numbers.

Real inputs (sources in tests/fixtures/logs/SOURCES.md):

    torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.96 GiB. GPU 0 has a total
    capacity of 79.18 GiB of which 1.08 GiB is free. Including non-PyTorch memory, this process
    has 78.09 GiB memory in use. Of the allocated memory 75.31 GiB is allocated by PyTorch, and
    1.83 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large
    try setting PYTORCH_ALLOC_CONF=expandable_segments:True to avoid fragmentation. ...

    (older PyTorch) CUDA out of memory. Tried to allocate 1.63 GiB (GPU 0; 44.56 GiB total
    capacity; 27.91 GiB already allocated; 565.31 MiB free; 27.93 GiB reserved in total by PyTorch)

(each message is one line in the log; wrapped here). Sizes are returned in MiB.

A CUDA out-of-memory without PyTorch's numbers (the CUDA runtime's `RuntimeError: CUDA error:
out of memory`, or a message cut short) is still an OOM: its numbers are None, so nobody can
tell fragmentation from shortage by it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from llmdoctor.parsers.vllm_memory_check import parse_free_memory_check

_SIZE = r"(?<![\d.])(\d+(?:\.\d+)?) ?(B|bytes|KiB|MiB|GiB|TiB)"  # a whole number: "0.0.31" is none
_UNIT_MIB = {
    "B": 1 / 2**20,
    "bytes": 1 / 2**20,
    "KiB": 1 / 1024,
    "MiB": 1,
    "GiB": 1024,
    "TiB": 2**20,
}

_CUDA_OOM = re.compile(r"CUDA out of memory|CUDA error: out of memory|cudaErrorMemoryAllocation")
_TRIED = re.compile(r"Tried to allocate " + _SIZE)
_GPU = re.compile(r"GPU (\d+)")
_NEW_TOTAL = re.compile(r"total capacity of " + _SIZE + r" of which " + _SIZE + r" is free")
_NEW_ALLOCATED = re.compile(_SIZE + r" is allocated by PyTorch")
_NEW_UNALLOCATED = re.compile(_SIZE + r" is reserved by PyTorch but unallocated")
_OLD = re.compile(
    _SIZE
    + r" total capacity; "
    + _SIZE
    + r" already allocated; "
    + _SIZE
    + r" free; "
    + _SIZE
    + r" reserved in total by PyTorch"
)


FRAGMENTED_SHARE = 0.02  # reserved-but-unallocated of at least 2 % of the GPU counts as large


@dataclass(frozen=True)
class TorchOom:
    """The numbers of one CUDA out-of-memory message, in MiB."""

    tried: float | None
    total: float | None
    free: float | None
    allocated: float | None
    unallocated: float | None  # reserved by PyTorch's caching allocator but not in use
    gpu: int | None = None

    @property
    def has_numbers(self) -> bool:
        """Whether the message says how much was asked, free and held unallocated."""
        return None not in (self.tried, self.total, self.free, self.unallocated)

    @property
    def fragmented_would_fit(self) -> bool:
        """Whether the request would have fit if the reserved-but-unallocated memory were free."""
        if self.unallocated is None or self.free is None or self.tried is None:
            return False
        return self.free + self.unallocated >= self.tried

    @property
    def is_fragmentation(self) -> bool:
        """A large reserved-but-unallocated share (FRAGMENTED_SHARE of the GPU), without which
        the request would have fit: the memory-fragmentation check's verdict, and the one
        log-signatures keeps the fragmentation entry's signature to."""
        if self.unallocated is None or not self.total:
            return False
        return self.unallocated >= FRAGMENTED_SHARE * self.total and self.fragmented_would_fit


def _mib(number: str, unit: str) -> float:
    return float(number) * _UNIT_MIB[unit]


def parse_torch_oom(line: str) -> TorchOom | None:
    """The numbers of a CUDA out-of-memory message on this line (None where it gives none),
    or None when the line is not one."""
    if "out of memory" not in line or not _CUDA_OOM.search(line):
        return None
    tried = _TRIED.search(line)
    if tried is None:
        return TorchOom(tried=None, total=None, free=None, allocated=None, unallocated=None)
    gpu = _GPU.search(line, tried.end())
    gpu_index = int(gpu.group(1)) if gpu else None
    new = _NEW_TOTAL.search(line)
    if new:
        allocated = _NEW_ALLOCATED.search(line)
        unallocated = _NEW_UNALLOCATED.search(line)
        return TorchOom(
            tried=_mib(*tried.groups()),
            total=_mib(new.group(1), new.group(2)),
            free=_mib(new.group(3), new.group(4)),
            allocated=_mib(*allocated.groups()) if allocated else None,
            unallocated=_mib(*unallocated.groups()) if unallocated else None,
            gpu=gpu_index,
        )
    old = _OLD.search(line)
    if old:
        g = old.groups()
        allocated, reserved = _mib(g[2], g[3]), _mib(g[6], g[7])
        return TorchOom(
            tried=_mib(*tried.groups()),
            total=_mib(g[0], g[1]),
            free=_mib(g[4], g[5]),
            allocated=allocated,
            unallocated=max(reserved - allocated, 0.0),
            gpu=gpu_index,
        )
    return TorchOom(
        tried=_mib(*tried.groups()),
        total=None,
        free=None,
        allocated=None,
        unallocated=None,
        gpu=gpu_index,
    )


FRAGMENTATION_ENTRY = "gpu-memory-fragmentation"  # its signature is the GiB-sized figure
OTHER_PROCESS_ENTRY = "gpu-memory-taken-by-other-process"  # its signatures: the processes listed
_PROCESS = re.compile(r"Process \d+ has " + _SIZE + r" memory in use")
_THIS_PROCESS = re.compile(r"this process has " + _SIZE + r" memory in use")
# a process holding less than this is a CUDA context (each tensor-parallel rank's, on every GPU),
# not memory taken from the one that ran out
HELD_BY_ANOTHER = 1024.0  # MiB


def short_not_fragmented(lines: Iterable[str]) -> bool:
    """Whether PyTorch's numbers on these OOM lines (those that give them) all say the GPU was
    short, not fragmented: the fragmentation entry's signature (a GiB reserved but unallocated)
    fired, but `is_fragmentation`, the memory-fragmentation check's verdict, says otherwise.
    log-signatures and explain both hold the entry to it, so one OOM is told one way."""
    told = [oom for oom in map(parse_torch_oom, lines) if oom is not None and oom.has_numbers]
    return bool(told) and not any(oom.is_fragmentation for oom in told)


def others_hold_little(lines: Iterable[str]) -> bool:
    """Whether PyTorch's OOM lines that list processes (those that do) all say no other process
    holds HELD_BY_ANOTHER or more. In a container PyTorch cannot tell its own pid among the
    host's: it lists itself too and says no `this process has …`; there the listed process that
    holds at least what PyTorch allocated and reserved, the closest such, is itself. vLLM's
    free-memory check says so where no more is in use than the process itself holds
    (vllm_memory_check: a utilization above 0.95 that left it no room)."""
    told = False
    for line in lines:
        check = parse_free_memory_check(line)
        if check is not None:
            if not check.own_overhead_only:
                return False
            told = True
            continue
        if "memory in use" not in line:
            continue
        held = [_mib(number, unit) for number, unit in _PROCESS.findall(line)]
        if not held:
            continue
        told = True
        oom = parse_torch_oom(line)
        if not _THIS_PROCESS.search(line) and oom is not None and oom.allocated is not None:
            own = oom.allocated + (oom.unallocated or 0.0)
            mine = [h for h in held if h >= own]
            if mine:
                held.remove(min(mine))
        if any(h >= HELD_BY_ANOTHER for h in held):
            return False
    return told


# the entries whose signature PyTorch's own numbers on the same line can contradict, and how
RULED_OUT_BY_NUMBERS = {
    FRAGMENTATION_ENTRY: short_not_fragmented,
    OTHER_PROCESS_ENTRY: others_hold_little,
}
