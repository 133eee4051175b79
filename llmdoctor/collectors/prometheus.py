"""The team's Prometheus (or Thanos, Mimir, VictoriaMetrics) as a collector: the target's history.

Asks the HTTP API (`/api/v1/query_range`) for each series of `_series()` over `--since`, matched by
a label selector: `namespace`/`pod` (the Prometheus-operator conventions) for a pod, `instance`
for a URL, or `--prometheus-selector`. vLLM names come from parsers/vllm_metrics.py, so V0 and
V1 servers are read alike. Every request has the collector's timeout and a size cap; the step
grows so that no series has more than MAX_POINTS points. Credentials come from the environment:
LLMDOCTOR_PROMETHEUS_TOKEN (bearer) or LLMDOCTOR_PROMETHEUS_USER and _PASSWORD (basic), and
LLMDOCTOR_PROMETHEUS_CA names a CA bundle.

Facts: `prometheus/query.json` (what was asked: url, selector, start, end, step) whenever
Prometheus was given, and `prometheus/series.json` ({name: [{"labels", "points": [[t, v]]}]},
plus "absent": names no series matched) or the reason it could not be read.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass
from typing import Any

from llmdoctor.engine.collect import map_abandonable, submit_abandonable
from llmdoctor.engine.facts import Missing
from llmdoctor.parsers.prometheus_series import valid_labels, valid_points

QUERY_KEY = "prometheus/query.json"
SERIES_KEY = "prometheus/series.json"
MAX_POINTS = 720
MIN_STEP = 15.0  # the usual scrape interval; a finer step only repeats samples
MAX_SERIES_PER_QUERY = 64
MAX_RESPONSE_BYTES = 8 << 20
PARALLEL_QUERIES = 16  # every query at once: a slow Prometheus costs one timeout, not two
# DCGM renamed the throttle reasons to "clock event reasons" (DCGM 3.3)
THROTTLE_NAMES = ("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "DCGM_FI_DEV_CLOCKS_EVENT_REASONS")


@dataclass(frozen=True)
class SeriesQuery:
    """One series of the timeline: its name, its PromQL (with {sel} and {rng}), its layer."""

    name: str
    promql: str
    layer: str  # gpu | engine | k8s


def _names(*names: str) -> str:
    """A `__name__` matcher for a concept's V0/V1 names."""
    return "__name__=~" + '"' + "|".join(re.escape(n) for n in names) + '"'


def _series() -> tuple[SeriesQuery, ...]:
    """The timeline's series; `$SEL` stands for the label matchers, `$RNG` for the rate range."""
    from llmdoctor.parsers.vllm_metrics import COUNTERS, GAUGES, HISTOGRAMS

    def gauge(concept: str) -> str:
        return "{" + _names(*GAUGES[concept]) + ",$SEL}"

    def rates(names) -> str:
        # `or` keeps the preferred name where a release exposes both (rate drops the name)
        return " or ".join(f"rate({n}{{$SEL}}[$RNG])" for n in names)

    def rate(concept: str) -> str:
        return rates(COUNTERS[concept])

    def p95(concept: str) -> str:
        per_bucket = rates(f"{n}_bucket" for n in HISTOGRAMS[concept])
        return f"histogram_quantile(0.95, sum by (le, model_name) ({per_bucket}))"

    by = "by (model_name, engine)"
    # the other exporters' freshest sample: how far the store reaches (an engine is only down
    # when its samples stop while these go on)
    exporters = (
        "{" + _names("DCGM_FI_DEV_GPU_TEMP", "kube_pod_container_status_restarts_total") + ",$SEL}"
    )
    throttle = "{" + _names(*THROTTLE_NAMES) + ",$SEL}"
    return (
        SeriesQuery("xid", "max by (gpu) (DCGM_FI_DEV_XID_ERRORS{$SEL})", "gpu"),
        SeriesQuery("fb_used_mib", "max by (gpu) (DCGM_FI_DEV_FB_USED{$SEL})", "gpu"),
        SeriesQuery("throttle_reasons", f"max by (gpu) ({throttle})", "gpu"),
        SeriesQuery("gpu_temp_c", "max by (gpu) (DCGM_FI_DEV_GPU_TEMP{$SEL})", "gpu"),
        SeriesQuery(
            "engine_last_seen", f"max by (model_name) (timestamp({gauge('running')}))", "engine"
        ),
        SeriesQuery("exporters_last_seen", f"max(timestamp({exporters}))", "k8s"),
        SeriesQuery("running", f"sum {by} ({gauge('running')})", "engine"),
        SeriesQuery("waiting", f"sum {by} ({gauge('waiting')})", "engine"),
        SeriesQuery("kv_cache_usage", f"max {by} ({gauge('kv_cache_usage')})", "engine"),
        SeriesQuery("preemption_rate", f"sum {by} ({rate('preemptions')})", "engine"),
        SeriesQuery("generation_tokens_rate", f"sum {by} ({rate('generation_tokens')})", "engine"),
        SeriesQuery(
            "finished_rate", f"sum by (finished_reason) ({rate('requests_finished')})", "engine"
        ),
        SeriesQuery("ttft_p95", p95("ttft"), "engine"),
        SeriesQuery("itl_p95", p95("itl"), "engine"),
        SeriesQuery(
            "restarts", "max by (container) (kube_pod_container_status_restarts_total{$SEL})", "k8s"
        ),
        SeriesQuery(
            "last_terminated",
            "max by (container, reason) (kube_pod_container_status_last_terminated_reason{$SEL})",
            "k8s",
        ),
    )


def default_selector(target_kind: str, namespace: str | None, pod: str | None, url: str | None):
    """The label matchers that find the target's series (Prometheus-operator conventions)."""
    if target_kind == "http" and url:
        from urllib.parse import urlsplit

        return f'instance="{urlsplit(url).netloc}"'
    if pod:
        where = f'namespace="{namespace}",' if namespace else ""
        return f'{where}pod="{pod}"'
    return None


def normalize_selector(text: str) -> str:
    """`{a="b"}` or `a="b"` -> `a="b"`; BadInput for one that is empty or unbalanced."""
    from llmdoctor.errors import BadInput

    inner = text.strip()
    if inner.startswith("{") and inner.endswith("}"):
        inner = inner[1:-1].strip()
    if not inner or inner.count('"') % 2 or "{" in inner or "}" in inner:
        raise BadInput(f'--prometheus-selector {text!r}: expected label matchers such as pod="x"')
    return inner


def without_userinfo(url: str) -> str:
    """The URL as stored in facts and bundles: no user:password@."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))


def plan(since: float, end: float) -> dict[str, float]:
    """Start, end, step and rate range for a window of `since` seconds ending at `end`."""
    step = max(MIN_STEP, math.ceil(since / MAX_POINTS))
    return {"start": end - since, "end": end, "step": step, "range": max(4 * step, 60.0)}


def _session():
    import requests

    session = requests.Session()
    token = os.environ.get("LLMDOCTOR_PROMETHEUS_TOKEN")
    user = os.environ.get("LLMDOCTOR_PROMETHEUS_USER")
    if token:
        session.headers["Authorization"] = f"Bearer {token}"
    elif user:
        session.auth = (user, os.environ.get("LLMDOCTOR_PROMETHEUS_PASSWORD", ""))
    ca = os.environ.get("LLMDOCTOR_PROMETHEUS_CA")
    if ca:
        session.verify = ca
    return session


class QueryFailed(Exception):
    """A query the server did not answer with data; `kind` is auth, http, network or bad."""

    def __init__(self, kind: str, text: str):
        super().__init__(text)
        self.kind = kind


def _get(session, url: str, params: dict[str, Any], timeout: float) -> dict:
    import requests
    import urllib3.exceptions

    from llmdoctor.collectors.network_errors import classify_network_error

    try:
        with session.get(url, params=params, timeout=timeout, stream=True) as response:
            # read from the raw stream to stop at the cap; its errors are urllib3's
            body = response.raw.read(MAX_RESPONSE_BYTES + 1, decode_content=True)
            status = response.status_code
    except (requests.RequestException, urllib3.exceptions.HTTPError, OSError) as exc:
        raise QueryFailed("network", classify_network_error(exc, timeout)[1]) from None
    if status in (401, 403):
        raise QueryFailed("auth", f"HTTP {status}: Prometheus refused the credentials")
    if len(body) > MAX_RESPONSE_BYTES:
        raise QueryFailed("bad", f"answer over {MAX_RESPONSE_BYTES >> 20} MiB")
    try:
        doc = json.loads(body)
    except ValueError:
        raise QueryFailed("bad", f"HTTP {status}: not the Prometheus API (no JSON)") from None
    if not isinstance(doc, dict) or doc.get("status") != "success":
        error = doc.get("error") if isinstance(doc, dict) else None
        raise QueryFailed("http", f"HTTP {status}: {error or 'not a Prometheus API answer'}")
    return doc.get("data") or {}


def query_series(
    base_url: str, selector: str, window: dict[str, float], timeout: float
) -> dict[str, Any]:
    """Every series of _series() for `selector`; QueryFailed when Prometheus cannot be read."""
    url = base_url.rstrip("/") + "/api/v1/query_range"
    rng = f"{int(window['range'])}s"
    session = _session()
    queries = _series()

    def one(q: SeriesQuery):
        params = {
            "query": q.promql.replace("$SEL", selector).replace("$RNG", rng),
            "start": f"{window['start']:.3f}",
            "end": f"{window['end']:.3f}",
            "step": f"{window['step']:g}",
            "timeout": f"{max(1, int(timeout))}s",
        }
        try:
            return q, _get(session, url, params, timeout), None
        except QueryFailed as exc:
            return q, None, exc

    try:
        answers = map_abandonable(one, queries, PARALLEL_QUERIES)
    finally:
        session.close()
    failures = [(q, exc) for q, _, exc in answers if exc is not None]
    if len(failures) == len(queries):
        first = failures[0][1]
        raise QueryFailed(first.kind, str(first))
    series: dict[str, Any] = {"absent": [], "failed": {}, "layers": {}}
    for q, data, exc in answers:
        series["layers"][q.name] = q.layer
        if exc is not None:
            series["failed"][q.name] = str(exc)
            continue
        found = []
        result = data.get("result") if isinstance(data, dict) else None
        for item in result[:MAX_SERIES_PER_QUERY] if isinstance(result, list) else []:
            if not isinstance(item, dict) or not isinstance(item.get("values"), list):
                continue
            values = item["values"][: MAX_POINTS + 1]
            points = valid_points(values, window["start"], window["end"], window["step"])
            if points:
                found.append({"labels": valid_labels(item.get("metric")), "points": points})
        if found:
            series[q.name] = found
        else:
            series["absent"].append(q.name)
    return series


def collect_history(
    base_url: str, selector: str | None, since: float, end: float, timeout: float
) -> dict[str, Any]:
    """The `prometheus/` facts for one target (see the module docstring)."""
    window = plan(since, end)
    query = {"url": without_userinfo(base_url), "selector": selector, "since_s": since, **window}
    if selector is None:
        reason = "no label selector for this target (give --prometheus-selector)"
        return {QUERY_KEY: query, SERIES_KEY: Missing(reason)}
    try:
        series = query_series(base_url, selector, window, timeout)
    except QueryFailed as exc:
        return {QUERY_KEY: query, SERIES_KEY: Missing(f"Prometheus at {query['url']}: {exc}")}
    named = [k for k in series if k not in ("absent", "failed", "layers")]
    if not named:
        reason = f"Prometheus at {query['url']} has no series for {{{selector}}} in the window"
        return {QUERY_KEY: query, SERIES_KEY: Missing(reason)}
    return {QUERY_KEY: query, SERIES_KEY: series}


def _selector_for(facts, target, options) -> str | None:
    if options.get("prometheus_selector"):
        return options["prometheus_selector"]
    name = str(facts.get("target") or "") if facts is not None else str(target)
    pod = name.split("/", 1)[1] if name.startswith("pod/") else None
    namespace = facts.get("k8s/namespace") if facts is not None else options.get("namespace")
    return default_selector(target.kind, namespace, pod, getattr(target, "url", None))


def start_history(target, ctx):
    """For a single pod (namespace given) or URL: start the queries now, beside the live
    collection; add_history then uses the answer. None when the selector is not known yet."""
    options = ctx.options
    if not options.get("prometheus") or target.kind not in ("pod", "http"):
        return None
    if target.kind == "pod" and not (
        options.get("namespace") or options.get("prometheus_selector")
    ):
        return None
    import time

    selector = _selector_for(None, target, options)
    since = float(options.get("prometheus_since") or 3600.0)
    end = time.time()
    future = submit_abandonable(
        collect_history, options["prometheus"], selector, since, end, ctx.timeout
    )
    return selector, future


def add_history(facts_list: list, target, ctx, started=None) -> None:
    """Add the `prometheus/` facts to each pod's (or the URL's) Facts, pods at once.

    `started`: what start_history returned, used when it asked for the same selector."""
    from llmdoctor.engine.collect import Collector, run_collectors

    options = ctx.options
    base_url = options["prometheus"]
    since = float(options.get("prometheus_since") or 3600.0)

    def for_facts(facts) -> None:
        selector = _selector_for(facts, target, options)
        if started is not None and started[0] == selector and len(facts_list) == 1:
            fetched = started[1]
            fetch = Collector("prometheus", (QUERY_KEY, SERIES_KEY), lambda c: fetched.result())
        else:
            end = float(facts.get("time/now"))
            fetch = Collector(
                "prometheus",
                (QUERY_KEY, SERIES_KEY),
                lambda c: collect_history(base_url, selector, since, end, c.timeout),
            )
        run_collectors([fetch], ctx, facts)

    map_abandonable(for_facts, facts_list, 8)
