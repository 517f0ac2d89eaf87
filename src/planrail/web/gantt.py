"""The run page's timeline: a Gantt chart of steps and their attempts, as an SVG.

One row per started step, ordered by start time; inside each row one bar per attempt (a failed
attempt drawn hatched-red, the wait before a retry as a thin line). Steps on the critical path
(:func:`planrail.web.views.critical_path`) are outlined and marked ``★``.
"""

from __future__ import annotations

from typing import Any
from xml.sax.saxutils import escape, quoteattr

from planrail.observe.graph import COLORS

__all__ = ["gantt_svg"]

ROW_H = 18.0
LABEL_W = 180.0
CHART_W = 720.0
TOP = 24.0


def _fmt(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.1f} s"


def gantt_svg(tl: dict[str, Any]) -> str:
    """The SVG of a :func:`~planrail.web.views.timeline`."""
    rows: list[dict[str, Any]] = tl["rows"]
    if not rows:
        return (
            '<svg xmlns="http://www.w3.org/2000/svg" class="gantt" width="400" height="30">'
            '<text x="8" y="20" font-size="12" fill="#495057">no step has started yet</text></svg>'
        )
    begin, end = float(tl["begin"]), float(tl["end"])
    span = max(end - begin, 1e-3)
    scale = CHART_W / span
    critical = set(tl["critical"])
    height = TOP + ROW_H * len(rows) + 8
    width = LABEL_W + CHART_W + 16
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="gantt" width="{width:.0f}" '
        f'height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}" '
        'font-family="Helvetica, Arial, sans-serif" font-size="11">',
        f'<text x="{LABEL_W}" y="14" fill="#495057">0</text>',
        f'<text x="{LABEL_W + CHART_W}" y="14" text-anchor="end" fill="#495057">'
        f"{escape(_fmt(span))}</text>",
    ]
    for i, row in enumerate(rows):
        y = TOP + i * ROW_H
        sid = str(row["step"])
        on_path = sid in critical
        fill, stroke = COLORS.get(str(row["status"]), COLORS[""])
        label = ("★ " if on_path else "") + sid
        weight = ' font-weight="bold"' if on_path else ""
        out.append(
            f'<g class="gantt-row{" critical" if on_path else ""}" data-step={quoteattr(sid)}>'
            f"<title>{escape(sid)}: {escape(str(row['status']))}, "
            f"{escape(_fmt(row['end'] - row['start']))}</title>"
            f'<text x="{LABEL_W - 6}" y="{y + 12:.1f}" text-anchor="end" '
            f'fill="#212529"{weight}>'
            f"{escape(label[:28])}</text>"
        )
        x0 = LABEL_W + (row["start"] - begin) * scale
        x1 = LABEL_W + (row["end"] - begin) * scale
        out.append(
            f'<rect x="{x0:.1f}" y="{y + 2:.1f}" width="{max(x1 - x0, 1.5):.1f}" '
            f'height="{ROW_H - 4:.1f}" rx="2" fill="{fill}" stroke="{stroke}" '
            f'stroke-width="{2.2 if on_path else 0.8}"/>'
        )
        attempts = row.get("attempts") or []
        for k, att in enumerate(attempts):
            a0 = LABEL_W + (att["start"] - begin) * scale
            a1 = LABEL_W + (att["end"] - begin) * scale
            color = "#2e7d32" if att["ok"] else "#c62828"
            out.append(
                f'<rect class="attempt" x="{a0:.1f}" y="{y + 6:.1f}" '
                f'width="{max(a1 - a0, 1.0):.1f}" height="{ROW_H - 12:.1f}" fill="{color}">'
                f"<title>attempt {escape(str(att['attempt']))}: "
                f"{escape(_fmt(att['end'] - att['start']))}</title></rect>"
            )
            if k + 1 < len(attempts):
                n0 = LABEL_W + (attempts[k + 1]["start"] - begin) * scale
                out.append(
                    f'<line x1="{a1:.1f}" x2="{n0:.1f}" y1="{y + 9:.1f}" y2="{y + 9:.1f}" '
                    'stroke="#868e96" stroke-dasharray="2,2"/>'
                )
        out.append("</g>")
    out.append("</svg>")
    return "\n".join(out)
