"""NVIDIA Xid and SXid errors in the kernel log, per GPU and code, with what to do about them.

Each (GPU, code) is classified with the Xid catalog (llmdoctor/data/xid_catalog.json): meaning,
severity and action (restart the app / reset the GPU / drain the node and RMA). The PCI bus id
of each line is mapped to the GPU's index and UUID when the GPU list is known. Codes the catalog
does not know are still reported, with the raw line.
"""

from __future__ import annotations

from typing import Any

from llmdoctor.facts import Facts
from llmdoctor.findings import Finding, Severity, critical, evidence, info, ok, warning
from llmdoctor.gpu_tables import recovery_action, xid_entry
from llmdoctor.parsers.gpus_json import gpu_label, gpus_by_pci
from llmdoctor.registry import check

CHECK = "xid"
XID = "node/xid"
LOG = "node/kernel.log"
MAKE = {"critical": critical, "warning": warning, "info": info}
RANK = {"info": 1, "warning": 2, "critical": 3}


def _subject(group: dict, by_pci: dict[str, dict]) -> tuple[str, list[dict]]:
    pci = group.get("pci")
    gpu = by_pci.get(pci or "")
    if group["kind"] == "sxid":
        return f"NVSwitch {pci}.0", []
    if gpu is None:
        return (f"GPU at {pci}.0" if pci else "GPU (bus id not in the line)"), []
    items = [
        evidence(
            f"{gpu_label(gpu)} = {gpu.get('name')} {gpu.get('uuid') or ''}".strip(), "node/gpus"
        )
    ]
    return gpu_label(gpu), items


def _occurrences(group: dict) -> list[dict]:
    first, last = group.get("first") or {}, group.get("last") or {}
    items = [evidence(first.get("text", ""), LOG, first.get("line"))]
    if last and last.get("line") != first.get("line"):
        if group["count"] > 2:
            items.append(evidence(f"… {group['count'] - 2} more like it …"))
        items.append(evidence(last.get("text", ""), LOG, last.get("line")))
    return items


def _when(group: dict) -> str:
    first = (group.get("first") or {}).get("time")
    last = (group.get("last") or {}).get("time")
    if not first:
        return ""
    return (
        f", at {first}"
        if not last or last == first or group["count"] == 1
        else f", {first} .. {last}"
    )


def _classify(group: dict) -> tuple[str, str, str, list[str]]:
    """(severity, meaning, action, runbooks) for one group."""
    code = group["code"]
    if group["kind"] == "sxid":
        fatal = group.get("fatal", 0) > 0
        return (
            "critical" if fatal else "warning",
            f"NVSwitch error{' (Fatal)' if fatal else ''}",
            "drain the node and reset the GPUs and NVSwitches (reboot); contact support if it "
            "repeats"
            if fatal
            else "watch it; repeated errors on one link need the link checked",
            ["nccl-failure"],
        )
    if group["kind"] == "fallen-off-bus":
        entry = xid_entry(79) or {}
        return "critical", entry.get("meaning", ""), entry.get("action", ""), ["xid-fallen-off-bus"]
    entry = xid_entry(code)
    if entry is None:
        return (
            "warning",
            "a code llmdoctor's catalog does not know",
            "look it up in NVIDIA's Xid catalog (docs.nvidia.com/deploy/xid-errors)",
            [],
        )
    severity, action = entry["severity"], entry["action"]
    runbooks = [entry["runbook"]] if entry.get("runbook") else []
    if severity == "nvlink5":
        severity = "critical" if group.get("fatal") else "warning"
        action = "reset the GPU" if group.get("fatal") else "watch it (non-fatal link event)"
    elif severity == "recovery":
        actions = [
            recovery_action(v) or (f"0x{v:x}", "warning", "see the line")
            for v in group.get("recovery_actions") or []
        ]
        if actions:
            worst = max(actions, key=lambda a: RANK.get(a[1], 2))
            severity, action = worst[1], f"{worst[0]}: {worst[2]}"
        else:
            severity = "warning"
    for cause in group.get("caused_by") or []:
        cause_entry = xid_entry(cause) or {}
        if cause_entry.get("runbook") and cause_entry["runbook"] not in runbooks:
            runbooks.append(cause_entry["runbook"])
        action = f"{action} (caused by Xid {cause}: {cause_entry.get('meaning', 'see that Xid')})"
    return severity, entry["meaning"], action, runbooks


def _merge_fallen(groups: list[dict]) -> list[dict]:
    """A fallen-off-the-bus message next to an Xid 79 of the same GPU is the same event."""
    with_xid79 = {g["pci"] for g in groups if g["kind"] == "xid" and g["code"] == 79}
    return [g for g in groups if not (g["kind"] == "fallen-off-bus" and g["pci"] in with_xid79)]


def _finding(group: dict, by_pci: dict[str, dict], fallen: dict[str, int]) -> Finding:
    severity, meaning, action, runbooks = _classify(group)
    subject, items = _subject(group, by_pci)
    label = {"xid": "Xid", "sxid": "SXid", "fallen-off-bus": "GPU fell off the bus"}[group["kind"]]
    name = f"{label} {group['code']}" if group["kind"] != "fallen-off-bus" else label
    times = "once" if group["count"] == 1 else f"{group['count']} times"
    summary = f"{name}: {meaning}; {times}{_when(group)}. Action: {action}"
    items = [*_occurrences(group), *items]
    if group["kind"] == "xid" and group["code"] == 79 and fallen.get(group["pci"]):
        items.append(evidence(f"and {fallen[group['pci']]} 'fallen off the bus' message(s)", LOG))
    if group["code"] == 79 and group["kind"] != "sxid" and by_pci and group["pci"] not in by_pci:
        items.append(
            evidence(
                f"{group['pci']}.0 is not in the current GPU list: NVML/nvidia-smi no longer see "
                "this GPU",
                "node/gpus",
            )
        )
    if group.get("processes"):
        items.append(evidence(f"processes: {', '.join(group['processes'])}", LOG))
    if group.get("gpu_instances"):
        instances = ", ".join(str(i) for i in group["gpu_instances"])
        items.append(evidence(f"MIG GPU instance(s): {instances}", LOG))
    return MAKE[severity](CHECK, summary, items, runbooks, subject)


@check(
    CHECK,
    title="Xid/SXid errors in the kernel log",
    scope="node",
    needs=(XID,),
    supersedes=("log-signatures",),
    runbooks=(
        "xid-fallen-off-bus",
        "xid-ecc-memory",
        "illegal-memory-access",
        "nccl-failure",
        "gsp-timeout",
    ),
)
def xid(facts: Facts) -> list[Finding]:
    doc: dict[str, Any] = facts.require(XID)
    source = facts.get("node/kernel-log-source") or doc.get("source") or LOG
    by_pci = gpus_by_pci(facts.get("node/gpus"))
    groups = doc.get("groups") or []
    fallen = {g["pci"]: g["count"] for g in groups if g["kind"] == "fallen-off-bus"}
    findings = [_finding(g, by_pci, fallen) for g in _merge_fallen(groups)]
    unparsed = doc.get("unparsed") or []
    if unparsed:
        findings.append(
            warning(
                CHECK,
                f"{len(unparsed)} kernel log line(s) mention an Xid in a form llmdoctor cannot "
                "read; read them yourself",
                [evidence(u["text"], LOG, u["line"]) for u in unparsed],
            )
        )
    if not findings:
        return [ok(CHECK, f"no Xid or SXid error in {doc.get('lines', 0)} lines of {source}")]
    if all(f.severity is Severity.INFO for f in findings):
        findings.append(ok(CHECK, f"no Xid that needs action in {source}"))
    return findings
