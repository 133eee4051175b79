"""`llmdoctor wiki site` and `llmdoctor wiki serve`: the runbooks as a static, searchable site."""

# no `from __future__ import annotations` here: typer reads the annotations at run time
import time
from pathlib import Path
from typing import Annotated

import typer

from llmdoctor.commands import options as opt

OutOption = Annotated[
    Path,
    typer.Option(
        "-o", "--output", help="Folder to write the site into (new, empty, or an earlier site)."
    ),
]
BaseUrlOption = Annotated[
    str | None,
    typer.Option(
        "--base-url",
        help="Where the site will be published (canonical links and urls.json); "
        "use the same value as --wiki-url.",
    ),
]


def site_command(
    output: OutOption,
    base_url: BaseUrlOption = None,
    as_json: opt.Json = False,
    wiki: opt.WikiDirs = None,
) -> None:
    """Write the wiki as a static site: an index with search, a page per entry, tag pages.

    The same merged entries as the CLI sees (built-in, LLMDOCTOR_WIKI, --wiki; later wins). The
    folder works from file:// and any static host; no server, no external assets.

    Examples:

    \b
      llmdoctor wiki site -o site/
      llmdoctor wiki site -o public/ --wiki team-runbooks/ --base-url https://runbooks.example.com
      xdg-open site/index.html            # or: llmdoctor wiki serve
    """
    from llmdoctor.wiki.site import build_site

    started = time.monotonic()
    summary = build_site(output, wiki, _base_url(base_url))
    elapsed = time.monotonic() - started
    from llmdoctor.terminal_text import visible

    if as_json:
        import json

        typer.echo(json.dumps(summary.to_json() | {"seconds": round(elapsed, 3)}))
    else:
        typer.echo(
            f"wrote {summary.entries} entries and {summary.tags} tag pages to "
            f"{visible(summary.path)} in {elapsed:.1f}s"
        )
        typer.echo(f"open: {visible((summary.path / 'index.html').resolve().as_uri())}")
    for problem in summary.problems:
        typer.echo(visible(f"{problem} (left out; run: llmdoctor wiki lint)"), err=True)
    raise typer.Exit(0)


def serve_command(
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="Port (0 = any).")] = 8088,
    bind: Annotated[str, typer.Option("--bind", help="Address to listen on.")] = "127.0.0.1",
    output: Annotated[
        Path | None, typer.Option("-o", "--output", help="Keep the site in this folder.")
    ] = None,
    base_url: BaseUrlOption = None,
    wiki: opt.WikiDirs = None,
) -> None:
    """Serve the site for preview and rebuild it when an entry file changes (Ctrl-C stops).

    Example:

    \b
      llmdoctor wiki serve --wiki team-runbooks/ --port 8088
    """
    import tempfile

    from llmdoctor.wiki.site_serve import serve

    if output is None:
        output = Path(tempfile.mkdtemp(prefix="llmdoctor-site-")) / "site"
    try:
        serve(output, wiki, _base_url(base_url), bind, port, log=lambda m: typer.echo(m, err=True))
    except KeyboardInterrupt:
        typer.echo("stopped", err=True)
    raise typer.Exit(0)


def _base_url(value: str | None) -> str | None:
    from llmdoctor.errors import BadInput

    if value is None:
        return None
    if not value.startswith(("http://", "https://", "file://", "/")):
        raise BadInput(f"--base-url {value!r}: give an http(s):// address or an absolute path")
    return value


def register(wiki_app: typer.Typer) -> None:
    wiki_app.command("site")(site_command)
    wiki_app.command("serve")(serve_command)
