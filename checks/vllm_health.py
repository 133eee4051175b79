"""Endpoint health: /health (status, latency), /v1/models (the expected model served), /metrics.

A vLLM server answers GET /health with an empty 200; 500 (up to ~0.10) or 503 (from ~0.11)
once its engine has died. /v1/models lists the served names requests must use. A failed
request is reported as a finding with its reason, never as "healthy".
"""

from __future__ import annotations

from llmdoctor.collectors.network_errors import (
    ACCEPTED_NO_ANSWER,
    NOT_SENT_KIND,
    UNRESOLVED,
    never_sent,
)
from llmdoctor.engine.facts import Facts
from llmdoctor.engine.findings import Finding, Severity, critical, evidence, info, ok, warning
from llmdoctor.engine.registry import check
from llmdoctor.parsers.documents import NUMBER, TEXT, require_document
from llmdoctor.parsers.vllm_refusals import (
    ADMISSION_RUNBOOK,
    SCALING_RUNBOOK,
    deliberate_refusal,
)
from llmdoctor.parsers.vllm_serving import (
    expected_models,
    generation_answered,
    is_collection_failure,
    model_ids,
    scrape_sources,
    second_scrape_error,
    server_not_running,
    threshold,
)

CHECK = "vllm-health"
API_KEY_HINT = " (the server needs an API key: set LLMDOCTOR_API_KEY)"


def _health(facts: Facts) -> Finding:
    health = require_document(
        facts,
        "vllm/health.json",
        {"status": NUMBER, "latency_ms": NUMBER, "error": TEXT, "error_kind": TEXT},
        "a /health result",
    )
    status, error, kind = health.get("status"), health.get("error"), health.get("error_kind")
    latency = health.get("latency_ms")
    answer = f"status {status}" if status is not None else "no status"
    after = f" after {latency} ms" if latency is not None else ""
    items = [
        evidence(
            f"GET /health: {answer}{after}" + (f"; {error}" if error else ""), "vllm/health.json"
        )
    ]
    version = facts.get("vllm/version.json")
    if isinstance(version, dict) and version.get("version"):
        items.append(evidence(f"vLLM version {version['version']}", "vllm/version.json"))
    subject = "endpoint /health"
    if kind == NOT_SENT_KIND:
        # llmdoctor's budget ran out before the request started: the server was not asked
        return info(CHECK, f"/health not checked: {error}", items, [], subject)
    if status is None:
        what = error or "no status and no error recorded"
        down = server_not_running(facts)
        if down:
            items.append(evidence(down[0], "k8s/pod.json"))
            return warning(
                CHECK, f"the endpoint does not answer ({what}): {down[1]}", items, [], subject
            )
        if kind in ("tls", "protocol") or UNRESOLVED in what:
            # nothing says the engine died: the address is wrong, or TLS/HTTP do not match
            return critical(
                CHECK,
                f"the endpoint cannot be reached ({what}): check the URL, the Service name "
                "and the scheme before the server",
                items,
                [],
                subject,
            )
        generated = generation_answered(facts)
        if kind == "timeout" and ACCEPTED_NO_ANSWER in what and generated:
            # the engine generates: what hangs is /health's own path (a proxy route, the API
            # server's health handler), not the engine; a liveness probe on it restarts the pod
            items.append(evidence(f"generation probe: {generated}", "vllm/probe.json"))
            return warning(
                CHECK,
                f"GET /health takes the connection but does not answer ({what}), yet a "
                f"generation answered ({generated}): the engine works; the /health path is "
                "blocked (a proxy route or the API server's health handler), and a liveness "
                "probe on it would restart a serving pod",
                items,
                [],
                subject,
            )
        if kind == "timeout" and ACCEPTED_NO_ANSWER in what:
            # a dead engine answers 500/503 or the server exits (refused); a server that takes
            # the request and says nothing is blocked, or a proxy in front of it holds it
            silent = critical(
                CHECK,
                f"the endpoint takes the connection but does not answer ({what}): the API "
                "server is up but blocked (wedged engine or event loop), or a proxy holds it",
                items,
                ["engine-wedged", "gateway-timeout"],
                subject,
            )
            silent.runbooks_unproven = True  # a port that accepts proves neither
            return silent
        if kind == "connect":
            # refused: no process listens there; vLLM after its engine died, vLLM still loading
            # (it opens the port once the engine is up), or another port: the log tells which
            refused = critical(
                CHECK,
                "nothing listens on this address (connection refused): vLLM has exited (an "
                "engine that dies takes the API server down; its log's last error says why), "
                "is still loading the model (the port opens once the engine is up), or serves "
                "another port",
                items,
                ["engine-dead"],
                subject,
            )
            refused.runbooks_unproven = True
            return refused
        books = ["engine-dead", *(["gateway-timeout"] if kind == "timeout" else [])]
        return critical(CHECK, f"the endpoint does not answer ({what})", items, books, subject)
    if status == 200 and error and kind != "html":
        # the headers came, the answer did not complete (a drip, a cut): vLLM's empty 200 is
        # whole at once, so what answers is not known to be a healthy vLLM
        unfinished = critical(
            CHECK,
            f"GET /health answered 200 but the answer did not complete ({error}): the "
            "server's health is not known (a blocked API server, or a proxy or another "
            "program holding the answer)",
            items,
            ["engine-wedged", "gateway-timeout"],
            subject,
        )
        unfinished.runbooks_unproven = True
        return unfinished
    if kind == "html":
        return warning(
            CHECK,
            f"GET /health answered {status} with an HTML page, not vLLM's empty 200: a proxy, "
            "login page or another app answers on this address",
            items,
            ["gateway-timeout"] if status in (502, 504) else [],  # a login page is no timeout
            subject,
        )
    refusal = deliberate_refusal(health.get("body")) if status == 503 else None
    if refusal is not None:  # vLLM 0.32's scaling pause answers /health too
        return warning(
            CHECK,
            f"GET /health returned 503 on purpose: {refusal.what}",
            [*items, evidence(f"body: {health['body'][:200]}", "vllm/health.json")],
            [refusal.runbook],
            subject,
        )
    generated = generation_answered(facts)
    if status in (500, 503) and generated:
        # a dead engine fails every generation: what answers /health here is not its health
        items.append(evidence(f"generation probe: {generated}", "vllm/probe.json"))
        return warning(
            CHECK,
            f"GET /health returned {status}, yet a generation answered ({generated}): the "
            "engine works; something else answers /health with an error (a proxy or sidecar "
            "route, or another replica behind the address), and a liveness probe on it would "
            "restart a serving pod",
            items,
            [],
            subject,
        )
    if status in (500, 503):
        return critical(
            CHECK,
            f"GET /health returned {status}: vLLM answers this when its engine process has died",
            items,
            ["engine-dead"],
            subject,
        )
    if status in (502, 504):
        return critical(
            CHECK,
            f"GET /health returned {status} from a proxy or gateway in front of vLLM",
            items,
            ["gateway-timeout", "engine-dead"],
            subject,
        )
    if status != 200:
        hint = API_KEY_HINT if status in (401, 403) else ""
        if status == 404:
            hint = " (nothing at /health here: give the server's root URL, without /v1 or a path)"
        return warning(CHECK, f"GET /health returned {status}: {error}{hint}", items, [], subject)
    body = health.get("body")
    if isinstance(body, str) and _binary(body):
        return warning(
            CHECK,
            f"GET /health answered 200 with binary data ({_shown(body)}), not vLLM's empty "
            "200: another program (or protocol) answers on this address",
            items,
            [],
            subject,
        )
    limit = threshold(facts, "max_health_ms")
    if latency is not None and latency > limit:
        return warning(
            CHECK,
            f"GET /health is slow: {latency:.0f} ms (> {limit:.0f} ms); the API server's event "
            "loop or the engine's health check is busy (a dead engine answers 500/503 at once)",
            items,
            [],  # a loaded server answers late (the real KV-full drill): no engine-dead
            subject,
        )
    return ok(CHECK, f"GET /health 200 in {latency} ms", items, subject)


def _binary(text: str) -> bool:
    """Whether a decoded body is not text: undecodable bytes or control characters in it."""
    odd = sum(1 for c in text if c == "\ufffd" or (c < " " and c not in "\t\n\r"))
    return odd * 10 > len(text)


def _shown(body: str) -> str:
    return ascii(body[:24])[1:-1] + ("…" if len(body) > 24 else "")


def _models(facts: Facts) -> Finding | None:
    subject = "endpoint /v1/models"
    if not facts.has("vllm/models.json"):
        reason = facts.missing_reason("vllm/models.json")
        if not is_collection_failure(reason):
            return None
        hint = API_KEY_HINT if "HTTP 401" in reason or "HTTP 403" in reason else ""
        refusal = deliberate_refusal(reason)
        if refusal is not None:
            hint = f" ({refusal.what})"
        books = [refusal.runbook] if refusal else []
        told = info if never_sent(reason) else warning
        return told(CHECK, f"cannot list the served models: {reason}{hint}", [], books, subject)
    models = facts.require("vllm/models.json")
    ids = model_ids(models)
    data = models.get("data") if isinstance(models, dict) else None
    cards = {m.get("id"): m for m in data or [] if isinstance(m, dict)}
    listed = ", ".join(
        f"{i} (max_model_len {cards[i].get('max_model_len')})"
        if cards[i].get("max_model_len")
        else i
        for i in ids
    )
    items = [evidence(f"/v1/models lists: {listed or 'nothing'}", "vllm/models.json")]
    if not ids:
        return critical(
            CHECK, "/v1/models lists no model", items, ["model-name-not-found"], subject
        )
    expected, source = expected_models(facts)
    if expected and not set(expected) & set(ids):
        items.append(evidence(f"expected: {', '.join(expected)} (from {source})"))
        return critical(
            CHECK,
            f"the model clients ask for ({', '.join(expected)}, from {source}) is not served; "
            f"/v1/models lists {', '.join(ids)}: requests get 404 'The model ... does not exist'",
            items,
            ["model-name-not-found"],
            subject,
        )
    return ok(CHECK, f"serves {', '.join(ids)}", items, subject)


def _metrics(facts: Facts) -> Finding | None:
    subject = "endpoint /metrics"
    if not facts.has("vllm/metrics-0.txt"):
        reason = facts.missing_reason("vllm/metrics-0.txt")
        if not is_collection_failure(reason):
            return None
        refusal = deliberate_refusal(reason)
        told = info if never_sent(reason) else warning
        return told(
            CHECK,
            f"/metrics could not be read ({reason}); queue, KV-cache and latency not checked",
            [],
            [refusal.runbook] if refusal else [],
            subject,
        )
    if not facts.has("vllm/window"):
        reason = facts.missing_reason("vllm/window")
        return warning(
            CHECK,
            f"/metrics is not usable: {reason}; queue, KV-cache, engine and latency not checked",
            [],
            [],
            subject,
        )
    window = facts.require("vllm/window")
    items = [evidence(f"/metrics format: {window.get('release_text')}", scrape_sources(window))]
    if window.get("rejected"):
        errors = window.get("parse_errors") or [f"{window['rejected'][0]} has no vllm: series"]
        return warning(
            CHECK,
            f"a /metrics scrape was rejected: {errors[0]}; the window uses "
            f"{len(window.get('scrapes') or [])} good scrape(s)",
            items,
            [],
            subject,
        )
    second = second_scrape_error(facts)
    if second is not None and not never_sent(second):  # sent, and the server failed it
        # it answered once and not again: a server that died or choked during the collection
        return warning(
            CHECK,
            f"the second /metrics scrape failed ({second}) after the first was read: the server "
            "stopped answering during the collection; progress, queue and latency over the "
            "window are not measured",
            items,
            [],
            subject,
        )
    if window.get("parse_errors"):
        return info(CHECK, f"/metrics: {window['parse_errors'][0]}", items, [], subject)
    return None


@check(
    CHECK,
    title="vLLM endpoint health (/health, /v1/models, /metrics)",
    scope="vllm",
    needs=("vllm/health.json",),
    runbooks=(
        "engine-dead",
        "engine-wedged",
        "gateway-timeout",
        "model-name-not-found",
        SCALING_RUNBOOK,
        ADMISSION_RUNBOOK,
    ),
    follows=(
        "pod-restarts",
        "pod-readiness",
        "pod-scheduling",
        "pod-image-pull",
        "vllm-engine",
        "xid",
        "gpu-health",
    ),
)
def vllm_health(facts: Facts) -> list[Finding]:
    health = _health(facts)
    findings = [health]
    gone = _server_gone(facts, health)
    for part in (_models, _metrics):
        finding = part(facts)
        if finding is None:
            continue
        if gone and finding.severity is Severity.WARNING and not finding.runbooks:
            # nothing listens: /v1/models and /metrics fail for the same reason as /health,
            # one outage told once (its evidence), not three headlines
            health.evidence.append(evidence(finding.summary, f"vllm ({finding.subject})"))
            continue
        findings.append(finding)
    return findings


def _server_gone(facts: Facts, health: Finding) -> bool:
    """Whether /health got no answer at all because the server is unreachable (refused, reset,
    timed out, a TLS handshake that fails): then every other endpoint fails the same way."""
    doc = facts.get("vllm/health.json")
    kind = doc.get("error_kind") if isinstance(doc, dict) else None
    return health.severity is Severity.CRITICAL and kind in ("connect", "reset", "timeout", "tls")
