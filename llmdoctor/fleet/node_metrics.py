"""`llmdoctor node --prometheus-textfile PATH`: a node report as Prometheus metrics.

The file is for node-exporter's textfile collector (`--collector.textfile.directory`), which
reads every `*.prom` file of its folder on each scrape; prometheus_client writes it to a
temporary file beside it and renames it over the old one, so a scrape never sees half a file.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from llmdoctor.engine.findings import Severity

STATUSES = ("ok", "warning", "critical", "not_checked")


def check_statuses(report, check_ids: list[str]) -> dict[str, str]:
    """Each check's status in this run: the worst severity of its findings (info counts as
    ok), or not_checked when it was skipped or produced nothing."""
    worst: dict[str, Severity] = {}
    for f in report.findings:
        if f.check not in worst or f.severity.rank > worst[f.check].rank:
            worst[f.check] = f.severity
    statuses = {}
    for check_id in check_ids:
        severity = worst.get(check_id)
        if severity is None:
            statuses[check_id] = "not_checked"
        elif severity in (Severity.OK, Severity.INFO):
            statuses[check_id] = "ok"
        else:
            statuses[check_id] = str(severity)
    return statuses


def xid_counts(report) -> Counter:
    """(gpu, pci, kind, code) -> events of that code on that GPU in the kernel log window."""
    from llmdoctor.parsers.gpus_json import gpus_by_pci

    counts: Counter = Counter()
    facts = report.facts
    if facts is None or not facts.has("node/xid"):
        return counts
    doc = facts.get("node/xid") or {}
    by_pci = gpus_by_pci(facts.get("node/gpus"))
    for group in doc.get("groups") or []:
        pci = group.get("pci") or ""
        gpu = by_pci.get(pci)
        label = f"GPU {gpu.get('index')}" if gpu else "unknown"  # a GPU no longer listed
        code = "79" if group["kind"] == "fallen-off-bus" else str(group.get("code"))
        counts[(label, pci, group["kind"], code)] += int(group.get("count", 1))
    return counts


def build_registry(report, check_ids: list[str], *, started: float, duration: float):
    """A prometheus_client registry holding the report's node metrics."""
    from prometheus_client import CollectorRegistry, Gauge

    registry = CollectorRegistry()
    finding = Gauge(
        "llmdoctor_finding",
        "Findings of the last llmdoctor node run that are not ok (value: how many share these "
        "labels); runbook is the first runbook entry id.",
        ["check", "subject", "runbook", "severity"],
        registry=registry,
    )
    for f in report.findings:
        if f.severity is Severity.OK:
            continue
        runbook = f.runbooks[0] if f.runbooks else ""
        finding.labels(f.check, f.subject or "", runbook, str(f.severity)).inc()
    status = Gauge(
        "llmdoctor_check_status",
        "Status of each node check in the last run: 1 for the current status, 0 for the others.",
        ["check", "status"],
        registry=registry,
    )
    for check_id, current in check_statuses(report, check_ids).items():
        for name in STATUSES:
            status.labels(check_id, name).set(1 if name == current else 0)
    xid = Gauge(
        "llmdoctor_xid_events",
        "Xid/SXid events per GPU and code in the kernel log window of the last run.",
        ["gpu", "pci", "kind", "code"],
        registry=registry,
    )
    for (gpu, pci, kind, code), count in sorted(xid_counts(report).items()):
        xid.labels(gpu, pci, kind, code).set(count)
    overall = Gauge(
        "llmdoctor_node_status",
        "Overall status of the last run: 0 ok, 1 warning, 2 critical, 3 nothing could be checked.",
        registry=registry,
    )
    overall.set({"ok": 0, "warning": 1, "critical": 2}.get(report.status, 3))
    Gauge(
        "llmdoctor_node_last_run_timestamp_seconds",
        "When the last llmdoctor node run started (Unix time).",
        registry=registry,
    ).set(started)
    Gauge(
        "llmdoctor_node_last_run_duration_seconds",
        "How long the last llmdoctor node run took.",
        registry=registry,
    ).set(duration)
    return registry


def validate_textfile_path(path: str) -> Path:
    """The path, if node-exporter would read it (an existing folder, a `.prom` name);
    BadInput otherwise."""
    from llmdoctor.errors import BadInput

    target = Path(path)
    if target.suffix != ".prom":
        raise BadInput(
            f"--prometheus-textfile {path}: node-exporter's textfile collector reads only "
            "*.prom files; end the name with .prom"
        )
    if not target.parent.is_dir():
        raise BadInput(f"--prometheus-textfile {path}: folder {target.parent} does not exist")
    if target.is_dir():
        raise BadInput(f"--prometheus-textfile {path}: is a folder")
    return target


def write_textfile(path: Path, registry) -> None:
    """Write the registry to `path` atomically (a temporary file in the same folder, renamed)."""
    from prometheus_client import write_to_textfile

    write_to_textfile(str(path), registry)
