"""Whether a log line comes while the server starts or once it serves: what an entry's
`at_startup` front matter needs (cuda-oom-runtime's is vllm-startup-memory-insufficient: an OOM
before the first request is a model and graphs that do not fit, not a request that was too big).
explain, log-signatures and pod-restarts all ask it here, so the three tell one story.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

# a server starting (vLLM): what it says as it begins to load and launch; read only before the line
# asked about (after it, the same words are the next start's)
STARTING_LINE = re.compile(
    r"Starting to load model|Loading (model )?weights took|Loading safetensors checkpoint shards"
    r"|Model loading took|Memory profiling takes|Capturing (CUDA graphs?|cudagraphs?)"
    r"|Initializing a V1 LLM engine|vLLM API server version"
    r"|(^|[\s$#>])vllm serve [A-Za-z0-9/._~]|vllm\.entrypoints\.openai\.api_server"
    # TGI's launcher starting a shard; Tabby (its CTranslate2 or llama.cpp engine) loading
    r"|text_generation_launcher: Starting shard\b|tabby::serve: .*Starting server, "
    # SGLang's model runner loading and capturing (model_runner.py, cuda_graph_runner.py)
    r"|\] Load weight begin\. |\] Capture (piecewise )?(cuda|CUDA) graph begin\. "
    # KoboldCpp warming its model up before it serves (koboldcpp.py)
    r"|^Starting model warm up, please wait"
)
# ... and what a start-up failure's traceback and wrappers say, before the line or just after it:
# the start-up calls it passes through (PyTorch's `capture_end`: a CUDA graph captured, which
# engines do as they start; `from_engine_args`: the engine being built), the wrappers' words
STARTUP_FAILURE = re.compile(
    r"\bin (load_model|load_weights|profile_run|_dummy_run|_dummy_sampler_run"
    r"|determine_available_memory|determine_num_available_blocks|initialize_kv_cache"
    r"|_initialize_kv_caches|initialize_from_config|capture_model|capture_end"
    r"|initialize_kv_cache_tensors|_allocate_kv_cache_tensors|_allocate_kv_cache"
    r"|_init_cache_engine|from_engine_args|from_vllm_config)\b"
    # the offline `LLM(...)` constructor builds the engine: loads, profiles, sizes the cache
    r"|vllm/entrypoints/llm\.py\", line [0-9]+, in __init__"
    # V1's engine process being built (v1/engine/core.py run_engine_core: the constructor is
    # its start, `run_busy_loop` after it serves), the frame's code line
    r"|engine_core = (DP)?EngineCoreProc\("
    r"|while processing method (load_model|determine_num_available_blocks|initialize_cache"
    r"|determine_available_memory|compile_or_warm_up_model)"
    r"|Engine core initialization failed|Engine process failed to start|EngineCore failed to start"
    # RunPod's worker-vllm (src/engine.py `_initialize_llm`) logs what `from_engine_args` raised
    r"|Error initializing vLLM engine: "
    # TGI's launcher when a shard's process exits before it is ready (launcher/src/main.rs)
    r"|text_generation_launcher: Shard [0-9]+ failed to start|Error: ShardCannotStart"
    # vLLM's V1 model runner warming up with max_num_seqs dummy requests (`_dummy_sampler_run`,
    # `_dummy_pooler_run`), its own words when a paste keeps no frame
    r"|CUDA out of memory occurred when warming up (sampler|pooler)"
    # Triton loading a model: its backend could not create the model's instance
    # (backend_model.cc), whatever the backend (TensorRT-LLM, vLLM, Python); TensorRT-LLM's
    # backend's own words for it (ModelInstanceState::Create), as the model's load error and
    # Triton's model table repeat them
    r"|Failed to create instance: |unexpected error when creating modelInstanceState: "
    # SGLang's scheduler process building its scheduler (run_scheduler_process), the frame's
    # code line: the model runner loads, sizes its memory pool and captures its graphs there
    r"|scheduler = Scheduler\("
    # llama.cpp's server (and llama-box, LocalAI, Ollama's runner) failing to load its model:
    # the context, its KV cache, the weights (common.cpp, server.cpp)
    r"|llama_init_from_model: llama_kv_cache_init\(\) failed|failed to create context with model "
    r"|exiting due to model loading error"
)
# ... of those, the calls that also load weights into an engine that serves (an RL trainer's
# weight update, a wake from sleep): after it served they are no start
RELOAD_CALL = re.compile(r"\bin (load_weights|load_model)\b")
# a Python exception's own line (its class and message), whatever prefix a logger put before it
EXCEPTION_LINE = re.compile(
    r"(^|[\s\]):>])[A-Za-z_][A-Za-z0-9_.]*(Error|Exception|Interrupt|Exit)(:|$)"
)
# a traceback through the engine's serving loop: a step over requests, not a start
SERVING_FRAME = re.compile(
    r"\bin (execute_model|step|step_with_batch_queue|run_busy_loop|_process_engine_step"
    r"|_run_engine)\b"
    # the offline `LLM`'s calls that run requests (its constructor is a start: STARTUP_FAILURE)
    r"|vllm/entrypoints/llm\.py\", line [0-9]+, in (generate|chat|encode|embed|classify|score"
    r"|reward|beam_search)\b"
    # SGLang's scheduler serving (its event loops over batches)
    r"|\bin event_loop_[a-z_]+\b"
)
# an engine's stats line that says tokens were generated, as its logger prints it: vLLM V0/V1
# (`metrics.py:351] Avg prompt throughput: … Avg generation throughput: 77.3 tokens/s`, older
# `llm_engine.py:706] …`, `loggers.py:335] Engine 000: …`) and
# SGLang's decode batch (`Decode batch. #running-req: 4, … gen throughput (token/s): 45.23`)
PROGRESS_LINE = re.compile(
    r"[A-Za-z_]+\.py:[0-9]+\] (Engine [0-9]+: )?Avg prompt throughput: [0-9.]+ tokens/s, "
    r"Avg generation throughput: ([1-9]|0\.[0-9]*[1-9])"
    r"|Decode batch[.,] #running-req: [0-9]+.*gen throughput \(token/s\): ([1-9]|0\.[0-9]*[1-9])"
)
# a server listening: vLLM's API server (uvicorn), Triton once its models are loaded and its
# endpoints listen (grpc_server.cc, http_server.cc), Tabby's
LISTENING = (
    r"Application startup complete|Uvicorn running on|Starting vLLM API server [0-9 ]*on https?://"
    r"|Started (GRPCInferenceService|HTTPService) at |tabby::serve: .*Listening at |🚀 Listening at "
    # SGLang once its warm-up request was answered (http_server.py)
    r"|The server is fired up and ready to roll!"
)
# a request that reached the server: its access line, vLLM's own record of it
REQUEST_SEEN = (
    r"\"POST /[^ \"]{1,200} HTTP/[0-9.]+\" [0-9]{3}|Received request|Added request"
    # llama.cpp's server logging a request it answered (server.cpp log_server_request)
    r"|log_server_r: (done )?request: POST /[^ ]{1,200} [^ ]+ [0-9]{3}"
)
# a server that is up: start-up done and listening, a request answered, tokens generated
# a server announcing that it is up and listening (the end of a start, as against a request served)
UP_LINE = re.compile(
    LISTENING
    # V1's engine core, its start done (offline `LLM` as well as a server)
    + r"|init engine \(profile, create kv cache, warmup model\) took"
    # TGI's router once it reached its shards (router/src/server.rs)
    r"|text_generation_router[a-z_:]*: [^ ]+: Connected\b"
)
SERVING_LINE = re.compile(
    UP_LINE.pattern
    + r"|Available routes are|"
    + REQUEST_SEEN
    + r"|Avg prompt throughput: ([1-9]|0\.[0-9]*[1-9])|"
    + PROGRESS_LINE.pattern
    # the offline `LLM`'s progress bar once a prompt is done (`Processed prompts:   3%|▎ | 60/2000`)
    + r"|Processed prompts: +[0-9]+%[^|]{0,40}\|[^|]{0,40}\| *[1-9][0-9]*/[0-9]+"
)
# the start of a server's life, as vLLM logs it (`vLLM API server version`; from 0.8 the
# arguments it was given, `non-default args: {…}`; older, `args: Namespace(…)`): never a command
# quoted in a prompt or in vLLM's own advice (`Restart vllm serve with …`)
START_OF_LIFE = re.compile(
    r"vLLM API server version [0-9]|\] non-default args: \{|api_server\.py:[0-9]+\] args: Namespace\("
)
# what only a server that came up says: it listens, a request reached it, its stats logger runs
# (an idle `Avg prompt throughput: 0.0 tokens/s` too); a V1 engine core done with its own start
# (UP_LINE's `init engine`) is not yet a server: the API server may still fail
CAME_UP_LINE = re.compile(
    LISTENING + "|" + REQUEST_SEEN + r"|Avg prompt throughput: [0-9.]+ tokens/s"
    # a reply being parsed (vLLM's tool-call parsers): only a server answering says so
    r"|Error in extracting tool call from response|Error trying to handle streaming tool call"
)
# ... and a start that failed: the `vllm serve` command (or `python -m
# vllm.entrypoints.openai.api_server`) ending on an exception, its traceback through the CLI's
# `main` or the module's top level, or vLLM saying its engine never started
START_FAILED_FRAME = re.compile(
    r"vllm/entrypoints/cli/main\.py\", line [0-9]+, in main\b"
    r"|vllm/entrypoints/openai/api_server\.py\", line [0-9]+, in <module>"
)
START_FAILED_LINE = re.compile(
    START_FAILED_FRAME.pattern
    + r"|Engine core initialization failed|Engine process failed to start|EngineCore failed to start"
    r"|Application startup failed"
)
# the command line refusing its arguments (argparse's `PROG: error: …`, exit 2): that start fails
# on the very line, before anything is loaded
COMMAND_REFUSED = re.compile(r"(^|[\s\]])(vllm serve|vllm|api_server\.py): error: ")
# a stop from outside (Ctrl-C; vLLM's own handler of SIGTERM/SIGINT once it serves), not a
# failure, whatever traceback it prints on its way out; the engine core's `trigger received
# signal=SIGTERM` is no such sign: vLLM's API server sends it too, tearing down after a failure
STOP_LINE = re.compile(r"KeyboardInterrupt|\[shutdown\] API server: shutdown triggered|\^C")
# how far a traceback may run from its failing frame to its exception line
TRACEBACK_LINES = 60
# Python chaining the exception on a line to the one raised while handling it: the traceback
# printed next is the call that was running (V0's engine start wraps the worker's OOM), read
# for its outermost call of the engine's
CHAINED = re.compile(
    r"The above exception was the direct cause of the following exception"
    r"|During handling of the above exception, another exception occurred"
)
CHAINED_WITHIN = 3  # lines after the exception line (a blank line between)
# a line of a traceback's body, whatever prefix a collector put before it (`[pod/a/vllm] `,
# `(APIServer pid=1) `, kubectl's or the CRI's timestamps, journald's): a frame, its indented
# code, the carets under it
TRACEBACK_BODY = re.compile(r"File \"|(^|\s)\s{2,}\S|\^{3,}")
# a word of every line SERVING_LINE or STARTING_LINE matches (most lines of a log have none: read
# at the speed of `in`, not of the regexes)
PHASE_WORDS = (
    "startup complete", "Uvicorn", "Available routes", "API server", "POST /", "Received request",
    "Added request", "throughput", "oad", "profiling", "Capturing", "Initializing", "vllm",
    "init engine", "Processed prompts", "Starting shard", "Connected", "Started ", "tabby::serve",
    "Listening at", "Capture ", "fired up", "warm up", "log_server_r",
)  # fmt: skip
# how far after the line a start-up failure's words may come and still be its own (the traceback
# that names `load_model`, a worker's `while processing method load_model`)
AFTER = 50
MAX_SAID = 4096  # distinct lines whose phase is kept while one log is read


def during_startup(lines: Iterable[tuple[int, str]], line: int) -> bool:
    """Whether input line `line` comes while the server starts. The last word before it decides
    (a start-up line: starting; a line that says it is up or served: up); while starting, a
    traceback through the serving loop near it and no start-up call says up after all; once up,
    only the line's own traceback (read whole, to the exception line before it) through a
    start-up call other than a reload of weights (RELOAD_CALL) and no serving call (an engine
    built again) says starting; a traceback chained after the line (`The above exception was the
    direct cause …`) whose outermost engine call is a start-up call makes the line's failure that
    start's; with no word before it, the line's own traceback says (a
    start-up call outside every serving call: starting), else a start-up failure's words near
    it (a worker's `while processing method load_model`, `Engine core initialization failed`)
    and no serving call say starting. `lines` are (number, text) in order; read only as far as
    the answer needs.
    """
    phase = None  # "starting" or "up": the last word before the line
    near_startup = near_serving = False  # traceback words within AFTER lines of it
    # the calls of the traceback that ends at the line (Python prints the frames, then the
    # exception), however long it is; after a server served, only an engine built again (a
    # second `LLM(...)` in a script, another data-parallel engine capturing its graphs) is a
    # start (`own_engine`): `load_weights` then is an update of its weights
    own_startup = own_serving = own_engine = False
    said: dict[str, str | None] = {}  # a line's phase, once per distinct line (idle stats lines)
    chain = None  # the chained traceback after the line: "open", then its outermost engine call
    for number, text in lines:
        if number > line + AFTER:
            break
        if number > line:
            if chain is None and number <= line + CHAINED_WITHIN and CHAINED.search(text):
                chain = "open"
            elif chain == "open" and "File " in text and "vllm/" in text:
                if STARTUP_FAILURE.search(text):
                    chain = "reload" if RELOAD_CALL.search(text) else "engine"
                elif SERVING_FRAME.search(text):
                    chain = "serving"
        if number < line and any(word in text for word in PHASE_WORDS):
            if text in said:
                word = said[text]
            else:
                word = (
                    "up"
                    if SERVING_LINE.search(text)
                    else ("starting" if STARTING_LINE.search(text) else None)
                )
                if len(said) < MAX_SAID:
                    said[text] = word
            phase = word or phase
        near = number >= line - AFTER
        frame = "File " in text
        if near or (number <= line and (frame or "Traceback (most recent" in text)):
            starts, serves = bool(STARTUP_FAILURE.search(text)), bool(SERVING_FRAME.search(text))
            if near:
                near_startup = near_startup or starts
                near_serving = near_serving or serves
            if number > line:
                continue
            if number == line and starts:  # the line itself says it (`Error initializing vLLM
                own_startup = own_engine = True  # engine: CUDA out of memory`): a start
            elif "Traceback (most recent call last)" in text:
                own_startup = own_serving = own_engine = False
            elif frame:  # vLLM's own calls (a script's own `load_model` is none of them)
                ours = "vllm/" in text
                # Python prints the outermost call first: a serving call under a start-up call
                # is the start running the model (V0's `profile_run` calls `execute_model`)
                own_serving = own_serving or (serves and not own_startup)
                own_startup = own_startup or (starts and ours)
                own_engine = own_engine or (starts and ours and not RELOAD_CALL.search(text))
                continue
        if number < line and (own_startup or own_serving) and EXCEPTION_LINE.search(text):
            # an exception line ends the traceback before it (a long one, torch.compile's
            # frames, may start more than AFTER lines above its own exception)
            own_startup = own_serving = own_engine = False
    if chain in ("engine", "reload"):  # raised within a start, whatever the inner frames say
        own_startup, own_serving, own_engine = True, False, chain == "engine"
    if phase == "up":
        return own_engine and not own_serving
    if phase == "starting":
        return near_startup or own_startup or not (near_serving or own_serving)
    if own_startup or own_serving:  # the line's own traceback says
        return own_startup and not own_serving
    return near_startup and not near_serving


def start_failed_after(lines: Iterable[tuple[int, str]], line: int) -> tuple[int, str] | None:
    """The line that says the server's start failed on input line `line`, or None: a
    START_FAILED_LINE after `line` in the same life of the server (a new START_OF_LIFE after
    `line` ends the search), or a START_FAILED_FRAME of the traceback that ends at `line` (Python
    prints the `vllm serve` command's own frames before its exception: the frame, then only the
    traceback's body, TRACEBACK_BODY, up to `line`, within TRACEBACK_LINES); given as the
    exception line that ends that traceback where it is read. Never when that life came up before
    it failed (CAME_UP_LINE, from the life's start to the failure), nor when a stop (STOP_LINE:
    Ctrl-C, vLLM's own signal handler) comes between `line` and the failure or ends the failing
    traceback itself; a Ctrl-C after it (a failed start that hung) is later. The command line
    refusing its arguments (COMMAND_REFUSED) fails that start on the line itself, whatever came
    before (a new command). TRACEBACK_LINES counts `lines`, not input numbers (a pod's lines
    interleaved with another's). `lines` are (number, text) in order: one pod's, one process's
    lines."""
    came_up = False
    frame = None  # a failing frame before `line` (its place among `lines`), in a traceback body
    failed = None  # ... and the failure (its place among `lines`, number, text)
    in_traceback = False  # reading the failing frame's traceback on to its exception line
    for place, (number, text) in enumerate(lines):
        if number < line:
            if START_OF_LIFE.search(text):
                came_up, frame = False, None
            elif CAME_UP_LINE.search(text):
                came_up = True
            elif START_FAILED_FRAME.search(text):
                frame = place
            elif frame is not None and not TRACEBACK_BODY.search(text):
                frame = None  # that traceback ended before `line`: not its own
            continue
        if number == line:
            if CAME_UP_LINE.search(text):  # the error itself says the server was answering
                return None
            if COMMAND_REFUSED.search(text):  # a new command, refused before it started
                return number, text
            if frame is not None and place - frame <= TRACEBACK_LINES:
                failed = (place, number, text)  # the error line ends the failing traceback
            continue
        if failed is None:
            if START_OF_LIFE.search(text) or CAME_UP_LINE.search(text) or STOP_LINE.search(text):
                return None
            if START_FAILED_LINE.search(text):
                failed = (place, number, text)
                in_traceback = bool(START_FAILED_FRAME.search(text))
            continue
        if not in_traceback:
            break
        if place - failed[0] > TRACEBACK_LINES:
            break
        if not TRACEBACK_BODY.search(text):  # the exception that ends the failing traceback
            if STOP_LINE.search(text):
                return None
            failed = (place, number, text)
            break
    return None if came_up or failed is None else failed[1:]


def startup_story(entries: dict, entry_id: str) -> str | None:
    """The entry an entry's `at_startup` names, when it is one of `entries` (and not itself)."""
    entry = entries.get(entry_id)
    named = (getattr(entry, "front_matter", None) or {}).get("at_startup")
    if isinstance(named, str) and named != entry_id and named in entries:
        return named
    return None


def retold_at_startup(
    entries: dict,
    first_lines: dict[str, int],
    lines: Callable[[], Iterable[str]],
    last_lines: dict[str, int] | None = None,
) -> dict[str, str]:
    """For each entry (id → the line of its first match in one log) whose `at_startup` applies:
    the entry whose story it is. `lines()` reads that log again from its start (as far as
    `during_startup` needs: a crash-looping start-up's log is short, a serving one says so early).
    With `last_lines` (id → the line of its last match), only when that line came at start-up
    too: a start that did not fit and then, after a restart, an OOM while serving is the runtime
    OOM's story (the newest failure), not a start-up's.
    """
    retold = {}
    for entry_id, line in first_lines.items():
        story = startup_story(entries, entry_id)
        if story is None or not during_startup(enumerate(lines(), 1), line):
            continue
        last = (last_lines or {}).get(entry_id, line)
        if last == line or during_startup(enumerate(lines(), 1), last):
            retold[entry_id] = story
    return retold
