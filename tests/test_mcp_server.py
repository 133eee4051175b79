"""`llmdoctor mcp`: the tools, called with the MCP SDK's own client over stdio."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from vllm_server import FakeVllmServer

pytest.importorskip("mcp", reason="the MCP SDK is the `mcp` extra (in the test extras)")

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

ROOT = Path(__file__).resolve().parents[1]
LLMDOCTOR = str(Path(sys.executable).parent / "llmdoctor")
OOM_BUNDLE = ROOT / "examples" / "bundles" / "crashloop-cuda-oom"
# the first lines of a real CUDA OOM, as in the example bundle's previous log
QWEN_CONFIG = ROOT / "tests" / "fixtures" / "capacity" / "qwen2-7b-instruct-config.json"
OOM_LOG = (OOM_BUNDLE / "logs" / "vllm.previous.log").read_text()


def session_calls(calls: list[tuple[str, dict]]) -> tuple[list, list]:
    """(tool names, results of each call) from one stdio session with `llmdoctor mcp`."""

    async def main():
        params = StdioServerParameters(command=LLMDOCTOR, args=["mcp"], cwd=str(ROOT))
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            tools = (await session.list_tools()).tools
            results = [await session.call_tool(name, args) for name, args in calls]
            return tools, results

    return anyio.run(main)


def payload(result) -> dict:
    assert not result.isError, result.content
    return json.loads(result.content[0].text)


def test_tools_return_the_cli_json_and_are_read_only():
    with FakeVllmServer() as srv:
        tools, results = session_calls(
            [
                ("diagnose", {"bundle": str(OOM_BUNDLE)}),
                ("diagnose", {"target": srv.url, "window": 0.1, "timeout": 3}),
                ("explain", {"text": OOM_LOG}),
                ("wiki_search", {"query": "CUDA out of memory"}),
                ("wiki_show", {"entry_id": "cuda-oom-runtime"}),
                ("capacity", {"model_config_path": str(QWEN_CONFIG), "gpu": "A100-80GB"}),
            ]
        )
    by_name = {t.name: t for t in tools}
    assert set(by_name) == {"diagnose", "explain", "wiki_search", "wiki_show", "capacity"}
    assert all(t.annotations.readOnlyHint for t in tools)
    bundle, url, explained, search, show, capacity = (payload(r) for r in results)
    assert bundle["schema"] == "llmdoctor/2" and bundle["status"] == "critical"
    # the crash loop's OOM came before it served: a start-up that does not fit
    assert "vllm-startup-memory-insufficient" in bundle["findings"][0]["runbooks"]
    assert bundle["findings"][0]["evidence"]  # a verdict with evidence, not raw output
    assert url["schema"] == "llmdoctor/2" and url["status"] == "ok"
    assert explained["matches"][0]["id"] == "vllm-startup-memory-insufficient"
    assert explained["matches"][0]["lines_of"] == "cuda-oom-runtime"
    assert search["results"][0]["id"] == "cuda-oom-runtime"
    assert show["id"] == "cuda-oom-runtime" and show["fix"]
    cli = subprocess.run(
        [LLMDOCTOR, "capacity", "--json", "--gpu", "A100-80GB", "--model-config", str(QWEN_CONFIG)],
        capture_output=True,
        text=True,
    )
    assert capacity == json.loads(cli.stdout)  # the very JSON of the command


def test_what_the_cli_refuses_is_a_tool_error_with_its_one_line_reason():
    _, results = session_calls(
        [
            ("wiki_show", {"entry_id": "no-such-entry"}),
            ("diagnose", {"bundle": "/nonexistent/bundle"}),
            ("diagnose", {"target": "--force"}),
            ("diagnose", {}),
            # out of range: "timeout is too large", and 1e-9 written as `1e-09` the CLI refused
            ("diagnose", {"target": "http://127.0.0.1:9", "timeout": 1e9}),
            ("diagnose", {"target": "http://127.0.0.1:9", "timeout": 1e-9}),
        ]
    )
    assert all(r.isError for r in results)
    texts = [r.content[0].text for r in results]
    assert "no runbook entry 'no-such-entry'" in texts[0]
    assert "/nonexistent/bundle" in texts[1]
    assert "must not start with '-'" in texts[2]
    assert "give a target" in texts[3]
    assert all("must be 0.1 to 86400 seconds" in t for t in texts[4:6])


def test_the_capacity_tool_takes_the_config_path_by_a_name_that_says_so():
    tools, results = session_calls(
        [
            ("capacity", {"model_config_path": str(QWEN_CONFIG), "gpu": "H100"}),
            ("capacity", {"config_json": str(QWEN_CONFIG), "gpu": "H100"}),
        ]
    )
    schema = {t.name: t for t in tools}["capacity"].inputSchema
    assert "model_config_path" in schema["required"] and "config_json" not in schema["properties"]
    assert "not JSON text" in {t.name: t for t in tools}["capacity"].description
    assert payload(results[0])["gpu"]
    assert results[1].isError and "model_config_path" in results[1].content[0].text


def test_the_server_exits_0_without_a_traceback_when_stdin_is_closed():
    done = subprocess.run(
        [LLMDOCTOR, "mcp"], stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stderr) == (0, "")


def test_the_server_exits_0_when_the_client_closes_after_a_session():
    hello = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"},
        },
    }
    lines = [hello, {"jsonrpc": "2.0", "method": "notifications/initialized"}]
    lines.append({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    # as a client does: send, read both answers, then close (closing stdin at once races the
    # server's answer to the last request, which the SDK drops when stdin ends)
    with subprocess.Popen(
        [LLMDOCTOR, "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as server:
        server.stdin.write("".join(json.dumps(line) + "\n" for line in lines))
        server.stdin.flush()
        replies = [json.loads(server.stdout.readline()) for _ in range(2)]
        server.stdin.close()
        server.wait(timeout=60)
        rest, err = server.stdout.read(), server.stderr.read()
    assert "Traceback" not in err and server.returncode == 0, err
    assert [r["id"] for r in replies] == [1, 2] and replies[1]["result"]["tools"]
    assert rest == ""


def test_the_sdk_client_closing_the_session_leaves_no_traceback(tmp_path):
    errors = tmp_path / "stderr.txt"

    async def main():
        params = StdioServerParameters(command=LLMDOCTOR, args=["mcp"], cwd=str(ROOT))
        with errors.open("w") as errlog:
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                return await session.call_tool("wiki_show", {"entry_id": "cuda-oom-runtime"})

    assert payload(anyio.run(main))["id"] == "cuda-oom-runtime"
    assert "Traceback" not in errors.read_text()


def test_the_api_key_goes_only_to_urls_named_for_it(tmp_path):
    # the model names the URL: $LLMDOCTOR_API_KEY once went to any of them as a Bearer header
    import os

    key = "sk-mcp-key-0123456789abcdef"

    def calls(extra_env: dict) -> None:
        async def main():
            env = {**os.environ, "LLMDOCTOR_API_KEY": key, **extra_env}
            params = StdioServerParameters(command=LLMDOCTOR, args=["mcp"], cwd=str(ROOT), env=env)
            async with stdio_client(params) as (r, w), ClientSession(r, w) as session:
                await session.initialize()
                args = {"target": srv.url, "window": 0.1, "timeout": 3}
                payload(await session.call_tool("diagnose", args))

        anyio.run(main)

    with FakeVllmServer() as srv:
        calls({})
        assert srv.authorizations and set(srv.authorizations) == {None}
        srv.authorizations.clear()
        calls({"LLMDOCTOR_MCP_API_KEY_TARGETS": "127.0.0.0/8"})
        assert set(srv.authorizations) == {f"Bearer {key}"}


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), True])
def test_a_timeout_that_is_no_number_of_seconds_is_a_one_line_reason(bad):
    # a NaN reached the subprocess deadline before: "cannot convert float NaN to integer"
    from llmdoctor.fleet.mcp_server import ToolFailed, diagnose

    with pytest.raises(ToolFailed, match=r"must be a number of seconds, 0\.1 to 86400"):
        diagnose(target="http://127.0.0.1:9", timeout=bad)
