"""Wiki search ranking for short, everyday queries, and `wiki lint` of the `explains:` key.

On a wiki of a few dozen entries, FTS5's bm25 gives a word found in half of them or more an
IDF of ~0 (cuda, memory, tokenizer), so a short query is ranked word by word (see
llmdoctor.wiki.search): entries holding every word first, then entries whose id, title, aliases or
tags hold the query as typed, then a bm25 whose IDF stays positive.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_runs import explain_json
from team_wiki import team_entry
from typer.testing import CliRunner

from llmdoctor.cli import app
from llmdoctor.wiki import search as search_module
from llmdoctor.wiki.library import builtin_dir
from llmdoctor.wiki.lint import lint_paths
from llmdoctor.wiki.query import parse_query
from llmdoctor.wiki.search import search

# (query, the entry that must come first); each checked against the entries' front matter
EVERYDAY_QUERIES = [
    # title "CUDA out of memory while serving"; k8s-oomkilled's alias has "out of memory", no CUDA
    ("CUDA out of memory", "cuda-oom-runtime"),
    # id, title, tags and aliases say tokenizer; chat-template-missing and nan-* only tag it
    ("tokenizer", "tokenizer-problem"),
    # title "(Xid 79)" and alias "Xid 79"; the other Xid entries name 13/31/48/119/120
    ("Xid 79", "xid-fallen-off-bus"),
    # the phrase keeps its stopword "the", as the title and the alias "fallen off the bus" do
    ("fallen off the bus", "xid-fallen-off-bus"),
    # NCCL in id, title, tags; gsp-timeout and engine-dead only mention NCCL in their text
    ("NCCL timeout", "nccl-failure"),
    # id, tag and aliases "shm太小", "shm-size"
    ("shm", "shm-too-small"),
    # id and tag; k8s-gpu-unschedulable speaks of pod preemption in its text only
    ("preemption", "kv-cache-preemption"),
    # tag and title "Request queue saturated"; gateway-timeout mentions queueing in its text
    ("queue", "queue-saturation"),
    # aliases 排队 and 请求排队; k8s-gpu-unschedulable has 排队 once (pods waiting for a GPU)
    ("排队", "queue-saturation"),
    # aliases 掉卡 and GPU掉卡 (the GPU dropped off); gpu-not-visible lists 掉卡 once
    ("掉卡", "xid-fallen-off-bus"),
    # the id; other startup entries mention trust_remote_code in passing
    ("trust remote code", "trust-remote-code"),
    # title and alias; no other entry mentions ImagePullBackOff
    ("ImagePullBackOff", "image-pull-slow"),
    # alias "Liveness probe failed"; engine-dead mentions probes in its text
    ("liveness probe", "probe-killed-during-load"),
    # alias "Insufficient nvidia.com/gpu", the scheduler's own message
    ("Insufficient nvidia.com/gpu", "k8s-gpu-unschedulable"),
    # id, tag and aliases enforce-eager / enforce_eager
    ("enforce eager", "enforce-eager-in-production"),
    # id and title "No kernel image for this GPU"
    ("no kernel image", "no-kernel-image"),
    # title and alias; engine-dead and probe-killed-during-load mention OOMKilled in their text
    ("OOMKilled", "k8s-oomkilled"),
    # tag and alias; cuda-oom-runtime mentions fragmentation in its text
    ("fragmentation", "gpu-memory-fragmentation"),
    # id and aliases "chat template", "chat_template"
    ("chat template", "chat-template-missing"),
    # title "(504)", tag http-504, aliases "504", "504 Gateway Time-out"
    ("504", "gateway-timeout"),
    # id gsp-timeout and alias "GSP RPC timeout"
    ("GSP timeout", "gsp-timeout"),
    # title "GPU memory ECC error", tag ecc, aliases "uncorrectable ECC", "ECC错误"
    ("ECC", "xid-ecc-memory"),
    # id nvml-driver-library-mismatch; driver-cuda-mismatch is the other driver "mismatch"
    ("driver library mismatch", "nvml-driver-library-mismatch"),
]

# plain words of an on-call engineer (issue 21): HTTP codes and what people say, not the
# runbooks' own terms; (query, the entries the first three must hold)
PLAIN_WORD_QUERIES = [
    # the proxy's 502: title "(504 timeout, 502 bad gateway)", aliases 502 / Bad Gateway
    ("502", {"gateway-timeout"}),
    ("502 bad gateway", {"gateway-timeout"}),
    ("504", {"gateway-timeout"}),
    # "fell" stands for "fallen"; alias "GPU fell off the bus"
    ("fell off", {"xid-fallen-off-bus"}),
    ("GPU fell off the bus", {"xid-fallen-off-bus"}),
    # "disappeared" stands for fallen / lost / missing: the GPU fell off or is not seen
    ("GPU disappeared", {"xid-fallen-off-bus", "gpu-not-visible"}),
    ("disappeared", {"xid-fallen-off-bus"}),
    # "keeps" is no search word; "restarting" stands for restart / CrashLoopBackOff
    ("keeps restarting", {"probe-killed-during-load", "k8s-oomkilled"}),
    ("pod keeps restarting", {"probe-killed-during-load"}),
    # alias "slow startup"; "startup" stands for loading too
    ("startup slow", {"probe-killed-during-load"}),
    ("slow startup", {"probe-killed-during-load"}),
    # hang words: engine-wedged is the engine that stopped without dying
    ("hangs", {"engine-wedged"}),
    ("server hangs", {"engine-wedged"}),
]


@pytest.mark.parametrize(("query", "entry_ids"), PLAIN_WORD_QUERIES)
def test_plain_words_reach_the_right_entries(query, entry_ids):
    # the first three answers hold the entries that query means, the first is one of them
    ids = [r.id for r in search(query, limit=5)]
    assert entry_ids <= set(ids[:3]) and ids[0] in entry_ids, ids


@pytest.mark.parametrize(("query", "entry_id"), EVERYDAY_QUERIES)
def test_everyday_query_finds_its_builtin_entry_first(query, entry_id):
    # an SRE types a few words at 3 a.m.: the obvious entry must be the first answer
    assert (builtin_dir() / f"{entry_id}.md").is_file()
    results = search(query, limit=5)
    assert [r.id for r in results][:1] == [entry_id], [(r.id, r.score) for r in results]


def test_common_word_gets_positive_descending_scores():
    # "tokenizer" (stemmed: token) is in many built-in entries, where FTS5's IDF is ~0: still
    # ranked, not 0s; every entry that names it is found, however many entries the wiki has
    everything = search("tokenizer", limit=100)
    naming = {p.stem for p in builtin_dir().glob("*.md") if "tokenizer" in p.read_text().lower()}
    assert naming <= {r.id for r in everything} and len(everything) > len(naming)
    scores = [r.score for r in everything]
    assert all(s > 0 for s in scores)
    assert scores == sorted(scores, reverse=True)
    assert scores[0] > scores[1]


def write_entry(folder: Path, entry_id: str, *, title: str, tags=(), aliases=(), text="") -> None:
    """A minimal valid entry; `text` goes into the symptom."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{entry_id}.md").write_text(
        f"---\nid: {entry_id}\ntitle: '{title}'\nseverity: warning\n"
        f"tags: [{', '.join(tags)}]\naliases: [{', '.join(aliases)}]\n---\n"
        f"## Symptom\n{text or 'Something is wrong.'}\n\n## Cause\nA cause.\n\n## Fix\nA fix.\n",
        encoding="utf-8",
    )


def team_ids(results) -> list[str]:
    """The team wiki's entries in rank order (the built-in entries are always searched too)."""
    return [r.id for r in results if r.id.startswith("team-")]


def test_entry_holding_every_word_ranks_above_one_naming_a_word_everywhere(tmp_path):
    # "walrus memory": memory is in most built-in entries (IDF ~0 in FTS5), yet the entry that
    # holds both words must beat the one that names walrus everywhere but lacks memory
    wiki = tmp_path / "wiki"
    write_entry(
        wiki,
        "team-walrus",
        title="Walrus walrus",
        tags=["walrus"],
        aliases=["walrus"],
        text="walrus " * 20,
    )
    write_entry(wiki, "team-both", title="Ivory", text="The walrus ran out of memory.")
    assert team_ids(search("walrus memory", wiki_dirs=[wiki]))[:2] == ["team-both", "team-walrus"]


def test_entry_naming_the_phrase_ranks_first_stopwords_included(tmp_path):
    # both entries hold fallen/off/bus; only one names "fallen off the bus" in its title
    wiki = tmp_path / "wiki"
    write_entry(
        wiki,
        "team-scattered",
        title="Bus resets",
        text="The bus fell over; a fallen cable was off the rack; the bus was off. " * 3,
    )
    write_entry(wiki, "team-named", title="GPU has fallen off the bus", text="The node lost it.")
    assert team_ids(search("fallen off the bus", wiki_dirs=[wiki]))[0] == "team-named"


def test_entry_naming_the_word_in_more_places_ranks_first(tmp_path):
    # id + title + tag outrank a tag alone, however often the text repeats the word
    wiki = tmp_path / "wiki"
    write_entry(wiki, "team-gannet", title="Gannet dives", tags=["gannet"])
    write_entry(wiki, "team-seabirds", title="Seabirds", tags=["gannet"], text="gannet " * 30)
    assert team_ids(search("gannet", wiki_dirs=[wiki])) == ["team-gannet", "team-seabirds"]


def test_short_query_keeps_its_phrase_and_pasted_text_does_not():
    # the phrase is the typed words in order, stopwords too; a paste is ranked as a whole
    typed = parse_query("fallen off the bus")
    assert typed.short and typed.phrase == ["fallen", "off", "the", "bus"]
    assert typed.words == ["fallen", "off", "bus"]
    pasted = parse_query("RuntimeError: NCCL error\nWatchdog caught collective operation timeout")
    assert not pasted.short and pasted.phrase == []


def test_words_in_very_many_entries_fall_back_to_one_bm25_and_keep_the_tiers(monkeypatch):
    # past MAX_WORD_BY_WORD_HITS the terms share one bm25; coverage and names still order first
    monkeypatch.setattr(search_module, "MAX_WORD_BY_WORD_HITS", 0)
    assert search("CUDA out of memory")[0].id == "cuda-oom-runtime"
    assert search("tokenizer")[0].id == "tokenizer-problem"


def test_tag_filter_applies_to_a_short_query(tmp_path):
    # only entries with the tag come back, ranked as usual
    wiki = tmp_path / "wiki"
    write_entry(wiki, "team-a", title="Puffin one", tags=["seabird"])
    write_entry(wiki, "team-b", title="Puffin two", tags=["other"])
    assert [r.id for r in search("puffin", tag="seabird", wiki_dirs=[wiki])] == ["team-a"]


# --- wiki lint: explains ------------------------------------------------------------------------

ENTRY = """---
id: {id}
title: A root cause
severity: warning
{explains}
---
## Symptom
s

## Cause
c

## Fix
f
"""


def write_explaining(folder: Path, entry_id: str, explains: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{entry_id}.md"
    path.write_text(ENTRY.format(id=entry_id, explains=explains), encoding="utf-8")
    return path


def test_lint_accepts_explains_naming_builtin_and_sibling_entries(tmp_path):
    # engine-dead is built in; team-effect is in the folder being linted
    wiki = tmp_path / "wiki"
    write_explaining(wiki, "team-cause", "explains: [engine-dead, team-effect]")
    write_explaining(wiki, "team-effect", "explains: []")
    report = lint_paths([wiki], known_checks=None)
    assert report.ok, [str(p) for p in report.problems]


def test_lint_names_the_line_of_an_unknown_explained_entry(tmp_path):
    # `file:line: explains names unknown entry 'x'`, on the line of the item, in both list forms
    wiki = tmp_path / "wiki"
    block = write_explaining(wiki, "team-block", "explains:\n  - engine-dead\n  - no-such-entry")
    flow = write_explaining(wiki, "team-flow", "explains: [ghost-entry]")
    problems = {str(p) for p in lint_paths([wiki], known_checks=None).problems}
    assert problems == {
        f"{block}:7: explains names unknown entry 'no-such-entry'",
        f"{flow}:5: explains names unknown entry 'ghost-entry'",
    }


@pytest.mark.parametrize(
    ("explains", "fragment"),
    [
        ("explains: engine-dead", "'explains' must be a YAML list"),  # a bare id, not a list
        ("explains: [1]", "explains must list entry ids"),  # a number is no entry id
    ],
)
def test_lint_rejects_explains_that_is_not_a_list_of_ids(tmp_path, explains, fragment):
    # explain.py reads the key as a list of ids; anything else is an error with its line
    path = write_explaining(tmp_path / "wiki", "team-bad", explains)
    problems = [str(p) for p in lint_paths([tmp_path / "wiki"], known_checks=None).problems]
    assert [p for p in problems if fragment in p and p.startswith(f"{path}:5: ")], problems


ROOT = Path(__file__).resolve().parent.parent


RUNBOOK_FIXTURES = ROOT / "tests" / "fixtures" / "runbooks"


runner = CliRunner()


COMPOSE_EXIT_137 = (
    (RUNBOOK_FIXTURES / "host-oom-killer" / "compose-llm-server-killed-exit-137.log")
    .read_text(encoding="utf-8")
    .splitlines()[1]
)


def test_a_team_signature_ranks_above_a_builtin_hint_in_search(tmp_path):
    wiki = tmp_path / "team"
    team_entry(wiki, "team-exit-137", "signatures:\n  - 'exited with code 137'\n")
    # the real compose line with the service named as a vLLM one usually is (scalellm -> vllm-1)
    line = COMPOSE_EXIT_137.replace("scalellm", "vllm-1")
    assert line == "vllm-1 exited with code 137"
    doc, _, _ = explain_json(line + "\n", "--wiki", str(wiki))
    assert doc["matches"][0]["id"] == "team-exit-137"  # explain: right
    result = runner.invoke(app, ["wiki", "search", "--wiki", str(wiki), "--json", line])
    assert json.loads(result.stdout)["results"][0]["id"] == "team-exit-137"


# --- wiki lint: at_startup ----------------------------------------------------------------------


def test_lint_accepts_at_startup_naming_a_builtin_entry(tmp_path):
    write_explaining(tmp_path / "wiki", "team-oom", "at_startup: vllm-startup-memory-insufficient")
    report = lint_paths([tmp_path / "wiki"], known_checks=None)
    assert report.ok, [str(p) for p in report.problems]


@pytest.mark.parametrize(
    ("at_startup", "message"),
    [
        ("at_startup: no-such-entry", "at_startup names unknown entry 'no-such-entry'"),
        ("at_startup: [a, b]", "at_startup must be one entry id, not list ['a', 'b']"),
        ("at_startup: team-self", "at_startup names the entry itself"),
    ],
)
def test_lint_rejects_an_at_startup_that_names_no_other_entry(tmp_path, at_startup, message):
    # explain tells the named entry's story: a wrong id would silently tell none
    path = write_explaining(tmp_path / "wiki", "team-self", at_startup)
    problems = [str(p) for p in lint_paths([tmp_path / "wiki"], known_checks=None).problems]
    assert problems == [f"{path}:5: {message}"]
