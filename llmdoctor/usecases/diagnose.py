"""Gather facts for a target (live or from a bundle) and run the checks over them.

`diagnose(DiagnoseRequest)` is what `diagnose`, `node`, `probe`, the exporter and the MCP
server's diagnose do; `gather` alone is what `collect` does; `check_facts` runs the checks over
facts already gathered.
"""

from __future__ import annotations

import dataclasses
import importlib
import time
from dataclasses import dataclass, field
from typing import Any

from llmdoctor.engine.collect import CollectContext, CollectOptions
from llmdoctor.engine.facts import Facts
from llmdoctor.engine.report import Report, finding_order
from llmdoctor.engine.runner import DEFAULT_CHECK_TIMEOUT, run_checks
from llmdoctor.engine.story import link_findings
from llmdoctor.engine.target import Target

# Live collection per target kind: module exposing collect(target, ctx) -> Facts | list[Facts]
LIVE_COLLECTORS = {
    "pod": "llmdoctor.collectors.kubernetes",
    "deployment": "llmdoctor.collectors.kubernetes",
    "statefulset": "llmdoctor.collectors.kubernetes",
    "selector": "llmdoctor.collectors.kubernetes",
    "node": "llmdoctor.collectors.node",
    "http": "llmdoctor.collectors.vllm_http",
}
ALL_SCOPES = ("k8s", "node", "vllm", "logs", "capacity", "history")


@dataclass(frozen=True)
class CheckSettings:
    """The settings/<name> facts a command gives the checks (engine/fact_keys.py)."""

    model: str | None = None
    max_latency_ms: float | None = None
    max_num_seqs: int | None = None
    dtype: str | None = None
    quantization: str | None = None
    gpu_memory_utilization: float | None = None
    xid_policy: Any = None
    model_config_path: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}


@dataclass(frozen=True)
class DiagnoseRequest:
    """One diagnosis: what to collect from (or read), and which checks to run how."""

    target: Target
    timeout: float = 10.0  # each collector's, derivation's and check's deadline
    options: CollectOptions = field(default_factory=CollectOptions)
    settings: CheckSettings = field(default_factory=CheckSettings)
    scopes: tuple[str, ...] = ALL_SCOPES
    only: tuple[str, ...] = ()
    skip: tuple[str, ...] = ()
    wiki_dirs: tuple[str, ...] = ()
    checks_dirs: tuple[str, ...] = ()
    label: str | None = None  # the report's name for the target; by default report_label()


def live_target(target: str | None, selector: str | None, bundle: str | None = None) -> Target:
    """The Target to diagnose or collect; `-l SELECTOR` stands for the pods it matches."""
    from llmdoctor.engine.target import parse_target
    from llmdoctor.errors import BadTarget

    if selector:
        if target or bundle:
            raise BadTarget("give either a target or -l SELECTOR, not both")
        return Target("selector", name=selector)
    return parse_target(target, bundle)


def report_label(target: Target, facts_list: list[Facts]) -> str:
    """The report's name for a target: pod/x -n ns, pods -l app=x -n ns, x (bundle PATH)."""
    if target.kind == "bundle":
        return f"{facts_list[0].get('target')} (bundle {target.name})"
    namespace = facts_list[0].get("k8s/namespace") if facts_list else None
    where = f" -n {namespace}" if namespace else ""
    if target.kind == "selector":
        return f"pods -l {target.name}{where}"
    return f"{target}{where}"


def diagnose(request, target: str | None = None, **kwargs) -> Report:
    """Collect (or read) the request's target and run its checks: one Report.

    Called with facts already gathered (`diagnose(facts_list, target, ...)`) it is
    check_facts, for callers that gather on their own.
    """
    if not isinstance(request, DiagnoseRequest):
        return check_facts(request, target, **kwargs)
    facts_list = gather(
        request.target, CollectContext(request.target, request.timeout, request.options)
    )
    return check_facts(
        facts_list,
        request.label or report_label(request.target, facts_list),
        scopes=request.scopes,
        only=list(request.only),
        skip=list(request.skip),
        wiki_dirs=list(request.wiki_dirs) or None,
        settings=request.settings.as_dict(),
        checks_dirs=list(request.checks_dirs),
    )


def add_wiki(facts: Facts, lib) -> None:
    """Put the runbook entries into the facts (signature checks and the report read them)."""
    facts.set("wiki/entries", lib.entries)
    for err in lib.errors:
        facts.collector_errors.setdefault(f"wiki {err.path}", f"line {err.line}: {err.message}")


def add_settings(facts: Facts, settings: dict[str, Any]) -> None:
    for key, value in settings.items():
        if value is not None:
            facts.set(f"settings/{key}", value)


def gather(target: Target, ctx: CollectContext) -> list[Facts]:
    """Facts for the target: read from a bundle, or collected live (one Facts per pod).

    ctx.timeout is kept as the fact settings/timeout: the checks run under the same deadline.
    """
    if target.kind == "bundle":
        from llmdoctor.collectors.bundle import Bundle

        bundle = Bundle(target.name)
        facts = bundle.to_facts()
        facts.bundle = bundle  # kept open until the checks have read its logs
        facts.set("settings/timeout", ctx.timeout)
        return [facts]
    module_name = LIVE_COLLECTORS.get(target.kind)
    if module_name is None:
        from llmdoctor.errors import BadTarget

        raise BadTarget(f"{target} cannot be diagnosed live")
    module = importlib.import_module(module_name)
    history = None
    if ctx.options.prometheus:
        from llmdoctor.collectors.prometheus import start_history

        history = start_history(target, ctx)  # beside the live collection when it can
    collected = module.collect(target, ctx)
    result = collected if isinstance(collected, list) else [collected]
    for facts in result:
        if not facts.has("time/now"):
            facts.set("time/now", time.time())
        if not facts.has("target"):
            facts.set("target", str(target))
        facts.set("settings/timeout", ctx.timeout)
    if ctx.options.prometheus:
        from llmdoctor.collectors.prometheus import add_history

        add_history(result, target, ctx, history)
    return result


def _check_names(given: list[str] | None) -> list[str] | None:
    """--only/--skip as given, each value also split at commas (`--only xid,pod-restarts`); None
    when the option was not given, [] when every value given was empty (`--only ""`)."""
    if not given:
        return None
    return [name.strip() for value in given for name in value.split(",") if name.strip()]


def check_facts(
    facts_list: list[Facts],
    target: str,
    *,
    scopes: tuple[str, ...] = ALL_SCOPES,
    only: list[str] | None = None,
    skip: list[str] | None = None,
    wiki_dirs: list[str] | None = None,
    settings: dict[str, Any] | None = None,
    checks_dirs: list[str] | None = None,
    check_timeout: float | None = None,
) -> Report:
    """Derive facts, run the checks of `scopes`, and merge per-pod reports into one.

    Each check runs within `check_timeout` seconds, by default the --timeout the facts were
    gathered with.
    """
    from llmdoctor.engine.derive import derive_all
    from llmdoctor.engine.registry import checks_for_scopes, load_checks_dir
    from llmdoctor.timeline.onsets import date_live_findings

    for d in checks_dirs or []:
        load_checks_dir(d)
    checks = checks_for_scopes(scopes)
    known = {c.id for c in checks}
    only, skip = _check_names(only), _check_names(skip)
    for option, names in (("--only", only), ("--skip", skip)):
        unknown = sorted(set(names or []) - known)
        if names == [] or unknown:
            from llmdoctor.errors import BadInput

            if not unknown:  # `--only ""` (an empty variable in a script) must not run all
                raise BadInput(f"{option} names no check (checks here: {', '.join(sorted(known))})")
            raise BadInput(
                f"{option} names unknown check(s): {', '.join(unknown)} "
                f"(checks here: {', '.join(sorted(known))})"
            )
    from llmdoctor.wiki.library import load_library

    library = load_library(wiki_dirs)  # parsed once; the pods of a deployment share it
    reports = []
    for facts in facts_list:
        add_wiki(facts, library)
        add_settings(facts, settings or {})
        derive_all(facts)
        timeout = check_timeout or facts.get("settings/timeout") or DEFAULT_CHECK_TIMEOUT
        report = run_checks(facts, checks, target, only or [], skip or [], timeout=timeout)
        date_live_findings(report)  # `since` from the Prometheus history, when there is one
        link_findings(report.findings, facts.get("wiki/entries") or {})  # in the dated order
        reports.append(report)
        if facts.bundle is not None:
            facts.bundle.close()
    if len(reports) == 1:
        return reports[0]
    return merge_reports(reports, target)


def merge_reports(reports: list[Report], target: str) -> Report:
    """One report for several pods: every finding keeps its pod as subject."""
    findings, skipped, errors = [], [], []
    for r in reports:
        pod = str(r.facts.get("target")) if r.facts is not None else ""
        for f in r.findings:
            if f.subject is None:
                f.subject = pod
            elif pod and not f.subject.startswith(pod):
                f.subject = f"{pod} {f.subject}"
            findings.append(f)
        skipped += [{**s, "subject": pod} for s in r.skipped]
        errors += [{**e, "subject": pod} for e in r.errors]
    findings.sort(key=finding_order)
    first = reports[0].facts
    link_findings(findings, (first.get("wiki/entries") if first is not None else None) or {})
    pods = [r.facts for r in reports if r.facts is not None]
    return Report(target, findings, skipped, errors, reports[0].facts, pods)
