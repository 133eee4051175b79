"""Remove secrets before anything is written to a bundle."""

from __future__ import annotations

import re
from typing import Any

REDACTED = "<redacted>"
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)
# scheme://user:password@host — the password part of a URL's userinfo
URL_PASSWORD = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^/\s:@]*:)[^/\s@]+@")
SECRET_TEXT = [
    (URL_PASSWORD, r"\1" + REDACTED + "@"),
    (re.compile(r"\bhf_[A-Za-z0-9]{20,}"), "hf_" + REDACTED),
    (re.compile(r"\bsk-[A-Za-z0-9_-]{16,}"), "sk-" + REDACTED),
    (
        re.compile(r"(?i)(authorization\s*[:=]\s*)(bearer|basic|token)?\s*[^\s'\",}]+"),
        r"\1\2 " + REDACTED,
    ),
    (re.compile(r"(?i)(--(?:api-key|hf-token|token)[= ])\S+"), r"\1" + REDACTED),
    (
        re.compile(r"(?i)\b([A-Z0-9_]*(?:KEY|TOKEN|SECRET|PASSWORD)[A-Z0-9_]*=)[^\s'\"]+"),
        r"\1" + REDACTED,
    ),
]


def redact_text(text: str) -> str:
    """Mask tokens (hf_…, sk-…), Authorization values, --api-key values and NAME=secret pairs."""
    for pattern, replacement in SECRET_TEXT:
        text = pattern.sub(replacement, text)
    return text


def redact_url(url: str) -> str:
    """A URL with the password of its userinfo masked: http://user:<redacted>@host."""
    return URL_PASSWORD.sub(r"\1" + REDACTED + "@", url)


def redact_json(value: Any) -> Any:
    """Redact a JSON document: env entries and header/dict keys with secret names, and strings."""
    if isinstance(value, dict):
        out = {}
        is_env_var = "name" in value and "value" in value and isinstance(value.get("name"), str)
        for k, v in value.items():
            if (is_env_var and k == "value" and SECRET_NAME.search(value["name"])) or (
                isinstance(k, str)
                and isinstance(v, str)
                and (SECRET_NAME.search(k) or k.lower() == "authorization")
            ):
                out[k] = REDACTED
            else:
                out[k] = redact_json(v)
        return out
    if isinstance(value, list):
        return [redact_json(v) for v in value]
    if isinstance(value, str):
        return redact_text(value)
    return value
