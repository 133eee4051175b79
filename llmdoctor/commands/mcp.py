"""`llmdoctor mcp` — serve llmdoctor's read-only verdicts to AI agents (Model Context Protocol)."""

from __future__ import annotations

import typer


def mcp_command() -> None:
    """Serve diagnose, explain, wiki_search, wiki_show and capacity as MCP tools over stdio.

    Each tool returns the same JSON as the command's --json. Needs the `mcp` extra
    (pip install 'llmdoctor[mcp]'). In an agent's MCP configuration:

      {"mcpServers": {"llmdoctor": {"command": "llmdoctor", "args": ["mcp"]}}}
    """
    import importlib.util

    from llmdoctor.errors import BadInput

    if importlib.util.find_spec("mcp") is None:
        raise BadInput("llmdoctor mcp needs the MCP SDK: pip install 'llmdoctor[mcp]'")
    from llmdoctor.fleet.mcp_server import serve

    serve()


def register(app: typer.Typer) -> None:
    app.command("mcp")(mcp_command)
