"""Knob importance of one method, by Optuna's own evaluators on the method's trials.

The completed trials are added to an in-memory Optuna study (`optuna.trial.create_trial`, in the space of
studies.search_space) and read by `optuna.importance.get_param_importances` with

- fANOVA (`FanovaImportanceEvaluator`): the share of the objective's variance each knob's main effect
  explains, from a random forest; refitted with FANOVA_SEEDS, so its spread shows how much the forest alone
  moves the numbers;
- PED-ANOVA (`PedAnovaImportanceEvaluator`): how differently each knob is distributed in the best trials
  than in all of them; deterministic.

Where two or more trial seeds each have enough trials (a sweep runs every grid point on every seed), each
evaluator runs per trial seed and the spread is over the seeds; otherwise (a tune phase runs on one seed)
fANOVA's spread is over its forest seeds and PED-ANOVA has none. Each fit's importances are normalised to
sum to 1 over the assessed knobs, as `get_param_importances` does by default; a fit whose raw importances
are all 0 gives no shares (Optuna would make them equal). Too few trials, a knob that never varied and an
objective that never moved are reasons, never numbers.
"""

from __future__ import annotations

import statistics
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import optuna
from optuna.distributions import BaseDistribution
from optuna.importance import (
    BaseImportanceEvaluator,
    FanovaImportanceEvaluator,
    PedAnovaImportanceEvaluator,
    get_param_importances,
)
from optuna.trial import FrozenTrial

from studies.tuning.model import EvaluatorImportance, KnobImportance, MethodImportance
from studies.tuning.trials import TuningTrial

__all__ = ["FANOVA_SEEDS", "MIN_TRIALS", "PED_ANOVA_MIN_TRIALS", "method_importance"]

# fANOVA's forest is random: five refits show whether a ranking is the data's or the forest's.
FANOVA_SEEDS = (0, 1, 2, 3, 4)
_FANOVA_FOREST = {"n_trees": 64, "max_depth": 64}  # Optuna's defaults, stated so the output can say them
# Below three trials every split of two points is as good as any: no knob can be told from another.
MIN_TRIALS = 3
# PED-ANOVA compares the best trials with all of them: it needs at least 2 best trials and some others.
PED_ANOVA_MIN_TRIALS = 4
_PED_ANOVA_QUANTILE = 0.1  # Optuna's default share of best trials, raised where it would hold fewer than 2


def method_importance(
    trials: Sequence[TuningTrial],
    space: Mapping[str, BaseDistribution],
    *,
    higher_is_better: bool,
    omitted: Mapping[str, str] | None = None,
    what: str = "tune trials",
) -> MethodImportance:
    """The importance of the knobs in `space` (the method's swept knobs) from its completed `trials`.

    `omitted`: knobs the caller already left out, with why (e.g. a grid knob with one value); `what` names
    the trials in the reasons ("tune trials", "grid trials")."""
    omitted = dict(omitted or {})
    for knob, dist in space.items():
        if dist.single():
            omitted[knob] = "one value in the spec: nothing to attribute to it"
    frozen, skipped = _frozen_trials(trials, space)
    if len(frozen) < MIN_TRIALS:
        return MethodImportance(
            trials=len(frozen),
            knobs=(),
            omitted=omitted,
            reason=f"not enough {what}: {len(frozen)} completed with a finite objective "
            f"(knob importance needs at least {MIN_TRIALS})",
            skipped_trials=skipped,
        )
    knobs = []
    for knob in space:
        seen = list(dict.fromkeys(repr(t.params[knob]) for _, t in frozen))
        if knob in omitted:
            continue
        if len(seen) == 1:
            omitted[knob] = f"every completed trial ran with the same value ({seen[0]})"
        else:
            knobs.append(knob)
    reason = _no_evaluation(frozen, knobs, what)
    evaluators = (
        ()
        if reason
        else (_fanova(frozen, knobs, higher_is_better), _ped_anova(frozen, knobs, higher_is_better))
    )
    return MethodImportance(
        trials=len(frozen),
        knobs=tuple(knobs),
        omitted=omitted,
        evaluators=evaluators,
        reason=reason,
        skipped_trials=skipped,
    )


def _frozen_trials(
    trials: Sequence[TuningTrial], space: Mapping[str, BaseDistribution]
) -> tuple[list[tuple[int | None, FrozenTrial]], int]:
    """(trial seed, Optuna trial) of every completed trial, and how many completed trials were left out
    because a knob is missing from them or lies outside the spec's space (a spec edited after the run)."""
    frozen: list[tuple[int | None, FrozenTrial]] = []
    skipped = 0
    for trial in trials:
        value = trial.objective
        if value is None:
            continue
        try:
            params = {knob: trial.knobs[knob] for knob in space}
            frozen.append(
                (trial.seed, optuna.trial.create_trial(params=params, distributions=dict(space), value=value))
            )
        except (KeyError, ValueError):
            skipped += 1
    return frozen, skipped


def _no_evaluation(
    frozen: Sequence[tuple[int | None, FrozenTrial]], knobs: Sequence[str], what: str
) -> str | None:
    """Why no evaluator runs, or None when they do."""
    if not knobs:
        return f"no knob took more than one value over the {len(frozen)} completed {what}"
    if len(knobs) == 1:
        return f"one swept knob ({knobs[0]}): its share of the importance is 1 by construction"
    if len({t.value for _, t in frozen}) == 1:
        return f"the objective was the same in all {len(frozen)} completed {what}: no knob explains any of it"
    return None


# ------------------------------------------------------------------------------------------- evaluators


def _units(
    frozen: Sequence[tuple[int | None, FrozenTrial]], minimum: int
) -> dict[int | None, list[FrozenTrial]]:
    """The trials of each trial seed that has `minimum` of them, when two or more seeds have; else all
    trials as one unit (key None)."""
    by_seed: dict[int | None, list[FrozenTrial]] = {}
    for seed, trial in frozen:
        by_seed.setdefault(seed, []).append(trial)
    enough = {seed: ts for seed, ts in by_seed.items() if len(ts) >= minimum}
    return enough if len(enough) >= 2 else {None: [t for _, t in frozen]}


def _fanova(
    frozen: Sequence[tuple[int | None, FrozenTrial]], knobs: Sequence[str], higher_is_better: bool
) -> EvaluatorImportance:
    units = _units(frozen, MIN_TRIALS)
    seeds = ", ".join(str(s) for s in FANOVA_SEEDS)
    settings = {**_FANOVA_FOREST, "seeds": list(FANOVA_SEEDS)}

    def refits(trials: Sequence[FrozenTrial]) -> list[dict[str, float]]:
        evaluators = (FanovaImportanceEvaluator(**_FANOVA_FOREST, seed=seed) for seed in FANOVA_SEEDS)
        return [s for e in evaluators if (s := _shares(trials, knobs, higher_is_better, e)) is not None]

    if None in units:
        fits = refits(units[None])
        spread = f"fANOVA forest seeds ({seeds}): the same {len(frozen)} trials refitted"
        return _evaluator("fanova", settings, spread, fits, knobs)
    # Per trial seed, the forest's own noise is averaged out first: the spread is the seeds'.
    per_seed = {seed: refits(trials) for seed, trials in units.items()}
    fits = [{k: statistics.fmean(f[k] for f in fs) for k in knobs} for fs in per_seed.values() if fs]
    spread = f"trial seeds ({_seed_list(units)}), each the mean of fits with fANOVA forest seeds {seeds}"
    return _evaluator("fanova", settings, spread + _left_out(per_seed), fits, knobs)


def _ped_anova(
    frozen: Sequence[tuple[int | None, FrozenTrial]], knobs: Sequence[str], higher_is_better: bool
) -> EvaluatorImportance:
    units = _units(frozen, PED_ANOVA_MIN_TRIALS)
    if all(len(trials) < PED_ANOVA_MIN_TRIALS for trials in units.values()):
        return EvaluatorImportance(
            evaluator="ped_anova",
            settings={},
            spread_over=None,
            fits=0,
            reason=f"needs at least {PED_ANOVA_MIN_TRIALS} completed trials (2 best ones and more), "
            f"has {len(frozen)}",
        )
    quantiles = {seed: _target_quantile(len(trials)) for seed, trials in units.items()}
    per_seed = {
        seed: _shares(
            trials, knobs, higher_is_better, PedAnovaImportanceEvaluator(target_quantile=quantiles[seed])
        )
        for seed, trials in units.items()
    }
    fits = [shares for shares in per_seed.values() if shares is not None]
    spread = None if None in units else f"trial seeds ({_seed_list(units)})" + _left_out(per_seed)
    settings = {"target_quantile": sorted(set(quantiles.values())), "region_quantile": 1.0}
    return _evaluator("ped_anova", settings, spread, fits, knobs)


def _target_quantile(n: int) -> float:
    """The share of best trials PED-ANOVA compares: Optuna's 10 %, but never fewer than 2 trials."""
    return round(max(_PED_ANOVA_QUANTILE, 2 / n), 4)


def _evaluator(
    name: str,
    settings: Mapping[str, Any],
    spread: str | None,
    fits: list[dict[str, float]],
    knobs: Sequence[str],
) -> EvaluatorImportance:
    if not fits:
        return EvaluatorImportance(
            evaluator=name,
            settings=dict(settings),
            spread_over=None,
            fits=0,
            reason=f"{name} found no effect of any knob (every raw importance is 0)",
        )
    rows = []
    for knob in knobs:
        values = [fit[knob] for fit in fits]
        rows.append(
            KnobImportance(
                knob=knob,
                importance=statistics.fmean(values),
                sd=statistics.stdev(values) if len(values) > 1 else None,
                low=min(values),
                high=max(values),
            )
        )
    rows.sort(key=lambda row: (-row.importance, row.knob))
    return EvaluatorImportance(
        evaluator=name,
        settings=dict(settings),
        spread_over=spread if len(fits) > 1 else None,
        fits=len(fits),
        knobs=tuple(rows),
    )


def _shares(
    trials: Sequence[FrozenTrial],
    knobs: Sequence[str],
    higher_is_better: bool,
    evaluator: BaseImportanceEvaluator,
) -> dict[str, float] | None:
    """One fit's importances normalised to sum to 1, or None when they are all 0 (no effect found)."""
    with _quiet():
        study = optuna.create_study(direction="maximize" if higher_is_better else "minimize")
        study.add_trials(trials)
        try:
            # normalize=False: Optuna would turn all-zero importances into equal shares, a made-up number.
            raw = get_param_importances(study, evaluator=evaluator, params=list(knobs), normalize=False)
        except RuntimeError:  # fANOVA on an objective that never varies: "zero total variance"
            return None
    total = sum(float(v) for v in raw.values())
    if not total > 0.0:
        return None
    return {knob: float(raw.get(knob, 0.0)) / total for knob in knobs}


@contextmanager
def _quiet() -> Iterator[None]:
    """Optuna logs every study it creates and warns that `normalize` is experimental: neither is news."""
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        optuna.logging.set_verbosity(verbosity)


def _seed_list(units: Mapping[int | None, object]) -> str:
    return ", ".join(str(seed) for seed in units)


def _left_out(per_seed: Mapping[int | None, object]) -> str:
    """The seeds whose fits found no effect at all: they give no shares, and the text says so."""
    empty = [str(seed) for seed, fits in per_seed.items() if not fits]
    return f"; seed {', '.join(empty)} left out (no effect found)" if empty else ""
