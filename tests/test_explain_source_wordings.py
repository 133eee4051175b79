"""Wordings taken from the software's own messages name their entry.

Fresh reports quote what vLLM, PyTorch, NCCL, Ray, transformers, huggingface_hub, containerd,
the kubelet and NVIDIA's tools print. Each `wordings-from-source.log` under
tests/fixtures/runbooks/<id>/ holds one line per message an entry's signatures or hints were
written from, in the exact format the program prints it (SOURCES.md beside it names the
program, its version and file). A line pasted alone must bring its entry back first: named when
a signature fired, the closest guess when only a hint did.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from llmdoctor.engine.textsource import TextSource
from llmdoctor.triage.explain import explain

RUNBOOK_FIXTURES = Path(__file__).parent / "fixtures" / "runbooks"
WORDINGS = sorted(RUNBOOK_FIXTURES.glob("*/wordings-from-source.log"))
# a message printed over two lines (NGC's driver banner) is pasted as the program prints it
CONTINUED = "       "


def _messages(path: Path) -> list[str]:
    messages: list[str] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith(CONTINUED) and messages and messages[-1].endswith(" but"):
            messages[-1] += "\n" + line
        elif line.strip():
            messages.append(line)
    return messages


CASES = [
    pytest.param(path.parent.name, message, id=f"{path.parent.name}:{n}")
    for path in WORDINGS
    for n, message in enumerate(_messages(path), 1)
]


def test_every_entry_with_source_wordings_has_a_sources_row_for_them():
    # a line written from a program's message format must say which program prints it
    for path in WORDINGS:
        sources = (path.parent / "SOURCES.md").read_text(encoding="utf-8")
        assert f"| {path.name} |" in sources or f"`{path.name}`" in sources, path


@pytest.mark.parametrize(("entry_id", "message"), CASES)
def test_a_message_the_software_prints_names_its_entry_first(entries, entry_id, message):
    # the signature or hint written from this message must fire on it, for this entry first
    entry = entries[entry_id]
    result = explain(TextSource.from_text("paste", message + "\n"), entries)
    # a stop from outside with nothing failing after it is told as a note (nothing to fix):
    # its entry is named first all the same
    ranked = [*result.matches, *result.notes, *result.below_threshold]
    assert ranked, f"nothing for {message!r}"
    assert ranked[0].id == entry_id, [(m.id, m.confidence) for m in ranked[:3]]
    hinted_only = all(
        not any(re.search(s, line) for s in entry.signatures) for line in message.splitlines()
    )
    # a signature names it (confident); a hint alone leaves it the closest guess
    named = result.how == "signatures" or bool(result.notes)
    assert named != hinted_only, result.how
