"""QA pass on the signatures and hints added to runbooks/*.md on 2026-12-01 (4bd87ae..HEAD), as an
adversary and as an on-call engineer: what else prints the text a new signature matches?

Each test feeds `explain` real text, copied from the public page cited above it (only the
indentation of a pasted block is removed). Each failed when found: a new signature named an entry
with confidence (most of them CRITICAL, exit code 2) where the text says something else, or where
the software that printed it goes on working. Each such line is now a hint (weak evidence).
"""

from __future__ import annotations

import pytest

from llmdoctor.engine.textsource import TextSource
from llmdoctor.triage.explain import explain
from llmdoctor.wiki.library import load_library


@pytest.fixture(scope="module")
def entries():
    return load_library().entries


def run(text: str, entries):
    return explain(TextSource.from_text("paste", text), entries)


def named(result) -> list[tuple[str, str, str]]:
    """(id, severity, how) of every entry explain names (not the "too weak" guesses)."""
    return [(m.id, m.severity, m.how) for m in result.matches]


# https://github.com/InternLM/lmdeploy/issues/3950 (the TurboMind start-up log). LlamaBatch.cc
# prints it with TM_LOG_WARNING, shortens session_len and goes on starting:
# https://github.com/InternLM/lmdeploy/blob/main/src/turbomind/models/llama/LlamaBatch.cc
LMDEPLOY_SESSION_LEN_TRUNCATED = """\
[TM][INFO] [BlockManager] block_size = 0.844 MB
[TM][INFO] [BlockManager] max_block_count = 1740
[TM][INFO] [BlockManager] chunk_size = 1740
[TM][WARNING] [SegMgr] prefix caching is enabled
[TM][WARNING] No enough blocks for `session_len` (131072), `session_len` truncated to 111360.
"""


def test_lmdeploy_session_len_truncation_warning_is_not_a_critical_start_up_failure(entries):
    result = run(LMDEPLOY_SESSION_LEN_TRUNCATED, entries)
    assert result.exit_code < 2, named(result)


# https://github.com/ray-project/kuberay/issues/3151: a CPU-only Ray Serve deployment whose
# replica waits to be scheduled ("This may be due to waiting for the cluster to auto-scale").
RAY_SERVE_WAITING_TO_BE_SCHEDULED = (
    "WARNING 2025-03-04 01:04:33,560 controller 306 -- Deployment "
    "'demoRetrievalVoyagerIndexServiceHandler' in application "
    "'demo_recsys_retrieval_voyager_index_service' has 1 replicas that have taken more than 30s to "
    "be scheduled. This may be due to waiting for the cluster to auto-scale or for a runtime "
    'environment to be installed. Resources required for each replica: {"CPU": 2.0}, total '
    'resources available: {"CPU": 10.0}. Use `ray status` for more details.\n'
)


def test_ray_serve_scheduling_wait_warning_is_not_a_lost_worker(entries):
    result = run(RAY_SERVE_WAITING_TO_BE_SCHEDULED, entries)
    assert result.exit_code < 2, named(result)


# https://github.com/astral-sh/uv/issues/18523: uv (clap) rejects an option it never had.
UV_UNEXPECTED_ARGUMENT = """\
$ uv pip install pandas --target=./test --platform=x86_64
error: unexpected argument '--platform' found

  tip: to pass '--platform' as a value, use '-- --platform'

Usage: uv pip install --target <TARGET> <PACKAGE|--requirements <REQUIREMENTS>|--editable <EDITABLE>|--group <GROUP>>

For more information, try '--help'.
"""


def test_uv_usage_error_is_not_a_vllm_flag_removed_on_upgrade(entries):
    result = run(UV_UNEXPECTED_ARGUMENT, entries)
    assert all(
        m.id != "vllm-flag-removed-on-upgrade" or m.how != "signature" for m in result.matches
    ), named(result)


# https://docs.gitlab.com/charts/troubleshooting/ (source: gitlab-org/charts/gitlab,
# doc/troubleshooting/_index.md, "Git over SSH"): the kubelet's SystemOOM event next to the
# kernel's memory-cgroup kill, "caused by memory limits" (gitlab-shell's limits.memory too low).
SYSTEM_OOM_EVENT_FOR_A_CGROUP_LIMIT = """\
System OOM encountered, victim process: gitlab-shell
Memory cgroup out of memory: Killed process 3141592 (gitlab-shell)
"""


def test_system_oom_event_next_to_a_memory_cgroup_kill_is_the_container_limit(entries):
    result = run(SYSTEM_OOM_EVENT_FOR_A_CGROUP_LIMIT, entries)
    assert result.matches and result.matches[0].id == "k8s-oomkilled", named(result)


# https://github.com/VoltaML/voltaML-fast-stable-diffusion/issues/15: TensorRT's builder while
# it tries tactics; the maintainer: "These are warnings. Not a big issue. It should still work."
# (TensorRT-LLM says the same of the tactic warnings: NVIDIA/TensorRT-LLM#493.)
TRT_BUILDER_TACTIC_WARNINGS = """\
[12/09/2022-20:25:24] [TRT] [E] 2: [virtualMemoryBuffer.cpp::resizePhysical::145] Error Code 2: OutOfMemory (no further information)
[12/09/2022-20:25:24] [TRT] [E] 2: [virtualMemoryBuffer.cpp::resizePhysical::145] Error Code 2: OutOfMemory (no further information)
[12/09/2022-20:25:24] [TRT] [W] Requested amount of GPU memory (17179869184 bytes) could not be allocated. There may not be enough free memory for allocation to succeed.
[12/09/2022-20:25:25] [TRT] [W] Skipping tactic 8 due to insufficient memory on requested size of 17179869184 detected for tactic 0x000000000000003c.
Try decreasing the workspace size with IBuilderConfig::setMemoryPoolLimit().
"""


def test_tensorrt_builder_tactic_memory_warning_is_not_a_serving_oom(entries):
    result = run(TRT_BUILDER_TACTIC_WARNINGS, entries)
    assert result.exit_code < 2, named(result)


# https://github.com/ollama/ollama/issues/10368: Ollama truncates the prompt to num_ctx and
# answers (the request before it got 200); a WARN, not an HTTP 400.
OLLAMA_TRUNCATING_INPUT_PROMPT = """\
time=2025-04-22T11:21:46.411Z level=INFO source=server.go:619 msg="llama runner started in 0.25 seconds"
[GIN] 2025/04/22 - 11:21:46 | 200 |  444.455595ms |    10.130.41.81 | POST     "/api/embeddings"
time=2025-04-22T11:21:47.546Z level=WARN source=runner.go:131 msg="truncating input prompt" limit=2048 prompt=5065 keep=5 new=2048
"""


def test_ollama_prompt_truncation_is_a_hint_not_a_rejected_request(entries):
    result = run(OLLAMA_TRUNCATING_INPUT_PROMPT, entries)
    assert all(m.id != "context-length-exceeded" or m.how != "signature" for m in result.matches), (
        named(result)
    )
