"""The AutoNorm mechanism figures (studies.evidence.mechanism) as inline SVG text.

- `entropy_trajectory_svg`: one method's mean gate entropy per epoch, one line per seed, with the
  eps_H threshold as a dashed horizontal line, T_freeze as a dashed vertical line, and a ring where a
  seed's selectors froze;
- `selector_grad_var_svg`: one method's selector gradient variance per epoch, one line per seed, on a
  log scale (it spans decades), with T_freeze marked; a frozen seed's line ends at its freeze.

`mechanism_figures(summary)` lists every figure the summary has data for, as `EvidenceFigure`s (the
type of studies.tables.render_evidence_svg). Shared parts come from studies.tables.svg.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from html import escape
from typing import TYPE_CHECKING

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
    nice_axis,
    series_legend,
    svg_attr,
    svg_open,
    svg_text,
    vertical_label,
    x_ticks,
    y_grid,
)

if TYPE_CHECKING:
    from studies.evidence.mechanism import MechanismSummary, MethodMechanism, SeedMechanism

__all__ = ["entropy_trajectory_svg", "mechanism_figures", "selector_grad_var_svg"]

_LN2 = math.log(2.0)
_PLOT_W, _PLOT_H = 460.0, 220.0
_ENTROPY_AXIS = (0.0, 0.7, 0.1)  # low, high, step: the whole [0, ln 2] range
_ENTROPY_NAMES = {
    "train_gate_entropy_mean": "training-batch gate entropy",
    "gate_entropy_mean": "validation gate entropy",
}


def mechanism_figures(summary: MechanismSummary) -> list[EvidenceFigure]:
    """Per gated row label: its entropy trajectory, and its selector gradient variance where reported."""
    figures = []
    for method in summary.methods:
        slug = _slug(method.label)
        if any(seed.series("entropy") for seed in method.seeds):
            figures.append(
                EvidenceFigure(
                    f"gate_entropy_trajectory_{slug}",
                    f"{method.label}: mean gate entropy per epoch and seed, against eps_H and T_freeze",
                    entropy_trajectory_svg(method),
                )
            )
        if any(seed.series("selector_grad_var") for seed in method.seeds):
            figures.append(
                EvidenceFigure(
                    f"selector_grad_var_{slug}",
                    f"{method.label}: variance of the selector gradient across each epoch's steps, per seed",
                    selector_grad_var_svg(method),
                )
            )
    return figures


def entropy_trajectory_svg(method: MethodMechanism) -> str:
    """Mean gate entropy (y, 0 to ln 2) per epoch (x), one line per seed; eps_H dashed horizontal,
    T_freeze dashed vertical, a ring at (freeze epoch, entropy) for every seed whose selectors froze."""
    seeds = method.seeds
    left, top = MARGIN + 48.0, float(TOP)
    legend_y = top + _PLOT_H + 52
    width = left + _PLOT_W + MARGIN + 14
    height = legend_y + 20 * legend_rows(len(seeds), MARGIN, width) + 8
    x_axis = _epoch_axis(seeds, left)
    low, high, step = _ENTROPY_AXIS
    y_axis = Axis(low=low, high=high, step=step, left=top + _PLOT_H, right=top)

    keys = sorted({seed.entropy_key for seed in seeds if seed.entropy_key})
    what = " / ".join(_ENTROPY_NAMES.get(key, key) for key in keys) or "gate entropy"
    title = f"{method.label}: {what} per epoch"
    parts = [svg_open(width, height, "entropy-trajectory", title), svg_text(MARGIN, 18, title, weight="600")]
    parts.append(svg_text(MARGIN, 36, _entropy_subtitle(method), fill=MUTED))
    parts += y_grid(y_axis, left, left + _PLOT_W)
    parts += x_ticks(x_axis, top + _PLOT_H, integer=True)
    for eps_h in sorted({s.eps_h for s in seeds if s.eps_h is not None}):
        y = clamped(y_axis, eps_h)
        parts.append(_dashed("eps-line", left, y, left + _PLOT_W, y, f"eps_H = {eps_h:g}"))
        parts.append(
            svg_text(left + _PLOT_W - 4, y - 4, f"eps_H = {eps_h:g}", anchor="end", fill=MUTED, size=11)
        )
    parts += _t_freeze_lines(seeds, x_axis, top)
    for i, seed in enumerate(seeds):
        colour = PALETTE[i % len(PALETTE)]
        points = seed.series("entropy")
        parts += _seed_line(seed, points, x_axis, lambda v: clamped(y_axis, v), colour, "entropy")
        at = dict(points).get(seed.freeze_epoch) if seed.freeze_epoch is not None else None
        if seed.freeze_epoch is not None and at is not None:
            tooltip = f"seed {seed.seed}: selectors frozen after epoch {seed.freeze_epoch} (entropy {at:.3f})"
            parts.append(
                f'<circle class="freeze-marker" data-seed="{seed.seed}" cx="{x_axis.x(seed.freeze_epoch):.1f}" '
                f'cy="{clamped(y_axis, at):.1f}" r="7" fill="none" stroke="{colour}" stroke-width="2">'
                f"<title>{escape(tooltip)}</title></circle>"
            )
    ln2 = clamped(y_axis, _LN2)
    parts.append(svg_text(left + 4, ln2 - 4, "ln 2 = undecided", fill=MUTED, size=11))
    parts.append(svg_text(left + _PLOT_W / 2, top + _PLOT_H + 34, "epoch", anchor="middle"))
    parts.append(vertical_label(MARGIN + 4, top + _PLOT_H / 2, "gate entropy (layer mean)"))
    parts.append(series_legend([_seed_label(seed) for seed in seeds], MARGIN, legend_y, width))
    parts.append("</svg>")
    return "\n".join(parts)


def selector_grad_var_svg(method: MethodMechanism) -> str:
    """Selector gradient variance (y, log scale) per epoch (x), one line per seed; T_freeze dashed. An
    epoch without a value (a frozen seed, or a run from before the metric) leaves a gap."""
    seeds = method.seeds
    left, top = MARGIN + 56.0, float(TOP)
    legend_y = top + _PLOT_H + 52
    width = left + _PLOT_W + MARGIN + 14
    height = legend_y + 20 * legend_rows(len(seeds), MARGIN, width) + 8
    x_axis = _epoch_axis(seeds, left)
    positive = [v for seed in seeds for _, v in seed.series("selector_grad_var") if v > 0]
    y_axis = _decade_axis(positive, top)

    title = f"{method.label}: selector gradient variance per epoch"
    zeros = sum(1 for seed in seeds for _, v in seed.series("selector_grad_var") if v <= 0)
    subtitle = "variance across the epoch's optimizer steps, mean over selector parameters; log scale"
    if zeros:
        subtitle += f"; {zeros} zero value(s) not drawn"
    parts = [svg_open(width, height, "selector-grad-var", title), svg_text(MARGIN, 18, title, weight="600")]
    parts.append(svg_text(MARGIN, 36, subtitle, fill=MUTED))
    parts += _decade_grid(y_axis, left, left + _PLOT_W)
    parts += x_ticks(x_axis, top + _PLOT_H, integer=True)
    parts += _t_freeze_lines(seeds, x_axis, top)

    def log_y(value: float) -> float:
        return clamped(y_axis, math.log10(value))

    for i, seed in enumerate(seeds):
        points = [(e, v) for e, v in seed.series("selector_grad_var") if v > 0]
        parts += _seed_line(seed, points, x_axis, log_y, PALETTE[i % len(PALETTE)], "variance")
    if not positive:
        parts.append(
            svg_text(
                left + _PLOT_W / 2,
                top + _PLOT_H / 2,
                "no positive value reported",
                anchor="middle",
                fill=MUTED,
            )
        )
    parts.append(svg_text(left + _PLOT_W / 2, top + _PLOT_H + 34, "epoch", anchor="middle"))
    parts.append(vertical_label(MARGIN + 4, top + _PLOT_H / 2, "Var of selector grad"))
    parts.append(series_legend([_seed_label(seed) for seed in seeds], MARGIN, legend_y, width))
    parts.append("</svg>")
    return "\n".join(parts)


# ----- parts ----------------------------------------------------------------------------------------------


def _epoch_axis(seeds: Sequence[SeedMechanism], left: float) -> Axis:
    epochs = [float(e) for seed in seeds for e in seed.epochs]
    epochs += [float(seed.t_freeze) for seed in seeds if seed.t_freeze is not None]
    axis = nice_axis(epochs or [0.0, 1.0], left, left + _PLOT_W)
    if axis.step < 1.0:  # whole epochs only
        axis = Axis(
            low=math.floor(axis.low),
            high=max(math.ceil(axis.high), math.floor(axis.low) + 1),
            step=1.0,
            left=left,
            right=left + _PLOT_W,
        )
    return axis


def _decade_axis(values: Sequence[float], top: float) -> Axis:
    """A log10 axis over whole decades that holds every positive value (values are log10 on it)."""
    if not values:
        low, high = -6.0, 0.0
    else:
        low = math.floor(math.log10(min(values)))
        high = math.ceil(math.log10(max(values)))
        high = max(high, low + 1)
    step = float(max(1, math.ceil((high - low) / 6)))
    high = low + step * math.ceil((high - low) / step)
    return Axis(low=float(low), high=float(high), step=step, left=top + _PLOT_H, right=top)


def _decade_grid(axis: Axis, left: float, right: float) -> list[str]:
    parts = [
        f'<line class="axis" x1="{left:.1f}" y1="{axis.right:.1f}" x2="{left:.1f}" y2="{axis.left:.1f}" '
        f'stroke="{MUTED}" stroke-width="1"/>'
    ]
    for exponent in axis.ticks():
        y = axis.x(exponent)
        parts.append(
            f'<line class="gridline" x1="{left:.1f}" y1="{y:.1f}" x2="{right:.1f}" y2="{y:.1f}" '
            f'stroke="{GRID}" stroke-width="0.8"/>'
        )
        label = f"1e{round(exponent)}".replace("-", "−")
        parts.append(svg_text(left - 6, y + 4, label, anchor="end", fill=MUTED, css="tick", size=11))
    return parts


def _t_freeze_lines(seeds: Sequence[SeedMechanism], x_axis: Axis, top: float) -> list[str]:
    parts = []
    for t_freeze in sorted({s.t_freeze for s in seeds if s.t_freeze is not None}):
        x = clamped(x_axis, t_freeze)
        parts.append(_dashed("t-freeze-line", x, top, x, top + _PLOT_H, f"T_freeze = {t_freeze}"))
        parts.append(svg_text(x + 4, top + 12, f"T_freeze = {t_freeze}", fill=MUTED, size=11))
    return parts


def _dashed(css: str, x1: float, y1: float, x2: float, y2: float, what: str) -> str:
    return (
        f'<line class="{css}" x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="{MUTED}" '
        f'stroke-width="1.2" stroke-dasharray="5 3"><title>{escape(what)}</title></line>'
    )


def _seed_line(
    seed: SeedMechanism,
    points: Sequence[tuple[int, float]],
    x_axis: Axis,
    y_of: Callable[[float], float],
    colour: str,
    what: str,
) -> list[str]:
    """One seed's polyline (class seed-line; none without points) and a dot per value; an unfinished
    trial's line is dotted."""
    if not points:
        return []
    coordinates = " ".join(f"{x_axis.x(e):.1f},{y_of(v):.1f}" for e, v in points)
    dashed = "" if seed.completed else ' stroke-dasharray="2 2"'
    parts = [
        f'<polyline class="seed-line" data-seed="{seed.seed}" data-label="{svg_attr(_seed_label(seed))}" '
        f'points="{coordinates}" fill="none" stroke="{colour}" stroke-width="1.8"{dashed}>'
        f"<title>{escape(_seed_label(seed))}</title></polyline>"
    ]
    for epoch, value in points:
        tooltip = f"seed {seed.seed}, epoch {epoch}: {what} {value:.4g}"
        parts.append(
            f'<circle class="seed-point" cx="{x_axis.x(epoch):.1f}" cy="{y_of(value):.1f}" r="2.5" '
            f'fill="{colour}"><title>{escape(tooltip)}</title></circle>'
        )
    return parts


def _seed_label(seed: SeedMechanism) -> str:
    label = f"seed {seed.seed}"
    if seed.freeze_epoch is not None:
        label += f", froze after {seed.freeze_epoch}"
    elif seed.freeze_decided is False:
        label += ", undecided"
    elif seed.freeze_decided:
        label += ", not frozen"
    return label if seed.completed else label + " (unfinished)"


def _entropy_subtitle(method: MethodMechanism) -> str:
    seeds = method.seeds
    if not method.has_freeze_schedule:
        return f"{len(seeds)} seed(s); no freeze schedule (plain AutoNorm)"
    text = f"{method.n_frozen} of {len(seeds)} seed(s) froze; ring = freeze"
    if any(s.freeze_scope == "per_layer" for s in seeds):
        text += "; per_layer scope: the rule reads each layer, not this mean"
    defaulted = sorted({k for s in seeds for k in s.defaulted if k in ("eps_h", "t_freeze")})
    if defaulted:
        text += f"; defaults: {', '.join(defaulted)}"
    return text


def _slug(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", label).strip("_") or "method"
