"""What an unknown option probably meant: the spellings an SRE brings from vLLM, SGLang or
habit (`--num-gpus`, `--tp`, `--max_model_len`) mapped to llmdoctor's own options.

click's own guess is by letters alone (`--num-gpus` -> `--gpu`, an option that names a GPU
model, not a count); a known other spelling is a better guess, and is only offered when the
command has the option it points at.
"""

from __future__ import annotations

from difflib import SequenceMatcher

# typer carries its own copy of click (typer._click): the command and the error are read by
# their attributes, not their classes

# llmdoctor's option -> other spellings of it (compared lower-case, '_' read as '-')
OTHER_SPELLINGS: dict[str, tuple[str, ...]] = {
    "--tensor-parallel-size": (
        "--num-gpus",
        "--num-gpu",
        "--n-gpus",
        "--ngpus",
        "--gpus",
        "--gpu-count",
        "--tp",
        "--tp-size",
        "--tensor-parallel",
        "--tensor-parallelism",
    ),
    "--data-parallel-size": ("--dp", "--dp-size", "--data-parallel", "--replicas"),
    "--max-model-len": (
        "--max-model-length",
        "--max-seq-len",
        "--max-len",
        "--context-length",
        "--context-len",
        "--ctx-len",
        "--seq-len",
    ),
    "--gpu-memory-utilization": (
        "--gpu-mem-util",
        "--gpu-memory-util",
        "--gpu-util",
        "--gpu-memory-fraction",
        "--mem-fraction-static",
    ),
    "--max-num-seqs": ("--max-batch-size", "--batch-size", "--max-running-requests"),
    "--kv-cache-dtype": ("--kv-dtype", "--kv-cache-type"),
    "--gpu": ("--gpu-type", "--gpu-model", "--gpu-name"),
    "--model-config": ("--config", "--config-json", "--hf-config"),
    "--model-dir": ("--model-path", "--weights"),
    "--quantization": ("-q", "--quant", "--quantize"),
    "--namespace": ("--ns",),
}
_MEANT = {other: ours for ours, others in OTHER_SPELLINGS.items() for other in others}


def meant_option(unknown: str, command) -> str | None:
    """The command's option `unknown` most likely stands for, as help writes it
    (`-tp/--tensor-parallel-size`), or None when no known spelling fits."""
    by_name = {
        name: param
        for param in command.params
        if param.param_type_name == "option"
        for name in param.opts
    }
    spelled = unknown.split("=", 1)[0].lower().replace("_", "-")
    for candidate in (spelled, _MEANT.get(spelled)):
        param = by_name.get(candidate) if candidate else None
        if param is not None:
            return _as_help_writes_it(param)
    return None


def _as_help_writes_it(param) -> str:
    return "/".join(sorted(param.opts, key=len))


# click offers any option within 0.6 of the typed one (`--bogus` -> `--jobs`); a typo of an
# option is closer (`--josn` 0.83, `--timout` 0.94)
TYPO_SIMILARITY = 0.75


def unknown_option_message(error: Exception) -> str | None:
    """The 'No such option' line: a known other spelling as the suggestion, else click's
    guesses that are close enough to be typos, else where the options are listed. None when
    the error is not an unknown option."""
    unknown = getattr(error, "option_name", None)
    ctx = getattr(error, "ctx", None)
    if type(error).__name__ != "NoSuchOption" or not unknown or ctx is None:
        return None
    meant = meant_option(unknown, ctx.command)
    if meant is not None:
        return f"No such option: {unknown}; did you mean {meant}?"
    typos = sorted(
        option
        for option in getattr(error, "possibilities", None) or ()
        if SequenceMatcher(None, unknown, option).ratio() >= TYPO_SIMILARITY
    )
    if typos:
        return f"No such option: {unknown}; did you mean {' or '.join(typos)}?"
    return f"No such option: {unknown} (see: {ctx.command_path} --help)"
