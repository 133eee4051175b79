"""How often `llmdoctor explain` names the right runbook entry, next to `wiki search`.

Reads whatever corpus is present under tests/fixtures/explain_corpus/:

* `<entry-id>/<name>.log`: a real error excerpt; the folder is the entry that should be first;
* `_healthy/*.log`: healthy output: no warning or critical match allowed;
* `_unknown/*.log`: a real failure no entry covers: explain must abstain;

with sources in SOURCES*.md there. The healthy logs of tests/fixtures/healthy/ are read as healthy
excerpts too, and the logs of tests/fixtures/from_log/ (failures no built-in entry covers) as
unknown ones. Each file falls, by its name alone, in the `tune` half or the
`heldout` half: heldout when int(sha256("<folder>/<name>.log"), 16) is odd. Ranking weights are
tuned on `tune` only; `heldout` says whether that tuning generalizes.

For every excerpt it runs the explain library and `wiki search` of the same text (the excerpt
whole, as `llmdoctor wiki search -` would get it), and reports per half: top-1, top-3, false
alarms on healthy excerpts, abstentions on unknown ones, for both. Results are recorded in
benchmarks/results/explain_accuracy.json.

    .venv/bin/python benchmarks/explain_accuracy.py
    .venv/bin/python benchmarks/explain_accuracy.py --verbose    # every tune excerpt, ranked ids

An excerpt is *independent* when the public report it was copied from is not also a source of the
runbooks (a `tests/fixtures/runbooks/*/SOURCES.md` or healthy-corpus SOURCES row, or a URL in an
entry's text): the signatures and entry text were written from those reports, so an excerpt of
one measures recall of a known case, not generalization. Each half is also reported on its
independent excerpts alone (the logs kept elsewhere in tests/ are never independent: signatures
are proven against them).

Only `tune` files are listed by default (the held-out half is reported as figures only);
`--show-heldout` lists those too, once, for the final report.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "fixtures" / "explain_corpus"
RESULTS = ROOT / "benchmarks" / "results" / "explain_accuracy.json"
HEALTHY, UNKNOWN = "_healthy", "_unknown"
HALVES = ("tune", "heldout")
# a report's identity: a GitHub issue / pull request / discussion by repository and number, a
# file in a GitHub repository by repository and path (whatever the branch or commit), any other
# page by host and path
URL = re.compile(r"https?://[^\s|)>\]`'\"]+")
GITHUB_REPORT = re.compile(r"github\.com/([\w.-]+/[\w.-]+)/(?:issues|pull|discussions)/([0-9]+)")
GITHUB_FILE = re.compile(r"github\.com/([\w.-]+/[\w.-]+)/(?:blob|tree|raw)/[^/]+/(.+)")
RUNBOOK_SOURCES = (
    *sorted((ROOT / "tests" / "fixtures" / "runbooks").glob("*/SOURCES.md")),
    ROOT / "tests" / "fixtures" / "healthy" / "SOURCES.md",
    ROOT / "llmdoctor" / "data" / "healthy" / "SOURCES.md",
    *sorted((ROOT / "runbooks").glob("*.md")),
)


def half(folder: str, name: str) -> str:
    """'heldout' or 'tune', fixed by the file's folder and name."""
    digest = hashlib.sha256(f"{folder}/{name}".encode()).hexdigest()
    return "heldout" if int(digest, 16) % 2 else "tune"


EXTRA = (
    (HEALTHY, ROOT / "tests" / "fixtures" / "healthy"),
    (UNKNOWN, ROOT / "tests" / "fixtures" / "from_log"),
)


def corpus_files(corpus: Path = CORPUS) -> list[tuple[str, Path]]:
    """(expected entry id, or _healthy / _unknown, excerpt path) for every excerpt, sorted."""
    return [(p.parent.name, p) for p in sorted(corpus.glob("*/*.log"))]


def extra_files() -> list[tuple[str, Path]]:
    """(_healthy / _unknown, path) for the healthy and uncovered logs kept elsewhere in tests/."""
    return [
        (label, p)
        for label, folder in EXTRA
        for p in sorted(folder.glob("*"))
        if p.suffix in (".log", ".txt")
    ]


def reports(text: str) -> set[tuple[str, ...]]:
    """The reports (a GitHub issue by repository and number, a file, a page) `text` links to."""
    keys: set[tuple[str, ...]] = set()
    for url in URL.findall(text):
        url = url.rstrip(".,;:").split("#")[0].split("?")[0].rstrip("/")
        if m := GITHUB_REPORT.search(url):
            keys.add(("report", m.group(1).lower(), m.group(2)))
        elif m := GITHUB_FILE.search(url):
            keys.add(("file", m.group(1).lower(), m.group(2)))
        else:
            keys.add(("page", url.split("://", 1)[1].lower().removeprefix("www.")))
    return keys


def runbook_reports() -> set[tuple[str, ...]]:
    """Every report (or page) the runbooks were written from: the links of RUNBOOK_SOURCES."""
    known: set[tuple[str, ...]] = set()
    for path in RUNBOOK_SOURCES:
        if path.is_file():
            known |= reports(path.read_text(encoding="utf-8"))
    return known


def shared_excerpts(corpus: Path = CORPUS) -> set[str]:
    """`<folder>/<name>` of the corpus excerpts whose source report (or page) is also a
    runbook source."""
    known = runbook_reports()
    shared = set()
    for sources in sorted(corpus.glob("SOURCES*.md")):
        for line in sources.read_text(encoding="utf-8").splitlines():
            cells = [c.strip() for c in line.split("|")]
            if len(cells) > 3 and cells[1].endswith((".log", ".txt")) and reports(line) & known:
                shared.add(cells[1])
    return shared


def _read(path: Path) -> str:
    return path.read_bytes().decode("utf-8", errors="replace")


def evaluate(
    corpus: Path = CORPUS, wiki_dirs: list[str] | None = None, halves: tuple = HALVES
) -> dict:
    """Rank entries for every excerpt with explain and with wiki search; figures per half."""
    sys.path.insert(0, str(ROOT))
    from llmdoctor.engine.textsource import TextSource
    from llmdoctor.triage.explain import explain
    from llmdoctor.wiki.library import load_library
    from llmdoctor.wiki.search import search

    entries = load_library(wiki_dirs).entries
    outcomes = []
    shared = shared_excerpts(corpus)
    extra = extra_files() if corpus == CORPUS else []
    for expected, path in corpus_files(corpus) + extra:
        if half(path.parent.name, path.name) not in halves:
            continue
        text = _read(path)
        result = explain(
            TextSource.from_text(path.name, text), entries, limit=5, wiki_dirs=wiki_dirs
        )
        # the ranking explain shows: its confident matches, its notes (warnings about the
        # configuration in a log with no error line: reported, not claimed as what failed, so
        # never an answer, right or wrong, and never an alarm), then the closest entries it
        # names as too weak to be sure of
        shown = [*result.matches, *result.notes, *result.below_threshold][:5]
        searched = [r.id for r in search(text, limit=5, wiki_dirs=wiki_dirs)]
        outcomes.append(
            {
                "file": f"{expected}/{path.name}",
                "half": half(path.parent.name, path.name),
                "expected": expected,
                "ranked": [m.id for m in shown],
                "answered": [m.id for m in result.matches],
                "noted": [m.id for m in result.notes],
                "confidence": [m.confidence for m in shown],
                "how": result.how,
                "severities": [m.severity for m in result.matches],
                "search": searched,
                "independent": (expected, path) not in extra
                and f"{path.parent.name}/{path.name}" not in shared,
            }
        )
    report: dict = {"files": len(outcomes)}
    for name in HALVES:
        report[name] = figures([o for o in outcomes if o["half"] == name])
    report["all"] = figures(outcomes)
    report["independent"] = {
        name: figures([o for o in outcomes if o["independent"] and name in (o["half"], "all")])
        for name in (*HALVES, "all")
    }
    report["misses"] = [
        o for o in outcomes if o["expected"] not in (HEALTHY, UNKNOWN) and not _top(o, 1)
    ]
    report["unsure"] = [  # first in the ranking, but not confidently
        o
        for o in outcomes
        if o["expected"] not in (HEALTHY, UNKNOWN) and _top(o, 1) and not o["answered"]
    ]
    report["false_alarms"] = [o for o in outcomes if o["expected"] == HEALTHY and o["answered"]]
    report["not_abstained"] = [o for o in outcomes if o["expected"] == UNKNOWN and o["answered"]]
    report["outcomes"] = outcomes
    return report


def _top(o: dict, n: int, key: str = "ranked") -> bool:
    return o["expected"] in o[key][:n]


def figures(outcomes: list[dict]) -> dict:
    """top-1/top-3 on failure excerpts; criticals/alarms on healthy; abstentions on unknown."""
    known = [o for o in outcomes if o["expected"] not in (HEALTHY, UNKNOWN)]
    healthy = [o for o in outcomes if o["expected"] == HEALTHY]
    unknown = [o for o in outcomes if o["expected"] == UNKNOWN]

    def share(items: list, test) -> float:
        return round(sum(1 for o in items if test(o)) / len(items), 4) if items else 1.0

    return {
        "excerpts": len(known),
        "top1": share(known, lambda o: _top(o, 1)),
        "top3": share(known, lambda o: _top(o, 3)),
        # named first AND confident (no "too weak to name"): what explain asserts
        "confident_top1": share(known, lambda o: _top(o, 1, "answered")),
        "confident_wrong": sum(1 for o in known if o["answered"] and not _top(o, 1, "answered")),
        # issue 26's figures: coverage is confident_top1; precision counts every confident
        # answer (on failures, uncovered errors and healthy logs), right only on a failure
        "confident_answers": sum(1 for o in outcomes if o["answered"]),
        "precision": round(
            sum(1 for o in known if _top(o, 1, "answered"))
            / max(sum(1 for o in outcomes if o["answered"]), 1),
            4,
        ),
        "search_top1": share(known, lambda o: _top(o, 1, "search")),
        "search_top3": share(known, lambda o: _top(o, 3, "search")),
        "healthy": len(healthy),
        "healthy_criticals": sum(1 for o in healthy if "critical" in o["severities"]),
        "healthy_alarms": sum(1 for o in healthy if o["answered"]),
        "healthy_noted": sum(1 for o in healthy if o.get("noted")),
        "healthy_quiet": share(healthy, lambda o: not o["answered"]),
        "search_healthy_quiet": share(healthy, lambda o: not o["search"]),
        "unknown": len(unknown),
        "abstained": share(unknown, lambda o: not o["answered"]),
        "search_abstained": share(unknown, lambda o: not o["search"]),
    }


def _summary(name: str, f: dict) -> str:
    return (
        f"{name:8} {f['excerpts']:4} excerpts: top-1 {f['top1']:.1%} top-3 {f['top3']:.1%} "
        f"(confident and right {f['confident_top1']:.1%}, "
        f"confident and wrong {f['confident_wrong']}, precision {f['precision']:.1%}) "
        f"(wiki search {f['search_top1']:.1%} / {f['search_top3']:.1%}); "
        f"healthy {f['healthy']}: {f['healthy_criticals']} critical, "
        f"{f['healthy_alarms']} alarms, {f['healthy_noted']} with a note "
        f"(search quiet {f['search_healthy_quiet']:.0%}); "
        f"unknown {f['unknown']}: abstained {f['abstained']:.0%} "
        f"(search {f['search_abstained']:.0%})"
    )


def _print_sets(figures_by_set: dict) -> None:
    for name in (*HALVES, "all"):
        if figures_by_set[name]["excerpts"]:
            print(_summary(name, figures_by_set[name]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--verbose", action="store_true", help="print every excerpt")
    parser.add_argument("--no-record", action="store_true", help="do not write results json")
    parser.add_argument(
        "--show-heldout",
        action="store_true",
        help="also list held-out files (only for the final report: tuning looks at `tune` only)",
    )
    parser.add_argument("--tune-only", action="store_true", help="evaluate the tune half only")
    parser.add_argument(
        "--subset",
        metavar="PREFIX",
        help="also report the excerpts whose file name starts with PREFIX (r5: a round collected "
        "after the knowledge it tests was written, measured once)",
    )
    parser.add_argument(
        "--corpus",
        metavar="DIR",
        type=Path,
        default=CORPUS,
        help="another labelled folder of excerpts (tests/fixtures/explain_fresh/round6: blind "
        "excerpts never tuned on), measured alone; its results are not recorded",
    )
    args = parser.parse_args(argv)
    if args.corpus.resolve() != CORPUS.resolve():
        args.no_record = True  # the results json describes the tuning corpus only
    report = evaluate(args.corpus, halves=("tune",) if args.tune_only else HALVES)
    if args.subset:
        chosen = [o for o in report["outcomes"] if o["file"].split("/")[-1].startswith(args.subset)]
        report["subset"] = {"prefix": args.subset, "files": len(chosen)} | {
            name: figures([o for o in chosen if name in (o["half"], "all")])
            for name in (*HALVES, "all")
        }
    rows = (
        report["outcomes"]
        if args.verbose
        else report["misses"] + report["unsure"] + report["false_alarms"] + report["not_abstained"]
    )
    if not args.show_heldout:
        rows = [o for o in rows if o["half"] == "tune"]
    for o in rows:
        mark = "ok  " if _top(o, 1) else ("top3" if _top(o, 3) else "MISS")
        if o["expected"] in (HEALTHY, UNKNOWN):
            mark = "ok  " if not o["answered"] else "ALARM"
        elif o["ranked"] and not o["answered"]:
            mark = mark.strip() + "?"  # right or wrong, but abstained: named as too weak
        ranked = " > ".join(
            f"{i}:{c}" for i, c in zip(o["ranked"][:3], o["confidence"], strict=False)
        )
        print(
            f"{mark:5} {o['half']:7} {o['file']:<72} {ranked or '-'}  | search: {o['search'][:1]}"
        )
    print(f"\n{report['files']} files")
    _print_sets(report)
    print("independent excerpts only (their source report is no runbook source):")
    _print_sets(report["independent"])
    if args.subset:
        print(f"files named {args.subset}* ({report['subset']['files']}):")
        _print_sets(report["subset"])
    if not args.no_record and not args.tune_only:
        record = {k: v for k, v in report.items() if k != "outcomes"}
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        print(f"recorded in {RESULTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
