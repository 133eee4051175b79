"""Can this GPU run the serving dtype and quantization?

bfloat16 needs compute capability 8.0 (vLLM: "Bfloat16 is only supported on GPUs with compute
capability of at least 8.0"); each quantization method has a minimum capability (vLLM's
get_min_capability(), e.g. awq 7.5, fp8 8.0) and FP8 runs natively from 8.9, as a slower
weight-only Marlin path below. Serving arguments come from `--dtype/--quantization` or the pod.
"""

from __future__ import annotations

from llmdoctor.engine.facts import FactMissing, Facts
from llmdoctor.engine.findings import Finding, critical, evidence, info, ok, warning
from llmdoctor.engine.registry import check
from llmdoctor.gpus.tables import load_table, version_tuple
from llmdoctor.parsers.serving_settings import serving_setting, versions_doc

CHECK = "dtype-support"
RUNBOOK = "unsupported-quantization-or-dtype"


def _capabilities(facts: Facts) -> dict[str, str]:
    """Lowest compute capability per GPU name on this node ('Tesla T4' -> '7.5')."""
    found: dict[str, str] = {}
    versions = versions_doc(facts)
    for dev in versions.get("devices") or []:
        if dev.get("capability") and dev.get("name"):
            found[dev["name"]] = dev["capability"]
    for gpu in (facts.get("node/gpus") or {}).get("gpus") or []:
        if gpu.get("compute_capability") and gpu.get("name"):
            found.setdefault(gpu["name"], gpu["compute_capability"])
    if not found:
        raise FactMissing("node/gpus", facts.missing_reason("node/gpus"))
    return found


def _as_number(capability: str) -> int:
    major, minor = (*version_tuple(capability), 0, 0)[:2]
    return major * 10 + minor


def _judge(kind: str, value: str, rule: dict, name: str, cc: str, where: str) -> Finding:
    have = _as_number(cc)
    need = rule["min"]
    items = [
        evidence(f"{kind} {value} (from {where})"),
        evidence(f"{name}: compute capability {cc}", "node/gpus"),
    ]
    label = f"{kind} {value}"
    if have < need:
        hint = f"; {rule['hint']}" if rule.get("hint") else ""
        return critical(
            CHECK,
            f"{label} needs compute capability {need / 10:.1f}, {name} has {cc}: vLLM refuses "
            f"to start{hint}",
            items,
            [RUNBOOK],
            name,
        )
    native = rule.get("native")
    if native and have < native:
        return warning(
            CHECK,
            f"{label} on {name} (capability {cc}, native needs {native / 10:.1f}): "
            f"{rule['below_native']}",
            items,
            [RUNBOOK],
            name,
        )
    return ok(CHECK, f"{name} (capability {cc}) supports {label}", items, name)


@check(
    CHECK,
    title="GPU supports the serving dtype and quantization",
    scope="node",
    runbooks=(RUNBOOK,),
)
def dtype_support(facts: Facts) -> list[Finding]:
    dtype, dtype_from = serving_setting(facts, "dtype")
    quant, quant_from = serving_setting(facts, "quantization")
    if dtype is None and quant is None:
        raise FactMissing(
            "serving/args",
            "the serving dtype/quantization are unknown (pass --dtype/--quantization, or "
            "diagnose the pod)",
        )
    table = load_table("quantization_capability")
    findings: list[Finding] = []
    for name, cc in sorted(_capabilities(facts).items()):
        for kind, value, where, rules in (
            ("dtype", dtype, dtype_from, table["dtype"]),
            ("quantization", quant, quant_from, table["quantization"]),
        ):
            if value is None or str(value).lower() in ("auto", "none"):
                continue
            rule = rules.get(str(value).lower())
            if rule is None:
                if kind == "quantization":
                    findings.append(
                        info(
                            CHECK,
                            f"no capability requirement known for quantization {value}; "
                            "check vLLM's supported-hardware table",
                            [evidence(f"quantization {value} (from {where})")],
                            [RUNBOOK],
                            name,
                        )
                    )
                continue
            findings.append(_judge(kind, str(value), rule, name, cc, where or ""))
    if not findings:
        findings.append(ok(CHECK, f"dtype {dtype or 'auto'}: nothing that needs a newer GPU"))
    return findings
