"""Choose explain's confidence threshold and fusion weights on independent data.

The gate pools the sets whose sources share nothing with the knowledge: the corpus's `tune` half,
its independent excerpts only (the independence test of benchmarks/explain_accuracy.py: the
source report is no runbook source), and the fresh blind rounds under tests/fixtures/explain_fresh/
(gathered from reports no project file cites; tuning data once measured). The corpus's held-out
half is reported, never used to choose. Every excerpt is read and searched once
(triage.explain.gather); each candidate set of numbers (a triage.explain.Fusion) then re-weighs
those readings (triage.explain.decide). The candidate chosen has the largest coverage, on the
pooled gate, at a precision of at least 95 % and no alarm on a healthy log:

* coverage: failures named first and confidently, of the covered failures;
* precision: confident answers that are right, of all confident answers (on failures, on
  uncovered or out-of-domain errors, on healthy logs);
* abstention: uncovered errors with no confident answer; alarms: healthy logs with one.

A hint never names an entry on its own word: the ceiling of a weak hit stays just below the
threshold in every candidate. Ties keep the candidate closest to the current numbers. So that the
choice is not fitted to one round, it is made again leaving each round out (on the corpus and the
other rounds) and the left-out round's figures are printed for that choice; the verdict says to
adopt the choice only when no round left out does worse with it (coverage or precision) than with
the current numbers.

    .venv/bin/python benchmarks/explain_calibrate.py --no-record   # the per-set table, the choice
    .venv/bin/python benchmarks/explain_calibrate.py --cache /tmp/readings.pkl  # re-weigh only

Readings take ~4 minutes on a busy 2-CPU machine, the grid ~5; `--cache` keeps the readings for
runs that change only the numbers (delete it after changing code, entries or excerpts).
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import pickle
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from explain_accuracy import (  # noqa: E402
    CORPUS,
    HEALTHY,
    UNKNOWN,
    corpus_files,
    extra_files,
    half,
    shared_excerpts,
)

RESULTS = ROOT / "benchmarks" / "results" / "explain_calibration.json"
FRESH = ROOT / "tests" / "fixtures" / "explain_fresh"
PRECISION = 0.95
TUNE, HELDOUT = "corpus tune", "corpus held-out"
ROUNDS = tuple(f"round {p.name.removeprefix('round')}" for p in sorted(FRESH.glob("round*")))
GATE = (TUNE, *ROUNDS)
SETS = (TUNE, HELDOUT, *ROUNDS)
GRID = {
    "confident": (0.27, 0.3, 0.33),
    "text_evidence": (20.0, 30.0, 40.0),
    "text_only": (0.5, 0.29),  # 0.29: a text-only match is never confident on its own
    "hint_text_floor": (1.0, 0.2, 0.1),
    "hint_stated_floor": (1.0, 0.2, 0.1, 0.0),
}
COUNTS = ("covered", "right", "confident", "uncovered", "abstained", "healthy", "alarms")


def readings(cache: Path | None = None) -> list[dict]:
    """Every independent excerpt of every set, read and searched once (kept in `cache` when
    given)."""
    if cache is not None and cache.is_file():
        with cache.open("rb") as fh:
            return pickle.load(fh)
    from llmdoctor.engine.textsource import TextSource
    from llmdoctor.triage.explain import gather
    from llmdoctor.wiki.library import load_library

    entries = load_library().entries
    folders = [(None, CORPUS), *((name, FRESH / name.replace(" ", "")) for name in ROUNDS)]
    out = []
    for name, folder in folders:
        shared = shared_excerpts(folder)
        extra = extra_files() if folder == CORPUS else []
        for expected, path in corpus_files(folder) + extra:
            if (expected, path) in extra or f"{path.parent.name}/{path.name}" in shared:
                continue  # not independent: the knowledge was written from its source
            which = name or (TUNE if half(path.parent.name, path.name) == "tune" else HELDOUT)
            text = path.read_bytes().decode("utf-8", errors="replace")
            out.append(
                {
                    "file": f"{expected}/{path.name}",
                    "set": which,
                    "expected": expected,
                    "gathered": gather(TextSource.from_text(path.name, text), entries),
                }
            )
    if cache is not None:
        with cache.open("wb") as fh:
            pickle.dump(out, fh)
    return out


def count(items: list[dict], fusion, entries: dict, graph) -> dict[str, dict[str, int]]:
    """Per set, the raw counts of one set of numbers on these excerpts."""
    from llmdoctor.triage.explain import decide

    out = {s: dict.fromkeys(COUNTS, 0) for s in {i["set"] for i in items}}
    for item in items:
        result = decide(item["gathered"], entries, item["file"], fusion=fusion, graph=graph)
        first = result.matches[0].id if result.matches else None
        c = out[item["set"]]
        if item["expected"] == HEALTHY:
            c["healthy"] += 1
            c["alarms"] += first is not None
        elif item["expected"] == UNKNOWN:
            c["uncovered"] += 1
            c["abstained"] += first is None
        else:
            c["covered"] += 1
            c["right"] += first == item["expected"]
        c["confident"] += first is not None
    return out


def figures(counts: dict[str, dict[str, int]], sets: tuple[str, ...]) -> dict:
    """Coverage, precision, abstention and alarms of the pooled counts of these sets."""
    c = {k: sum(counts[s][k] for s in sets if s in counts) for k in COUNTS}

    def share(a: int, b: int) -> float:
        return round(a / b, 4) if b else 1.0

    return c | {
        "coverage": share(c["right"], c["covered"]),
        "precision": share(c["right"], c["confident"]),
        "abstention": share(c["abstained"], c["uncovered"]),
    }


def candidates():
    from llmdoctor.triage.explain import FUSION

    names = list(GRID)
    for values in itertools.product(*(GRID[n] for n in names)):
        chosen = dict(zip(names, values, strict=True))
        chosen["weak_ceiling"] = round(chosen["confident"] - 0.01, 3)
        yield dataclasses.replace(FUSION, **chosen)


def _changed(fusion) -> dict:
    from llmdoctor.triage.explain import FUSION

    return {
        n: getattr(fusion, n)
        for n in (*GRID, "weak_ceiling")
        if getattr(fusion, n) != getattr(FUSION, n)
    }


def choose(tried: list[tuple], sets: tuple[str, ...]) -> tuple:
    """The candidate with the most pooled coverage on `sets` at >= PRECISION and 0 alarms (ties:
    closest to the current numbers, then the most precise); None when none qualifies."""
    allowed = [
        (f, c)
        for f, c in tried
        if (m := figures(c, sets))["precision"] >= PRECISION and m["alarms"] == 0
    ]
    if not allowed:
        return None
    return max(
        allowed,
        key=lambda fc: (
            figures(fc[1], sets)["coverage"],
            -len(_changed(fc[0])),
            figures(fc[1], sets)["precision"],
        ),
    )


def _line(name: str, m: dict) -> str:
    return (
        f"{name:18} coverage {m['coverage']:6.1%} ({m['right']:3}/{m['covered']:3})  precision "
        f"{m['precision']:6.1%} ({m['right']:3}/{m['confident']:3})  abstained "
        f"{m['abstention']:4.0%} of {m['uncovered']:3}  alarms {m['alarms']} of {m['healthy']}"
    )


def table(counts: dict, title: str) -> list[str]:
    rows = [title]
    rows += ["  " + _line(s, figures(counts, (s,))) for s in SETS]
    rows.append("  " + _line("gate, pooled", figures(counts, GATE)))
    return rows


def leave_one_round_out(tried: list[tuple], current: dict) -> tuple[dict, list[str]]:
    """For each round, the choice made without it and that choice's figures on it (printed), and
    the rounds on which that choice does worse than the current numbers (coverage or precision).
    """
    loro, worse = {}, []
    for left in ROUNDS:
        pick = choose(tried, tuple(s for s in GATE if s != left))
        before = figures(current, (left,))
        after = figures(pick[1], (left,)) if pick else before
        loro[left] = {"chosen": _changed(pick[0]) if pick else None, "left_out": after}
        print(f"  without {left}: {_changed(pick[0]) or 'current' if pick else 'none qualifies'}")
        print("    " + _line(left, after))
        if after["coverage"] < before["coverage"] or after["precision"] < before["precision"]:
            worse.append(left)
    return loro, worse


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-record", action="store_true", help="do not write results json")
    parser.add_argument("--cache", type=Path, help="keep the readings in this pickle file")
    args = parser.parse_args(argv)
    from llmdoctor.triage.explain import FUSION
    from llmdoctor.wiki.cause_graph import CauseGraph
    from llmdoctor.wiki.library import load_library

    entries = load_library().entries
    graph = CauseGraph.from_entries(entries)
    items = readings(args.cache)
    gate = [i for i in items if i["set"] in GATE]
    heldout = [i for i in items if i["set"] == HELDOUT]
    tried = [(f, count(gate, f, entries, graph)) for f in candidates()]

    def whole(fusion, gate_counts: dict) -> dict:
        return gate_counts | count(heldout, fusion, entries, graph)

    print(f"{len(tried)} candidates; gate: {', '.join(GATE)} (independent excerpts only)")
    current = whole(FUSION, count(gate, FUSION, entries, graph))
    print("\n".join(table(current, "current numbers:")))
    print("the most pooled coverage whatever the precision, for comparison:")
    for f, c in sorted(tried, key=lambda fc: -figures(fc[1], GATE)["coverage"])[:3]:
        print(f"  {_changed(f) or 'current'}: " + _line("gate, pooled", figures(c, GATE)))
    best = choose(tried, GATE)
    if best is None:
        print(f"no candidate reaches {PRECISION:.0%} pooled precision with 0 alarms")
        return 1
    chosen = whole(best[0], best[1])
    changed = {n: (getattr(FUSION, n), v) for n, v in _changed(best[0]).items()}
    print("\n".join(table(chosen, f"chosen: {changed or 'the current numbers'}")))
    print("leave one round out (chosen on the corpus and the other rounds; the round left out):")
    loro, worse = leave_one_round_out(tried, current)
    holds = bool(changed) and not worse
    if not changed:
        verdict = "the current numbers are the choice: keep them"
    elif holds:
        verdict = "every round left out does at least as well: adopt the choice"
    else:
        verdict = (
            f"the choice made without {', '.join(worse)} does worse there than the current "
            "numbers (coverage or precision): fitted to the rounds it saw; keep the current numbers"
        )
    print(f"verdict: {verdict}")
    if not args.no_record:
        adopted = best[0] if holds else FUSION
        RESULTS.write_text(
            json.dumps(
                {
                    "gate": f"pooled: {', '.join(GATE)}; independent excerpts only",
                    "precision_at_least": PRECISION,
                    "rule_choice": changed,
                    "verdict": verdict,
                    "adopted": dataclasses.asdict(adopted),
                    "current": {s: figures(current, (s,)) for s in SETS}
                    | {"gate, pooled": figures(current, GATE)},
                    "rule_choice_figures": {s: figures(chosen, (s,)) for s in SETS}
                    | {"gate, pooled": figures(chosen, GATE)},
                    "leave_one_round_out": loro,
                    "candidates": len(tried),
                },
                indent=2,
            )
            + "\n",
            encoding="utf-8",
        )
        print(f"recorded in {RESULTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
