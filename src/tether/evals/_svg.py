"""Tiny SVG charts written by hand: horizontal bars and a histogram, as strings.

No library and nothing fetched: the page that embeds them stays one file.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

GOOD, BAD, INK, GRID = "#2e7d32", "#c62828", "#333", "#ddd"


def bars(items: Sequence[tuple[str, float]], *, title: str, unit: str = "%", width: int = 520) -> str:
    """One horizontal bar per (label, fraction in [0, 1]): green for the part that passed."""
    row, label_w, top = 22, min(220, 8 * max((len(lbl) for lbl, _ in items), default=4) + 10), 28
    plot_w = width - label_w - 60
    height = top + row * max(len(items), 1) + 10
    parts = [_open(width, height, title), _text(8, 18, title, weight="bold")]
    for i, (label, value) in enumerate(items):
        y = top + i * row
        v = min(max(value, 0.0), 1.0)
        parts.append(_text(label_w - 6, y + 14, _clip(label, 28), anchor="end"))
        parts.append(
            f'<rect x="{label_w}" y="{y + 3}" width="{plot_w}" height="{row - 8}" fill="{BAD}" opacity="0.25"/>'
        )
        parts.append(f'<rect x="{label_w}" y="{y + 3}" width="{plot_w * v:.1f}" height="{row - 8}" fill="{GOOD}"/>')
        shown = f"{v * 100:.0f}%" if unit == "%" else f"{value:g}"
        parts.append(_text(label_w + plot_w + 6, y + 14, shown))
    parts.append("</svg>")
    return "".join(parts)


def histogram(values: Sequence[float], *, title: str, xlabel: str, bins: int = 12, width: int = 520) -> str:
    """Counts of ``values`` in equal-width bins, with the axis labelled."""
    height, left, bottom, top = 210, 40, 36, 42
    parts = [_open(width, height, title), _text(8, 18, title, weight="bold")]
    if not values:
        parts.append(_text(left, top + 40, "no data"))
        return "".join([*parts, "</svg>"])
    low, high = min(values), max(values)
    span = (high - low) or 1.0
    n = max(1, min(bins, len(set(values))))
    counts = [0] * n
    for v in values:
        counts[min(int((v - low) / span * n), n - 1)] += 1
    plot_w, plot_h = width - left - 10, height - top - bottom
    peak = max(counts)
    bar_w = plot_w / n
    for i, c in enumerate(counts):
        h = plot_h * c / peak
        x, y = left + i * bar_w, top + plot_h - h
        parts.append(f'<rect x="{x + 1:.1f}" y="{y:.1f}" width="{bar_w - 2:.1f}" height="{h:.1f}" fill="#1565c0"/>')
        if c:
            parts.append(_text(x + bar_w / 2, y - 3, str(c), anchor="middle", size=10))
    axis_y = top + plot_h
    parts.append(f'<line x1="{left}" y1="{axis_y}" x2="{left + plot_w}" y2="{axis_y}" stroke="{INK}"/>')
    for frac, anchor in ((0.0, "start"), (0.5, "middle"), (1.0, "end")):
        parts.append(_text(left + plot_w * frac, axis_y + 14, _num(low + span * frac), anchor=anchor, size=10))
    parts.append(_text(left + plot_w / 2, height - 6, xlabel, anchor="middle", size=11))
    parts.append("</svg>")
    return "".join(parts)


def _open(width: int, height: int, title: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}">'
        f'<rect width="{width}" height="{height}" fill="white" stroke="{GRID}"/>'
    )


def _text(x: float, y: float, text: str, *, anchor: str = "start", size: int = 12, weight: str = "normal") -> str:
    return (
        f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" font-weight="{weight}" text-anchor="{anchor}" '
        f'fill="{INK}" font-family="sans-serif">{escape(text)}</text>'
    )


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _num(v: float) -> str:
    """A short axis label: three significant digits, no exponent for everyday sizes."""
    if abs(v) >= 100:
        return f"{v:.0f}"
    return f"{v:.3g}" if abs(v) >= 0.001 else "0"
