"""CUDA out of memory in the logs: a real shortage, or a fragmented PyTorch cache?

PyTorch's OOM message says how much memory its caching allocator holds but does not use
("X GiB is reserved by PyTorch but unallocated"). When that is a large share of the GPU and the
request would have fit into it plus the free memory, the OOM is fragmentation: setting
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True fixes it without buying memory. Otherwise it is
a plain shortage (cuda-oom-runtime). An OOM whose message lacks those numbers is reported as an
OOM that cannot be told apart, never as either; a log that is not text (binary, compressed) is
named as not read, never counted among the logs without an OOM.
"""

from __future__ import annotations

from llmdoctor.engine.facts import FactMissing, Facts
from llmdoctor.engine.findings import Finding, critical, evidence, info, ok
from llmdoctor.engine.registry import check
from llmdoctor.engine.textsource import TextSource
from llmdoctor.parsers.fix_values import fix_values
from llmdoctor.parsers.serving_settings import versions_doc
from llmdoctor.parsers.torch_oom import TorchOom, parse_torch_oom
from llmdoctor.parsers.xid import EMPTY_LOG, not_text_reason, read_for_lines
from llmdoctor.wiki.request_log import request_log
from llmdoctor.wiki.server_phase import retold_at_startup

CHECK = "memory-fragmentation"
FIX = "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"


def _gib(mib: float | None) -> str:
    return "?" if mib is None else f"{mib / 1024:.2f} GiB"


def _subject(key: str) -> str:
    """'logs/vllm.previous.log' -> 'container vllm (previous run)', as the pod checks name it."""
    name = key.removeprefix("logs/").removesuffix(".log")
    if name.endswith(".previous"):
        return f"container {name.removesuffix('.previous')} (previous run)"
    return f"container {name}"


def _already_set(facts: Facts) -> bool:
    env = versions_doc(facts).get("env") or {}
    conf = f"{env.get('PYTORCH_CUDA_ALLOC_CONF', '')},{env.get('PYTORCH_ALLOC_CONF', '')}"
    return "expandable_segments:true" in conf.lower().replace(" ", "")


@check(
    CHECK,
    title="CUDA OOM in logs: fragmentation or shortage",
    scope="logs",
    runbooks=("gpu-memory-fragmentation", "cuda-oom-runtime", "vllm-startup-memory-insufficient"),
    supersedes=("log-signatures",),
)
def memory_fragmentation(facts: Facts) -> list[Finding]:
    keys = [k for k in facts.require_any(["logs/"]) if k.endswith(".log")]
    findings: list[Finding] = []
    unread: list[str] = []
    hidden = 0
    for key in keys:
        log = facts.require(key)
        why = (
            not_text_reason(log, "a text log", empty=True) if isinstance(log, TextSource) else None
        )
        ooms: list[tuple[int, str, TorchOom]] = []
        for n, line in enumerate(log.lines() if read_for_lines(why) else (), start=1):
            if "out of memory" not in line or request_log(line):
                continue
            oom = parse_torch_oom(line)
            if oom is not None:
                ooms.append((n, line.strip(), oom))
        if ooms:  # (a binary log's text lines too: as pod-restarts and log-signatures read it)
            finding = _verdict(facts, key, ooms)
            for runbook in finding.runbooks:  # the GPU's memory for the sizing step's Do now
                finding.params.update(fix_values(runbook, (line for _, line, _ in ooms)))
            findings.append(finding)
        elif why:
            unread.append(f"{key} {why.split(';')[0].split(', not ')[0]}")
            hidden += 0 if why.startswith(EMPTY_LOG) else 1  # not text: it may hold an OOM
    if findings:
        return findings
    if unread and len(unread) == len(keys):
        raise FactMissing(keys[0], "no log could be read: " + "; ".join(unread))
    read = len(keys) - len(unread)
    unseen = facts.missing_under("logs/")
    items = [evidence(f"not read: {u}") for u in unread]
    items += [evidence(f"not read: {why}", source=key) for key, why in unseen.items()]
    # an empty log was read and held nothing: said as such, not as a log not read
    said = [f"{hidden} not read: not text"] if hidden else []
    said += [f"{len(unread) - hidden} empty"] if len(unread) > hidden else []
    not_read = f" ({'; '.join(said)})" if said else ""
    if unseen:
        not_read += f"; not collected: {', '.join(unseen)}"
    # a log not read (not text, or not collected) may hold the OOM: said, not listed among the
    # logs checked and fine (an empty one held nothing)
    verdict = info if hidden or unseen else ok
    return [verdict(CHECK, f"no CUDA out-of-memory message in {read} log(s){not_read}", items)]


def _verdict(facts: Facts, key: str, ooms: list[tuple[int, str, TorchOom]]) -> Finding:
    """One log's OOMs: fragmentation, shortage, or (without numbers) an OOM that cannot be told."""
    fragmented = [o for o in ooms if o[2].is_fragmentation]
    with_numbers = [o for o in ooms if o[2].has_numbers]
    n, line, oom = max(fragmented or with_numbers or ooms, key=lambda o: o[2].unallocated or 0)
    items = [evidence(line, source=key, line=n)]
    if len(ooms) > 1:
        items.append(evidence(f"{len(ooms)} CUDA out-of-memory messages in {key}"))
    # before the server served, an OOM is a start-up that does not fit (the runbook's
    # `at_startup`, as log-signatures and pod-restarts tell it); fragmentation's verdict has
    # no use for it, so its log is not read again
    entries = facts.get("wiki/entries") or {}
    first = ooms[0][0]
    story = (
        {}
        if fragmented
        else retold_at_startup(
            entries,
            {"cuda-oom-runtime": first},
            facts.require(key).lines,
            {"cuda-oom-runtime": ooms[-1][0]},
        )
    )
    when = ", at start-up" if story else ""
    if not oom.has_numbers:
        asked = f" (tried {_gib(oom.tried)})" if oom.tried is not None else ""
        # the OOM is what is known: a headline that named fragmentation (the runbook that
        # explains an OOM) would state what this message cannot show
        return critical(
            CHECK,
            f"CUDA out of memory{asked}{when}: the message does not say how much PyTorch "
            "reserved but left unallocated, so fragmentation (gpu-memory-fragmentation) cannot "
            "be told from a real shortage; look for PyTorch's full 'CUDA out of memory. Tried "
            "to allocate ...' line",
            items,
            [*story.values(), "cuda-oom-runtime"],
            _subject(key),
        )
    numbers = (
        f"tried {_gib(oom.tried)} with {_gib(oom.free)} free of {_gib(oom.total)}; "
        f"{_gib(oom.unallocated)} reserved by PyTorch but unallocated"
    )
    if fragmented:
        share = oom.unallocated / oom.total * 100
        fix = (
            f"{FIX} is already set, so look for a workload that churns tensor sizes"
            if _already_set(facts)
            else f"set {FIX} on the serving container"
        )
        return critical(
            CHECK,
            f"CUDA out of memory from fragmentation: {numbers} ({share:.1f} % of the "
            f"GPU) - the request would have fit; {fix}",
            items,
            ["gpu-memory-fragmentation"],
            _subject(key),
        )
    full = " (what is free is barely the request: the GPU is full)" if oom.free >= oom.tried else ""
    return critical(
        CHECK,
        f"CUDA out of memory: {numbers}{full} - a real shortage{when}, not fragmentation",
        items,
        [*story.values(), "cuda-oom-runtime"],
        _subject(key),
    )
