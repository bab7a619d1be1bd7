"""Figures of a study's tuning views (studies.tuning) as inline SVG text, like the evidence figures.

- `importance_svg`: each swept knob's share of the importance, one bar per Optuna evaluator (mean over the
  fits its spread is over), the whisker from the lowest to the highest fit;
- `history_svg`: the objective of each tune trial in start order, with the best so far as a step line
  (crosses: trials with no objective);
- `response_svg`: for a sweep, the objective against each knob, one panel per knob on a shared axis: the
  mean over seeds with its t interval over faint dots, one per trial.

`tuning_figures(tuning)` lists every figure the data allow, as studies.tables.render_evidence_svg's
EvidenceFigure (saved as files with its `standalone_svg`).
"""

from __future__ import annotations

import re
from html import escape
from typing import TYPE_CHECKING, Any

from studies.numbers import is_finite_number
from studies.tables.render_evidence_svg import EvidenceFigure
from studies.tables.svg import (
    GRID,
    MARGIN,
    MUTED,
    PALETTE,
    TOP,
    Axis,
    clamped,
    legend_rows,
    level,
    nice_axis,
    point_with_whisker,
    series_legend,
    svg_attr,
    svg_open,
    svg_text,
    vertical_label,
    x_ticks,
    y_grid,
)

if TYPE_CHECKING:
    from studies.tuning import KnobResponse, MethodTuning, StudyTuning

__all__ = ["history_svg", "importance_svg", "response_svg", "tuning_figures"]

_EVALUATOR_NAMES = {"fanova": "fANOVA", "ped_anova": "PED-ANOVA"}


def tuning_figures(tuning: StudyTuning) -> list[EvidenceFigure]:
    """Per method: its importance bars (when an evaluator gave numbers), its optimisation history (a tune
    phase) and its response to each knob (a sweep)."""
    figures: list[EvidenceFigure] = []
    for method in tuning.methods:
        slug = _slug(method.method)
        evaluators = [e for e in method.importance.evaluators if e.knobs]
        if evaluators:
            spreads = "; ".join(
                f"{_EVALUATOR_NAMES.get(e.evaluator, e.evaluator)}: over {e.spread_over}"
                for e in evaluators
                if e.spread_over
            )
            figures.append(
                EvidenceFigure(
                    f"knob_importance_{slug}",
                    f"{method.method}: importance of each swept knob from {method.importance.trials} "
                    f"{tuning.phase} trials (mean, whisker lowest to highest fit"
                    + (f"; {spreads})" if spreads else ")"),
                    importance_svg(method, tuning),
                )
            )
        if method.history is not None and method.history.points:
            figures.append(
                EvidenceFigure(
                    f"optimisation_history_{slug}",
                    f"{method.method}: {tuning.objective} of each tune trial in start order, and the best so far",
                    history_svg(method, tuning),
                )
            )
        if method.response:
            figures.append(
                EvidenceFigure(
                    f"knob_response_{slug}",
                    f"{method.method}: {tuning.objective} against each swept knob (mean over seeds of the "
                    f"mean over the other knobs, {level(tuning.confidence)} t interval; dots: trials)",
                    response_svg(method, tuning),
                )
            )
    return figures


# ----------------------------------------------------------------------------------------- importance


def importance_svg(method: MethodTuning, tuning: StudyTuning) -> str:
    """One row per assessed knob (most important first, by the first evaluator), one bar per evaluator."""
    evaluators = [e for e in method.importance.evaluators if e.knobs]
    names = [_EVALUATOR_NAMES.get(e.evaluator, e.evaluator) for e in evaluators]
    knobs = [row.knob for row in evaluators[0].knobs] if evaluators else []
    left = MARGIN + 110.0
    top = float(TOP)
    plot_w = 400.0
    bar_h, row_gap = 12.0, 10.0
    row_h = bar_h * max(1, len(evaluators)) + row_gap
    plot_h = row_h * len(knobs)
    width = left + plot_w + MARGIN + 14
    legend_y = top + plot_h + 48
    height = legend_y + 20 * legend_rows(len(names), MARGIN, width) + 8
    axis = Axis(low=0.0, high=1.0, step=0.2, left=left, right=left + plot_w)

    title = f"{method.method}: knob importance"
    subtitle = (
        f"share of the importance of {tuning.objective}, {method.importance.trials} {tuning.phase} trials"
    )
    parts = [
        svg_open(width, height, "knob-importance", title),
        svg_text(MARGIN, 18, title, weight="600"),
        svg_text(MARGIN, 36, subtitle, fill=MUTED),
    ]
    for value in axis.ticks():
        x = axis.x(value)
        parts.append(
            f'<line class="gridline" x1="{x:.1f}" y1="{top:.1f}" x2="{x:.1f}" y2="{top + plot_h:.1f}" '
            f'stroke="{GRID}" stroke-width="0.8"/>'
        )
    parts += x_ticks(axis, top + plot_h, integer=False)
    for row, knob in enumerate(knobs):
        y0 = top + row * row_h + row_gap / 2
        parts.append(svg_text(left - 8, y0 + row_h / 2, knob, anchor="end", css="knob"))
        for i, evaluator in enumerate(evaluators):
            found = next((r for r in evaluator.knobs if r.knob == knob), None)
            if found is None:
                continue
            colour = PALETTE[i % len(PALETTE)]
            y = y0 + i * bar_h
            spread = f", sd {found.sd:.3f}" if found.sd is not None else ""
            tooltip = (
                f"{names[i]}: {knob} {found.importance:.3f} (fits {found.low:.3f} to {found.high:.3f}{spread}, "
                f"{evaluator.fits} fit(s))"
            )
            parts.append(
                f'<rect class="importance-bar" data-knob="{svg_attr(knob)}" data-evaluator="{evaluator.evaluator}" '
                f'x="{left:.1f}" y="{y + 1:.1f}" width="{axis.x(found.importance) - left:.1f}" '
                f'height="{bar_h - 2:.1f}" fill="{colour}"><title>{escape(tooltip)}</title></rect>'
            )
            if found.high > found.low:
                parts.append(
                    f'<line class="importance-whisker" x1="{axis.x(found.low):.1f}" y1="{y + bar_h / 2:.1f}" '
                    f'x2="{axis.x(found.high):.1f}" y2="{y + bar_h / 2:.1f}" stroke="{MUTED}" stroke-width="1.4"/>'
                )
    parts.append(svg_text(left + plot_w / 2, top + plot_h + 34, "share of the importance", anchor="middle"))
    parts.append(series_legend(names, MARGIN, legend_y, width))
    parts.append("</svg>")
    return "\n".join(parts)


# -------------------------------------------------------------------------------------------- history


def history_svg(method: MethodTuning, tuning: StudyTuning) -> str:
    """Dots: each tune trial's objective; step line: the best so far; ring: the trial the final phase took
    its knobs from; crosses on the bottom edge: trials with no objective (failed, cancelled, running)."""
    assert method.history is not None, "only a tune phase has a history"
    points = method.history.points
    left = MARGIN + 56.0
    top = float(TOP)
    plot_w, plot_h = 460.0, 220.0
    width = left + plot_w + MARGIN + 14
    height = top + plot_h + 48
    x_axis = nice_axis([0.0, float(max(len(points) - 1, 1))], left, left + plot_w)
    if x_axis.step < 1.0:
        x_axis = Axis(low=x_axis.low, high=x_axis.high, step=1.0, left=left, right=left + plot_w)
    values = [p.value for p in points if p.value is not None]
    y_axis = nice_axis(values or [0.0, 1.0], top + plot_h - 14, top)  # room for crosses at the bottom edge
    colour = PALETTE[0]
    direction = "higher is better" if tuning.higher_is_better else "lower is better"
    best = method.history.best_number

    title = f"{method.method}: optimisation history"
    scored = f"{len(values)} of {len(points)} tune trial(s) scored"
    best_text = f", best: trial {best} ({points[best].value:.4g})" if best is not None else ""
    parts = [
        svg_open(width, height, "optimisation-history", title),
        svg_text(MARGIN, 18, title, weight="600"),
        svg_text(MARGIN, 36, f"{scored}{best_text}; line: best so far; ×: no value", fill=MUTED),
    ]
    parts += y_grid(y_axis, left, left + plot_w)
    parts.append(
        f'<line class="axis" x1="{left:.1f}" y1="{top + plot_h:.1f}" x2="{left + plot_w:.1f}" '
        f'y2="{top + plot_h:.1f}" stroke="{MUTED}" stroke-width="1"/>'
    )
    parts += x_ticks(x_axis, top + plot_h, integer=True)
    parts.append(_best_so_far_line(points, x_axis, y_axis))
    for point in points:
        x = x_axis.x(point.number)
        knobs = ", ".join(f"{k}={_value_text(v)}" for k, v in point.params.items())
        epochs = f", {point.epochs} epoch(s)" if point.epochs is not None else ""
        name = f"trial {point.number}{epochs}: {knobs}"
        if point.value is None:
            y = top + plot_h - 6
            parts.append(
                f'<path class="no-value" d="M{x - 4:.1f},{y - 4:.1f} L{x + 4:.1f},{y + 4:.1f} '
                f'M{x - 4:.1f},{y + 4:.1f} L{x + 4:.1f},{y - 4:.1f}" stroke="{MUTED}" stroke-width="1.8">'
                f"<title>{escape(f'{name}, no {tuning.objective} ({point.status})')}</title></path>"
            )
            continue
        y = clamped(y_axis, point.value)
        if point.number == best:
            parts.append(
                f'<circle class="best-trial" cx="{x:.1f}" cy="{y:.1f}" r="8" fill="none" '
                f'stroke="{PALETTE[1]}" stroke-width="2"/>'
            )
        parts.append(
            f'<circle class="trial-point" data-number="{point.number}" cx="{x:.1f}" cy="{y:.1f}" r="4" '
            f'fill="{colour}" stroke="#ffffff" stroke-width="1">'
            f"<title>{escape(f'{name}; {tuning.objective} {point.value:.4g}')}</title></circle>"
        )
    parts.append(svg_text(left + plot_w / 2, top + plot_h + 34, "tune trial (start order)", anchor="middle"))
    parts.append(vertical_label(MARGIN + 4, top + plot_h / 2, f"{tuning.objective} ({direction})"))
    parts.append("</svg>")
    return "\n".join(parts)


def _best_so_far_line(points: Any, x_axis: Axis, y_axis: Axis) -> str:
    """A step line: the best so far holds until a trial improves on it."""
    coordinates: list[str] = []
    previous: float | None = None
    for point in points:
        if point.best_so_far is None:
            continue
        x, y = x_axis.x(point.number), clamped(y_axis, point.best_so_far)
        if previous is not None:
            coordinates.append(f"{x:.1f},{previous:.1f}")
        coordinates.append(f"{x:.1f},{y:.1f}")
        previous = y
    return (
        f'<polyline class="best-so-far" points="{" ".join(coordinates)}" fill="none" stroke="{PALETTE[1]}" '
        f'stroke-width="2"><title>best so far</title></polyline>'
    )


# ------------------------------------------------------------------------------------------- response


def response_svg(method: MethodTuning, tuning: StudyTuning) -> str:
    """One panel per swept knob, its grid values evenly spaced (in the spec's order), on one shared axis of
    the objective: bold dots and whiskers are the mean over seeds and its t interval, faint dots trials."""
    responses = list(method.response)
    left = MARGIN + 56.0
    top = float(TOP)
    panel_w, gap, plot_h = 200.0, 28.0, 220.0
    width = left + len(responses) * panel_w + (len(responses) - 1) * gap + MARGIN + 14
    height = top + plot_h + 56
    bounds: list[float | None] = [t.objective for r in responses for p in r.points for t in p.trials]
    bounds += [
        v
        for r in responses
        for p in r.points
        for v in (p.objective.mean, p.objective.ci_low, p.objective.ci_high)
    ]
    y_axis = nice_axis(bounds, top + plot_h, top)
    direction = "higher is better" if tuning.higher_is_better else "lower is better"

    title = f"{method.method}: {tuning.objective} against each swept knob"
    subtitle = f"bold: mean over seeds ({level(tuning.confidence)} t interval); faint: one trial"
    parts = [
        svg_open(width, height, "knob-response", title),
        svg_text(MARGIN, 18, title, weight="600"),
        svg_text(MARGIN, 36, subtitle, fill=MUTED),
    ]
    parts += y_grid(y_axis, left, width - MARGIN - 14)
    for i, response in enumerate(responses):
        panel_left = left + i * (panel_w + gap)
        parts += _response_panel(
            response, panel_left, panel_w, top + plot_h, y_axis, PALETTE[i % len(PALETTE)]
        )
    parts.append(vertical_label(MARGIN + 4, top + plot_h / 2, f"{tuning.objective} ({direction})"))
    parts.append("</svg>")
    return "\n".join(parts)


def _response_panel(
    response: KnobResponse, panel_left: float, panel_w: float, bottom: float, y_axis: Axis, colour: str
) -> list[str]:
    step = panel_w / len(response.points)
    xs = [panel_left + (i + 0.5) * step for i in range(len(response.points))]
    seeds = sorted({t.seed for p in response.points for t in p.trials}, key=lambda s: (s is None, s or 0))
    parts = [
        f'<g class="knob-panel" data-knob="{svg_attr(response.knob)}">',
        f'<line class="axis" x1="{panel_left:.1f}" y1="{bottom:.1f}" x2="{panel_left + panel_w:.1f}" '
        f'y2="{bottom:.1f}" stroke="{MUTED}" stroke-width="1"/>',
    ]
    for x, point in zip(xs, response.points, strict=True):
        label = _value_text(point.value)
        parts.append(svg_text(x, bottom + 16, label, anchor="middle", fill=MUTED, css="tick", size=11))
        for trial in point.trials:
            # Seeds side by side around the value: a seed's trials line up and replicates don't overlap.
            offset = (seeds.index(trial.seed) - (len(seeds) - 1) / 2) * 5.0
            tooltip = f"{response.knob}={label}, seed {trial.seed}: {trial.objective:.4g}"
            parts.append(
                f'<circle class="trial-point" cx="{x + offset:.1f}" cy="{clamped(y_axis, trial.objective):.1f}" '
                f'r="2.5" fill="{colour}" fill-opacity="0.3"><title>{escape(tooltip)}</title></circle>'
            )
    means = [(x, p.objective.mean) for x, p in zip(xs, response.points, strict=True)]
    line = " ".join(f"{x:.1f},{clamped(y_axis, m):.1f}" for x, m in means if is_finite_number(m))
    parts.append(
        f'<polyline class="response-line" points="{line}" fill="none" stroke="{colour}" stroke-width="2"/>'
    )
    for x, point in zip(xs, response.points, strict=True):
        parts += point_with_whisker(
            point.objective, x, y_axis, colour, f"{response.knob}={_value_text(point.value)}: mean"
        )
    parts.append(
        svg_text(panel_left + panel_w / 2, bottom + 36, response.knob, anchor="middle", weight="600")
    )
    parts.append("</g>")
    return parts


def _value_text(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, float) and is_finite_number(value):
        return f"{value:g}"  # 0.05, 1e-05: never a long tail of float digits
    return str(value)


def _slug(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", label).strip("_") or "method"
