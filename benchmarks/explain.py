"""Throughput and peak memory of `llmdoctor explain` on a big log, next to GNU grep -E.

Generates a log in /tmp (deleted afterwards), of one of two shapes:

* `serving` (default, 200 MB): what a busy vLLM server writes: OpenAI API access lines
  (`"POST /v1/chat/completions HTTP/1.1" 200 OK`), the V1 stats line every ten lines (its text
  holds literals of the queue and KV-cache signatures, so it reaches the regexes), and one real
  error line (from tests/fixtures/explain_corpus) in the middle;
* `busy` (200 MB): the serving log of a server under load: its stats line, every ten lines,
  shows 100-600 waiting requests and a 90-100 % KV cache (one line in ten matches a signature
  and a hint);
* `repeated` (200 MB): one error repeated on every line (CUDA OOM, the numbers varying), as a
  crash loop's log or a retrying client writes it;
* `mixed` (500 MB): uvicorn access lines, request logging with prompt text, the stats line
  every 10 s, health/metrics probes, start-up blocks and kernel lines from tests/fixtures/healthy,
  and a few real error lines sprinkled in (one in ~200,000 lines).

Then, in one run:

* `grep -E -c -f signatures.txt LOG` with every built-in runbook signature (one per line);
* `python -m llmdoctor explain --json LOG` (one thread, the default) and with `--jobs 2`;

and prints and records (benchmarks/results/explain-<shape>.json) wall time, CPU time (user + sys:
on a shared machine the fairer figure), MB/s and peak RSS of each, plus the matching-line counts
of both (they must be equal). grep runs in the caller's locale (C.UTF-8 here, as in every figure
in benchmarks/README.md); `LC_ALL=C grep` is timed too, for reference (it skips UTF-8 decoding and
is much faster on lines that match). The log is deleted afterwards.

    .venv/bin/python benchmarks/explain.py                          # serving log, 200 MB
    .venv/bin/python benchmarks/explain.py --shape busy             # a loaded server, 200 MB
    .venv/bin/python benchmarks/explain.py --shape repeated         # one error on every line
    .venv/bin/python benchmarks/explain.py --shape mixed --mb 500   # the mixed log
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEALTHY = ROOT / "tests" / "fixtures" / "healthy"
CORPUS = ROOT / "tests" / "fixtures" / "explain_corpus"
RESULTS = ROOT / "benchmarks" / "results" / "explain-{shape}.json"
ERROR_EVERY = 200_000  # lines between injected error lines, on average

WORDS = (  # noqa: SIM905 (one string reads better)
    "the of and to in is for that you it with on as are be this can how what do your my we "
    "write explain summarize translate code python function error memory list file data model "
    "user please table query test performance server request response cache token timeout "
    "kubernetes pod deploy config value failed result json string number array class method "
    "docker image build run network database index search text answer question example help "
    "why when where which about review bug fix optimize sort parse format date time thanks"
).split()


def prompt_text(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 60)))


def healthy_lines() -> tuple[list[str], list[str]]:
    """(vLLM startup lines, kernel lines) from the healthy fixtures."""
    vllm, kernel = [], []
    for path in sorted(HEALTHY.glob("*")):
        if path.suffix not in (".log", ".txt"):
            continue
        lines = [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
        (kernel if path.name.startswith("kernel") else vllm).extend(lines)
    return vllm, kernel


def error_lines() -> list[str]:
    """Real error lines from the explain corpus (the last line of each failure excerpt; the
    `_healthy/` and `_unknown/` folders are not failures an entry explains).
    """
    out = []
    for path in sorted(CORPUS.glob("*/*.log")):
        if path.parent.name.startswith("_"):
            continue
        lines = [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
        if lines:
            out.append(lines[-1])
    return out or ["torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB."]


def write_log(path: Path, size_bytes: int, seed: int = 7) -> dict:
    """Write a synthetic but realistic vLLM pod log of about `size_bytes`; return its stats."""
    rng = random.Random(seed)
    startup, kernel = healthy_lines()
    errors = error_lines()
    prompts = [prompt_text(rng) for _ in range(5000)]
    pid = 1671
    t = 1_757_000_000.0
    next_stats = t
    written = lines = injected = 0
    buf: list[str] = []
    with open(path, "w", encoding="utf-8") as out:
        while written < size_bytes:
            t += rng.expovariate(25.0)
            stamp = time.strftime("%m-%d %H:%M:%S", time.gmtime(t))
            ip = f"10.244.{rng.randint(0, 40)}.{rng.randint(2, 250)}:{rng.randint(30000, 60999)}"
            rid = f"chatcmpl-{rng.getrandbits(128):032x}"
            roll = rng.random()
            if t >= next_stats:
                next_stats = t + 10
                run, wait = rng.randint(0, 120), rng.choice((0, 0, 0, 1, 3, 12))
                kv = rng.uniform(0, 80)
                batch = [
                    f"(APIServer pid={pid}) INFO {stamp} [loggers.py:123] Engine 000: Avg prompt "
                    f"throughput: {rng.uniform(0, 9000):.1f} tokens/s, Avg generation throughput: "
                    f"{rng.uniform(0, 2000):.1f} tokens/s, Running: {run} reqs, Waiting: {wait} "
                    f"reqs, GPU KV cache usage: {kv:.1f}%, Prefix cache hit rate: "
                    f"{rng.uniform(0, 60):.1f}%"
                ]
            elif roll < 0.30:
                tokens = rng.randint(20, 4000)
                batch = [
                    f"(APIServer pid={pid}) INFO {stamp} [logger.py:41] Received request {rid}: "
                    f"prompt: '<|im_start|>user\\n{rng.choice(prompts)}<|im_end|>\\n"
                    f"<|im_start|>assistant\\n', params: SamplingParams(n=1, presence_penalty=0.0, "
                    f"frequency_penalty=0.0, repetition_penalty=1.05, temperature=0.7, top_p=0.8, "
                    f"top_k=20, min_p=0.0, seed=None, stop=[], stop_token_ids=[], "
                    f"max_tokens={tokens}, min_tokens=0, logprobs=None, "
                    f"skip_special_tokens=True), prompt_token_ids: None, prompt_embeds shape: "
                    f"None, lora_request: None.",
                    f"(APIServer pid={pid}) INFO {stamp} [async_llm.py:273] Added request {rid}.",
                ]
            elif roll < 0.93:
                route = rng.choice(("/v1/chat/completions",) * 8 + ("/v1/completions",))
                batch = [f'(APIServer pid={pid}) INFO:     {ip} - "POST {route} HTTP/1.1" 200 OK']
            elif roll < 0.985:
                route = rng.choice(("/health", "/metrics", "/v1/models"))
                batch = [f'(APIServer pid={pid}) INFO:     {ip} - "GET {route} HTTP/1.1" 200 OK']
            elif roll < 0.998:
                batch = [rng.choice(kernel)]
            else:
                start = rng.randrange(len(startup))
                batch = startup[start : start + rng.randint(1, 30)]
            if rng.random() < len(batch) / ERROR_EVERY:
                batch.append(rng.choice(errors))
                injected += 1
            buf.extend(batch)
            if len(buf) > 4096:
                text = "\n".join(buf) + "\n"
                out.write(text)
                written += len(text.encode("utf-8"))
                lines += len(buf)
                buf = []
        if buf:
            text = "\n".join(buf) + "\n"
            out.write(text)
            written += len(text.encode("utf-8"))
            lines += len(buf)
    return {"bytes": written, "lines": lines, "errors_injected": injected}


def write_serving_log(path: Path, size_bytes: int, seed: int = 7) -> dict:
    """A busy server's log: access lines, a stats line every ten lines, one real error line in
    the middle; about `size_bytes`.
    """
    rng = random.Random(seed)
    error = error_lines()[0]
    pid = 1671
    access = [
        f"(APIServer pid={pid}) INFO:     10.244.{rng.randint(0, 40)}.{rng.randint(2, 250)}:"
        f'{rng.randint(30000, 60999)} - "POST /v1/chat/completions HTTP/1.1" 200 OK'
        for _ in range(5000)
    ]
    stats = [
        f"(APIServer pid={pid}) INFO 09-0{d} {h:02d}:{m:02d}:{sec:02d} [loggers.py:123] Engine 000: "
        f"Avg prompt throughput: {rng.uniform(0, 9000):.1f} tokens/s, Avg generation throughput: "
        f"{rng.uniform(0, 2000):.1f} tokens/s, Running: {rng.randint(0, 120)} reqs, Waiting: "
        f"{rng.choice((0, 0, 0, 1, 3, 12))} reqs, GPU KV cache usage: {rng.uniform(0, 80):.1f}%, "
        f"Prefix cache hit rate: {rng.uniform(0, 60):.1f}%"
        for d, h, m, sec in (
            (rng.randint(1, 9), rng.randint(0, 23), rng.randint(0, 59), rng.randint(0, 59))
            for _ in range(2000)
        )
    ]
    written = lines = 0
    injected = False
    with open(path, "w", encoding="utf-8") as out:
        while written < size_bytes:
            batch = [*rng.choices(access, k=9), rng.choice(stats)]
            if not injected and written >= size_bytes // 2:
                batch.append(error)
                injected = True
            text = "\n".join(batch) + "\n"
            out.write(text)
            written += len(text.encode("utf-8"))
            lines += len(batch)
    return {"bytes": written, "lines": lines, "errors_injected": int(injected)}


def write_busy_log(path: Path, size_bytes: int, seed: int = 7) -> dict:
    """A loaded server's log: access lines and, every ten lines, a stats line with 100-600
    waiting requests and a 90-100 % KV cache (queue-saturation's signature, a KV-cache hint).
    """
    rng = random.Random(seed)
    access = [
        f"(APIServer pid=1671) INFO:     10.244.{rng.randint(0, 40)}.{rng.randint(2, 250)}:"
        f'{rng.randint(30000, 60999)} - "POST /v1/chat/completions HTTP/1.1" 200 OK'
        for _ in range(5000)
    ]
    written = lines = 0
    with open(path, "w", encoding="utf-8") as out:
        while written < size_bytes:
            stats = (
                f"(APIServer pid=1671) INFO 09-03 {rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}"
                f":{rng.randint(0, 59):02d} [loggers.py:123] Engine 000: Avg prompt throughput: "
                f"{rng.uniform(0, 9000):.1f} tokens/s, Avg generation throughput: "
                f"{rng.uniform(0, 2000):.1f} tokens/s, Running: {rng.randint(60, 256)} reqs, "
                f"Waiting: {rng.randint(100, 600)} reqs, GPU KV cache usage: "
                f"{rng.uniform(90, 100):.1f}%, Prefix cache hit rate: {rng.uniform(0, 60):.1f}%"
            )
            batch = [*rng.choices(access, k=9), stats]
            text = "\n".join(batch) + "\n"
            out.write(text)
            written += len(text.encode("utf-8"))
            lines += len(batch)
    return {"bytes": written, "lines": lines, "errors_injected": lines // 10}


def write_repeated_log(path: Path, size_bytes: int, seed: int = 7) -> dict:
    """One error on every line (PyTorch's CUDA OOM message, its numbers varying)."""
    rng = random.Random(seed)
    written = lines = 0
    with open(path, "w", encoding="utf-8") as out:
        while written < size_bytes:
            batch = [
                f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
                f"{rng.randint(20, 900)}.00 MiB. GPU 0 has a total capacity of 79.15 GiB of which "
                f"{rng.randint(1, 99)}.00 MiB is free. Process {rng.randint(100, 9999)} has "
                f"79.06 GiB memory in use."
                for _ in range(1000)
            ]
            text = "\n".join(batch) + "\n"
            out.write(text)
            written += len(text.encode("utf-8"))
            lines += len(batch)
    return {"bytes": written, "lines": lines, "errors_injected": lines}


WRITERS = {
    "serving": write_serving_log,
    "busy": write_busy_log,
    "repeated": write_repeated_log,
    "mixed": write_log,
}


def _tree_rss(root: int) -> int:
    """Resident bytes of a process and all its descendants, from /proc (0 when gone)."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid, ppid = int(entry), int(fields[1])
        children.setdefault(ppid, []).append(pid)
        rss[pid] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo += children.get(pid, [])
    return total


def run_measured(
    cmd: list[str], env: dict | None = None, cwd: Path | None = None
) -> tuple[float, int, int, str, float]:
    """(wall seconds, peak RSS of the largest process, peak RSS of the process tree summed,
    stdout, CPU seconds: user + sys of the command and its children) of a command."""
    import threading

    start = time.perf_counter()
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=cwd
    )
    peak_tree = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak_tree
        while not done.is_set():
            peak_tree = max(peak_tree, _tree_rss(proc.pid))
            done.wait(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out = proc.stdout.read() if proc.stdout else b""
    _, _status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    done.set()
    sampler.join()
    proc.returncode = 0
    cpu = usage.ru_utime + usage.ru_stime
    return wall, usage.ru_maxrss * 1024, peak_tree, out.decode("utf-8", errors="replace"), cpu


def runbooks_read_in(tree: Path) -> str:
    """The folder of built-in runbooks `python -m llmdoctor` reads when run in `tree`: an
    editable install maps `llmdoctor.builtin_runbooks` to its own checkout wherever it runs."""
    code = "import llmdoctor.builtin_runbooks as b; print(list(b.__path__)[0])"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tree, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def best_of(runs: int, cmd: list[str], env: dict | None = None) -> tuple:
    """The fastest of `runs` runs (the machine may be shared), with the largest memory seen:
    (wall, peak RSS, peak tree RSS, stdout, least CPU seconds)."""
    results = [run_measured(cmd, env) for _ in range(runs)]
    fastest = min(results, key=lambda r: r[0])
    return (
        fastest[0],
        max(r[1] for r in results),
        max(r[2] for r in results),
        fastest[3],
        min(r[4] for r in results),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=tuple(WRITERS), default="serving")
    parser.add_argument("--mb", type=int, help="log size in MB (500 mixed, 200 the others)")
    parser.add_argument("--keep", action="store_true", help="keep the generated log")
    parser.add_argument("--no-record", action="store_true", help="do not write results json")
    parser.add_argument("--runs", type=int, default=2, help="runs of each tool; the best counts")
    parser.add_argument(
        "--compare",
        type=Path,
        help="another checkout (e.g. `git archive COMMIT | tar -x -C DIR`): its explain is run "
        "on the same log, alternately with this tree's, and recorded as explain_compare",
    )
    args = parser.parse_args(argv)

    sys.path.insert(0, str(ROOT))
    from llmdoctor.wiki.library import load_library

    entries = load_library().entries
    # explain scans an entry's hints with its signatures: grep gets both
    signatures = [s for e in entries.values() for s in [*e.signatures, *e.hints]]
    workdir = Path(tempfile.mkdtemp(prefix="llmdoctor-bench-", dir="/tmp"))
    log = workdir / "vllm-big.log"
    patterns = workdir / "signatures.txt"
    patterns.write_text("\n".join(signatures) + "\n", encoding="utf-8")
    try:
        t0 = time.perf_counter()
        mb = args.mb or (500 if args.shape == "mixed" else 200)
        writer = WRITERS[args.shape]
        stats = writer(log, mb * 1_000_000)
        gen_s = time.perf_counter() - t0
        size_mb = stats["bytes"] / 1e6
        print(
            f"generated {size_mb:.0f} MB, {stats['lines']:,} lines in {gen_s:.0f}s "
            f"({stats['errors_injected']} error lines injected)"
        )
        subprocess.run(["cat", str(log)], stdout=subprocess.DEVNULL, check=True)  # warm cache
        # bytecode as an installed llmdoctor has it (pip compiles it; with
        # PYTHONDONTWRITEBYTECODE set, every run would compile the sources again)
        for tree in [ROOT, *([args.compare] if args.compare else [])]:
            subprocess.run(
                [sys.executable, "-m", "compileall", "-q", str(tree / "llmdoctor")],
                stdout=subprocess.DEVNULL,
                check=True,
            )

        grep_cmd = ["grep", "-E", "-c", "-f", str(patterns), str(log)]
        grep_s, grep_rss, _, grep_out, grep_cpu = best_of(args.runs, grep_cmd)
        grep_lines = int(grep_out.strip() or 0)
        c_grep_s, _, _, _, c_grep_cpu = best_of(args.runs, grep_cmd, {**os.environ, "LC_ALL": "C"})
        cmd = [sys.executable, "-m", "llmdoctor", "explain", "--json", "--limit", "100", str(log)]
        compare = []
        if args.compare:  # alternately: the other tree's run, then this tree's
            # each tree keeps its derived values (llmdoctor/wiki/derived_cache.py) in a cache
            # folder of its own: in one folder, each run would find the other's and work its
            # own out again (~70 ms); one untimed run of each fills them
            other = {**os.environ, "XDG_CACHE_HOME": str(workdir / "cache-compare")}
            compare_runbooks = runbooks_read_in(args.compare.resolve())
            if not Path(compare_runbooks).resolve().is_relative_to(args.compare.resolve()):
                print(
                    f"note: {args.compare} reads the runbooks of {compare_runbooks} (this "
                    "environment installs the project editable): code is compared, not knowledge"
                )
            run_measured(cmd, other, cwd=args.compare.resolve())
            run_measured(cmd, cwd=ROOT)
            for _ in range(args.runs):
                compare.append(run_measured(cmd, other, cwd=args.compare.resolve()))
                compare.append(run_measured(cmd, cwd=ROOT))
        explain_s, explain_rss, explain_tree, explain_out, explain_cpu = best_of(args.runs, cmd)
        explain_lines = json.loads(explain_out)["matched_lines"]
        threads = best_of(args.runs, [*cmd[:-1], "--jobs", "2", str(log)])
        threads_s, threads_rss = threads[0], threads[1]
    finally:
        if not args.keep:
            for p in (log, patterns):
                p.unlink(missing_ok=True)
            shutil.rmtree(workdir / "cache-compare", ignore_errors=True)
            if not any(workdir.iterdir()):
                workdir.rmdir()

    record = {
        "shape": args.shape,
        "log_mb": round(size_mb, 1),
        "lines": stats["lines"],
        "signatures": len(signatures),
        "grep": {
            "seconds": round(grep_s, 2),
            "cpu_seconds": round(grep_cpu, 2),
            "mb_per_s": round(size_mb / grep_s, 1),
            "peak_rss_mb": round(grep_rss / 1e6, 1),
            "matching_lines": grep_lines,
            "locale": os.environ.get("LC_ALL") or os.environ.get("LANG", ""),
        },
        "grep_lc_all_c": {"seconds": round(c_grep_s, 2), "cpu_seconds": round(c_grep_cpu, 2)},
        "explain": {
            "seconds": round(explain_s, 2),
            "cpu_seconds": round(explain_cpu, 2),
            "mb_per_s": round(size_mb / explain_s, 1),
            "peak_rss_mb": round(explain_rss / 1e6, 1),
            "peak_rss_all_processes_mb": round(explain_tree / 1e6, 1),
            "matching_lines": explain_lines,
        },
        "explain_2_threads": {
            "seconds": round(threads_s, 2),
            "mb_per_s": round(size_mb / threads_s, 1),
            "peak_rss_mb": round(threads_rss / 1e6, 1),
        },
        "explain_compare": {
            "tree": str(args.compare),
            "runbooks": compare_runbooks,
            "cpu_seconds": round(min(r[4] for r in compare[0::2]), 2),
            "this_tree_cpu_seconds": round(min(r[4] for r in compare[1::2]), 2),
            "matching_lines": json.loads(compare[0][3])["matched_lines"],
        }
        if compare
        else None,
        "ratio_explain_to_grep": round(grep_s / explain_s, 2),
        "ratio_explain_to_grep_cpu": round(grep_cpu / max(explain_cpu, 0.01), 2),
        "ratio_explain_to_c_locale_grep_cpu": round(c_grep_cpu / max(explain_cpu, 0.01), 2),
        "ratio_2_threads_to_grep": round(grep_s / threads_s, 2),
        "runs": args.runs,
        "bytecode_compiled": True,
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "machine": platform.machine(),
    }
    print(json.dumps(record, indent=2))
    if grep_lines != explain_lines:
        print(f"MISMATCH: grep found {grep_lines} matching lines, explain {explain_lines}")
    if not args.no_record:
        results = Path(str(RESULTS).format(shape=args.shape))
        results.parent.mkdir(parents=True, exist_ok=True)
        results.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        print(f"recorded in {results.relative_to(ROOT)}")
    return 0 if grep_lines == explain_lines else 1


if __name__ == "__main__":
    raise SystemExit(main())
