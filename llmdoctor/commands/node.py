"""`llmdoctor node` — is this GPU machine fit to serve, and if not, why?"""

from __future__ import annotations

import time
from typing import Annotated

import typer

from llmdoctor.commands import options as opt

SCOPES = ("node", "logs")


def _existing_file(option: str, path: str | None, max_bytes: int | None = None) -> str | None:
    """`path` when it is a regular file (of at most `max_bytes`); a one-line refusal that says
    what it is otherwise (no such file, a device, a FIFO, a folder, too big)."""
    from llmdoctor.input_files import regular_file

    if path is not None:
        regular_file(option, path, max_bytes)
    return path


@opt.grouped(gpu=opt.GpuOptions, report=opt.ReportOptions)
def node_command(
    python: Annotated[
        str | None,
        typer.Option(
            "--python", help="The serving environment's python (default: python3 on PATH)."
        ),
    ] = None,
    nvidia_smi_xml: Annotated[
        str | None,
        typer.Option("--nvidia-smi-xml", help="Read `nvidia-smi -q -x` output from this file."),
    ] = None,
    kernel_log: Annotated[
        str | None,
        typer.Option("--kernel-log", help="Read the kernel log from this file (dmesg/journal)."),
    ] = None,
    since: Annotated[
        str | None,
        typer.Option("--since", help="Kernel log window, e.g. 24h, 90m, 7d (live default 24h)."),
    ] = None,
    bundle: Annotated[
        str | None,
        typer.Option("--bundle", help="Check the node facts of a saved bundle instead."),
    ] = None,
    xid_policy: Annotated[
        str | None,
        typer.Option(
            "--xid-policy",
            help="The team's Xid policy (YAML; default: $LLMDOCTOR_XID_POLICY, else NVIDIA's "
            "catalog).",
        ),
    ] = None,
    prometheus_textfile: Annotated[
        str | None,
        typer.Option(
            "--prometheus-textfile",
            help="Also write the result as Prometheus metrics to this *.prom file (atomically), "
            "for node-exporter's textfile collector.",
        ),
    ] = None,
    *,
    gpu: opt.GpuOptions,
    report: opt.ReportOptions,
) -> None:
    """Check this GPU node: driver/CUDA/torch match, GPU memory, Xid errors, GPU health.

    Run it on the node (or inside the serving container). Examples:

      llmdoctor node

      llmdoctor node --python /opt/venv/bin/python --gpu-memory-utilization 0.95

      llmdoctor node --nvidia-smi-xml smi.xml --kernel-log dmesg.txt --json

      llmdoctor node --bundle examples/bundles/xid79-gpu-fallen-off-bus

      llmdoctor node --json --prometheus-textfile /var/lib/node_exporter/textfile/llmdoctor.prom
    """
    from llmdoctor.collectors.nvidia_smi import MAX_XML_BYTES
    from llmdoctor.commands.output import diagnose_and_exit
    from llmdoctor.engine.collect import CollectContext
    from llmdoctor.engine.target import Target
    from llmdoctor.errors import BadInput
    from llmdoctor.gpus.xid_policy import policy_from_option
    from llmdoctor.usecases.diagnose import gather

    if python is not None:
        import shutil

        if shutil.which(python) is None:
            raise BadInput(f"--python {python}: not found or not executable")
    textfile = None
    if prometheus_textfile is not None:
        from llmdoctor.fleet.node_metrics import validate_textfile_path

        textfile = validate_textfile_path(prometheus_textfile)
    started, clock = time.time(), time.monotonic()
    policy = policy_from_option(_existing_file("--xid-policy", xid_policy))
    settings = {**gpu.settings(), "xid_policy": policy}
    options = {
        "python": python,
        "nvidia_smi_xml": _existing_file("--nvidia-smi-xml", nvidia_smi_xml, MAX_XML_BYTES),
        "kernel_log": _existing_file("--kernel-log", kernel_log),
        "since_seconds": opt.parse_duration(since) if since is not None else None,
    }
    target = Target("bundle", name=bundle) if bundle else Target("node")
    ctx = CollectContext(target=target, timeout=report.timeout, options=options)
    facts_list = gather(target, ctx)
    if textfile is not None:
        _report_with_textfile(facts_list, bundle, settings, report, textfile, started, clock)
    diagnose_and_exit(
        facts_list,
        "node" if not bundle else f"bundle {bundle}",
        scopes=SCOPES,
        settings=settings,
        **report.printing(),
    )


def _report_with_textfile(facts_list, bundle, settings, report, textfile, started, clock):
    """Run the node checks, write the metrics file, then print and exit like the others."""
    import typer

    from llmdoctor.commands.output import emit
    from llmdoctor.engine.registry import checks_for_scopes
    from llmdoctor.fleet.node_metrics import build_registry, write_textfile
    from llmdoctor.usecases.diagnose import diagnose

    printing = report.printing()
    result = diagnose(
        facts_list,
        "node" if not bundle else f"bundle {bundle}",
        scopes=SCOPES,
        only=printing.pop("only"),
        skip=printing.pop("skip"),
        wiki_dirs=printing.pop("wiki"),
        settings=settings,
        checks_dirs=printing.pop("checks_dir"),
    )
    check_ids = sorted({c.id for c in checks_for_scopes(SCOPES)})
    registry = build_registry(result, check_ids, started=started, duration=time.monotonic() - clock)
    try:
        write_textfile(textfile, registry)
        not_written = None
    except OSError as exc:  # a full disk or a folder it may not write: the report still counts
        not_written = exc.strerror or type(exc).__name__
    code = int(emit(result, **printing))
    if not_written is not None:
        typer.echo(
            f"llmdoctor: --prometheus-textfile {textfile} not written: {not_written}", err=True
        )
    raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    app.command("node")(node_command)
