"""The serving environment as the node checks see it: arguments and the probed torch.

`settings/<name>` is set by a command flag (e.g. `llmdoctor node --dtype half`) and wins over
`serving/args` (derived from the pod spec by the Kubernetes parser). `node/versions.json` is the
serving python's torch/vLLM report. Pure reads of Facts.
"""

from __future__ import annotations

from typing import Any

from llmdoctor.facts import FactMissing, Facts

VERSIONS = "node/versions.json"


def serving_setting(facts: Facts, name: str) -> tuple[Any, str | None]:
    """(value, where it came from) for a vLLM argument such as 'gpu_memory_utilization'."""
    value = facts.get(f"settings/{name}")
    if value is not None:
        return value, f"the --{name.replace('_', '-')} flag"
    args = facts.get("serving/args") or {}
    if isinstance(args, dict) and args.get(name) is not None:
        return args[name], f"the pod's --{name.replace('_', '-')} argument"
    return None, None


def require_torch(facts: Facts) -> dict[str, Any]:
    """node/versions.json when it describes an installed torch; else skipped, saying why."""
    versions = facts.require(VERSIONS)
    if not versions.get("torch"):
        where = versions.get("python_executable") or "the probed python"
        why = versions.get("torch_error") or "torch is not installed"
        raise FactMissing(
            VERSIONS,
            f"no torch in {where} ({why}); pass --python PATH of the serving environment",
        )
    return versions
