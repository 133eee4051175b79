"""Options shared by the commands, declared once.

Single options are Annotated aliases (`as_json: opt.Json = False`). The blocks that several
commands share (report, Kubernetes collection, generation probe, serving arguments) are
dataclasses whose fields carry their typer Option; `@opt.grouped(report=ReportOptions, ...)`
adds a block's options to a command and hands them to it as one object.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import os
import typing
from dataclasses import dataclass
from typing import Annotated, Any

import typer

from llmdoctor.engine.collect import MAX_WINDOW


def finite(param: typer.CallbackParam, value: float | None) -> float | None:
    """Refuse nan and inf for a number option: click's range checks let nan through (every
    comparison with nan is false), and a nan threshold or duration never fires nor ends."""
    import math

    from llmdoctor.errors import BadInput

    if value is not None and not math.isfinite(value):
        name = param.opts[0] if param.opts else param.name
        raise BadInput(f"{name} {value}: must be a finite number")
    return value


# explain, wiki and capacity print their own JSON objects; diagnose/node/probe the llmdoctor/2 one
Json = Annotated[
    bool,
    typer.Option("--json", help="Print JSON instead of text (keys: docs/guarantees.md)."),
]
ReportJson = Annotated[bool, typer.Option("--json", help="Print the llmdoctor/2 JSON object.")]
Markdown = Annotated[
    bool, typer.Option("--markdown", help="Print markdown for an incident doc or retro.")
]
NoColor = Annotated[
    bool, typer.Option("--no-color", help="No colours (also when NO_COLOR is set).")
]
Timeout = Annotated[
    float,
    typer.Option(
        "--timeout",
        parser=lambda text: timeout_seconds(text),  # defined further down
        metavar="SECONDS",
        help="Seconds each collector may take (0.1 to 86400; 30s, 2m and 1h also work); each "
        "check and parser gets as much CPU time, three times as long on the clock at most.",
        show_default=True,
    ),
]
Only = Annotated[
    list[str] | None,
    typer.Option("--only", help="Run only this check (repeatable, or CHECK,CHECK)."),
]
Skip = Annotated[
    list[str] | None, typer.Option("--skip", help="Skip this check (repeatable, or CHECK,CHECK).")
]
Verbose = Annotated[
    bool, typer.Option("-v", "--verbose", help="Show evidence of passing checks too.")
]
ChecksDir = Annotated[
    list[str] | None,
    typer.Option("--checks-dir", help="A folder of the site's own checks (repeatable)."),
]


def _wiki_url(value: str | None) -> str | None:
    from llmdoctor.errors import BadInput
    from llmdoctor.wiki.links import set_wiki_url

    try:
        return set_wiki_url(value)
    except BadInput as exc:
        raise typer.BadParameter(str(exc)) from None


WikiUrl = Annotated[
    str | None,
    typer.Option(
        "--wiki-url",
        envvar="LLMDOCTOR_WIKI_URL",
        callback=_wiki_url,
        help="Address of the published wiki site (llmdoctor wiki site): runbooks get links.",
    ),
]
WikiDirs = Annotated[
    list[str] | None,
    typer.Option("--wiki", help="A team wiki folder, searched with the built-in one (repeatable)."),
]

# Kubernetes collection (diagnose and collect)
Namespace = Annotated[str | None, typer.Option("-n", "--namespace", help="Kubernetes namespace.")]
KubeContext = Annotated[str | None, typer.Option("--context", help="kubeconfig context.")]
Selector = Annotated[
    str | None, typer.Option("-l", "--selector", help="The pods matching a label selector.")
]
Port = Annotated[int | None, typer.Option("--port", min=1, max=65535, help="vLLM port in the pod.")]
Tail = Annotated[int, typer.Option("--tail", min=1, help="Log lines per container.")]
NoExec = Annotated[bool, typer.Option("--no-exec", help="Do not exec into the serving container.")]
Window = Annotated[
    float | None,
    typer.Option(
        "--window",
        parser=lambda text: seconds_between("--window", 0.0, MAX_WINDOW, "5, 30s, 1m")(text),
        metavar="SECONDS",
        help="Seconds between the two vLLM /metrics scrapes (0: one scrape; default 5, "
        "0 with --prometheus; 30s and 1m also work).",
        show_default=False,
    ),
]


def _complete_target(ctx: typer.Context, incomplete: str) -> list[str]:
    from llmdoctor.commands.shell_completion import complete_target

    return complete_target(ctx, incomplete)


Target = Annotated[
    str | None,
    typer.Argument(
        help="pod/NAME, deploy/NAME, sts/NAME, node, or http(s)://HOST:PORT",
        autocompletion=_complete_target,
    ),
]

# vLLM serving arguments the checks compare with the GPU and the metrics (diagnose, node, probe)
Dtype = Annotated[
    str | None, typer.Option("--dtype", help="vLLM's --dtype, checked against the GPU.")
]
Quantization = Annotated[
    str | None,
    typer.Option("--quantization", help="vLLM's --quantization, checked against the GPU."),
]
GpuMemoryUtilization = Annotated[
    float | None,
    typer.Option(
        "--gpu-memory-utilization",
        callback=finite,
        help="vLLM's --gpu-memory-utilization to check against free memory (default 0.9).",
    ),
]
MaxNumSeqs = Annotated[
    int | None,
    typer.Option("--max-num-seqs", min=1, help="The server's --max-num-seqs, if not default."),
]
# the generation probe (probe, diagnose)
Model = Annotated[
    str | None,
    typer.Option("--model", help="Served model name to probe (default: first in /v1/models)."),
]
Chat = Annotated[
    bool, typer.Option("--chat", help="Probe /v1/chat/completions instead of /v1/completions.")
]
MaxLatencyMs = Annotated[
    float,
    typer.Option(
        "--max-latency-ms", min=1.0, callback=finite, help="Slowest acceptable generation probe."
    ),
]


@dataclass(frozen=True)
class ReportOptions:
    """How diagnose, node and probe print their report, and which checks run."""

    as_json: ReportJson = False
    as_markdown: Markdown = False
    no_color: NoColor = False
    timeout: Timeout = 10.0
    only: Only = None
    skip: Skip = None
    verbose: Verbose = False
    checks_dir: ChecksDir = None
    wiki: WikiDirs = None
    wiki_url: WikiUrl = None  # applied by its callback (LLMDOCTOR_WIKI_URL); the report reads it

    def selection(self) -> dict[str, Any]:
        """The DiagnoseRequest fields these options give: deadline, checks, wiki."""
        return {
            "timeout": self.timeout,
            "only": tuple(self.only or ()),
            "skip": tuple(self.skip or ()),
            "wiki_dirs": tuple(self.wiki or ()),
            "checks_dirs": tuple(self.checks_dir or ()),
        }

    def output(self) -> dict[str, Any]:
        """The keyword arguments of output.emit."""
        return {
            "as_json": self.as_json,
            "as_markdown": self.as_markdown,
            "no_color": self.no_color,
            "verbose": self.verbose,
        }


@dataclass(frozen=True)
class KubeOptions:
    """Where and how much to collect from Kubernetes (diagnose, collect)."""

    namespace: Namespace = None
    context: KubeContext = None
    selector: Selector = None
    port: Port = None
    tail: Tail = 2000
    no_exec: NoExec = False
    window: Window = None

    def collection(self) -> dict[str, Any]:
        """The collectors' options (CollectContext.options)."""
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class ProbeOptions:
    """The generation probe and the endpoint checks' limits (probe, diagnose)."""

    model: Model = None
    chat: Chat = False
    max_latency_ms: MaxLatencyMs = 1000.0
    max_num_seqs: MaxNumSeqs = None

    def collection(self) -> dict[str, Any]:
        return {"model": self.model, "chat": self.chat, "max_latency_ms": self.max_latency_ms}

    def request_fields(self) -> dict[str, Any]:
        """The ProbeRequest fields these options give."""
        return dataclasses.asdict(self)

    def settings(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "max_latency_ms": self.max_latency_ms,
            "max_num_seqs": self.max_num_seqs,
        }


@dataclass(frozen=True)
class GpuOptions:
    """vLLM arguments checked against the GPU when the pod spec does not give them."""

    dtype: Dtype = None
    quantization: Quantization = None
    gpu_memory_utilization: GpuMemoryUtilization = None

    def settings(self) -> dict[str, Any]:
        """settings/<name> facts; BadInput for a utilization outside (0, 1]."""
        from llmdoctor.errors import BadInput

        utilization = self.gpu_memory_utilization
        if utilization is not None and not 0 < utilization <= 1:
            raise BadInput(f"--gpu-memory-utilization {utilization}: expected a fraction in (0, 1]")
        return dataclasses.asdict(self)


PrometheusUrl = Annotated[
    str | None,
    typer.Option(
        "--prometheus",
        envvar="LLMDOCTOR_PROMETHEUS_URL",
        help="The team's Prometheus (Thanos, Mimir, VictoriaMetrics): read the target's history "
        "for a timeline. Auth: LLMDOCTOR_PROMETHEUS_TOKEN, or _USER and _PASSWORD; "
        "LLMDOCTOR_PROMETHEUS_CA.",
    ),
]
PrometheusSince = Annotated[
    str, typer.Option("--since", help="How much history to read from Prometheus (30m, 1h, 6h).")
]
PrometheusSelector = Annotated[
    str | None,
    typer.Option(
        "--prometheus-selector",
        help='Label matchers for the target\'s series, e.g. \'namespace="ai",pod="vllm-0"\' '
        "(default: namespace and pod, or instance for a URL).",
    ),
]
Charts = Annotated[
    str | None,
    typer.Option(
        "--charts",
        help="With --prometheus: write an SVG chart of the history into this folder "
        "(--markdown links it; needs llmdoctor[charts]).",
    ),
]


@dataclass(frozen=True)
class PrometheusOptions:
    """The incident timeline from the team's Prometheus (diagnose, probe, collect)."""

    prometheus: PrometheusUrl = None
    since: PrometheusSince = "1h"
    prometheus_selector: PrometheusSelector = None

    def collection(self) -> dict[str, Any]:
        """The options gather() reads; BadInput for a URL or duration it cannot use."""
        from llmdoctor.errors import BadInput

        if self.prometheus is None:
            return {}
        if not self.prometheus.startswith(("http://", "https://")):
            from llmdoctor.redact import redact_url

            shown = redact_url(self.prometheus)
            raise BadInput(f"--prometheus {shown!r}: expected http(s)://HOST:PORT")
        from llmdoctor.collectors.prometheus import normalize_selector

        ca = os.environ.get("LLMDOCTOR_PROMETHEUS_CA")
        if ca and not os.path.isfile(ca):
            raise BadInput(f"LLMDOCTOR_PROMETHEUS_CA={ca}: no such file")

        selector = self.prometheus_selector
        return {
            "prometheus": self.prometheus,
            "prometheus_since": parse_duration(self.since),
            "prometheus_selector": normalize_selector(selector) if selector else None,
        }

    def window(self, window: float | None) -> float | None:
        """The live /metrics window: with Prometheus the rates come from history, so 0."""
        if window is None and self.prometheus:
            return 0.0
        return window


def grouped(**groups: type):
    """Add the options of each dataclass in `groups` to a command; the command receives each
    block as one keyword argument (`report=ReportOptions(...)`), built from what was typed."""

    def decorate(command):
        signature = inspect.signature(command, eval_str=True)
        own = [p for p in signature.parameters.values() if p.name not in groups]
        fields: dict[str, list[str]] = {}
        added = []
        for group, cls in groups.items():
            hints = typing.get_type_hints(cls, include_extras=True)
            fields[group] = [f.name for f in dataclasses.fields(cls)]
            for f in dataclasses.fields(cls):
                added.append(
                    inspect.Parameter(
                        f.name,
                        inspect.Parameter.KEYWORD_ONLY,
                        default=f.default,
                        annotation=hints[f.name],
                    )
                )

        @functools.wraps(command)
        def run(**kwargs):
            for group, cls in groups.items():
                kwargs[group] = cls(**{name: kwargs.pop(name) for name in fields[group]})
            return command(**kwargs)

        params = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own] + added
        run.__signature__ = signature.replace(parameters=params)
        run.__annotations__ = {p.name: p.annotation for p in params}
        return run

    return decorate


_DURATION = r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([smhd]?)\s*$"  # ASCII digits only
_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}
MAX_SINCE = 366 * 86400.0  # a year; past it a start time can leave what the clock can represent


def _shown(text: str) -> str:
    """The value as the error repeats it: quoted, and cut short when long."""
    text = str(text)
    return repr(text if len(text) <= 40 else text[:40] + "…")


def _seconds(text: str, option: str, example: str) -> float:
    from llmdoctor.errors import BadInput
    from llmdoctor.lazy_regex import compiled

    m = compiled(_DURATION).match(str(text or ""))
    if not m:
        raise BadInput(f"{option} {_shown(text)}: expected a duration such as {example}")
    return float(m.group(1)) * _SECONDS[m.group(2)]


def parse_duration(text: str) -> float:
    """'24h' -> 86400.0; '90m', '7d', '3600s', '3600' also work. BadInput otherwise."""
    from llmdoctor.errors import BadInput

    seconds = _seconds(text, "--since", "24h, 90m, 7d")
    if seconds <= 0:
        raise BadInput(f"--since {_shown(text)}: expected a duration such as 24h, 90m, 7d")
    if seconds > MAX_SINCE:
        raise BadInput(f"--since {_shown(text)}: at most {MAX_SINCE // 86400:g}d of history")
    return seconds


def seconds_between(option: str, low: float, high: float, example: str = "10, 30s, 2m"):
    """A parser for a duration option: '10' and '10s' -> 10.0, '2m' -> 120.0, within [low,
    high]; a one-line BadInput otherwise (typer's own says "not a valid float range")."""

    def parse(text: str | float) -> float:
        from llmdoctor.errors import BadInput

        if isinstance(text, int | float):  # the default, given as a number
            return float(text)
        seconds = _seconds(text, option, example)
        if not low <= seconds <= high:
            raise BadInput(f"{option} {_shown(text)}: must be {low:g} to {high:g} seconds")
        return seconds

    return parse


def timeout_seconds(text: str) -> float:
    """--timeout: '10' and '10s' -> 10.0, '2m' -> 120.0; 0.1 s to a day. BadInput otherwise."""
    from llmdoctor.engine.collect import MAX_TIMEOUT, MIN_TIMEOUT

    return seconds_between("--timeout", MIN_TIMEOUT, MAX_TIMEOUT)(text)
