"""SVG charts of the Prometheus history for the postmortem (`--charts DIR`), with matplotlib.

One SVG per report: a panel per key series on a shared time axis, each onset of the Timeline
marked by a dashed line. matplotlib is an optional extra (`pip install 'llmdoctor[charts]'`)
and is imported only here, when charts are asked for.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

from llmdoctor.errors import BadInput
from llmdoctor.timeline.view import MARKS, history_of, key_lines

PANEL_HEIGHT_IN = 1.3


def chart_path(folder: Path, target: str, end: float) -> Path:
    """llmdoctor-timeline-<target>-<end, UTC>.svg: a new name per target and window."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", target).strip("-") or "target"
    stamp = datetime.fromtimestamp(end, UTC).strftime("%Y%m%dT%H%M%SZ")
    return folder / f"llmdoctor-timeline-{name[:80]}-{stamp}.svg"


def write_charts(report, folder: str) -> list[tuple[str, str]]:
    """Write the report's chart into `folder`; [(label, path)], [] without history.

    BadInput when matplotlib is missing or the file already exists (never overwritten)."""
    found = history_of(report)
    if found is None:
        return []
    timeline, series = found
    # a series that stayed at zero (no Xid, no restart) says so in the sparklines, not a panel
    lines = [line for line in key_lines(series) if any(v for _, v in line[3])]
    if not lines:
        return []
    try:
        import matplotlib

        matplotlib.use("svg")
        import matplotlib.dates as mdates
        import matplotlib.pyplot as plt
    except ImportError:
        raise BadInput("--charts needs matplotlib: pip install 'llmdoctor[charts]'") from None
    out_dir = Path(folder)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = chart_path(out_dir, report.target, timeline["end"])
    if path.exists():
        raise BadInput(f"{path} already exists; llmdoctor does not overwrite it")

    def when(t: float):
        return datetime.fromtimestamp(t, UTC)

    events = timeline.get("events") or []
    fig, axes = plt.subplots(
        len(lines), 1, sharex=True, figsize=(9, PANEL_HEIGHT_IN * len(lines) + 0.6), squeeze=False
    )
    for ax, (name, label, unit, points) in zip(axes[:, 0], lines, strict=True):
        xs = [when(t) for t, _ in points]
        scale = 100.0 if unit == "%" else 1.0
        ax.plot(xs, [v * scale for _, v in points], linewidth=1.2, color="#1f5fa8")
        ax.set_ylabel(label + (f" ({unit.strip()})" if unit.strip() else ""), fontsize=8)
        if unit == "%":
            ax.set_ylim(0, 105)
        elif min(v for _, v in points) >= 0:
            ax.set_ylim(bottom=0)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
        for e in events:
            if e["what"] in MARKS.get(name, ()):
                ax.axvline(when(e["since"]), color="#c0392b", linestyle="--", linewidth=1)
                ax.annotate(
                    when(e["since"]).strftime("%H:%M:%S"),
                    (when(e["since"]), 1.0),
                    xycoords=("data", "axes fraction"),
                    fontsize=7,
                    color="#c0392b",
                    va="top",
                )
    axes[-1, 0].xaxis.set_major_formatter(mdates.DateFormatter("%H:%M", tz=UTC))
    axes[-1, 0].set_xlim(when(timeline["start"]), when(timeline["end"]))
    axes[-1, 0].set_xlabel("UTC", fontsize=8)
    fig.suptitle(f"llmdoctor: {report.target}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, format="svg")
    plt.close(fig)
    return [("Prometheus history with the onsets marked", str(path))]
