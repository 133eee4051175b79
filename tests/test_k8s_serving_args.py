"""serving/args: vLLM's arguments read from a container's command and args, in every spelling.

The command lines are real ones from public manifests and launch scripts (sources named on each
case; see tests/fixtures/k8s/SOURCES.md), placed in a container spec the way Kubernetes holds them.
"""

from __future__ import annotations

from k8s_server import load

from llmdoctor.engine.facts import Facts
from llmdoctor.parsers.serving_args import (
    parse_human_int,
    parse_serving_args,
    serving_args,
    serving_container,
)


def pod_with(**container) -> dict:
    return {"spec": {"containers": [{"name": "vllm", **container}]}}


def test_sh_c_vllm_serve_from_the_vllm_docs_manifest():
    # vLLM docs (docs/deployment/k8s.md): command ["/bin/sh", "-c"] + one args string
    args = parse_serving_args(
        pod_with(
            image="vllm/vllm-openai:latest",
            command=["/bin/sh", "-c"],
            args=[
                "vllm serve mistralai/Mistral-7B-Instruct-v0.3 --trust-remote-code "
                "--enable-chunked-prefill --max_num_batched_tokens 1024"
            ],
        )
    )
    assert args["model"] == "mistralai/Mistral-7B-Instruct-v0.3"
    assert args["served_model_name"] == "mistralai/Mistral-7B-Instruct-v0.3"
    assert args["entrypoint"] == "sh -c: vllm serve"
    assert args["tensor_parallel_size"] == 1 and args["enforce_eager"] is False
    assert args["max_model_len"] is None  # not given: vLLM takes it from the model config
    assert args["container"] == "vllm"


def test_underscore_spelling_is_read_like_dashes():
    # tchangkiat/aws-cdk-stacks: "--max_num_batched_tokens 2048 --max_model_len 2048"
    args = parse_serving_args(
        pod_with(
            command=["/bin/sh", "-c"],
            args=[
                "vllm serve meta-llama/Llama-3.2-1B-Instruct --max_num_batched_tokens 2048 "
                "--max_model_len 2048"
            ],
        )
    )
    assert args["max_model_len"] == 2048
    assert "max_model_len" in args["explicit"]


def test_api_server_module_in_a_multiline_bash_script():
    # WohimLee/vLLM-Tutorial launch_vllm.sh, run as `bash -c` with backslash continuations
    script = (
        "python -m vllm.entrypoints.openai.api_server \\\n"
        "  --model models/Qwen3-8B \\\n"
        "  --max-model-len 8192 \\\n"
        "  --gpu-memory-utilization 0.85 \\\n"
        "  --max-num-seqs 64 \\\n"
        "  --tensor-parallel-size 1 \\\n"
        "  --port 8000\n"
    )
    args = parse_serving_args(pod_with(command=["bash", "-c", script]))
    assert args["entrypoint"] == "sh -c: python -m vllm.entrypoints.openai.api_server"
    assert (args["model"], args["max_model_len"], args["max_num_seqs"]) == (
        "models/Qwen3-8B",
        8192,
        64,
    )
    assert args["gpu_memory_utilization"] == 0.85 and args["port"] == 8000


def test_parallelism_quantization_and_enforce_eager_flags():
    # a public launch script: TP 8, PP 2, deepspeedfp, --enforce-eager
    argv = [
        "python",
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        "/data-fast/yak2b-instruct-tp8",
        "--swap-space",
        "16",
        "--tensor-parallel-size",
        "8",
        "--pipeline-parallel-size",
        "2",
        "--quantization",
        "deepspeedfp",
        "--load-format",
        "sharded_state",
        "--enforce-eager",
        "--gpu-memory-utilization",
        "0.8",
    ]
    args = parse_serving_args(pod_with(command=argv[:3], args=argv[3:]))
    assert args["tensor_parallel_size"] == 8 and args["pipeline_parallel_size"] == 2
    assert args["quantization"] == "deepspeedfp" and args["enforce_eager"] is True


def test_args_given_to_the_vllm_image_entrypoint():
    # yandy/dockerapps: `vllm/vllm-openai:v0.6.6.post1 --model deepseek-ai/DeepSeek-V3 ...`
    args = parse_serving_args(
        pod_with(
            image="vllm/vllm-openai:v0.6.6.post1",
            args=["--model", "deepseek-ai/DeepSeek-V3", "--trust-remote-code"],
        )
    )
    assert args["model"] == "deepseek-ai/DeepSeek-V3"
    assert args["entrypoint"] == "image entrypoint"


def test_equals_spelling_short_flags_and_several_served_names():
    # --x=y, -tp N, and --served-model-name taking several names (nargs="+")
    args = parse_serving_args(
        pod_with(
            command=["vllm", "serve"],
            args=[
                "Qwen/Qwen2.5-7B-Instruct",
                "--max-model-len=32k",
                "-tp",
                "2",
                "--kv-cache-dtype=fp8",
                "--dtype",
                "bfloat16",
                "--served-model-name",
                "qwen",
                "qwen-7b",
            ],
        )
    )
    assert args["max_model_len"] == 32000  # lower-case k is 1000 in vLLM
    assert args["tensor_parallel_size"] == 2
    assert (args["kv_cache_dtype"], args["dtype"]) == ("fp8", "bfloat16")
    assert args["served_model_name"] == "qwen"
    assert args["served_model_names"] == ["qwen", "qwen-7b"]


def test_kubelet_and_shell_variables_expand_from_literal_env_only():
    # $(MODEL) is expanded by the kubelet, ${MAX_LEN} by the shell; a secret-backed value is not
    args = parse_serving_args(
        pod_with(
            command=["/bin/sh", "-c"],
            args=["vllm serve $(MODEL) --max-model-len ${MAX_LEN} --served-model-name $NAME"],
            env=[
                {"name": "MODEL", "value": "meta-llama/Llama-3.1-8B-Instruct"},
                {"name": "MAX_LEN", "value": "8192"},
                {"name": "NAME", "valueFrom": {"secretKeyRef": {"name": "n", "key": "k"}}},
            ],
        )
    )
    assert args["model"] == "meta-llama/Llama-3.1-8B-Instruct"
    assert args["max_model_len"] == 8192
    assert args["served_model_name"] is None  # never a literal "$NAME"
    assert args["unresolved"] == ["NAME"]


def test_env_prefix_and_home_variable_in_a_script():
    # lijiawei20161002/password_locking serve.sh: CUDA_VISIBLE_DEVICES=1 python -m ... $HOME/...
    script = (
        "CUDA_VISIBLE_DEVICES=1 python -m vllm.entrypoints.openai.api_server \\\n"
        "  --model $HOME/models/DeepSeek-R1-Distill-Qwen-1.5B \\\n"
        "  --max-model-len 2048 --gpu-memory-utilization 0.9 --port 9000\n"
    )
    args = parse_serving_args(pod_with(command=["/bin/bash", "-c", script]))
    assert args["model"] is None and "HOME" in args["unresolved"]
    assert (args["max_model_len"], args["port"]) == (2048, 9000)


def test_a_script_that_exports_before_serving():
    # export VAR=...; then exec vllm serve ... $VAR
    script = "export LEN=4096\npip install -q x && exec vllm serve facebook/opt-125m --max-model-len $LEN"
    args = parse_serving_args(pod_with(command=["sh", "-ec", script]))
    assert (args["model"], args["max_model_len"]) == ("facebook/opt-125m", 4096)


def test_no_vllm_command_leaves_everything_unknown():
    # the AKS StatefulSet bakes its arguments into the image: nothing to read
    pod = load("pod-vllm-1-pending-aks.json")
    args = parse_serving_args(pod)
    assert args["container"] == "vllm"
    assert args["entrypoint"] is None
    assert all(args[k] is None for k in ("model", "tensor_parallel_size", "port"))


def test_serving_container_is_the_one_running_vllm_not_a_sidecar():
    # a log shipper sidecar listed first must not be taken for the server
    pod = {
        "spec": {
            "containers": [
                {"name": "fluent-bit", "image": "fluent/fluent-bit:3.0"},
                {"name": "server", "command": ["vllm", "serve", "m"], "image": "custom:1"},
            ]
        }
    }
    assert serving_container(pod)["name"] == "server"


def test_settings_override_the_pod_spec():
    # a user's --max-num-seqs flag wins over what the pod says
    facts = Facts({"k8s/pod.json": load("pod-vllm-7b-healthy.json"), "settings/max_num_seqs": 128})
    args = serving_args(facts)
    assert args["max_num_seqs"] == 128 and args["overridden"] == ["max_num_seqs"]
    assert args["model"] == "Qwen2-7B-Instruct" and args["port"] == 8081


def test_human_readable_lengths():
    # vLLM: lower case decimal, upper case binary, decimals only with decimal suffixes
    assert parse_human_int("25.6k") == 25600
    assert parse_human_int("16K") == 16384
    assert parse_human_int("1.5K") is None
    assert parse_human_int("auto") is None


# The cases below use flag spellings from vLLM's own argument definitions (vLLM 0.8.5-0.33.0,
# llmdoctor/data/vllm_cli_flags.json); the command lines are written for these tests.


def test_switches_before_the_model_never_take_it_as_their_value():
    args = parse_serving_args(
        pod_with(
            image="vllm/vllm-openai:v0.33.0",
            command=["vllm", "serve"],
            args=["--enable-auto-tool-choice", "--no-enable-prefix-caching", "-ep",
                  "Qwen/Qwen3-30B-A3B", "--tool-call-parser", "hermes"],
        )
    )  # fmt: skip
    assert args["model"] == "Qwen/Qwen3-30B-A3B"
    assert args["enable_prefix_caching"] is False
    assert args["enable_expert_parallel"] is True
    assert args["unknown_flags"] == []


def test_an_unknown_switch_before_the_model_does_not_swallow_it():
    args = parse_serving_args(
        pod_with(
            image="vllm/vllm-openai:nightly",
            command=["vllm", "serve"],
            args=["--enable-some-future-switch", "openai/gpt-oss-120b", "--max-model-len", "32k"],
        )
    )
    assert args["model"] == "openai/gpt-oss-120b"
    assert args["max_model_len"] == 32000
    assert args["unknown_flags"] == ["--enable-some-future-switch"]


def test_parallelism_batching_and_kv_memory_flags():
    args = parse_serving_args(
        pod_with(
            image="vllm/vllm-openai:v0.33.0",
            command=["/bin/sh", "-c"],
            args=[
                "vllm serve deepseek-ai/DeepSeek-V3 -dp 8 --enable-expert-parallel "
                "--max-num-batched-tokens 16K --kv-cache-memory-bytes 20G "
                "--performance-mode=throughput --kv-cache-dtype fp8_e4m3 --block-size 64"
            ],
        )
    )
    assert args["data_parallel_size"] == 8
    assert args["enable_expert_parallel"] is True
    assert args["max_num_batched_tokens"] == 16 * 1024
    assert args["kv_cache_memory_bytes"] == 20 * 2**30  # vLLM: upper-case K/M/G are binary
    assert args["performance_mode"] == "throughput"
    assert args["kv_cache_dtype"] == "fp8_e4m3"
    assert args["block_size"] == 64
    assert args["tensor_parallel_size"] == 1


def test_data_parallel_size_defaults_to_one_and_reads_the_long_spelling():
    plain = parse_serving_args(pod_with(command=["vllm", "serve", "m"]))
    assert plain["data_parallel_size"] == 1
    long = parse_serving_args(pod_with(command=["vllm", "serve", "m", "--data-parallel-size=4"]))
    assert long["data_parallel_size"] == 4


def test_flags_an_upgrade_removed_are_named_with_their_replacement():
    args = parse_serving_args(
        pod_with(
            image="vllm/vllm-openai:v0.12.0",
            command=["python3", "-m", "vllm.entrypoints.openai.api_server"],
            args=["--model", "meta-llama/Llama-3.1-8B-Instruct", "--disable-log-requests",
                  "--swap-space", "16", "--port", "8000"],
        )
    )  # fmt: skip
    assert args["model"] == "meta-llama/Llama-3.1-8B-Instruct"
    assert args["port"] == 8000
    flags = {r["flag"]: r for r in args["removed_flags"]}
    assert set(flags) == {"--disable-log-requests", "--swap-space"}
    assert flags["--disable-log-requests"]["last_seen"] == "0.12.0"
    assert "--enable-log-requests" in flags["--disable-log-requests"]["instead"]


def test_old_store_boolean_flags_may_carry_true_or_false():
    # vLLM <= 0.8: --enable-chunked-prefill [true|false] (StoreBoolean, nargs="?")
    args = parse_serving_args(
        pod_with(command=["vllm", "serve", "--enable-chunked-prefill", "false", "Qwen/Qwen2-7B"])
    )
    assert args["model"] == "Qwen/Qwen2-7B"


def test_hybrid_kv_cache_manager_switch_and_the_chunked_attention_env_are_read():
    # vLLM 0.33 flag and env var (vllm/envs.py, bool(int(value))): both change what the KV cache
    # keeps for Llama 4's chunked layers
    args = parse_serving_args(
        pod_with(
            command=["vllm", "serve", "meta-llama/Llama-4-Scout-17B-16E-Instruct"],
            args=["--disable-hybrid-kv-cache-manager", "-tp", "4"],
            env=[{"name": "VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE", "value": "0"}],
        )
    )
    assert args["disable_hybrid_kv_cache_manager"] is True
    assert args["allow_chunked_local_attn_hybrid"] is False
    assert args["model"] == "meta-llama/Llama-4-Scout-17B-16E-Instruct"
    # unset: unknown (vLLM's default applies), not False
    plain = parse_serving_args(pod_with(command=["vllm", "serve", "m"]))
    assert plain["disable_hybrid_kv_cache_manager"] is None
    assert plain["allow_chunked_local_attn_hybrid"] is None
