"""Business-level health: a real generation through the OpenAI API, timed and classified.

From `vllm/probe.json` (one streamed completion of a fixed prompt at temperature 0). A failed
probe is classified from its status and error body (vLLM's flat `{"object": "error", ...}` up
to 0.10.0 and nested `{"error": {...}}` from 0.10.1); empty text, text that is not language
(`!!!!`, NaN logits) or a latency over settings/max_latency_ms is critical even when /health
says 200.
"""

from __future__ import annotations

import re
from typing import Any

from llmdoctor.collectors.vllm_generation_probe import PROBE_MAX_TOKENS
from llmdoctor.engine.facts import Facts
from llmdoctor.engine.findings import Finding, critical, evidence, info, ok, warning
from llmdoctor.engine.registry import check
from llmdoctor.parsers.documents import NUMBER, OBJECT, TEXT, require_document
from llmdoctor.parsers.generated_text import degenerate
from llmdoctor.parsers.vllm_engines import engine_views, queue_seen
from llmdoctor.parsers.vllm_refusals import ADMISSION_RUNBOOK, SCALING_RUNBOOK, deliberate_refusal
from llmdoctor.parsers.vllm_serving import (
    fmt_seconds,
    model_subject,
    server_not_running,
    serving_arg,
    threshold,
)

CHECK = "vllm-generation"
CONTEXT_LENGTH = re.compile(
    r"maximum context length|longer than the maximum model length|context_length_exceeded",
    re.IGNORECASE,
)
MODEL_MISSING = re.compile(r"The model `[^`]*` does not exist|NotFoundError", re.IGNORECASE)
CHAT_TEMPLATE = re.compile(r"chat template|chat_template", re.IGNORECASE)
ENGINE_DEAD = re.compile(r"EngineDeadError|EngineCore|Background loop|engine loop", re.IGNORECASE)
# what an error body or an error event in the stream may name as the cause, before the engine's
# death it leads to
REQUEST_CAUSES = (
    (
        re.compile(r"CUDA out of memory|OutOfMemoryError|CUDA error: out of memory", re.I),
        "the GPU ran out of memory",
        "cuda-oom-runtime",
    ),
    (
        re.compile(r"illegal memory access", re.I),
        "an illegal memory access",
        "illegal-memory-access",
    ),
    (re.compile(r"\bNCCL\b", re.I), "an NCCL error", "nccl-failure"),
)
# a first token slow with no queue in front of it: a slow tokenizer (the API server at 100 % CPU),
# or time spent between the client and vLLM (a proxy, the network)
_FIRST_TOKEN_SUSPECTS = ("tokenizer-problem", "gateway-timeout")


def error_text(body: Any) -> str:
    """The message of an OpenAI/vLLM error body (flat or nested), or the raw text."""
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict):
            return " ".join(str(inner.get(k) or "") for k in ("message", "type", "code")).strip()
        return str(inner)
    return str(body or "")


def classify(probe: dict) -> tuple[str, list[str]]:
    """(what went wrong, runbook ids) for a probe that got no usable completion."""
    status, kind = probe.get("status"), probe.get("error_kind")
    text = f"{probe.get('error') or ''} {error_text(probe.get('error_body'))}"
    if CONTEXT_LENGTH.search(text):
        if probe.get("request", {}).get("max_tokens") == PROBE_MAX_TOKENS:
            # llmdoctor's own request: a 5-word prompt and 16 tokens; no client to fix
            return (
                f"even llmdoctor's probe (a 5-word prompt, {PROBE_MAX_TOKENS} tokens) does not "
                "fit the context length: the server's --max-model-len is set below any real "
                "request (Fix step 3)",
                ["context-length-exceeded"],
            )
        return "the prompt does not fit the context length", ["context-length-exceeded"]
    if MODEL_MISSING.search(text) or (status == 404 and "model" in text.lower()):
        return "the model name is not served", ["model-name-not-found"]
    if CHAT_TEMPLATE.search(text):
        return "the tokenizer has no chat template", ["chat-template-missing"]
    refusal = deliberate_refusal(text)
    if refusal is not None:  # a 503 the server chose: it works, it is full or rescaling
        return refusal.what, [refusal.runbook]
    for pattern, what, runbook in REQUEST_CAUSES:
        if pattern.search(text):
            return what, [runbook]
    if ENGINE_DEAD.search(text):
        return "the engine is dead", ["engine-dead"]
    if status in (502, 504):
        return "a proxy or gateway answered instead of vLLM", ["gateway-timeout"]
    body = probe.get("error_body")
    page = isinstance(body, str) and body.lstrip()[:15].lower().startswith(("<!doctype", "<html"))
    if kind == "html" or page:  # a login (SSO) page, a proxy's page or another app: no timeout
        return "an HTML page (a login page, a proxy or another app) answered instead of vLLM", []
    if status in (401, 403):
        return "the server needs an API key (set LLMDOCTOR_API_KEY)", []
    if status is not None and status >= 500:
        return "the server failed the request", ["engine-dead"]
    if kind == "timeout":
        stage = "no first token" if not probe.get("chunks") else "the stream did not finish"
        return f"{stage} in time", ["queue-saturation", "engine-dead"]
    if kind == "connect":
        return "the server cannot be reached", ["engine-dead"]
    if kind == "stream-error":
        return "the server sent an error event instead of the rest of the answer", ["engine-dead"]
    if kind == "reset":  # cut, or ended without [DONE]: the engine, or a proxy's idle timeout
        return "the answer broke off mid-stream", ["engine-dead", "gateway-timeout"]
    if kind == "garbage":
        return "the answer is not an OpenAI completion", ["gateway-timeout"]
    if kind == "degenerate":
        return "the text is not language (NaN logits sample token 0)", ["nan-or-garbage-output"]
    return "the server rejected the request", []


def _timings(probe: dict) -> str:
    """'status 200, total 850 ms, first token 120 ms, ...' leaving out what was not measured."""
    parts = [f"status {probe.get('status') if probe.get('status') is not None else 'none'}"]
    for label, key in (
        ("total", "latency_ms"),
        ("first token", "ttft_ms"),
        ("inter-token mean", "itl_ms"),
        ("inter-token max", "itl_max_ms"),
    ):
        if probe.get(key) is not None:
            parts.append(f"{label} {probe[key]:.0f} ms")
    parts.append(f"{probe.get('chunks') or 0} text chunks")
    if probe.get("finish_reason"):
        parts.append(f"finish_reason {probe['finish_reason']}")
    return ", ".join(parts)


def _evidence(probe: dict) -> list[dict]:
    req = probe.get("request") or {}
    items = [
        evidence(
            f"POST {req.get('path')} model={req.get('model')!r} max_tokens="
            f"{req.get('max_tokens')} temperature={req.get('temperature')} stream=true",
            "vllm/probe.json",
        ),
        evidence(_timings(probe), "vllm/probe.json"),
        evidence(f"text: {(probe.get('text') or '')[:120]!r}", "vllm/probe.json"),
    ]
    if probe.get("error"):
        items.append(evidence(f"error: {probe['error']}", "vllm/probe.json"))
    body = probe.get("error_body")
    if body:
        items.append(evidence(f"error body: {error_text(body)[:400]}", "vllm/probe.json"))
    return items


def _engine_activity(facts: Facts) -> tuple[bool, float | None]:
    """(some engine sleeps, tokens generated in the /metrics window or None if unknown)."""
    window = facts.get("vllm/window")
    if not isinstance(window, dict):
        return False, None
    asleep, generated = False, None
    for model, data in (window.get("models") or {}).items():
        asleep = asleep or any(v.asleep for v in engine_views(model, data))
        delta = (data.get("counters", {}).get("generation_tokens") or {}).get("delta")
        if delta is not None:
            generated = (generated or 0.0) + delta
    return asleep, generated


def _timeout_with_health_200(
    facts: Facts, what: str, model: str, first_token: str | None
) -> tuple[bool, str, list[str], bool]:
    """(asleep, what, runbooks, whether they are only places to look) for a probe that timed
    out while /health said 200 (`first_token`: when its first token came, if it did).

    The engine's counters tell a probe stuck behind a long queue (tokens flow, requests wait)
    from a wedged engine (nothing moves), from an engine put to sleep on purpose, and from a
    probe that never reached the engine's queue (tokens flow, nothing waits).
    """
    asleep, generated = _engine_activity(facts)
    if asleep:
        return True, f"{what} (the engine is asleep: sleep mode; see vllm-engine)", [], False
    if generated and first_token is not None:
        # its first token came: the request reached the engine, and stalled after it
        return (
            False,
            f"{what}: the first token came ({first_token}) and the stream then stalled while "
            f"the engine generated +{generated:.0f} tokens in the /metrics window: a proxy "
            "that buffers or times out the stream, or the engine stalling on this request",
            ["gateway-timeout", "engine-wedged"],
            True,
        )
    if generated:
        flowing = f"{what}: the engine generates (+{generated:.0f} tokens in the /metrics window)"
        queue = queue_seen(facts, model, threshold(facts, "max_queue_ms"))
        if queue.queued:
            return (
                False,
                f"{flowing} and {queue.text}: the probe waits behind them",
                ["queue-saturation"],
                False,
            )
        if queue.queued is False:
            return (
                False,
                f"{flowing} while {queue.text}: the probe was held before the engine's queue "
                "or its own request is slow (a proxy, the network, the API server's tokenizer)",
                [*_queue_leads(queue), "gateway-timeout", "tokenizer-problem"],
                True,
            )
        return (
            False,
            f"{flowing}; {queue.text}: a queue, a proxy or the network",
            ["queue-saturation", "gateway-timeout"],
            True,
        )
    if generated == 0:
        return (
            False,
            f"engine wedged: {what} and no token was generated in the /metrics window",
            ["engine-wedged"],
            False,
        )
    return (
        False,
        f"{what}: the engine is wedged or the queue is long",
        [
            "engine-wedged",
            "queue-saturation",
        ],
        True,
    )


def _slow_first_token(facts: Facts, model: str, ttft: float) -> tuple[str, list[str], bool]:
    """(what the slow first token was, runbooks, whether they are only places to look).

    A slow first token is the queue's symptom, but also a long prefill's, a cold start's or a
    compilation's, a slow tokenizer's, CPU offload's, a slow network's or proxy's: the queue is
    named only when the /metrics window saw requests wait."""
    waited = f"most of it waiting for the first token ({ttft:.0f} ms)"
    queue = queue_seen(facts, model, threshold(facts, "max_queue_ms"))
    if queue.queued:
        return f"{waited}: {queue.text}", ["queue-saturation"], False
    if queue.queued is None:
        return (
            f"{waited}; {queue.text}, so the cause is open: a queue, a long prefill, a cold "
            "start, a slow tokenizer or network",
            ["queue-saturation", *_FIRST_TOKEN_SUSPECTS],
            True,
        )
    suspects = [*_queue_leads(queue), *_FIRST_TOKEN_SUSPECTS]
    _, generated = _engine_activity(facts)
    if generated == 0 and "engine-wedged" not in suspects:
        suspects.insert(0, "engine-wedged")
    if _preempted(facts):
        suspects.insert(0, "kv-cache-preemption")
    return (
        f"{waited}, while {queue.text}{_engine_first_token(facts, model)}; a long prefill, a "
        "cold start or compilation, CPU offload, a slow tokenizer, network or proxy are left",
        suspects,
        True,
    )


def _queue_leads(queue) -> list[str]:
    """The runbooks a queue that is no proven one still points at: a queue seen in one scrape
    (it may be forming). Requests waiting with none running are no capacity queue: an engine
    that generated nothing is named wedged by the caller."""
    return ["queue-saturation"] if queue.partial else []


def _slow_decode(facts: Facts, model: str, probe: dict) -> tuple[str, list[str], bool]:
    """(what the slow generation after its first token was, runbooks, whether they are only
    places to look): preemptions in the window, --enforce-eager or a queue prove a lead; with
    none of them the usual ones are places to look."""
    itl = probe.get("itl_ms")
    pace = f"inter-token {itl:.0f} ms" if _readable(itl) else "inter-token time not measured"
    phase = f"decoding is slow ({pace})"
    books = ["kv-cache-preemption"] if _preempted(facts) else []
    if serving_arg(facts, "enforce_eager"):
        books.append("enforce-eager-in-production")
    queue = queue_seen(facts, model, threshold(facts, "max_queue_ms"))
    if queue.queued:
        books.append("queue-saturation")
    if books:
        return phase, books, False
    # --enforce-eager stays a lead only where the serving flags could not be read
    unknown_flags = facts.get("serving/args") is None
    return (
        f"{phase}; the /metrics window shows no preemption and {queue.text}, so no cause is "
        "proven (a long output, CPU offload, a slow GPU, speculative decoding"
        f"{', --enforce-eager' if unknown_flags else ''} are left)",
        [*_queue_leads(queue), *(["enforce-eager-in-production"] if unknown_flags else [])],
        True,
    )


def _readable(value: Any) -> bool:
    """A measured time: a finite number of milliseconds, not below 0."""
    return isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value < 1e12


def _engine_first_token(facts: Facts, model: str) -> str:
    """'; vLLM's own time to first token p95 40 ms over 4 requests' from the window, which
    counts from the request's arrival in the engine (after the API server tokenized it)."""
    window = facts.get("vllm/window")
    models = (window.get("models") or {}) if isinstance(window, dict) else {}
    hist = ((models.get(model) or {}).get("histograms") or {}).get("ttft") or {}
    if not hist.get("count") or hist.get("p95") is None or hist.get("since_start"):
        return ""
    return (
        f"; vLLM's own time to first token p95 {fmt_seconds(hist['p95'])} over "
        f"{hist['count']:.0f} request{'' if hist['count'] == 1 else 's'} in that window"
    )


def _preempted(facts: Facts) -> bool:
    """Whether the /metrics window counted preemptions (evicted requests redo their prefill)."""
    window = facts.get("vllm/window")
    if not isinstance(window, dict):
        return False
    return any(
        ((data.get("counters") or {}).get("preemptions") or {}).get("delta")
        for data in (window.get("models") or {}).values()
    )


def _health_says_ok(facts: Facts) -> str:
    health = facts.get("vllm/health.json")
    if isinstance(health, dict) and health.get("status") == 200:
        return " (while /health says 200)"
    return ""


@check(
    CHECK,
    title="Generation probe (business-level health)",
    scope="vllm",
    needs=("vllm/probe.json",),
    runbooks=(
        "context-length-exceeded",
        "model-name-not-found",
        "chat-template-missing",
        "engine-dead",
        "engine-wedged",
        "gateway-timeout",
        "queue-saturation",
        "kv-cache-preemption",
        "enforce-eager-in-production",
        "nan-or-garbage-output",
        "tokenizer-problem",
        "cuda-oom-runtime",
        "illegal-memory-access",
        "nccl-failure",
        ADMISSION_RUNBOOK,
        SCALING_RUNBOOK,
    ),
    kind="symptom",
    follows=(
        "vllm-kv-cache",
        "vllm-queue",
        "vllm-engine",
        "vllm-health",
        "pod-restarts",
        "pod-scheduling",
    ),
)
def vllm_generation(facts: Facts) -> Finding:
    probe = require_document(
        facts,
        "vllm/probe.json",
        {
            "request": OBJECT,
            "status": NUMBER,
            "latency_ms": NUMBER,
            "ttft_ms": NUMBER,
            "itl_ms": NUMBER,
            "itl_max_ms": NUMBER,
            "chunks": NUMBER,
            "text": TEXT,
            "error": TEXT,
            "error_kind": TEXT,
        },
        "a generation probe result",
        marker=("request", "status", "error"),
    )
    req = probe.get("request") or {}
    subject = model_subject(str(req.get("model")))
    items = _evidence(probe)
    also = _health_says_ok(facts)
    if probe.get("error"):
        what, runbooks = classify(probe)
        down = server_not_running(facts) if probe.get("status") is None else None
        if down:
            items.append(evidence(down[0], "k8s/pod.json"))
            return warning(
                CHECK, f"no generation ({what}: {probe['error']}): {down[1]}", items, [], subject
            )
        unproven = False
        kind = probe.get("error_kind")
        if kind == "timeout" and also:
            model = str(req.get("model"))
            ttft = probe.get("ttft_ms")
            first = f"after {ttft:.0f} ms" if probe.get("chunks") and _readable(ttft) else None
            asleep, what, runbooks, unproven = _timeout_with_health_200(facts, what, model, first)
            if asleep:
                return info(CHECK, f"{what}: {probe['error']}", items, runbooks, subject)
        elif kind in ("reset", "stream-error") and also and "engine-dead" in runbooks:
            # /health answers 200: unless the error says EngineDeadError, nothing proves a death
            said = f"{probe.get('error') or ''} {error_text(probe.get('error_body'))}"
            unproven = not ENGINE_DEAD.search(said)
        generated = (_engine_activity(facts)[1] or 0) if runbooks == ["engine-dead"] else 0
        if also and generated > 0:
            # a dead engine answers /health 503 and counts no token: this one did both
            what = (
                f"{what}, yet /health says 200 and the engine generated +{generated:.0f} tokens "
                "in the /metrics window (it died during the collection, or another replica "
                "answered the probe)"
            )
            unproven = True
        if runbooks in ([ADMISSION_RUNBOOK], [SCALING_RUNBOOK]):
            return warning(
                CHECK,
                f"the probe was turned away on purpose, not by a failure: {what}{also}",
                items,
                runbooks,
                subject,
            )
        finding = critical(
            CHECK,
            f"business-level health failed: {what}{also}: {probe['error']}",
            items,
            runbooks,
            subject,
        )
        finding.runbooks_unproven = unproven
        return finding
    if not (probe.get("text") or "").strip():
        # an end-of-sequence first (a template, a stop string) as much as NaN logits
        empty = critical(
            CHECK,
            f"business-level health failed: the probe generated no text (finish_reason "
            f"{probe.get('finish_reason')}){also}: the model ended at once (a chat template, "
            "stop tokens) or its logits are broken",
            items,
            [*(["chat-template-missing"] if "messages" in req else []), "nan-or-garbage-output"],
            subject,
        )
        empty.runbooks_unproven = True
        return empty
    why = degenerate(probe.get("text") or "")  # a bundle from before the probe refused it
    if why is not None:
        return critical(
            CHECK,
            f"business-level health failed: the probe's text is not language ({why}){also}",
            items,
            ["nan-or-garbage-output"],
            subject,
        )
    limit = threshold(facts, "max_latency_ms")
    latency, ttft = probe.get("latency_ms"), probe.get("ttft_ms")
    unreadable = [
        f"{key} {probe.get(key)!r}"
        for key in ("latency_ms", "ttft_ms")
        if not _readable(probe.get(key)) and (key == "latency_ms" or probe.get(key) is not None)
    ]
    if not unreadable and ttft is not None and ttft > latency:
        unreadable.append(f"ttft_ms {ttft:.0f} after latency_ms {latency:.0f}")
    if not unreadable and latency == 0:  # a request over HTTP that generated takes time
        unreadable.append(f"latency_ms 0 for {probe.get('chunks') or 0} chunks")
    if unreadable:
        return info(
            CHECK,
            f"the probe generated {probe.get('chunks') or 0} text chunks, but its timings cannot "
            f"be read ({', '.join(unreadable)}): latency not judged",
            items,
            [],
            subject,
        )
    if latency > limit:
        unproven = False
        if ttft is not None and ttft >= 0.5 * latency:
            phase, books, unproven = _slow_first_token(facts, str(req.get("model")), ttft)
        else:
            phase, books, unproven = _slow_decode(facts, str(req.get("model")), probe)
        finding = critical(
            CHECK,
            f"business-level health failed: a {req.get('max_tokens')}-token generation took "
            f"{latency:.0f} ms (> {limit:.0f} ms){also}, {phase}",
            items,
            books,
            subject,
        )
        finding.runbooks_unproven = unproven
        return finding
    first = f" (first token {ttft:.0f} ms)" if ttft is not None else ""
    return ok(
        CHECK,
        f"generation works: {probe.get('chunks')} chunks in {latency:.0f} ms{first}: "
        f"{(probe.get('text') or '').strip()[:40]!r}",
        items,
        subject,
    )
