"""A team's own wiki entry, written by tests that need one (a folder given with --wiki)."""

from __future__ import annotations

from pathlib import Path

TEAM_BODY = """## Symptom
The widget service logs `TEAMERR widget exploded`.
## Cause
The widget exploded.
## Fix
Restart the widget.
## Verify
The line is gone.
## References
- https://example.com/widget
"""


def team_entry(folder: Path, entry_id: str, front: str) -> Path:
    """FOLDER/ENTRY_ID.md with the given extra front matter lines (each ending in a newline)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{entry_id}.md"
    path.write_text(
        f"---\nid: {entry_id}\ntitle: Team {entry_id}\nseverity: warning\ntags: [team]\n{front}---\n"
        + TEAM_BODY,
        encoding="utf-8",
    )
    return path
