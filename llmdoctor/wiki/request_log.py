"""A server's log of a request it received or answered: the rest of such a line is what a user
wrote or the model said, never what the server did. explain, log-signatures, pod-restarts and
memory-fragmentation all pass it over (a prompt that quotes `CUDA out of memory` is no OOM).
"""

from __future__ import annotations

import re

# a server's log of a request it received or answered (vLLM's `--enable-log-requests` /
# `--enable-log-outputs`, entrypoints/serve/utils/request_logger.py of 0.32: `Request … details:
# prompt: '…'`, `Received request …: params: …`, `Generated response … (streaming complete):
# output: '…'`; older: `Received request …: prompt: '…'`; SGLang's `--log-requests`: `Receive:
# obj=GenerateReqInput(text='…')`): the rest of the line is what a user wrote or the model said,
# never what the server did; no evidence
REQUEST_LOG = re.compile(
    r"\b(Received request|Generated response|Request) [^\s:]{1,128}( \(streaming [a-z]+\))?"
    r"( details)?: (prompt|output|params)\b"
    r"|\bRequest [^\s:]{1,128} JSON body: "
    r"|\b(Receive|Finish): obj=[A-Za-z]*ReqInput\("
)


def request_log(text: str) -> bool:
    """Whether a log line is a request's or a response's record (REQUEST_LOG)."""
    return ("equest" in text or "esponse" in text or "obj=" in text) and bool(
        REQUEST_LOG.search(text)
    )
