"""Options shared by every reporting command, declared once."""

from __future__ import annotations

from typing import Annotated

import typer

Json = Annotated[bool, typer.Option("--json", help="Print the llmdoctor/1 JSON object.")]
Markdown = Annotated[
    bool, typer.Option("--markdown", help="Print markdown for an incident doc or retro.")
]
NoColor = Annotated[
    bool, typer.Option("--no-color", help="No colours (also when NO_COLOR is set).")
]
Timeout = Annotated[
    float,
    typer.Option("--timeout", min=0.1, help="Seconds each collector may take.", show_default=True),
]
Only = Annotated[list[str] | None, typer.Option("--only", help="Run only this check (repeatable).")]
Skip = Annotated[list[str] | None, typer.Option("--skip", help="Skip this check (repeatable).")]
Verbose = Annotated[
    bool, typer.Option("-v", "--verbose", help="Show evidence of passing checks too.")
]
ChecksDir = Annotated[
    list[str] | None,
    typer.Option("--checks-dir", help="A folder of the site's own checks (repeatable)."),
]


def _wiki_url(value: str | None) -> str | None:
    from llmdoctor.wiki.links import set_wiki_url

    return set_wiki_url(value)


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
    float,
    typer.Option(
        "--window", min=0.0, help="Seconds between the two vLLM /metrics scrapes (0: one scrape)."
    ),
]
Target = Annotated[
    str | None,
    typer.Argument(help="pod/NAME, deploy/NAME, sts/NAME, node, or http(s)://HOST:PORT"),
]
