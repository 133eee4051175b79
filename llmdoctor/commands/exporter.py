"""`llmdoctor exporter` — serve the generation probe to Prometheus, blackbox_exporter style."""

from __future__ import annotations

from typing import Annotated

import typer

from llmdoctor.commands import options as opt


def exporter_command(
    listen: Annotated[
        str,
        typer.Option(
            "--listen",
            help="[HOST]:PORT to serve on; loopback unless HOST is given (0.0.0.0:9808: every "
            "interface, as a pod behind a Service needs).",
            show_default=True,
        ),
    ] = "127.0.0.1:9808",
    allow_target: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-target",
            help="Targets that may be probed (repeat): a CIDR (10.0.0.0/8), an address, a host "
            "(vllm.serving) or *.DOMAIN (*.serving: every Service of namespace serving). "
            "Default: loopback only. Cloud metadata addresses are always refused.",
        ),
    ] = None,
    api_key_target: Annotated[
        list[str] | None,
        typer.Option(
            "--api-key-target",
            help="Targets that get $LLMDOCTOR_API_KEY as a Bearer header (repeat; same forms "
            "as --allow-target). Default: none.",
        ),
    ] = None,
    max_connections: Annotated[
        int,
        typer.Option(
            "--max-connections",
            min=1,
            max=10000,
            help="Open connections at most; more are answered 503 and closed.",
            show_default=True,
        ),
    ] = 64,
    request_timeout: Annotated[
        float,
        typer.Option(
            "--request-timeout",
            parser=lambda text: opt.seconds_between("--request-timeout", 0.5, 3600)(text),
            metavar="SECONDS",
            help="Seconds a connection may send nothing before it is closed (30s, 1m also work).",
            show_default=True,
        ),
    ] = 30.0,
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout",
            parser=lambda text: opt.timeout_seconds(text),
            metavar="SECONDS",
            help="Seconds each request of a probe may take (0.1 to 86400; 10s, 2m also work).",
            show_default=True,
        ),
    ] = 3.0,
    window: Annotated[
        float,
        typer.Option(
            "--window",
            parser=lambda text: opt.seconds_between("--window", 0.0, opt.MAX_WINDOW, "2, 30s, 1m")(
                text
            ),
            metavar="SECONDS",
            help="Seconds between the target's two /metrics scrapes (30s, 1m also work).",
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
            parser=lambda text: opt.seconds_between("--queue-wait", 0.0, opt.MAX_WINDOW, "10, 30s")(
                text
            ),
            metavar="SECONDS",
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

    Only targets an --allow-target pattern allows are probed (loopback by default); the API key
    goes only to --api-key-target targets. See docs/exporter.md.

    Examples:

      llmdoctor exporter --allow-target '*.serving' --api-key-target '*.serving'

      curl 'http://localhost:9808/probe?target=http://vllm.serving:8000'
    """
    import os

    from llmdoctor.engine.collect import valid_timeout
    from llmdoctor.errors import BadInput
    from llmdoctor.fleet.exporter import ExporterServer, ProbeExporter, ProbeSettings, parse_listen
    from llmdoctor.fleet.target_policy import TargetPolicy

    valid_timeout(timeout)  # before listening, not on every scrape

    try:
        address = parse_listen(listen)
        policy = TargetPolicy.from_patterns(allow_target, api_key_target)
    except ValueError as exc:
        raise BadInput(str(exc)) from None
    settings = ProbeSettings(
        timeout=timeout,
        window=window,
        max_latency_ms=max_latency_ms,
        max_concurrent=max_concurrent,
        queue_wait=queue_wait,
        policy=policy,
        max_connections=max_connections,
        request_timeout=request_timeout,
    )
    if os.environ.get("LLMDOCTOR_API_KEY") and not api_key_target:
        typer.echo(
            "llmdoctor exporter: LLMDOCTOR_API_KEY is set but no --api-key-target names where "
            "it may go: it is sent to no target",
            err=True,
        )
    try:
        server = ExporterServer(address, ProbeExporter(settings))
    except OSError as exc:
        raise BadInput(f"--listen {listen}: {exc.strerror or exc}") from None
    host, port = server.server_address[:2]
    allowed = ", ".join(p.text for p in policy.allow)
    typer.echo(f"llmdoctor exporter listening on {host}:{port}; targets: {allowed}", err=True)
    try:
        server.serve_forever()
    finally:
        server.server_close()


def register(app: typer.Typer) -> None:
    app.command("exporter")(exporter_command)
