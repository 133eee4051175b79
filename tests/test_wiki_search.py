"""Wiki search: ranking of realistic queries, Chinese, stemming, hostile input, overrides, tags.

The small wikis below use real message texts (sources noted per entry); the built-in corpus is
used too, when its entries are present.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from team_wiki import team_entry

from llmdoctor.cli import run as cli_run
from llmdoctor.wiki.catalog import list_entries
from llmdoctor.wiki.library import builtin_dir
from llmdoctor.wiki.query import parse_query
from llmdoctor.wiki.search import search


def write_entry(folder: Path, entry_id: str, **fields) -> Path:
    """A minimal valid entry file; `fields` override title/tags/aliases/signatures/sections."""
    title = fields.get("title", entry_id.replace("-", " "))
    tags = fields.get("tags", [])
    aliases = fields.get("aliases", [])
    signatures = fields.get("signatures", [])
    sig_lines = "".join(f"  - '{s}'\n" for s in signatures)
    text = (
        f"---\nid: {entry_id}\ntitle: '{title}'\nseverity: {fields.get('severity', 'warning')}\n"
        f"tags: [{', '.join(tags)}]\naliases: [{', '.join(aliases)}]\n"
        + (f"signatures:\n{sig_lines}" if signatures else "")
        + f"---\n## Symptom\n{fields.get('symptom', 'Something is wrong.')}\n\n"
        f"## Cause\n{fields.get('cause', 'A cause.')}\n\n## Fix\n{fields.get('fix', 'A fix.')}\n"
    )
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{entry_id}.md"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def team_wiki(tmp_path: Path) -> Path:
    """Six entries that share vocabulary (memory, CUDA, KV cache), with real message texts."""
    wiki = tmp_path / "team-wiki"
    # https://github.com/vllm-project/vllm/issues/10596 (PyTorch >= 2.1 allocator message)
    write_entry(
        wiki,
        "team-cuda-oom",
        title="CUDA out of memory while serving",
        tags=["memory", "oom"],
        aliases=["显存不足", "爆显存"],
        signatures=[r"CUDA out of memory\. Tried to allocate"],
        symptom="`torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.33 GiB.`",
        cause="Activations outside the KV cache ran out of GPU memory.",
        fix="Lower `--gpu-memory-utilization` to 0.85 and `--max-num-seqs` to 128.",
    )
    # vllm/worker/worker.py raise_if_cache_size_invalid; seen in
    # https://github.com/vllm-project/vllm/issues/10517
    write_entry(
        wiki,
        "team-kv-too-small",
        title="KV cache too small for max model len",
        tags=["memory", "startup"],
        aliases=["上下文太长"],
        signatures=[r"is larger than the maximum number of tokens that can be stored in KV cache"],
        symptom="The engine refuses to start: the model's max seq len does not fit the KV cache.",
        cause="`--max-model-len` needs more KV cache memory than the GPU has left.",
        fix="Set `--max-model-len 8192` or raise `--gpu-memory-utilization`.",
    )
    # https://github.com/vllm-project/vllm/issues/7896
    write_entry(
        wiki,
        "team-nccl",
        title="NCCL error during tensor-parallel startup",
        tags=["nccl", "distributed"],
        aliases=["通信超时"],
        signatures=[r"NCCL error: unhandled (cuda|system) error"],
        symptom="`RuntimeError: NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for details)`",
        cause="A CUDA call inside NCCL failed; often shared memory or P2P setup.",
        fix="Run with `NCCL_DEBUG=INFO`, check `/dev/shm` size and NVLink.",
    )
    # https://docs.nvidia.com/deploy/xid-errors/ (Xid 79)
    write_entry(
        wiki,
        "team-xid79",
        title="GPU fell off the bus (Xid 79)",
        tags=["hardware", "driver"],
        aliases=["掉卡"],
        signatures=[r"NVRM: Xid \(PCI:[0-9a-fA-F:.]+\): 79,"],
        symptom="`NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.`",
        cause="The GPU stopped answering on PCIe: power, thermals or hardware.",
        fix="Drain the node, reset the GPU, and open a hardware ticket if it repeats.",
    )
    write_entry(
        wiki,
        "team-queue",
        title="Requests wait in the queue",
        tags=["latency", "queue"],
        aliases=["排队", "请求排队"],
        symptom="`Running: 256 reqs, Waiting: 811 reqs`; time to first token grows.",
        cause="More concurrent requests than `--max-num-seqs` allows.",
        fix="Add replicas or raise `--max-num-seqs` when the KV cache has room.",
    )
    write_entry(
        wiki,
        "team-preemption",
        title="Requests preempted because the KV cache is full",
        tags=["memory", "latency"],
        aliases=["抢占"],
        symptom="`Sequence group 12 is preempted by PreemptionMode.RECOMPUTE mode`.",
        cause="KV cache preemption: running sequences outgrow the free blocks.",
        fix="Lower `--max-num-seqs` or give the KV cache more memory.",
    )
    return wiki


def ids(results) -> list[str]:
    return [r.id for r in results]


def team(results) -> list:
    """The team wiki's results in rank order (the built-in entries are always searched too)."""
    return [r for r in results if r.id.startswith("team-")]


def team_ids(results) -> list[str]:
    return ids(team(results))


def test_pasted_cuda_oom_message_finds_its_entry_first(team_wiki):
    # the whole allocator message shares "memory"/"GPU" with three entries; the signature decides
    text = (
        "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.33 GiB. GPU 0 "
        "has a total capacity of 79.15 GiB of which 1.17 GiB is free. Including non-PyTorch "
        "memory, this process has 77.96 GiB memory in use."
    )
    results = team(search(text, limit=50, wiki_dirs=[team_wiki]))
    assert ids(results)[0] == "team-cuda-oom"
    assert results[0].signature_matched
    assert results[0].score > results[1].score


def test_pasted_traceback_finds_the_kv_cache_entry_first(team_wiki):
    # a whole stack trace: frames and paths are noise, the last line names the problem
    text = """Traceback (most recent call last):
  File "/usr/lib/python3.10/runpy.py", line 196, in _run_module_as_main
    return _run_code(code, main_globals, None,
  File "/usr/local/lib/python3.10/dist-packages/vllm/worker/worker.py", line 274, in initialize_cache
    raise_if_cache_size_invalid(num_gpu_blocks,
ValueError: The model's max seq len (29000) is larger than the maximum number of tokens that can be stored in KV cache (23648). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.
"""
    assert team_ids(search(text, wiki_dirs=[team_wiki]))[0] == "team-kv-too-small"


def test_pasted_kernel_line_finds_xid79(team_wiki):
    # a dmesg line full of numbers and hex: the Xid signature ranks its entry first
    text = "[Tue May 14 03:12:09 2024] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python3, GPU has fallen off the bus."
    assert team_ids(search(text, wiki_dirs=[team_wiki]))[0] == "team-xid79"


def test_short_words_rank_by_field_weights(team_wiki):
    # "nccl" is a tag and in the title of one entry only
    assert team_ids(search("nccl", wiki_dirs=[team_wiki]))[0] == "team-nccl"
    # a title word outranks the same word deep in another entry's fix
    assert team_ids(search("queue", wiki_dirs=[team_wiki]))[0] == "team-queue"


def test_english_stemming_preempted_finds_preemption(team_wiki):
    # the entry says "preempted"/"preemption"; porter stemming joins the forms
    assert team_ids(search("preempting", wiki_dirs=[team_wiki]))[0] == "team-preemption"
    assert "team-preemption" in team_ids(search("preemptions", wiki_dirs=[team_wiki]))


def test_chinese_queries_find_aliases(team_wiki):
    # FTS5's unicode61 keeps 显存不足 as one token; bigrams make 显存 findable
    assert team_ids(search("显存", wiki_dirs=[team_wiki]))[0] == "team-cuda-oom"
    assert team_ids(search("排队", wiki_dirs=[team_wiki]))[0] == "team-queue"
    assert team_ids(search("掉卡了怎么办", wiki_dirs=[team_wiki]))[0] == "team-xid79"


def test_chinese_snippet_highlights_the_query(team_wiki):
    # no FTS5 highlight exists for grams; the snippet marks the Chinese text itself
    result = team(search("爆显存", wiki_dirs=[team_wiki]))[0]
    marked = [result.snippet[s:e] for s, e in result.highlights]
    assert "爆显存" in marked or "显存" in "".join(marked)


def test_english_snippet_highlights_matched_words(team_wiki):
    result = team(search("NCCL_DEBUG shared memory", wiki_dirs=[team_wiki]))[0]
    assert result.id == "team-nccl"
    marked = {result.snippet[s:e].lower() for s, e in result.highlights}
    assert marked & {"nccl_debug", "nccl", "debug", "shared", "memory"}
    assert "\n" not in result.snippet


@pytest.mark.parametrize(
    "query",
    [
        '"unbalanced quote',
        "*",
        "AND",
        "NEAR(",
        "OR OR NOT",
        "!!! ??? ...",
        "column:value ^start",
        "",
        "   ",
        "\x00\x01",
        "a" * 5000,
        "显",
        "'; DROP TABLE docs; --",
        "NEAR(memory cuda, 2) AND -oom",
        "{title}: oom",
    ],
)
def test_hostile_queries_are_plain_words_never_errors(team_wiki, query):
    # FTS5 syntax is never passed through: each word is quoted
    results = search(query, wiki_dirs=[team_wiki])
    assert isinstance(results, list)


def test_whole_stack_trace_of_many_lines_is_searched(team_wiki):
    # hundreds of frame lines must neither error nor drown the error line
    frames = "".join(
        f'  File "/usr/lib/python3/site-packages/mod{n}.py", line {n}, in f{n}\n    call_{n}()\n'
        for n in range(400)
    )
    text = (
        "Traceback (most recent call last):\n"
        + frames
        + (
            "RuntimeError: NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for details)\n"
        )
    )
    assert team_ids(search(text, wiki_dirs=[team_wiki]))[0] == "team-nccl"


def test_a_frame_pasted_alone_is_searched_for_what_it_says():
    # a frame is noise beside the exception it leads to; pasted alone it is all there is: V1's
    # busy loop (a signature of engine-dead) was "no runbook entry matches"
    frame = (
        '  File "/opt/venv/lib/python3.12/site-packages/vllm/v1/engine/core.py", line 1174,'
        " in run_busy_loop"
    )
    results = search(frame)
    assert results and results[0].id == "engine-dead" and results[0].signature_matched
    with_code = search(frame + "\n    self._process_engine_step()")
    assert with_code[0].id == "engine-dead"
    # a frame no signature names is no answer: its words (`main`, `module`, `run`) say nothing
    for other in (
        '  File "/app/main.py", line 3, in <module>',
        '  File "/usr/lib/python3.10/threading.py", line 953, in run',
        '  File "/usr/lib/python3.12/site-packages/requests/sessions.py", line 589, in request',
        'Traceback (most recent call last):\n  File "/app/main.py", line 3, in <module>',
    ):
        assert search(other) == [], other
    # beside the exception, the frame is still left out of the words
    assert "busy" in parse_query(frame).words
    assert "busy" not in parse_query(frame + "\nRuntimeError: boom").words


def test_query_noise_is_dropped_from_pasted_text():
    # paths, hex addresses and numbers say nothing about which entry applies
    query = parse_query(
        "File /usr/lib/python3/site-packages/torch/cuda.py 0x7f3a9c2b10 at 12:00:01\n"
        "RuntimeError: CUDA error 700 deadbeef1234"
    )
    assert "cuda" in query.words and "runtimeerror" in query.words
    assert not {"usr", "lib", "0x7f3a9c2b10", "700", "deadbeef1234", "12"} & set(query.words)


def test_short_query_keeps_numbers():
    # "xid 79" means Xid 79; in a short query the number matters
    assert parse_query("xid 79").words == ["xid", "79"]


def test_quoting_survives_double_quotes_in_terms():
    # a term can never close its quotes early
    expression = parse_query('say "hello" 显存').match_expression()
    assert expression is not None and expression.count('"') % 2 == 0


def test_tag_filter_keeps_only_tagged_entries(team_wiki):
    tagged = {e.id for e in list_entries("queue", wiki_dirs=[team_wiki])}
    results = search("requests", tag="queue", wiki_dirs=[team_wiki])
    assert "team-queue" in ids(results)
    assert set(ids(results)) <= tagged
    assert search("memory", tag="no-such-tag", wiki_dirs=[team_wiki]) == []


def test_limit_caps_the_results(team_wiki):
    assert len(search("the cache memory GPU", limit=2, wiki_dirs=[team_wiki])) <= 2


def test_team_entry_overrides_entry_with_same_id(tmp_path, team_wiki, monkeypatch):
    # the later folder wins: LLMDOCTOR_WIKI first, then --wiki
    base = tmp_path / "base"
    write_entry(base, "team-queue", title="Old queue entry", symptom="zebra words")
    monkeypatch.setenv("LLMDOCTOR_WIKI", str(base))
    results = search("queue", wiki_dirs=[team_wiki])
    assert [r.title for r in results if r.id == "team-queue"] == ["Requests wait in the queue"]
    assert search("zebra", wiki_dirs=[team_wiki]) == []


def test_json_shape_of_a_result(team_wiki):
    data = team(search("nccl", wiki_dirs=[team_wiki]))[0].to_json()
    assert set(data) >= {"id", "title", "score", "snippet"}
    assert isinstance(data["score"], float)


BUILTIN_CASES = {
    # messages as vLLM / PyTorch / the driver / kubectl print them (see each entry's sources)
    "cuda-oom-runtime": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.33 GiB. "
    "GPU 0 has a total capacity of 79.15 GiB of which 1.17 GiB is free.",
    "no-kernel-image": "RuntimeError: CUDA error: no kernel image is available for execution on "
    "the device",
    "nvml-driver-library-mismatch": "Failed to initialize NVML: Driver/library version mismatch",
    "kv-cache-too-small-for-max-model-len": "ValueError: The model's max seq len (32768) is larger "
    "than the maximum number of tokens that can be stored in KV cache (19456). Try increasing "
    "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.",
    "k8s-gpu-unschedulable": "Warning  FailedScheduling  default-scheduler  0/4 nodes are "
    "available: 4 Insufficient nvidia.com/gpu.",
    "illegal-memory-access": "RuntimeError: CUDA error: an illegal memory access was encountered",
    "chat-template-missing": "ValueError: Cannot use chat template functions because "
    "tokenizer.chat_template is not set and no template argument was passed!",
}


@pytest.mark.parametrize("entry_id", sorted(BUILTIN_CASES))
def test_pasted_real_messages_find_builtin_entries_first(entry_id):
    # the on-call pastes what the log says; its runbook must come first
    if not (builtin_dir() / f"{entry_id}.md").is_file():
        pytest.skip(f"built-in entry {entry_id} not present")
    assert ids(search(BUILTIN_CASES[entry_id]))[0] == entry_id


@pytest.mark.parametrize(
    ("query", "entry_id"),
    [
        ("显存", "cuda-oom-runtime"),
        ("排队", "queue-saturation"),
        ("preempted", "kv-cache-preemption"),
    ],
)
def test_builtin_corpus_answers_chinese_and_stemmed_queries(query, entry_id):
    # users search the built-in wiki with the words they say
    if not (builtin_dir() / f"{entry_id}.md").is_file():
        pytest.skip(f"built-in entry {entry_id} not present")
    assert entry_id in ids(search(query, limit=3))


def test_search_says_which_team_entry_it_could_not_read(tmp_path, capsys):
    wiki = tmp_path / "team"
    path = team_entry(
        wiki, "team-widget", "signatures:\n  - 'TEAMERR widget exploded'\nhints: 42\n"
    )
    with pytest.raises(SystemExit) as stop:
        cli_run(["wiki", "search", "--wiki", str(wiki), "TEAMERR widget exploded"])
    said = capsys.readouterr()
    assert stop.value.code == 0
    assert f"{path}:8: 'hints' must be a list of strings (entry not searched)" in said.err
