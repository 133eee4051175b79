"""Every fact key llmdoctor knows, declared once (as insights-core declares its specs).

A key is one of:
* `bundle` — a raw document, named by its path in an incident bundle (docs/bundle-format.md),
  so a live run and `--bundle` produce the same facts;
* `live` — collected live but not kept in a bundle;
* `run` — set by the run itself (the clock, the target, the runbooks);
* `derived` — computed from other facts by a parser (`@derived_fact`) before the checks run;
* `setting` — a command-line value or a threshold with a default (`settings/<name>`).

`@check(needs=...)` and `@derived_fact` refuse an undeclared key when their module is imported,
and tests/test_fact_keys.py finds every `facts.get/require/has("...")` literal in the code and
checks it is declared: a misspelt key is an error, not a check that is silently skipped.
`<name>` in a key stands for a file name (letters, digits, '.', '_', '-'), `<n>` for a number.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

KINDS = ("bundle", "live", "run", "derived", "setting")


@dataclass(frozen=True)
class FactKey:
    key: str
    kind: str
    what: str

    @property
    def pattern(self) -> re.Pattern[str]:
        return _pattern(self.key)


@cache
def _pattern(key: str) -> re.Pattern[str]:
    text = re.escape(key)
    text = text.replace(re.escape("<name>"), r"[A-Za-z0-9][A-Za-z0-9._-]*")
    text = text.replace(re.escape("<n>"), r"\d+")
    return re.compile(text)


POD = "k8s/pod.json"
EVENTS = "k8s/events.json"
NODE = "k8s/node.json"
OWNER = "k8s/owner.json"
GPU_NODES = "k8s/gpu-nodes.json"
NAMESPACE = "k8s/namespace"
CONTAINER_LOG = "logs/<name>.log"
PREVIOUS_LOG = "logs/<name>.previous.log"
VLLM_HEALTH = "vllm/health.json"
VLLM_MODELS = "vllm/models.json"
VLLM_VERSION = "vllm/version.json"
VLLM_PROBE = "vllm/probe.json"
VLLM_METRICS = "vllm/metrics-<n>.txt"
VLLM_SCRAPES = "vllm/scrapes.json"
VLLM_TOKENIZE = "vllm/tokenize"
NVIDIA_SMI_XML = "node/nvidia-smi.xml"
KERNEL_LOG = "node/kernel.log"
KERNEL_LOG_SOURCE = "node/kernel-log-source"
NVML = "node/nvml.json"
GPUS_JSON = "node/gpus.json"
VERSIONS = "node/versions.json"
VLLM_ARGS_CHECK = "serving/vllm-args.json"
TOKENIZER = "tokenizer.json"
PROMETHEUS_QUERY = "prometheus/query.json"
PROMETHEUS_SERIES = "prometheus/series.json"
MODEL_CONFIG = "model/config.json"
NOW = "time/now"
TARGET = "target"
WIKI_ENTRIES = "wiki/entries"
GPUS = "node/gpus"
XID = "node/xid"
SERVING_ARGS = "serving/args"
VLLM_WINDOW = "vllm/window"
PROMETHEUS_TIMELINE = "prometheus/timeline"

DECLARED: tuple[FactKey, ...] = (
    FactKey(POD, "bundle", "the Pod, as `kubectl get -o json` prints it"),
    FactKey(EVENTS, "bundle", "the Pod's events"),
    FactKey(NODE, "bundle", "the Node the Pod runs on"),
    FactKey(OWNER, "bundle", "the Deployment or StatefulSet that owns the Pod"),
    FactKey(GPU_NODES, "bundle", "the cluster's GPU nodes (for a Pod that is not scheduled)"),
    FactKey(CONTAINER_LOG, "bundle", "a container's log (also exec-nvidia-smi.log)"),
    FactKey(PREVIOUS_LOG, "bundle", "the log of a container's previous run"),
    FactKey(VLLM_HEALTH, "bundle", "GET /health: status, latency_ms, error, error_kind"),
    FactKey(VLLM_MODELS, "bundle", "GET /v1/models"),
    FactKey(VLLM_VERSION, "bundle", "GET /version"),
    FactKey(VLLM_PROBE, "bundle", "the streamed generation probe"),
    FactKey(VLLM_METRICS, "bundle", "a /metrics scrape (0 and 1: the two ends of the window)"),
    FactKey(VLLM_SCRAPES, "bundle", "when each /metrics scrape was taken"),
    FactKey(NVIDIA_SMI_XML, "bundle", "`nvidia-smi -q -x`"),
    FactKey(KERNEL_LOG, "bundle", "the node's kernel log"),
    FactKey(NVML, "bundle", "what NVML answered"),
    FactKey(GPUS_JSON, "bundle", "the GPUs as NVML read them"),
    FactKey(VERSIONS, "bundle", "torch, CUDA and vLLM versions of the serving python"),
    FactKey(TOKENIZER, "bundle", "the local tokenizer probe (`probe --tokenizer`)"),
    FactKey(PROMETHEUS_QUERY, "bundle", "what was asked of the team's Prometheus"),
    FactKey(PROMETHEUS_SERIES, "bundle", "the series Prometheus answered"),
    FactKey(MODEL_CONFIG, "bundle", "the model's config.json (`collect --model-config`)"),
    FactKey(VLLM_ARGS_CHECK, "bundle", "the serving image's own vLLM parsing the pod's arguments"),
    FactKey(NAMESPACE, "live", "the namespace used"),
    FactKey(VLLM_TOKENIZE, "live", "POST /tokenize timing"),
    FactKey(KERNEL_LOG_SOURCE, "live", "where the kernel log was read from"),
    FactKey(NOW, "run", "unix seconds the facts describe"),
    FactKey(TARGET, "run", "the target as written in the report"),
    FactKey(WIKI_ENTRIES, "run", "the parsed runbook entries (signature checks read them)"),
    FactKey(GPUS, "derived", "the GPUs, from NVML, nvidia-smi XML or gpus.json"),
    FactKey(XID, "derived", "Xid/SXid events per GPU from the kernel log"),
    FactKey(SERVING_ARGS, "derived", "vLLM's arguments from the container's command and args"),
    FactKey(VLLM_WINDOW, "derived", "the /metrics window: rates and histogram deltas"),
    FactKey(PROMETHEUS_TIMELINE, "derived", "the onset of each problem the history shows"),
)

# settings/<name>: what a command writes (commands/options.py, usecases/diagnose.py), and the
# thresholds whose defaults live in llmdoctor.parsers.vllm_serving.DEFAULTS.
WRITTEN_SETTINGS: dict[str, str] = {
    "timeout": "--timeout: each collector's, derivation's and check's deadline",
    "model": "--model: the served model name",
    "max_latency_ms": "--max-latency-ms: the generation probe's limit",
    "max_num_seqs": "--max-num-seqs",
    "dtype": "--dtype",
    "quantization": "--quantization",
    "gpu_memory_utilization": "--gpu-memory-utilization",
    "xid_policy": "--xid-policy / LLMDOCTOR_XID_POLICY",
    "model_config_path": "--model-config: the model's config.json on disk",
}
THRESHOLD_SETTINGS: dict[str, str] = {
    "max_health_ms": "GET /health latency",
    "max_queue_ms": "window p95 of the queue time",
    "max_ttft_ms": "window p95 of the time to first token",
    "max_itl_ms": "window p95 of the inter-token latency",
    "max_e2e_ms": "window p95 of the end-to-end latency",
    "kv_cache_full": "fraction of the KV cache in use",
    "max_tokenizer_load_s": "the local tokenizer's load time",
    "max_encode_ms": "the local tokenizer's encode time",
    "max_tokenize_ms": "the server's POST /tokenize time",
    "image_pull_slow_seconds": "an image pull this long is slow",
}

SETTINGS: tuple[FactKey, ...] = tuple(
    FactKey(f"settings/{name}", "setting", what)
    for name, what in {**WRITTEN_SETTINGS, **THRESHOLD_SETTINGS}.items()
)
ALL: tuple[FactKey, ...] = DECLARED + SETTINGS


def declared(key: str) -> FactKey | None:
    """The declaration a concrete key (or a key with <name>/<n> placeholders) falls under.

    A folder ('node/', as collectors mark a whole folder missing) falls under its first key.
    """
    for fact_key in ALL:
        if key == fact_key.key or fact_key.pattern.fullmatch(key):
            return fact_key
        if key.endswith("/") and fact_key.key.startswith(key):
            return fact_key
    return None


def require_declared(keys, where: str) -> None:
    """ValueError naming `where` for the first key that is not declared here."""
    for key in keys:
        if declared(key) is None:
            raise ValueError(
                f"{where}: fact key {key!r} is not declared in llmdoctor/engine/fact_keys.py "
                "(a misspelling would make it be skipped as missing on every run)"
            )
