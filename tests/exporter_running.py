"""An exporter on a loopback port, in a thread, as the exporter tests drive it."""

from __future__ import annotations

import threading
import urllib.error
import urllib.parse
import urllib.request

from llmdoctor.fleet.exporter import ExporterServer, ProbeExporter, ProbeSettings


class Running:
    """An exporter on a loopback port, in a thread."""

    def __init__(self, settings: ProbeSettings):
        self.exporter = ProbeExporter(settings)
        self.server = ExporterServer(("127.0.0.1", 0), self.exporter)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Running:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def get(self, path: str, timeout: float = 30) -> tuple[int, str]:
        """GET `path` over HTTP: (status, body)."""
        url = f"http://127.0.0.1:{self.port}{path}"
        try:
            with urllib.request.urlopen(url, timeout=timeout) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    def probe(self, target: str, **params) -> tuple[int, str]:
        """GET /probe?target=… over HTTP."""
        query = urllib.parse.urlencode({"target": target, **params})
        return self.get(f"/probe?{query}")

    def probe_in_process(self, target: str) -> tuple[int, str]:
        """The exporter's answer to /probe?target=…, asked directly (no HTTP)."""
        status, body = self.exporter.probe(urllib.parse.urlencode({"target": target}), None)
        return status, body.decode()
