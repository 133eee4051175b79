"""Collect a live target's evidence into redacted incident bundles (`llmdoctor collect`).

Collects exactly what `diagnose` would (same collectors, same options); a deployment with
several pods gives one bundle per pod. Every destination is checked before minutes of
collection, and again before the first bundle is written.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from llmdoctor.engine.collect import CollectOptions


@dataclass(frozen=True)
class CollectRequest:
    """What to collect, with which options, and where the bundle goes."""

    target: str | None
    output: str
    options: CollectOptions = field(default_factory=CollectOptions)
    timeout: float = 10.0
    force: bool = False  # replace an existing llmdoctor bundle (never anything else)
    model_config: str | None = None  # a config.json to keep as model/config.json


@dataclass(frozen=True)
class WrittenBundle:
    path: Path  # as write_bundle returned it
    target: str
    documents: int
    gaps: int  # what failed to be collected (listed in its manifest.json, with what was left out)


def bundle_paths(output: str, pods: list[str]) -> list[Path]:
    """Where each pod's bundle goes: OUTPUT itself for one pod, OUTPUT-<pod>.tar.gz for several."""
    dest = Path(output)
    if len(pods) == 1:
        return [dest]
    name = dest.name
    suffix = next((s for s in (".tar.gz", ".tgz") if name.endswith(s)), "")
    stem = name[: len(name) - len(suffix)] if suffix else name
    return [dest.with_name(f"{stem}-{pod}{suffix}") for pod in pods]


def _left_out_on_purpose(reason: str) -> bool:
    """A key left out by choice or by scope (`--tokenizer` not given, `--no-exec`, node facts
    from a pod), not one that failed: the manifest lists both, the count only failures."""
    return "not requested" in reason or reason.startswith("not collected")


def collect(request: CollectRequest) -> list[WrittenBundle]:
    """Collect the target and write its bundles; BadInput / BadTarget before collecting."""
    from llmdoctor.collectors.bundle import check_destination, write_bundle
    from llmdoctor.engine.collect import CollectContext
    from llmdoctor.errors import BadInput, BadTarget
    from llmdoctor.usecases.diagnose import gather, live_target

    if not request.output:
        raise BadInput("give the bundle to write with -o FILE.tar.gz")
    config = None
    if request.model_config:
        from llmdoctor.capacity.model_shape import load_model_config

        config = load_model_config(request.model_config)  # before anything is collected
    parsed = live_target(request.target, request.options.selector)
    if parsed.kind == "bundle":
        raise BadTarget("collect reads a live target, not a bundle")
    check_destination(request.output, request.force)  # before minutes of collection, not after
    facts_list = gather(parsed, CollectContext(parsed, request.timeout, request.options))
    names = [str(f.get("target") or parsed).split("/", 1)[-1] for f in facts_list]
    paths = bundle_paths(request.output, names)
    for path in paths:  # every destination is checked before the first is written
        check_destination(path, request.force)
    written = []
    for facts, path in zip(facts_list, paths, strict=True):
        if config is not None:
            facts.set("model/config.json", config)
        dest = write_bundle(
            facts,
            path,
            target=str(facts.get("target") or parsed),
            namespace=facts.get("k8s/namespace"),
            force=request.force,
        )
        files = sum(1 for k, _ in facts.items() if "/" in k and "." in k.rsplit("/", 1)[-1])
        failed = [r for r in facts.missing().values() if not _left_out_on_purpose(r)]
        gaps = len(failed) + len(facts.collector_errors)
        written.append(WrittenBundle(dest, str(facts.get("target")), files, gaps))
    return written
