"""vLLM's serving arguments, read from the serving container's command and args (k8s/pod.json).

Derived fact `serving/args`: a dict with model, served_model_name, max_model_len,
gpu_memory_utilization, max_num_seqs, max_num_batched_tokens, tensor_parallel_size,
pipeline_parallel_size, data_parallel_size, enable_expert_parallel, dtype, quantization,
kv_cache_dtype, kv_cache_memory_bytes, block_size, enable_prefix_caching, performance_mode,
enforce_eager, port, disable_hybrid_kv_cache_manager, allow_chunked_local_attn_hybrid (the
container's VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE) and container (None when unknown),
plus served_model_names, entrypoint, argv,
explicit (flags given on the command line), unresolved (variables that could not be expanded),
overridden (values taken from settings/<name>), unknown_flags (flags no vLLM release we know
has) and removed_flags (flags an older vLLM had and the newest does not, with what replaces them).

Which flags take a value and which are on/off comes from vLLM's own argument definitions
(llmdoctor/data/vllm_cli_flags.json, read from vLLM 0.8.5 to 0.33.0), so `--some-switch MODEL`
never takes the model for the switch's value; a flag no release has is assumed to take a value
unless that would leave `vllm serve` without its model.

Every spelling a manifest uses is understood: `--x=y`, `--x y`, `--x_y`, `-tp 2`,
`vllm serve MODEL ...`, `python3 -m vllm.entrypoints.openai.api_server --model ...`, args given
to the vllm/vllm-openai image's own entrypoint, and `sh -c "..."` scripts. `$(VAR)` (kubelet)
and `$VAR` / `${VAR}` (shell) are expanded from the container's literal env values only.

Real input (vLLM docs, docs/deployment/k8s.md, the GPU Deployment example):

    command: ["/bin/sh", "-c"]
    args: ["vllm serve mistralai/Mistral-7B-Instruct-v0.3 --trust-remote-code
            --enable-chunked-prefill --max_num_batched_tokens 1024"]
"""

from __future__ import annotations

import posixpath
import re
import shlex
from typing import Any

from llmdoctor.engine.derive import derived_fact
from llmdoctor.engine.facts import Facts
from llmdoctor.gpus.tables import load_table
from llmdoctor.parsers.k8s_pod import require_pod

# field -> flag spellings (normalised: dashes, long form) that set it
VALUE_FLAGS = {
    "--model": "model",
    "--served-model-name": "served_model_name",
    "--max-model-len": "max_model_len",
    "--gpu-memory-utilization": "gpu_memory_utilization",
    "--max-num-seqs": "max_num_seqs",
    "--tensor-parallel-size": "tensor_parallel_size",
    "-tp": "tensor_parallel_size",
    "--pipeline-parallel-size": "pipeline_parallel_size",
    "-pp": "pipeline_parallel_size",
    "--data-parallel-size": "data_parallel_size",
    "-dp": "data_parallel_size",
    "--dtype": "dtype",
    "--quantization": "quantization",
    "-q": "quantization",
    "--kv-cache-dtype": "kv_cache_dtype",
    "--kv-cache-memory-bytes": "kv_cache_memory_bytes",
    "--max-num-batched-tokens": "max_num_batched_tokens",
    "--block-size": "block_size",
    "--performance-mode": "performance_mode",
    "--device-memory-utilization": "gpu_memory_utilization",
    "--port": "port",
}
# on/off flags whose value the other checks need: flag -> (field, value when given)
SWITCH_FLAGS = {
    "--enforce-eager": ("enforce_eager", True),
    "--no-enforce-eager": ("enforce_eager", False),
    "--enable-expert-parallel": ("enable_expert_parallel", True),
    "-ep": ("enable_expert_parallel", True),
    "--no-enable-expert-parallel": ("enable_expert_parallel", False),
    "--enable-prefix-caching": ("enable_prefix_caching", True),
    "--no-enable-prefix-caching": ("enable_prefix_caching", False),
    "--disable-hybrid-kv-cache-manager": ("disable_hybrid_kv_cache_manager", True),
    "--no-disable-hybrid-kv-cache-manager": ("disable_hybrid_kv_cache_manager", False),
}
# environment variables of the serving container that change how vLLM sizes its cache:
# name -> field (vLLM reads them as bool(int(value)))
ENV_SWITCHES = {
    "VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE": "allow_chunked_local_attn_hybrid",
}
# vLLM flags that take no value: needed to tell a flag's value from the positional model
BOOLEAN_FLAGS = {
    "--enforce-eager",
    "--trust-remote-code",
    "--enable-prefix-caching",
    "--enable-chunked-prefill",
    "--disable-log-requests",
    "--enable-log-requests",
    "--disable-log-stats",
    "--enable-auto-tool-choice",
    "--disable-custom-all-reduce",
    "--enable-lora",
    "--use-v2-block-manager",
    "--disable-frontend-multiprocessing",
    "--enable-server-load-tracking",
    "--disable-sliding-window",
    "--skip-tokenizer-init",
    "--disable-fastapi-docs",
    "--enable-reasoning",
    "--enable-expert-parallel",
    "--async-scheduling",
    "--headless",
}
FIELDS = (
    "model",
    "served_model_name",
    "max_model_len",
    "gpu_memory_utilization",
    "max_num_seqs",
    "max_num_batched_tokens",
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "data_parallel_size",
    "enable_expert_parallel",
    "dtype",
    "quantization",
    "kv_cache_dtype",
    "kv_cache_memory_bytes",
    "block_size",
    "enable_prefix_caching",
    "performance_mode",
    "enforce_eager",
    "port",
    "disable_hybrid_kv_cache_manager",
)
# vLLM's defaults that hold in every version, applied when the command line was found and no
# --config file is used; the others (gpu_memory_utilization, dtype, max_num_seqs ...) stay None
# when not given, so a check says "vLLM's default" itself rather than "the pod's arguments"
DEFAULTS = {
    "tensor_parallel_size": 1,
    "pipeline_parallel_size": 1,
    "data_parallel_size": 1,
    "enable_expert_parallel": False,
    "enforce_eager": False,
    "port": 8000,
}
BOOLEAN_WORDS = {"true", "false"}  # vLLM <= 0.8 StoreBoolean flags took an optional true/false
SHELLS = {"sh", "bash", "dash", "ash", "zsh", "ksh", "busybox"}
SEPARATORS = {";", "&&", "||", "|", "&", "(", ")"}
PREFIX_WORDS = {"exec", "nohup", "time", "env", "command", "stdbuf"}
ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.DOTALL)
PYTHON = re.compile(r"^python(\d+(\.\d+)?)?$")
KUBELET_VAR = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)")
SHELL_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)")
HUMAN_INT = re.compile(r"^(\d+(?:\.\d+)?)([kKmMgGtT]?)$")
NUMBER = re.compile(r"^-?\d+(\.\d+)?$")


def parse_human_int(text: str) -> int | None:
    """vLLM's human-readable integers: '8192', '32k' (x1000), '32K' (x1024); -1/'auto' -> None."""
    match = HUMAN_INT.match(text.strip())
    if not match:
        return None
    number, suffix = match.groups()
    scale = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}.get(suffix)
    if scale is None:  # upper case: binary multiples, whole numbers only
        scale = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}[suffix]
        if "." in number:
            return None
    return int(float(number) * scale)


def _convert(field: str, raw: str) -> Any:
    if field in ("max_model_len", "max_num_batched_tokens", "kv_cache_memory_bytes"):
        return parse_human_int(raw)
    if field in (
        "max_num_seqs",
        "tensor_parallel_size",
        "pipeline_parallel_size",
        "data_parallel_size",
        "block_size",
        "port",
    ):
        try:
            return int(raw)
        except ValueError:  # "2x", "²" (a digit to isdigit(), not to int())
            return None
    if field == "gpu_memory_utilization":
        try:
            return float(raw)
        except ValueError:
            return None
    return raw


def _normalise_flag(token: str) -> tuple[str, str | None]:
    """('--max-model-len', '8192') for '--max_model_len=8192'; short flags kept as given."""
    key, sep, value = token.partition("=")
    if key.startswith("--"):
        key = "--" + key[2:].replace("_", "-")
    return key, (value if sep else None)


def _is_flag(token: str) -> bool:
    return token.startswith("-") and len(token) > 1 and not NUMBER.match(token)


def vllm_flags() -> dict[str, Any]:
    """vLLM's flags by kind (data/vllm_cli_flags.json): boolean, list, value, aliases, removed."""
    table = load_table("vllm_cli_flags")
    return {
        "boolean": set(table["boolean"]) | set(table["boolean_short"]) | BOOLEAN_FLAGS,
        "list": set(table["list"]),
        "value": set(table["value"]) | set(VALUE_FLAGS),
        "aliases": table["aliases"],
        "removed": table["removed"],
    }


def _flag_kind(key: str, flags: dict[str, Any]) -> str:
    """'switch', 'boolean', 'list', 'value' or 'unknown' for a normalised flag."""
    if key in SWITCH_FLAGS:
        return "switch"
    key = flags["aliases"].get(key, key)
    if key in flags["boolean"] or (key.startswith("--no-") and "--" + key[5:] in flags["boolean"]):
        return "boolean"
    if key in flags["list"]:
        return "list"
    if key in flags["value"] or key in VALUE_FLAGS:
        return "value"
    return "unknown"


def parse_vllm_argv(argv: list[str], positional_model: bool) -> dict[str, Any]:
    """The fields set by a vLLM argument list (after `vllm serve` or the api_server module)."""
    flags = vllm_flags()
    found: dict[str, Any] = {}
    names: list[str] = []
    unknown: list[str] = []
    removed: list[dict[str, str]] = []
    swallowed: list[str] = []  # values taken by unknown flags, in order
    config_file = False
    i = 0
    while i < len(argv):
        token = argv[i]
        i += 1
        if token == "--":
            continue
        if not _is_flag(token):
            if positional_model and "positional_model" not in found:
                found["positional_model"] = token
            continue
        key, inline = _normalise_flag(token)
        if key.startswith("-O") and not key.startswith("--"):  # -O3, -O 3: optimisation level
            if inline is None and key == "-O" and i < len(argv) and not _is_flag(argv[i]):
                i += 1
            continue
        if key in flags["removed"]:
            removed.append({"flag": key, **flags["removed"][key]})
        kind = _flag_kind(key, flags)
        if kind in ("switch", "boolean"):
            if inline is None and i < len(argv) and argv[i].lower() in BOOLEAN_WORDS:
                inline, i = argv[i], i + 1
            if kind == "switch":
                field, value = SWITCH_FLAGS[key]
                found[field] = value if inline is None else (inline.lower() == "true") == value
            continue
        if key == "--served-model-name" or kind == "list":
            values = [inline] if inline is not None else []
            while inline is None and i < len(argv) and not _is_flag(argv[i]):
                values.append(argv[i])
                i += 1
            if key == "--served-model-name":
                names.extend(v for v in values if v)
            continue
        value = inline
        if value is None and i < len(argv) and not _is_flag(argv[i]):
            value = argv[i]
            i += 1
            if kind == "unknown":
                swallowed.append(value)
        if kind == "unknown":
            unknown.append(key)
        if key == "--config":
            config_file = True
        field = VALUE_FLAGS.get(flags["aliases"].get(key, key)) or VALUE_FLAGS.get(key)
        if field is not None and value is not None:
            found[field] = _convert(field, value)
    if positional_model and "positional_model" not in found and "model" not in found and swallowed:
        # an on/off flag we do not know placed before the model: the model is what it "took"
        found["positional_model"] = swallowed[0]
    if "positional_model" in found:
        found["model"] = found.pop("positional_model")
    if names:
        found["served_model_name"] = names[0]
        found["served_model_names"] = names
    if config_file:
        found["config_file"] = True
    found["unknown_flags"] = unknown
    found["removed_flags"] = removed
    return found


def _shell_tokens(script: str) -> list[str]:
    """Split a shell script into words and separators; newlines end commands."""
    text = script.replace("\\\r\n", " ").replace("\\\n", " ").replace("\n", " ;\n")
    lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|()")
    lexer.whitespace_split = True
    try:
        return list(lexer)
    except ValueError:  # unbalanced quotes: fall back to plain words
        return text.split()


def _split_commands(tokens: list[str]) -> list[list[str]]:
    commands: list[list[str]] = [[]]
    for token in tokens:
        if token in SEPARATORS or set(token) <= set(";&|()"):
            commands.append([])
        else:
            commands[-1].append(token)
    return [c for c in commands if c]


def _shell_script(argv: list[str]) -> str | None:
    """The script of `sh -c SCRIPT` (also bash -ec, /bin/sh -xc ...), or None."""
    if not argv or posixpath.basename(argv[0]) not in SHELLS:
        return None
    for i, token in enumerate(argv[1:], 1):
        if re.fullmatch(r"-[a-zA-Z]*c[a-zA-Z]*", token) and i + 1 < len(argv):
            return argv[i + 1]
    return None


def _invocation(tokens: list[str]) -> tuple[str, list[str], bool] | None:
    """(entrypoint, vLLM args, positional model allowed) when the command starts vLLM."""
    while tokens and (tokens[0] in PREFIX_WORDS or ASSIGNMENT.match(tokens[0])):
        tokens = tokens[1:]
    if not tokens:
        return None
    exe = posixpath.basename(tokens[0])
    if exe == "vllm" and len(tokens) > 1 and tokens[1] == "serve":
        return "vllm serve", tokens[2:], True
    if PYTHON.match(exe):
        for i, token in enumerate(tokens[1:], 1):
            module = None
            if token == "-m" and i + 1 < len(tokens):
                module, rest = tokens[i + 1], tokens[i + 2 :]
            elif token.startswith("-m") and len(token) > 2:
                module, rest = token[2:], tokens[i + 1 :]
            if module is None:
                continue
            if not module.startswith("vllm.entrypoints"):
                return None
            if module.endswith("cli.main") and rest[:1] == ["serve"]:
                return f"python -m {module} serve", rest[1:], True
            return f"python -m {module}", rest, False
    return None


def _expand(text: str, env: dict[str, str], unresolved: list[str], shell: bool) -> str:
    """Expand $(VAR) as the kubelet does and, inside shell scripts, $VAR and ${VAR:-default}."""

    def kubelet(m: re.Match) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group(1)
        if name in env:
            return env[name]
        unresolved.append(name)
        return m.group(0)

    def shell_var(m: re.Match) -> str:
        name = m.group(1) or m.group(3)
        if name in env:
            return env[name]
        if m.group(2) is not None:
            return m.group(2)
        unresolved.append(name)
        return m.group(0)

    text = KUBELET_VAR.sub(kubelet, text)
    return SHELL_VAR.sub(shell_var, text) if shell else text


def container_env(container: dict) -> dict[str, str]:
    """Literal env values of a container (valueFrom references are unknown here)."""
    env = {}
    for item in container.get("env") or []:
        if isinstance(item, dict) and "value" in item and isinstance(item.get("name"), str):
            env[item["name"]] = str(item.get("value") or "")
    return env


def _token_list(value: Any) -> list:
    """A container's command or args: a list of strings (anything else reads as empty)."""
    return value if isinstance(value, list) else []


def find_vllm_command(container: dict) -> tuple[str, list[str], bool, list[str]] | None:
    """(entrypoint, args, positional allowed, unresolved vars) of the vLLM command, if any."""
    env = container_env(container)
    unresolved: list[str] = []
    argv = [
        _expand(str(t), env, unresolved, shell=False)
        for t in _token_list(container.get("command")) + _token_list(container.get("args"))
    ]
    script = _shell_script(argv)
    if script is not None:
        shell_env = dict(env)
        for command in _split_commands(_shell_tokens(script)):
            if command[0] == "export" or all(ASSIGNMENT.match(t) for t in command):
                for token in command:
                    m = ASSIGNMENT.match(token)
                    if m:
                        shell_env[m.group(1)] = _expand(m.group(2), shell_env, [], shell=True)
                continue
            found = _invocation(command)
            if found is not None:
                entry, args, positional = found
                args = [_expand(a, shell_env, unresolved, shell=True) for a in args]
                return f"sh -c: {entry}", args, positional, unresolved
        return None
    found = _invocation(argv)
    if found is not None:
        return (*found, unresolved)
    if not container.get("command") and argv and "vllm" in str(container.get("image", "")):
        # args handed to the vllm/vllm-openai image's own ENTRYPOINT
        return "image entrypoint", argv, True, unresolved
    return None


def _requests_gpu(container: dict) -> bool:
    resources = container.get("resources") or {}
    return any("nvidia.com/gpu" in (resources.get(k) or {}) for k in ("limits", "requests"))


def serving_container(pod: dict) -> dict | None:
    """The container that runs vLLM: its command, else a vllm image, else the one with a GPU."""
    containers = [c for c in ((pod.get("spec") or {}).get("containers") or []) if c]
    if not containers:
        return None
    for c in containers:
        if find_vllm_command(c) is not None:
            return c
    for c in containers:
        if "vllm" in str(c.get("image", "")).lower():
            return c
    for c in containers:
        if _requests_gpu(c):
            return c
    return containers[0] if len(containers) == 1 else None


def parse_serving_args(pod: dict) -> dict[str, Any]:
    """The serving arguments of a Pod object (no settings applied)."""
    result: dict[str, Any] = dict.fromkeys(FIELDS)
    result.update(
        dict.fromkeys(ENV_SWITCHES.values()),
        container=None,
        served_model_names=[],
        entrypoint=None,
        argv=[],
        explicit=[],
        unresolved=[],
        overridden=[],
        unknown_flags=[],
        removed_flags=[],
    )
    container = serving_container(pod)
    if container is None:
        return result
    result["container"] = container.get("name")
    env = container_env(container)
    for name, field in ENV_SWITCHES.items():
        result[field] = _env_switch(env.get(name))
    found = find_vllm_command(container)
    if found is None:
        return result
    entry, argv, positional, unresolved = found
    values = parse_vllm_argv(argv, positional)
    result["entrypoint"] = entry
    result["argv"] = argv
    result["unresolved"] = sorted(set(unresolved))
    result["explicit"] = sorted(f for f in FIELDS if f in values)
    for field in FIELDS:
        value = values.get(field)
        if isinstance(value, str) and "$" in value:  # a variable we could not expand
            value = None
        result[field] = value
    result["served_model_names"] = values.get("served_model_names") or []
    result["unknown_flags"] = values.get("unknown_flags") or []
    result["removed_flags"] = values.get("removed_flags") or []
    if not values.get("config_file"):
        for field, default in DEFAULTS.items():
            if field not in values:
                result[field] = default
        if "served_model_name" not in values and result["model"] is not None:
            result["served_model_name"] = result["model"]
            result["served_model_names"] = [result["model"]]
    return result


def _env_switch(value: str | None) -> bool | None:
    """An environment switch as vLLM reads it (bool(int(value))); None when unset or unreadable."""
    try:
        return bool(int(value)) if value is not None else None
    except ValueError:
        return None


@derived_fact("serving/args", needs=("k8s/pod.json",))
def serving_args(facts: Facts) -> dict[str, Any]:
    pod = require_pod(facts)
    result = parse_serving_args(pod)
    for field in FIELDS:
        override = facts.get(f"settings/{field}")
        if override is not None:
            result[field] = override
            result["overridden"].append(field)
    return result
