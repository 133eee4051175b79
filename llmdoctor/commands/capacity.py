"""`llmdoctor capacity` — KV cache and concurrency planning for vLLM, with the arithmetic shown."""

from __future__ import annotations

from typing import Annotated

import typer

from llmdoctor.commands import options as opt


def capacity_command(
    model_config: Annotated[
        str | None, typer.Option("--model-config", help="The model's Hugging Face config.json.")
    ] = None,
    model_dir: Annotated[
        str | None,
        typer.Option(
            "--model-dir",
            help="A model folder: weight size from its *.safetensors headers (and its config.json).",
        ),
    ] = None,
    params: Annotated[
        str | None, typer.Option("--params", help="Parameter count, e.g. 7.6B (else estimated).")
    ] = None,
    dtype: Annotated[
        str, typer.Option("--dtype", help="Weight dtype: auto (the config's), bfloat16, float16.")
    ] = "auto",
    gpu: Annotated[
        str | None, typer.Option("--gpu", help="A GPU of the table, e.g. A100-80GB, H100, L4.")
    ] = None,
    gpu_memory: Annotated[
        str | None,
        typer.Option(
            "--gpu-memory", help="Memory of one GPU, e.g. 80GiB or 79.25GiB (CUDA total)."
        ),
    ] = None,
    gpu_memory_utilization: Annotated[
        float,
        typer.Option(
            "--gpu-memory-utilization",
            callback=opt.finite,
            help="vLLM's --gpu-memory-utilization.",
        ),
    ] = 0.9,
    max_model_len: Annotated[
        int | None,
        typer.Option(
            "--max-model-len", min=1, help="Default: the config's max_position_embeddings."
        ),
    ] = None,
    tensor_parallel_size: Annotated[
        int, typer.Option("--tensor-parallel-size", "-tp", min=1, help="GPUs per replica.")
    ] = 1,
    kv_cache_dtype: Annotated[
        str,
        typer.Option(
            "--kv-cache-dtype",
            help="auto (the model dtype), fp8, fp8_e4m3, fp8_e5m2, fp8_ds_mla, nvfp4, bfloat16.",
        ),
    ] = "auto",
    data_parallel_size: Annotated[
        int,
        typer.Option(
            "--data-parallel-size", "-dp", min=1, help="Replicas (each sized on its own GPUs)."
        ),
    ] = 1,
    block_size: Annotated[int, typer.Option("--block-size", min=1, help="Tokens per block.")] = 16,
    mean_seq_len: Annotated[
        int | None,
        typer.Option(
            "--mean-seq-len", min=1, help="Mean prompt+output tokens, to size --max-num-seqs."
        ),
    ] = None,
    max_num_batched_tokens: Annotated[
        int | None,
        typer.Option(
            "--max-num-batched-tokens", min=1, help="vLLM's value (default: vLLM's for the GPU)."
        ),
    ] = None,
    max_num_seqs: Annotated[
        int | None, typer.Option("--max-num-seqs", min=1, help="vLLM's value, if set.")
    ] = None,
    overhead: Annotated[
        str | None,
        typer.Option(
            "--overhead", help="Activation peak + non-torch memory per GPU (else estimated)."
        ),
    ] = None,
    kv_cache_memory: Annotated[
        str | None,
        typer.Option(
            "--kv-cache-memory",
            help="vLLM's logged 'Available KV cache memory' (skips the memory budget).",
        ),
    ] = None,
    kv_cache_memory_bytes: Annotated[
        str | None,
        typer.Option(
            "--kv-cache-memory-bytes",
            help="vLLM's --kv-cache-memory-bytes: the KV cache size, overriding the utilization.",
        ),
    ] = None,
    performance_mode: Annotated[
        str | None,
        typer.Option(
            "--performance-mode", help="vLLM's --performance-mode (throughput doubles defaults)."
        ),
    ] = None,
    enforce_eager: Annotated[
        bool, typer.Option("--enforce-eager", help="vLLM runs without CUDA graphs.")
    ] = False,
    disable_hybrid_kv_cache_manager: Annotated[
        bool,
        typer.Option(
            "--disable-hybrid-kv-cache-manager",
            help="vLLM's flag (or VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=0): "
            "sliding-window and chunked layers keep every token.",
        ),
    ] = False,
    enable_prefix_caching: Annotated[
        bool,
        typer.Option(
            "--enable-prefix-caching",
            help="Hybrid (Mamba) models: prefix caching keeps 2 state blocks per sequence.",
        ),
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the capacity plan as one JSON object.")
    ] = False,
    no_color: opt.NoColor = False,
) -> None:
    """How many tokens and sequences fit in vLLM's KV cache, and whether max-model-len does.

    Exit codes: 0 vLLM would start (one max-model-len request fits), 1 the model is not
    modelled (its figures rest on a stated assumption: no verdict), 2 it would refuse to start
    (weights, KV cache or Mamba state blocks do not fit), 3 bad input.

    Examples:

      llmdoctor capacity --model-config config.json --gpu A100-80GB --max-model-len 16384

      llmdoctor capacity --model-dir /models/Qwen2-7B-Instruct --gpu-memory 80GiB -tp 2

      llmdoctor capacity --model-config config.json --gpu L4 --kv-cache-dtype fp8 --json
    """
    import json
    import sys

    from llmdoctor.capacity import planner as cap
    from llmdoctor.errors import BadInput

    if not model_config and not model_dir:
        raise BadInput("give --model-config config.json (or --model-dir with a config.json)")
    config = cap.load_model_config(model_config or model_dir)
    shape = cap.model_shape(config)
    weights_bytes = None
    weights_source = ""
    if model_dir:
        weights = cap.safetensors_weights(model_dir)
        weights_bytes = weights.total_bytes
        kinds = ", ".join(f"{k} {cap.gib(v)}" for k, v in sorted(weights.by_dtype.items()))
        weights_source = f"{weights.tensors} tensors in {weights.files} safetensors files: {kinds}"
        shape.notes.extend(weights.notes)
    gpu_name = None
    if gpu_memory is not None:
        memory = cap.parse_size(gpu_memory)
        if gpu:
            gpu_name = gpu
    elif gpu:
        found = cap.find_gpu(gpu)
        if found is None:
            raise BadInput(f"unknown GPU {gpu!r}; known: {', '.join(cap.gpu_names())}")
        memory, gpu_name = found.usable_bytes, found.name
    else:
        raise BadInput("give --gpu NAME or --gpu-memory SIZE (e.g. --gpu-memory 80GiB)")
    if kv_cache_dtype not in cap.KV_CACHE_DTYPES:
        raise BadInput(
            f"--kv-cache-dtype {kv_cache_dtype}: vLLM accepts {', '.join(cap.KV_CACHE_DTYPES)}"
        )
    if performance_mode not in (None, "balanced", "interactivity", "throughput"):
        raise BadInput(
            f"--performance-mode {performance_mode}: use balanced, interactivity or throughput"
        )
    inputs = cap.CapacityInputs(
        shape=shape,
        gpu_memory_bytes=memory,
        gpu_name=gpu_name,
        gpu_memory_utilization=gpu_memory_utilization,
        max_model_len=max_model_len,
        tensor_parallel_size=tensor_parallel_size,
        kv_cache_dtype=kv_cache_dtype,
        dtype=dtype,
        block_size=block_size,
        mean_seq_len=mean_seq_len,
        max_num_batched_tokens=max_num_batched_tokens,
        max_num_seqs=max_num_seqs,
        weights_bytes=weights_bytes,
        weights_source=weights_source,
        parameters=cap.parse_count(params) if params is not None else None,
        overhead_bytes=cap.parse_size(overhead) if overhead is not None else None,
        kv_cache_bytes=cap.parse_size(kv_cache_memory) if kv_cache_memory is not None else None,
        kv_cache_memory_bytes=(
            cap.parse_size(kv_cache_memory_bytes, default_unit="b")
            if kv_cache_memory_bytes is not None
            else None
        ),
        performance_mode=performance_mode,
        enforce_eager=enforce_eager,
        prefix_caching=enable_prefix_caching,
        hybrid_kv_cache=not disable_hybrid_kv_cache_manager,
        data_parallel_size=data_parallel_size,
    )
    result = cap.plan(inputs)
    if as_json:
        sys.stdout.write(json.dumps(result.to_json(), indent=2) + "\n")
    else:
        from llmdoctor.commands.output import make_console

        render(result, make_console(no_color))
    raise typer.Exit(1 if not result.modelled else 0 if result.fits else 2)


def render(result, console) -> None:
    """Headline, the arithmetic step by step, then what vLLM would say and what would fix it."""
    from rich.markup import escape

    if not result.modelled:
        console.print(
            "[bold black on yellow] NOT MODELLED [/] no verdict: llmdoctor does not model this "
            "model's memory as vLLM allocates it; the figures below rest on what was assumed"
        )
        for line in result.not_modelled:
            console.print(f"[bold yellow]{escape(line)}[/]", soft_wrap=True)
    elif result.fits:
        console.print(
            f"[bold black on green] FITS [/] [bold]{result.kv_tokens:,} KV cache tokens[/] per "
            f"replica; {result.concurrency:.2f} full {result.max_model_len:,}-token requests at once"
        )
    elif not result.weights_fit:
        console.print(
            "[bold white on red] DOES NOT FIT [/] the weights alone do not fit in the memory "
            "vLLM may use: vLLM would refuse to start"
        )
    elif result.mamba_cache_blocks is not None and result.kv_cache_bytes >= result.seq_bytes > 0:
        console.print(
            f"[bold white on red] DOES NOT START [/] --max-num-seqs {result.max_num_seqs} is more "
            f"than the {result.mamba_cache_blocks} Mamba cache blocks (one per running sequence)"
        )
    else:
        console.print(
            f"[bold white on red] DOES NOT FIT [/] one {result.max_model_len:,}-token request "
            "needs more KV cache than is left: vLLM would refuse to start"
        )
    for warning in result.warnings:
        console.print(f"[bold yellow]warning:[/] {escape(warning)}", soft_wrap=True)
    console.print()
    for n, step in enumerate(result.steps, 1):
        console.print(f"  {n}. {escape(step)}", soft_wrap=True)
    if result.suggested_max_num_seqs is not None:
        console.print()
        console.print(
            f"[bold]Suggested --max-num-seqs {result.suggested_max_num_seqs}[/] "
            f"(vLLM default {result.default_max_num_seqs})"
        )
    for note in result.notes:
        console.print(f"[dim]note: {escape(note)}[/]", soft_wrap=True)
    if result.vllm_error:
        console.print()
        console.print("[bold]vLLM would stop with (V1 engine):[/]")
        console.print(f"  {escape(result.vllm_error)}", soft_wrap=True)
    if result.suggestions:
        console.print("[bold]What would fit:[/] " + escape("; ".join(result.suggestions)))
    elif result.estimated_max_model_len:
        console.print(
            f"[bold]Fix:[/] --max-model-len {result.estimated_max_model_len} or less, a higher "
            "--gpu-memory-utilization, --kv-cache-dtype fp8, or more GPUs (-tp)"
        )
    if result.runbooks:
        console.print(f"[dim]runbook: llmdoctor wiki show {result.runbooks[0]}[/]")


def register(app: typer.Typer) -> None:
    app.command("capacity")(capacity_command)
