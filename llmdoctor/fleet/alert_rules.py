"""Prometheus alerting rules for the failures the wiki covers and metrics can show.

Each rule names the runbook entry that says what to do (label `runbook`, annotation
`runbook_url` = the entry's page on the published wiki site). The metric names are vLLM's own
(tests/fixtures/vllm/SOURCES.md), llmdoctor's (`node --prometheus-textfile`, `exporter`),
NVIDIA dcgm-exporter's and kube-state-metrics'. `llmdoctor alerts` prints them.
"""

from __future__ import annotations

from dataclasses import dataclass

DYNAMIC_RUNBOOK = "{{ $labels.runbook }}"  # the series carries the entry id (llmdoctor_finding)

# deploy/node-check-daemonset.yaml runs `llmdoctor node` every 15 minutes: 3 missed runs = stale
NODE_CHECK_PERIOD_SECONDS = 900
NODE_CHECK_STALE_SECONDS = 3 * NODE_CHECK_PERIOD_SECONDS

# group by the scrape target and vLLM's own labels (engine: one per data-parallel engine, V1)
VLLM_BY = "job, instance, namespace, pod, model_name, engine"


@dataclass(frozen=True)
class AlertRule:
    """One alerting rule and where its data comes from."""

    name: str
    expr: str
    for_: str
    severity: str
    runbook: str  # an entry id, or DYNAMIC_RUNBOOK
    summary: str
    description: str
    needs: str  # the exporter / vLLM versions that provide the metrics
    group: str


def _xid_codes_by_runbook() -> dict[str, list[int]]:
    """Xid codes NVIDIA's catalog resolves with a reset, drain or RMA, by runbook entry."""
    from llmdoctor.gpus.tables import load_table

    out: dict[str, list[int]] = {}
    for code, entry in load_table("xid_catalog")["codes"].items():
        if entry.get("severity") == "critical" and entry.get("runbook"):
            out.setdefault(entry["runbook"], []).append(int(code))
    return {runbook: sorted(codes) for runbook, codes in sorted(out.items())}


def build_rules(*, ttft_p95_seconds: float = 2.0, itl_p95_seconds: float = 0.2) -> list[AlertRule]:
    """Every rule, in the order they are printed."""
    vllm = "vllm"
    rules = [
        AlertRule(
            "VllmQueueSaturated",
            "min_over_time(vllm:num_requests_waiting[10m]) > 0",
            "5m",
            "warning",
            "queue-saturation",
            "vLLM {{ $labels.model_name }} on {{ $labels.instance }}: requests have waited "
            "for 15 minutes",
            "The waiting queue of engine {{ $labels.engine }} has not been empty for 15 minutes "
            "(now {{ $value }} waiting): the server is at its max_num_seqs or token budget.",
            "vLLM V0 and V1, all versions (vllm:num_requests_waiting)",
            vllm,
        ),
        AlertRule(
            "VllmKvCacheFullPreempting",
            "(vllm:kv_cache_usage_perc or vllm:gpu_cache_usage_perc) >= 0.95"
            " and rate(vllm:num_preemptions_total[5m]) > 0",
            "5m",
            "warning",
            "kv-cache-preemption",
            "vLLM {{ $labels.model_name }} on {{ $labels.instance }}: KV cache full and "
            "requests preempted",
            "Engine {{ $labels.engine }}: KV cache at least 95% used while preemptions rise; "
            "preempted requests are recomputed, so latency climbs.",
            "vLLM V1 0.8+ (vllm:kv_cache_usage_perc from 0.9.2, vllm:gpu_cache_usage_perc before "
            "0.12); vllm:num_preemptions_total in every version",
            vllm,
        ),
        AlertRule(
            "VllmTimeToFirstTokenHigh",
            f"histogram_quantile(0.95, sum by ({VLLM_BY}, le) "
            f"(rate(vllm:time_to_first_token_seconds_bucket[5m]))) > {ttft_p95_seconds:g}",
            "10m",
            "warning",
            "queue-saturation",
            "vLLM {{ $labels.model_name }} on {{ $labels.instance }}: p95 time to first token "
            "{{ $value | humanizeDuration }}",
            f"p95 time to first token over 5 minutes is above {ttft_p95_seconds:g}s: requests "
            "queue for a slot or wait behind long prefills.",
            "vLLM V0 and V1, all versions (vllm:time_to_first_token_seconds)",
            vllm,
        ),
        AlertRule(
            "VllmInterTokenLatencyHigh",
            f"histogram_quantile(0.95, sum by ({VLLM_BY}, le) "
            "(rate(vllm:inter_token_latency_seconds_bucket[5m])"
            " or rate(vllm:time_per_output_token_seconds_bucket[5m])))"
            f" > {itl_p95_seconds:g}",
            "10m",
            "warning",
            "kv-cache-preemption",
            "vLLM {{ $labels.model_name }} on {{ $labels.instance }}: p95 inter-token latency "
            "{{ $value | humanizeDuration }}",
            f"p95 time between output tokens over 5 minutes is above {itl_p95_seconds:g}s: "
            "decoding stalls (preemption, an overfull batch, long prefills in the batch).",
            "vLLM 0.11+ (vllm:inter_token_latency_seconds, seen from 0.10.2); older versions' "
            "vllm:time_per_output_token_seconds is used where the new name is absent",
            vllm,
        ),
        AlertRule(
            "LlmdoctorEngineDown",
            "llmdoctor_probe_health_up == 0",
            "2m",
            "critical",
            "engine-dead",
            "vLLM at {{ $labels.instance }} does not answer /health",
            "llmdoctor exporter's probe got no 200 from /health: the engine is dead or the "
            "server is not up. Run `llmdoctor probe {{ $labels.instance }}` for the reason.",
            "llmdoctor exporter (any vLLM version)",
            "llmdoctor-probe",
        ),
        AlertRule(
            "LlmdoctorGenerationProbeFailing",
            "llmdoctor_probe_generation_ok == 0 and llmdoctor_probe_health_up == 1",
            "3m",
            "critical",
            "engine-wedged",
            "vLLM at {{ $labels.instance }} answers /health but generates nothing",
            "llmdoctor exporter's real completion failed, timed out or came back empty while "
            "/health says 200: users get no answers.",
            "llmdoctor exporter (any vLLM version)",
            "llmdoctor-probe",
        ),
        AlertRule(
            "LlmdoctorGenerationProbeSlow",
            "llmdoctor_probe_generation_ok == 1 and llmdoctor_probe_success == 0",
            "5m",
            "warning",
            "queue-saturation",
            "vLLM at {{ $labels.instance }}: a 16-token completion took over the limit",
            "llmdoctor exporter's completion returned text, but slower than the exporter's "
            "--max-latency-ms (default 1000 ms): see llmdoctor_probe_generation_seconds and "
            "llmdoctor_probe_ttft_seconds.",
            "llmdoctor exporter (any vLLM version)",
            "llmdoctor-probe",
        ),
        AlertRule(
            "LlmdoctorNodeXidCritical",
            'llmdoctor_finding{check="xid", severity="critical"} > 0',
            "0m",
            "critical",
            DYNAMIC_RUNBOOK,
            "{{ $labels.subject }} on {{ $labels.instance }}: critical Xid error",
            "llmdoctor node found an Xid that NVIDIA resolves with a GPU reset, drain or RMA. "
            "Drain the node and follow the runbook.",
            "llmdoctor node --prometheus-textfile, read by node-exporter",
            "llmdoctor-node",
        ),
        AlertRule(
            "LlmdoctorNodeCritical",
            'llmdoctor_finding{check!="xid", severity="critical", runbook!=""} > 0',
            "0m",
            "critical",
            DYNAMIC_RUNBOOK,
            "{{ $labels.instance }}: llmdoctor node check {{ $labels.check }} is critical",
            "llmdoctor node found {{ $labels.check }} critical on {{ $labels.subject }}.",
            "llmdoctor node --prometheus-textfile, read by node-exporter",
            "llmdoctor-node",
        ),
        AlertRule(
            "LlmdoctorNodeCheckStale",
            f"time() - llmdoctor_node_last_run_timestamp_seconds > {NODE_CHECK_STALE_SECONDS}",
            "0m",
            "warning",
            "node-check-not-reporting",
            "{{ $labels.instance }}: the llmdoctor node check has not run for "
            "{{ $value | humanizeDuration }}",
            "llmdoctor_node_last_run_timestamp_seconds is over 45 minutes old (3 runs of the "
            "node-check DaemonSet's 15-minute loop): its pod is gone, crash-looping or hung, and "
            "node-exporter keeps serving the last result, so every other llmdoctor node alert "
            "on this node is reading a stale file.",
            "llmdoctor node --prometheus-textfile, read by node-exporter",
            "llmdoctor-node",
        ),
        AlertRule(
            "LlmdoctorNodeCheckCouldNotCheck",
            "llmdoctor_node_status == 3",
            "20m",
            "warning",
            "node-check-not-reporting",
            "{{ $labels.instance }}: the llmdoctor node check could check nothing",
            "llmdoctor_node_status has been 3 (nothing could be checked) for two runs in a row: "
            "the node check runs but sees no GPU, driver or kernel log (runtime class, "
            "NVIDIA_VISIBLE_DEVICES, CAP_SYSLOG). `kubectl -n llmdoctor logs` of its pod on this "
            "node says which checks were skipped and why.",
            "llmdoctor node --prometheus-textfile, read by node-exporter",
            "llmdoctor-node",
        ),
    ]
    for runbook, codes in _xid_codes_by_runbook().items():
        match = " or ".join(f"DCGM_FI_DEV_XID_ERRORS == {c}" for c in codes)
        rules.append(
            AlertRule(
                "DcgmXidCritical"
                + "".join(p.title() for p in runbook.removeprefix("xid-").split("-")),
                match,
                "0m",
                "critical",
                runbook,
                "GPU {{ $labels.gpu }} on {{ $labels.Hostname }}: Xid {{ $value }}",
                f"dcgm-exporter reports Xid {{{{ $value }}}} as the GPU's last Xid error "
                f"(codes {', '.join(map(str, codes))}: NVIDIA's catalog resolves them with a GPU "
                "reset, drain or RMA).",
                "NVIDIA dcgm-exporter (DCGM_FI_DEV_XID_ERRORS: the last Xid code per GPU)",
                "dcgm",
            )
        )
    rules.append(
        AlertRule(
            "GpuPodUnschedulable",
            "max by (namespace, pod) (kube_pod_status_unschedulable) > 0"
            " and on (namespace, pod) sum by (namespace, pod)"
            ' (kube_pod_container_resource_requests{resource="nvidia_com_gpu"}) > 0',
            "5m",
            "warning",
            "k8s-gpu-unschedulable",
            "Pod {{ $labels.namespace }}/{{ $labels.pod }} asks for GPUs and cannot be scheduled",
            "The scheduler finds no node with enough free nvidia.com/gpu (or the GPU nodes' "
            "taints and selectors exclude the pod). `llmdoctor diagnose pod/{{ $labels.pod }} "
            "-n {{ $labels.namespace }}` names the reason.",
            "kube-state-metrics 2.x",
            "kubernetes",
        )
    )
    return rules


def runbook_url(base: str, rule: AlertRule) -> str:
    from llmdoctor.wiki.site import entry_url

    return entry_url(base, rule.runbook)


def rule_groups(rules: list[AlertRule], wiki_url: str) -> list[dict]:
    """The rules as Prometheus rule groups (the `groups:` list of a rules file)."""
    groups: dict[str, list[dict]] = {}
    for rule in rules:
        labels = {"severity": rule.severity}
        if rule.runbook != DYNAMIC_RUNBOOK:
            labels["runbook"] = rule.runbook  # the series' own label otherwise
        groups.setdefault(rule.group, []).append(
            {
                "alert": rule.name,
                "expr": rule.expr,
                "for": rule.for_,
                "labels": labels,
                "annotations": {
                    "summary": rule.summary,
                    "description": rule.description,
                    "runbook_url": runbook_url(wiki_url, rule),
                    "requires": rule.needs,
                },
            }
        )
    return [{"name": f"llmdoctor-{name}", "rules": items} for name, items in groups.items()]


def render(rules: list[AlertRule], wiki_url: str, fmt: str, *, name: str = "llmdoctor") -> str:
    """YAML: a Prometheus rules file (`rules`) or a prometheus-operator PrometheusRule."""
    import yaml

    groups = rule_groups(rules, wiki_url)
    if fmt == "rules":
        doc: dict = {"groups": groups}
    else:
        doc = {
            "apiVersion": "monitoring.coreos.com/v1",
            "kind": "PrometheusRule",
            "metadata": {"name": name, "labels": {"app.kubernetes.io/name": "llmdoctor"}},
            "spec": {"groups": groups},
        }
    return yaml.safe_dump(doc, sort_keys=False, width=100, allow_unicode=True)
