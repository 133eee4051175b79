"""The one redactor: every path that can carry a secret into a file, a page or a message goes
through here (bundles, `wiki add --from-log`, the site's examples, Prometheus selectors and
URL errors, argv lists).

Secrets are told by their shape (URL passwords, `Authorization`/`Bearer` values, `hf_…`, `sk-…`,
GitHub and JWT tokens) or by the name they are given (`API_KEY=…`, `--api-key VALUE`, an env
entry `HF_TOKEN`, a JSON key `password`), read word by word (secret_kind): `api_key`, `hfToken`,
`client-key-data` name secrets; `max_num_batched_tokens`, `tokenizer_mode`, `KeyError`,
`topologyKey` and `add_bos_token=True` (a token-named setting holding a number or a boolean) are
evidence and stay.
Matching is RE2 (linear time): a log line of a megabyte is redacted in milliseconds.
"""

from __future__ import annotations

from typing import Any

REDACTED = "<redacted>"
# a name holding one of these words names a secret, whatever its value
STRONG_WORDS = frozenset(
    {
        "password",
        "passwd",
        "passphrase",
        "secret",
        "credential",
        "credentials",
        "authorization",
        "cookie",
        "apikey",
    }
)
# "key" names a secret only after one of these (api_key, client-key-data; not KeyError,
# topologyKey, input_key); "token" only as the last word (HF_TOKEN; not TokenExpirationSeconds)
KEY_QUALIFIERS = frozenset(
    {
        "api",
        "secret",
        "access",
        "private",
        "client",
        "auth",
        "signing",
        "encryption",
        "master",
        "account",
        "license",
        "subscription",
        "session",
        "app",
        "hf",
        "openai",
        "ssh",
    }
)
# names that hold a reference to a secret, never the secret itself
NOT_SECRET_NAMES = frozenset({"secretname", "secretref", "secretkeyref"})
_PLAIN_VALUES = frozenset({"", "true", "false", "none", "null"})

_URL_PASSWORD = r"(?i)\b([a-z][a-z0-9+.-]*://[^/\s:@]*:)[^/\s]+@"
_TOKENS = (
    r"\b(hf_)[A-Za-z0-9]{20,}",
    r"\b(sk-)[A-Za-z0-9_-]{16,}",
    r"\b(gh[pousr]_)[A-Za-z0-9]{20,}",
    r"\b(github_pat_)[A-Za-z0-9_]{20,}",
    r"\b(xox[abpr]-)[A-Za-z0-9-]{10,}",
    r"\b(eyJ)[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]+",  # a JWT
    r"\b((?:AKIA|ASIA))[A-Z0-9]{16}\b",  # an AWS access key id, bare (long-term or session)
)
_AUTH_HEADER = r"(?i)\b(authorization\s*[:=]\s*(?:(?:bearer|basic|token)\s+)?)[^\s'\",}]+"
_BEARER = r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/=-]{8,}"
# --name VALUE and --name=VALUE; the name decides (see is_secret_name)
_FLAG = r"(--([A-Za-z0-9][A-Za-z0-9_-]*)(?:=|[ \t]+))('[^'\n]*'|\"[^\"\n]*\"|[^\s'\"-][^\s'\"]*)"
# NAME=VALUE, NAME='VALUE' (Python reprs, env files, query strings)
# (a value may itself be NAME='quoted', or a chain of them: `A= hf_token='…'`, looked into by
# _assigned; without that first branch A's value stopped at the quote, hf_token's never seen)
_ASSIGN = (
    r"(\b([A-Za-z_][A-Za-z0-9_.-]*)[ \t]*=[ \t]*)"
    r"((?:[A-Za-z_][A-Za-z0-9_.-]*[ \t]*=[ \t]*)+(?:'[^'\n]*'|\"[^\"\n]*\")"
    r"|'[^'\n]*'|\"[^\"\n]*\"|[^\s'\",;&)}\]]+)"
)
# an X- header naming a key, token or secret (X-Api-Key: …, X-Auth-Token: …)
_X_HEADER = r"(?i)\b(x-[a-z0-9-]*(?:key|token|secret|auth)[a-z0-9-]*[ \t]*:[ \t]*)[^\s'\",]+"
# a Cookie header's whole value (its names are the site's own: session=…, sid=…)
_COOKIE = r"(?i)\b((?:set-)?cookie[ \t]*[:=][ \t]*)[^'\"\n]+"
# "name": "value" in JSON text, 'name': 'value' in a Python dict's repr
_QUOTED_PAIR = r"([\"']([A-Za-z_][A-Za-z0-9_.-]*)[\"'][ \t]*:[ \t]*)(\"(?:[^\"\\\n]|\\.)*\"|'(?:[^'\\\n]|\\.)*')"
# name: value at the start of a line (YAML: a kubeconfig's token, client-key-data)
_YAML_PAIR = r"(?m)^(\s*-?\s*([A-Za-z_][A-Za-z0-9_.-]*)\s*:[ \t]+)([^\s#][^\n]*)$"

_compiled: list | None = None


def _words(name: str) -> list[str]:
    """'OPENAI_API_KEY' -> [openai, api, key]; 'hfToken' -> [hf, token]."""
    out: list[str] = []
    word = ""
    prev = ""
    for ch in name:
        if not ch.isalnum():
            if word:
                out.append(word)
            word = ""
        elif ch.isupper() and prev.islower() and word:
            out.append(word)
            word = ch
        else:
            word += ch
        prev = ch
    if word:
        out.append(word)
    return [w.lower() for w in out]


def secret_kind(name: str) -> str | None:
    """'strong' when `name` names a secret (password, api_key), 'weak' when it names a token (a
    short number or a boolean there is a setting: add_bos_token=True, max_num_token=42308),
    None when it names no secret (max_num_batched_tokens, KeyError, topologyKey)."""
    if name.lower().replace("-", "").replace("_", "") in NOT_SECRET_NAMES:
        return None
    words = _words(name)
    if any(w in STRONG_WORDS or w.endswith(("password", "passwd", "apikey")) for w in words):
        return "strong"
    if any(w == "key" and n > 0 and words[n - 1] in KEY_QUALIFIERS for n, w in enumerate(words)):
        return "strong"
    if words and words[-1].endswith("token"):
        return "weak"
    return None


def is_secret_name(name: str) -> bool:
    """Whether a value named `name` (an env var, a flag, a JSON key) may be a secret."""
    return secret_kind(name) is not None


def _is_setting(value: str) -> bool:
    """A short number, a boolean or nothing: what a token-named setting holds, never a secret
    (hex and floats included: startToken = 0x3, max_total_num_token=42308)."""
    text = value.strip().strip("'\"").strip().lower()
    if text in _PLAIN_VALUES:
        return True
    if len(text) > 10:  # a long run of digits may well be a token
        return False
    try:
        float(text)
        return True
    except ValueError:
        pass
    return (
        text.startswith("0x") and all(c in "0123456789abcdef" for c in text[2:]) and len(text) > 2
    )


def hides(name: str, value: str) -> bool:
    """Whether the value `value` given to `name` is to be redacted."""
    kind = secret_kind(name)
    return kind == "strong" or (kind == "weak" and not _is_setting(value))


def _named(match) -> str:
    prefix, name, value = match.group(1), match.group(2), match.group(3)
    if not hides(name, value) or value.strip("'\"") == REDACTED:
        return match.group(0)
    quote = value[0] if value[:1] in ("'", '"') and value[-1:] == value[:1] else ""
    return f"{prefix}{quote}{REDACTED}{quote}"


# how deep `A= B= OPENAI_API_KEY=…` is looked into; deeper chains are left as they are, which keeps
# text such as `a=a=a=…` linear
_NESTED_ASSIGNMENTS = 4


def _assigned(match, depth: int = 0) -> str:
    """_named for NAME=VALUE, where a name that hides nothing must not swallow an assignment in
    its value (`A= OPENAI_API_KEY=…`: the pattern allows blanks after `=`)."""
    value = match.group(3)
    replaced = _named(match)
    if replaced != match.group(0) or "=" not in value or depth >= _NESTED_ASSIGNMENTS:
        return replaced
    assign = next(pattern for pattern, replace in _patterns() if replace is _assigned)
    inner = assign.sub(lambda m: _assigned(m, depth + 1), value)
    return match.group(1) + inner


def _bearer(match) -> str:
    token = match.group(0)[len(match.group(1)) :]
    if token.isalpha() and len(token) < 20:  # "Bearer authentication failed" is prose
        return match.group(0)
    return match.group(1) + REDACTED


def _patterns() -> list:
    global _compiled
    if _compiled is None:
        import re2

        options = re2.Options()
        options.log_errors = False

        def c(source: str):
            return re2.compile(source, options)

        _compiled = [
            (c(_URL_PASSWORD), lambda m: m.group(1) + REDACTED + "@"),
            *((c(t), lambda m: m.group(1) + REDACTED) for t in _TOKENS),
            (c(_AUTH_HEADER), lambda m: m.group(1) + REDACTED),
            (c(_BEARER), _bearer),
            (c(_FLAG), _named),
            (c(_COOKIE), lambda m: m.group(1) + REDACTED),
            (c(_ASSIGN), _assigned),
            (c(_X_HEADER), lambda m: m.group(1) + REDACTED),
            (c(_QUOTED_PAIR), _named),
            (c(_YAML_PAIR), _named),
        ]
    return _compiled


def redact_text(text: str) -> str:
    """`text` with every secret it shows replaced by <redacted> (see the module's docstring)."""
    if not text:
        return text
    for pattern, replacement in _patterns():
        text = pattern.sub(replacement, text)
    return text


def redact_url(url: str) -> str:
    """A URL with the password of its userinfo masked: http://user:<redacted>@host."""
    return redact_text(url)


def redact_argv(argv: list) -> list:
    """An argument list with the value after a secret flag masked, in both spellings:
    ['--api-key', 'sk-x'] and ['--api-key=sk-x'] (other strings as redact_text)."""
    out: list = []
    flag = None  # the flag whose value comes next
    for arg in argv:
        if flag and isinstance(arg, str) and not arg.startswith("--") and hides(flag, arg):
            out.append(REDACTED)
            flag = None
            continue
        flag = arg[2:] if isinstance(arg, str) and arg.startswith("--") and "=" not in arg else None
        out.append(redact_json(arg))
    return out


def redact_json(value: Any) -> Any:
    """A JSON document redacted: env entries and keys with secret names, argv lists, strings."""
    if isinstance(value, dict):
        out = {}
        name = value.get("name")
        is_env_var = "value" in value and isinstance(name, str)
        for k, v in value.items():
            if (is_env_var and k == "value" and isinstance(v, str) and hides(name, v)) or (
                isinstance(k, str) and isinstance(v, str) and hides(k, v)
            ):
                out[k] = REDACTED
            else:
                out[k] = redact_json(v)
        return out
    if isinstance(value, list):
        return redact_argv(value)
    if isinstance(value, str):
        return redact_text(value)
    return value
