"""A sequential study's monitoring figure, as trial-monitoring plots draw it: each comparison's statistic
(z scale) at each look against the boundaries it was tested with, as inline SVG text.

One colour per comparison: a solid line through its statistic at its looks (a filled dot where it stopped,
labelled with why), its efficacy boundary dashed (mirrored below 0 for a two-sided superiority test) and
its futility boundary dotted. Boundaries differ between comparisons (each is tested at its Holm level, at
the seeds it actually has), so each is drawn in its comparison's colour. Points beyond the plot's range
(a z of 40 when the seeds agree to many digits) sit on its edge, marked as such in their tooltip.

`sequential_figure(looks, test=, max_seeds=)` returns an EvidenceFigure for the report and the study page;
`looks` are `LookRecord.to_json()` dicts as stored.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from studies.tables.render_evidence_svg import EvidenceFigure
from studies.tables.svg import (
    MARGIN,
    MUTED,
    PALETTE,
    TOP,
    Axis,
    clamped,
    legend_rows,
    nice_axis,
    series_legend,
    svg_open,
    svg_text,
    x_ticks,
    y_grid,
)

__all__ = ["sequential_figure", "sequential_svg"]

# Boundaries at an early look of an O'Brien-Fleming design reach 10 and more; beyond this the plot
# would flatten every later look.
_Z_CLIP = 8.0
_STOP_WORDS = {
    "efficacy": "differs",
    "non_inferior": "non-inferior",
    "equivalent": "equivalent",
    "futility": "futility",
    "not_equivalent": "not equivalent",
    "max_seeds": "undecided",
    "too_few_seeds": "too few seeds",
}


def sequential_figure(
    looks: Sequence[Mapping[str, Any]], *, test: str, max_seeds: int
) -> EvidenceFigure | None:
    """The monitoring figure, None before the first look."""
    if not any(look.get("comparisons") for look in looks):
        return None
    return EvidenceFigure(
        "sequential_monitoring",
        f"Each comparison's statistic at each look (solid) against its efficacy boundary (dashed) and "
        f"futility boundary (dotted), {test}, up to {max_seeds} seeds per method",
        sequential_svg(looks, test=test, max_seeds=max_seeds),
    )


def _series(looks: Sequence[Mapping[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    series: dict[str, list[dict[str, Any]]] = {}
    for look in looks:
        for method, point in (look.get("comparisons") or {}).items():
            series.setdefault(method, []).append(point)
    return series


def _finite(values: Sequence[float | None]) -> list[float]:
    return [
        max(-_Z_CLIP, min(_Z_CLIP, float(v))) for v in values if v is not None and not math.isnan(float(v))
    ]


def sequential_svg(looks: Sequence[Mapping[str, Any]], *, test: str, max_seeds: int) -> str:
    series = _series(looks)
    two_sided = test == "superiority"
    left = MARGIN + 48.0
    top = float(TOP)
    plot_w, plot_h = 460.0, 240.0
    width = left + plot_w + MARGIN + 90
    legend_y = top + plot_h + 52
    methods = list(series)
    height = legend_y + 20 * legend_rows(len(methods), MARGIN, width) + 8
    x_axis = Axis(
        low=0.0,
        high=float(max_seeds),
        step=float(max(1, math.ceil(max_seeds / 10))),
        left=left,
        right=left + plot_w,
    )
    values: list[float] = [0.0]
    for points in series.values():
        values += _finite(
            [p.get("z") for p in points]
            + [p.get("efficacy") for p in points]
            + [p.get("futility") for p in points]
        )
        if two_sided:
            values += _finite([-float(p["efficacy"]) for p in points if p.get("efficacy") is not None])
    y_axis = nice_axis(values, top + plot_h, top)

    title = "Sequential monitoring"
    subtitle = f"{test}: statistic (z scale) against the seeds each comparison had at each look"
    parts = [
        svg_open(width, height, "sequential-monitoring", title),
        svg_text(MARGIN, 18, title, weight="600"),
        svg_text(MARGIN, 36, subtitle, fill=MUTED),
    ]
    parts += y_grid(y_axis, left, left + plot_w)
    parts += x_ticks(x_axis, top + plot_h, integer=True)
    parts.append(svg_text(left + plot_w / 2, top + plot_h + 34, "paired seeds", anchor="middle"))
    for index, (method, points) in enumerate(series.items()):
        colour = PALETTE[index % len(PALETTE)]
        parts += _comparison(method, points, colour, x_axis, y_axis, two_sided=two_sided)
    parts.append(series_legend([f"{m} vs reference" for m in methods], MARGIN, legend_y, width))
    parts.append("</svg>")
    return "\n".join(parts)


def _polyline(css: str, xy: list[tuple[float, float]], colour: str, dash: str | None) -> str:
    if len(xy) < 1:
        return ""
    coordinates = " ".join(f"{x:.1f},{y:.1f}" for x, y in xy)
    dashed = f' stroke-dasharray="{dash}"' if dash else ""
    return (
        f'<polyline class="{css}" points="{coordinates}" fill="none" stroke="{colour}" '
        f'stroke-width="1.6"{dashed}/>'
    )


def _comparison(
    method: str,
    points: list[dict[str, Any]],
    colour: str,
    x_axis: Axis,
    y_axis: Axis,
    *,
    two_sided: bool,
) -> list[str]:
    xs = [x_axis.x(float(p["seeds"])) for p in points]
    parts = []
    efficacy = [
        (x, clamped(y_axis, float(p["efficacy"])))
        for x, p in zip(xs, points, strict=True)
        if _is_number(p.get("efficacy"))
    ]
    parts.append(_polyline("efficacy-boundary", efficacy, colour, "6 4"))
    if two_sided:
        mirrored = [
            (x, clamped(y_axis, -float(p["efficacy"])))
            for x, p in zip(xs, points, strict=True)
            if _is_number(p.get("efficacy"))
        ]
        parts.append(_polyline("efficacy-boundary", mirrored, colour, "6 4"))
    futility = [
        (x, clamped(y_axis, float(p["futility"])))
        for x, p in zip(xs, points, strict=True)
        if _is_number(p.get("futility"))
    ]
    if futility:
        parts.append(_polyline("futility-boundary", futility, colour, "2 3"))
        if two_sided:
            mirrored = [
                (x, clamped(y_axis, -float(p["futility"])))
                for x, p in zip(xs, points, strict=True)
                if _is_number(p.get("futility"))
            ]
            parts.append(_polyline("futility-boundary", mirrored, colour, "2 3"))
    path = [(x, clamped(y_axis, _clip(p["z"]))) for x, p in zip(xs, points, strict=True)]
    parts.append(_polyline("statistic", path, colour, None))
    for (x, y), point in zip(path, points, strict=True):
        stopped = point.get("decision") not in (None, "open")
        clipped = " (beyond the plot)" if abs(float(point["z"])) > _Z_CLIP else ""
        tooltip = (
            f"{method}, look {point['look']}: {point['seeds']} paired seeds, difference "
            f"{float(point['estimate']):+.4g}, z {float(point['z']):.2f}{clipped}, efficacy boundary "
            f"{float(point['efficacy']):.2f}, level {float(point['level']):.4g}: {point.get('decision')}"
        )
        fill = colour if stopped else "#ffffff"
        parts.append(
            f'<circle class="look-point" data-method="{escape(method)}" data-decision="{escape(str(point.get("decision")))}" '
            f'cx="{x:.1f}" cy="{y:.1f}" r="4" fill="{fill}" stroke="{colour}" stroke-width="1.6">'
            f"<title>{escape(tooltip)}</title></circle>"
        )
        if stopped:
            parts.append(
                svg_text(
                    x + 7, y - 6, _STOP_WORDS.get(str(point["decision"]), str(point["decision"])), fill=colour
                )
            )
    return parts


def _clip(value: Any) -> float:
    number = float(value)
    if math.isnan(number):
        return 0.0
    return max(-_Z_CLIP, min(_Z_CLIP, number))


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(float(value))
