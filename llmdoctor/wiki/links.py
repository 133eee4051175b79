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


def set_wiki_url(value: str | None) -> str | None:
    """Validate a --wiki-url value and make it the address for this run (typer callback)."""
    if value is None:
        return None
    value = value.strip()
    if not value.startswith(("http://", "https://", "file://")):
        import typer

        raise typer.BadParameter(f"{value!r}: give the site's http(s):// or file:// address")
    os.environ[ENV_WIKI_URL] = value
    return value
