"""Inline SVG charts, drawn as text: horizontal bars (with a reference line) and line charts.

Every label is HTML-escaped here (:func:`esc`); numbers are formatted with :func:`fmt`. The
charts have fixed pixel sizes and use only SVG elements any browser renders without scripts.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass

#: Colour-blind-safe palette (Okabe-Ito), in series order.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")
BAD = "#C0392B"
FONT = "font-family:system-ui,sans-serif;font-size:11px"


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def fmt(value: float) -> str:
    """A short number: 3-4 significant digits, no exponent for everyday magnitudes."""
    if value == 0 or not math.isfinite(value):
        return "0" if value == 0 else str(value)
    magnitude = abs(value)
    if magnitude >= 1e6 or magnitude < 1e-3:
        return f"{value:.3g}"
    if magnitude >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def _nice_max(value: float) -> float:
    """The round number (1, 2, 2.5 or 5 times a power of ten) at or above ``value``: the axis' top.

    In floats throughout: ``2 * 10**308`` as an int does not convert back (an ``OverflowError`` for a
    value near the largest float); a top that overflows is the value itself.
    """
    if not value > 0 or not math.isfinite(value):
        return 1.0
    exponent = math.floor(math.log10(value))
    for step in (1.0, 2.0, 2.5, 5.0, 10.0):
        top = step * 10.0**exponent
        if top >= value:
            return top if math.isfinite(top) else value
    return value


@dataclass(frozen=True)
class Bar:
    label: str
    value: float
    flagged: bool = False
    note: str = ""


def bar_chart(
    bars: Sequence[Bar], *, title: str, unit: str, reference: float | None = None, reference_label: str = ""
) -> str:
    """Horizontal bars (one per host), flagged ones in red, with an optional dashed reference line."""
    row, left, right, top = 24, 170, 170, 28
    width = 640
    height = top + row * len(bars) + 30
    plot_w = width - left - right
    high = _nice_max(max([b.value for b in bars] + [reference or 0.0]))
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" role="img" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" style="{FONT}"><title>{esc(title)}</title>',
        f'<text x="4" y="16" font-weight="bold">{esc(title)}</text>',
    ]
    for i, bar in enumerate(bars):
        y = top + i * row
        w = max(plot_w * bar.value / high, 1.0) if bar.value > 0 else 0.0
        colour = BAD if bar.flagged else PALETTE[0]
        label = bar.label if len(bar.label) <= 26 else bar.label[:25] + "…"
        parts.append(f'<text x="{left - 6}" y="{y + 15}" text-anchor="end">{esc(label)}</text>')
        parts.append(
            f'<rect x="{left}" y="{y + 4}" width="{w:.1f}" height="{row - 8}" fill="{colour}">'
            f"<title>{esc(bar.label)}: {esc(fmt(bar.value))} {esc(unit)}{esc(' ' + bar.note if bar.note else '')}"
            "</title></rect>"
        )
        text = f"{fmt(bar.value)} {unit}" + (f" {bar.note}" if bar.note else "")
        parts.append(f'<text x="{left + w + 4:.1f}" y="{y + 15}">{esc(text)}</text>')
    axis_y = top + row * len(bars) + 4
    parts.append(f'<line x1="{left}" y1="{axis_y}" x2="{left + plot_w}" y2="{axis_y}" stroke="#999"/>')
    for k in range(5):
        x = left + plot_w * k / 4
        tick = esc(fmt(high * k / 4))
        parts.append(f'<text x="{x:.1f}" y="{axis_y + 14}" text-anchor="middle" fill="#555">{tick}</text>')
    if reference is not None and reference > 0:
        x = left + plot_w * reference / high
        parts.append(
            f'<line x1="{x:.1f}" y1="{top - 4}" x2="{x:.1f}" y2="{axis_y}" stroke="#333" stroke-dasharray="4 3"/>'
        )
        parts.append(f'<text x="{x + 3:.1f}" y="{top - 6}" fill="#333">{esc(reference_label)}</text>')
    parts.append("</svg>")
    return "".join(parts)


@dataclass(frozen=True)
class Series:
    label: str
    points: Sequence[tuple[float, float]]


def line_chart(
    series: Sequence[Series],
    *,
    title: str,
    unit: str,
    x_labels: Sequence[tuple[float, str]] = (),
    x_title: str = "",
    log_y: bool = False,
    legend: str = "right",
) -> str:
    """Lines (one per series) over a numeric x axis; ``x_labels`` places tick labels at x values.

    ``legend="right"`` puts short labels (22 characters) beside the plot; ``"below"`` puts every
    label in full under it, one line each (the chart grows to fit them).
    """
    below = legend == "below"
    width, height, left, right, top, bottom = 640, 260, 64, 20 if below else 150, 28, 40
    plot_w, plot_h = width - left - right, height - top - bottom
    legend_top = height
    if below:
        height += 8 + 16 * len(series)
    xs = [x for s in series for x, _ in s.points]
    ys = [y for s in series for _, y in s.points if not log_y or y > 0]
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" role="img" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" style="{FONT}"><title>{esc(title)}</title>',
        f'<text x="4" y="16" font-weight="bold">{esc(title)}</text>',
    ]
    if not xs or not ys:
        parts.append(f'<text x="{left}" y="{top + 20}" fill="#555">no data</text></svg>')
        return "".join(parts)
    x_lo, x_hi = min(xs), max(xs)
    if x_hi == x_lo:
        x_hi = x_lo + 1
    if log_y:
        y_lo = 10 ** math.floor(math.log10(min(ys)))
        y_hi = 10 ** math.ceil(math.log10(max(ys)))
        if y_hi == y_lo:
            y_hi = y_lo * 10

        def ypos(v: float) -> float:
            return top + plot_h * (1 - (math.log10(max(v, y_lo)) - math.log10(y_lo)) / math.log10(y_hi / y_lo))

        ticks = [y_lo * 10**k for k in range(round(math.log10(y_hi / y_lo)) + 1)]
    else:
        y_lo, y_hi = 0.0, _nice_max(max(ys))

        def ypos(v: float) -> float:
            return top + plot_h * (1 - (v - y_lo) / (y_hi - y_lo))

        ticks = [y_hi * k / 4 for k in range(5)]

    def xpos(v: float) -> float:
        return left + plot_w * (v - x_lo) / (x_hi - x_lo)

    for tick in ticks:
        y = ypos(tick)
        parts.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" stroke="#e4e4e4"/>')
        parts.append(f'<text x="{left - 4}" y="{y + 4:.1f}" text-anchor="end" fill="#555">{esc(fmt(tick))}</text>')
    parts.append(
        f'<text x="12" y="{top + plot_h / 2:.0f}" transform="rotate(-90 12 {top + plot_h / 2:.0f})" '
        f'text-anchor="middle" fill="#555">{esc(unit)}</text>'
    )
    for x, label in x_labels:
        px = xpos(x)
        parts.append(f'<text x="{px:.1f}" y="{top + plot_h + 14}" text-anchor="middle" fill="#555">{esc(label)}</text>')
    if x_title:
        parts.append(
            f'<text x="{left + plot_w / 2:.0f}" y="{legend_top - 6}" text-anchor="middle" fill="#555">'
            f"{esc(x_title)}</text>"
        )
    parts.append(f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#999"/>')
    for i, s in enumerate(series):
        colour = PALETTE[i % len(PALETTE)]
        points = [(xpos(x), ypos(y)) for x, y in s.points if not log_y or y > 0]
        if len(points) > 1:
            path = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
            parts.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="1.8"/>')
        for x, y in points if len(points) <= 40 else []:
            parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2.5" fill="{colour}"/>')
        if below:
            ly, lx, label = legend_top + 12 + i * 16, left, s.label
        else:
            ly, lx = top + 12 + i * 16, left + plot_w + 10
            label = s.label if len(s.label) <= 22 else s.label[:21] + "…"
        parts.append(f'<rect x="{lx}" y="{ly - 8}" width="10" height="10" fill="{colour}"/>')
        parts.append(f'<text x="{lx + 14}" y="{ly + 1}">{esc(label)}</text>')
    parts.append("</svg>")
    return "".join(parts)
