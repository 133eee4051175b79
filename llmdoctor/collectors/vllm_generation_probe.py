"""The business-level probe: one streamed generation through vLLM's OpenAI API, timed.

A fixed prompt at temperature 0 with 16 max tokens, streamed through /v1/completions (or
/v1/chat/completions), read as server-sent events to time the first token and the gaps between
tokens. Network I/O goes through llmdoctor.collectors.vllm_endpoint.http_request.
"""

from __future__ import annotations

import itertools
import json
import time
from typing import Any

PROBE_PROMPT = "The capital of France is"
PROBE_QUESTION = "What is the capital of France? Answer in one word."
PROBE_MAX_TOKENS = 16
PROBE_CAP = 1024 * 1024


def _ms(seconds: float) -> float:
    return round(seconds * 1000.0, 1)


class StreamReader:
    """Reads an OpenAI server-sent-event stream, timing each chunk that carries text."""

    def __init__(self, chat: bool):
        self.chat = chat
        self.buffer = b""
        self.parts: list[str] = []
        self.token_times: list[float] = []
        self.events = 0
        self.done = False
        self.finish_reason: str | None = None
        self.stream_error: Any = None
        self.garbage: str | None = None

    def feed(self, chunk: bytes, now: float) -> None:
        self.buffer += chunk
        while b"\n" in self.buffer:
            line, self.buffer = self.buffer.split(b"\n", 1)
            self._line(line.strip(b"\r"), now)

    def _line(self, line: bytes, now: float) -> None:
        if not line or line.startswith((b":", b"event:", b"id:", b"retry:")):
            return
        if not line.startswith(b"data:"):
            self.garbage = self.garbage or line[:120].decode("utf-8", "replace")
            return
        data = line[5:].strip()
        if data == b"[DONE]":
            self.done = True
            return
        try:
            event = json.loads(data)
        except ValueError:
            self.garbage = self.garbage or data[:120].decode("utf-8", "replace")
            return
        if not isinstance(event, dict):
            self.garbage = self.garbage or data[:120].decode("utf-8", "replace")
            return
        if "error" in event or event.get("object") == "error":
            self.stream_error = event
            return
        self.events += 1
        for choice in event.get("choices") or []:
            if not isinstance(choice, dict):
                continue
            text, reasoning = choice_text(choice, self.chat)
            if text or reasoning:
                self.token_times.append(now)
            if text:
                self.parts.append(text)
            if choice.get("finish_reason"):
                self.finish_reason = str(choice["finish_reason"])

    @property
    def text(self) -> str:
        return "".join(self.parts)


def choice_text(choice: dict, chat: bool) -> tuple[str, str]:
    """(text, reasoning text) of one choice of a completion, chat, or streamed chunk."""
    if not chat:
        return str(choice.get("text") or ""), ""
    part = choice.get("delta") or choice.get("message") or {}
    if not isinstance(part, dict):
        return "", ""
    reasoning = part.get("reasoning_content") or part.get("reasoning") or ""
    return str(part.get("content") or ""), str(reasoning)


def probe_request(model: str, chat: bool) -> tuple[str, dict[str, Any]]:
    """(path, body) of the fixed, deterministic generation probe."""
    body: dict[str, Any] = {"model": model, "max_tokens": PROBE_MAX_TOKENS, "temperature": 0}
    if chat:
        body["messages"] = [{"role": "user", "content": PROBE_QUESTION}]
    else:
        body["prompt"] = PROBE_PROMPT
    body["stream"] = True
    return ("/v1/chat/completions" if chat else "/v1/completions"), body


def generation_probe(
    session, base: str, model: str, *, chat: bool, timeout: float, deadline: float
) -> dict[str, Any]:
    """vllm/probe.json: one streamed generation, timed (TTFT, inter-token latency, total).

    Fields: request, status, latency_ms, ttft_ms, itl_ms (mean), itl_p50_ms, itl_max_ms,
    chunks, text, finish_reason, error, error_kind, error_body.
    """
    from llmdoctor.collectors.http_request import error_message, http_request

    path, body = probe_request(model, chat)
    reader = StreamReader(chat)
    sent = time.monotonic()
    reply = http_request(
        session,
        "POST",
        f"{base}{path}",
        timeout=timeout,
        deadline=deadline,
        cap=PROBE_CAP,
        json_body=body,
        on_chunk=reader.feed,
    )
    # from `sent`, as the chunks' times are: http_request's own clock starts a little later, and
    # a short stream answered at once could read its first chunk after its end (a loaded host)
    latency = _ms(time.monotonic() - sent) if reply.latency_ms is not None else None
    result: dict[str, Any] = {
        "request": {"path": path, **body},
        "status": reply.status,
        "latency_ms": latency,
        "ttft_ms": None,
        "itl_ms": None,
        "itl_p50_ms": None,
        "itl_max_ms": None,
        "chunks": 0,
        "text": "",
        "finish_reason": None,
        "error": None,
        "error_kind": None,
        "error_body": None,
    }
    if reply.status is not None and reply.status != 200:
        message, parsed = error_message(reply)
        result.update(error=message, error_kind="http", error_body=parsed)
        return result
    if reply.status == 200 and reply.looks_like_html():
        message, parsed = error_message(reply)
        result.update(
            error=f"{message} instead of a completion", error_kind="html", error_body=parsed
        )
        return result
    if reply.status == 200 and "json" in reply.content_type and not reader.events:
        _non_streamed(reply, result, chat)  # a server or proxy that ignored "stream": true
    else:
        _streamed(reader, sent, result)
    if reply.error and not result["error"]:
        done = " before the end of the stream" if reply.status == 200 else ""
        result.update(error=f"{reply.error}{done}", error_kind=reply.error_kind)
    elif reply.status == 200 and not result["error"] and not reader.done and reader.events:
        result.update(error="the stream ended without [DONE]", error_kind="reset")
    if not result["error"]:
        _refuse_degenerate(result)
    return result


def _refuse_degenerate(result: dict[str, Any]) -> None:
    """A 200 whose text is not language (`!!!!`: NaN logits) is a failed probe, so the
    exporter's success metric and the check agree."""
    from llmdoctor.parsers.generated_text import degenerate

    why = degenerate(result.get("text") or "")
    if why is not None:
        result.update(error=f"degenerate output ({why})", error_kind="degenerate")


def _streamed(reader: StreamReader, sent: float, result: dict[str, Any]) -> None:
    times = reader.token_times
    gaps = [b - a for a, b in itertools.pairwise(times)]
    result.update(
        chunks=len(times),
        text=reader.text,
        finish_reason=reader.finish_reason,
        ttft_ms=_ms(times[0] - sent) if times else None,
        itl_ms=_ms(sum(gaps) / len(gaps)) if gaps else None,
        itl_p50_ms=_ms(sorted(gaps)[len(gaps) // 2]) if gaps else None,
        itl_max_ms=_ms(max(gaps)) if gaps else None,
    )
    if reader.stream_error is not None:
        err = reader.stream_error.get("error", reader.stream_error)
        message = err.get("message") if isinstance(err, dict) else str(err)
        result.update(
            error=f"error event in the stream: {message}",
            error_kind="stream-error",
            error_body=reader.stream_error,
        )
    elif reader.garbage is not None and not reader.events:
        result.update(
            error=f"the answer is not an OpenAI event stream: {reader.garbage!r}",
            error_kind="garbage",
        )


def _non_streamed(reply, result: dict[str, Any], chat: bool) -> None:
    try:
        body = json.loads(reply.text())
        choices = body.get("choices")
        # no choices at all is no completion (another server's JSON on every path), not an
        # empty generation
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise ValueError("no choices")
        choice = choices[0]
        text, _ = choice_text(choice, chat)
    except (ValueError, AttributeError, IndexError, TypeError):
        result.update(
            error="answered 200 with JSON that is not a completion",
            error_kind="garbage",
            error_body=reply.text()[:2000],
        )
        return
    result.update(text=text, finish_reason=choice.get("finish_reason"), chunks=1 if text else 0)
