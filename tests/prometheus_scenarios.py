"""Incident hours as OpenMetrics with timestamps, for `promtool tsdb create-blocks-from openmetrics`.

Metric names, types and labels are those of real exporters (tests/fixtures/prometheus/SOURCES.md):
vLLM's /metrics (V1 names, and V0 names for the KV-cache storm), NVIDIA's DCGM exporter with its
Kubernetes pod mapping (`namespace`, `pod`, `container` of the pod using the GPU), and
kube-state-metrics. The values are scripted: each scenario says at which minute what starts, so a
test can hold the timeline to it. One hour per pod, a sample every SCRAPE seconds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

SCRAPE = 15
HOUR_POINTS = 3600 // SCRAPE
NAMESPACE = "serving"
MODEL = "meta-llama/Llama-3.1-8B-Instruct"
MAX_NUM_SEQS = 256
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0)
TTFT_BUCKETS += (7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0)


@dataclass
class Family:
    kind: str
    help: str
    lines: list[str] = field(default_factory=list)


class OpenMetrics:
    """Families of timestamped samples; text() is one OpenMetrics exposition ending in # EOF."""

    def __init__(self) -> None:
        self.families: dict[str, Family] = {}

    def add(self, family: str, kind: str, help_text: str, sample: str, labels: dict, t, v):
        fam = self.families.setdefault(family, Family(kind, help_text))
        body = ",".join(f'{k}="{val}"' for k, val in labels.items())
        fam.lines.append(f"{sample}{{{body}}} {float(v)!r} {float(t):.3f}")

    def text(self) -> str:
        out = []
        for name, fam in self.families.items():
            out += [f"# HELP {name} {fam.help}", f"# TYPE {name} {fam.kind}", *fam.lines]
        return "\n".join(out) + "\n# EOF\n"


@dataclass
class Pod:
    """One vLLM pod's hour: per scrape index i, what its exporters say (None: not scraped)."""

    name: str
    v0: bool = False
    model: str = MODEL
    running: list = field(default_factory=list)
    waiting: list = field(default_factory=list)
    kv: list = field(default_factory=list)
    preemptions: list = field(default_factory=list)  # cumulative
    ttft: list = field(default_factory=list)  # seconds observed by the requests of that scrape
    xid: list = field(default_factory=list)
    temp: list = field(default_factory=list)
    restarts: list = field(default_factory=list)
    terminated_from: int | None = None  # scrape index from which last_terminated_reason says so
    terminated_reason: str = "Error"
    stalled_from: int | None = None  # scrape index from which no token is generated
    aborted_share: list = field(default_factory=list)  # share of finished requests aborted

    def vllm_labels(self) -> dict:
        labels = {"model_name": self.model}
        if not self.v0:
            labels["engine"] = "0"
        return {
            **labels,
            "container": "vllm",
            "instance": f"10.0.3.{7 + len(self.name) % 200}:8000",
            "job": f"{NAMESPACE}/vllm",
            "namespace": NAMESPACE,
            "pod": self.name,
        }


def _observe(buckets: tuple, counts: list[float], value: float, n: int) -> None:
    for j, le in enumerate(buckets):
        if value <= le:
            counts[j] += n


def write_pod(om: OpenMetrics, pod: Pod, start: float) -> None:
    """Every series of the pod, each in time order."""
    vl = pod.vllm_labels()
    name = {
        "running": "vllm:num_requests_running",
        "waiting": "vllm:num_requests_waiting",
        "kv": "vllm:gpu_cache_usage_perc" if pod.v0 else "vllm:kv_cache_usage_perc",
    }
    helps = {
        "running": "Number of requests currently running on GPU."
        if pod.v0
        else "Number of requests in model execution batches.",
        "waiting": "Number of requests waiting to be processed.",
        "kv": "GPU KV-cache usage. 1 means 100 percent usage.",
    }
    for key in ("running", "waiting", "kv"):
        for i, v in enumerate(getattr(pod, key)):
            if v is not None:
                om.add(name[key], "gauge", helps[key], name[key], vl, start + i * SCRAPE, v)
    for i, v in enumerate(pod.preemptions):
        if v is not None:
            help_text = "Cumulative number of preemption from the engine."
            om.add(
                "vllm:num_preemptions",
                "counter",
                help_text,
                "vllm:num_preemptions_total",
                vl,
                start + i * SCRAPE,
                v,
            )
    tokens, finished = 0.0, {"stop": 0.0, "length": 0.0, "abort": 0.0}
    for i, running in enumerate(pod.running):
        if running is None:
            continue
        t = start + i * SCRAPE
        share = pod.aborted_share[i] if i < len(pod.aborted_share) else 0.0
        done = running / 4
        finished["abort"] += done * share  # clients give up, stalled or not
        if pod.stalled_from is None or i < pod.stalled_from:
            tokens += running * 30 * SCRAPE  # ~30 tokens/s per running request
            finished["stop"] += done * (1 - share) * 0.8
            finished["length"] += done * (1 - share) * 0.2
        help_text = "Number of generation tokens processed."
        fam = "vllm:generation_tokens"
        om.add(fam, "counter", help_text, f"{fam}_total", vl, t, tokens)
        for reason, count in finished.items():
            help_text = "Count of successfully processed requests."
            fam = "vllm:request_success"
            labels = {**vl, "finished_reason": reason}
            om.add(fam, "counter", help_text, f"{fam}_total", labels, t, count)
    counts = [0.0] * len(TTFT_BUCKETS)
    total = {"n": 0.0, "sum": 0.0}
    fam = "vllm:time_to_first_token_seconds"
    help_text = "Histogram of time to first token in seconds."
    for i, v in enumerate(pod.ttft):
        if v is None:
            continue
        _observe(TTFT_BUCKETS, counts, v, 20)
        total["n"] += 20
        total["sum"] += 20 * v
        t = start + i * SCRAPE
        for le, c in zip(TTFT_BUCKETS, counts, strict=True):
            om.add(fam, "histogram", help_text, f"{fam}_bucket", {**vl, "le": f"{le}"}, t, c)
        om.add(fam, "histogram", help_text, f"{fam}_bucket", {**vl, "le": "+Inf"}, t, total["n"])
        om.add(fam, "histogram", help_text, f"{fam}_count", vl, t, total["n"])
        om.add(fam, "histogram", help_text, f"{fam}_sum", vl, t, total["sum"])
    gpu = {
        "gpu": "0",
        "UUID": "GPU-5f4d1c2a-6b1e-3c9d-8e7f-0a1b2c3d4e5f",
        "device": "nvidia0",
        "modelName": "NVIDIA H100 80GB HBM3",
        "Hostname": "gpu-node-3",
        "container": "vllm",
        "namespace": NAMESPACE,
        "pod": pod.name,
    }
    for i, v in enumerate(pod.xid):
        om.add(
            "DCGM_FI_DEV_XID_ERRORS",
            "gauge",
            "Value of the last XID error encountered.",
            "DCGM_FI_DEV_XID_ERRORS",
            gpu,
            start + i * SCRAPE,
            v,
        )
    for i, v in enumerate(pod.temp):
        om.add(
            "DCGM_FI_DEV_GPU_TEMP",
            "gauge",
            "GPU temperature (in C).",
            "DCGM_FI_DEV_GPU_TEMP",
            gpu,
            start + i * SCRAPE,
            v,
        )
    ksm = {"namespace": NAMESPACE, "pod": pod.name, "container": "vllm", "uid": "3f1e9a2c"}
    for i, v in enumerate(pod.restarts):
        om.add(
            "kube_pod_container_status_restarts",
            "counter",
            "The number of container restarts per container.",
            "kube_pod_container_status_restarts_total",
            ksm,
            start + i * SCRAPE,
            v,
        )
    if pod.terminated_from is not None:
        labels = {**ksm, "reason": pod.terminated_reason}
        for i in range(pod.terminated_from, HOUR_POINTS + 1):
            om.add(
                "kube_pod_container_status_last_terminated_reason",
                "gauge",
                "Describes the last reason the container was in terminated state.",
                "kube_pod_container_status_last_terminated_reason",
                labels,
                start + i * SCRAPE,
                1,
            )


def at(minute: float) -> int:
    """The scrape index of a minute of the hour."""
    return int(minute * 60 // SCRAPE)


def healthy(name: str = "vllm-healthy-0") -> Pod:
    """Steady traffic: running 20-60, a lone waiting request now and then, KV 30-50 %, fast TTFT,
    the GPU idle bit never set, no Xid, no restart."""
    n = HOUR_POINTS + 1
    pod = Pod(name)
    pod.running = [40 + 20 * math.sin(i / 20) for i in range(n)]
    pod.waiting = [1 if i % 37 == 0 else 0 for i in range(n)]
    pod.kv = [0.4 + 0.1 * math.sin(i / 25) for i in range(n)]
    pod.preemptions = [0] * n
    pod.ttft = [0.05 + 0.02 * (i % 3) for i in range(n)]
    pod.xid = [0] * n
    pod.temp = [62 + 5 * math.sin(i / 30) for i in range(n)]
    pod.restarts = [0] * n
    return pod


def queue_builds(name: str = "vllm-queue-0", minute: int = 31, model: str = MODEL) -> Pod:
    """Running climbs to max_num_seqs and sits there from minute-1; requests wait from `minute`;
    first tokens slow down two minutes later (time in the queue)."""
    pod = healthy(name)
    pod.model = model
    n = HOUR_POINTS + 1
    for i in range(at(minute - 6), n):
        pod.running[i] = min(MAX_NUM_SEQS, 60 + (i - at(minute - 6)) * 10)
    for i in range(at(minute - 1), n):
        pod.running[i] = MAX_NUM_SEQS
    pod.waiting = [0] * n
    for i in range(at(minute), n):
        pod.waiting[i] = 2 + (i - at(minute)) * 2
    pod.kv = [0.42] * n
    for i in range(at(minute + 2), n):
        pod.ttft[i] = 4.0
    return pod


def kv_storm(name: str = "vllm-kvstorm-0") -> Pod:
    """V0 names. The KV cache fills and is full from minute 10; preemptions from minute 12;
    requests wait from minute 14; first tokens slow from minute 16."""
    pod = healthy(name)
    pod.v0 = True
    n = HOUR_POINTS + 1
    for i in range(at(5), n):
        pod.kv[i] = 0.95 if i >= at(10) else min(0.94, 0.5 + (i - at(5)) * 0.02)
        if i >= at(10) + 1:
            pod.kv[i] = 1.0
    pod.preemptions = [0] * n
    for i in range(at(12), n):
        pod.preemptions[i] = 3 * (i - at(12) + 1)
    pod.waiting = [0] * n
    for i in range(at(14), n):
        pod.waiting[i] = 5 + (i - at(14))
    for i in range(at(16), n):
        pod.ttft[i] = 6.0
    return pod


def xid_then_death(name: str = "vllm-xid-0") -> Pod:
    """Xid 79 at minute 20; vLLM answers its last scrape at 20:30; the container restarts at
    21:30 (Error), 23:00 and 26:00 without vLLM coming back."""
    pod = healthy(name)
    n = HOUR_POINTS + 1
    last = at(20.5)
    for key in ("running", "waiting", "kv", "preemptions", "ttft"):
        series = getattr(pod, key)
        setattr(pod, key, series[: last + 1] + [None] * (n - last - 1))
    pod.xid = [0 if i < at(20) else 79 for i in range(n)]
    pod.restarts = [sum(1 for m in (21.5, 23, 26) if i >= at(m)) for i in range(n)]
    pod.terminated_from = at(21.5)
    return pod


def wedged(name: str = "vllm-wedged-0") -> Pod:
    """From minute 40 the engine holds 12 requests and generates nothing; new requests wait
    from minute 41; from minute 42 most requests end aborted (clients give up)."""
    pod = healthy(name)
    n = HOUR_POINTS + 1
    pod.stalled_from = at(40)
    for i in range(at(40), n):
        pod.running[i] = 12
    pod.waiting = [0] * n
    for i in range(at(41), n):
        pod.waiting[i] = 1 + (i - at(41)) // 2
    pod.aborted_share = [0.6 if i >= at(42) else 0.0 for i in range(n)]
    return pod


SCENARIOS = {
    "healthy": healthy,
    "queue": queue_builds,
    "kvstorm": kv_storm,
    "xid": xid_then_death,
    "wedged": wedged,
}


def openmetrics_hour(start: float, pods: list[Pod]) -> str:
    om = OpenMetrics()
    for pod in pods:
        write_pod(om, pod, start)
    return om.text()
