"""The server's flags against the vLLM that will read them: the crash loop after an image upgrade.

`vllm: error: unrecognized arguments: --disable-log-requests` stops a server before it logs
anything else. Best evidence: the serving image's own vLLM parsing the pod's arguments
(serving/vllm-args.json, exec'd in the running container). Otherwise llmdoctor's table of vLLM's
flags per release (parsers/serving_args.py: removed_flags, unknown_flags), judged against the
vLLM version the image reports (node/versions.json) when it is known.
"""

from __future__ import annotations

from llmdoctor.engine.facts import Facts
from llmdoctor.engine.findings import Finding, critical, evidence, ok, warning
from llmdoctor.engine.registry import check

RUNBOOK = "vllm-flag-removed-on-upgrade"


def _version(facts: Facts) -> str | None:
    versions = facts.get("node/versions.json") if facts.has("node/versions.json") else None
    value = versions.get("vllm") if isinstance(versions, dict) else None
    return value if isinstance(value, str) and value else None


def _at_least(version: str, floor: str) -> bool | None:
    from packaging.version import InvalidVersion, Version

    try:
        return Version(version) >= Version(floor)
    except InvalidVersion:
        return None


@check(
    "pod-vllm-flags",
    title="vLLM accepts the server's command-line flags",
    scope="k8s",
    needs=("serving/args",),
    runbooks=(RUNBOOK,),
    before_start=True,
)
def vllm_flags(facts: Facts) -> Finding | list[Finding] | None:
    args = facts.require("serving/args")
    if args.get("entrypoint") is None:
        return None  # no vLLM command line in the spec (arguments baked into the image)
    subject = f"container {args.get('container')}" if args.get("container") else None
    own = facts.get("serving/vllm-args.json") if facts.has("serving/vllm-args.json") else None
    if isinstance(own, dict) and own.get("accepted") is not None:
        return _own_verdict(own, args, subject)
    version = _version(facts)
    found: list[Finding] = []
    for flag in args.get("removed_flags") or []:
        found.append(_removed(flag, version, subject))
    unknown = [str(f) for f in args.get("unknown_flags") or []]
    if unknown:
        found.append(
            warning(
                "pod-vllm-flags",
                f"vLLM has no flag {', '.join(unknown)} in any release llmdoctor knows; a server "
                "given an unknown flag exits with 'unrecognized arguments'",
                [evidence(" ".join(args.get("argv") or [])[:400], source="serving/args")],
                [RUNBOOK],
                subject,
            )
        )
    if found:
        return found
    known = "the image's vLLM " + version if version else "the vLLM releases llmdoctor knows"
    return ok("pod-vllm-flags", f"every flag is one {known} accepts", subject=subject)


def _own_verdict(own: dict, args: dict, subject: str | None) -> Finding:
    release = own.get("vllm") or "?"
    if own.get("accepted"):
        return ok(
            "pod-vllm-flags",
            f"vLLM {release} in the serving image parses the server's arguments",
            [evidence(f"vLLM {release}: accepted", source="serving/vllm-args.json")],
            subject,
        )
    return critical(
        "pod-vllm-flags",
        f"vLLM {release} in the serving image refuses the server's arguments: {own.get('error')} "
        "(the server exits at start: a crash loop)",
        [
            evidence(str(own.get("error")), source="serving/vllm-args.json"),
            evidence(" ".join(args.get("argv") or [])[:400], source="serving/args"),
        ],
        [RUNBOOK],
        subject,
    )


def _removed(flag: dict, version: str | None, subject: str | None) -> Finding:
    name, gone = flag.get("flag"), flag.get("absent_from")
    instead = f"; instead: {flag['instead']}" if flag.get("instead") else ""
    items = [evidence(f"{name}: last in vLLM {flag.get('last_seen')}, gone in {gone}")]
    past = _at_least(version, gone) if version and gone else None
    if past:
        return critical(
            "pod-vllm-flags",
            f"{name} is not a flag of vLLM {version} (gone since {gone}): the server exits with "
            f"'unrecognized arguments: {name}'{instead}",
            [*items, evidence(f"vllm {version}", source="node/versions.json")],
            [RUNBOOK],
            subject,
        )
    when = (
        f"the image's vLLM {version} still has it, an upgrade to {gone} or later will not start"
        if version
        else f"a vLLM image at {gone} or later will not start with it"
    )
    return warning(
        "pod-vllm-flags",
        f"{name} was removed in vLLM {gone}: {when}{instead}",
        items,
        [RUNBOOK],
        subject,
    )
