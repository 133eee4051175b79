"""The cause graph: which runbook entry explains which, read from front matter alone."""

from __future__ import annotations

import ast
from pathlib import Path

from llmdoctor.wiki.cause_graph import CauseGraph

ROOT = Path(__file__).resolve().parent.parent


def test_built_in_edges_come_from_the_runbooks_front_matter(entries):
    # An Xid 79 explains the engine's death and the NCCL errors after it: the runbook says so.
    graph = CauseGraph.from_entries(entries)
    assert {"engine-dead", "nccl-failure", "gateway-timeout"} <= graph.effects("xid-fallen-off-bus")
    assert "xid-fallen-off-bus" in graph.causes("engine-dead")
    assert graph.is_consequence("engine-dead")
    # a root cause is explained by nothing
    assert not graph.is_consequence("xid-fallen-off-bus")


def test_every_edge_names_a_runbook_entry(entries):
    # A typo in `explains:` would silently link nothing.
    for cause, effects in CauseGraph.from_entries(entries).as_table().items():
        assert cause in entries, cause
        for effect in effects:
            assert effect in entries, f"{cause} -> {effect}"


def test_a_team_entry_adds_edges_through_its_own_front_matter(entries):
    # A team entry saying `explains: [engine-dead]` joins the graph; the built-in edges stay.
    entry = entries["k8s-gpu-unschedulable"]
    custom = dict(entries)
    custom["k8s-gpu-unschedulable"] = type(entry)(**{**entry.__dict__})
    custom["k8s-gpu-unschedulable"].front_matter = {"explains": ["engine-dead"]}
    graph = CauseGraph.from_entries(custom)
    assert "engine-dead" in graph.effects("k8s-gpu-unschedulable")
    assert "engine-dead" in graph.effects("xid-fallen-off-bus")


def test_explains_follows_chains_and_survives_cycles():
    # xid -> engine-dead -> gateway-timeout: the Xid explains the timeout too; a cycle ends.
    graph = CauseGraph({"a": ["b"], "b": ["c", "a"], "c": []})
    assert graph.explains("a", "c")
    assert not graph.explains("c", "a")
    assert graph.explains("a", "a")  # through the cycle, and the walk still ends


def test_consequences_name_each_effect_with_its_causes_in_order():
    # Only pairs that both occurred count; an id never explains itself.
    graph = CauseGraph({"oom": ["dead", "timeout"], "dead": ["timeout"], "x": ["x"]})
    assert graph.consequences(["timeout", "oom", "dead", "x"]) == {
        "timeout": ["oom", "dead"],
        "dead": ["oom"],
    }


def test_no_cause_table_is_left_in_code():
    # One source: the Python table that explain.py held moved into the runbooks.
    for path in (ROOT / "llmdoctor").rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names = {t.id for t in targets if isinstance(t, ast.Name)}
                assert "EXPLAINS" not in names, path
