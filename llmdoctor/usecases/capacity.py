"""Plan vLLM's memory for a model on a GPU: what `llmdoctor capacity` and the MCP tool run.

The request holds the values as the user wrote them (sizes as text, names as typed); the use
case reads the model, resolves the GPU, refuses what vLLM would refuse, and plans.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class CapacityRequest:
    """A capacity question: the model, the GPU and vLLM's settings (see `capacity --help`)."""

    model_config: str | None = None
    model_dir: str | None = None
    params: str | None = None  # "7.6B"; else estimated
    dtype: str = "auto"
    gpu: str | None = None
    gpu_memory: str | None = None  # "80GiB"
    gpu_memory_utilization: float = 0.9
    max_model_len: int | None = None
    tensor_parallel_size: int = 1
    kv_cache_dtype: str = "auto"
    data_parallel_size: int = 1
    block_size: int = 16
    mean_seq_len: int | None = None
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    overhead: str | None = None
    kv_cache_memory: str | None = None
    kv_cache_memory_bytes: str | None = None
    performance_mode: str | None = None
    enforce_eager: bool = False
    disable_hybrid_kv_cache_manager: bool = False
    enable_prefix_caching: bool = False


PERFORMANCE_MODES = (None, "balanced", "interactivity", "throughput")


def _gpu_memory(request: CapacityRequest, cap) -> tuple[int, str | None]:
    """(bytes of one GPU, its name): --gpu-memory wins over the table's --gpu."""
    from llmdoctor.errors import BadInput

    if request.gpu_memory is not None:
        return cap.parse_size(request.gpu_memory), request.gpu or None
    if request.gpu:
        found = cap.find_gpu(request.gpu)
        if found is None:
            if len(like := cap.gpus_named_like(request.gpu)) > 1:
                raise BadInput(f"GPU {request.gpu!r} has several sizes: give {' or '.join(like)}")
            raise BadInput(f"unknown GPU {request.gpu!r}; known: {', '.join(cap.gpu_names())}")
        return found.usable_bytes, found.name
    raise BadInput("give --gpu NAME or --gpu-memory SIZE (e.g. --gpu-memory 80GiB)")


def _size(cap, text: str | None, **kwargs) -> int | None:
    return cap.parse_size(text, **kwargs) if text is not None else None


def capacity(request: CapacityRequest):
    """The capacity plan (llmdoctor.capacity.planner's result); BadInput for what cannot be read.

    The command exits 1 when the plan is not modelled (no verdict), else 0 fits, 2 does not."""
    from llmdoctor.capacity import planner as cap
    from llmdoctor.errors import BadInput

    if not request.model_config and not request.model_dir:
        raise BadInput("give --model-config config.json (or --model-dir with a config.json)")
    if not math.isfinite(request.gpu_memory_utilization):  # the CLI's callback, for every caller
        raise BadInput(
            f"--gpu-memory-utilization {request.gpu_memory_utilization}: must be a finite number"
        )
    config = cap.load_model_config(request.model_config or request.model_dir)
    shape = cap.model_shape(config)
    weights_bytes = None
    weights_source = ""
    if request.model_dir:
        weights = cap.safetensors_weights(request.model_dir)
        weights_bytes = weights.total_bytes
        kinds = ", ".join(f"{k} {cap.gib(v)}" for k, v in sorted(weights.by_dtype.items()))
        weights_source = f"{weights.tensors} tensors in {weights.files} safetensors files: {kinds}"
        shape.notes.extend(weights.notes)
    memory, gpu_name = _gpu_memory(request, cap)
    if request.kv_cache_dtype not in cap.KV_CACHE_DTYPES:
        raise BadInput(
            f"--kv-cache-dtype {request.kv_cache_dtype}: vLLM accepts "
            f"{', '.join(cap.KV_CACHE_DTYPES)}"
        )
    if request.performance_mode not in PERFORMANCE_MODES:
        raise BadInput(
            f"--performance-mode {request.performance_mode}: use balanced, interactivity or "
            "throughput"
        )
    inputs = cap.CapacityInputs(
        shape=shape,
        gpu_memory_bytes=memory,
        gpu_name=gpu_name,
        gpu_memory_utilization=request.gpu_memory_utilization,
        max_model_len=request.max_model_len,
        tensor_parallel_size=request.tensor_parallel_size,
        kv_cache_dtype=request.kv_cache_dtype,
        dtype=request.dtype,
        block_size=request.block_size,
        mean_seq_len=request.mean_seq_len,
        max_num_batched_tokens=request.max_num_batched_tokens,
        max_num_seqs=request.max_num_seqs,
        weights_bytes=weights_bytes,
        weights_source=weights_source,
        parameters=cap.parse_count(request.params) if request.params is not None else None,
        overhead_bytes=_size(cap, request.overhead),
        kv_cache_bytes=_size(cap, request.kv_cache_memory),
        kv_cache_memory_bytes=_size(cap, request.kv_cache_memory_bytes, default_unit="b"),
        performance_mode=request.performance_mode,
        enforce_eager=request.enforce_eager,
        prefix_caching=request.enable_prefix_caching,
        hybrid_kv_cache=not request.disable_hybrid_kv_cache_manager,
        data_parallel_size=request.data_parallel_size,
    )
    return cap.plan(inputs)
