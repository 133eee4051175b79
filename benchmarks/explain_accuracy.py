"""Top-1 / top-3 accuracy of `llmdoctor explain` on real error excerpts.

Every file tests/fixtures/explain_corpus/<entry-id>/*.log is an excerpt from a public bug report
(sources in SOURCES.md there); the folder name is the runbook entry that should come first.
Runs the explain library on each excerpt with the built-in wiki, prints a table of misses and
the figures, and records them in benchmarks/results/explain_accuracy.json.

    .venv/bin/python benchmarks/explain_accuracy.py
    .venv/bin/python benchmarks/explain_accuracy.py --verbose    # every excerpt, ranked ids
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "fixtures" / "explain_corpus"
RESULTS = ROOT / "benchmarks" / "results" / "explain_accuracy.json"


def corpus_files(corpus: Path = CORPUS) -> list[tuple[str, Path]]:
    """(expected entry id, excerpt path) for every excerpt, sorted."""
    return [(p.parent.name, p) for p in sorted(corpus.glob("*/*.log"))]


def evaluate(corpus: Path = CORPUS, wiki_dirs: list[str] | None = None) -> dict:
    """Rank entries for every excerpt; the figures and each excerpt's outcome."""
    sys.path.insert(0, str(ROOT))
    from llmdoctor.explain import explain
    from llmdoctor.textsource import TextSource
    from llmdoctor.wiki.library import load_library

    entries = load_library(wiki_dirs).entries
    outcomes = []
    for expected, path in corpus_files(corpus):
        text = path.read_text(encoding="utf-8")
        result = explain(
            TextSource.from_text(path.name, text), entries, limit=5, wiki_dirs=wiki_dirs
        )
        ranked = [m.id for m in result.matches]
        outcomes.append(
            {
                "file": str(path.relative_to(corpus)),
                "expected": expected,
                "ranked": ranked,
                "how": result.how,
                "top1": ranked[:1] == [expected],
                "top3": expected in ranked[:3],
            }
        )
    total = len(outcomes)
    by_how: dict[str, dict[str, int]] = {}
    for o in outcomes:
        h = by_how.setdefault(o["how"], {"excerpts": 0, "top1": 0})
        h["excerpts"] += 1
        h["top1"] += o["top1"]
    return {
        "excerpts": total,
        "entries": len({o["expected"] for o in outcomes}),
        "top1": round(sum(o["top1"] for o in outcomes) / total, 4) if total else 0.0,
        "top3": round(sum(o["top3"] for o in outcomes) / total, 4) if total else 0.0,
        "by_how": by_how,
        "misses": [o for o in outcomes if not o["top1"]],
        "outcomes": outcomes,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--verbose", action="store_true", help="print every excerpt")
    parser.add_argument("--no-record", action="store_true", help="do not write results json")
    args = parser.parse_args(argv)
    report = evaluate()
    rows = report["outcomes"] if args.verbose else report["misses"]
    for o in rows:
        mark = "ok " if o["top1"] else ("top3" if o["top3"] else "MISS")
        print(f"{mark:4}  {o['file']:<80} {o['how']:<10} {' > '.join(o['ranked'][:3]) or '-'}")
    print(
        f"\n{report['excerpts']} excerpts over {report['entries']} entries: "
        f"top-1 {report['top1']:.1%}, top-3 {report['top3']:.1%}"
    )
    for how, h in sorted(report["by_how"].items()):
        print(f"  via {how}: {h['top1']}/{h['excerpts']} top-1")
    if not args.no_record:
        record = {k: v for k, v in report.items() if k != "outcomes"}
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        print(f"recorded in {RESULTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
