"""The serving environment as the node checks see it: arguments and the probed torch.

`settings/<name>` is set by a command flag (e.g. `llmdoctor node --dtype half`) and wins over
`serving/args` (derived from the pod spec by the Kubernetes parser). `node/versions.json` is the
serving python's torch/vLLM report. Pure reads of Facts.
"""

from __future__ import annotations

from typing import Any

from llmdoctor.engine.facts import FactMissing, Facts

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


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__.replace("str", "string")


def versions_doc(facts: Facts) -> dict[str, Any]:
    """node/versions.json with wrongly typed fields dropped ({} when absent or not an object)."""
    raw = facts.get(VERSIONS)
    if not isinstance(raw, dict):
        return {}
    doc = dict(raw)
    for key, kind in (("torch_arch_list", list), ("devices", list), ("env", dict)):
        if not isinstance(doc.get(key), kind):
            doc.pop(key, None)
    doc["torch_arch_list"] = [a for a in doc.get("torch_arch_list") or [] if isinstance(a, str)]
    doc["devices"] = [d for d in doc.get("devices") or [] if isinstance(d, dict)]
    for key in ("cuda_error", "torch_error", "libcuda_path", "python_executable"):
        if doc.get(key) is not None and not isinstance(doc[key], str):
            doc[key] = str(doc[key])
    return doc


def require_torch(facts: Facts) -> dict[str, Any]:
    """node/versions.json when it describes an installed torch; else skipped, saying why."""
    raw = facts.require(VERSIONS)
    if not isinstance(raw, dict):
        raise FactMissing(VERSIONS, f"is not a JSON object (a JSON {_kind(raw)})")
    versions = versions_doc(facts)
    if versions.get("torch") is not None and not isinstance(versions["torch"], str):
        raise FactMissing(
            VERSIONS, f"torch version is a {_kind(versions['torch'])}, not a version string"
        )
    if not versions.get("torch"):
        where = versions.get("python_executable") or "the probed python"
        why = versions.get("torch_error") or "torch is not installed"
        raise FactMissing(
            VERSIONS,
            f"no torch in {where} ({why}); run `llmdoctor node --python PATH` with the serving "
            "environment's python",
        )
    return versions
