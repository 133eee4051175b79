"""What to do about an Xid: NVIDIA's catalog, the driver's recovery action, or the team's policy.

Every decision names its source, so a finding can say who decided: NVIDIA's Xid catalog
(llmdoctor/data/xid_catalog.json, every code of the published catalog with its resolution
bucket), the driver's own recovery-action flag (NVML field 230 / nvidia-smi
`<gpu_recovery_action>` / Xid 154), or a team policy file (`--xid-policy FILE` or
LLMDOCTOR_XID_POLICY):

    # xid-policy.yaml
    xids:
      13: {action: restart-pod, critical_after: 3, window: 1h}
      31: {action: restart-pod, critical_after: 5, window: 24h}
      79: {action: rma}
      144-150: {action: drain, note: NVLink5 errors go to the hardware team}

`action` is one of POLICY_ACTIONS; `critical_after` occurrences on one GPU within `window`
(default: the whole log read) make the finding critical, fewer a warning. A file that breaks
these rules is refused with `file:line: what`, before anything runs.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from llmdoctor.engine.findings import evidence
from llmdoctor.errors import BadInput
from llmdoctor.gpus.tables import load_table

ENV = "LLMDOCTOR_XID_POLICY"
MAX_POLICY_BYTES = 1024 * 1024  # a policy is a page of YAML, not a log
CATALOG = "NVIDIA Xid catalog"
RANK = {"info": 1, "warning": 2, "critical": 3}
CODE_KEYS = {"action", "critical_after", "window", "note"}
MAX_TIMES = 500  # occurrence times kept per (GPU, code) for window counts
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")
_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}
_RANGE = re.compile(r"^\s*(\d+)\s*-\s*(\d+)\s*$")


def policy_actions() -> dict[str, str]:
    """Team-level action -> the severity it implies (none, watch, restart-pod, cordon, ...)."""
    return dict(load_table("xid_catalog")["policy_actions"])


def catalog_entry(code: int) -> dict[str, Any] | None:
    """NVIDIA's catalog entry for an Xid code, with llmdoctor's reading; None if not listed."""
    return load_table("xid_catalog")["codes"].get(str(code))


def recovery_action(value: int) -> tuple[str, str, str] | None:
    """(name, severity, action) of an NVML / Xid 154 GPU recovery action value."""
    entry = load_table("xid_catalog")["recovery_actions"].get(str(value))
    return tuple(entry) if entry else None


# --- the team policy file ---------------------------------------------------------------------


def _duration(text: str) -> float | None:
    m = _DURATION.match(text)
    if not m or float(m.group(1)) <= 0:
        return None
    return float(m.group(1)) * _SECONDS[m.group(2)]


def _codes(key: str) -> list[int] | None:
    if key.strip().isdigit():
        return [int(key)]
    m = _RANGE.match(key)
    if m and int(m.group(1)) <= int(m.group(2)) <= int(m.group(1)) + 255:
        return list(range(int(m.group(1)), int(m.group(2)) + 1))
    return None


def _rule(path: str, key_node, value_node) -> dict[str, Any]:
    import yaml

    def fail(node, message: str) -> BadInput:
        return BadInput(f"{path}:{node.start_mark.line + 1}: {message}")

    where = f"xids.{key_node.value}"
    if not isinstance(value_node, yaml.MappingNode):
        raise fail(value_node, f"{where}: expected a mapping such as {{action: drain}}")
    rule: dict[str, Any] = {"line": key_node.start_mark.line + 1}
    actions = policy_actions()
    for k, v in value_node.value:
        name = k.value if isinstance(k, yaml.ScalarNode) else "?"
        if name not in CODE_KEYS:
            raise fail(
                k, f"{where}: unknown key {name!r} (expected {', '.join(sorted(CODE_KEYS))})"
            )
        if name in rule:
            raise fail(k, f"{where}: {name} given twice")
        if not isinstance(v, yaml.ScalarNode):
            raise fail(v, f"{where}.{name}: expected a single value")
        text = str(v.value).strip()
        if name == "action":
            if text not in actions:
                raise fail(v, f"{where}.action: {text!r} is not one of {', '.join(actions)}")
            rule["action"] = text
        elif name == "critical_after":
            if not text.isdigit() or int(text) < 1:
                raise fail(v, f"{where}.critical_after: {text!r} is not a whole number >= 1")
            rule["critical_after"] = int(text)
        elif name == "window":
            seconds = _duration(text)
            if seconds is None:
                raise fail(v, f"{where}.window: {text!r} is not a duration such as 1h, 30m, 7d")
            rule["window_s"], rule["window"] = seconds, text
        else:
            rule["note"] = text
    if "action" not in rule:
        raise fail(key_node, f"{where}: no action (one of {', '.join(actions)})")
    if "window_s" in rule and "critical_after" not in rule:
        raise fail(key_node, f"{where}: a window needs critical_after (how many within it)")
    return rule


def load_policy(path: str, origin: str = "--xid-policy") -> dict[str, Any]:
    """The validated team Xid policy in `path`; BadInput with `file:line: what` otherwise.

    Only a regular file of at most MAX_POLICY_BYTES is read (a device, a FIFO or a folder is
    refused, naming `origin`: the option or the variable that named the file).
    """
    import yaml

    from llmdoctor.bounded_yaml import compose_bounded
    from llmdoctor.input_files import read_small_text

    text = read_small_text(origin, path, MAX_POLICY_BYTES)
    try:
        root = compose_bounded(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "not valid YAML"
        raise BadInput(f"{path}{line}: {problem}") from None
    if root is None or not isinstance(root, yaml.MappingNode):
        raise BadInput(f"{path}:1: expected a mapping with an 'xids' key")
    codes: dict[str, dict[str, Any]] = {}
    seen_xids = False
    for k, v in root.value:
        if k.value == "about":
            continue
        if k.value != "xids":
            raise BadInput(f"{path}:{k.start_mark.line + 1}: unknown key {k.value!r} (xids, about)")
        if not isinstance(v, yaml.MappingNode):
            raise BadInput(f"{path}:{v.start_mark.line + 1}: xids: expected code: {{action: ...}}")
        seen_xids = True
        for key_node, value_node in v.value:
            numbers = _codes(str(key_node.value))
            if numbers is None:
                raise BadInput(
                    f"{path}:{key_node.start_mark.line + 1}: xids: {key_node.value!r} is not an "
                    "Xid code or a range such as 144-150"
                )
            rule = _rule(path, key_node, value_node)
            for code in numbers:
                if str(code) in codes:
                    raise BadInput(
                        f"{path}:{key_node.start_mark.line + 1}: Xid {code} already has a rule "
                        f"at line {codes[str(code)]['line']}"
                    )
                codes[str(code)] = rule
    if not seen_xids:
        raise BadInput(f"{path}:1: no 'xids' mapping")
    return {"path": path, "codes": codes}


def policy_from_option(path: str | None) -> dict[str, Any] | None:
    """The team policy named by --xid-policy, else by LLMDOCTOR_XID_POLICY, else None."""
    if path:
        return load_policy(path, "--xid-policy")
    path = os.environ.get(ENV) or None
    return load_policy(path, f"{ENV}=") if path else None


# --- counting occurrences in a window ---------------------------------------------------------


def log_seconds(text: str | None) -> tuple[str, float] | None:
    """(clock kind, seconds) of a kernel log timestamp; kinds are only comparable to themselves."""
    if not text:
        return None
    text = text.strip()
    try:
        return "uptime", float(text)
    except ValueError:
        pass
    for kind, fmt in (
        ("wall", "%a %b %d %H:%M:%S %Y"),  # dmesg -T
        ("syslog", "%b %d %H:%M:%S"),  # journalctl / syslog: no year
    ):
        try:
            return kind, datetime.strptime(" ".join(text.split()), fmt).timestamp()
        except ValueError:
            continue
    try:
        return "wall", datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None


def most_in_window(times: list[str | None], window_s: float) -> int | None:
    """The largest number of occurrences within any `window_s` seconds; None if times unknown."""
    parsed = [log_seconds(t) for t in times]
    if not parsed or any(p is None for p in parsed) or len({p[0] for p in parsed}) != 1:
        return None
    values = sorted(p[1] for p in parsed)
    best, start = 0, 0
    for end, value in enumerate(values):
        while value - values[start] > window_s:
            start += 1
        best = max(best, end - start + 1)
    return best


# --- the decision -------------------------------------------------------------------------------


@dataclass
class Decision:
    """Severity, meaning and action for one (GPU, Xid code), and who decided them."""

    severity: str
    meaning: str
    action: str
    runbooks: list[str] = field(default_factory=list)
    decided_by: list[dict[str, Any]] = field(default_factory=list)


def _from_catalog(group: dict[str, Any], entry: dict[str, Any]) -> Decision:
    res = entry.get("resolution") or {}
    bucket = " / ".join(p for p in (res.get("immediate"), res.get("investigatory")) if p)
    decision = Decision(
        entry["severity"],
        entry["meaning"],
        entry["action"],
        [entry["runbook"]] if entry.get("runbook") else [],
        [
            evidence(
                f"decided by the {CATALOG}: Xid {group['code']} {entry['mnemonic']}, resolution "
                f"{bucket or 'not given (llmdoctor reading: ' + entry['policy_action'] + ')'}",
                "docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html",
            )
        ],
    )
    if decision.severity == "nvlink5":
        fatal = bool(group.get("fatal"))
        decision.severity = "critical" if fatal else "warning"
        decision.action = (
            "reset the GPU (a fatal NVLink error, NVIDIA's decode: RESET_GPU)"
            if fatal
            else "watch it: a non-fatal NVLink event (NVIDIA's decode: IGNORE; check the link "
            "and cables if it repeats)"
        )
    elif decision.severity == "recovery":
        actions = [
            recovery_action(v) or (f"0x{v:x}", "warning", "see the line")
            for v in group.get("recovery_actions") or []
        ]
        if actions:
            worst = max(actions, key=lambda a: RANK.get(a[1], 2))
            decision.severity, decision.action = worst[1], f"{worst[0]}: {worst[2]}"
            decision.decided_by.append(
                evidence(f"decided by the driver (Xid 154 names the recovery action {worst[0]})")
            )
        else:
            decision.severity = "warning"
    return decision


def _apply_team_rule(group: dict[str, Any], decision: Decision, policy: dict[str, Any]) -> None:
    rule = (policy.get("codes") or {}).get(str(group["code"]))
    if rule is None:
        return
    count = group.get("count", 0)
    severity = policy_actions()[rule["action"]]
    counted = f"{count} in the log"
    if "critical_after" in rule:
        seen = count
        if "window_s" in rule:
            seen = most_in_window(group.get("times") or [], rule["window_s"])
            if seen is None:  # no usable timestamps: count them all, and say so
                seen = count
                counted = f"{count} in the log (no timestamps to apply the {rule['window']} window)"
            else:
                counted = f"at most {seen} within {rule['window']}"
        severity = (
            "critical"
            if seen >= rule["critical_after"]
            else ("info" if severity == "info" else "warning")
        )
        counted += f", critical from {rule['critical_after']}"
    for item in decision.decided_by:
        item["text"] = item["text"].replace(f"decided by the {CATALOG}", f"{CATALOG} (overruled)")
    decision.severity = severity
    decision.action = f"{rule['action']} (team policy)" + (
        f": {rule['note']}" if rule.get("note") else ""
    )
    decision.decided_by.insert(
        0,
        evidence(
            f"decided by the team policy: Xid {group['code']} -> {rule['action']} ({counted})",
            policy["path"],
            rule["line"],
        ),
    )


def _apply_driver_flag(decision: Decision, gpu: dict[str, Any] | None) -> None:
    flag = (gpu or {}).get("recovery_action")
    if not flag or str(flag).lower() == "none":
        return
    decision.decided_by.append(
        evidence(f"the driver's recovery action for this GPU now: {flag}", "node/gpus")
    )
    if RANK.get(decision.severity, 2) < RANK["critical"]:
        decision.severity = "critical"
        decision.action = f"{flag} (the driver's recovery action); {decision.action}"


def decide(
    group: dict[str, Any], policy: dict[str, Any] | None = None, gpu: dict[str, Any] | None = None
) -> Decision:
    """The decision for one Xid group (node/xid), given the team policy and the GPU's state."""
    entry = catalog_entry(group["code"])
    if entry is None:
        decision = Decision(
            "warning",
            "a code not in NVIDIA's published Xid catalog (1-172) as llmdoctor ships it",
            "look it up in NVIDIA's current Xid catalog (docs.nvidia.com/deploy/xid-errors)",
        )
    else:
        decision = _from_catalog(group, entry)
    for cause in group.get("caused_by") or []:
        cause_entry = catalog_entry(cause) or {}
        if cause_entry.get("runbook") and cause_entry["runbook"] not in decision.runbooks:
            decision.runbooks.append(cause_entry["runbook"])
        decision.action += f" (caused by Xid {cause}: {cause_entry.get('meaning', 'see that Xid')})"
    if policy:
        _apply_team_rule(group, decision, policy)
    _apply_driver_flag(decision, gpu)
    return decision
