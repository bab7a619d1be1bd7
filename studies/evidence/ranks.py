"""Transforming-Rank views (science.md section 3): effective rank at initialisation against depth, per norm
placement, and the final metric against the init rank (does the init rank predict trainability?).

Inputs are the `init_*` metrics every trial reports at epoch 0 (models.rank.init_rank_report):
`init_erank_repr_<l>` is the normalised effective rank of the residual representation Z_l at depth l
(l = 0 embedded tokens .. L last block); when only `init_erank_repr_first` / `_last` are reported they
stand for depths 0 and L (L from the trial's model depth, when known). `init_erank_jacobian` (the
normalised effective rank of the input-output Jacobian) is the default x of the scatter.
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from studies.evidence._summary import MeanInterval, mean_interval
from studies.evidence.trials import EvidenceTrial, finite_or_none

__all__ = [
    "DEFAULT_RANK_KEY",
    "DEPTH_MEASURE",
    "DepthPoint",
    "RankDepthCurve",
    "RankEvidence",
    "RankPoint",
    "depth_series",
    "rank_evidence",
]

DEFAULT_RANK_KEY = "init_erank_jacobian"
DEPTH_MEASURE = "init_erank_repr"  # normalised effective rank of Z_l, in (0, 1]
_PER_DEPTH_KEY = re.compile(rf"^{DEPTH_MEASURE}_(\d+)$")
_FIRST_KEY, _LAST_KEY = f"{DEPTH_MEASURE}_first", f"{DEPTH_MEASURE}_last"
MIN_POINTS_FOR_CORRELATION = 3


@dataclass(frozen=True)
class DepthPoint:
    depth: int
    value: MeanInterval  # over the curve's trials (seeds, and grid points for a placement curve)


@dataclass(frozen=True)
class RankDepthCurve:
    label: str  # the placement, or the row label of one grid point
    placement: str
    n_trials: int
    points: tuple[DepthPoint, ...]


@dataclass(frozen=True)
class RankPoint:
    """One trial of the scatter: its init rank and the final metric it reached (None: it produced none)."""

    trial_key: str
    label: str
    method: str
    group: str | None
    seed: int | None
    placement: str
    status: str
    init_rank: float
    value: float | None


@dataclass(frozen=True)
class RankEvidence:
    confidence: float
    depth_measure: str
    per_depth: bool  # True: ranks at every depth were reported; False: only the first and last depth
    placements: tuple[RankDepthCurve, ...]  # one curve per norm placement, over all its trials
    groups: tuple[RankDepthCurve, ...]  # one curve per row label (grid point), over its seeds
    rank_key: str  # x of the scatter
    metric: str  # y of the scatter
    higher_is_better: bool
    points: tuple[RankPoint, ...]
    spearman: float | None  # rank correlation of init rank and final metric over points with a value
    notes: tuple[str, ...]


def depth_series(init: Mapping[str, Any], depth: int | None) -> tuple[dict[int, float], bool]:
    """({depth: rank}, per_depth) from one epoch-0 report: every reported depth, else depths 0 and `depth`
    from the first and last rank ({} when the model depth is unknown)."""
    every = {
        int(m.group(1)): v
        for k, raw in init.items()
        if (m := _PER_DEPTH_KEY.match(k)) and (v := finite_or_none(raw)) is not None
    }
    if every:
        return every, True
    first, last = finite_or_none(init.get(_FIRST_KEY)), finite_or_none(init.get(_LAST_KEY))
    if depth is None or depth < 1 or first is None or last is None:
        return {}, False  # one end of the stack alone is no curve
    return {0: first, depth: last}, False


def rank_evidence(
    trials: Iterable[EvidenceTrial],
    *,
    metric: str,
    higher_is_better: bool,
    rank_key: str = DEFAULT_RANK_KEY,
    confidence: float = 0.95,
) -> RankEvidence | None:
    """Rank views of every trial whose epoch 0 reported init ranks; None when none did.

    Init ranks do not depend on training, so failed trials count in the depth curves; in the scatter
    they appear with value None (a configuration that could not train is evidence too).
    """
    reported = [(t, init) for t in trials if (init := t.epoch(0)) is not None and _has_init(init)]
    if not reported:
        return None
    series = {t.trial_key: depth_series(init, t.depth) for t, init in reported}
    per_depth = any(flag for _, flag in series.values())
    notes: list[str] = []
    if per_depth:
        # Curves join like with like: a trial with only its first and last rank would bend a curve.
        series = {key: (ranks, flag) if flag else ({}, flag) for key, (ranks, flag) in series.items()}
    else:
        notes.append(
            "per-depth ranks were not reported: each curve joins the first (depth 0) and last depth only"
        )
    if any(not ranks for ranks, _ in series.values()):
        notes.append(
            "trials without ranks at every depth (or of unknown model depth) are left out of the curves"
        )

    def curves(key_of) -> tuple[RankDepthCurve, ...]:
        grouped: dict[str, list[EvidenceTrial]] = {}
        for trial, _ in reported:
            grouped.setdefault(key_of(trial), []).append(trial)
        out = []
        for label, members in grouped.items():
            depths = sorted({d for t in members for d in series[t.trial_key][0]})
            if not depths:
                continue
            points = tuple(
                DepthPoint(d, mean_interval([series[t.trial_key][0].get(d) for t in members], confidence))
                for d in depths
            )
            out.append(RankDepthCurve(label, members[0].placement, len(members), points))
        return tuple(out)

    points = tuple(
        RankPoint(
            trial_key=t.trial_key,
            label=t.label,
            method=t.method,
            group=t.group,
            seed=t.seed,
            placement=t.placement,
            status=t.status,
            init_rank=rank,
            value=finite_or_none(t.value) if t.completed else None,
        )
        for t, init in reported
        if (rank := finite_or_none(init.get(rank_key))) is not None
    )
    if not points:
        notes.append(f"no trial reported {rank_key} at epoch 0: no scatter")
    return RankEvidence(
        confidence=confidence,
        depth_measure=DEPTH_MEASURE,
        per_depth=per_depth,
        placements=curves(lambda t: t.placement),
        groups=curves(lambda t: t.label),
        rank_key=rank_key,
        metric=metric,
        higher_is_better=higher_is_better,
        points=points,
        spearman=_spearman(points, notes),
        notes=tuple(notes),
    )


def _has_init(metrics: Mapping[str, Any]) -> bool:
    return any(k.startswith("init_") and finite_or_none(v) is not None for k, v in metrics.items())


def _spearman(points: tuple[RankPoint, ...], notes: list[str]) -> float | None:
    """Rank correlation of init rank and value; None (and a note saying why) where the ranks differ only
    by round-off, whose order would rank noise."""
    pairs = [(p.init_rank, p.value) for p in points if p.value is not None]
    if len(pairs) < MIN_POINTS_FOR_CORRELATION:
        return None
    import numpy as np
    from scipy import stats

    from studies.stats import varies_beyond_noise

    ranks = np.asarray([x for x, _ in pairs])
    if not varies_beyond_noise(ranks):
        notes.append(
            f"no rank correlation: the initial ranks span only {ranks.min():.10g} to {ranks.max():.10g}, "
            "round-off of one value, so their order is noise"
        )
        return None

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # constant input: scipy warns and answers NaN, reported as None
        rho = stats.spearmanr([x for x, _ in pairs], [y for _, y in pairs]).statistic
    rho = float(rho)
    return rho if math.isfinite(rho) else None
