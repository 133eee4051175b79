"""Per-engine views of `vllm/window`: what one data-parallel engine of one model did.

vLLM runs one scheduler per data-parallel engine (`--data-parallel-size N`, one `engine`
label value each), and `--max-num-seqs` bounds each engine on its own. Checks therefore judge
every (model_name, engine) series and report the server from them. Pure functions, shared by
checks/vllm_*.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from llmdoctor.engine.facts import Facts
from llmdoctor.parsers.vllm_metrics import engine_delta, engine_values

# with no engine-step counter, a stall this long is no longer explained by one slow prefill
SURE_WITHOUT_STEPS_S = 30.0
SLEEP_LEVELS = {
    "sleep_weights_offloaded": "level 1: weights offloaded to CPU memory, KV cache discarded",
    "sleep_discard_all": "level 2: weights and KV cache discarded",
}


def is_fraction(value) -> bool:
    """vLLM's KV usage gauge is a fraction (0.73 is 73 %), whatever `_perc` in its name says."""
    return isinstance(value, int | float) and 0.0 <= value <= 1.0


@dataclass
class EngineView:
    """One engine of one model over the window (lists hold one value per scrape)."""

    model: str
    engine: str
    running: list[float]
    waiting: list[float]
    waiting_capacity: list[float] | None  # vllm:num_requests_waiting_by_reason (0.11+)
    waiting_deferred: list[float] | None
    kv: list[float | None]
    awake: list[float | None]  # vllm:engine_sleep_state{sleep_state="awake"}; [] when absent
    sleep_level: str | None
    generated: float | None  # counter deltas over the window (None: not known)
    prompted: float | None
    iterations: float | None
    preempted: float | None

    @property
    def scrapes(self) -> int:
        return len(self.running)

    @property
    def asleep(self) -> bool:
        """The last scrape says the engine sleeps (awake = 0)."""
        return bool(self.awake) and self.awake[-1] == 0

    @property
    def queued(self) -> list[float]:
        """The waiting requests that wait for capacity (all of them before 0.11)."""
        return self.waiting_capacity if self.waiting_capacity is not None else self.waiting

    def stalled(self) -> bool:
        """Requests running in every scrape while no token, prompt token or engine step moved."""
        if self.scrapes < 2 or self.generated is None or not all(r > 0 for r in self.running):
            return False
        moved = [d for d in (self.generated, self.prompted, self.iterations) if d is not None]
        return not any(moved)

    def surely_stalled(self, seconds: float | None) -> bool:
        """Stalled, and either the engine-step counter stood still too or the window is long
        enough (SURE_WITHOUT_STEPS_S) that one slow chunked prefill cannot explain it."""
        if not self.stalled():
            return False
        return self.iterations is not None or (seconds or 0.0) >= SURE_WITHOUT_STEPS_S

    def not_scheduling(self) -> bool:
        """Requests waiting in every scrape, none running, and no token generated."""
        return (
            self.scrapes >= 2
            and all(w > 0 for w in self.queued)
            and not any(self.running)
            and not self.generated
        )


def _filled(values: list[float | None]) -> list[float]:
    return [v or 0.0 for v in values]


def engine_view(model: str, data: dict[str, Any], engine: str) -> EngineView | None:
    """The view of one engine, or None when running/waiting are not exposed for it."""
    gauges, counters = data["gauges"], data["counters"]
    if "running" not in gauges or "waiting" not in gauges:
        return None
    running = engine_values(gauges["running"], engine)
    if not any(v is not None for v in running):
        return None
    capacity = engine_values(gauges.get("waiting_capacity"), engine)
    deferred = engine_values(gauges.get("waiting_deferred"), engine)
    awake = engine_values(gauges.get("awake"), engine)
    level = None
    for concept, text in SLEEP_LEVELS.items():
        state = engine_values(gauges.get(concept), engine)
        if state and state[-1]:
            level = text
    return EngineView(
        model=model,
        engine=engine,
        running=_filled(running),
        waiting=_filled(engine_values(gauges["waiting"], engine)),
        waiting_capacity=_filled(capacity) if any(v is not None for v in capacity) else None,
        waiting_deferred=_filled(deferred) if any(v is not None for v in deferred) else None,
        # a usage outside 0-1 (150 %: not vLLM's fraction) is no reading
        kv=[
            v if is_fraction(v) else None
            for v in engine_values(gauges.get("kv_cache_usage"), engine)
        ],
        awake=awake if any(v is not None for v in awake) else [],
        sleep_level=level,
        generated=engine_delta(counters.get("generation_tokens"), engine),
        prompted=engine_delta(counters.get("prompt_tokens"), engine),
        iterations=engine_delta(counters.get("iterations"), engine),
        preempted=engine_delta(counters.get("preemptions"), engine),
    )


def engine_views(model: str, data: dict[str, Any]) -> list[EngineView]:
    """Every engine of the model that exposes running/waiting, in engine order."""
    views = [engine_view(model, data, e) for e in data.get("engines") or ["0"]]
    return [v for v in views if v is not None]


def data_parallel_size(facts: Facts, data: dict[str, Any]) -> tuple[int, str]:
    """(engines, where that came from): the pod's --data-parallel-size, else the engine series."""
    args = facts.get("serving/args")
    given = args.get("data_parallel_size") if isinstance(args, dict) else None
    if isinstance(given, str) and given.strip().isdigit():
        given = int(given)
    if isinstance(given, int | float) and not isinstance(given, bool) and given >= 1:
        return int(given), "--data-parallel-size in the pod spec"
    engines = len(data.get("engines") or []) or 1
    return engines, f"{engines} engine series in /metrics"


def engine_name(view: EngineView, engines: int) -> str:
    """'engine 2' with data parallelism, '' for a single engine."""
    return f"engine {view.engine}" if engines > 1 else ""


@dataclass(frozen=True)
class QueueSeen:
    """What the /metrics window says about a queue in front of one model's engines.

    `queued`: requests waited (waiting in every scrape on some engine that runs requests, or
    vLLM's own queue time over its threshold); False: the scrapes saw none, or none sustained;
    None: not measured. `text` says it in words for a finding ("0 waiting over the 3.0 s between
    two scrapes"). `partial`: requests waited in some scrape but not all (a queue may be
    forming); `stuck`: requests waited in every scrape on an engine that ran none (not a
    capacity queue: more replicas would not drain it)."""

    queued: bool | None
    text: str
    partial: bool = False
    stuck: bool = False


def queue_seen(facts: Facts, model: str | None, max_queue_ms: float) -> QueueSeen:
    """Whether the window's scrapes show the requests of `model` (any model when it is not in
    the window) waiting: the waiting gauges per engine, then vLLM's queue-time histogram."""
    from llmdoctor.parsers.vllm_serving import fmt_seconds, series_text, window_text

    window = facts.get("vllm/window")
    if not isinstance(window, dict):
        why = facts.missing_reason("vllm/window") or "no /metrics scrape"
        return QueueSeen(None, f"the queue could not be checked (/metrics: {why})")
    models = window.get("models") or {}
    chosen = {model: models[model]} if model in models else models
    views = [v for name, data in chosen.items() for v in engine_views(name, data)]
    if not views:
        return QueueSeen(None, "the queue could not be checked (no waiting gauge in /metrics)")
    span = window_text(window)
    sustained = [v for v in views if v.queued and all(w > 0 for w in v.queued)]
    if any(any(v.running) for v in sustained):
        waiting = "; ".join(series_text(v.queued) for v in sustained)
        return QueueSeen(True, f"requests waited in every scrape (waiting {waiting}) {span}")
    if sustained:
        waiting = "; ".join(series_text(v.queued) for v in sustained)
        return QueueSeen(
            False,
            f"the scheduler showed waiting {waiting} with none running {span}: not a capacity "
            "queue",
            stuck=True,
        )
    waited = []
    for data in chosen.values():
        hist = (data.get("histograms") or {}).get("queue_time") or {}
        p95 = hist.get("p95")
        if hist.get("count") and p95 is not None and not hist.get("since_start"):
            waited.append(p95)
            if p95 * 1000 > max_queue_ms:
                return QueueSeen(True, f"vLLM's queue time p95 was {fmt_seconds(p95)} {span}")
    queue_time = f" (queue time p95 {fmt_seconds(max(waited))})" if waited else ""
    brief = [v for v in views if any(v.queued)]
    if brief:
        waiting = "; ".join(series_text(v.queued) for v in brief)
        return QueueSeen(
            False,
            f"the scheduler showed waiting {waiting} {span}: a queue in one scrape only, not a "
            f"sustained one{queue_time}",
            partial=True,
        )
    return QueueSeen(False, f"the scheduler showed 0 waiting {span}: not a queue{queue_time}")
