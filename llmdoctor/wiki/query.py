"""Turn anything a user types or pastes into a safe FTS5 query: quoted words, OR-ed together.

FTS5 syntax (quotes, `*`, `AND`, `NEAR(`, column filters) is never passed through: the text is cut
into words, each word is quoted, and bm25 ranks the entries that hold the most of them. A pasted
log or stack trace loses its noise first (paths, URLs, hex addresses, numbers, traceback frames),
so the error words decide the ranking. Example of pasted text::

    [rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.33 GiB. GPU 0 has a
    total capacity of 79.15 GiB of which 1.17 GiB is free.

becomes  "torch" OR "outofmemoryerror" OR "cuda" OR "out" OR "memory" OR "tried" OR ...

A typed symptom word ("slow", "hangs", "gibberish") also stands for the words the runbooks use
for that symptom (SYMPTOMS): `slow` is searched as ("slow" OR "latency" OR "ttft" OR
"throughput"), one term, so "requests are slow" reaches queue-saturation and kv-cache-preemption.
"""

from __future__ import annotations

from llmdoctor.lazy_regex import compiled
from llmdoctor.wiki.cjk import run_grams, split_runs

TYPE_CHECKING = False
if TYPE_CHECKING:
    import re

MAX_QUERY_CHARS = 200_000
MAX_TERMS = 64
SHORT_QUERY_WORDS = 8  # up to this many words, numbers and one-letter words are kept

# The definitions of how a text is cut. Plain ASCII text, what nearly every query is, is cut by
# the scans further down, which give exactly what these give (tests/test_wiki_query_scan.py holds
# them equal): `import re` alone costs a `wiki search` process ~5 ms (with enum and functools), a
# fifth of the whole search. Other text is cut by these, compiled on first use and tried only on
# text holding what they need.
URL = r"\b[a-zA-Z][a-zA-Z0-9+.-]*://\S+"  # only in text holding "://"
PATH = r"(?:[A-Za-z]:)?(?:[\\/][\w.@+~-]+){2,}[\\/]?"  # only with a / or \\
TRACEBACK_FRAME = r'^\s*File "[^"\n]*", line \d+'  # only in a line holding 'File "'
HEXLIKE = r"^(?:0x[0-9a-f]+|(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{6,})$"  # needs a digit
WORD = r"[^\W_]+"  # letters and digits, as FTS5's unicode61 cuts them
ERRORISH = (  # only to put a text's error lines first: never for one line
    r"error|exception|fail|fatal|critical|killed|refused|time[ds]? ?out|denied|invalid|cannot|"
    r"unable|not found|xid|panic"
)


def pattern(source: str) -> re.Pattern:
    """One of the patterns above, compiled (ERRORISH ignoring case) on first use."""
    return compiled(source, ignore_case=source == ERRORISH)


# ---- the same cuts for ASCII text, without `re` ----
SCAN_MAX_CHARS = 4096  # longer non-ASCII text is cut by WORD: a Python loop would cost more
_SPACE_FOR_NON_WORD = {code: " " for code in range(128) if not chr(code).isalnum()}
_HEX_DIGITS = frozenset("0123456789abcdef")
_SCHEME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-")
_PATH_CHARS = frozenset(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.@+~-"
)  # [\w.@+~-] in ASCII
_ERROR_WORDS = (  # ERRORISH spelled out: time[ds]? ?out is six words
    "error", "exception", "fail", "fatal", "critical", "killed", "refused", "timeout",
    "time out", "timedout", "timed out", "timesout", "times out", "denied", "invalid", "cannot",
    "unable", "not found", "xid", "panic",
)  # fmt: skip


def words_in(text: str) -> list[str]:
    """The runs of letters and digits in `text`: WORD's findall."""
    if text.isascii():
        return text.translate(_SPACE_FOR_NON_WORD).split()
    if len(text) > SCAN_MAX_CHARS:
        return pattern(WORD).findall(text)
    out: list[str] = []
    start = -1
    for n, char in enumerate(text):
        if char.isalnum():  # [^\W_]: `re`'s \w is str.isalnum() or "_"
            if start < 0:
                start = n
        elif start >= 0:
            out.append(text[start:n])
            start = -1
    if start >= 0:
        out.append(text[start:])
    return out


def is_traceback_frame(line: str) -> bool:
    """TRACEBACK_FRAME matches `line` (one line: it holds no newline)."""
    rest = line.lstrip()  # \s* (str's whitespace is the \s of `re`)
    if not rest.startswith('File "'):
        return False
    quote = rest.find('"', 6)
    return (
        quote >= 0
        and rest.startswith('", line ', quote)
        and len(rest) > quote + 8
        and rest[quote + 8].isdecimal()  # \d
    )


def _is_hexlike(word: str) -> bool:
    """HEXLIKE matches `word` (a word holds no newline)."""
    if not word.isascii():
        return pattern(HEXLIKE).match(word) is not None
    if word.startswith("0x") and len(word) > 2:
        return all(c in _HEX_DIGITS for c in word[2:])
    return (
        len(word) >= 6
        and all(c in _HEX_DIGITS for c in word)
        and not word.isalpha()
        and not word.isdigit()
    )


def _errorish(line: str) -> bool:
    """ERRORISH is found in `line`."""
    if not line.isascii():
        return pattern(ERRORISH).search(line) is not None
    lowered = line.lower()
    return any(word in lowered for word in _ERROR_WORDS)


def _is_word_char(char: str) -> bool:
    return char.isalnum() or char == "_"  # \w


def _without_urls_ascii(line: str) -> str:
    """URL's matches in `line` (ASCII) replaced by a space, as `pattern(URL).sub(" ", line)`."""
    out: list[str] = []
    pos = 0  # where the previous match ended: the next starts here or later
    found = line.find("://")
    while found >= 0:
        start = found  # the scheme: the run of [a-zA-Z0-9+.-] before "://", from its leftmost
        while start > pos and line[start - 1] in _SCHEME_CHARS:  # letter at a word boundary
            start -= 1
        while start < found and not (
            line[start].isalpha() and (start == 0 or not _is_word_char(line[start - 1]))
        ):
            start += 1
        end = found + 3
        if start < found:  # \S+ is read only then, so each character once: linear time
            while end < len(line) and not line[end].isspace():
                end += 1
        if end > found + 3:
            out += [line[pos:start], " "]
            pos = end
            found = line.find("://", end)
        else:
            found = line.find("://", found + 1)
    return "".join(out) + line[pos:] if out else line


def _path_end(line: str, start: int) -> int:
    """Where PATH's match ends when it starts at `start` with a slash; -1 when it does not match."""
    segments, end = 0, start
    while end + 1 < len(line) and line[end] in "\\/" and line[end + 1] in _PATH_CHARS:
        end += 2
        while end < len(line) and line[end] in _PATH_CHARS:
            end += 1
        segments += 1
    if segments < 2:
        return -1
    return end + 1 if end < len(line) and line[end] in "\\/" else end


def _without_paths_ascii(line: str) -> str:
    """PATH's matches in `line` (ASCII) replaced by a space, as `pattern(PATH).sub(" ", line)`."""
    out: list[str] = []
    pos = 0
    forward, back = line.find("/"), line.find("\\")  # the next of each: each found once
    while forward >= 0 or back >= 0:
        slash = forward if back < 0 or 0 <= forward < back else back
        end = _path_end(line, slash)
        if end < 0:
            end = slash + 1  # no match here: the next slash
        else:
            start = slash  # a drive letter before it starts the match there: (?:[A-Za-z]:)?
            if slash - 2 >= pos and line[slash - 1] == ":" and line[slash - 2].isalpha():
                start = slash - 2
            out += [line[pos:start], " "]
            pos = end
        if 0 <= forward < end:
            forward = line.find("/", end)
        if 0 <= back < end:
            back = line.find("\\", end)
    return "".join(out) + line[pos:] if out else line


# what on-call engineers type -> the words the runbooks use for it (only for typed queries;
# each group counts as one term, so it adds reach, not weight)
_LATENCY = ("latency", "ttft", "throughput")
_HANG = ("hang", "hung", "stuck", "unresponsive")
_CRASH = ("crash", "dead", "died", "restart")
_GARBAGE = ("garbage", "gibberish", "nan", "repetition")
_GONE = ("fallen", "lost", "missing")  # a GPU that "disappeared" fell off the bus or is not seen
_RESTART = ("restart", "restarts", "crashloopbackoff")
SYMPTOMS: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(("slow", "slowly", "slowness", "sluggish", "laggy", "lag"), _LATENCY),
    "latency": ("ttft", "throughput"),
    "ttft": ("latency", "first token"),
    **dict.fromkeys(("hang", "hangs", "hanging", "hung", "stuck", "frozen", "freezes"), _HANG),
    "unresponsive": _HANG,
    **dict.fromkeys(("crash", "crashed", "crashes", "crashing", "dies", "died"), _CRASH),
    **dict.fromkeys(("gibberish", "nonsense", "garbled", "repeats"), _GARBAGE),
    "fell": ("fallen",),
    **dict.fromkeys(("disappeared", "disappears", "vanished", "gone"), _GONE),
    **dict.fromkeys(("restarting", "restarted", "rebooting"), _RESTART),
    "startup": ("loading", "starting"),
}
STOPWORDS = frozenset(
    "a an and are as at be by for from has have i in is it its of on or that the this to was "  # noqa: SIM905
    "were will with we you your please keeps keep "
    "high low very too really so".split()  # qualifiers: "high latency" is about latency
)
# Words of a question or a sentence typed as a query ("what does Xid 79 mean", "the GPU ran out
# of memory", "the log says Xid 79"): dropped from a short query only, where every term must be
# held by the entries ranked first and "ran" alone put nccl-failure ("ran for 600027
# milliseconds") above cuda-oom-runtime; "fix" put gsp-timeout above nccl-failure for "how do I
# fix NCCL timeout" (every entry is about a fix). A pasted log keeps them: they can be its words.
TYPED_FILLER = frozenset(
    "what which who does do did doing done mean means meaning how why when where ran runs got "  # noqa: SIM905
    "get gets getting our my me us they them there any some about cause causes caused fix fixes "
    "fixing solve resolve troubleshoot debug help issue log logs says said saying shows showed "
    "showing see seeing saw state status can could would should t s doesn don didn isn won".split()
)
# A Kubernetes state named in a typed query is what is asked about: a hang word beside it ("pod
# stuck in Pending", "hung in ContainerCreating") is how people say it, not an engine hang.
POD_STATES = frozenset(
    "pending containercreating terminating crashloopbackoff imagepullbackoff errimagepull "  # noqa: SIM905
    "podinitializing evicted unschedulable".split()
)
HANG_WORDS = frozenset(("stuck", "hung", "hang", "hanging", "frozen"))


class Query:
    """A user's search text, cut into the terms the index is searched with."""

    __slots__ = (
        "alternatives", "cjk_runs", "frames_only", "grams", "named", "phrase", "short", "text",
        "words",
    )  # fmt: skip

    def __init__(self, text: str):
        self.text = text
        self.words: list[str] = []  # latin/number words, lower case
        self.cjk_runs: list[str] = []  # Chinese/Japanese runs as typed
        self.grams: list[str] = []  # their bigrams, as indexed
        self.short = False  # a few words on one line, typed rather than pasted
        self.phrase: list[str] = []  # a short query's words in order, stopwords too
        # a short query as the names are compared (exact_name); with its filler dropped, also
        # without its stopwords ("how to fix OOM" is "OOM")
        self.named: tuple[str, ...] = ()
        self.alternatives: dict[str, tuple[str, ...]] = {}  # word -> SYMPTOMS
        # the text is traceback frames alone: their words (a path's, a function's) name an
        # entry only through a signature of it that matches a frame
        self.frames_only = False

    @property
    def terms(self) -> list[str]:
        return self.words + self.grams

    def term_expressions(self) -> list[str]:
        """Each term as an FTS5 expression: '"queue"', or '("slow" OR "latency" OR ...)'."""
        out = []
        for term in self.terms:
            spelled = (term, *self.alternatives.get(term, ()))
            quoted = " OR ".join(_quote(t) for t in spelled)
            out.append(f"({quoted})" if len(spelled) > 1 else quoted)
        return out

    def match_expression(self) -> str | None:
        """The FTS5 MATCH string: every term quoted, OR-ed; None when nothing is searchable."""
        terms = self.term_expressions()
        if not terms:
            return None
        return " OR ".join(terms)

    def lines(self, limit: int = 2000) -> list[str]:
        """The text's non-blank lines, for matching entry signatures (which are per-line)."""
        out = []
        for line in self.text.splitlines():
            if line.strip():
                out.append(line)
                if len(out) >= limit:
                    break
        return out


def _quote(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def _candidate_lines(text: str) -> tuple[list[str], bool]:
    """Lines without traceback frames and the source line under each; error-ish lines first.
    A text of frames alone (a frame pasted to find what it means) keeps them, they are all it
    says: (its lines, True)."""
    kept: list[str] = []
    skip_next = False
    for line in text.splitlines():
        if skip_next:
            skip_next = False
            if line.startswith((" ", "\t")):
                continue
        if 'File "' in line and is_traceback_frame(line):
            skip_next = True
            continue
        if line.strip() == "Traceback (most recent call last):":
            continue  # the header says there is a traceback, nothing of what failed
        kept.append(line)
    if not any(line.strip() for line in kept):
        return text.splitlines(), bool(text.strip())
    if len(kept) < 2:
        return kept, False
    errorish: list[str] = []
    others: list[str] = []
    for ln in kept:
        (errorish if _errorish(ln) else others).append(ln)
    return errorish + others, False


def _without_urls_and_paths(line: str) -> str:
    ascii_only = line.isascii()
    if "://" in line:
        line = _without_urls_ascii(line) if ascii_only else pattern(URL).sub(" ", line)
    if "/" in line or "\\" in line:
        line = _without_paths_ascii(line) if ascii_only else pattern(PATH).sub(" ", line)
    return line


def parse_query(text: str) -> Query:
    """Cut user text into search terms; never raises, whatever the text holds."""
    text = (text or "")[-MAX_QUERY_CHARS:]  # a huge paste is a log: its end holds the error
    if not text.isascii():  # bytes that were not UTF-8 (stdin, argv) arrive as lone surrogates,
        text = text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")  # (RE2: U+FFFD)
    query = Query(text=text)
    tokens: list[str] = []
    cjk_tokens: set[str] = set()
    lines, query.frames_only = _candidate_lines(text)
    for line in lines:
        for word in words_in(_without_urls_and_paths(line)):
            if word.isascii():
                tokens.append(word)
                continue
            other, runs = split_runs(word)  # 显存OOM -> 显存, OOM: Chinese runs become grams
            tokens += other
            tokens += runs
            cjk_tokens.update(runs)
    latin = [t.lower() for t in tokens if t not in cjk_tokens]
    short = len(latin) <= SHORT_QUERY_WORDS and "\n" not in text.strip()

    def keep(word: str) -> bool:
        if not short and (word.isdigit() or len(word) == 1):
            return False  # noise in a pasted text
        return word.isalpha() or not _is_hexlike(word)

    words = [w for w in latin if keep(w)]
    query.short = short
    filler = _filler(words) if short else frozenset()
    if short:
        query.phrase = [w for w in words if w not in filler]
        named = words_in(text.lower())
        query.named = (" ".join(named),)
        if filler and not filler.isdisjoint(named):
            query.named = (
                " ".join(w for w in named if w not in filler),
                " ".join(w for w in named if w not in filler and w not in STOPWORDS),
            )
    meaningful = [w for w in words if w not in STOPWORDS and w not in filler]
    if meaningful:
        words = meaningful
    elif filler and all(w in STOPWORDS or w in filler for w in words):
        words = []  # only the words of a question ("what does it mean"): nothing to look for
    seen: set[str] = set()
    budget = MAX_TERMS
    for token in tokens:
        if budget <= 0:
            break
        if token in cjk_tokens:
            if token not in query.cjk_runs:
                query.cjk_runs.append(token)
            for gram in run_grams(token):
                if gram not in seen:
                    seen.add(gram)
                    query.grams.append(gram)
                    budget -= 1
    for word in words:
        if budget <= 0:
            break
        if word not in seen:
            seen.add(word)
            query.words.append(word)
            budget -= 1
            if short and word in SYMPTOMS:
                query.alternatives[word] = SYMPTOMS[word]
    return query


def _filler(words: list[str]) -> frozenset[str]:
    """The words of a short typed query that name nothing: TYPED_FILLER, and the hang words
    beside a pod state (POD_STATES)."""
    if POD_STATES.isdisjoint(words):
        return TYPED_FILLER
    return TYPED_FILLER | HANG_WORDS


def exact_name(text: str) -> str:
    """A name as compared with a typed query: its words, lower case ("CUDA-OOM" = "cuda oom")."""
    return " ".join(words_in(text.lower()))
