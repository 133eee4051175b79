"""Regexes compiled on first use, so that importing a module does not import `re`.

`wiki search` of ASCII text never needs a regex (llmdoctor/wiki/query.py cuts it by hand), and
`import re` with `enum` costs its process ~5 ms, a fifth of the search; the modules on that path
therefore name their patterns as strings and compile them here, once each, when one is needed.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    import re

_compiled: dict[tuple[str, bool], re.Pattern] = {}


def compiled(source: str, ignore_case: bool = False) -> re.Pattern:
    """`source` compiled (ignoring case if asked), once per process."""
    key = (source, ignore_case)
    found = _compiled.get(key)
    if found is None:
        import re

        found = _compiled[key] = re.compile(source, re.IGNORECASE if ignore_case else 0)
    return found
