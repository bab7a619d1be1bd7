"""SVG building blocks shared by the figures (forest plot, evidence figures): colours, a linear axis with
nice ticks, text and rect elements, and the grid, ticks and legends of a point chart.

Everything returns SVG text; no plotting library, no scripts, no assets.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from typing import TYPE_CHECKING

from studies.numbers import is_finite_number

if TYPE_CHECKING:
    from studies.evidence import MeanInterval

__all__ = [
    "FONT",
    "GRID",
    "MARGIN",
    "MUTED",
    "PALETTE",
    "TEXT",
    "TOP",
    "Axis",
    "clamped",
    "legend_rows",
    "level",
    "nice_axis",
    "nice_step",
    "point_with_whisker",
    "series_legend",
    "svg_attr",
    "svg_open",
    "svg_rect",
    "svg_text",
    "tick_label",
    "vertical_label",
    "x_ticks",
    "y_grid",
]

TEXT = "#1f2328"
MUTED = "#57606a"
GRID = "#d0d7de"
# Colour-blind-safe categorical colours (Okabe-Ito), one per series.
PALETTE = ("#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#000000")
FONT = 'font-family="system-ui, -apple-system, Segoe UI, Roboto, sans-serif" font-size="12"'
# The evidence figures' page margin and the room for their title and subtitle.
MARGIN = 12
TOP = 52


@dataclass(frozen=True)
class Axis:
    """A linear axis from value range [low, high] onto pixels [left, right], ticks every `step`."""

    low: float
    high: float
    step: float
    left: float
    right: float

    @property
    def middle(self) -> float:
        return (self.left + self.right) / 2

    @property
    def decimals(self) -> int:
        return max(0, -math.floor(math.log10(self.step) + 1e-9))

    def x(self, value: float) -> float:
        return self.left + (value - self.low) / (self.high - self.low) * (self.right - self.left)

    def ticks(self) -> list[float]:
        first = round(self.low / self.step)
        last = round(self.high / self.step)
        # Multiples of the step, not repeated sums, so 0.3 is 0.3 and not 0.30000000000000004.
        return [k * self.step for k in range(first, last + 1)]


def nice_axis(values: Sequence[float | None], left: float, right: float, target_ticks: int = 5) -> Axis:
    """An axis that ends on nice ticks (1, 2 or 5 times a power of ten) and contains every finite value."""
    finite = [v for v in values if is_finite_number(v)]
    low, high = (min(finite), max(finite)) if finite else (0.0, 1.0)
    if high - low <= 0.0:
        half = abs(low) * 0.05 or 0.5  # one value (or all equal): a small window around it
        low, high = low - half, high + half
    span = high - low
    step = nice_step(span / (target_ticks - 1))
    # Snap outwards to whole steps; the tolerance keeps a value lying on a tick from adding one more.
    nice_low = math.floor(low / step + 1e-9) * step
    nice_high = math.ceil(high / step - 1e-9) * step
    return Axis(low=nice_low, high=nice_high, step=step, left=left, right=right)


def nice_step(raw: float) -> float:
    exponent = math.floor(math.log10(raw))
    fraction = raw / 10**exponent
    # Round to the nearest nice step (not up), so a panel gets about `target_ticks` ticks, never just 3.
    for nice, upper in ((1.0, 1.5), (2.0, 3.0), (5.0, 7.0)):
        if fraction < upper:
            return nice * 10**exponent
    return 10.0 ** (exponent + 1)


def tick_label(value: float, decimals: int, *, signed: bool) -> str:
    if abs(value) < 10 ** -(decimals + 2):
        return "0"  # no "-0.00" or "+0.00" at the origin
    text = f"{value:+.{decimals}f}" if signed else f"{value:.{decimals}f}"
    return text.replace("-", "−")  # a real minus sign lines up with the plus


def svg_text(
    x: float,
    y: float,
    content: str,
    *,
    anchor: str = "start",
    fill: str = TEXT,
    weight: str = "400",
    css: str | None = None,
    size: int | None = None,
    italic: bool = False,
) -> str:
    attrs = [f'x="{x:.1f}"', f'y="{y:.1f}"']
    if css:
        attrs.insert(0, f'class="{css}"')
    if anchor != "start":
        attrs.append(f'text-anchor="{anchor}"')
    if fill != TEXT:
        attrs.append(f'fill="{fill}"')
    if weight != "400":
        attrs.append(f'font-weight="{weight}"')
    if size is not None:
        attrs.append(f'font-size="{size}"')
    if italic:
        attrs.append('font-style="italic"')
    return f"<text {' '.join(attrs)}>{escape(content)}</text>"


def svg_rect(x: float, y: float, w: float, h: float, fill: str, *, css: str, rx: float = 0) -> str:
    corner = f' rx="{rx:g}"' if rx else ""
    return f'<rect class="{css}" x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" fill="{fill}"{corner}/>'


def svg_attr(value: str) -> str:
    return escape(value, quote=True)


# ------------------------------------------------------------------------- point charts (evidence)


def svg_open(width: float, height: float, css: str, label: str) -> str:
    return (
        f'<svg class="{css}" width="{width:.0f}" height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}" '
        f'role="img" {FONT} fill="{TEXT}" aria-label="{svg_attr(label)}">\n<title>{escape(label)}</title>'
    )


def y_grid(axis: Axis, left: float, right: float) -> list[str]:
    parts = [
        f'<line class="axis" x1="{left:.1f}" y1="{axis.right:.1f}" x2="{left:.1f}" y2="{axis.left:.1f}" '
        f'stroke="{MUTED}" stroke-width="1"/>'
    ]
    for value in axis.ticks():
        y = axis.x(value)
        parts.append(
            f'<line class="gridline" x1="{left:.1f}" y1="{y:.1f}" x2="{right:.1f}" y2="{y:.1f}" '
            f'stroke="{GRID}" stroke-width="0.8"/>'
        )
        parts.append(
            svg_text(
                left - 6,
                y + 4,
                tick_label(value, axis.decimals, signed=False),
                anchor="end",
                fill=MUTED,
                css="tick",
                size=11,
            )
        )
    return parts


def x_ticks(axis: Axis, bottom: float, *, integer: bool) -> list[str]:
    parts = []
    for value in axis.ticks():
        x = axis.x(value)
        label = str(round(value)) if integer else tick_label(value, axis.decimals, signed=False)
        parts.append(
            f'<line class="tick-mark" x1="{x:.1f}" y1="{bottom:.1f}" x2="{x:.1f}" y2="{bottom + 4:.1f}" '
            f'stroke="{MUTED}" stroke-width="1"/>'
        )
        parts.append(svg_text(x, bottom + 16, label, anchor="middle", fill=MUTED, css="tick", size=11))
    return parts


def clamped(axis: Axis, value: float) -> float:
    """Pixel of `value`, held inside the axis (a t interval may reach past a bounded scale)."""
    return axis.x(min(max(value, axis.low), axis.high))


def vertical_label(x: float, y: float, content: str) -> str:
    return (
        f'<text class="axis-label" x="{x:.1f}" y="{y:.1f}" text-anchor="middle" '
        f'transform="rotate(-90 {x:.1f} {y:.1f})">{escape(content)}</text>'
    )


def point_with_whisker(value: MeanInterval, x: float, y_axis: Axis, colour: str, what: str) -> list[str]:
    if not is_finite_number(value.mean):
        return []
    interval = ""
    parts = []
    if is_finite_number(value.ci_low) and is_finite_number(value.ci_high):
        y1, y2 = clamped(y_axis, value.ci_low), clamped(y_axis, value.ci_high)
        parts.append(
            f'<line class="whisker" x1="{x:.1f}" y1="{y1:.1f}" x2="{x:.1f}" y2="{y2:.1f}" '
            f'stroke="{colour}" stroke-width="1.6"/>'
        )
        interval = f" [{value.ci_low:.3f}, {value.ci_high:.3f}]"
    tooltip = f"{what} {value.mean:.3f}{interval}, n = {value.n}"
    parts.append(
        f'<circle class="point" cx="{x:.1f}" cy="{clamped(y_axis, value.mean):.1f}" r="4" fill="{colour}" '
        f'stroke="#ffffff" stroke-width="1"><title>{escape(tooltip)}</title></circle>'
    )
    return parts


_LEGEND_ENTRY_WIDTH = 170.0


def _legend_per_row(x: float, width: float) -> int:
    return max(1, int((width - x) // _LEGEND_ENTRY_WIDTH))


def legend_rows(entries: int, x: float, width: float) -> int:
    return max(1, math.ceil(entries / _legend_per_row(x, width)))


def series_legend(labels: list[str], x: float, y: float, width: float) -> str:
    per_row = _legend_per_row(x, width)
    parts = ['<g class="legend series">']
    for i, label in enumerate(labels):
        row, column = divmod(i, per_row)
        cx, cy = x + column * _LEGEND_ENTRY_WIDTH, y + row * 20
        parts.append(
            f'<circle class="legend-mark" cx="{cx + 5:.1f}" cy="{cy - 4:.1f}" r="5" '
            f'fill="{PALETTE[i % len(PALETTE)]}"/>'
        )
        parts.append(svg_text(cx + 15, cy, _shorten(label, 22)))
    parts.append("</g>")
    return "\n".join(parts)


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def level(confidence: float) -> str:
    return f"{confidence * 100:g} %"
