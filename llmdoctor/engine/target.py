"""Parse what the user wants diagnosed: pod/NAME, deploy/NAME, sts/NAME, node, a URL, a bundle."""

from __future__ import annotations

import re
from dataclasses import dataclass

from llmdoctor.errors import BadTarget

ACCEPTED = (
    "pod/NAME, deploy/NAME (deployment/NAME), sts/NAME (statefulset/NAME), node, "
    "http(s)://HOST:PORT, or --bundle PATH"
)
KIND_ALIASES = {
    "pod": "pod",
    "pods": "pod",
    "po": "pod",
    "deploy": "deployment",
    "deployment": "deployment",
    "deployments": "deployment",
    "sts": "statefulset",
    "statefulset": "statefulset",
    "statefulsets": "statefulset",
}
# RFC 1123 subdomain, as Kubernetes requires for object names
K8S_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


@dataclass(frozen=True)
class Target:
    kind: str  # pod | deployment | statefulset | node | http | bundle
    name: str = ""
    url: str = ""

    def __str__(self) -> str:
        if self.kind == "http":
            from llmdoctor.redact import redact_url

            return redact_url(self.url)
        if self.kind in ("node", "bundle"):
            return self.kind if not self.name else f"{self.kind}:{self.name}"
        return f"{self.kind}/{self.name}"


def parse_target(text: str | None, bundle: str | None = None) -> Target:
    """The Target for a command-line string; BadTarget (exit 3) listing the accepted forms."""
    if bundle:
        if text:
            from llmdoctor.redact import redact_text

            raise BadTarget(
                f"give either a target or --bundle, not both (got {redact_text(text)!r})"
            )
        return Target("bundle", name=bundle)
    if not text:
        raise BadTarget(f"no target given; expected {ACCEPTED}")
    text = text.strip()
    if text == "node":
        return Target("node")
    if text.startswith(("http://", "https://")):
        from urllib.parse import urlsplit

        from llmdoctor.redact import redact_url

        shown = redact_url(text)  # an error never echoes the URL's password
        try:
            parts = urlsplit(text)
        except ValueError as exc:  # "Invalid IPv6 URL" for http://[::1
            raise BadTarget(f"{shown!r}: not a valid URL ({exc})") from None
        if not parts.hostname:
            raise BadTarget(f"{shown!r}: the URL has no host; expected http(s)://HOST:PORT")
        if parts.query or parts.fragment or text.rstrip().endswith(("?", "#")):
            # /health, /metrics and /v1/... would land inside the query: every answer a lie
            raise BadTarget(
                f"{shown!r}: the URL has a query or fragment (?... or #...); give the "
                "server's root URL, http(s)://HOST:PORT (an API key: $LLMDOCTOR_API_KEY)"
            )
        try:
            parts.port  # noqa: B018 - validates the port number
        except ValueError:
            raise BadTarget(f"{shown!r}: the port is not a number from 1 to 65535") from None
        return Target("http", url=text.rstrip("/"))
    kind, sep, name = text.partition("/")
    if sep and kind.lower() in KIND_ALIASES:
        if not K8S_NAME.match(name):
            raise BadTarget(f"{text!r}: {name!r} is not a valid Kubernetes object name")
        return Target(KIND_ALIASES[kind.lower()], name=name)
    from llmdoctor.redact import redact_text

    raise BadTarget(f"unrecognised target {redact_text(text)!r}; expected {ACCEPTED}")
