"""vLLM's periodic stats line, generation by generation: which runbook entry each one explains.

V0 prints `Running: N reqs, Swapped: N reqs, Pending: N reqs, GPU KV cache usage: …`; V1 0.8-0.11
`Engine 000: … Running: N reqs, Waiting: N reqs, GPU KV cache usage: …`; from ~0.12 V1 adds
`Preemptions: N` when there were any. Real lines (tests/fixtures/vllm/logs/SOURCES.md and the
runbook fixtures), except the one 0.12+ `Preemptions:` line, rendered from loggers.py's format.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from llmdoctor.engine.textsource import TextSource
from llmdoctor.triage.explain import explain

FIXTURES = Path(__file__).parent / "fixtures"
LOGS = FIXTURES / "vllm" / "logs"
RUNBOOK_FIXTURES = FIXTURES / "runbooks"


def matched(path: Path, entries) -> list[str]:
    return signature_ids(path.name, path.read_text(), entries)


def signature_ids(name: str, text: str, entries) -> list[str]:
    result = explain(TextSource.from_text(name, text), entries)
    return [m.id for m in result.matches if m.how == "signature"]


@pytest.mark.parametrize(
    "path,expected",
    [
        # V0: Pending is V0's word for waiting; KV at 99 %
        (
            LOGS / "v0-running-35-pending-115-kv-99pct-issue2731.log",
            {"queue-saturation", "kv-cache-preemption"},
        ),
        # V0: one request running, nothing generated for minutes
        (
            RUNBOOK_FIXTURES
            / "engine-wedged"
            / "vllm-v0-cpu-endless-loop-0-tokens-running-1-issue12795.log",
            {"engine-wedged"},
        ),
        # V1 0.10: a queue of hundreds at the max_num_seqs plateau
        (
            RUNBOOK_FIXTURES
            / "queue-saturation"
            / "vllm-v1-running-256-waiting-754-kv-42pct-a100-tp2-stats.log",
            {"queue-saturation"},
        ),
        # V1 0.12+: Preemptions on the stats line while KV reads 91.2 %
        (
            RUNBOOK_FIXTURES
            / "kv-cache-preemption"
            / "vllm-v1-0.12plus-stats-line-with-preemptions-rendered-from-loggers.log",
            {"kv-cache-preemption"},
        ),
    ],
    ids=lambda v: v.name if isinstance(v, Path) else None,
)
def test_stats_line_of_each_generation_leads_to_its_entry(path, expected, entries):
    assert set(matched(path, entries)) == expected


@pytest.mark.parametrize(
    "name",
    [
        "v1-0.9-idle-after-one-request-pr20443.log",
        "v1-0.12-healthy-decoding-one-request-issue30599.log",
        "v1-0.10-kv-93-96pct-8-running-pr21809.log",
    ],
)
def test_healthy_stats_lines_match_nothing(name, entries):
    # an idle engine (Running: 0, 0.0 tokens/s) is not a wedged one; a KV cache at 95 % with
    # nothing waiting (PR 21809's lines) is a cache in use, not requests waiting for blocks
    assert matched(LOGS / name, entries) == []


def test_a_wedged_engine_ranks_above_the_full_cache_it_holds(entries):
    # the real V1 line with the cache at 99.1 % and 45 waiting, its generation set to 0.0 (no
    # capture has a hang with a full cache): nothing moves for a whole interval, so the hang is
    # the cause and the full cache its consequence (engine-wedged explains kv-cache-preemption)
    real = (
        (RUNBOOK_FIXTURES / "kv-cache-preemption")
        .joinpath("vllm-v1-kv-cache-100pct-qwen2-7b-a100-gmu0.25-stats.log")
        .read_text()
        .splitlines()[0]
    )
    hung = real.replace("generation throughput: 3455.7", "generation throughput: 0.0")
    assert hung != real
    result = explain(TextSource.from_text("hung.log", f"{hung}\n{hung}\n"), entries)
    assert [m.id for m in result.matches][:2] == ["engine-wedged", "kv-cache-preemption"]
    # the same line still generating is the full cache alone
    assert signature_ids("line.log", real + "\n", entries) == ["kv-cache-preemption"]
