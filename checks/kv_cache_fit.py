"""Will vLLM start: do the weights, one max-model-len request and (hybrid models) the Mamba
state blocks fit? (`diagnose --model-config`, or a bundle holding model/config.json)

The same arithmetic as `llmdoctor capacity` (llmdoctor.capacity.planner): the pod's serving arguments
(max_model_len, gpu_memory_utilization or kv_cache_memory_bytes, tensor_parallel_size,
kv_cache_dtype, dtype, max_num_seqs, max_num_batched_tokens, block_size, performance_mode,
enforce_eager, enable_prefix_caching), the fact model/config.json, and the GPU's memory (from
node/gpus, else the node's GPU labels). When it does not fit, vLLM refuses to start with the
error shown in the evidence.
"""

from __future__ import annotations

from typing import Any

from llmdoctor.engine.facts import FactMissing, Facts
from llmdoctor.engine.findings import Finding, critical, evidence, info, ok
from llmdoctor.engine.registry import check

CHECK = "kv-cache-fit"
RUNBOOK = "kv-cache-too-small-for-max-model-len"
MODEL_CONFIG = "model/config.json"
NVML_TO_CUDA = 0.985  # CUDA reports a little less total memory than nvidia-smi / NVML
ARG_NAMES = (
    "max_model_len",
    "gpu_memory_utilization",
    "tensor_parallel_size",
    "kv_cache_dtype",
    "dtype",
    "max_num_seqs",
    "max_num_batched_tokens",
    "kv_cache_memory_bytes",
    "block_size",
    "performance_mode",
    "enforce_eager",
    "enable_prefix_caching",
    "data_parallel_size",
    "disable_hybrid_kv_cache_manager",
    "allow_chunked_local_attn_hybrid",
)


def _model_config(facts: Facts) -> tuple[dict[str, Any], str]:
    """(the model config, where it came from): the fact model/config.json."""
    if not facts.has(MODEL_CONFIG):
        reason = facts.missing_reason(MODEL_CONFIG)
        if not facts.has("settings/model_config_path"):
            reason = "no model config (diagnose --model-config, or model/config.json in a bundle)"
        raise FactMissing(MODEL_CONFIG, reason)
    config = facts.get(MODEL_CONFIG)
    path = facts.get("settings/model_config_path")
    return config, str(path) if path else MODEL_CONFIG


def _serving_args(facts: Facts) -> dict[str, Any]:
    """The vLLM arguments that matter, flags (settings/<name>) over the pod's own."""
    args = facts.get("serving/args") or {}
    if not isinstance(args, dict):
        args = {}
    out = {}
    for name in ARG_NAMES:
        value = facts.get(f"settings/{name}")
        out[name] = value if value is not None else args.get(name)
    return out


def _gpu(facts: Facts) -> tuple[int, str, str]:
    """(CUDA-visible bytes per GPU, GPU name, where it was read)."""
    from llmdoctor.capacity.planner import MiB, find_gpu

    doc = facts.get("node/gpus")
    gpus = doc.get("gpus") if isinstance(doc, dict) else doc if isinstance(doc, list) else None
    for gpu in gpus or []:
        if not isinstance(gpu, dict):
            continue
        memory = gpu.get("memory_mib")
        total = memory.get("total") if isinstance(memory, dict) else None
        name = str(gpu.get("name") or "GPU")
        if isinstance(total, int | float) and total > 0:
            return int(total * MiB * NVML_TO_CUDA), name, "node/gpus"
        known = find_gpu(name)
        if known is not None:
            return known.usable_bytes, known.name, "node/gpus"
    node = facts.get("k8s/node.json")
    labels = ((node or {}).get("metadata") or {}).get("labels") or {}
    product = labels.get("nvidia.com/gpu.product")
    memory_label = labels.get("nvidia.com/gpu.memory")
    if isinstance(memory_label, str) and memory_label.isdigit():
        name = product or "GPU"
        return int(int(memory_label) * MiB * NVML_TO_CUDA), name, "k8s/node.json"
    if product:
        known = find_gpu(product)
        if known is not None:
            return known.usable_bytes, known.name, "k8s/node.json"
        raise FactMissing("node/gpus", f"GPU {product!r} is not in llmdoctor's GPU table")
    raise FactMissing(
        "node/gpus", "the GPU's memory is unknown (no node/gpus, no GPU labels on the node)"
    )


@check(
    CHECK,
    title="max-model-len fits in the KV cache",
    scope="capacity",
    runbooks=(RUNBOOK, "vllm-startup-memory-insufficient", "mamba-cache-blocks-exceeded"),
)
def kv_cache_fit(facts: Facts) -> Finding:
    from llmdoctor.capacity.planner import CapacityInputs, model_shape, plan
    from llmdoctor.errors import BadInput

    config, path = _model_config(facts)
    try:
        shape = model_shape(config)
    except BadInput as exc:
        raise FactMissing(MODEL_CONFIG, f"{path}: {exc}") from None
    args = _serving_args(facts)
    memory, gpu_name, gpu_source = _gpu(facts)
    try:
        inputs = _inputs(CapacityInputs, shape, args, memory, gpu_name)
    except (TypeError, ValueError) as exc:
        # e.g. --max-model-len 32k (newer vLLM accepts it) or a typo in the pod's arguments
        raise FactMissing("serving/args", f"a serving argument is not a number: {exc}") from None
    try:
        result = plan(inputs)
    except BadInput as exc:
        raise FactMissing("serving/args", str(exc)) from None
    return _finding(result, path, gpu_name, memory, gpu_source)


def _inputs(CapacityInputs, shape, args: dict[str, Any], memory: int, gpu_name: str):
    """The serving arguments as capacity inputs; ValueError/TypeError if one is not a number."""

    def whole(name: str) -> int | None:
        return int(args[name]) if args[name] else None

    return CapacityInputs(
        shape=shape,
        gpu_memory_bytes=memory,
        gpu_name=gpu_name,
        gpu_memory_utilization=float(args["gpu_memory_utilization"] or 0.9),
        max_model_len=whole("max_model_len"),
        tensor_parallel_size=int(args["tensor_parallel_size"] or 1),
        kv_cache_dtype=str(args["kv_cache_dtype"] or "auto"),
        dtype=str(args["dtype"]) if args["dtype"] else None,
        max_num_seqs=whole("max_num_seqs"),
        max_num_batched_tokens=whole("max_num_batched_tokens"),
        kv_cache_memory_bytes=whole("kv_cache_memory_bytes"),
        block_size=whole("block_size") or 16,
        performance_mode=str(args["performance_mode"]) if args["performance_mode"] else None,
        enforce_eager=bool(args["enforce_eager"]),
        prefix_caching=bool(args["enable_prefix_caching"]),
        data_parallel_size=whole("data_parallel_size") or 1,
        hybrid_kv_cache=not args["disable_hybrid_kv_cache_manager"],
        chunked_local_hybrid=args["allow_chunked_local_attn_hybrid"] is not False,
    )


def _finding(result, path: str, gpu_name: str, memory: int, gpu_source: str) -> Finding:
    from llmdoctor.capacity.planner import gib

    source = "settings/model_config_path" if path != MODEL_CONFIG else MODEL_CONFIG
    items = [evidence(f"model config {path}", source=source)]
    items.append(evidence(f"GPU {gpu_name}: {gib(memory)} visible to CUDA", source=gpu_source))
    items += [evidence(step, source="capacity") for step in result.steps]
    items += [evidence(f"warning: {w}", source="capacity") for w in result.warnings]
    length = f"{result.max_model_len:,}-token"
    if not result.modelled:
        items += [evidence(n, source="capacity") for n in result.not_modelled]
        return info(
            CHECK,
            f"{result.not_modelled[0]}: whether max-model-len {result.max_model_len:,} fits on "
            f"{gpu_name} is not said",
            items,
        )
    if result.fits:
        blocks = (
            f"; {result.mamba_cache_blocks} Mamba cache blocks for max_num_seqs "
            f"{result.max_num_seqs}"
            if result.mamba_cache_blocks is not None
            else ""
        )
        return ok(
            CHECK,
            f"one {length} request needs {gib(result.seq_bytes)} of the ~"
            f"{gib(result.kv_cache_bytes)} KV cache ({result.concurrency:.1f} at once){blocks}",
            items,
        )
    if result.vllm_error:
        items.append(evidence(f"vLLM would stop with: {result.vllm_error}", source="capacity"))
    items += [evidence(f"would fit: {s}", source="capacity") for s in result.suggestions]
    runbooks = result.runbooks or [RUNBOOK]
    if not result.weights_fit:
        summary = (
            f"the weights ({gib(result.weights_bytes_per_gpu or 0)} per GPU) do not fit in what "
            f"vLLM may use on {gpu_name}: vLLM would refuse to start"
        )
    elif runbooks[0] == "mamba-cache-blocks-exceeded":
        summary = (
            f"max_num_seqs {result.max_num_seqs} exceeds the {result.mamba_cache_blocks} Mamba "
            f"cache blocks on {gpu_name}: vLLM would refuse to start (lower --max-num-seqs)"
        )
    else:
        fix = (
            f"; --max-model-len {result.estimated_max_model_len} would fit"
            if result.estimated_max_model_len
            else ""
        )
        summary = (
            f"max-model-len {result.max_model_len:,} does not fit: one request needs "
            f"{gib(result.seq_bytes)} of KV cache, about {gib(max(result.kv_cache_bytes, 0))} is "
            f"left on {gpu_name}{fix}"
        )
    found = critical(CHECK, summary, items, runbooks)
    if result.weights_fit and runbooks[0] == RUNBOOK and result.estimated_max_model_len:
        found.params["max_model_len"] = result.estimated_max_model_len
    return found
