"""Benchmark the runbook wiki at 10,000 entries: index build, `llmdoctor wiki search`, peak RSS.

Generates a wiki of varied, realistic entries (vLLM / CUDA / NCCL / Kubernetes messages, flags,
Chinese aliases) in a temp folder, then measures whole processes, as an on-call engineer runs them:

* build:  `llmdoctor wiki index --rebuild --wiki DIR` (cold cache), wall time and peak RSS
* search: `llmdoctor wiki search QUERY --wiki DIR` on the warm index, median wall time of several
  runs per query, and the highest peak RSS of any run (os.wait4 rusage of each child)

Targets: build < 10 s, search < 150 ms, peak RSS < 80 MB, and a search at most 2.5x a bare
`python -c pass` of the same interpreter, run interleaved with it (the yardstick moves with the
machine's load). Run it with an installed wheel's interpreter to measure what users run: an
editable install adds its import hook to both sides.

    .venv/bin/python benchmarks/wiki_search.py [--entries 10000] [--runs 9]
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_BUILD_S = 10.0
TARGET_SEARCH_MS = 150.0
TARGET_RSS_MB = 80.0
TARGET_RATIO = 2.5

COMPONENTS = {
    "vllm": ["vllm", "engine", "scheduler", "api-server"],
    "cuda": ["cuda", "gpu", "pytorch", "memory"],
    "nccl": ["nccl", "distributed", "tensor-parallel", "network"],
    "k8s": ["kubernetes", "pod", "scheduling", "kubelet"],
    "driver": ["driver", "nvml", "kernel", "hardware"],
    "gateway": ["gateway", "latency", "http", "timeout"],
    "storage": ["storage", "model-download", "huggingface", "disk"],
}
MESSAGES = {
    "vllm": [
        "ValueError: The model's max seq len ({a}) is larger than the maximum number of tokens "
        "that can be stored in KV cache ({b})",
        "Sequence group {a} is preempted by PreemptionMode.RECOMPUTE mode because there is not "
        "enough KV cache space",
        "AsyncEngineDeadError: Background loop has errored already.",
        "Avg prompt throughput: {a}.0 tokens/s, Running: {b} reqs, Waiting: {c} reqs",
        "No available memory for the cache blocks. Try increasing `gpu_memory_utilization`",
    ],
    "cuda": [
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {a}.00 MiB",
        "RuntimeError: CUDA error: an illegal memory access was encountered",
        "RuntimeError: CUDA error: no kernel image is available for execution on the device",
        "CUDA error: device-side assert triggered",
    ],
    "nccl": [
        "RuntimeError: NCCL error: unhandled system error, NCCL version 2.{a}.3",
        "Watchdog caught collective operation timeout: WorkNCCL(SeqNum={a}, OpType=ALLREDUCE)",
        "NCCL WARN Error while creating shared memory segment /dev/shm/nccl-{a} (size {b})",
        "ncclInternalError: Internal check failed.",
    ],
    "k8s": [
        "0/{a} nodes are available: {b} Insufficient nvidia.com/gpu.",
        "Back-off restarting failed container vllm in pod vllm-{a}",
        "Startup probe failed: Get http://10.0.{a}.{b}:8000/health: connection refused",
        "Last State: Terminated Reason: OOMKilled Exit Code: 137",
    ],
    "driver": [
        "NVRM: Xid (PCI:0000:{a}:00): 79, pid={b}, GPU has fallen off the bus.",
        "Failed to initialize NVML: Driver/library version mismatch",
        "NVRM: Xid (PCI:0000:{a}:00): 119, Timeout waiting for RPC from GSP!",
        "NVRM: Xid (PCI:0000:{a}:00): 48, An uncorrectable double bit error (DBE) has been detected",
    ],
    "gateway": [
        "upstream request timeout after {a}s",
        "504 Gateway Time-out from ingress-nginx for /v1/chat/completions",
        "httpx.ReadTimeout: timed out waiting for first token after {a} ms",
    ],
    "storage": [
        "OSError: We couldn't connect to 'https://huggingface.co' to load this file",
        "huggingface_hub.errors.HfHubHTTPError: 429 Client Error: Too Many Requests",
        "No space left on device while downloading model-{a}-of-{b}.safetensors",
    ],
}
CHINESE = [
    "显存不足",
    "爆显存",
    "排队",
    "请求排队",
    "掉卡",
    "超时",
    "网关超时",
    "驱动版本不匹配",
    "调度失败",
    "内存溢出",
    "模型下载失败",
    "通信超时",
    "卡死",
    "重启循环",
    "首字延迟高",
]
FLAGS = [
    "--gpu-memory-utilization 0.85",
    "--max-model-len 8192",
    "--max-num-seqs 128",
    "--tensor-parallel-size 2",
    "--enforce-eager",
    "--max-num-batched-tokens 4096",
    "--kv-cache-dtype fp8",
    "--swap-space 8",
    "--trust-remote-code",
    "--download-dir /models",
]
NOUNS = [
    "the engine",
    "the worker",
    "the pod",
    "the node",
    "the scheduler",
    "the gateway",
    "the GPU",
    "the driver",
    "the model server",
    "the request queue",
    "the KV cache",
]
VERBS = [
    "stalls",
    "restarts",
    "runs out of memory",
    "times out",
    "drops requests",
    "stops answering",
    "falls behind",
    "reports errors",
    "slows down",
    "crashes",
]
REASONS = [
    "after a driver upgrade",
    "under peak load",
    "with long prompts",
    "when a second process starts",
    "during model load",
    "after a node reboot",
    "with tensor parallelism",
    "when the cache is cold",
    "on the first request",
]


def _sentence(rng: random.Random) -> str:
    return f"{rng.choice(NOUNS).capitalize()} {rng.choice(VERBS)} {rng.choice(REASONS)}."


def make_entry(n: int, rng: random.Random) -> tuple[str, str]:
    """(id, markdown) of one generated entry."""
    group = rng.choice(list(COMPONENTS))
    message = rng.choice(MESSAGES[group]).format(
        a=rng.randint(2, 99999), b=rng.randint(2, 9999), c=rng.randint(2, 999)
    )
    entry_id = f"{group}-{rng.choice(COMPONENTS[group])}-{n:05d}"
    title = f"{rng.choice(NOUNS).capitalize()} {rng.choice(VERBS)} {rng.choice(REASONS)} ({n})"
    tags = [*rng.sample(COMPONENTS[group], 2), group]
    aliases = [*rng.sample(CHINESE, 2), f"incident {n}"]
    words = message.split(":")[0].strip()[:60]
    signature = "".join("\\" + ch if ch in ".()[]{}*+?|^$\\" else ch for ch in words)
    symptom = " ".join(_sentence(rng) for _ in range(rng.randint(2, 5)))
    cause = " ".join(_sentence(rng) for _ in range(rng.randint(2, 4)))
    steps = "\n".join(
        f"{i}. Set `{rng.choice(FLAGS)}` and restart; {_sentence(rng).lower()}"
        for i in range(1, rng.randint(3, 5))
    )
    text = f"""---
id: {entry_id}
title: '{title}'
severity: {rng.choice(["info", "warning", "critical"])}
tags: [{", ".join(tags)}]
aliases: [{", ".join(aliases)}]
signatures:
  - '{signature.replace("'", "''")}'
---
## Symptom
{symptom}

```
{message}
```

## Cause
{cause}

## Fix
{steps}

## Verify
`kubectl logs deploy/vllm --since=1h | grep -c "{words[:30].replace('"', "")}"` returns 0.
"""
    return entry_id, text


def generate_wiki(folder: Path, count: int, seed: int = 7) -> int:
    rng = random.Random(seed)
    total = 0
    for n in range(count):
        entry_id, text = make_entry(n, rng)
        (folder / f"{entry_id}.md").write_text(text, encoding="utf-8")
        total += len(text.encode())
    return total


def run_measured(argv: list[str], env: dict) -> tuple[float, float, int, float]:
    """(wall seconds, peak RSS MiB, exit code, CPU seconds) of one child process."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr.read().decode(errors="replace"))
    proc.stderr.close()
    return wall, usage.ru_maxrss / 1024, proc.returncode, usage.ru_utime + usage.ru_stime


QUERIES = [
    "OOM",
    "显存",
    "preempted",
    "NCCL timeout",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 512.00 MiB",
    "0/8 nodes are available: 8 Insufficient nvidia.com/gpu.",
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=9, help="search runs per query")
    args = parser.parse_args()
    script = Path(sys.executable).with_name("llmdoctor")  # the console script, as users run it
    llmdoctor = [str(script)] if script.exists() else [sys.executable, "-m", "llmdoctor"]
    bare = [sys.executable, "-c", "pass"]
    with tempfile.TemporaryDirectory(prefix="llmdoctor-bench-") as tmp:
        wiki = Path(tmp) / "wiki"
        wiki.mkdir()
        cache = Path(tmp) / "cache"
        env = dict(os.environ, XDG_CACHE_HOME=str(cache), NO_COLOR="1")
        env.pop("LLMDOCTOR_WIKI", None)
        # as installed: with bytecode (pip compiles at install), kept out of the repository
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "pycache")
        started = time.perf_counter()
        size = generate_wiki(wiki, args.entries)
        print(
            f"generated {args.entries} entries ({size / 1e6:.1f} MB) "
            f"in {time.perf_counter() - started:.1f} s"
        )
        warm = Path(tmp) / "warm-up-wiki"
        warm.mkdir()
        run_measured([*llmdoctor, "wiki", "index", "--wiki", str(warm)], env)  # writes bytecode
        load = os.getloadavg()[0]
        build_s, build_rss, rc, build_cpu = run_measured(
            [*llmdoctor, "wiki", "index", "--rebuild", "--wiki", str(wiki)], env
        )
        if rc != 0:
            return rc
        db = max(cache.glob("llmdoctor/wiki-*.sqlite3"), key=lambda p: p.stat().st_size)
        print(
            f"index build: {build_s:.2f} s wall, {build_cpu:.2f} s CPU (target < {TARGET_BUILD_S:.0f} s), peak RSS "
            f"{build_rss:.0f} MB, index {db.stat().st_size / 1e6:.1f} MB"
        )
        run_measured([*llmdoctor, "wiki", "search", "warm-up", "--wiki", str(wiki)], env)
        medians, ratios = [], []
        peak = 0.0
        for query in QUERIES:
            times, cpus, pairs = [], [], []
            for _ in range(args.runs):
                wall, rss, rc, cpu = run_measured(
                    [*llmdoctor, "wiki", "search", query, "--wiki", str(wiki)], env
                )
                if rc != 0:
                    return rc
                yardstick = run_measured(bare, env)[0]
                times.append(wall * 1000)
                cpus.append(cpu * 1000)
                pairs.append(wall / yardstick)
                peak = max(peak, rss)
            medians.append(statistics.median(times))
            ratios.append(statistics.median(pairs))
            print(
                f"  search {query[:48]!r:52} median {medians[-1]:6.1f} ms wall, "
                f"{statistics.median(cpus):6.1f} ms CPU, {ratios[-1]:.2f}x python -c pass"
            )
        worst = max(medians)
        print(
            f"search vs a bare `python -c pass` (interleaved, median of pairs): "
            f"{min(ratios):.2f}-{max(ratios):.2f}x (target <= {TARGET_RATIO}x)"
        )
        print(
            f"search: median per query {min(medians):.0f}-{worst:.0f} ms "
            f"(target < {TARGET_SEARCH_MS:.0f} ms), peak RSS {peak:.0f} MB "
            f"(target < {TARGET_RSS_MB:.0f} MB)"
        )
        print(
            f"machine: {platform.platform()}, {os.cpu_count()} CPUs, Python "
            f"{platform.python_version()}, load average at start {load:.2f}, "
            f"at end {os.getloadavg()[0]:.2f}"
        )
        shutil.rmtree(cache, ignore_errors=True)
        ok = (
            build_s < TARGET_BUILD_S
            and worst < TARGET_SEARCH_MS
            and peak < TARGET_RSS_MB
            and max(ratios) <= TARGET_RATIO
        )
        print("all targets met" if ok else "TARGET MISSED")
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
