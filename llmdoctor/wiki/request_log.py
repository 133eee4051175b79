"""A server's log of a request it received or answered: the rest of such a line is what a user
wrote or the model said, never what the server did. explain, log-signatures, pod-restarts and
memory-fragmentation all pass it over (a prompt that quotes `CUDA out of memory` is no OOM).
explain also passes over a command a person typed at a shell prompt in a paste (`$ grep -rn
"CUDA out of memory" /var/log`): what it searches for, not what was found.
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


# a shell prompt and a command that reads, searches or runs things: the words after it are what
# was typed. Prompts: `$ `, `# `, `% `, `> `; `user@host:dir$` (Debian), `[user@host dir]#` (RHEL,
# Amazon Linux), `user@host ~ %` (zsh), `sh-4.2$`, `gpu01#`, oh-my-zsh's `➜  ~`, `❯`, `λ`,
# PowerShell's `PS C:\>` and cmd's `C:\Users\bob>`; after a `(venv) ` and a time or not. The
# command is a word of its own: `>docker: Error response from daemon` is a quoted error
_PROMPT = (
    r"(?:[\w.-]{1,64}@[\w.-]{1,64}(?:[: ][^\s$#%>]{0,256})?(?: \([^)\n]{0,64}\))? ?[$#%>]"
    r"|\[[^\]\n]{1,256}\] ?[$#%]|[\w.-]{1,64}[$#%]|[$#%]|>(?= )"
    r"|(?:➜|❯|λ)(?: +[^\s]{1,256}(?: git:\([^)\n]{0,64}\))?(?: ✗)?)?"
    r"|PS(?: [A-Za-z]:\\[^>\n]{0,256})?>|[A-Za-z]:\\[^>\n]{0,256}>)"
)
_COMMAND = (
    r"(?:sudo +)?(?:e?grep|[xbz]?zgrep|rg|ag|ack|z?cat|tac|less|more|tail|head|sed|awk|cut|sort|"
    r"uniq|wc|jq|yq|kubectl|oc|stern|journalctl|dmesg|docker|podman|nerdctl|crictl|echo|printf|"
    r"find|python3?|pip3?|curl|wget|nvidia-smi|git|vim?|nano|helm|ssh|llmdoctor|findstr|"
    r"Select-String|sls|Get-Content|type)(?= |$)"
)
TYPED_COMMAND = re.compile(
    r"^\s{0,8}(?:\[?(?:[0-9]{4}-[0-9]{2}-[0-9]{2}[ T])?[0-9]{2}:[0-9]{2}:[0-9]{2}[.,0-9]{0,7}\]? +)?"
    r"(?:\([\w.-]{1,64}\) ?)?" + _PROMPT + " *" + _COMMAND
)


def not_server_output(text: str) -> bool:
    """Whether a line is a request's record (REQUEST_LOG) or a command typed at a shell prompt
    (TYPED_COMMAND): evidence of neither what failed nor what ran."""
    return request_log(text) or bool(TYPED_COMMAND.match(text))
