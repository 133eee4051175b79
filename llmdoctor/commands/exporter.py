"""`llmdoctor exporter` — serve the generation probe to Prometheus, blackbox_exporter style."""

from __future__ import annotations

from typing import Annotated

import typer

from llmdoctor.commands import options as opt


def exporter_command(
    listen: Annotated[
        str, typer.Option("--listen", help="[HOST]:PORT to serve on.", show_default=True)
    ] = ":9808",
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout",
            callback=opt.finite,
            min=0.1,
            help="Seconds each request of a probe may take.",
            show_default=True,
        ),
    ] = 3.0,
    window: Annotated[
        float,
        typer.Option(
            "--window",
            callback=opt.finite,
            max=opt.MAX_WINDOW,
            min=0.0,
            help="Seconds between the target's two /metrics scrapes.",
            show_default=True,
        ),
    ] = 2.0,
    max_latency_ms: Annotated[
        float,
        typer.Option(
            "--max-latency-ms",
            callback=opt.finite,
            min=1.0,
            help="Slowest completion that counts as success.",
            show_default=True,
        ),
    ] = 1000.0,
    max_concurrent: Annotated[
        int,
        typer.Option(
            "--max-concurrent", min=1, help="Probes that may run at once.", show_default=True
        ),
    ] = 4,
    queue_wait: Annotated[
        float,
        typer.Option(
            "--queue-wait",
            callback=opt.finite,
            max=opt.MAX_WINDOW,
            min=0.0,
            help="Seconds a scrape waits for a free probe slot before it is answered 503.",
            show_default=True,
        ),
    ] = 10.0,
) -> None:
    """Serve the generation probe to Prometheus, blackbox_exporter style.

    `GET /probe?target=http://vllm:8000[&model=NAME][&chat=1]` answers health, one real
    generation (TTFT, total latency) and the target's queue/KV figures as metrics.

    A probe takes at most window + 1.5 x timeout (less when Prometheus sends its scrape timeout);
    keep the scrape_timeout of the job above that. The exporter's own metrics are on /metrics.

    Examples:

      llmdoctor exporter --listen :9808

      curl 'http://localhost:9808/probe?target=http://vllm.serving:8000'
    """
    from llmdoctor.engine.collect import valid_timeout
    from llmdoctor.errors import BadInput
    from llmdoctor.fleet.exporter import ExporterServer, ProbeExporter, ProbeSettings, parse_listen

    valid_timeout(timeout)  # before listening, not on every scrape

    try:
        address = parse_listen(listen)
    except ValueError as exc:
        raise BadInput(str(exc)) from None
    settings = ProbeSettings(
        timeout=timeout,
        window=window,
        max_latency_ms=max_latency_ms,
        max_concurrent=max_concurrent,
        queue_wait=queue_wait,
    )
    try:
        server = ExporterServer(address, ProbeExporter(settings))
    except OSError as exc:
        raise BadInput(f"--listen {listen}: {exc.strerror or exc}") from None
    host, port = server.server_address[:2]
    typer.echo(f"llmdoctor exporter listening on {host}:{port}", err=True)
    try:
        server.serve_forever()
    finally:
        server.server_close()


def register(app: typer.Typer) -> None:
    app.command("exporter")(exporter_command)
