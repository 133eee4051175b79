"""Serve the static site locally and rebuild it when an entry file is added, changed or removed."""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

POLL_SECONDS = 1.0


REQUEST_TIMEOUT = 30.0  # seconds a connection may sit idle before it is closed


class _SiteHandler(SimpleHTTPRequestHandler):
    """Serves the files the site's marker lists (what `build_site` wrote) and nothing else:
    no directory listings, no `.git/config`, no file a team keeps beside the site."""

    timeout = REQUEST_TIMEOUT

    def log_message(self, format, *args):
        pass

    def send_head(self):
        name = _listed_file(Path(self.directory), self.path)
        if name is None:
            self.send_error(404, "not a page of this site")
            return None
        self.path = "/" + name
        return super().send_head()

    def list_directory(self, path):
        self.send_error(404, "not a page of this site")
        return None


def _listed_file(directory: Path, request_path: str) -> str | None:
    """The site file a request names ('/' is index.html), if the marker lists it."""
    import json
    import os
    from urllib.parse import unquote, urlsplit

    from llmdoctor.wiki.folders import within_folder
    from llmdoctor.wiki.site import SITE_MARKER

    name = unquote(urlsplit(request_path).path).lstrip("/") or "index.html"
    try:
        listed = json.loads((directory / SITE_MARKER).read_text(encoding="utf-8"))["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(listed, list) or name not in listed:
        return None
    path = directory / name
    if not within_folder(path, directory) or not os.path.isfile(path):
        return None
    return name


def wiki_fingerprint(wiki_dirs) -> str:
    """What changes when an entry file is added, edited or removed (the index's own check)."""
    from llmdoctor.wiki.index import fingerprint, resolve_dirs, scan

    return fingerprint(scan(resolve_dirs(wiki_dirs)))


def start_server(directory: Path, bind: str, port: int) -> ThreadingHTTPServer:
    """An HTTP server for the site folder; BadInput (one line) for an address it cannot use."""
    import socket

    from llmdoctor.errors import BadInput

    handler = partial(_SiteHandler, directory=str(directory))
    server_class = ThreadingHTTPServer
    if ":" in bind:  # an IPv6 address such as ::1
        server_class = type(
            "_V6Server", (ThreadingHTTPServer,), {"address_family": socket.AF_INET6}
        )
    try:
        server = server_class((bind, port), handler)
    except (OSError, OverflowError, ValueError) as exc:
        why = getattr(exc, "strerror", None) or str(exc)
        raise BadInput(f"cannot serve on {bind}:{port}: {why}") from None
    server.daemon_threads = True
    return server


def _log_problems(summary, log: Callable[[str], None]) -> None:
    for problem in summary.problems:  # an entry left out is said, never dropped silently
        log(f"{problem} (left out; run: llmdoctor wiki lint)")


def serve(
    output: Path,
    wiki_dirs,
    base_url: str | None,
    bind: str,
    port: int,
    log: Callable[[str], None],
    stop: threading.Event | None = None,
) -> None:
    """Build, serve on bind:port, rebuild on change; returns when `stop` is set (or Ctrl-C)."""
    from llmdoctor.wiki.site import build_site

    stop = stop or threading.Event()
    summary = build_site(output, wiki_dirs, base_url)
    _log_problems(summary, log)
    seen = wiki_fingerprint(wiki_dirs)
    server = start_server(output, bind, port)
    host, actual = server.server_address[:2]
    log(f"serving {summary.entries} entries at http://{host}:{actual}/ (Ctrl-C stops)")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        while not stop.wait(POLL_SECONDS):
            now = wiki_fingerprint(wiki_dirs)
            if now == seen:
                continue
            seen = now
            try:
                summary = build_site(output, wiki_dirs, base_url)
                log(f"rebuilt: {summary.entries} entries")
                _log_problems(summary, log)
            except Exception as exc:  # a bad edit must not stop the preview
                log(f"rebuild failed, still serving the last site: {exc}")
    finally:
        server.shutdown()
        server.server_close()
