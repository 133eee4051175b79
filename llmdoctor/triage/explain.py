"""Triage any log: which runbook entries explain it, best first, each with a confidence.

The input (a pasted stack trace, a `kubectl describe` block, dmesg, or a 2 GB log) is streamed
once through the entries' signatures and the salient-line patterns (llmdoctor.wiki.signatures, RE2),
keeping per entry only a count, the most specific signature that fired and a few first and last
matching lines, so memory stays flat whatever the size. A paste or small file is cleaned first
(llmdoctor.triage.pasted: colour codes, HTML entities, compose prefixes, hard wraps).

One ranking fuses the evidence (`fuse`), as data rather than special cases:

* a signature hit, weighted by how specific the signature is (literal text it pins down); an
  entry's hints and a signature that is one short word (`^Killed$`) are weak evidence, never a
  signature match alone;
* the text relevance of the salient lines to each entry (`text_relevance`: the wiki search's
  ranking and the share of the error's informative words the entry holds);
* the cause graph (every entry's `explains:` front matter, llmdoctor.wiki.cause_graph): a
  consequence ranks just below its cause;
* recency: the later of two otherwise equal entries first.

A signature hit always ranks above a text-only match; text-only matches keep the wiki search's
order, so explain never ranks worse than `wiki search` of the same text. A text-only match is at
most TEXT_ONLY confident, below CONFIDENT: an error's words alone never name an entry; with a hint
of that entry on an error line it may, as a warning at most. When no match reaches CONFIDENT
explain abstains:
it returns the salient lines, and names the closest entries only as too weak to be sure of
(`below_threshold`). When the entry named first is a consequence (another entry explains it), the
first error line before its first matching line is given as its likely cause (`likely_cause`),
whether or not an entry names that line. A text-only match also stays a guess when the input
states HTTP error statuses its entry's title does not name, or holds no word naming the entry; a
configuration warning in an input with no error line (a speed setting's also beside an exception
raised where nothing says the server was slow) is a note (`notes`), never a match. No
typer or rich here: the command renders.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from types import SimpleNamespace
from typing import Any, BinaryIO

from llmdoctor.engine.textsource import TextSource, split_log_lines
from llmdoctor.lazy_regex import compiled
from llmdoctor.parsers.xid import parse_xid_line
from llmdoctor.triage.cut_traceback import FRAME, ends_inside_traceback
from llmdoctor.triage.describe_text import last_state_of, pod_not_ready
from llmdoctor.triage.line_time import written_after
from llmdoctor.triage.other_engine import engine_of, their_flags
from llmdoctor.triage.pasted import (
    RecordLines,
    clean_lines,
    compose_services,
    looks_like_records,
)
from llmdoctor.wiki.cause_graph import CauseGraph
from llmdoctor.wiki.holding import holding_patterns, unusable_holding_patterns
from llmdoctor.wiki.links import page_url
from llmdoctor.wiki.request_log import not_server_output, request_log
from llmdoctor.wiki.server_phase import (
    PHASE_WORDS,
    PROGRESS_LINE,
    STARTING_LINE,
    UP_LINE,
    during_startup,
    start_failed_after,
    startup_story,
)
from llmdoctor.wiki.signatures import (
    TAIL_PASSED_OVER,
    BlockKinds,
    LineMatch,
    ScanStats,
    SignatureSet,
)

# an access log's error status: what the clients got (Uvicorn's `"POST … HTTP/1.1" 503 Service
# Unavailable`), read by its reason phrase (a digit-blind pattern: a crash loop's lines are still
# matched once per shape). Shown as a line that looks wrong; on its own it names no entry (any
# wrong route answers 404). `400 Bad Request` is salient already
ACCESS_ERROR = (
    r'HTTP/[0-9.]+" [0-9]+ (Internal Server Error|Service Unavailable|Bad Gateway|Gateway Timeout'
    r"|Not Found|Unauthorized|Forbidden|Too Many Requests)"
)
# Lines worth reading: errors, and also what people paste that says why without "error" in it
# (capability warnings, kills and exit codes, kubectl describe's Events and Last State).
SALIENT_PATTERNS = (
    r"Traceback \(most recent call last\)",
    # (an exception class may carry a suffix: pynvml's `NVMLError_InvalidArgument: …`; not a
    # name that goes on in lower case, `cudaError_t`, `retryOnError_enabled:`)
    r"[A-Za-z](Error|Exception|Interrupt|Exit)(_[A-Z][A-Za-z0-9]*)?(:|$| )",
    r"\bError:",  # Go and Rust programs, Node, TGI's launcher: `Error: ShardCannotStart`
    r"(FATAL|CRITICAL|ERROR|PANIC)",
    r"[Ff]atal",
    r"[Pp]anic",
    r" error",
    r"error:",
    r"[Ff]ailed",
    r"[Ff]ailure",
    r"[Kk]illed",
    r"[Tt]imed out",
    r"[Tt]imeout",
    r"[Rr]efused",
    r"[Dd]enied",
    r"[Uu]nable to",
    r"[Cc]annot ",
    r"[Cc]ould not",
    r"[Cc]ouldn't",
    r"not found",
    r"not supported",
    r"(doesn't|does not|don't|do not) support",
    r"[Uu]nsupported",
    r"[Ff]alling back",
    r"[Ii]nsufficient",
    r"[Ii]nvalid",
    r"BackOff",
    r"Back-off",
    r"Warning  ",
    r"Xid",
    r"Segmentation fault",
    r"[Bb]us error",
    r"core dumped",
    r"[Ee]xit [Cc]ode",
    r"exit code",
    r"exited with",
    r"[Ss]ignal [0-9]+",
    r"SIG(KILL|SEGV|TERM|BUS|ABRT|ILL|FPE)",
    r"Reason: +[A-Z][A-Za-z]+|State: +(Waiting|Terminated)",  # a container Running is no error
    r"[Ee]xpired",
    r"[Cc]rash",
    r"[Aa]borted",
    r"[Ss]tuck",
    r"OOM",
    r"oom[-_]kill",
    r"[Oo]ut of memory",
    r"#queue-req: [1-9]",
    # limits and stalls said without an error word (HTTP error bodies, NCCL warnings, queues)
    r"[Ee]xceed",
    r"(longer|larger|greater) than",
    r"[Tt]oo (long|large|many|old)",
    r"Bad Request",
    ACCESS_ERROR,
    r"\"object\": ?\"error\"",
    r" WARN ",
    r"[Nn]o available",
    r"(Status|Phase): +Pending",
    r"FailedScheduling",
    r"[0-9]+/[0-9]+ nodes are available",  # the scheduler's message, pasted without its event
    r"Waiting: [1-9][0-9]+ reqs",
    # a full KV cache is an error only with requests kept waiting: a busy healthy server runs at
    # 90 % (vLLM V0/V1 stats lines; SGLang's queue is `#queue-req` above)
    r"(Waiting|Pending|Swapped): [1-9][0-9]* reqs.*KV cache usage: (8[5-9]|9[0-9]|100)\.",
    # nvidia-smi -q's uncorrectable ECC and row-remap counts when they are not 0 (NEGATIVE_FIELD)
    r"[Uu]ncorrectable[A-Za-z ]* +: ",
)
# a line that gives advice ("If you are running out of memory, consider ...") is not an error,
# unless it is an exception raised with the advice in its message (transformers' `ValueError: …
# If you want to dispatch the model on the CPU …, you need to set …`) or what comes before its
# `If you` reads as an error (logged at ERROR, llama.cpp's `error: …`): `_advice`
ADVICE = re.compile(r"\b[Ii]f you\b.*\b(consider|try|please|set|use)\b")
RAISED_WITH_MESSAGE = re.compile(r"\b[A-Za-z_][A-Za-z0-9_]*(Error|Exception): ")


def _advice(text: str) -> bool:
    """Whether a line is advice: `If you …` with nothing before it that reads as an error (a
    logged ERROR, `error: …`, an exception raised with the advice in its message)."""
    if "f you" not in text or (found := ADVICE.search(text)) is None:
        return False
    if RAISED_WITH_MESSAGE.search(text):
        return False
    return not _salient_set().match_line(text[: found.start()])


# a probe's settings as `kubectl describe` prints them (`Readiness:  http-get http://:8000/health
# delay=0s timeout=1s period=10s #success=1 #failure=3`): its timeout and failure threshold are
# settings, the line no error
PROBE_SETTINGS = re.compile(
    r"^\s*(Liveness|Readiness|Startup):\s+(http-get|exec|tcp-socket|grpc)\b.* delay=[0-9]+s "
    r"timeout=[0-9]+s period=[0-9]+s"
    # ... and the same fields as `-o yaml` / `-o json` print them (`timeoutSeconds: 1`)
    r"|^\s*\"?(timeoutSeconds|failureThreshold|periodSeconds|successThreshold|"
    r"initialDelaySeconds)\"?: *[0-9]+,?\s*$"
)
# the salient patterns that describe rather than report: a line the server logged at INFO or
# DEBUG on which only these fire is it telling what it does (vLLM-Gaudi's `Triton is installed
# but 0 active driver(s) found (expected 1). Disabling Triton to prevent runtime errors`, a
# backend `not supported … falling back` to another, vLLM's wait `No available shared memory
# broadcast block found in 60 seconds`), not an error line; `failed`, `cannot`,
# `timeout`, a status, an exit code, a kill or an exception name still are at any level
PROSE_ONLY = frozenset(
    {
        " error", "[Ff]alling back", "not supported", "(doesn't|does not|don't|do not) support",
        "[Uu]nsupported", "[Nn]o available",
    }
)  # fmt: skip
# nor is a status field that says "nothing": nvidia-smi -q's `Remapping Failure Occurred : No`,
# -q -x's `<sram_threshold_exceeded>N/A</sram_threshold_exceeded>`, describe's `Exit Code: 0`
NOTHING = r"(No|None|N/A|0|False|Disabled)"
# a timeout named as a setting (`'shutdown_timeout': 300`, `timeout=300s`), as an INFO line lists
# its arguments or a drain's budget: no timeout happened
TIMEOUT = re.compile(r"[Tt]imeout")
TIMEOUT_SETTING = re.compile(r"_[Tt]imeout|[Tt]imeout(_|=|['\"]:)")
# ... unless the line says it ran out (`did not exit within timeout=300s, force killing`)
TIMEOUT_RAN_OUT = re.compile(
    r"[Dd]id not|didn't|[Ee]xpire|[Aa]bort|[Ff]orc(e|ing)|[Kk]ill|[Ee]xceed|[Ee]nded|[Ee]lapsed|[Rr]eached"
)
_FIELD = r"^\s*(<[A-Za-z_]+>\s*{0}\s*</[A-Za-z_]+>|[A-Za-z][A-Za-z0-9 _()/-]*:\s*{0})\s*$"
NEGATIVE_FIELD = re.compile(_FIELD.format(NOTHING))
# the same with any digit for the 0: it matches a line's shape (digits written 0, as a LineKind
# gives it) whenever NEGATIVE_FIELD matches one of the lines of that shape
MAYBE_NEGATIVE_FIELD = re.compile(_FIELD.format(NOTHING.replace("|0|", "|[0-9]|")))
SALIENT_ID = "\x00salient"
FIRST, LAST = 3, 2  # evidence lines kept per entry
SALIENT_KEPT = 40  # salient lines kept (the last ones: the end of a log explains it)
QUERY_LINES = 16  # salient lines used as the search query
WHOLE_QUERY_CHARS = 32 * 1024  # a paste this short is searched whole, as `wiki search` would
CLEAN_BYTES = 8 * 1024 * 1024  # a file this small is read whole and cleaned like a paste
SNIFF = 64 * 1024  # a bigger log whose first lines here are JSON records is read as records
MAX_TEXT = 2000  # characters of one evidence line kept
SEVERITY_RANK = {"critical": 3, "warning": 2, "info": 1}

# How the evidence is fused into one confidence in [0, 1] (tuned on the `tune` half only).
# A signature hit always ranks above a text-only match: [SIGNATURE_BASE, 1] against
# [0, TEXT_ONLY], TEXT_ONLY <= SIGNATURE_BASE.
SPECIFIC_CHARS = 30  # a signature pinning this many literal characters is fully specific
SIGNATURE_BASE = 0.5  # a signature hit, however weak
SIGNATURE_SPECIFIC = 0.3  # ... plus this much for a fully specific signature
SIGNATURE_TEXT = 0.15  # ... plus this much for text that agrees
RECENCY = 0.05  # the later of two otherwise equal entries ranks first
# The most a text-only match can reach: just below CONFIDENT, so the words of an error alone
# never name an entry; a hint on an error line that agrees with them can (HINT_TEXT_FLOOR). On
# the blind rounds since 14 (gathered from reports no project file cites) text-only answers had
# been right 6 times in 14; with this ceiling the pooled independent gate of
# benchmarks/explain_calibrate.py reaches 95.4 % precision (was 93.5 %) and 94 % abstention on
# uncovered errors (89 %), for 76.2 % coverage (79.4 %): the closest guess is still shown, as
# too weak to be sure of (benchmarks/README.md, 2026-12-05).
TEXT_ONLY = 0.29
# How sure a text-only match is, within that ceiling: the entry holds most of the error's
# informative words (coverage, rarity-weighted) AND the search found much of its text (its
# score, times its lead over the runner-up for the first entry): coverage x score at
# TEXT_EVIDENCE counts as full. Generic errors ("Connection refused") that an entry merely
# mentions score low on all.
TEXT_EVIDENCE = 30.0
LEAD_POWER = 1.0  # how much the first entry's lead over the second adds to its score
LEAD_CAP = 3.0  # ... counted up to this ratio
# A paste of fewer informative words than this (a bare `Exit Code: 137`, which a liveness-probe
# kill prints as well as an OOM kill) scales its text-only evidence down: a guess, not a match.
FEW_WORDS = 4
PLACE_POWER = 0.5  # a text-only match lower in the search's ranking is less likely
CONFIDENT = 0.3  # below this, explain abstains ("no entry explains this")
NO_ERROR_GUESS = 0.1  # the most a text-only match gets when no line of the input looks wrong
MAYBE_SEVERITY = "warning"  # a text-only match is at most a warning, shown as MAYBE
# A weak signature (an entry's hint, or one short word: SignatureSet.weak) fires on lines that do
# not prove the cause (`exited with code 137` follows any SIGKILL). Its hit is no signature
# match: it adds WEAK_HIT to the entry's text-only confidence, up to WEAK_CEILING, below
# CONFIDENT: the closest guess, never named on its word (the text that agrees with it is mostly
# the very line it matched).
WEAK_HIT = 0.2
WEAK_CEILING = 0.29
HINT_OFF_ERROR = 0.5  # a hint on a line that is no error line (a pasted command) counts half
# A hinted entry whose text-only confidence alone reaches this, the hint on an error line, is no
# longer held below CONFIDENT (two pieces of evidence: the error's words and the hint); 1.0 would
# be never. 0.2 was chosen by
# benchmarks/explain_calibrate.py (the most coverage at >= 95 % precision, 0 healthy alarms, on
# the tune half's independent excerpts); every other number kept its value there.
HINT_TEXT_FLOOR = 0.2
# ... and whose text alone reaches this, the hint on a line that states an error at ERROR level
# or above (ERROR_LINE: `ERROR`, `FATAL`, an exception, `Error:`, `Killed`), is lifted even when
# that line is the input's only error line: a stated error that a hint names and whose words
# fit the entry (a vLLM wrapper's `RuntimeError: Engine core initialization failed`), as
# against a WARNING or INFO line a hint fires on (vLLM's shared-memory broadcast wait, printed
# by slow healthy start-ups). 1.0 = never; 0.1 named one more right answer on each of fresh
# rounds 6, 7 and 8 and no wrong one (benchmarks/explain_calibrate.py, each round left out).
HINT_STATED_FLOOR = 0.1
# a hint that says the process was SIGKILLed (the shell's `Killed`), on the input's last line, a
# few lines after a line of loading (weights, checkpoint shards) and with no other error line
# (`_killed_while_loading`): the process was killed as it loaded, which the kernel's OOM killer
# does far more often than anything else; this much, enough to name it, as a warning (the kill
# is stated, the reason is not)
KILLED_LOADING = 0.35
KILLED_LINE = re.compile(r"\b[Kk]illed\b|\bsignal 9\b|exited with code 137\b|exitcode: -9\b")
LOADING_WITHIN = 5  # lines before the kill that may still be the loading (vLLM's backend lines)
LOADING_LINE = re.compile(
    r"\b[Ll]oading\b|[Cc]heckpoint shards|\bfrom weights\b|Starting to load model"
)
# vLLM's engine when a worker's pipe closed before it said it was ready: the worker raised (its
# own `WorkerProc failed to start.` and traceback are above) or died without a word, SIGKILLed
# (the OOM killer as it loads) or crashed in native code (vLLM PR 47422's "hard deaths")
WORKER_INIT_FAILED = re.compile(
    r"WorkerProc initialization failed due to an exception in a background process"
)
# the API server's when the engine core process is gone before it said it was ready and its
# exit code was not yet known (`{}`: it raised, its traceback above, or it was killed)
ENGINE_CORE_GONE = re.compile(r"Failed core proc\(s\): \{\}")
WORKER_RAISED = re.compile(r"WorkerProc (failed to start|hit an exception|failed\b)")
# the tag vLLM puts before a worker's lines, release by release: `(Worker pid=7)`, `(Worker_TP1
# pid=7)`, `(Worker_PP0_TP1 pid=7)`, `(VllmWorker rank=0 pid=7)`, `(VllmWorker TP0 pid=7)`,
# `(VllmWorker-0 pid=7)`, V0's `(VllmWorkerProcess pid=7)`; after whatever prefix a collector put
# before it (stern's, a colour code whose escape byte a copy lost)
WORKER_TAG = re.compile(
    r"\((?:VllmWorker(?:Process)?|Worker)(?:[-_][A-Za-z0-9_]+)?(?: (?:rank=[0-9]+|TP[0-9]+))?"
    r" pid=[0-9]+\) ?"
)
WORKER_TAG_WITHIN = 160  # characters of prefix before a worker's tag
# the engine core's: `(EngineCore pid=7)`, `(EngineCore_DP0 pid=7)`
ENGINE_CORE_TAG = re.compile(r"\(EngineCore(?:_[A-Za-z0-9_]+)? pid=[0-9]+\) ?")


@dataclass(frozen=True)
class GoneInStartUp:
    """A process vLLM started that is gone before it said it was ready, as the line `said`
    reads: its own lines carry `tag`, its children's `children` (theirs count only before that
    line: once it is gone they fail on its closed pipes)."""

    who: str
    said: re.Pattern
    tag: re.Pattern
    children: re.Pattern | None = None


# the entry a death without a word is (its hints read GONE_IN_START_UP's lines; engine-dead's
# words read them too, as the consequence)
SILENT_DEATH_ENTRY = "vllm-worker-killed"
GONE_IN_START_UP = (
    GoneInStartUp("a worker", WORKER_INIT_FAILED, WORKER_TAG),
    GoneInStartUp("the engine core", ENGINE_CORE_GONE, ENGINE_CORE_TAG, children=WORKER_TAG),
)


# a vLLM server's life beginning, printed as each (re)start begins: its version line (its banner's
# since 0.11), its arguments
LIFE_START = re.compile(r"vLLM API server version [0-9]|█ +version [0-9]|\] non-default args: \{")
# the last line of a traceback printed with no tag: its exception (`ImportError: …`)
RAISED_LINE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*(Error|Exception|Interrupt)\b")
# a shell's prompt with nothing typed after it, pasted below a command's last output
BARE_PROMPT = re.compile(
    r"^\s{0,8}(\([^()\s]{1,40}\) )?([^\s@]{1,64}@[^\s:]{1,64}:[^\s#$%>]{0,200}\s?)?[#$%>]\s{0,8}$"
)


@dataclass(frozen=True)
class Fusion:
    """The numbers of the fusion above, as one value: explain uses FUSION (the module's
    constants); benchmarks/explain_calibrate.py tries others on the same readings.
    """

    signature_base: float = SIGNATURE_BASE
    signature_specific: float = SIGNATURE_SPECIFIC
    signature_text: float = SIGNATURE_TEXT
    recency: float = RECENCY
    text_only: float = TEXT_ONLY
    text_evidence: float = TEXT_EVIDENCE
    lead_power: float = LEAD_POWER
    lead_cap: float = LEAD_CAP
    few_words: int = FEW_WORDS
    place_power: float = PLACE_POWER
    confident: float = CONFIDENT
    no_error_guess: float = NO_ERROR_GUESS
    weak_hit: float = WEAK_HIT
    weak_ceiling: float = WEAK_CEILING
    hint_off_error: float = HINT_OFF_ERROR
    hint_text_floor: float = HINT_TEXT_FLOOR
    hint_stated_floor: float = HINT_STATED_FLOOR
    killed_loading: float = KILLED_LOADING


FUSION = Fusion()


@dataclass(frozen=True)
class Evidence:
    """A line explain shows: its number and its text, secrets redacted (llmdoctor.redact)."""

    line: int
    text: str

    def __post_init__(self) -> None:
        from llmdoctor.redact import redact_text

        object.__setattr__(self, "text", redact_text(self.text))

    def to_json(self) -> dict[str, Any]:
        return {"line": self.line, "text": self.text}


@dataclass(frozen=True)
class SilentDeath:
    """A process vLLM says is gone in start-up whose own lines hold no error (explain's "died
    without a word"): the last line of it and its children (`last`), vLLM's line that says so
    (`said`), which process (`who`: GONE_IN_START_UP)."""

    last: Evidence
    said: Evidence
    who: str

    def to_json(self) -> dict[str, Any]:
        return {**self.last.to_json(), "said": self.said.to_json(), "process": self.who}


@dataclass(frozen=True)
class Resumed:
    """Tokens generated after an entry's last line: the engine's stats lines that say so (vLLM's
    `Avg generation throughput: 38.7 tokens/s`, SGLang's `gen throughput (token/s): 45.2`), the
    first and the last of them and how many (None: a file too big to read whole, of which only
    its last stats lines were read again, `_phase_lines`; these are those after it).
    """

    first: Evidence
    last: Evidence
    lines: int | None

    def to_json(self) -> dict[str, Any]:
        return {"first": self.first.to_json(), "last": self.last.to_json(), "lines": self.lines}


@dataclass
class Match:
    """One runbook entry that explains the input, with how sure explain is of it."""

    id: str
    title: str
    severity: str
    how: str  # "signature" or "search"
    score: float = 0.0
    confidence: float = 0.0
    count: int = 0  # matching lines
    hint_lines: int = 0  # of those, the lines only a hint matched (a named entry's)
    evidence: list[Evidence] = field(default_factory=list)
    explained_by: list[str] = field(default_factory=list)
    fix: list[str] = field(default_factory=list)
    # the same steps as render.fix_text.FixStep (prose and code apart): a terminal re-flows the
    # prose to its width; `fix` is what JSON gives
    fix_steps: list = field(default_factory=list, repr=False, compare=False)
    fix_left_out: str = field(default="", repr=False, compare=False)  # "3-7": for wiki show
    snippet: str = ""
    path: str = ""
    # a critical entry's lines, then tokens generated again after its last one: it happened and
    # ended (`served_again`); None when the input shows no generation after it or is too big to
    # read whole
    resumed: Resumed | None = None
    # the engine that wrote the input when not vLLM (`other_engine`), and its own settings for
    # the vLLM flags the shown Fix names
    engine: str = ""
    engine_flags: dict[str, str] = field(default_factory=dict)
    # a kill a `kubectl describe` tells as its container's Last State, where nothing says the pod
    # fails now (`ready_again`: the block sets a readiness probe and says `Ready: True`, no other
    # line reads as an error): that Ready line; the container was started again and is Ready
    ready_again: Evidence | None = None
    ready_container: str = ""  # ... that container's name, where the paste gives it
    # the entry whose signatures matched these lines when this entry tells their story, and why
    # (its `at_startup`: an OOM before the server served is a start-up that does not fit;
    # vLLM's free-memory check whose numbers show no memory taken by another process)
    lines_of: str = ""
    retold_because: str = ""
    # the line where the server's start failed after this warning's own error, the server never
    # having come up (`ended_the_start`): it is critical there
    ended_start: Evidence | None = None
    # a note on a stop sent from outside after which nothing failed: nothing to fix, unless
    # something failed before it since the server started (`failed_before`: then what failed is
    # what to look into, the stop only how it ended)
    stopped_cleanly: bool = False
    failed_before: bool = False
    # ... and lines read as wrong (an error line, a 5xx: not a client's 404) came outside the
    # stopped server's own life, in another pod or service or after it started again: the stop
    # is not named for them, yet no "nothing failed" (`failed_elsewhere`)
    failed_elsewhere: bool = False
    # the line of loading just before a SIGKILL this entry's hint read, the input's last line
    # (`_killed_while_loading`): the process was killed as it loaded
    killed_loading: Evidence | None = None
    # the last line of a worker that died in start-up without an error of its own, the engine
    # saying only that it failed to start (`_died_without_a_word`): killed, or a native crash
    died_silently: SilentDeath | None = None
    # what this match's reading could not check, said once at the report's end
    # (`Explanation.unchecked`; an input too big to read whole: whether the process vLLM says is
    # gone in start-up died without a word)
    unchecked: str = ""

    def hold_at(self, ceiling: float) -> None:
        """At most `ceiling` sure (below CONFIDENT: a guess), its score with it."""
        self.confidence = min(self.confidence, ceiling)
        self.score = round(100 * self.confidence, 1)

    @property
    def shown_as(self) -> str:
        """How the report labels it: `ended` (the engine generated again after it, or the
        container it killed is Ready again: in the log's past), `maybe` (named by the input's
        words alone), else its severity."""
        if self.resumed is not None or self.ready_again is not None:
            return "ended"
        return self.severity if self.how == "signature" or self.named_by_its_lines else "maybe"

    @property
    def named_by_its_lines(self) -> bool:
        """Whether a rule over the input's lines named it (a kill as a process loaded, a worker
        that died without a word), not its words alone."""
        return self.killed_loading is not None or self.died_silently is not None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "title": self.title,
            "score": self.score,
            "confidence": self.confidence,
            "severity": self.severity,
            "shown_as": self.shown_as,
            "how": self.how,
            "count": self.count,
            "evidence": [e.to_json() for e in self.evidence],
            "explained_by": self.explained_by,
            "fix": self.fix,
        }
        if self.hint_lines:
            out["hint_lines"] = self.hint_lines
        if self.snippet:
            out["snippet"] = self.snippet
        if self.resumed is not None:
            out["resumed"] = self.resumed.to_json()
        if self.ready_again is not None:
            out["ready_again"] = self.ready_again.to_json() | {"container": self.ready_container}
        if self.engine_flags:
            out["engine"] = {"name": self.engine, "flags": self.engine_flags}
        if self.lines_of:
            out["lines_of"] = self.lines_of
            out["retold_because"] = self.retold_because
        if self.ended_start is not None:
            out["ended_start"] = self.ended_start.to_json()
        if self.stopped_cleanly:
            out["stopped_cleanly"] = True
        if self.failed_before:
            out["failed_before"] = True
        if self.failed_elsewhere:
            out["failed_elsewhere"] = True
        if self.killed_loading is not None:
            out["killed_loading"] = self.killed_loading.to_json()
        if self.died_silently is not None:
            out["died_silently"] = self.died_silently.to_json()
        if url := page_url(self.id):
            out["url"] = url
        return out


@dataclass(frozen=True)
class LikelyCause:
    """The first error line before a consequence that explain names first (engine-dead,
    pod-not-ready, gateway-timeout ...: entries another entry explains): what most likely made
    it happen, shown even when no entry names that line.
    """

    consequence: str  # the id of the consequence named first
    line: int
    text: str
    # an entry that explains the consequence (the cause graph), that the wiki search finds first
    # for the error lines from this one and whose hint fires on this line; None when none does
    entry_id: str | None = None
    # that entry is named first, just above the consequence (it has a hint on this very line)
    named_first: bool = False
    # the line ends the traceback the consequence's own first line opens (nothing came before)
    in_traceback: bool = False
    # where an exception raised with no message was raised: its traceback's last frame
    raised_in: RaisedIn | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "consequence": self.consequence,
            "line": self.line,
            "text": self.text,
            "named_first": self.named_first,
            "in_traceback": self.in_traceback,
            "entry": self.entry_id,
            "raised_in": self.raised_in.to_json() if self.raised_in else None,
        }


@dataclass(frozen=True)
class RaisedIn:
    """A traceback's last frame: the function, file and line an exception was raised in."""

    function: str
    file: str
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}, in {self.function}"

    def to_json(self) -> dict[str, Any]:
        return {"function": self.function, "file": self.file, "line": self.line}


@dataclass
class Explanation:
    """What `explain` found: confident matches best first, or an abstention with the salient
    lines it read.
    """

    source: str
    matches: list[Match]
    how: str  # "signatures" (a signature match leads), "search" (text only) or "none"
    salient: list[Evidence] = field(default_factory=list)
    matched_lines: int = 0
    total_matches: int = 0  # confident entries before --limit
    warnings: list[str] = field(default_factory=list)  # unusable signatures, file:line
    below_threshold: list[Match] = field(default_factory=list)  # weak guesses not shown
    threshold: float = CONFIDENT  # the confidence below which a match is only a guess
    likely_cause: LikelyCause | None = None  # when the first match is a consequence
    # warnings about how the server is configured, in an input with no error line (a speed
    # setting's also beside an exception raised, no slowness said): reported, never named as
    # what failed (`configuration_notes`)
    notes: list[Match] = field(default_factory=list)
    # a critical entry matched by signature among all the confident matches, shown or cut by
    # --limit: the exit code does not depend on how many are shown
    critical: bool = False
    empty: bool = False  # the input held no text at all: nothing was read, nothing is known
    error_lines: int = 0  # every line read as an error (`salient` keeps the last of them)
    # the input was read whole (CLEAN_BYTES or less): only then is it read whether the server was
    # still starting (`told_at_startup`); a bigger file is read again for `Match.resumed` only
    # (`_phase_lines`), a stream never
    read_whole: bool = True
    # the error lines no confident match quotes (the last ones read): what the retro loop
    # (`wiki add --from-log`) starts a new entry from when explain names part of the log
    unexplained: list[Evidence] = field(default_factory=list)
    # the header of a traceback the input stops inside (its exception, the error itself, was not
    # in what was read: a paste cut short), from an input read whole
    cut_traceback: Evidence | None = None
    cut_frame: Evidence | None = None  # the last frame it shows (`File "…", line N, in f`)
    # what the reading could not check (`Match.unchecked`), once each
    unchecked: list[str] = field(default_factory=list)

    @property
    def warnings_only(self) -> bool:
        """Whether every line read as wrong was logged below ERROR (a WARNING that mentions a
        failure) and none is a request that failed (an access log's 503, logged at INFO): what
        it lists are warnings, not errors."""
        return bool(self.salient) and all(_warning_or_notice(e.text) for e in self.salient)

    @property
    def nothing_failed(self) -> bool:
        """warnings_only, or what is logged at ERROR is a server's remark on a choice it then
        makes without it (FALLS_BACK): no line says something failed."""
        return bool(self.salient) and all(_no_failure(e.text) for e in self.salient)

    @property
    def exit_code(self) -> int:
        """0 nothing explains it, 1 warnings (or text-only guesses), 2 a critical signature match."""
        if not self.matches:
            return 0
        return 2 if self.critical else 1

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "how": self.how,
            "matched_lines": self.matched_lines,
            "total_matches": self.total_matches,
            "threshold": self.threshold,
            "likely_cause": self.likely_cause.to_json() if self.likely_cause else None,
            "matches": [m.to_json() for m in self.matches],
            "notes": [m.to_json() for m in self.notes],
            "salient": [e.to_json() for e in self.salient],
            "warnings": self.warnings,
            "read_whole": self.read_whole,
            "cut_traceback": (
                self.cut_traceback.to_json()
                | ({"last_frame": self.cut_frame.to_json()} if self.cut_frame else {})
                if self.cut_traceback
                else None
            ),
            # the closest entries below the threshold (named, never asserted)
            "below_threshold": [
                {"id": m.id, "confidence": m.confidence, "how": m.how} for m in self.below_threshold
            ],
            "unchecked": self.unchecked,
        }


@dataclass
class _Hits:
    """An entry's (or one kind of line's) hits: a count and the first and last few lines; a
    line that repeats a thousand times costs a count, not a thousand pieces of evidence.
    """

    count: int = 0
    first: list[tuple[int, str]] = field(default_factory=list)
    last: deque = field(default_factory=lambda: deque(maxlen=LAST))
    last_line: int = 0
    weight: int = 0  # literal characters of the most specific signature that fired
    strong: bool = False  # a signature other than a weak one (SignatureSet.weak) fired
    strong_count: int = 0  # how many of its lines such a signature matched (the rest: hints)
    on_error_line: bool = False  # one of its lines is also a salient (error) line
    error_lines: int = 0  # how many of its lines are salient (error) lines
    hinted: set = field(default_factory=set)  # kept lines only a hint of this entry matched

    def add_line(self, line: int, text: str) -> None:
        self.count += 1
        self.error_lines += self.on_error_line
        self.last_line = line
        if len(self.first) < FIRST:
            self.first.append((line, text))
        else:
            self.last.append((line, text))

    def add_lines(self, count: int, first: list, last: list) -> None:
        """`count` more lines, all after those added before, of which `first` are the first
        few and `last` the last few (in order, possibly overlapping): as add_line on each.
        """
        lines = sorted({*first, *last})
        self.count += count
        self.error_lines += self.on_error_line * count
        self.last_line = lines[-1][0]
        take = max(FIRST - len(self.first), 0)
        self.first.extend(lines[:take])
        self.last.extend(lines[take:][-LAST:])

    def merge(self, other: _Hits, strong: bool) -> None:
        """Add another set of hits on other lines (`strong`: a strong signature of this entry
        is among them): the count, and the first and last lines of both.
        """
        self.count += other.count
        self.strong_count += other.count if strong else 0
        self.error_lines += other.error_lines
        self.last_line = max(self.last_line, other.last_line)
        self.weight = max(self.weight, other.weight)
        self.strong = self.strong or strong
        self.on_error_line = self.on_error_line or other.on_error_line
        lines = {n for n, _ in (*other.first, *other.last)}
        self.hinted = (self.hinted - lines) if strong else (self.hinted | lines)
        kept = sorted({*self.first, *self.last, *other.first, *other.last})
        self.first = kept[:FIRST]
        self.last = deque(kept[FIRST:][-LAST:], maxlen=LAST)

    def evidence(self, entry=None) -> list[Evidence]:
        """One quote per input line: a cleaned paste may read a line as several (an error
        body and the message in it), and the count already says one. A line longer than
        MAX_TEXT is quoted around what `entry`'s signatures matched in it. Where a signature
        matched, its lines come first, then those only a hint matched (NCCL's `… -> 1` trace
        lines around the error that names the entry)."""
        quoted: dict[int, Evidence] = {}
        for n, t in (*self.first, *self.last):
            if n not in quoted:
                quoted[n] = Evidence(n, _quoted(t, entry))
        if not (self.strong and self.hinted):
            return list(quoted.values())
        return sorted(quoted.values(), key=lambda e: e.line in self.hinted)

    def states_error(self) -> bool:
        """Whether one of its kept lines states an error at ERROR level or above."""
        return any(_states_error(t) for _, t in (*self.first, *self.last))


def _quoted(text: str, entry=None) -> str:
    """A line as evidence: whole up to MAX_TEXT; a longer one (a JSON body, a minified stack on
    one line) cut to MAX_TEXT around the first of `entry`'s signatures and hints that matches
    it, so the quote holds what matched, else from its start; "…" marks each cut."""
    if len(text) <= MAX_TEXT:
        return text
    for pattern in _entry_patterns(entry) if entry is not None else ():
        if (found := pattern.search(text)) is not None:
            start = max(0, min(found.start() - MAX_TEXT // 4, len(text) - MAX_TEXT + 2))
            head = "…" if start else ""
            body = text[start : start + MAX_TEXT - len(head) - 1]
            return head + body + ("…" if start + len(body) < len(text) else "")
    return text[: MAX_TEXT - 1] + "…"


_ENTRY_PATTERNS: dict[str, list] = {}


def _entry_patterns(entry) -> list:
    """An entry's signatures and hints compiled by RE2 for single lines (those that compile),
    kept per entry: only needed to quote a line longer than MAX_TEXT around its match."""
    key = getattr(entry, "id", "")
    if key not in _ENTRY_PATTERNS:
        from llmdoctor.wiki.re2_patterns import line_pattern

        sources = [*getattr(entry, "signatures", ()), *(getattr(entry, "hints", None) or ())]
        compiled_ = (line_pattern(s) for s in sources if isinstance(s, str))
        _ENTRY_PATTERNS[key] = [p for p in compiled_ if p is not None]
    return _ENTRY_PATTERNS[key]


@dataclass
class _Reading:
    """What one pass over the input gathered."""

    hits: dict[str, _Hits]
    salient: list[Evidence]
    matched_lines: int
    text: str | None  # the cleaned text of a small input (searched whole)
    invalid: list
    numbers: list[int] = field(default_factory=list)  # each line of `text`: its input line
    error_lines: int = 0  # salient (error) lines read, all of them (`salient` keeps the last)
    # the stats lines that say tokens were generated (input line, text): all of them on an input
    # read whole, the last ones after the outage on a big file read again (`kept_only`)
    progress: list[tuple[int, str]] | None = None
    starts: list[int] = field(default_factory=list)  # ... and the lines where a server (re)starts
    # progress and starts are only what a big file read again gave (its first restart and last
    # stats lines after the outage, `_phase_lines`): a stall or an outage ends by them, never by
    # lines not read
    kept_only: bool = False
    # a block's tail search passed over its most lines that say nothing failed
    # (SignatureSet.tail_cut): lines above them in that block may be unread
    tail_cut: bool = False
    # input line -> the docker-compose service it came from, where several are interleaved
    services: dict[int, str] = field(default_factory=dict)

    @cached_property
    def lines(self) -> list[str]:
        """`text` split into its lines, once for every helper that walks them ([] when the input
        was not kept)."""
        return self.text.split("\n") if self.text is not None else []

    def numbered(self) -> Iterable[tuple[int, str]]:
        """Each line of `text` with its input line number."""
        return zip(self._line_numbers, self.lines, strict=False)

    @cached_property
    def numbered_list(self) -> list[tuple[int, str]]:
        """numbered(), as a list (walked back and forth around a line)."""
        return list(self.numbered())

    def numbered_from_the_end(self) -> Iterable[tuple[int, str]]:
        """numbered(), last line first, without walking the lines before."""
        return zip(reversed(self._line_numbers), reversed(self.lines), strict=False)

    @property
    def _line_numbers(self) -> Sequence[int]:
        return self.numbers or range(1, len(self.lines) + 1)

    def origin(self, number: int, text: str) -> str:
        """Whose line input line `number` (`text`, cleaned) is: the pod its prefix names
        (`kubectl logs --prefix`, stern) or the compose service it came from; "" when the log
        says of none."""
        return _pod(text) or self.services.get(number, "")

    def pod_lines(self, number: int, text: str) -> Iterable[tuple[int, str]]:
        """numbered(), of line `number`'s pod or compose service (`origin`) only: every line
        when it names none."""
        own = self.origin(number, text)
        return ((n, t) for n, t in self.numbered() if self.origin(n, t) == own)

    def starts_of(self, number: int, text: str) -> list[int]:
        """The lines where a server (re)starts, in line `number`'s pod or service: every one
        where their text was not kept (a big file read again)."""
        if self.text is None or not (self.services or _pod(text) or self._start_pods):
            return self.starts
        own, texts = self.origin(number, text), self._start_texts
        return [s for s in self.starts if self.origin(s, texts.get(s, "")) == own]

    @cached_property
    def _start_texts(self) -> dict[int, str]:
        wanted = set(self.starts)
        texts: dict[int, str] = {}
        for n, t in self.numbered():
            if n in wanted:
                texts.setdefault(n, t)
        return texts

    @cached_property
    def _start_pods(self) -> bool:
        return any(_pod(t) for t in self._start_texts.values())

    def fails_beside(self, lines: set[int]) -> bool:
        """Whether a line read as wrong other than `lines` is no warning or notice (an error, a
        request that failed), or more were read than kept (then it is not known to be none)."""
        return self.error_lines > len(self.salient) or any(
            e.line not in lines and not _no_failure(e.text) for e in self.salient
        )


def read_input(
    source: TextSource | BinaryIO, entries: dict, workers: int = 1, kinds: bool = True
) -> tuple[_Reading, SignatureSet]:
    """One pass over the input: signature hits per entry and the salient lines. `kinds`: dense
    blocks come grouped (SignatureSet.scan); False reads every line one by one, the reference
    the grouped reading is held to.
    """
    scanner = SignatureSet(
        [*entries.values(), _salient_entry()],
        tail_ids=[SALIENT_ID],
        tail_keep=SALIENT_KEPT,
        tail_uncounted=_says_no_error,
    )
    text, numbers, services, rest = _small_text(source, _heals(scanner))
    scanned = ScanStats()
    if text is not None:
        text = without_cut_word(text, entries)
        found = scanner.scan_text(text, kinds=kinds)
    elif rest is None:
        found = scanner.scan(source, workers=workers, stats=scanned, kinds=kinds)
    else:
        found = scanner.scan_stream(rest, kinds=kinds)
    lines = _LineGroups(scanner, numbers)
    try:
        for m in found:
            if isinstance(m, BlockKinds):
                lines.add_kinds(m)
            else:
                lines.add(m)
    finally:
        if isinstance(rest, RecordLines):
            rest.close()
    hits: dict[str, _Hits] = {}
    matched_lines = 0
    for group, entry_ids, strong_ids in lines.groups.values():
        matched_lines += group.count if strong_ids else 0  # lines a signature (not a hint) matched
        for entry_id in entry_ids:
            hits.setdefault(entry_id, _Hits()).merge(group, strong=entry_id in strong_ids)
    if numbers:
        extra, extra_strong = _lines_read_twice(text, numbers, scanner)
        for entry_id, n in extra.items():
            if entry_id in hits:
                h = hits[entry_id]
                h.count = max(1, h.count - n)
                h.strong_count = min(h.strong_count, h.count)
        matched_lines = max(min(matched_lines, 1), matched_lines - extra_strong)
    progress, starts, kept_only = None, [], False
    if text is not None:
        progress, starts = _progress_lines(text, numbers)
    elif rest is None and isinstance(source, TextSource) and source.path is not None:
        after = _outage_ends(hits, entries)
        if after is not None and after < scanned.lines:  # something follows it: read again
            progress, starts = _phase_lines(source.path, after, scanned.blocks)
            kept_only = True
    _drop_stalls_that_ended(hits, progress or [])
    invalid = [w for w in scanner.invalid if w.entry_id != SALIENT_ID]
    kept = [Evidence(n, t[:MAX_TEXT]) for n, t in lines.salient]
    reading = _Reading(
        hits,
        kept,
        matched_lines,
        text,
        invalid,
        numbers,
        lines.error_lines,
        progress,
        starts,
        kept_only,
        scanner.tail_cut,
        services,
    )
    return reading, scanner


# vLLM's stats line over an interval in which the engine generated nothing (one in which it
# generated again is server_phase.PROGRESS_LINE)
STALL_LINE = re.compile(r"Avg generation throughput: 0\.0 tokens/s")


def _outage_ends(hits: dict[str, _Hits], entries: dict) -> int | None:
    """The first line after which generation would end something: the last line of a critical
    entry's signature hits or of a single stalled interval, the earliest of them; None when the
    input has neither (nothing to end, nothing to read again)."""
    ends = [
        h.last_line
        for entry_id, h in hits.items()
        if _stall_only(h)
        or (h.strong and getattr(entries.get(entry_id), "severity", "") == "critical")
    ]
    return min(ends, default=None)


PROGRESS_KEPT = 8  # the last stats lines that show generation, kept of a file read again


def _phase_lines(
    path: Path, after: int, blocks: list[tuple[int, int]]
) -> tuple[list[tuple[int, str]], list[int]]:
    """A file too big to read whole, read again from line `after` on for when things happened:
    the first line there where a server (re)starts, and the last PROGRESS_KEPT stats lines that
    say tokens were generated (the last of the file: whether any came after a line is known).
    It starts at the block of the first scan (`blocks`: first line, byte offset) that holds
    line `after`. Fewer lines than a whole reading finds, so a claim made of them (it ended)
    rests on lines seen; only when a critical match or a stall has lines after it
    (`_outage_ends`)."""
    from llmdoctor.wiki.re2_patterns import re2_module, re2_options
    from llmdoctor.wiki.signatures import read_blocks

    started = _phase_start_pattern(re2_module(), re2_options())
    progress: deque[tuple[int, str]] = deque(maxlen=PROGRESS_KEPT)
    start: int | None = None
    line_no, offset = max(((n, o) for n, o in blocks if n <= after), default=(1, 0))
    with open(path, "rb") as fh:
        fh.seek(offset)
        for block in read_blocks(fh):
            count = block.count(b"\n") + (0 if block.endswith(b"\n") else 1)
            if line_no + count - 1 <= after:
                line_no += count
                continue
            skip = 0  # the offset of line `after` + 1 in the block
            for _ in range(max(after - line_no + 1, 0)):
                skip = block.index(b"\n", skip) + 1
            first = max(line_no, after + 1)
            if start is None and (found := started.search(block, skip)) is not None:
                start = first + block.count(b"\n", skip, found.start())
            progress.extend(_last_progress(block, skip, first))
            line_no += count
    return list(progress), [start] if start is not None else []


def _last_progress(block: bytes, skip: int, first: int) -> list[tuple[int, str]]:
    """The last PROGRESS_KEPT stats lines of a block from offset `skip` (input line `first`) on
    that say tokens were generated, with their input lines, first first."""
    found: list[tuple[int, str]] = []  # (offset, line), last first
    end = len(block)
    while len(found) < PROGRESS_KEPT and (at := block.rfind(b"throughput", skip, end)) >= 0:
        begin = block.rfind(b"\n", skip, at) + 1 or skip
        stop = block.find(b"\n", at)
        line = block[begin : stop if stop >= 0 else len(block)].decode("utf-8", "replace")
        if PROGRESS_LINE.search(line) and not request_log(line):
            found.append((begin, line))
        end = begin
    numbered, line_no, counted = [], first, skip  # newlines counted once, first line first
    for begin, line in reversed(found):
        line_no += block.count(b"\n", counted, begin)
        counted = begin
        numbered.append((line_no, line))
    return numbered


_START_PATTERN: list = []


def _phase_start_pattern(re2, options):
    """STARTING_LINE or UP_LINE, as one RE2 pattern over a block's bytes (multi-line)."""
    if not _START_PATTERN:
        source = f"(?m){STARTING_LINE.pattern}|{UP_LINE.pattern}"
        _START_PATTERN.append(re2.compile(source.encode(), options))
    return _START_PATTERN[0]


def _progress_lines(text: str, numbers: list[int]) -> tuple[list[tuple[int, str]], list[int]]:
    """On an input read whole: the stats lines that say tokens were generated, and the lines where
    a server starts or comes up (a restart), each with its input line number. A server's log of
    a request is neither (a prompt may quote a stats line)."""
    progress, starts = [], []
    for i, line in enumerate(text.split("\n"), 1):
        number = numbers[i - 1] if numbers and i <= len(numbers) else i
        if "throughput" in line and PROGRESS_LINE.search(line) and not request_log(line):
            progress.append((number, line))
        elif any(w in line for w in PHASE_WORDS) and (
            STARTING_LINE.search(line) or UP_LINE.search(line)
        ):
            starts.append(number)
    return progress, starts


# what a log line says of where it came from: what precedes its level (kubectl --prefix's
# `[pod/vllm-a/vllm]`, vLLM's `(APIServer pid=1)`), its timestamps left out, and vLLM's engine index
ISO_TIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9:.]+(Z|[+-][0-9:]+)?")
ENGINE_INDEX = re.compile(r"\bEngine ([0-9]+):")


def _origin(text: str) -> tuple[str, str]:
    level = LEVEL.search(text)
    prefix = ISO_TIME.sub("", text[: level.start()] if level else "").strip()
    engine = ENGINE_INDEX.search(text)
    return prefix, engine.group(1) if engine else ""


def _stall_only(hits: _Hits) -> bool:
    """Whether an entry's only evidence is one stats line of an interval without a token."""
    return hits.count == 1 and all(STALL_LINE.search(t) for _, t in (*hits.first, *hits.last))


def _drop_stalls_that_ended(hits: dict[str, _Hits], progress: list[tuple[int, str]]) -> None:
    """Forget an entry whose one matched line is a stats line of a stall when a later stats
    line of the same input shows tokens generated again: the engine went on (a V0 server logs
    one `0.0 tokens/s` interval with a request running as it starts generating), so that one
    interval proves no wedge. Stalls over several intervals stay, recovered or not (minutes of
    nothing generated is an incident). On a big file read again `progress` holds its last
    stats lines (`_phase_lines`): the last of them decides, as on an input read whole.
    """
    last_progress = progress[-1][0] if progress else 0
    for entry_id in [e for e, h in hits.items() if _stall_only(h)]:
        if last_progress > hits[entry_id].last_line:
            del hits[entry_id]


STARTUP_TAG = "startup"  # an entry whose error can happen while the server starts


def ended_the_start(matches: list[Match], reading: _Reading, entries: dict) -> None:
    """A warning that can happen at start-up (tagged `startup`: a LoRA adapter that is not
    there, a tool-call parser's name) whose own error line is followed by that server's start
    failing, before it ever came up (`start_failed_after`: `vllm serve` ending on the exception,
    `Engine core initialization failed`), is critical: a warning at run time (one adapter
    refused, tools ignored) took the whole server down there. Only in an input read whole, and
    in the error line's own pod's lines (`kubectl logs --prefix`); a request's error (a 404,
    a context overflow) comes from a server that was up and never ends a start."""
    if reading.text is None:
        return
    at_startup = _tagged(entries, {STARTUP_TAG})
    for m in matches:
        if m.how != "signature" or m.severity == "critical" or m.id not in at_startup:
            continue
        errors = [e for e in m.evidence if _states_error(e.text)]
        for error in sorted(errors, key=lambda e: e.line):  # an old pod's run-time error first
            failed = start_failed_after(reading.pod_lines(error.line, error.text), error.line)
            if failed is not None:
                m.severity = "critical"
                m.ended_start = Evidence(failed[0], failed[1][:MAX_TEXT])
                break


def served_again(matches: list[Match], reading: _Reading) -> None:
    """Mark each critical signature match after which the input shows tokens generated again
    (`Match.resumed`): the crash or stall is in the log's past, what is wrong now is not it.
    A stall ends when the engine that stalled generates again (the same origin: pod prefix,
    process, engine index; another replica's progress proves nothing of it); anything else ends
    only with a server started again after it, and counts that pod's generation from there
    (`kubectl logs --prefix`: another replica serving says nothing of the one that died). On a
    file too big to read whole, by its first restart and last stats lines after the outage
    (`kept_only`, `_phase_lines`), uncounted; a warning's condition (a full KV cache, a
    queue) is measured by those very stats lines, so it is never "resumed" by them.
    """
    progress = reading.progress
    if not progress:
        return
    for m in matches:
        if m.how != "signature" or m.severity != "critical" or not m.evidence:
            continue
        end = max(e.line for e in m.evidence)
        if all(STALL_LINE.search(e.text) for e in m.evidence):
            stalled = {_origin(e.text) for e in m.evidence}
            after = [(n, t) for n, t in progress if n > end and _origin(t) in stalled]
        else:
            # that pod's generation (`kubectl logs --prefix`): another replica's says nothing of it
            last = max(m.evidence, key=lambda e: e.line)
            pods = {reading.origin(e.line, e.text) for e in m.evidence}
            start = next((n for n in reading.starts_of(last.line, last.text) if n > end), None)
            after = [
                (n, t)
                for n, t in progress
                if start is not None and n > start and reading.origin(n, t) in pods
            ]
        if after:
            m.resumed = Resumed(
                Evidence(after[0][0], after[0][1][:MAX_TEXT]),
                Evidence(after[-1][0], after[-1][1][:MAX_TEXT]),
                None if reading.kept_only else len(after),
            )


# a container restarted this often is killed again and again, not past its kill (diagnose's
# pod-restarts holds the same line: checks/pod_restarts.py RECURRING_OOM_KILLS)
RECURRING_KILLS = 2


def ready_again(matches: list[Match], reading: _Reading) -> None:
    """Mark each critical signature match whose every line is a detail of a container's `Last
    State` in a pasted `kubectl describe` or `lastState` in a pasted pod object
    (`Match.ready_again`: the block's `Ready: True` line, the status's `ready: true`) where
    nothing says the pod is failing now: each such container sets a readiness probe and is
    Ready, restarted fewer than RECURRING_KILLS times, no container nor the pod is said not
    Ready, and every line read as an error is of those Last States (a BackOff, a probe failing,
    another container waiting: none). Only on an input whose error lines were all kept, and
    every matching line of the match."""
    if reading.error_lines > len(reading.salient):
        return
    objects = None  # the lastStates of a pasted `kubectl get pod -o yaml|json`, read once
    for m in matches:
        if m.how != "signature" or m.severity != "critical" or m.resumed is not None:
            continue
        if not m.evidence or m.count > len(m.evidence):
            continue
        numbered = reading.numbered_list
        states = [last_state_of(numbered, e.line) for e in m.evidence]
        if None in states:
            if objects is None:
                from llmdoctor.triage.pod_object_text import pod_object_last_states

                objects = pod_object_last_states(numbered)
            states = [
                s or next((o for o in objects if e.line in o.lines), None)
                for s, e in zip(states, m.evidence, strict=True)
            ]
        if not all(s is not None and s.ready and s.readiness_probe for s in states):
            continue
        if any(s.restarts is not None and s.restarts >= RECURRING_KILLS for s in states):
            continue
        if any(not any(e.line in s.lines for s in states) for e in reading.salient):
            continue
        if pod_not_ready(numbered):
            return  # another container (or the pod) not Ready now: it may be failing
        ready = max(states, key=lambda s: s.ready)
        m.ready_again = Evidence(ready.ready[0], ready.ready[1].strip()[:MAX_TEXT])
        m.ready_container = ready.container or ""


def _lines_read_twice(
    text: str, numbers: list[int], scanner: SignatureSet
) -> tuple[dict[str, int], int]:
    """A cleaned paste reads some input lines as several (a line and the error body's message
    in it, a Markdown code span): per entry, how many matches beyond one fell on one input
    line, and the same for lines a strong signature matched, so counts are of input lines."""
    pieces: dict[int, list[int]] = {}
    for index, number in enumerate(numbers):
        pieces.setdefault(number, []).append(index)
    shared = [index for indexes in pieces.values() if len(indexes) > 1 for index in indexes]
    if not shared:
        return {}, 0
    scanned = text.split("\n")
    fired: dict[tuple[int, str], int] = {}
    strong_on: dict[int, int] = {}
    for m in scanner.scan_text("\n".join(scanned[i] for i in shared), kinds=False):
        number = numbers[shared[m.line - 1]]
        for entry_id in set(m.entry_ids) - {SALIENT_ID}:
            fired[(number, entry_id)] = fired.get((number, entry_id), 0) + 1
        if any(not scanner.weak[i] and scanner.patterns[i][0] != SALIENT_ID for i in m.fired):
            strong_on[number] = strong_on.get(number, 0) + 1
    extra: dict[str, int] = {}
    for (_, entry_id), n in fired.items():
        if n > 1:
            extra[entry_id] = extra.get(entry_id, 0) + n - 1
    return extra, sum(n - 1 for n in strong_on.values() if n > 1)


class _LineGroups:
    """Matching lines grouped by the signatures that fired on them (and whether they are error
    lines): what a group's lines say is worked out once, each line only counted and maybe kept;
    read_input folds the groups into each entry's hits at the end. Also the salient lines (the
    last SALIENT_KEPT kept) and how many there were.
    """

    def __init__(self, scanner: SignatureSet, numbers: list[int]):
        self.scanner = scanner
        self.weights = scanner.weights
        self.numbers = numbers  # input line of each scanned line (a cleaned paste), or []
        self.groups: dict[tuple[tuple[int, ...], bool], tuple[_Hits, tuple, set[str]]] = {}
        self.salient: deque[tuple[int, str]] = deque(maxlen=SALIENT_KEPT)
        self.error_lines = 0

    def _describes(self, fired: tuple[int, ...], text: str) -> bool:
        """Whether a line its salient patterns fired on advises (`If you … try …`), states a
        probe's settings (PROBE_SETTINGS) or, logged at INFO or DEBUG, is salient only by
        PROSE_ONLY's words: no error line either way."""
        return (
            _advice(text)
            or (
                ("delay=" in text or "Threshold" in text or "Seconds" in text)
                and bool(PROBE_SETTINGS.match(text))
            )
            or self._prose_at_info(fired, text)
        )

    def _prose_at_info(self, fired: tuple[int, ...], text: str) -> bool:
        """Whether a line logged at INFO or DEBUG is salient only by PROSE_ONLY's words or a
        timeout named as a setting."""
        if "INFO" not in text and "DEBUG" not in text:
            return False
        level = LEVEL.search(text)
        if level is None or level.group(1) not in ("DEBUG", "INFO"):
            return False
        patterns = self.scanner.patterns
        said = [patterns[i][1] for i in fired if patterns[i][0] == SALIENT_ID]
        return bool(said) and all(
            p in PROSE_ONLY or (p == "[Tt]imeout" and _timeouts_are_settings(text)) for p in said
        )

    def add(self, m: LineMatch) -> None:
        """One matching line."""
        if not_server_output(m.text):
            return
        line = self.numbers[m.line - 1] if self.numbers else m.line
        is_salient = False
        if SALIENT_ID in m.entry_ids:
            if not (self._describes(m.fired, m.text) or _negative(m.text)):
                self.salient.append((line, m.text))
                self.error_lines += 1
                is_salient = True
            if len(m.entry_ids) == 1:
                return
        self._group(m, is_salient)[0].add_line(line, m.text)

    def add_kinds(self, block: BlockKinds) -> None:
        """A dense block's lines, a kind at a time: the same as `add` on each of its lines.
        A kind's lines share their shape (digits written 0): ADVICE, which holds no digit, says
        the same of all of them; NEGATIVE_FIELD (its `0`) may not, so a block with a kind that
        could be a negative field is read line by line.
        """
        for kind in block.kinds:
            if (
                SALIENT_ID in kind.entry_ids and _negative(kind.sample, MAYBE_NEGATIVE_FIELD)
            ) or not_server_output(kind.sample):
                for m in block.line_matches():
                    self.add(m)
                return
        number = (lambda n: self.numbers[n - 1]) if self.numbers else (lambda n: n)
        events: list[tuple[int, str]] = []  # this block's salient lines (the last ones)
        salient_kinds: set[int] = set()
        # kinds in the order of their first lines, so groups are made in the order lines make
        # them; the kinds of one group are added together, and only the lines the group keeps
        # are numbered (its first ones while it has fewer than FIRST, its last ones)
        added: dict[int, tuple[_Hits, list]] = {}
        for kind in block.kinds:
            is_salient = SALIENT_ID in kind.entry_ids and not self._describes(
                kind.fired, kind.sample
            )
            if is_salient:
                self.error_lines += kind.count
                salient_kinds.add(kind.id)
            hits = self._group(kind, is_salient)[0]
            sums = added.setdefault(id(hits), (hits, [0, set()]))[1]
            sums[0] += kind.count
            sums[1].add(kind.id)
        for hits, (count, kind_ids) in added.values():
            take = min(max(FIRST - len(hits.first), 0), count)
            first = block.first_of(kind_ids, take)
            last = block.last_of(kind_ids, min(LAST, count - take))
            hits.add_lines(
                count, [(number(n), t) for n, t in first], [(number(n), t) for n, t in last]
            )
        if salient_kinds:
            events += [(number(n), t) for n, t in block.last_of(salient_kinds, SALIENT_KEPT)]
        for m in block.singles:  # lines only salient patterns fired on
            if not (self._describes(m.fired, m.text) or _negative(m.text)):
                events.append((number(m.line), m.text))
                self.error_lines += 1
        self.salient.extend(sorted(events)[-SALIENT_KEPT:])

    def _group(self, m, salient: bool) -> tuple[_Hits, tuple[str, ...], set[str]]:
        """The group of lines with m's signatures, created empty (with the weight of its most
        specific signature, the entries it names, those a strong signature of it names) the
        first time.
        """
        group = self.groups.get((m.fired, salient))
        if group is None:
            scanner = self.scanner
            fired = [i for i in m.fired if scanner.patterns[i][0] != SALIENT_ID]
            weight = max((self.weights[i] for i in fired), default=0)
            hits = _Hits(weight=weight, on_error_line=salient)
            entry_ids = tuple(i for i in m.entry_ids if i != SALIENT_ID)
            group = self.groups[m.fired, salient] = (hits, entry_ids, scanner.strong_ids(fired))
        return group


# NCCL's own INFO lines say how it set itself up (`NET/Plugin : dlerror=libnccl-net.so: cannot
# open shared object file … No plugin found`, `NET/IB : No device found`); it says what went
# wrong as `NCCL WARN`
NCCL_INFO = "NCCL INFO "


# a count of failures that is zero (`512 ok, 0 failed`, `errors=0`, `Failed requests: 0`): no
# error by that word. A 0 after a name is an id, not a count (`Rank 0 failed`, `GPU 0 failed`,
# `llama3-0 failed`), nor is a 0 compared or counting something else (`Check failed: 0 == rc`,
# `Error: 0 GPUs available`): the count comes first in a list, or the field ends with it
# (FIELD_ENDS after it). Found by RE2 (a Python pattern of these alternatives took 0.16 ms on a
# 2 KB line), the field's end checked where each one stops.
ZERO_FIRST = (
    r"(?:^|[(|/]\s*|:\s+|\s-\s+|[0-9]+ [A-Za-z]+(?:,\s*|;\s*|\s+and\s+))"
    r"0 (?:[Ff]ailed|[Ff]ailures?|[Ee]rrors?|[Tt]imeouts?)\b"
)
ZERO_FIELD = (
    r"\b(?:num_)?(?:[Ff]ailed|[Ff]ailures?|[Ee]rrors?|[Tt]imeouts?|[Aa]borted)"
    r"(?:_requests| requests)?\"?(?:=| ?: ?| )0(?:\.0+)?%?"
)
FIELD_ENDS = re.compile(r"\s*(?:$|[,;)|\]}]|\.(?:\s|$))|\s+[A-Za-z_]+[=:]")
# ... but not an assertion's or a check's (`Assertion failed: 0, file …`, `Check failed: 0 == rc`)
NOT_A_FIELD = ("Assertion ", "assertion ", "Check ", "check ", "assert ")
_ZERO_SETS: list = []


def _zero_counts(text: str) -> list[tuple[int, int]]:
    """Where `text` counts zero failures (ZERO_FIRST, ZERO_FIELD), in order."""
    if not _ZERO_SETS:
        from llmdoctor.wiki.re2_patterns import re2_module

        re2 = re2_module()
        _ZERO_SETS.extend((re2.compile(ZERO_FIRST), re2.compile(ZERO_FIELD)))
    first, field = _ZERO_SETS
    spans = [m.span() for m in first.finditer(text)]
    spans += [
        m.span()
        for m in field.finditer(text)
        if FIELD_ENDS.match(text, m.end()) and not text[: m.start()].endswith(NOT_A_FIELD)
    ]
    return sorted(spans)


def _only_zero_counts(text: str) -> bool:
    """Whether a line is salient only by zero counts of failures: without them, no salient
    pattern matches it."""
    spans = _zero_counts(text)
    if not spans:
        return False
    kept, at = [], 0
    for start, end in spans:
        kept.append(text[at:start])
        at = max(at, end)
    kept.append(text[at:])
    return not _salient_set().match_line(" ".join(kept))


def _negative(text: str, field: re.Pattern = NEGATIVE_FIELD) -> bool:
    """Whether a line that reads as an error says it is none: a status field that says
    "nothing" (`field`), an NCCL INFO line, or a line that is salient only by a zero count of
    failures. A line's shape (its digits written 0) says "maybe" to the last: it is read again
    line by line."""
    return (
        NCCL_INFO in text
        or ((":" in text or "<" in text) and bool(field.match(text)))
        or _only_zero_counts(text)
    )


def _says_none(text: str) -> bool:
    """Whether a salient line says it is no error: advice, a field that says "nothing", a zero
    count of failures, an NCCL INFO line."""
    return _advice(text) or _negative(text)


def _says_no_error(line: bytes) -> bool:
    """_says_none of a block's raw line: the last salient lines of a block are looked for past
    such lines."""
    return _says_none(line.decode("utf-8", errors="replace"))


def _heals(scanner: SignatureSet):
    """Whether a signature (not a hint) matches a joined text that matches none of its pieces:
    the fold split what proves a cause (pasted.folded_once)."""

    def heals(joined: str, pieces: list[str]) -> bool:
        found = scanner.strong_ids(scanner.matching(joined)) - {SALIENT_ID}
        return bool(found - {i for p in pieces for i in scanner.strong_ids(scanner.matching(p))})

    return heals


def _small_text(
    source, heals=None
) -> tuple[str | None, list[int], dict[int, str], BinaryIO | None]:
    """A paste, a small file or a short stream (stdin) as text cleaned by pasted.clean_lines,
    with each line's number in the input and the compose service of each line where several
    are interleaved (pasted.compose_services); a big file as (None, [], {}, None) and a long
    stream as (None, [], {}, the whole stream again), both scanned as they are, except that a
    big log of JSON records comes back as a stream of their messages (RecordLines).
    """
    if isinstance(source, TextSource):
        if source.text is not None:
            raw = source.text
        elif source.path is not None and source.size_bytes() <= CLEAN_BYTES:
            raw = source.path.read_bytes().decode("utf-8", errors="replace")
        elif source.path is not None and _records_file(source.path):
            return None, [], {}, RecordLines(source.path.open("rb"), owned=True)
        else:
            return None, [], {}, None
    else:
        parts, size = [], 0
        while size <= CLEAN_BYTES:  # a stream may answer in short reads (pipes, LogStream)
            chunk = source.read(CLEAN_BYTES + 1 - size)
            if not chunk:
                break
            parts.append(chunk)
            size += len(chunk)
        head = b"".join(parts)
        if len(head) > CLEAN_BYTES:
            rejoined = _Rejoined(head, source)
            stream = RecordLines(rejoined) if looks_like_records(head[:SNIFF]) else rejoined
            return None, [], {}, stream
        raw = head.decode("utf-8", errors="replace")
    # a UTF-8 BOM (Notepad, PowerShell) is no part of a line, nor where `cat` joined two files
    raw = raw.removeprefix("\ufeff").replace("\n\ufeff", "\n")
    pairs = clean_lines(raw, heals)
    text = "\n".join(t for _, t in pairs)
    if raw and not raw.endswith("\n"):  # the paste may stop mid-word: without_cut_word says
        text += CUT_MARK
    services = compose_services(split_log_lines(raw)) if " | " in raw or "|\x1b" in raw else {}
    return text, [n for n, _ in pairs], services, None


CUT_MARK = "\x00cut"  # ends a small input's text when the input did not end with a newline
LAST_WORD = re.compile(r"([A-Za-z]{2,})$")


def without_cut_word(text: str, entries: dict) -> str:
    """The text without its last word when the paste stopped in the middle of it (no newline
    after it, and the word is no word the wiki knows but begins one: `... CUDA out of mem`): a
    fragment is a word no entry holds, which would count against every entry.
    """
    if not text.endswith(CUT_MARK):
        return text
    text = text[: -len(CUT_MARK)]
    # the last word only: searched over the whole text, `[A-Za-z]{2,}$` is tried from every
    # letter of every run of letters (40,000 letters: 6 s), so only the text's end is read
    m = LAST_WORD.search(text, max(len(text) - LAST_WORD_CHARS, 0))
    if m is None or (m.start() > 0 and text[m.start() - 1] in _LETTERS):
        return text  # (a "word" longer than LAST_WORD_CHARS is no cut word the wiki knows)
    word = m.group(1).lower()
    stems = {stem for found in _vocabulary(entries).values() for stem in found}
    if word[:STEM] in stems:
        return text
    if any(stem.startswith(word) for stem in stems):
        return text[: m.start()].rstrip()
    return text


LAST_WORD_CHARS = 64  # longer than any word a runbook holds
_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def _records_file(path: Path) -> bool:
    with path.open("rb") as fh:
        return looks_like_records(fh.read(SNIFF))


class _Rejoined:
    """A stream whose first bytes were already read: those, then the rest."""

    def __init__(self, head: bytes, rest: BinaryIO):
        self._head, self._rest = head, rest

    def read(self, size: int = -1) -> bytes:
        if self._head:
            chunk = self._head if size < 0 else self._head[:size]
            self._head = self._head[len(chunk) :]
            return chunk
        return self._rest.read(size)


def explain(
    source: TextSource | BinaryIO,
    entries: dict,
    *,
    limit: int = 5,
    wiki_dirs: list[str] | None = None,
    workers: int = 1,
    name: str | None = None,
    fusion: Fusion = FUSION,
) -> Explanation:
    """Which entries explain the input, best first, each with a confidence; an abstention
    (`how` "none") when no entry is confident enough.

    Every piece of evidence is fused into one ranking: signature hits (weighted by how
    specific the signature is), the text relevance of the salient lines to each entry (the
    wiki search), the cause graph (runbook front matter), and recency.
    """
    from llmdoctor.render.fix_text import display_lines

    label = name or getattr(source, "name", None) or "<input>"
    gathered = gather(source, entries, limit=limit, wiki_dirs=wiki_dirs, workers=workers)
    result = decide(gathered, entries, label, limit=limit, fusion=fusion)
    for m in (*result.matches, *result.notes, *result.below_threshold):
        entry = entries.get(m.id)
        if entry is not None:
            m.fix_steps, m.fix_left_out = shown_fix_steps(entry, (e.text for e in m.evidence))
            m.fix = display_lines(m.fix_steps, None)
    # another engine's log: its own settings for the vLLM flags the Fix names, told beside it
    engine = engine_of(
        gathered.reading.lines or [e.text for m in result.matches for e in m.evidence]
    )
    if engine is not None:
        for m in (*result.matches, *result.notes):
            if flags := their_flags(engine, m.fix):
                m.engine, m.engine_flags = engine.name, flags
    return result


@dataclass
class Gathered:
    """What explain read and searched, before any weighing: the one pass over the input and
    the wiki search of its error lines."""

    reading: _Reading
    query: str  # the error lines, as searched for a long log
    searched: str  # what was searched
    results: list  # the wiki search's results, best first
    wiki_dirs: list[str] | None = None
    cause_searches: dict[str, list] = field(default_factory=dict)  # error lines -> results
    cut_traceback: Evidence | None = None  # the header of a traceback the input stops inside
    cut_frame: Evidence | None = None  # ... and the last frame it shows: where it stopped


def gather(
    source: TextSource | BinaryIO,
    entries: dict,
    *,
    limit: int = 5,
    wiki_dirs: list[str] | None = None,
    workers: int = 1,
) -> Gathered:
    """Read the input once and search the wiki for its error lines."""
    reading, _ = read_input(source, entries, workers)
    query = _query(reading)
    searched = _search_text(reading, query)
    results = _search(searched, max(limit, 10) * 2, wiki_dirs) if searched else []
    header, frame = _cut_traceback(reading)
    return Gathered(
        reading, query, searched, results, wiki_dirs, cut_traceback=header, cut_frame=frame
    )


def decide(
    gathered: Gathered,
    entries: dict,
    label: str,
    *,
    limit: int = 5,
    fusion: Fusion = FUSION,
    graph: CauseGraph | None = None,
) -> Explanation:
    """The ranking, the confident matches and the abstention, from what was gathered (each
    match's Fix text is left to `explain`: rendering it is most of the cost of a decision, and
    the calibration makes thousands; it passes the entries' `graph` too)."""
    reading, query = gathered.reading, gathered.query
    graph = graph or CauseGraph.from_entries(entries)
    ranked = fuse(reading, entries, gathered.results, query or gathered.searched, fusion, graph)
    lines_that_prove = [h for h in reading.hits.values() if not _stall_only(h)]
    if not (lines_that_prove or _beyond_access_errors(reading.salient)):
        # no line looks wrong but what clients were answered (or one stalled interval, which
        # `one_stalled_interval` holds a guess): text alone names guesses only
        for m in ranked:
            if m.how == "search" and m.confidence > fusion.no_error_guess:
                m.hold_at(fusion.no_error_guess)
    other_status_guesses(ranked, reading.text or query, entries, fusion)
    unnamed_guesses(ranked, gathered.searched or query, entries, fusion)
    cut_before_the_cause(ranked, gathered.cut_traceback, graph, fusion)
    ruled_out_guesses(ranked, reading, entries, fusion)
    numbers_rule_out(ranked, reading, fusion, entries)
    overruled_signatures(ranked, reading, entries, fusion)
    frames_of_a_stop(ranked, reading, fusion)
    one_stalled_interval(ranked, reading)
    confident = [m for m in ranked if m.confidence >= fusion.confident]
    weak = [m for m in ranked if m.confidence < fusion.confident]
    notes = configuration_notes(confident, reading, entries)
    confident = [m for m in confident if m not in notes]
    how = "none"
    if confident:
        how = "signatures" if confident[0].how == "signature" else "search"
    salient = reading.salient if how != "signatures" else []
    # lines read as wrong that are no error after all (the count says whether all were kept)
    set_aside = 0
    if notes:  # a note's own remark on the setting is no error line, nor a clean stop's notices
        remarks = {e.line for m in notes for e in m.evidence}
        windows = [w for m in notes if m.stopped_cleanly for w in _stop_windows(m, reading)]
        kept = [
            e for e in salient if e.line not in remarks and not _in_a_window(e, windows, reading)
        ]
        set_aside, salient = len(salient) - len(kept), kept
    # one per input line: a pasted event's row is also read as its Message alone (for the
    # search), a second reading of the same line, no second error
    once = list({e.line: e for e in reversed(salient)}.values())[::-1]
    set_aside, salient = set_aside + len(salient) - len(once), once
    if story := told_at_startup(confident, ranked, reading, entries):
        for kept in (weak, confident):
            if story in kept:
                kept.remove(story)
        confident[0] = story  # the lines are the story's now, as log-signatures tells them
        _explained_by_story(ranked, story.lines_of, story)
    folded_into_story(confident, ranked, reading, entries)
    ended_the_start(confident, reading, entries)
    served_again(confident, reading)
    ready_again(confident, reading)
    likely = None
    if confident and confident[0].how == "signature" and graph.is_consequence(confident[0].id):
        refusals = _tagged(entries, REFUSAL_TAGS)
        likely = likely_cause(gathered, confident[0], graph, ranked, refusals)
        if cause := _hinted_cause(likely, ranked, confident[0]):
            for kept in (weak, confident):
                if cause in kept:
                    kept.remove(cause)
            confident.insert(0, cause)
            likely = dataclasses.replace(likely, named_first=True)
    return Explanation(
        label,
        confident[:limit],
        how,
        salient,
        reading.matched_lines,
        total_matches=len(confident),
        warnings=[str(w) for w in [*reading.invalid, *unusable_holding_patterns(entries)]],
        below_threshold=weak[:limit],
        threshold=fusion.confident,
        likely_cause=likely,
        notes=notes[:limit],
        critical=any(
            m.how == "signature" and m.severity == "critical" and m.shown_as != "ended"
            for m in confident
        ),
        empty=reading.text is not None and not reading.text.strip(),
        error_lines=reading.error_lines - set_aside,
        read_whole=reading.text is not None,
        unexplained=_unexplained(reading.salient, confident),
        cut_traceback=gathered.cut_traceback,
        cut_frame=gathered.cut_frame,
        # said of the input whatever --limit shows
        unchecked=list(
            dict.fromkeys([m.unchecked for m in ranked if m.unchecked] + _tail_unread(reading))
        ),
    )


def _tail_unread(reading: _Reading) -> list[str]:
    """What the scan left unread past lines that say nothing failed (SignatureSet.tail_cut)."""
    if not reading.tail_cut:
        return []
    return [
        f"whether a line above them is an error: in a stretch of the log over {TAIL_PASSED_OVER} "
        "lines that say nothing failed (`0 failed`, `: No`) came last, and the lines above them "
        "were not all read"
    ]


def _cut_traceback(reading: _Reading) -> tuple[Evidence | None, Evidence | None]:
    """The header of the traceback the kept text stops inside and the last frame it shows
    (where the failure happened, its exception unread); (None, None) when it stops in none."""
    if reading.text is None:
        return None, None
    texts = reading.text.rstrip().split("\n")
    at = ends_inside_traceback(texts, without=_after_kubectl)
    if at is None:
        return None, None

    def number(i: int) -> int:
        return reading.numbers[i] if reading.numbers else i + 1

    frame = next((i for i in range(len(texts) - 1, at, -1) if frame_parts(texts[i])), None)
    return (
        Evidence(number(at), texts[at][:MAX_TEXT]),
        None if frame is None else Evidence(number(frame), texts[frame].strip()[:MAX_TEXT]),
    )


def frame_parts(text: str) -> tuple[str, str, str] | None:
    """(file, line, function) of a traceback's frame line (`File "/…/vllm/engine/llm_engine.py",
    line 364, in _initialize_kv_caches`), or None. Read by its last `", line ` (Python leaves a
    `"` in a path as it is): one pass over the line, whatever it holds."""
    start, end = text.find('File "'), text.rfind('", line ')
    if start < 0 or end <= start:
        return None
    found = FRAME_TAIL.match(text, end + len('", line '))
    return (text[start + len('File "') : end], *found.groups()) if found else None


FRAME_TAIL = re.compile(r"([0-9]+), in ([^\s]+)")


def _unexplained(salient: list[Evidence], confident: list[Match]) -> list[Evidence]:
    quoted = {e.line for m in confident for e in m.evidence}
    return [e for e in salient if e.line not in quoted]


def told_at_startup(
    confident: list[Match], ranked: list[Match], reading: _Reading, entries: dict
) -> Match | None:
    """The entry that tells the story when the first confident match's lines come while the
    server is starting (`wiki/server_phase.py`: its entry's `at_startup`, a start-up line in the
    input read whole, nothing served before the match's first line, nor before its last, in that
    line's pod): it takes that match's place and lines (`Match.lines_of` names whose they were);
    None otherwise.
    """
    if not confident or confident[0].how != "signature" or reading.text is None:
        return None
    first = confident[0]
    story_id = startup_story(entries, first.id)
    if story_id is None or not first.evidence:
        return None
    if not _came_at_startup(first, reading):
        return None
    return _retold(first, story_id, ranked, entries, STARTUP_RETOLD)


def _came_at_startup(match: Match, reading: _Reading) -> bool:
    """Whether a match's first line and its last came while the server started (a start that
    did not fit, then, restarted, an OOM while serving is the runtime OOM's story, the newest
    failure); each read in its own pod's lines: another pod having served says nothing of this
    one's start."""
    first = min(match.evidence, key=lambda e: e.line)
    last = max(match.evidence, key=lambda e: e.line)
    return all(during_startup(reading.pod_lines(e.line, e.text), e.line) for e in {first, last})


def folded_into_story(
    confident: list[Match], ranked: list[Match], reading: _Reading, entries: dict
) -> None:
    """A confident match below the entry its `at_startup` names, that entry confident by its own
    lines (vLLM's `CUDA out of memory occurred when warming up sampler` above the OOM it
    wraps), whose lines all came while the server started: its lines are that story's, not a
    second failure (`CUDA out of memory while serving`); it is left out, and what it explained
    the story explains."""
    if reading.text is None:
        return
    for m in list(confident[1:]):
        story_id = startup_story(entries, m.id)
        story = next((s for s in confident if s.id == story_id), None)
        if (
            story is None
            or m.how != "signature"
            or not m.evidence
            or confident.index(story) > confident.index(m)
            or not _came_at_startup(m, reading)
        ):
            continue
        confident.remove(m)
        _explained_by_story(ranked, m.id, story)


def _explained_by_story(ranked: list[Match], told_id: str, story: Match) -> None:
    """What the match whose lines `story` tells now (`told_id`) explained, the story explains."""
    for m in ranked:
        if told_id in m.explained_by and m is not story:
            m.explained_by = sorted({*m.explained_by} - {told_id} | {story.id})


# why a match tells another's lines (Match.retold_because)
STARTUP_RETOLD = "at start-up"
NUMBERS_RETOLD = "its numbers show little in use"


def _retold(first: Match, story_id: str, ranked: list[Match], entries: dict, because: str) -> Match:
    """`story_id`'s match told with `first`'s lines, just above it (as log-signatures moves an
    entry's hits to another); `Match.lines_of` names whose lines they were."""
    story_entry = entries[story_id]
    story = next((m for m in ranked if m.id == story_id), None) or Match(
        story_id, story_entry.title, story_entry.severity, "signature"
    )
    story.how, story.severity = "signature", story_entry.severity
    story.count, story.evidence = first.count, list(first.evidence)
    story.confidence = min(first.confidence + 0.001, 1.0)
    story.score = round(100 * story.confidence, 1)
    story.snippet, story.lines_of, story.retold_because = "", first.id, because
    story.explained_by = [e for e in first.explained_by if e != story_id]
    return story


def one_stalled_interval(ranked: list[Match], reading: _Reading) -> None:
    """A signature match whose one line is a stats line of an interval without a token (and no
    later line shows generation: `_drop_stalls_that_ended` forgot those) is at most a warning:
    ten seconds of nothing generated at the end of a log is how a wedge begins and how a pause
    looks; the next interval tells them apart, one line does not.
    """
    for m in ranked:
        hits = reading.hits.get(m.id)
        if m.how == "signature" and hits is not None and _stall_only(hits):
            m.severity = _at_most_warning(m.severity)


def _hinted_cause(
    likely: LikelyCause | None, ranked: list[Match], consequence: Match
) -> Match | None:
    """The entry named as the likely cause's, ranked first, when it also has a hint on that very
    line: three pieces of evidence agree (the hint on the first error line, the wiki search of the
    lines from there, the cause graph: it explains the consequence named first), where a hint
    alone stays a guess. Ranked just above the consequence and at most a warning (no signature
    proves it); None when any of the three is missing.
    """
    if likely is None or likely.entry_id is None:
        return None
    cause = next((m for m in ranked if m.id == likely.entry_id), None)
    if cause is None or cause.how != "search" or not cause.count:
        return None
    if not any(e.line == likely.line for e in cause.evidence):
        return None
    cause.confidence = min(consequence.confidence + 0.001, 1.0)
    cause.score = round(100 * cause.confidence, 1)
    consequence.explained_by = sorted({*consequence.explained_by, cause.id})
    return cause


# an HTTP error status as logs and client errors state it: an access log's `HTTP/1.1" 429`, a JSON
# body's `"code": 401`, the OpenAI client's `Error code: 404`, `status code 500`, `503 Service
# Unavailable`; and the statuses an entry's title says it answers with ("(HTTP 400)", "(401/403")
HTTP_STATUS = re.compile(
    r"HTTP/[0-9.]+\" ([45][0-9]{2})\b|[\"']code[\"']: ?([45][0-9]{2})\b"
    r"|[Ee]rror code:? ([45][0-9]{2})\b|[Ss]tatus[ _]?[Cc]ode:? ?([45][0-9]{2})\b"
    r"|\b([45][0-9]{2}) (?:Bad Request|Unauthorized|Forbidden|Not Found|Too Many Requests"
    r"|Internal Server Error|Bad Gateway|Service Unavailable|Gateway Time-?out)"
)
TITLE_STATUS = re.compile(r"\b([45][0-9]{2})\b")


def other_status_guesses(ranked: list[Match], text: str, entries: dict, fusion: Fusion) -> None:
    """A text-only match (no signature, no hint) whose entry says which HTTP status it answers
    with is held below the threshold when the input states HTTP error statuses and none is one of
    them: an OpenAI-style body shares most of its words with every HTTP entry, its status does not
    (a provider's 429 is no missing chat template, whatever else the body says).
    """
    stated = {code for m in HTTP_STATUS.finditer(text) for code in m.groups() if code}
    if not stated:
        return
    for m in ranked:
        if m.how != "search" or m.count or m.confidence < fusion.confident:
            continue
        named = set(TITLE_STATUS.findall(getattr(entries.get(m.id), "title", "")))
        if named and not named & stated:
            m.hold_at(fusion.weak_ceiling)


def ruled_out_guesses(
    ranked: list[Match], reading: _Reading, entries: dict, fusion: Fusion
) -> None:
    """A text-only match stays a guess when one of the error lines is one its entry's cause never
    prints (its `ruled_out_by` front matter): the words fit, what the line proves does not (an
    undefined C++ symbol in a compiled extension shares its words with the driver entry, yet no
    driver entry point is a mangled C++ name). A signature match is never held back by it.
    """
    lines = _holding_lines(reading)
    for m in ranked:
        if m.how != "search" or m.confidence < fusion.confident:
            continue
        patterns = holding_patterns(entries.get(m.id))
        if any(p.search(line) for p in patterns for line in lines):
            m.hold_at(fusion.weak_ceiling)


def numbers_rule_out(ranked: list[Match], reading: _Reading, fusion: Fusion, entries: dict) -> None:
    """A signature match stays a guess when PyTorch's numbers on its OOM lines contradict it
    (`torch_oom.RULED_OUT_BY_NUMBERS`, as log-signatures holds it): the GPU short, not
    fragmented; no other process holding a GiB. The OOM entry, which matched the same lines,
    leads. vLLM's free-memory check with no more in use than its own start-up holds
    (vllm_memory_check) is the start-up entry's to tell, with those lines, in that place. A
    message a reporter wrapped by hand is read whole (`_numbers_message`)."""
    from llmdoctor.parsers.torch_oom import RULED_OUT_BY_NUMBERS
    from llmdoctor.parsers.vllm_memory_check import STARTUP_ENTRY, parse_free_memory_check

    for m in list(ranked):
        told = RULED_OUT_BY_NUMBERS.get(m.id)
        messages = [_numbers_message(reading, e) for e in m.evidence] if told else []
        if told is None or not told(messages):
            continue
        checked = any(parse_free_memory_check(t) for t in messages)
        if checked and m.how == "signature" and STARTUP_ENTRY in entries:
            story = _retold(m, STARTUP_ENTRY, ranked, entries, NUMBERS_RETOLD)
            if story in ranked:
                ranked.remove(story)
            ranked.insert(ranked.index(m), story)
        _held_back(m, ranked, fusion)


OOM_WRAPPED_WITHIN = 4  # lines above a figure of PyTorch's message where its start may be
CHECK_WRAPPED_WITHIN = 2  # lines below vLLM's free-memory check where its figures may go on


def _numbers_message(reading: _Reading, evidence: Evidence) -> str:
    """The message whose numbers `evidence` quotes, where a reporter wrapped it by hand read
    whole: PyTorch's OOM from its `out of memory` line above (`_oom_message`), vLLM's
    free-memory check with the lines below that carry its utilization."""
    from llmdoctor.parsers.vllm_memory_check import parse_free_memory_check

    text = evidence.text
    if "on startup is less than desired" not in text or parse_free_memory_check(text):
        return _oom_message(reading, evidence)
    below = [  # a blank line between is passed over, a collector's prefix and tag read away
        _bare(t).strip()
        for n, t in reading.numbered()
        if evidence.line < n <= evidence.line + CHECK_WRAPPED_WITHIN + 1 and t.strip()
    ]
    return " ".join([text.strip(), *below[:CHECK_WRAPPED_WITHIN]])


def _oom_message(reading: _Reading, evidence: Evidence) -> str:
    """The OOM message whose figure `evidence` quotes: its line, or where a reporter wrapped the
    message by hand (the figure on a line of its own), that line joined to those above it from
    the one that says `out of memory`."""
    if "out of memory" in evidence.text or not reading.lines:
        return evidence.text
    above: list[str] = []
    for number, text in reading.numbered():
        if number > evidence.line:
            break
        if number >= evidence.line - OOM_WRAPPED_WITHIN:
            above = [*above, text] if above or "out of memory" in text else above
    return " ".join(t.strip() for t in above) if above else evidence.text


def overruled_signatures(
    ranked: list[Match], reading: _Reading, entries: dict, fusion: Fusion
) -> None:
    """A signature match stays a guess when a line of the input says its lines mean another
    cause (its entry's `overruled_by`): NGC's `The NVIDIA Driver was not detected` banner, and
    the CUDA runtime's `driver version is insufficient` below it is no old driver but none. It
    no longer explains the others; the entry whose signature the overruling line is leads."""
    held = [
        m
        for m in ranked
        if m.how == "signature" and holding_patterns(entries.get(m.id), "overruled_by")
    ]
    if not held:
        return
    lines = _holding_lines(reading)
    for m in held:
        patterns = holding_patterns(entries.get(m.id), "overruled_by")
        if any(p.search(line) for p in patterns for line in lines):
            _held_back(m, ranked, fusion)


def _holding_lines(reading: _Reading) -> list[str]:
    """The lines a holding pattern is looked for in: the error lines and the whole input, or on
    an input too big to read whole, the lines the entries' signatures and hints kept."""
    if reading.text is not None:
        return [e.text for e in reading.salient] + split_log_lines(reading.text)
    kept = [t for h in reading.hits.values() for _, t in (*h.first, *h.last)]
    return [e.text for e in reading.salient] + kept


def frames_of_a_stop(ranked: list[Match], reading: _Reading, fusion: Fusion) -> None:
    """A signature match whose every line is a traceback's frame or code line (engine-dead's
    `… core.py", line N, in run_busy_loop`, tokenizer-problem's `TokenizerFast.from_file(`)
    stays a guess when the input holds a stop (`KeyboardInterrupt`, `SystemExit`) or a stack
    dumped on purpose (logging's `Stack (most recent call last):`, gdb's `Traceback (most recent
    call first):`): those frames may belong to that stop or dump, which is no failure."""
    framed = [
        m
        for m in ranked
        if m.how == "signature"
        and m.evidence
        and all(
            TRACEBACK_WHERE.search(e.text) or FRAME_CODE.match(_message(e.text)) for e in m.evidence
        )
    ]
    if framed and any(STOP_OR_DUMP.search(line) for line in _holding_lines(reading)):
        for m in framed:
            _held_back(m, ranked, fusion)


# a line a stop or a dump prints: the exception a signal or an exit raises alone on its line, a
# stack printed without an error (logging's stack_info, gdb's py-bt)
STOP_OR_DUMP = re.compile(
    r"(^|\] )(KeyboardInterrupt|SystemExit)\b\s*(:|$)|Stack \(most recent call last\)"
    r"|Traceback \(most recent call first\)"
)
# a traceback's code line under its frame: indented, as Python prints it
FRAME_CODE = re.compile(r"^\s{4,}\S")


def _held_back(m: Match, ranked: list[Match], fusion: Fusion) -> None:
    """A signature match held to a guess: no longer what explains the others."""
    m.hold_at(fusion.weak_ceiling)
    for other in ranked:
        other.explained_by = [e for e in other.explained_by if e != m.id]


NAMING_SHARE = 0.1  # a word in the names of more entries than this names none of them
# what a traceback says of where, never of what: its header (every traceback's `most recent
# call last`) and its frames (`File "…/http_parsing_utils.py", line 45, in _read_request_body`:
# a function's name is no word of the error); its code lines and the error itself still count
TRACEBACK_WHERE = re.compile(
    r"Traceback \(most recent call last\):?|\bFile [\"“][^\"”\n]*[\"”], line [0-9]+(, in [^\n]*)?"
)


def unnamed_guesses(ranked: list[Match], text: str, entries: dict, fusion: Fusion) -> None:
    """A text-only match (no signature, no hint) stays a guess when the input holds no word that
    names the entry: a word of its id, title or aliases that few other entries' names hold. It
    shares words with what the entry says, not with what it is (a gateway's 401 `Invalid
    authentication credentials` is no Hugging Face gated repo, however close the Hub's wording).
    """
    naming = _naming_stems(entries)
    words = _stems(TRACEBACK_WHERE.sub(" ", text))  # every word, `/dev/shm`'s too
    for m in ranked:
        if m.how != "search" or m.count or m.confidence < fusion.confident:
            continue
        named = naming.get(m.id, frozenset())
        if named and not words & named:
            m.hold_at(fusion.weak_ceiling)


def cut_before_the_cause(
    ranked: list[Match], cut: Evidence | None, graph: CauseGraph, fusion: Fusion
) -> None:
    """A consequence (engine-dead, a pod not ready …) guessed from words alone stays a guess in
    an input that stops inside a traceback: the lines it read say what followed, the exception
    that says why was cut away (`EngineCore failed to start.` and a traceback's header)."""
    if cut is None:
        return
    for m in ranked:
        if m.how == "search" and graph.is_consequence(m.id) and m.confidence >= fusion.confident:
            m.hold_at(fusion.weak_ceiling)


_NAMING: dict[tuple, dict[str, frozenset[str]]] = {}


def _naming_stems(entries: dict) -> dict[str, frozenset[str]]:
    """Per entry, the stems of its id, title and aliases that few other entries' names hold."""
    key = tuple(
        (entry_id, e.title, tuple(getattr(e, "aliases", ()))) for entry_id, e in entries.items()
    )
    if key not in _NAMING:
        names = {i: _stems(" ".join([i, title, " ".join(aliases)])) for i, title, aliases in key}
        common = max(1, int(NAMING_SHARE * len(names)))
        count: dict[str, int] = {}
        for stems in names.values():
            for stem in stems:
                count[stem] = count.get(stem, 0) + 1
        _NAMING.clear()  # one library at a time
        _NAMING[key] = {
            i: frozenset(s for s in stems if count[s] <= common) for i, stems in names.items()
        }
    return _NAMING[key]


# how a server logs the configuration it starts with, and remarks on it (V0's `Since,
# enforce-eager is enabled, async output processor cannot be used` is a WARNING)
CONFIG_LEVELS = ("INFO", "DEBUG", "WARNING", "WARN")
CONFIG_TAG = "config"  # an entry about how the server is set up, not about a state it is in


def configuration_notes(confident: list[Match], reading: _Reading, entries: dict) -> list[Match]:
    """The confident matches that are notes, not what failed: when no line of the input looks
    wrong but lines logged as warnings or notices, a warning-level entry about the configuration
    (tagged `config`) whose signature
    matched only lines the server logged at INFO, DEBUG or WARNING, or lines with no level (a
    config line wrapped by the terminal), such as vLLM's `Cudagraph is disabled under eager mode`
    on a healthy start-up. A log with an error line other than those keeps them as matches: there
    the setting may be why; but a performance setting (tagged `performance` too: eager mode)
    makes a server slow and raises nothing, so beside an exception raised (`OSError: …
    GLIBC_2.32' not found`), where no error line is a symptom of slowness (a timeout, a 502-504,
    a deadline) nor names the setting (`enforce_eager is not supported with …`), it stays a note.
    A state logged at INFO (a queue of 951 waiting requests) is no note.
    """
    config = [
        m
        for m in confident
        if m.how == "signature"
        and m.severity == "warning"
        and CONFIG_TAG in getattr(entries.get(m.id), "tags", ())
        and m.evidence
        and all(
            (level := LEVEL.search(e.text)) is None or level.group(1) in CONFIG_LEVELS
            for e in m.evidence
        )
    ]
    # the server's own remark on the setting may read as an error line (V0's `cannot be used`);
    # a line the server logged as a warning or a notice (the ulimit it could not raise, a
    # library not preloaded) is no failure here, as after a stop
    remarks = {e.line for m in config for e in m.evidence}
    failing = reading.fails_beside(remarks)
    stopped = _tagged(entries, {STOPPED_TAG})
    clean = _stops_nothing_failed_after([m for m in config if m.id in stopped], confident, reading)
    slow_only = _tagged(entries, {PERFORMANCE_TAG}) - stopped
    return [
        m
        for m in config
        if m in clean
        or (
            m.id not in stopped
            and (
                not failing
                or (m.id in slow_only and _raised_not_slow(reading, remarks, entries.get(m.id)))
            )
        )
    ]


PERFORMANCE_TAG = "performance"  # an entry about how fast the server is, not whether it works
# what a server too slow for its clients logs: a wait that ran out, a gateway's 502-504
SLOWNESS = re.compile(
    r"[Tt]ime[ds]?[ -]?out|[Tt]iming out|[Dd]eadline|\b50[234]\b|too (slow|long)|\b[Ss]low\b"
)


def _raised_not_slow(reading: _Reading, lines: set[int], entry) -> bool:
    """Whether, of the lines read as wrong other than `lines` (every one of them kept), one is
    an exception raised (its name and message: `OSError: …`) and none says the server was slow
    or names the setting (one of the entry's ASCII aliases: `enforce_eager`)."""
    if reading.error_lines > len(reading.salient):
        return False
    beside = [
        e.text for e in reading.salient if e.line not in lines and not _warning_or_notice(e.text)
    ]
    names = [a.lower() for a in getattr(entry, "aliases", ()) if a.isascii() and len(a) > 4]
    return any(PYTHON_EXCEPTION.search(_message(t)) for t in beside) and not any(
        SLOWNESS.search(t) or any(n in t.lower() for n in names) for t in beside
    )


def _stops_nothing_failed_after(
    stops: list[Match], confident: list[Match], reading: _Reading
) -> list[Match]:
    """A stop sent from outside after which nothing looks wrong (a drain that finished, an idle
    server stopped) is a note, whatever warnings the server logged before it: nothing failed.
    An error line (at ERROR or above, or with no level), a refused or failed request, vLLM
    saying it aborted requests in flight (at INFO), or another entry's signature after it and
    before the server starts again keeps it a match (what followed is the stop's doing, or a
    failure of its own); a start-up's warnings after a restart do not.
    """
    access = compiled(ACCESS_ERROR)
    notes = []
    for stop in stops:
        windows = _stop_windows(stop, reading)
        wrong = any(
            _in_a_window(e, windows, reading) and (_states_error(e.text) or access.search(e.text))
            for e in reading.salient
        )
        if not wrong and reading.text is not None and "aborting in-flight" in reading.text:
            wrong = any(
                ABORTED_IN_FLIGHT.search(t) and _in_a_window(Evidence(n, t), windows, reading)
                for n, t in reading.numbered()
            )
        later = any(
            m is not stop
            and m.how == "signature"
            and any(_in_a_window(e, windows, reading) for e in m.evidence)
            for m in confident
        )
        if not wrong and not later:
            stop.failed_before = _failed_before(stop, reading)
            stop.stopped_cleanly = not stop.failed_before
            own = {e.line for e in stop.evidence}
            stop.failed_elsewhere = not stop.failed_before and any(
                e.line not in own and _server_failed(e.text) for e in reading.salient
            )
            notes.append(stop)
    return notes


def _failed_before(stop: Match, reading: _Reading) -> bool:
    """Whether, before one of the stop's lines and since the server last started, a line read
    as wrong came (an error line, a request the server failed: a 5xx; a client's 404 is none),
    or more lines were read as wrong than kept (then it is not known that none did)."""
    if reading.error_lines > len(reading.salient):
        return True
    for said in {e.line: e for e in stop.evidence}.values():
        own = reading.origin(said.line, said.text)
        began = max(
            (s for s in reading.starts_of(said.line, said.text) if s < said.line), default=0
        )
        if any(
            began <= e.line < said.line
            and reading.origin(e.line, e.text) == own
            and _server_failed(e.text)
            for e in reading.salient
        ):
            return True
    return False


# an access line of a request the server failed (not one the client got wrong)
SERVER_FAILED = re.compile(r'HTTP/[0-9.]+" 5[0-9][0-9]\b')


def _server_failed(text: str) -> bool:
    """Whether a line says the server failed: an error line, or a request it answered with a 5xx
    (a client's 404 is the client's)."""
    return _states_error(text) or bool(SERVER_FAILED.search(text))


# vLLM's engine core aborting what was running when it was told to stop (core.py, at INFO)
ABORTED_IN_FLIGHT = re.compile(r"aborting in-flight requests count=[1-9]")


# the lines that say something went wrong, as opposed to the wider salient lines (a warning, a
# "falling back", a probe's timeout): the first of them before a consequence is its likely cause
ERROR_LINE = re.compile(
    r"\b(ERROR|CRITICAL|FATAL|PANIC|Fatal)\b|[A-Za-z](Error|Exception)(_[A-Z][A-Za-z0-9]*)?(:|$| )"
    r"|[Ss]egmentation fault|core dumped|\b[Kk]illed\b|\bOOM|[Oo]ut of memory|[Ee]rror:"
    r"|\b[Ff]ailed to\b"
)
CAUSE_QUERY_LINES = 4  # error lines from the first one on, searched for an entry that fits
# a logger's prefix up to its source location (vLLM's `ERROR 01-08 17:16:15 [core.py:123] `):
# what follows is the message, indented when it is a traceback's frame or code line
LOG_PREFIX = re.compile(r"^.{0,160}?\b[\w.-]+\.(py|cc|cpp|cu|h|c|go|rs):[0-9]+\[?\]")
# a log line's own level: the first level word in it (vLLM's `WARNING 12-02 …`, glog's `W1202`
# is left to ERROR_LINE); a warning or a note that mentions "failed to" is no error
LEVEL = re.compile(r"\b(DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)\b")


def likely_cause(
    gathered: Gathered,
    consequence: Match,
    graph: CauseGraph,
    ranked: list[Match],
    refusals: frozenset[str] | set[str] = frozenset(),
) -> LikelyCause | None:
    """The first error line before the first line a signature of the consequence matched, that
    is no line of what follows from the consequence nor a request refused with a 4xx (an entry
    of `refusals` matched it: the server answered and went on), and the entry that explains the
    consequence when the wiki search finds it first for those lines. None when no error line
    comes before it.
    """
    reading = gathered.reading
    if not consequence.evidence:
        return None
    before = min(e.line for e in consequence.evidence)
    downstream = {  # lines of entries the consequence itself explains: effects, not the cause
        e.line
        for m in ranked
        if m.id != consequence.id
        and (
            graph.explains(consequence.id, m.id)
            or (m.id in refusals and not graph.explains(m.id, consequence.id))
        )
        for e in m.evidence
    }
    own = _own_traceback(reading, before)
    wrappers = _wrapper_headers(reading, before)
    lines = [
        e
        for e in _error_lines(reading, before)
        if e.line < (own or before)
        and e.line not in downstream
        and e.line not in wrappers
        and _says_why(e.text)
        and not SERVING_LAYER.search(e.text)
        and not CANCELLED.match(_bare(e.text).strip())
    ]
    first = next((e for e in lines if _states_error(e.text)), None)
    in_traceback = first is None
    if first is None:
        # nothing before it: the consequence's own first line may open the traceback of what it
        # died of (V1's `EngineCore encountered a fatal error.` over a `ValueError: …`)
        first = _opened_exception(reading, before, {e.line for e in consequence.evidence})
        if first is None:
            return None
        lines = [first]
    rest = lines[lines.index(first) :]
    end = _bare_exception_end(reading, first)
    raised_in = _raised_in(end)
    if statement := _failed_statement(reading, end):
        first, rest = statement, [statement, *rest]  # the bare exception says no more than it
    query = "\n".join(e.text for e in rest[:CAUSE_QUERY_LINES])
    results = gathered.cause_searches.get(query)
    if results is None:
        results = gathered.cause_searches[query] = _search(query, 5, gathered.wiki_dirs)
    top = results[0].id if results else None
    entry_id = top if top and graph.explains(top, consequence.id) else None
    # the search's first entry alone is a guess (it was the labelled cause in none of its 5
    # namings over the corpus and rounds 6-41): it is named only where a hint of it fires on
    # that very line
    hinted = any(m.id == entry_id and any(e.line == first.line for e in m.evidence) for m in ranked)
    return LikelyCause(
        consequence.id,
        first.line,
        first.text.strip(),
        entry_id if hinted else None,
        in_traceback=in_traceback,
        raised_in=raised_in,
    )


# a task cancelled because what it waited on went away (an engine that died under a request):
# an effect, never the cause
CANCELLED = re.compile(r"(asyncio\.(exceptions\.)?|concurrent\.futures\._base\.)?CancelledError\b")


# vLLM's OpenAI-serving layer logs what went wrong with one request (`[serving_chat.py:222] Error
# in preprocessing prompt inputs` and the refused request's traceback, a stream cut by the dead
# engine): the server answered it and went on; never the cause of an engine's failure
SERVING_LAYER = re.compile(r"\[serving_[a-z_]{1,40}\.py:[0-9]{1,6}\]")
# an exception raised with no message (`AssertionError`, `(VllmWorker rank=0 pid=4360)
# AssertionError`): Python printed the failed statement on the line above it
BARE_EXCEPTION = re.compile(r"^[A-Z][A-Za-z0-9_.]*(Error|Exception):?\s*$")
# the tag a process puts before each line of its output: vLLM's `(VllmWorker rank=0 pid=4360) `,
# torchrun's `[rank0]: `
PROCESS_TAG = re.compile(r"^(\([A-Za-z][^()]{0,60}\)|\[[A-Za-z]+[0-9]*\]:) ")


def _message(text: str) -> str:
    """A line without its logger prefix and process tag: what the program itself printed."""
    message = text[m.end() + 1 :] if (m := LOG_PREFIX.match(text)) else text
    return message[m.end() :] if (m := PROCESS_TAG.match(message)) else message


# what a logger puts before each line of one traceback it dumps: vLLM's `(VllmWorker rank=2
# pid=125) ERROR 06-05 06:18:13 [multiproc_executor.py:470] `, the same on every line of it
TRACEBACK_KEY = re.compile(r"^.{0,120}?\[[A-Za-z0-9_.-]+\.py:[0-9]+\] ")


def _position(reading: _Reading, line: int) -> int | None:
    """Where input line `line` sits in the kept text's lines (`reading.numbers`), or None."""
    return next((i for i, n in enumerate(reading.numbers) if n == line), None)


def _own_traceback(reading: _Reading, line: int) -> int | None:
    """The first line of the traceback that input line `line` ends, when a logger dumped it with
    one prefix on every line: its `Traceback (most recent call last):` and the message just
    above it (vLLM's `WorkerProc failed to start.`). That header is the error's own wrapper,
    never its cause. None when the line ends no such traceback or the input was not kept.
    """
    if reading.text is None:
        return None
    texts, numbers = reading.lines, reading.numbers
    at = _position(reading, line)
    if at is None or at >= len(texts):
        return None
    key = TRACEBACK_KEY.match(texts[at])
    if key is None:
        return _bare_traceback(texts, numbers, at)
    i = at
    while i > 0 and texts[i - 1].startswith(key.group()):
        i -= 1
        if texts[i][key.end() :].startswith("Traceback (most recent call last)"):
            header = i > 0 and texts[i - 1].startswith(key.group())
            return numbers[i - 1] if header else numbers[i]
    return None


# a server's own line just above the traceback of an error it caught: uvicorn's `ERROR:
# Exception in ASGI application`, asyncio's `Exception in callback …`, threading's `Exception in
# thread …`, Flask's `Exception on /generate [POST]`, TGI's launcher over its download's or a
# shard's output (`Download encountered an error:`, `Shard complete standard error output:`)
TRACEBACK_WRAPPER = re.compile(
    r"\bException (in ASGI application|in callback\b|in thread\b|on /)|\bUnhandled exception\b"
    r"|Download encountered an error:|Shard complete standard error output:"
)


# stern's prefix: `vllm-7b-5b8d9c7f6-w4nzp vllm ` (a pod name ending in the five characters
# Kubernetes draws for a generated name, from an alphabet without vowels and 0, 1, 3; then the
# container's name), after the namespace with `stern -A` (`serving vllm-7b-… vllm `)
STERN_POD = (
    r"(?:[a-z0-9][-a-z0-9]{0,62} )?"
    r"[a-z0-9][-a-z0-9.]{0,200}-[bcdfghjklmnpqrstvwxz2456789]{5} [a-z0-9][-a-z0-9]{0,62} "
)
# what kubectl logs (or stern) puts before every line (`--prefix`'s `[pod/x/c] `, `--timestamps`'
# RFC 3339)
KUBECTL_PREFIX = re.compile(
    rf"^(?:\[[^\]\s]{{1,200}}\] |{STERN_POD})?"
    r"(?:[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]{8,20}(?:Z|[+-][0-9:]{4,5}) (?:(?:stdout|stderr) [FP] )?)?"
)


# a traceback's first line: Python's, and an exception group's as Starlette prints it
TRACEBACK_START = re.compile(r"^ *(\+ )?(Exception Group )?Traceback \(most recent call last\)")


def _after_kubectl(text: str) -> str:
    """A line without what kubectl logs (or stern) put before it."""
    return text[KUBECTL_PREFIX.match(text).end() :]


def _bare(text: str) -> str:
    """A line without kubectl's prefix, a process tag (vLLM's `(APIServer pid=1) `) or a logger's
    prefix: what the program printed, its indent kept."""
    return _message(_after_kubectl(text))


def _bare_traceback(texts: list[str], numbers: list[int], at: int) -> int | None:
    """The first line of a traceback printed with no logger prefix of its own on each line that
    line `at` ends: its `Traceback (most recent call last):`, or a server's wrapper line just
    above it."""

    def frame(i: int) -> bool:  # a frame or its code line (some pastes lose the indent)
        bare = _bare(texts[i])
        return (
            bare[:1] in (" ", "\t")
            or bare.startswith('File "')
            or (i > 0 and _bare(texts[i - 1]).lstrip().startswith('File "'))
        )

    i = at
    while i > 0 and frame(i - 1):
        i -= 1
    if i == 0 or not TRACEBACK_START.match(_bare(texts[i - 1])):
        return None
    i -= 1
    return numbers[i - 1] if i > 0 and TRACEBACK_WRAPPER.search(texts[i - 1]) else numbers[i]


def _wrapper_headers(reading: _Reading, before: int) -> set[int]:
    """The input lines before `before` that are a server's wrapper line just above a traceback
    (uvicorn's `Exception in ASGI application`): the header of the error the traceback ends,
    whichever exception of a chain that is, never a cause of its own."""
    if reading.text is None:
        return set()
    texts, numbers = reading.lines, reading.numbers
    end = min(len(texts), len(numbers))
    out = set()
    for i in range(end - 1):
        if numbers[i] >= before:
            break
        if not TRACEBACK_WRAPPER.search(texts[i]):
            continue
        below = [_bare(t) for t in texts[i + 1 : min(i + 3, end)]]
        if TRACEBACK_START.match(below[0]):
            out.add(numbers[i])
        elif (
            below[0].startswith("handle: <") and len(below) > 1 and TRACEBACK_START.match(below[1])
        ):
            out |= {numbers[i], numbers[i + 1]}  # asyncio names the callback's handle between
    return out


MAX_TRACEBACK_LINES = 400  # how far a traceback is followed to its exception


def _opened_exception(reading: _Reading, line: int, taken: set[int]) -> Evidence | None:
    """The exception that ends the traceback input line `line` opens, logged with that line's
    prefix on each of its lines (the header on the line itself, `EngineCore hit an exception:
    Traceback …`, or on the next), when it is no line of the consequence (`taken`); None when the
    line opens no such traceback or the input was not kept."""
    if reading.text is None:
        return None
    numbers = reading.numbers
    at = _position(reading, line)
    if at is None or at >= len(reading.lines):
        return None
    lines = reading.lines

    def own(i: int) -> str:  # without kubectl's prefix (`--timestamps`' time differs per line)
        return _after_kubectl(lines[i])

    head = own(at)
    key = TRACEBACK_KEY.match(head)
    if key is None:
        # a traceback logged whole as one message (SGLang's `Scheduler hit an exception:
        # Traceback (most recent call last):`), its frames and exception unprefixed below it
        if not head.rstrip().endswith("Traceback (most recent call last):"):
            return None
        prefix, start = "", at + 1
    else:
        prefix, start = key.group(), at + 1
        if "Traceback (most recent call last)" not in head:
            if start >= len(lines) or not own(start)[len(prefix) :].startswith("Traceback"):
                return None
            start += 1
    for j in range(start, min(len(lines), len(numbers), at + MAX_TRACEBACK_LINES)):
        text = own(j)
        if not text.startswith(prefix):
            return None
        message = text[len(prefix) :]
        if message[:1] in (" ", "\t", "^", "~") or not message.strip():
            continue
        if not prefix and not PYTHON_EXCEPTION.match(message):
            if OTHER_PROCESS_LINE.match(message):
                continue  # another rank's line written between this traceback's lines
            return None  # no exception ends it here: cut, or not a traceback
        if numbers[j] in taken or not ERROR_LINE.search(message):
            return None
        return Evidence(numbers[j], lines[j][:MAX_TEXT])
    return None


# the line Python ends a traceback with: the exception's (dotted) name, then its message
PYTHON_EXCEPTION = re.compile(
    r"[A-Za-z_][A-Za-z0-9_.]*(Error|Exception|Exit|Interrupt)(_[A-Z][A-Za-z0-9]*)?(:|\s*$)"
)
# a line another process logged (a timestamp, a `[…]` or `(…)` tag, NCCL's `host:pid:tid [0]`)
OTHER_PROCESS_LINE = re.compile(
    r"[\[(]|[0-9]{4}-[0-9]{2}-[0-9]{2}|[A-Z]{4,8}\b|[A-Za-z0-9_.-]+:[0-9]+:[0-9]+ \["
)


def _failed_statement(reading: _Reading, end: tuple | None) -> Evidence | None:
    """The statement a traceback prints just above an exception raised with no message (a
    failed `assert`): that line, not the exception's bare name, says why. None when the error
    has a message, ends no traceback (`end`: `_bare_exception_end`'s answer), or its statement
    only raises it (`raise TimeoutError`: no more than its name).
    """
    if end is None or end[0] is None:
        return None
    return Evidence(reading.numbers[end[0]], reading.lines[end[0]].strip()[:MAX_TEXT])


def _raised_in(end: tuple | None) -> RaisedIn | None:
    """The last frame of the traceback an exception raised with no message ends (`TimeoutError`
    alone: where it was raised is all there is to say), its path from the package on; None when
    the exception has a message, ends no traceback (`end`: `_bare_exception_end`'s answer), or
    no frame is just above it."""
    if end is None or end[1] is None or not end[1].group(3):
        return None
    from llmdoctor.redact import redact_text

    frame = end[1]
    path = redact_text(PACKAGES.sub("", frame.group(1)))[:MAX_TEXT]
    return RaisedIn(redact_text(frame.group(3))[:MAX_TEXT], path, int(frame.group(2)))


# a statement that raises an exception and gives it nothing to say: `raise TimeoutError`,
# `raise ValueError()`, `raise RuntimeError from e`, a bare re-raise, a linter's comment after it
BARE_RAISE = re.compile(
    r"^raise(\s+[A-Za-z_][A-Za-z0-9_.]*(\(\))?(\s+from\s+[A-Za-z_][A-Za-z0-9_]*)?)?\s*(#.*)?$"
)
FRAME_SEARCHED = 4  # lines above an exception searched for its last frame (code line, carets)
# where a package's own files begin in a frame's path: shown from there on
PACKAGES = re.compile(r".*[/\\](site|dist)-packages[/\\]")


def _writer(text: str) -> tuple[str, bool]:
    """Who wrote a line, as a log that several processes write to says it: kubectl's or
    stern's pod prefix (`_pod`) and the process's tag (vLLM's `(VllmWorker rank=1 pid=4361) `,
    torchrun's `[rank1]: `), before or after a logger's prefix; and whether a logger wrote it
    (its prefix: a traceback a logger dumps has it on every line, one Python prints on none)."""
    pod = _pod(text)
    rest = _after_kubectl(text)
    logged = LOG_PREFIX.match(rest)
    if (tag := PROCESS_TAG.match(rest)) is None:
        tag = PROCESS_TAG.match(rest[logged.end() + 1 :] if logged else rest)
    return pod + (tag.group() if tag else ""), logged is not None


def _bare_exception_end(
    reading: _Reading, error: Evidence
) -> tuple[int | None, re.Match | None] | None:
    """Where an exception raised with no message ends its traceback, read on the lines above it
    that the same writer wrote (`_writer`: another worker's lines between passed over): (the
    index in `reading.lines` of the statement just above it, or None for a bare `raise` or
    none; the FRAME match of the traceback's last frame, or None). None when the error has a
    message, the input was not kept, or those lines are no traceback going up to its
    `Traceback (most recent call last):` or to the input's first line (a paste cut above it):
    a stack dumped on purpose (`Stack (most recent call last):`, a watchdog's) ends no
    exception's traceback.
    """
    if reading.text is None or not BARE_EXCEPTION.match(_bare(error.text).strip()):
        return None
    at = _position(reading, error.line)
    texts = reading.lines
    if at is None or at > len(texts):
        return None
    tag, logged = _writer(error.text)
    statement = frame = None
    code_lines = 0  # above the exception, before its frame (carets not counted)
    for i in range(at - 1, max(-1, at - 1 - MAX_TRACEBACK_LINES), -1):
        other, other_logged = _writer(texts[i])
        if other != tag:
            continue  # another process's line
        code = _bare(texts[i])
        # the same process's line with a logger's prefix where the exception has none, or
        # without one where it has one, is no line of its traceback
        foreign = other_logged != logged
        if frame is None:
            if not foreign and (found := FRAME.match(code)):
                frame = found
                continue
            if foreign or code_lines >= FRAME_SEARCHED or not code.startswith((" ", "\t")):
                return None
            if not code.strip().startswith(("^", "~")):
                code_lines += 1
                statement = i  # the topmost: where a statement over several lines begins
        elif not foreign and TRACEBACK_START.match(code):
            break
        elif foreign or not (FRAME.match(code) or code.startswith((" ", "\t"))):
            return None  # the frames go up to no traceback's header
    else:
        if at - 1 - MAX_TRACEBACK_LINES >= 0:
            return None  # no header within reach
    if statement is not None and BARE_RAISE.match(_bare(texts[statement]).strip()):
        statement = None
    return statement, frame


def _timeouts_are_settings(text: str) -> bool:
    """Whether every `timeout` in the line names a setting (TIMEOUT_SETTING) and the line does
    not say one ran out (TIMEOUT_RAN_OUT)."""
    return len(TIMEOUT.findall(text)) == len(TIMEOUT_SETTING.findall(text)) and not (
        TIMEOUT_RAN_OUT.search(text)
    )


def _states_error(text: str) -> bool:
    """Whether the line states an error (ERROR_LINE) at its own level, ERROR or above."""
    return bool(ERROR_LINE.search(text)) and not _below_error(text)


# an ERROR a server logs and then goes on without: vLLM's flash-attention version check
# (attention/utils/fa_utils.py logs it, asserts, catches its own AssertionError and leaves the
# choice of attention backend to the platform: FA2 on a pre-Ampere GPU, a T4)
FALLS_BACK = re.compile(r"Cannot use FA version [0-9]+ is not supported due to ")


def _falls_back(text: str) -> bool:
    return "Cannot use FA" in text and FALLS_BACK.search(text) is not None


def _no_failure(text: str) -> bool:
    """A line read as wrong that says nothing failed: a warning or a notice, or a server's
    remark on a choice it then makes without it (FALLS_BACK)."""
    return _warning_or_notice(text) or _falls_back(text)


def _warning_or_notice(text: str) -> bool:
    """Whether the line was logged below ERROR and is no request that failed (an access log's
    503, logged at INFO): a warning or a notice, whatever failure it mentions."""
    return _below_error(text) and not compiled(ACCESS_ERROR).search(text)


def _below_error(text: str) -> bool:
    """Whether the line's own log level is below ERROR (a WARNING that mentions a failure)."""
    level = LEVEL.search(text)
    return level is not None and level.group(1) in ("DEBUG", "INFO", "WARNING", "WARN")


# vLLM's dump of the engine's state when it fails (v1/engine/dump_input.py: its config, the
# scheduler's output and stats), logged at ERROR after whatever failed: every setting, no why
STATE_DUMP = re.compile(r"Dumping (input data|scheduler output|scheduler stats)\b")


def _says_why(text: str) -> bool:
    """False for a traceback's header, frame and code lines (they say where, not why), and for
    an engine's dump of its own state; whatever kubectl, a process tag or a logger put before
    the line."""
    message = _bare(text)
    if not message.strip() or message.startswith((" ", "\t")) or STATE_DUMP.match(message):
        return False
    return not message.startswith(('File "', "Traceback", "^", "~"))


def _error_lines(reading: _Reading, before: int) -> list[Evidence]:
    """The salient lines before input line `before`, first first: read again from a small
    input's text (the scan kept only the last few), from the kept salient lines of a big one.
    """
    if reading.text is None:
        return list(reading.salient)
    out = []
    for n, text in zip(reading.numbers, reading.lines, strict=False):
        if n >= before:
            break
        if text.lstrip().startswith("Traceback") or not _salient_set().match_line(text):
            continue
        if not_server_output(text):
            continue
        if _says_none(text):
            continue
        out.append(Evidence(n, text[:MAX_TEXT]))
    return out


_SALIENT_SET: list[SignatureSet] = []


def _salient_set() -> SignatureSet:
    if not _SALIENT_SET:
        _SALIENT_SET.append(SignatureSet([_salient_entry()]))
    return _SALIENT_SET[0]


def _query(reading: _Reading) -> str:
    """The lines that say something is wrong: the salient lines and the lines a signature
    fired on (never the healthy rest of the log), without "Traceback (most recent call last)".
    """
    lines = {e.line: e for e in reading.salient}
    for h in reading.hits.values():
        lines.update((e.line, e) for e in h.evidence())
    kept = [lines[n] for n in sorted(lines) if not lines[n].text.lstrip().startswith("Traceback")]
    return search_query(kept)


def _search_text(reading: _Reading, query: str) -> str:
    """What the wiki search ranks: a short paste whole, exactly as `wiki search -` would get
    it (even when no line of it looks wrong), so explain never ranks worse than that search; a
    long log by its salient lines.
    """
    if reading.text is not None and len(reading.text) <= WHOLE_QUERY_CHARS:
        return reading.text
    return query


def fuse(
    reading: _Reading,
    entries: dict,
    results: list,
    query: str,
    fusion: Fusion = FUSION,
    graph: CauseGraph | None = None,
) -> list[Match]:
    """One ranking of every entry with any evidence, best first (see the module docstring)."""
    f = fusion
    hits = reading.hits
    text = text_relevance(query, entries, results, f)
    by_last = sorted(hits, key=lambda i: hits[i].last_line)
    lateness = {i: (n + 1) / len(by_last) for n, i in enumerate(by_last)}
    snippets = {r.id: getattr(r, "snippet", "") for r in results}
    matches: list[Match] = []
    for entry_id in {*hits, *text}:
        entry = entries.get(entry_id)
        if entry is None:
            continue
        coverage, place, found, few = text.get(entry_id, (0.0, 0.0, 0.0, 0.0))
        h = hits.get(entry_id)
        killed_loading = died_silently = None
        unchecked = ""
        if h is not None and h.strong:
            specific = min(h.weight, SPECIFIC_CHARS) / SPECIFIC_CHARS
            confidence = (
                f.signature_base
                + f.signature_specific * specific
                + f.signature_text * min(coverage * found / f.text_evidence, 1.0)
                + f.recency * lateness[entry_id]
            )
            severity, how = entry.severity, "signature"
        else:
            evidence = min(coverage * found / f.text_evidence, 1.0) * few
            confidence = f.text_only * evidence * place**f.place_power
            if h is not None:
                # only weak signatures fired: a closer guess, never named on their word (the
                # text that agrees is mostly the very line the hint matched); a hint on a line
                # that is no error (a pasted command line) says less than one on an error line
                hint = f.weak_hit if h.on_error_line else f.weak_hit * f.hint_off_error
                # ... unless the hint is on an error line, the text alone already makes a
                # fair case (hint_text_floor) and the input has error lines the hint did not
                # fire on: two pieces of evidence, never the hinted line agreeing with itself
                lifted = h.on_error_line and (
                    (confidence >= f.hint_text_floor and reading.error_lines > h.error_lines)
                    or (confidence >= f.hint_stated_floor and h.states_error())
                )
                if h.on_error_line and (loading := _killed_while_loading(reading, h)):
                    hint, lifted, killed_loading = f.killed_loading, True, loading
                elif (
                    entry_id == SILENT_DEATH_ENTRY
                    and h.on_error_line
                    and (gone := _gone_in_start_up(reading, h))
                ):
                    # as sure as a kill read as it loaded: the death is stated, its reason not;
                    # a process that raised has its own error, the cause: never lifted then
                    died_silently = next(
                        (d for kind in gone if (d := _died_without_a_word(reading, *kind))), None
                    )
                    lifted = died_silently is not None
                    hint = f.killed_loading if lifted else hint
                elif entry_id == SILENT_DEATH_ENTRY and h.on_error_line and reading.text is None:
                    unchecked = _gone_unread(reading, h)
                ceiling = 1.0 if lifted else f.weak_ceiling
                confidence = min(confidence + hint, ceiling)
            severity = _at_most_warning(entry.severity)
            how = "search"
        matches.append(
            Match(
                id=entry_id,
                title=entry.title,
                severity=severity,
                how=how,
                confidence=round(min(confidence, 1.0), 3),
                count=h.count if h else 0,
                hint_lines=h.count - h.strong_count if h is not None and h.strong else 0,
                evidence=h.evidence(entry) if h else [],
                snippet="" if h is not None and h.strong else snippets.get(entry_id, ""),
                path=getattr(entry, "path", ""),
                killed_loading=killed_loading,
                died_silently=died_silently,
                unchecked=unchecked,
            )
        )
    graph = graph or CauseGraph.from_entries(entries)
    graph, failed_before = _stopped_from_outside(matches, entries, graph, reading)
    _causes_first(matches, graph)
    _killed_before_its_consequences(matches, graph)
    _outages_before_refusals(matches, entries, graph)
    _failures_before_the_stop(failed_before)
    _search_order(matches, {entry_id: t[1] for entry_id, t in text.items()})
    for m in matches:
        m.score = round(100 * m.confidence, 1)
    matches.sort(key=lambda m: (-m.confidence, -text.get(m.id, (0, 0))[1], m.id))
    return matches


def _killed_while_loading(reading: _Reading, h: _Hits) -> Evidence | None:
    """Whether an entry's hint fired on the input's last line (a bare shell prompt after it left
    out), a SIGKILL reported while the process loaded: a line of loading on it (tqdm's bar ends
    with no newline, `… 1/2 [00:10<00:10]Killed`) or among the LOADING_WITHIN lines before it,
    none of them saying the server came up or generated, and on no other error line (a line
    logged as a warning or a notice, vLLM's ulimit it could not raise, does not count): a
    process killed as it loaded (KILLED_LOADING). The line of loading, or None."""
    if reading.text is None or reading.fails_beside({h.last_line}):
        return None
    told = []  # the last lines with text, last first
    for number, text in reading.numbered_from_the_end():
        if text.strip() and not BARE_PROMPT.match(text):
            told.append((number, text))
            if len(told) > LOADING_WITHIN:
                break
    if not told or told[0][0] != h.last_line or not KILLED_LINE.search(told[0][1]):
        return None
    for number, text in told:
        if LOADING_LINE.search(text):
            return Evidence(number, text[:MAX_TEXT])
        if UP_LINE.search(text) or PROGRESS_LINE.search(text):
            return None
    return None


def _gone_in_start_up(
    reading: _Reading, h: _Hits
) -> list[tuple[GoneInStartUp, list[tuple[int, str]]]]:
    """Each process vLLM says is gone in start-up (GONE_IN_START_UP, a worker's kind first) with
    the lines that say so, when an entry's hint read the last of such lines, else []."""
    if reading.text is None or not any(_gone_said(h, last_only=True)):
        return []
    found = [
        (g, [(n, t) for n, t in reading.numbered() if g.said.search(t)]) for g in GONE_IN_START_UP
    ]
    return [(g, failed) for g, failed in found if failed]


def _gone_unread(reading: _Reading, h: _Hits) -> str:
    """What an input too big to read whole leaves unchecked when the hint read vLLM's line that
    a process is gone in start-up: whether it died without a word (its own lines are not kept).
    Nothing when a line an entry's signature matched comes before it: that is the cause, as
    `_died_without_a_word` reads it in an input read whole."""
    signed = _signed_lines(reading)
    for number, gone in _gone_said(h):
        if not _signed_before(signed, number):
            return (
                f"whether {gone.who} vLLM says is gone in start-up (line {number}) died "
                f"without a word: the input is over {CLEAN_BYTES // 2**20} MB, read as a stream"
            )
    return ""


def _gone_said(h: _Hits, last_only: bool = False) -> Iterator[tuple[int, GoneInStartUp]]:
    """The lines a hint kept (or only the last line it read) where vLLM says a process is gone
    in start-up, each with who is gone (GONE_IN_START_UP)."""
    for number, text in (*h.first, *h.last):
        if last_only and number != h.last_line:
            continue
        for gone in GONE_IN_START_UP:
            if gone.said.search(text):
                yield number, gone


def _died_without_a_word(
    reading: _Reading, gone: GoneInStartUp, failed: list[tuple[int, str]]
) -> SilentDeath | None:
    """Whether a process vLLM says is gone in start-up (`failed`: the lines that say so) left
    its own lines in the input, in that pod and that life of the server, and none of them is an
    error (nothing at ERROR, no traceback, no `WorkerProc failed to start.`, before or after
    vLLM's line; no untagged traceback that ends in an exception of its own, nor a line an
    entry's signature matched, before it; a life begins at LIFE_START): it died without a word,
    killed or crashed below Python. Only each pod's last such line is read: its latest start,
    an earlier one that died silently is history once a later one raised."""
    signed = _signed_lines(reading)
    latest: dict[str, tuple[int, str]] = {}
    for number, text in failed:
        latest[reading.origin(number, text)] = (number, text)
    for number, text in latest.values():
        lines = list(reading.pod_lines(number, text))
        lives = [n for n, t in lines if LIFE_START.search(t)]
        began = max((n for n in lives if n <= number), default=0)
        ended = min((n for n in lives if n > number), default=None)
        life = [(n, t) for n, t in lines if n >= began and (ended is None or n < ended)]
        if _signed_before(signed, number, within={n for n, _ in life}):
            continue  # a line an entry names came first: that is the cause
        last = _last_words(life, number, gone)
        if last is not None:
            return SilentDeath(last, Evidence(number, text[:MAX_TEXT]), gone.who)
    return None


def _signed_lines(reading: _Reading) -> set[int]:
    """The kept lines an entry's signature (not a hint) matched."""
    return {
        n
        for hits in reading.hits.values()
        if hits.strong
        for n, _ in (*hits.first, *hits.last)
        if n not in hits.hinted
    }


def _signed_before(signed: set[int], number: int, within: set[int] | None = None) -> bool:
    """Whether a line an entry's signature matched (`_signed_lines`) comes before line `number`,
    among `within` where given (one pod's lines in one life of its server): that line is then
    the cause of a process gone in start-up, not a silent death."""
    return any(n < number and (within is None or n in within) for n in signed)


def _last_words(life: list[tuple[int, str]], said: int, gone: GoneInStartUp) -> Evidence | None:
    """The last line of the gone process and its children before vLLM's line `said` in one
    pod's life, when no line says it raised (see _died_without_a_word), else None."""
    last, untagged_traceback = None, False
    for number, text in life:
        before = number < said
        own = _after_kubectl(text)
        words = _after_tag(own, gone.tag)
        if words is None and gone.children is not None and before:
            words = _after_tag(own, gone.children)
        if WORKER_RAISED.search(words if words is not None else own) and (
            before or gone.children is None
        ):
            return None
        if words is None:
            if before and PROCESS_TAG.match(own) is None:
                if TRACEBACK_START.match(own):
                    untagged_traceback = True
                elif untagged_traceback and RAISED_LINE.match(own):
                    return None  # a traceback of its own, ended before vLLM's line
            continue
        if _states_error(words) or TRACEBACK_START.match(words):
            return None
        if before and words.strip():
            last = Evidence(number, text[:MAX_TEXT])
    return last


def _after_tag(line: str, tag: re.Pattern) -> str | None:
    """What follows a process's tag within WORKER_TAG_WITHIN characters of the line's start (a
    collector's prefix before it), or None when the line has no such tag."""
    found = tag.search(line, 0, WORKER_TAG_WITHIN + 40)
    if found is None or found.start() > WORKER_TAG_WITHIN:
        return None
    return line[found.end() :]


def _search_order(matches: list[Match], places: dict[str, float]) -> None:
    """Text-only matches keep the wiki search's order (explain never ranks them worse than the
    search does): each is at most as confident as the one the search put before it. A guess a
    hint also points at (weak hits: `count`) is not held to that order: the hint is evidence
    the search does not weigh.
    """
    ceiling = 1.0
    search = (m for m in matches if m.how == "search" and not m.count)
    for m in sorted(search, key=lambda m: -places.get(m.id, 0.0)):
        m.confidence = round(max(min(m.confidence, ceiling), 0.0), 3)
        ceiling = m.confidence


def _at_most_warning(severity: str) -> str:
    return MAYBE_SEVERITY if SEVERITY_RANK.get(severity, 2) > 2 else severity


def _causes_first(matches: list[Match], graph: CauseGraph) -> None:
    """A consequence whose cause also matched by signature ranks just below that cause, and
    names it in `explained_by` (cycles in the graph are cut, never looped).
    """
    signed = {m.id: m for m in matches if m.how == "signature"}
    causes = {
        effect: sorted(
            c
            for c in signed
            if c != effect
            and effect in graph.effects(c)
            and _could_explain(signed[c], signed[effect])
        )
        for effect in signed
    }
    for m in signed.values():
        m.explained_by = causes.get(m.id, [])
    settled: dict[str, float] = {}

    def capped(entry_id: str, path: frozenset[str]) -> float:
        if entry_id in settled:
            return settled[entry_id]
        m = signed[entry_id]
        value = m.confidence
        for cause in causes.get(entry_id, ()):
            if cause not in path:
                value = min(value, capped(cause, path | {entry_id}) - 0.001)
        settled[entry_id] = value
        return value

    for entry_id in sorted(signed):
        signed[entry_id].confidence = round(max(capped(entry_id, frozenset()), 0.0), 3)


# seconds a cause's first line may follow its effect's last (clocks, a log's buffering)
CAUSE_AFTER_MARGIN = 60


def _could_explain(cause: Match, effect: Match) -> bool:
    """Whether `cause`'s lines can be what `effect`'s followed from: not where all of them were
    written well after the effect's last line (a clock both show in one form,
    `triage.line_time`), nor where both are Xid lines and no GPU is in both (an ECC error on one
    GPU explains nothing of an MMU fault on another)."""
    cause_lines = [e.text for e in cause.evidence]
    effect_lines = [e.text for e in effect.evidence]
    if written_after(cause_lines, effect_lines, CAUSE_AFTER_MARGIN):
        return False
    cause_gpus = [parse_xid_line(t) for t in cause_lines]
    effect_gpus = [parse_xid_line(t) for t in effect_lines]
    events = [*cause_gpus, *effect_gpus]
    if cause_gpus and effect_gpus and all(e is not None and e.pci for e in events):
        return bool({e.pci for e in cause_gpus} & {e.pci for e in effect_gpus})
    return True


def _killed_before_its_consequences(matches: list[Match], graph: CauseGraph) -> None:
    """A kill its lines show (a process killed as it loaded, a worker that died without a word)
    ranks above a consequence only words suggest (engine-dead by `Engine core initialization
    failed`), which then names it in `explained_by`, as a signature's cause would be."""
    for cause in matches:
        if cause.killed_loading is None and cause.died_silently is None:
            continue
        for m in matches:
            if m.how == "search" and m is not cause and m.id in graph.effects(cause.id):
                m.confidence = round(max(min(m.confidence, cause.confidence - 0.001), 0.0), 3)
                m.explained_by = sorted({*m.explained_by, cause.id})


# an entry whose failure is a request refused with a 4xx while the server goes on (its tags name
# the status), and one whose failure takes the server down
REFUSAL_TAGS = frozenset({"http-400", "http-404"})
OUTAGE_TAG = "crash"


def _outages_before_refusals(matches: list[Match], entries: dict, graph: CauseGraph) -> None:
    """A refused request ranks below a crash of the server, both matched by signature (a chat
    template's 400 above the SIGKILL that killed the engine): the refusal did not take the server
    down, unless the cause graph says it explains the crash, and the outage is what to fix first.
    A crash is an entry tagged `crash`, or one that explains such an entry.
    """

    signed = [m for m in matches if m.how == "signature"]
    crashed = {m.id for m in signed} & _tagged(entries, {OUTAGE_TAG})
    refusals = _tagged(entries, REFUSAL_TAGS)
    outages = [
        m for m in signed if m.id in crashed or any(graph.explains(m.id, c) for c in crashed)
    ]
    if not outages:
        return
    below = max(m.confidence for m in outages) - 0.001
    for m in signed:
        if (
            m.id in refusals
            and m.confidence > below
            and not any(graph.explains(m.id, o.id) for o in outages)
        ):
            m.confidence = round(max(below, 0.0), 3)


# an entry whose signature is a stop sent from outside (SIGTERM: a rollout, a scale-down)
STOPPED_TAG = "stopped-from-outside"


def _stopped_from_outside(
    matches: list[Match], entries: dict, graph: CauseGraph, reading: _Reading
) -> tuple[CauseGraph, list[tuple[Match, list[Match]]]]:
    """A stop sent from outside explains what the log shows after it and before the server
    starts again, in the same pod's lines (`_stop_windows`): the engine torn down under the
    requests in flight (`EngineDeadError`, 500s, a stall), the stop's doing, no crash, at most a
    warning. What failed before a stop, after a restart or in another pod it does not explain
    (the graph returned lacks its edges), and the stop ranks below every failure still critical
    (`_failures_before_the_stop`): a server that had failed, or failed again, is the story.
    """
    stopped = _tagged(entries, {STOPPED_TAG})
    cut: list[tuple[str, str]] = []
    failed_before: list[tuple[Match, list[Match]]] = []
    for stop in (m for m in matches if m.how == "signature" and m.id in stopped and m.evidence):
        windows = _stop_windows(stop, reading)
        for m in matches:
            if m is stop or not m.evidence or not graph.explains(stop.id, m.id):
                continue
            if all(_in_a_window(e, windows, reading) for e in m.evidence):
                # ... unless a failure of its own explains it too (a CUDA OOM during the drain)
                if not any(
                    c is not stop
                    and c.how == "signature"
                    and c.severity == "critical"
                    and graph.explains(c.id, m.id)
                    for c in matches
                ):
                    m.severity = _at_most_warning(m.severity)
            else:
                cut += [(stop.id, effect) for effect in graph.effects(stop.id)]
        crashes = [
            m
            for m in matches
            if m is not stop and m.how == "signature" and m.severity == "critical" and m.evidence
        ]
        if crashes:
            failed_before.append((stop, crashes))
    return (graph.without(cut) if cut else graph), failed_before


def _stop_windows(stop: Match, reading: _Reading) -> list[tuple[int, float, str]]:
    """Each line of a stop's signature: (its line, the next line where its server starts, its
    pod or compose service): what a stop may explain lies after it and before that start, in
    that pod's lines (a rollout's `kubectl logs --prefix` of several pods, `docker compose logs`
    of several services, `docker logs` of several lifetimes)."""
    return [
        (
            e.line,
            min((n for n in reading.starts_of(e.line, e.text) if n > e.line), default=math.inf),
            reading.origin(e.line, e.text),
        )
        for e in stop.evidence
    ]


def _in_a_window(
    evidence: Evidence, windows: list[tuple[int, float, str]], reading: _Reading
) -> bool:
    own = reading.origin(evidence.line, evidence.text)
    return any(at < evidence.line < end and own == pod for at, end, pod in windows)


# the pod a line's start names: `kubectl logs --prefix`'s `[pod/vllm-a/vllm] `, or stern's
# (STERN_POD)
KUBECTL_POD = re.compile(rf"^\[[a-z]+/[^\]\s]{{1,200}}\] |^{STERN_POD}")


def _pod(text: str) -> str:
    found = KUBECTL_POD.match(text)
    return found.group() if found else ""


def _failures_before_the_stop(failed_before: list[tuple[Match, list[Match]]]) -> None:
    for stop, crashes in failed_before:
        below = min(m.confidence for m in crashes) - 0.001
        stop.confidence = round(max(min(stop.confidence, below), 0.0), 3)


def _tagged(entries: dict, tags: set[str] | frozenset[str]) -> set[str]:
    """The ids of the entries that carry any of these tags."""
    return {i for i, e in entries.items() if set(getattr(e, "tags", ()) or ()) & tags}


WORD = re.compile(r"[A-Za-z][A-Za-z0-9]+")
STEM = 6  # words are compared on their first characters (preempted ~ preemption)


def _stems(text: str) -> set[str]:
    return {w.lower()[:STEM] for w in WORD.findall(text)}


def text_relevance(
    query: str, entries: dict, results: list, fusion: Fusion = FUSION
) -> dict[str, tuple[float, float, float, float]]:
    """Per entry found by the wiki search: (coverage, place, score, few). Coverage, in [0, 1],
    is the share of the salient lines' informative words (weighted by rarity in the wiki, words the
    wiki does not know included) that the entry holds: an error no entry knows covers little
    of any entry. Place is 1 / (1 + its rank in the wiki search's results); score is the
    search's own (how much matching text it found); few is the share of FEW_WORDS informative
    words the query has, up to 1.
    """
    if not query or not results:
        return {}
    from llmdoctor.wiki.query import parse_query

    words = {w[:STEM] for w in parse_query(query).words if len(w) >= 3 and w.isalpha()}
    if not words:
        return {}
    few = min(len(words) / fusion.few_words, 1.0)
    vocab = _vocabulary(entries)
    total = len(vocab) or 1
    known = {w: sum(1 for v in vocab.values() if w in v) for w in words}
    rarity = {
        w: math.log((total + 1) / (n + 0.5)) if n else math.log((total + 1) / 0.5)
        for w, n in known.items()
    }
    mass = sum(rarity.values()) or 1.0
    out: dict[str, tuple[float, float, float, float]] = {}
    for rank, result in enumerate(results):
        stems = vocab.get(result.id)
        if stems is None:
            continue
        coverage = sum(r for w, r in rarity.items() if w in stems) / mass
        # the search's score without its signature tier: explain weighs signature hits itself
        # (a hint's hit would otherwise count twice, as a weak hit and as a first-tier score)
        found = max(float(result.text_score), 0.0)
        runner_up = results[1].text_score if len(results) > 1 else 0.0
        if rank == 0 and runner_up > 0:
            found *= min(found / runner_up, fusion.lead_cap) ** fusion.lead_power
        out[result.id] = (coverage, 1 / (1 + rank), found, few)
    return out


_STEMS: dict[tuple[str, str], frozenset[str]] = {}


def _vocabulary(entries: dict) -> dict[str, frozenset[str]]:
    """Each entry's stems (of its names, symptom, cause and signatures; not hints: weak), read
    back from the cache folder when an earlier run worked them out (~7 ms for the built-in
    wiki), then kept for the process."""
    keys = {entry_id: (e.id, getattr(e, "path", "")) for entry_id, e in entries.items()}
    missing = {key: entries[entry_id] for entry_id, key in keys.items() if key not in _STEMS}
    if missing:
        from llmdoctor.wiki.derived_cache import kept_values

        texts = []
        for e in missing.values():
            parts = [e.id, e.title, " ".join(e.aliases), " ".join(e.tags), e.symptom, e.cause]
            texts.append(" ".join([*parts, " ".join(e.signatures)]))
        stems = kept_values(
            "entry-stems",
            texts,
            lambda batch: [tuple(sorted(_stems(text))) for text in batch],
            [__file__],
            lambda value: isinstance(value, tuple) and all(isinstance(x, str) for x in value),
        )
        _STEMS.update(zip(missing, map(frozenset, stems), strict=True))
    return {entry_id: _STEMS[key] for entry_id, key in keys.items()}


def shown_fix_steps(entry, matched: Iterable[str] = ()) -> tuple[list, str]:
    """The leading whole steps of an entry's Fix (code kept as written), its parameters
    filled from the lines that matched (vLLM's "estimated maximum model length is 5632"), the
    step written for their wording first; and the numbers of the steps left out ("3-7")."""
    from llmdoctor.parsers.fix_values import fix_values
    from llmdoctor.render.fix_text import fix_steps, shown_and_left_out

    matched = list(matched)
    return shown_and_left_out(fix_steps(entry, params=fix_values(entry.id, matched), lines=matched))


def _beyond_access_errors(salient: list[Evidence]) -> bool:
    """Whether a line looks wrong other than an access log's error status."""
    access_error = compiled(ACCESS_ERROR)
    return any(not access_error.search(e.text) for e in salient)


def _salient_entry():
    return SimpleNamespace(id=SALIENT_ID, signatures=list(SALIENT_PATTERNS), path="")


def search_query(lines: Iterable[Evidence]) -> str:
    """The text searched for a long log: the last exception lines when there are any (a
    traceback's last line names the error; its frames only add noise), else the last salient
    lines.
    """
    lines = list(lines)
    exceptions = [e.text for e in lines if _looks_like_exception(e.text)]
    chosen = exceptions or [e.text for e in lines]
    return "\n".join(chosen[-QUERY_LINES:])


def _looks_like_exception(text: str) -> bool:
    head = text.split(": ", 1)[0].rsplit(" ", 1)[-1]
    return head.endswith(("Error", "Exception", "Interrupt"))


def _search(query: str, limit: int, wiki_dirs: list[str] | None) -> list:
    from llmdoctor.wiki.search import search

    return search(query, limit=limit, wiki_dirs=wiki_dirs)


GZIP_MAGIC = b"\x1f\x8b"
SNIFF_BYTES = 64 * 1024
BINARY_SHARE = 0.3  # above this share of non-text characters a file is not a log
TEXT_CONTROLS = frozenset("\t\n\r\x0c\x1b\x08")


def looks_binary(sample: bytes) -> bool:
    """True when a file's first bytes are not text: many control bytes or invalid UTF-8.

    NUL bytes are ignored: a log rotated with copytruncate often starts with a run of them.
    """
    text = sample.replace(b"\x00", b"").decode("utf-8", errors="replace")
    if not text:
        return False
    bad = sum(1 for c in text if c == "\ufffd" or (c < " " and c not in TEXT_CONTROLS))
    return bad / len(text) > BINARY_SHARE


def open_input(path: str) -> TextSource | BinaryIO:
    """A file to explain, checked to be a readable text log (BadInput otherwise).

    A gzip file (a rotated `vllm.log.1.gz`) comes back as a decompressing binary stream.
    """
    from llmdoctor.errors import BadInput

    p = Path(path)
    if not p.exists():
        raise BadInput(f"{path}: no such file")
    if p.is_dir():
        raise BadInput(f"{path}: is a directory, not a log file")
    try:
        with open(p, "rb") as fh:
            head = fh.read(SNIFF_BYTES)
    except OSError as exc:
        raise BadInput(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if head.startswith(GZIP_MAGIC):
        import gzip

        return gzip.open(p, "rb")
    if looks_binary(head):
        raise BadInput(f"{path}: looks like a binary file, not a text log")
    return TextSource.from_file(p.name, p)


def open_stdin(stream: BinaryIO | None) -> BinaryIO:
    """Standard input as a binary stream, decompressed when gzip is piped in."""
    from llmdoctor.errors import BadInput

    if stream is None:
        raise BadInput("standard input is closed: give a FILE, or pipe a log into `explain -`")
    peek = getattr(stream, "peek", None)
    if peek is not None and peek(2)[:2] == GZIP_MAGIC:
        import gzip

        return gzip.GzipFile(fileobj=stream, mode="rb")
    return stream
