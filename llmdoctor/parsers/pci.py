"""PCI bus ids in the forms NVIDIA tools print them, reduced to one comparable key.

Xid lines say `PCI:0000:3b:00` (4-digit domain, no function), NVML and nvidia-smi say
`00000000:3B:00.0` (8-digit domain, upper case, function). Both become `0000:3b:00`.
"""

from __future__ import annotations

import re

_BUS_ID = re.compile(
    r"(?:PCI:)?(?P<domain>[0-9a-fA-F]{1,8}):(?P<bus>[0-9a-fA-F]{2}):(?P<device>[0-9a-fA-F]{2})"
    r"(?:\.(?P<function>[0-7]))?"
)


def pci_key(text: str | None) -> str | None:
    """'00000000:3B:00.0', '0000:3b:00' or 'PCI:0000:3b:00' -> '0000:3b:00'; None if not a bus id."""
    if not text:
        return None
    m = _BUS_ID.search(text.strip())
    if m is None:
        return None
    domain = int(m["domain"], 16)
    return f"{domain:04x}:{m['bus'].lower()}:{m['device'].lower()}"


def pci_display(text: str | None) -> str | None:
    """A bus id as people read it: '0000:3b:00.0'."""
    key = pci_key(text)
    return f"{key}.0" if key else None
