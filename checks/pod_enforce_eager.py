"""--enforce-eager in a serving deployment: CUDA graphs off, so decoding runs markedly slower.

Often left over from debugging a startup OOM. Read from the pod's vLLM arguments, or, when the
arguments live in the image, from the engine config line vLLM logs at startup.
"""

from __future__ import annotations

import re

from llmdoctor.engine.facts import FactMissing, Facts
from llmdoctor.engine.findings import Finding, evidence, ok, warning
from llmdoctor.engine.registry import check

ENGINE_CONFIG = re.compile(r"Initializing an? (?:V1 )?LLM engine .*\benforce_eager=(True|False)")


def _from_logs(facts: Facts) -> tuple[bool, dict] | None:
    for key in facts.keys("logs/"):
        if key.endswith(".previous.log") or not key.endswith(".log"):
            continue
        for number, line in enumerate(facts.get(key).lines(), 1):
            m = ENGINE_CONFIG.search(line)
            if m:
                return m.group(1) == "True", evidence(line[:300], source=key, line=number)
    return None


@check(
    "pod-enforce-eager",
    title="vLLM runs with CUDA graphs (no --enforce-eager)",
    scope="k8s",
    needs=("serving/args",),
    runbooks=("enforce-eager-in-production",),
    before_start=True,
)
def pod_enforce_eager(facts: Facts) -> Finding:
    args = facts.require("serving/args")
    subject = f"container {args.get('container')}" if args.get("container") else None
    if args.get("entrypoint") is not None:
        eager = bool(args.get("enforce_eager"))
        flag = next((a for a in args.get("argv") or [] if "enforce" in a), "--enforce-eager")
        item = evidence(f"vLLM args contain {flag}", source="k8s/pod.json")
    else:
        seen = _from_logs(facts)
        if seen is None:
            raise FactMissing(
                "serving/args", "the vLLM command line is not in the pod spec nor in the log"
            )
        eager, item = seen
    if not eager:
        return ok("pod-enforce-eager", "CUDA graphs enabled (no --enforce-eager)", (), subject)
    return warning(
        "pod-enforce-eager",
        "--enforce-eager is set: CUDA graphs are off, so every decode step pays the kernel "
        "launch overhead (lower throughput, higher latency)",
        [item],
        ["enforce-eager-in-production"],
        subject,
    )
