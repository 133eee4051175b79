"""Addresses of runbook pages on the team's published wiki site (`llmdoctor wiki site`).

The site's address comes from `--wiki-url URL` or LLMDOCTOR_WIKI_URL; the option sets the
variable, so every report, explain match and `wiki show` of one run prints the same addresses.
Without it, no address is printed: llmdoctor never guesses where a team publishes its wiki.
"""

from __future__ import annotations

import os

ENV_WIKI_URL = "LLMDOCTOR_WIKI_URL"


def wiki_url() -> str | None:
    """The published site's base address, or None when none was given."""
    value = os.environ.get(ENV_WIKI_URL, "").strip()
    return value or None


def page_url(entry_id: str) -> str | None:
    """The page of one entry (`<base>/<id>.html`, as `wiki site` writes it), or None."""
    base = wiki_url()
    if base is None:
        return None
    return base.rstrip("/") + "/" + entry_id + ".html"


_HOST_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-")
_PATH_CHARS = _HOST_CHARS | frozenset("_~%/")


def _plain_site_address(value: str) -> bool:
    """`http(s)://host[:port][/path]` in plain characters: an address check_wiki_url accepts,
    told without urllib.parse, which loads `re` (~5 ms of every `wiki search` of a team that sets
    LLMDOCTOR_WIKI_URL). Anything else is checked in full."""
    scheme, sep, rest = value.partition("://")
    if not sep or scheme not in ("http", "https"):
        return False
    host, _, path = rest.partition("/")
    name, colon, port = host.partition(":")
    if not name or not set(name) <= _HOST_CHARS or not set(path) <= _PATH_CHARS:
        return False
    return not colon or (port.isascii() and port.isdigit() and len(port) <= 5 and int(port) < 65536)


def check_wiki_url(value: str) -> str | None:
    """Why `value` cannot be the site's base address, or None. Pages are `<base>/<id>.html`, so
    a query or fragment would land on the wrong page, and credentials would be printed in every
    report."""
    return None if _plain_site_address(value) else address_problem(value)


def address_problem(value: str) -> str | None:
    """check_wiki_url's full check, with urllib.parse."""
    from urllib.parse import urlsplit

    if not value or any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in value):
        return "give the site's address without spaces or control characters"
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises on a malformed port
        host = parts.hostname
    except ValueError as exc:
        return f"not a valid address ({exc})"
    if parts.scheme not in ("http", "https", "file"):
        return "give the site's http(s):// or file:// address"
    if parts.scheme != "file" and not host:
        return "the address names no host"
    if parts.username is not None or parts.password is not None:
        return "give the address without user:password@ (it is printed in every report)"
    if parts.query or parts.fragment or value.endswith(("?", "#")):
        return "give the site's base address, without ?query or #fragment (pages are BASE/ID.html)"
    return None


def wiki_url_taken(option: str | None) -> bool:
    """For a start-up path without typer (`wiki search`, `explain`): the --wiki-url value, else
    a non-empty LLMDOCTOR_WIKI_URL, made this run's address as the option's callback does;
    False when it is not usable, so that typer reads the arguments and says why."""
    value = option if option is not None else os.environ.get(ENV_WIKI_URL) or None
    if value is None:
        return True
    try:
        set_wiki_url(value)
    except Exception:
        return False
    return True


def set_wiki_url(value: str | None) -> str | None:
    """Validate a --wiki-url value and make it the address for this run; BadInput (the
    address with any password redacted, and why) when it is not a usable site address."""
    if value is None:
        return None
    value = value.strip()
    why = check_wiki_url(value)
    if why:
        from llmdoctor.errors import BadInput
        from llmdoctor.redact import redact_url

        raise BadInput(f"{redact_url(value)!r}: {why}")
    os.environ[ENV_WIKI_URL] = value
    return value
