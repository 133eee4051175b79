"""What the vLLM checks (and the image-pull check) compare against: thresholds and serving arguments, settings first.

A value given on the command line (`settings/<name>`) wins over the serving arguments read from
the pod spec (`serving/args`, derived by llmdoctor.parsers.serving_args), which win over the
built-in defaults below. Pure functions of the facts, shared by checks/vllm_*.py.
"""

from __future__ import annotations

from typing import Any

from llmdoctor.engine.facts import Facts

DEFAULTS: dict[str, float] = {
    "max_latency_ms": 1000.0,  # the generation probe, end to end
    "max_health_ms": 1000.0,  # GET /health
    "max_queue_ms": 1000.0,  # window p95 of vllm:request_queue_time_seconds
    "max_ttft_ms": 2000.0,  # window p95 of vllm:time_to_first_token_seconds
    "max_itl_ms": 200.0,  # window p95 of inter-token latency
    "max_e2e_ms": 60000.0,  # window p95 of vllm:e2e_request_latency_seconds
    "kv_cache_full": 0.95,  # fraction of the KV cache in use
    "max_tokenizer_load_s": 2.0,
    "max_encode_ms": 100.0,  # ~2,000 tokens
    "max_tokenize_ms": 500.0,  # server POST /tokenize of the same text
    "image_pull_slow_seconds": 300.0,  # a pull that took this long is worth a warning
}


def threshold(facts: Facts, name: str) -> float:
    """settings/<name> when given, else the default."""
    value = facts.get(f"settings/{name}")
    return float(value) if value is not None else DEFAULTS[name]


def serving_arg(facts: Facts, name: str) -> Any:
    args = facts.get("serving/args")
    return args.get(name) if isinstance(args, dict) else None


def max_num_seqs(facts: Facts) -> tuple[int | None, str]:
    """(max_num_seqs, where it came from): --max-num-seqs, the pod spec, or unknown."""
    given = facts.get("settings/max_num_seqs")
    if given is not None:
        return int(given), "--max-num-seqs"
    from_spec = serving_arg(facts, "max_num_seqs")
    if isinstance(from_spec, int | float) and from_spec > 0:
        return int(from_spec), "the serving arguments (--max-num-seqs)"
    return None, "unknown"


def expected_models(facts: Facts) -> tuple[list[str], str]:
    """(model names clients are expected to use, where that came from)."""
    given = facts.get("settings/model")
    if given:
        return [str(given)], "--model"
    listed = serving_arg(facts, "served_model_names")
    names = [n for n in listed if _resolved(n)] if isinstance(listed, list) else []
    if names:
        return [str(n) for n in names], "--served-model-name in the pod spec"
    for key in ("served_model_name", "model"):
        value = serving_arg(facts, key)
        if value and _resolved(value):
            return [str(value)], f"--{key.replace('_', '-')} in the pod spec"
    return [], "unknown"


def _resolved(value: Any) -> bool:
    """False for a name still holding an unexpanded $(VAR) / ${VAR}: it cannot be compared."""
    return isinstance(value, str) and "$" not in value


def model_ids(models: Any) -> list[str]:
    """The served names in a /v1/models body."""
    if not isinstance(models, dict):
        return []
    return [str(m["id"]) for m in models.get("data") or [] if isinstance(m, dict) and m.get("id")]


def model_subject(name: str) -> str:
    return f"model {name}"


def fmt_seconds(seconds: float | None) -> str:
    """A latency for people: 850 ms, 4.2 s, < 1 ms (not "0 ms" for 27 µs)."""
    if seconds is None:
        return "n/a"
    if 0 < seconds < 0.0005:
        return "< 1 ms"
    if seconds < 1.0:
        return f"{seconds * 1000:.0f} ms"
    return f"{seconds:.1f} s"


def fmt_span(seconds: float) -> str:
    """A stretch of time for people: 40 s, 12 min, 3.5 h, 12 days."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.0f} days"


def since_start_text(window: dict[str, Any]) -> str:
    """'since the server started 12 min ago', or without the age where /metrics does not
    carry process_start_time_seconds."""
    uptime = window.get("uptime_s")
    if isinstance(uptime, int | float):
        return f"since the server started {fmt_span(uptime)} ago"
    return "since the server started"


def fmt_pct(fraction: float | None) -> str:
    return "n/a" if fraction is None else f"{fraction * 100:.1f}%"


def fmt_count(value: float | None) -> str:
    """A count for people: 120, 2.5, 3.2e+12 (not 1e308 written out in 309 digits)."""
    if value is None:
        return "n/a"
    if abs(value) >= 1e12:
        return f"{value:.2g}"
    return f"{value:.0f}" if float(value).is_integer() else f"{value:.1f}"


def window_text(window: dict[str, Any]) -> str:
    """'in the 5.0 s window' or 'in one scrape' for evidence and summaries."""
    seconds = window.get("seconds")
    if seconds:
        return f"over the {seconds:.1f} s between two scrapes"
    if len(window.get("scrapes") or []) > 1:
        return "between two scrapes (times unknown)"
    return "in a single scrape"


def scrape_sources(window: dict[str, Any]) -> str:
    """The fact keys a window was computed from, for evidence `source`."""
    return ", ".join(s["key"] for s in window.get("scrapes") or []) or "vllm/window"


def series_text(values: list[float | None], fmt=fmt_count) -> str:
    """'256 → 250' (one value per scrape)."""
    return " → ".join(fmt(v) for v in values)


def is_collection_failure(reason: str) -> bool:
    """True for a reason the endpoint collector recorded (a failed request), not 'not collected'."""
    return reason.startswith(("GET ", "POST ", "generation probe", "second /metrics"))


def went_down_text(counter: dict, reset_text: str) -> str:
    """'500 → 100 (why)' for a counter that went down between the scrapes: a restart, or
    scrapes that reached another server (`reset_text` says which, as far as the facts tell)."""
    return f"{fmt_count(counter.get('first'))} → {fmt_count(counter.get('last'))} ({reset_text})"


def second_scrape_error(facts: Facts) -> str | None:
    """Why the second /metrics request failed, when the first was read and the second was
    sent or tried (None when it was read, or not taken: `--window 0`, the first failed)."""
    if facts.has("vllm/metrics-1.txt") or not facts.has("vllm/metrics-0.txt"):
        return None
    reason = facts.missing_reason("vllm/metrics-1.txt")
    return reason.removeprefix("GET /metrics: ") if reason.startswith("GET /metrics") else None


def generation_answered(facts: Facts) -> str | None:
    """What the generation probe got, when it got a streamed answer with text (else None)."""
    probe = facts.get("vllm/probe.json")
    if not isinstance(probe, dict) or probe.get("status") != 200 or probe.get("error"):
        return None
    chunks = probe.get("chunks")
    if not isinstance(chunks, int) or isinstance(chunks, bool) or chunks < 1:
        return None
    return f"status 200, {chunks} text chunk{'s' if chunks != 1 else ''}"


def frozen_gauges(facts: Facts, data: dict[str, Any]) -> str | None:
    """The generation probe's timeout when the window counted no generated token for the model,
    else None. A stopped engine publishes nothing, so its gauges keep their last values (often
    "idle") while requests hang: then they prove nothing about the queue, the cache or progress.
    """
    probe = facts.get("vllm/probe.json")
    if not (
        isinstance(probe, dict) and probe.get("error") and probe.get("error_kind") == "timeout"
    ):
        return None
    generated = (data.get("counters", {}).get("generation_tokens") or {}).get("delta")
    return str(probe["error"]) if generated == 0 else None


def pod_restarting(facts: Facts) -> tuple[str, bool] | None:
    """('container vllm: CrashLoopBackOff, 6 restarts, not ready', whether it has exited) when
    the pod facts show the serving container restarting, exited or not ready, else None (no
    pod facts: a plain URL probe)."""
    pod = facts.get("k8s/pod.json")
    status = pod.get("status") if isinstance(pod, dict) else None
    statuses = status.get("containerStatuses") if isinstance(status, dict) else None
    for cs in statuses if isinstance(statuses, list) else []:
        if not isinstance(cs, dict):
            continue
        parts = []
        state = cs.get("state") if isinstance(cs.get("state"), dict) else {}
        waiting = state.get("waiting") if isinstance(state.get("waiting"), dict) else {}
        if waiting.get("reason"):
            parts.append(str(waiting["reason"]))
        ended = state.get("terminated") if isinstance(state.get("terminated"), dict) else {}
        if ended:
            parts.append(
                f"exited ({ended.get('reason') or 'exit code ' + str(ended.get('exitCode'))})"
            )
        restarts = cs.get("restartCount")
        if isinstance(restarts, int) and restarts > 0:
            parts.append(f"{restarts} restart{'s' if restarts != 1 else ''}")
        if cs.get("ready") is False:
            parts.append("not ready")
        # restarts long ago on a container that is ready now explain nothing about this probe
        if parts and (waiting.get("reason") or ended or cs.get("ready") is False):
            return f"container {cs.get('name')}: {', '.join(parts)}", bool(ended)
    return None


def pod_not_started(facts: Facts) -> str | None:
    """'pod Pending, no container started (Unschedulable: 0/3 nodes are available: …)' when the
    pod facts show a pod whose serving container never ran, else None: its server cannot have
    died, it never served (no pod facts: a plain URL probe)."""
    pod = facts.get("k8s/pod.json")
    status = pod.get("status") if isinstance(pod, dict) else None
    if not isinstance(status, dict) or status.get("phase") != "Pending":
        return None
    statuses = status.get("containerStatuses")
    for cs in statuses if isinstance(statuses, list) else []:
        state = cs.get("state") if isinstance(cs, dict) else None
        last = cs.get("lastState") if isinstance(cs, dict) else None
        ran = [
            s
            for s in (state, last)
            if isinstance(s, dict) and ("running" in s or "terminated" in s)
        ]
        if ran:
            return None
    why = ""
    for condition in status.get("conditions") or []:
        if isinstance(condition, dict) and condition.get("status") == "False":
            reason, message = condition.get("reason") or "", str(condition.get("message") or "")
            why = f" ({reason}: {message[:160]})" if reason else ""
            break
    return f"pod Pending, no container started{why}"


def server_not_running(facts: Facts) -> tuple[str, str] | None:
    """Why the pod's server cannot answer, when its pod says so: (the pod's own line, the
    clause that tells the reader where to act), else None. A restarting container's silence
    follows from the restart; a server that never started did not die (no engine-dead)."""
    found = pod_restarting(facts)
    restarting, exited = found if found else (None, False)
    if restarting and exited:
        return restarting, (
            f"a consequence of the container having exited ({restarting}); why it exited, and "
            "why it was not restarted, is the finding to act on"
        )
    if restarting:
        return restarting, (
            f"a consequence of the container restarting ({restarting}); the restart's cause is "
            "the finding to act on"
        )
    not_started = pod_not_started(facts)
    if not_started:
        return not_started, (
            f"the server has not started ({not_started}); why the pod has not started is the "
            "finding to act on"
        )
    return None
