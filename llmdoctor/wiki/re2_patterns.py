"""Runbook signatures compiled by RE2 (google-re2): matching in linear time, whatever a team
writes. Kept apart from llmdoctor.wiki.signatures (the log-scanning engine) so that `wiki search`,
which checks a few signatures against a pasted line, loads only this and `re2`.
"""

from __future__ import annotations

RE2_MAX_MEM = 256 * 1024 * 1024  # budget of RE2's lazily built automata (not allocated upfront)


def re2_module():
    import re2

    return re2


def re2_options(never_capture: bool = True):
    re2 = re2_module()
    options = re2.Options()
    options.max_mem = RE2_MAX_MEM
    options.never_capture = never_capture
    options.log_errors = False
    return options


def line_pattern(signature: str):
    """One signature compiled by RE2 for matching single lines (`.search(line)`), or None when
    RE2 cannot compile it (`wiki lint` says why). Linear time, whatever the signature.
    """
    re2 = re2_module()
    try:
        return re2.compile(signature, re2_options())
    except re2.error:
        return None
