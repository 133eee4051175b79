"""GPU hardware health: ECC errors, row remapping, retired pages, reset state, throttling, PCIe,
and a GPU the kernel log says fell off the bus that the GPU list no longer holds.

Uncorrectable ECC errors since the driver loaded, a failed row remap or a GPU that says it
needs a reset mean the GPU must be drained; a pending remap needs a reset at a convenient time;
hardware or thermal slowdown and a PCIe link narrower than its maximum cost throughput.
Persistence mode off is reported for information (slower first CUDA start).
"""

from __future__ import annotations

from llmdoctor.engine.facts import Facts
from llmdoctor.engine.findings import Finding, critical, evidence, info, ok, warning
from llmdoctor.engine.registry import check
from llmdoctor.parsers.gpus_json import gpu_label

CHECK = "gpu-health"
GPUS = "node/gpus"
ECC = "xid-ecc-memory"
FALLEN = "xid-fallen-off-bus"
XID = "node/xid"  # optional: the kernel log's Xids, parsed (not judged: no Xid policy here)
LOG = "node/kernel.log"
SLOWDOWN = {
    "hw_slowdown": "hardware slowdown (power brake or overheating)",
    "hw_thermal_slowdown": "hardware thermal slowdown (overheating)",
    "hw_power_brake_slowdown": "power brake slowdown (external power supply signal)",
    "sw_thermal_slowdown": "software thermal slowdown (GPU or memory temperature too high)",
}


def _memory_problems(gpu: dict) -> list[tuple[str, str, str]]:
    """(severity, summary, evidence) for each ECC / row-remap / retired-page problem."""
    ecc, rows = gpu.get("ecc") or {}, gpu.get("remapped_rows") or {}
    pages = gpu.get("retired_pages") or {}
    volatile, aggregate = ecc.get("volatile_uncorrected"), ecc.get("aggregate_uncorrected")
    out = []
    if volatile:
        out.append(("critical", f"{volatile} uncorrectable ECC error(s) since the driver loaded: "
                    "drain the node and reset the GPU; RMA if they return",
                    f"ecc volatile uncorrected: {volatile}"))  # fmt: skip
    elif aggregate:
        out.append(("warning", f"{aggregate} uncorrectable ECC error(s) over the GPU's lifetime "
                    "(none since the driver loaded): watch for new ones",
                    f"ecc aggregate uncorrected: {aggregate}"))  # fmt: skip
    if rows.get("failure"):
        out.append(("critical", "row remapping failed (no spare rows left): drain the node and "
                    "RMA the GPU", f"remapped rows: {rows}"))  # fmt: skip
    elif rows.get("pending"):
        out.append(("warning", "a memory row remap is pending: reset the GPU (or reboot) at a "
                    "convenient time to activate it", f"remapped rows: {rows}"))  # fmt: skip
    if pages.get("pending"):
        out.append(("warning", "a retired memory page is pending: reset the GPU (or reboot) to "
                    "retire it", f"retired pages: {pages}"))  # fmt: skip
    elif pages.get("double_bit"):
        out.append(("warning", f"{pages['double_bit']} page(s) retired after double-bit ECC "
                    "errors", f"retired pages: {pages}"))  # fmt: skip
    return out


def _memory_findings(gpu: dict, subject: str) -> list[Finding]:
    make = {"critical": critical, "warning": warning}
    return [
        make[severity](CHECK, summary, [evidence(text, GPUS)], [ECC], subject)
        for severity, summary, text in _memory_problems(gpu)
    ]


def _state_findings(gpu: dict, subject: str) -> list[Finding]:
    out: list[Finding] = []
    needs_reset = [k for k in ("reset_required", "drain_and_reset_recommended") if gpu.get(k)]
    if needs_reset:
        out.append(
            critical(
                CHECK,
                "the GPU reports that it needs a reset: drain the node and reset the GPU",
                [evidence(f"{k}: Yes", GPUS) for k in needs_reset],
                [],
                subject,
            )
        )
    action = gpu.get("recovery_action")
    if action and action.lower() != "none":
        out.append(
            critical(
                CHECK,
                f"the driver asks for a recovery action: {action}",
                [evidence(f"GPU recovery action: {action}", GPUS)],
                [],
                subject,
            )
        )
    reasons = gpu.get("clock_event_reasons") or []
    slow = [SLOWDOWN[r] for r in reasons if r in SLOWDOWN]
    if slow:
        temp = gpu.get("temperature_c")
        out.append(
            warning(
                CHECK,
                f"clocks are held down by {', '.join(slow)}"
                + (f" at {temp} C" if temp is not None else ""),
                [evidence(f"active clock event reasons: {', '.join(reasons)}", GPUS)],
                [],
                subject,
            )
        )
    return out


def _pcie_findings(gpu: dict, subject: str) -> tuple[list[Finding], list[dict]]:
    link = gpu.get("pcie") or {}
    cur_w, max_w = link.get("current_width"), link.get("max_width")
    cur_g, max_g = link.get("current_gen"), link.get("max_gen")
    notes: list[dict] = []
    out: list[Finding] = []
    if cur_w and max_w and cur_w < max_w:
        out.append(
            warning(
                CHECK,
                f"PCIe link runs at x{cur_w} of x{max_w}: host-GPU transfers (model loading, "
                "KV offload) are slower; reseat the card or check the slot/riser",
                [evidence(f"PCIe width x{cur_w}, max x{max_w}", GPUS)],
                [],
                subject,
            )
        )
    if cur_g and max_g and cur_g < max_g:
        idle = "gpu_idle" in (gpu.get("clock_event_reasons") or []) or gpu.get(
            "performance_state"
        ) not in ("P0", "P1", "P2")
        text = f"PCIe gen {cur_g}, max gen {max_g}"
        if idle:
            notes.append(evidence(f"{text} (idle GPU: links train down to save power)", GPUS))
        else:
            out.append(
                warning(
                    CHECK,
                    f"PCIe link runs at gen {cur_g} of gen {max_g} while the GPU is busy",
                    [evidence(text, GPUS)],
                    [],
                    subject,
                )
            )
    return out, notes


def _fallen_and_missing(facts: Facts, doc: dict) -> list[Finding]:
    """A GPU the kernel log says fell off the bus (Xid 79 or the driver's message) that the GPU
    list no longer holds: critical whatever an Xid policy makes of the Xid, since it is the GPU
    count, not the Xid, that says the node cannot serve on it."""
    from llmdoctor.parsers.gpus_json import gpus_by_pci

    xid = facts.get(XID) or {}
    by_pci = gpus_by_pci(doc)
    seen: dict[str, dict] = {}
    for group in xid.get("groups") or []:
        fell = group.get("kind") == "fallen-off-bus" or (
            group.get("kind") == "xid" and group.get("code") == 79
        )
        pci = group.get("pci")
        if fell and pci and pci not in by_pci:
            seen.setdefault(pci, group)
    listed = ", ".join(sorted(f"{k}.0" for k in by_pci)) or "none"
    source = doc.get("source") or "the GPU list"
    out = []
    for pci, group in sorted(seen.items()):
        first = group.get("first") or {}
        out.append(
            critical(
                CHECK,
                f"fell off the bus (kernel log) and {source} no longer lists it: "
                "drain the node and reboot it (a cold power cycle if it stays missing)",
                [
                    evidence(first.get("text", ""), LOG, first.get("line")),
                    evidence(
                        f"{source}: {len(by_pci)} GPU(s) at {listed}; {pci}.0 is not among them",
                        GPUS,
                    ),
                ],
                [FALLEN, "gpu-not-visible"],
                f"GPU at {pci}.0",
            )
        )
    return out


@check(
    CHECK,
    title="GPU health: ECC, row remapping, reset state, throttling, PCIe, GPUs gone missing",
    scope="node",
    needs=(GPUS,),
    runbooks=(ECC, "gpu-not-visible", FALLEN),
    follows=("xid",),
)
def gpu_health(facts: Facts) -> list[Finding]:
    doc = facts.require(GPUS)
    missing = _fallen_and_missing(facts, doc)
    findings: list[Finding] = list(missing)
    if not doc.get("gpus"):
        source = doc.get("source") or "the GPU list"
        return [
            *missing,
            warning(
                CHECK,
                f"{source} lists no GPU (driver {doc.get('driver_version') or '?'}): the driver "
                "sees none on this machine, so nothing here can run on a GPU",
                [evidence(f"{source}: 0 GPUs", GPUS)],
                ["gpu-not-visible"],
            ),
        ]
    for gpu in doc.get("gpus") or []:
        subject = gpu_label(gpu)
        found = _memory_findings(gpu, subject) + _state_findings(gpu, subject)
        pcie, notes = _pcie_findings(gpu, subject)
        found += pcie
        if gpu.get("persistence_mode") is False:
            found.append(
                info(
                    CHECK,
                    "persistence mode is off: the driver unloads when no process uses the GPU, "
                    "so each start pays the initialization again (nvidia-smi -pm 1)",
                    [evidence("persistence_mode: Disabled", GPUS)],
                    [],
                    subject,
                )
            )
        if not [f for f in found if f.severity.rank >= 2]:
            ecc = gpu.get("ecc") or {}
            items = [
                evidence(
                    f"ECC {'on' if ecc.get('enabled') else 'off or unsupported'}, "
                    f"uncorrected volatile {ecc.get('volatile_uncorrected')}, "
                    f"remapped rows {gpu.get('remapped_rows')}, "
                    f"temperature {gpu.get('temperature_c')} C",
                    GPUS,
                ),
                *notes,
            ]
            found.append(
                ok(CHECK, f"{gpu.get('name')}: no hardware problem reported", items, subject)
            )
        findings += found
    return findings
