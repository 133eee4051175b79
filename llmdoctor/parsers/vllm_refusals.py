"""vLLM's deliberate 503s: the server works and chose not to serve this request now.

Two kinds, told apart from a dead engine by their text (vLLM's own messages, 0.32 and 0.33):

- admission control (`--max-num-queued-reqs`, `--max-num-queued-tokens`), the excess refused:
  `{"error":{"message":"The engine is currently busy and cannot accept new requests. Please try
  again later or on a different instance.", …, "code":503}}`, or `… has reached its prefill token
  backlog limit. …`;
- the elastic expert-parallel scaling pause, every path refused (0.33 keeps /health):
  `{"error":"The model is currently scaling. Please try again later."}`, and on a rank a
  scale-down removed `This data-parallel rank has been retired and is awaiting shutdown.`
"""

from __future__ import annotations

from dataclasses import dataclass

ADMISSION_RUNBOOK = "admission-control-rejecting"
SCALING_RUNBOOK = "elastic-ep-scaling-pause"

# literal phrases, found with `in`: linear in the body whatever it holds
_KINDS = (
    (
        "The engine is currently busy and cannot accept new requests",
        "admission control turned the request away: --max-num-queued-reqs is reached",
        ADMISSION_RUNBOOK,
    ),
    (
        "The engine has reached its prefill token backlog limit",
        "admission control turned the request away: --max-num-queued-tokens is reached",
        ADMISSION_RUNBOOK,
    ),
    (
        "The model is currently scaling",
        "the server pauses serving while it rescales (elastic expert parallelism)",
        SCALING_RUNBOOK,
    ),
    (
        "This data-parallel rank has been retired and is awaiting shutdown",
        "this data-parallel rank was retired by a scale-down and waits to be removed",
        SCALING_RUNBOOK,
    ),
)
_SCAN = 4096  # the messages open the body; a long body is not read further


@dataclass(frozen=True)
class Refusal:
    """What vLLM said it is doing, and the runbook entry for it."""

    what: str
    runbook: str


def deliberate_refusal(text: object) -> Refusal | None:
    """The refusal a 503 body (or an error message quoting it) states, or None."""
    if not isinstance(text, str) or not text:
        return None
    head = text[:_SCAN]
    for phrase, what, runbook in _KINDS:
        if phrase in head:
            return Refusal(what, runbook)
    return None
