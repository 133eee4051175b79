"""Choose explain's confidence threshold and fusion weights on independent data.

The gate is the independence test of benchmarks/explain_accuracy.py: only the corpus excerpts of
the `tune` half whose source report is no runbook source (the signatures and entry text were not
written from them) are used. Every excerpt is read and searched once (triage.explain.gather);
each candidate set of numbers (a triage.explain.Fusion) then re-weighs those readings
(triage.explain.decide). The candidate chosen has the largest coverage at a precision of at
least 95 % and no alarm on a healthy log:

* coverage: failures named first and confidently, of the covered failures;
* precision: confident answers that are right, of all confident answers (on failures, on
  uncovered or out-of-domain errors, on healthy logs);
* abstention: uncovered errors with no confident answer; alarms: healthy logs with one.

A hint never names an entry on its own word: the ceiling of a weak hit stays just below the
threshold in every candidate. Ties keep the candidate closest to the current numbers. The held-out
half is reported for the chosen numbers only, never used to choose.

    .venv/bin/python benchmarks/explain_calibrate.py            # prints the figures and the choice
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from explain_accuracy import (  # noqa: E402
    HEALTHY,
    UNKNOWN,
    corpus_files,
    extra_files,
    half,
    shared_excerpts,
)

RESULTS = ROOT / "benchmarks" / "results" / "explain_calibration.json"
PRECISION = 0.95
GRID = {
    "confident": (0.25, 0.27, 0.3, 0.33),
    "text_evidence": (20.0, 30.0, 40.0),
    "weak_hit": (0.2, 0.25),
    "place_power": (0.5, 1.0),
    "hint_text_floor": (1.0, 0.2, 0.15, 0.1),
}


def readings(halves: tuple[str, ...], cache: Path | None = None) -> list[dict]:
    """Every excerpt of these halves, read and searched once (kept in `cache` when given, for
    runs that change only the numbers; delete it after changing code, entries or corpus)."""
    if cache is not None and cache.is_file():
        import pickle

        with cache.open("rb") as fh:
            return [i for i in pickle.load(fh) if i["half"] in halves]
    from llmdoctor.engine.textsource import TextSource
    from llmdoctor.triage.explain import gather
    from llmdoctor.wiki.library import load_library

    entries = load_library().entries
    shared = shared_excerpts()
    extra = extra_files()
    out = []
    for expected, path in corpus_files() + extra:
        which = half(path.parent.name, path.name)
        if which not in halves:
            continue
        text = path.read_bytes().decode("utf-8", errors="replace")
        out.append(
            {
                "file": f"{expected}/{path.name}",
                "half": which,
                "expected": expected,
                "independent": (expected, path) not in extra
                and f"{path.parent.name}/{path.name}" not in shared,
                "gathered": gather(TextSource.from_text(path.name, text), entries),
            }
        )
    if cache is not None:
        import pickle

        with cache.open("wb") as fh:
            pickle.dump(out, fh)
    return out


def measure(items: list[dict], fusion, entries: dict) -> dict:
    """Coverage, precision, abstention and alarms of one set of numbers on these excerpts."""
    from llmdoctor.triage.explain import decide

    right = answered = covered = healthy = alarms = unknown = abstained = 0
    for item in items:
        result = decide(item["gathered"], entries, item["file"], fusion=fusion)
        first = result.matches[0].id if result.matches else None
        answered += first is not None
        if item["expected"] == HEALTHY:
            healthy += 1
            alarms += first is not None
        elif item["expected"] == UNKNOWN:
            unknown += 1
            abstained += first is None
        else:
            covered += 1
            right += first == item["expected"]
    return {
        "covered": covered,
        "coverage": round(right / covered, 4) if covered else 1.0,
        "confident": answered,
        "right": right,
        "precision": round(right / answered, 4) if answered else 1.0,
        "uncovered": unknown,
        "abstention": round(abstained / unknown, 4) if unknown else 1.0,
        "healthy": healthy,
        "alarms": alarms,
    }


def candidates():
    from llmdoctor.triage.explain import FUSION

    names = list(GRID)
    for values in itertools.product(*(GRID[n] for n in names)):
        chosen = dict(zip(names, values, strict=True))
        chosen["weak_ceiling"] = round(chosen["confident"] - 0.01, 3)
        yield dataclasses.replace(FUSION, **chosen)


def _distance(fusion) -> int:
    from llmdoctor.triage.explain import FUSION

    return sum(getattr(fusion, n) != getattr(FUSION, n) for n in (*GRID, "weak_ceiling"))


def choose(items: list[dict], entries: dict) -> tuple:
    """The candidate with the most coverage at >= PRECISION and 0 alarms (ties: closest to the
    current numbers, then the most precise), and every candidate's figures."""
    gate = [i for i in items if i["half"] == "tune" and i["independent"]]
    tried = [(f, measure(gate, f, entries)) for f in candidates()]
    allowed = [(f, m) for f, m in tried if m["precision"] >= PRECISION and m["alarms"] == 0]
    best = max(allowed, key=lambda fm: (fm[1]["coverage"], -_distance(fm[0]), fm[1]["precision"]))
    return best, tried


def per_set(items: list[dict], fusion, entries: dict) -> dict:
    sets = {}
    for name in ("tune", "heldout"):
        for independent in (True, False):
            chosen = [
                i for i in items if i["half"] == name and (i["independent"] or not independent)
            ]
            if chosen:
                key = f"{name}, independent" if independent else name
                sets[key] = measure(chosen, fusion, entries)
    return sets


def _line(name: str, m: dict) -> str:
    return (
        f"{name:20} coverage {m['coverage']:.1%} ({m['right']}/{m['covered']}), precision "
        f"{m['precision']:.1%} ({m['right']}/{m['confident']}), abstained "
        f"{m['abstention']:.0%} of {m['uncovered']} uncovered, {m['alarms']} alarms on "
        f"{m['healthy']} healthy"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-record", action="store_true", help="do not write results json")
    parser.add_argument("--tune-only", action="store_true", help="do not report the held-out half")
    parser.add_argument("--cache", type=Path, help="keep the readings in this pickle file")
    args = parser.parse_args(argv)
    from llmdoctor.triage.explain import FUSION
    from llmdoctor.wiki.library import load_library

    entries = load_library().entries
    items = readings(("tune",) if args.tune_only else ("tune", "heldout"), args.cache)
    (best, _figures), tried = choose(items, entries)
    changed = {
        n: (getattr(FUSION, n), getattr(best, n))
        for n in (*GRID, "weak_ceiling")
        if getattr(best, n) != getattr(FUSION, n)
    }
    print(
        f"{len(tried)} candidates on {sum(1 for i in items if i['half'] == 'tune' and i['independent'])} independent tune excerpts"
    )
    print("current numbers:")
    current = per_set(items, FUSION, entries)
    for name, m in current.items():
        print("  " + _line(name, m))
    print("the most coverage whatever the precision, for comparison:")
    for f, m in sorted(tried, key=lambda fm: -fm[1]["coverage"])[:3]:
        diff = {
            n: getattr(f, n) for n in (*GRID, "weak_ceiling") if getattr(f, n) != getattr(FUSION, n)
        }
        print(f"  {diff}: " + _line("tune, independent", m))
    print(f"chosen: {changed or 'the current numbers'}")
    chosen = per_set(items, best, entries)
    for name, m in chosen.items():
        print("  " + _line(name, m))
    if not args.no_record:
        RESULTS.write_text(
            json.dumps(
                {
                    "gate": "tune half, independent excerpts",
                    "precision_at_least": PRECISION,
                    "chosen": dataclasses.asdict(best),
                    "changed": changed,
                    "current": current,
                    "chosen_figures": chosen,
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
