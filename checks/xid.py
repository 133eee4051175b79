"""NVIDIA Xid and SXid errors in the kernel log, per GPU and code, with what to do about them.

Each (GPU, code) is decided by llmdoctor.gpus.xid_policy: NVIDIA's Xid catalog (every published code
with its resolution), the driver's recovery action for the GPU, and the team's policy file when
one is given; each finding names the source that decided. The PCI bus id of each line is mapped
to the GPU's index and UUID when the GPU list is known. Codes the catalog does not know are still
reported, with the raw line.
"""

from __future__ import annotations

from typing import Any

from llmdoctor.engine.facts import Facts
from llmdoctor.engine.findings import Finding, Severity, critical, evidence, info, ok, warning
from llmdoctor.engine.registry import check
from llmdoctor.gpus.xid_policy import Decision, decide, log_seconds
from llmdoctor.parsers.gpus_json import gpu_label, gpus_by_pci

CHECK = "xid"
XID = "node/xid"
LOG = "node/kernel.log"
MAKE = {"critical": critical, "warning": warning, "info": info}


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


def _uptime(stamp: str) -> str:
    """A dmesg stamp ("1843.308145": seconds since boot) said as what it is; the kernel log
    gives no boot time to turn it into a clock time (`uptime -s` on the node does)."""
    try:
        seconds = float(stamp)
    except ValueError:
        return stamp
    return f"{seconds:.0f} s after boot"


def _when(group: dict) -> str:
    first = (group.get("first") or {}).get("time")
    last = (group.get("last") or {}).get("time")
    if not first:
        return ""
    first, last = _uptime(first), _uptime(last) if last else last
    return (
        f", at {first}"
        if not last or last == first or group["count"] == 1
        else f", {first} .. {last}"
    )


def _decide(group: dict, policy: dict | None, gpu: dict | None) -> Decision:
    """Severity, meaning, action, runbooks and the deciding sources for one group."""
    if group["kind"] == "sxid":
        fatal = group.get("fatal", 0) > 0
        return Decision(
            "critical" if fatal else "warning",
            f"NVSwitch error{' (Fatal)' if fatal else ''}",
            "drain the node and reset the GPUs and NVSwitches (reboot); contact support if it "
            "repeats"
            if fatal
            else "watch it; repeated errors on one link need the link checked",
            ["xid-nvlink-error"],
            [
                evidence(
                    "decided by llmdoctor from the line's Fatal/Non-fatal word (NVIDIA's SXid "
                    "catalog is not in llmdoctor's data; an Xid policy file does not cover SXids)"
                )
            ],
        )
    if group["kind"] == "fallen-off-bus":
        decision = decide({**group, "code": 79}, policy, gpu)
        decision.runbooks = ["xid-fallen-off-bus"]
        return decision
    return decide(group, policy, gpu)


def _merge_fallen(groups: list[dict]) -> list[dict]:
    """A fallen-off-the-bus message next to an Xid 79 of the same GPU is the same event."""
    with_xid79 = {g["pci"] for g in groups if g["kind"] == "xid" and g["code"] == 79}
    return [g for g in groups if not (g["kind"] == "fallen-off-bus" and g["pci"] in with_xid79)]


def _finding(
    group: dict, by_pci: dict[str, dict], fallen: dict[str, int], policy: dict | None
) -> Finding:
    d = _decide(group, policy, by_pci.get(group.get("pci") or ""))
    subject, items = _subject(group, by_pci)
    label = {"xid": "Xid", "sxid": "SXid", "fallen-off-bus": "GPU fell off the bus"}[group["kind"]]
    name = f"{label} {group['code']}" if group["kind"] != "fallen-off-bus" else label
    times = "once" if group["count"] == 1 else f"{group['count']} times"
    summary = f"{name}: {d.meaning}; {times}{_when(group)}. Action: {d.action}"
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
    items += d.decided_by
    finding = MAKE[d.severity](CHECK, summary, items, d.runbooks, subject)
    finding.began = log_seconds((group.get("first") or {}).get("time"))
    return finding


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
        "xid-nvlink-error",
    ),
)
def xid(facts: Facts) -> list[Finding]:
    doc: dict[str, Any] = facts.require(XID)
    source = facts.get("node/kernel-log-source") or doc.get("source") or LOG
    by_pci = gpus_by_pci(facts.get("node/gpus"))
    groups = doc.get("groups") or []
    fallen = {g["pci"]: g["count"] for g in groups if g["kind"] == "fallen-off-bus"}
    policy = facts.get("settings/xid_policy")
    findings = [_finding(g, by_pci, fallen, policy) for g in _merge_fallen(groups)]
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
