"""Method-versus-reference comparison over seeds: difference, tests, effect size, power.

Primary test. Seeds are replicates shared across methods (same data split, same initialisation
seed), so the primary test is the paired t-test on the per-seed differences; its interval for the
mean difference is the one tables show. The Wilcoxon signed-rank test (exact for small n) is reported
beside it as a check that does not assume normal differences. Where the t-test is undefined because
every seed shows exactly the same non-zero difference, the Wilcoxon test becomes the primary test.
Without shared seeds the primary test is Welch's unequal-variance t-test, and the comparison is
marked unpaired.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
from scipy import special, stats

from studies.stats._values import clean_float, finite_values, has_zero_spread
from studies.stats.power import DEFAULT_POWER, minimum_detectable_effect
from studies.stats.summary import check_confidence

__all__ = [
    "LOW_N_THRESHOLD",
    "PAIRED_T",
    "WELCH_T",
    "WILCOXON",
    "Comparison",
    "compare",
    "compare_by_seed",
    "hedges_g",
    "low_n_warning",
]

PAIRED_T = "paired t-test"
WELCH_T = "Welch t-test"
WILCOXON = "Wilcoxon signed-rank test"
NO_TEST = "none"
COHENS_DZ = "Cohen's d_z"
HEDGES_G = "Hedges' g"
# Below five seeds a t interval is several times wider than the spread and power is poor.
LOW_N_THRESHOLD = 5
# scipy's wilcoxon(method="auto") is exact up to 50 differences, or up to 13 with ties or zeros.
_WILCOXON_EXACT_MAX_N = 50
_WILCOXON_EXACT_MAX_N_TIES = 13


@dataclass(frozen=True)
class Comparison:
    """A method's metric compared with a reference method's, over seeds.

    Differences are method minus reference in metric units, whatever the metric's direction;
    `prob_improvement` and verdicts take the direction into account. Every float field is None
    (never NaN) when undefined for the data; `warnings` says why.
    """

    n: int  # paired: number of seed pairs; unpaired: number of the method's values
    n_reference: int  # paired: number of pairs again; unpaired: number of reference values
    paired: bool
    test: str  # the primary test actually used (PAIRED_T, WELCH_T, WILCOXON or "none")
    p_value: float | None  # two-sided p-value of the primary test
    diff_mean: float | None  # mean(method) - mean(reference)
    diff_ci_low: float | None  # t interval of the difference (paired t or Welch) at `confidence`
    diff_ci_high: float | None
    confidence: float
    p_t: float | None  # paired t-test (paired) or Welch t-test (unpaired)
    p_wilcoxon: float | None  # Wilcoxon signed-rank test; None when unpaired
    wilcoxon_method: str | None  # "exact", "exact permutation (ties or zeros)" or "normal approximation"
    effect_size: float | None  # signed like diff_mean
    effect_size_name: str  # COHENS_DZ (paired: mean diff / sd diff) or HEDGES_G (unpaired)
    prob_improvement: float | None  # paired: share of seeds where the method wins (ties 1/2);
    # unpaired: P(method value beats a reference value) over all pairs (ties 1/2)
    mde_80: float | None  # smallest true difference the t-test detects with 80 % power (metric units)
    higher_is_better: bool
    seeds: tuple[int, ...] | None  # the paired seeds, when built by compare_by_seed
    warnings: tuple[str, ...]


def compare(
    values: Sequence[float | None],
    reference: Sequence[float | None],
    *,
    paired: bool = True,
    confidence: float = 0.95,
    higher_is_better: bool = True,
) -> Comparison:
    """Compares `values` (one method) with `reference`.

    Paired: `values[i]` and `reference[i]` come from the same seed; a pair with a missing or
    non-finite side is left out. Unpaired: Welch's t-test on all finite values.
    """
    confidence = check_confidence(confidence)
    if paired:
        if len(values) != len(reference):
            raise ValueError(
                f"paired comparison needs one reference value per value, got {len(values)} and "
                f"{len(reference)}; use compare_by_seed to pair on seed ids or paired=False"
            )
        return _compare_paired(values, reference, confidence, higher_is_better)
    return _compare_welch(values, reference, confidence, higher_is_better)


def compare_by_seed(
    method: Mapping[int, float | None],
    reference: Mapping[int, float | None],
    *,
    confidence: float = 0.95,
    higher_is_better: bool = True,
    on_mismatch: str = "welch",
) -> Comparison:
    """Compares two {seed: value} maps, pairing values on the seed id.

    Failed seeds (None / NaN values) are left out first. When the remaining seed sets match, the
    comparison is paired. When they differ, `on_mismatch` decides: "welch" (default) runs the
    unpaired Welch test on all values; "intersect" pairs on the shared seeds (if at least two)
    and leaves the others out. Either way a warning names the unmatched seeds.
    """
    if on_mismatch not in ("welch", "intersect"):
        raise ValueError(f"on_mismatch must be 'welch' or 'intersect', got {on_mismatch!r}")
    method_ok = _completed(method)
    reference_ok = _completed(reference)
    shared = sorted(set(method_ok) & set(reference_ok))

    if set(method_ok) == set(reference_ok) or (on_mismatch == "intersect" and len(shared) >= 2):
        result = compare(
            [method_ok[s] for s in shared],
            [reference_ok[s] for s in shared],
            paired=True,
            confidence=confidence,
            higher_is_better=higher_is_better,
        )
        notes = [] if set(method_ok) == set(reference_ok) else [_mismatch_note(method_ok, reference_ok)]
        if notes:
            notes[0] += f": paired on the {len(shared)} shared seeds only"
        return replace(result, seeds=tuple(shared), warnings=tuple(notes) + result.warnings)

    result = compare(
        list(method_ok.values()),
        list(reference_ok.values()),
        paired=False,
        confidence=confidence,
        higher_is_better=higher_is_better,
    )
    note = _mismatch_note(method_ok, reference_ok) + ": unpaired comparison (Welch t-test)"
    return replace(result, warnings=(note, *result.warnings))


def _completed(values: Mapping[int, float | None]) -> dict[int, float]:
    return {seed: float(v) for seed, v in values.items() if v is not None and math.isfinite(float(v))}


def _mismatch_note(method: Mapping[int, float], reference: Mapping[int, float]) -> str:
    parts = []
    missing = sorted(set(reference) - set(method))
    extra = sorted(set(method) - set(reference))
    if missing:
        parts.append(f"method lacks reference seed(s) {_seed_list(missing)}")
    if extra:
        parts.append(f"reference lacks seed(s) {_seed_list(extra)}")
    return "seed sets differ (" + "; ".join(parts) + ")"


def _seed_list(seeds: Sequence[int]) -> str:
    return ", ".join(str(s) for s in seeds)


def _empty(n: int, n_reference: int, paired: bool, confidence: float, higher_is_better: bool) -> Comparison:
    return Comparison(
        n=n,
        n_reference=n_reference,
        paired=paired,
        test=NO_TEST,
        p_value=None,
        diff_mean=None,
        diff_ci_low=None,
        diff_ci_high=None,
        confidence=confidence,
        p_t=None,
        p_wilcoxon=None,
        wilcoxon_method=None,
        effect_size=None,
        effect_size_name=COHENS_DZ if paired else HEDGES_G,
        prob_improvement=None,
        mde_80=None,
        higher_is_better=higher_is_better,
        seeds=None,
        warnings=(),
    )


def low_n_warning(n: int) -> str | None:
    """The warning for fewer than LOW_N_THRESHOLD seeds (tables reuse it so repeats collapse)."""
    if n >= LOW_N_THRESHOLD:
        return None
    return f"only {n} seed(s): fewer than {LOW_N_THRESHOLD}, so tests have little power"


def _low_n_note(n: int) -> list[str]:
    note = low_n_warning(n)
    return [] if note is None else [note]


def _compare_paired(
    values: Sequence[float | None],
    reference: Sequence[float | None],
    confidence: float,
    higher_is_better: bool,
) -> Comparison:
    pairs = [
        (float(a), float(b))
        for a, b in zip(values, reference, strict=True)
        if a is not None and b is not None and math.isfinite(float(a)) and math.isfinite(float(b))
    ]
    n = len(pairs)
    result = _empty(n, n, True, confidence, higher_is_better)
    notes: list[str] = []
    if len(values) > n:
        notes.append(f"{len(values) - n} pair(s) with a missing value left out")
    if n == 0:
        return replace(result, warnings=(*notes, "no complete pairs: nothing to compare"))

    x = np.asarray([a for a, _ in pairs])
    y = np.asarray([b for _, b in pairs])
    d = x - y
    diff_mean = float(np.mean(d))
    # A seed counts 1 when the method wins in the metric's direction, 1/2 for a tie, 0 for a loss.
    wins = (np.sign(d) * (1.0 if higher_is_better else -1.0) + 1.0) / 2.0
    result = replace(result, diff_mean=diff_mean, prob_improvement=float(np.mean(wins)))
    notes += _low_n_note(n)
    if n == 1:
        notes.append("one seed pair: no interval and no test possible")
        return replace(result, warnings=tuple(notes))

    if has_zero_spread(d):
        return _paired_constant_difference(result, d, notes)

    test = stats.ttest_rel(x, y)
    interval = test.confidence_interval(confidence_level=confidence)
    sd = float(np.std(d, ddof=1))
    p_wilcoxon, wilcoxon_method = _wilcoxon(d)
    return replace(
        result,
        test=PAIRED_T,
        p_value=clean_float(test.pvalue),
        diff_ci_low=clean_float(interval.low),
        diff_ci_high=clean_float(interval.high),
        p_t=clean_float(test.pvalue),
        p_wilcoxon=p_wilcoxon,
        wilcoxon_method=wilcoxon_method,
        effect_size=diff_mean / sd,
        mde_80=minimum_detectable_effect(
            sd / math.sqrt(n), n - 1, alpha=1.0 - confidence, power=DEFAULT_POWER
        ),
        warnings=tuple(notes),
    )


def _paired_constant_difference(result: Comparison, d: np.ndarray, notes: list[str]) -> Comparison:
    """Every seed shows the same difference: the t statistic is 0/0 or c/0, so answer without it."""
    diff = float(np.mean(d))
    p_wilcoxon, wilcoxon_method = _wilcoxon(d)
    if abs(diff) <= 1e-12 * max(1.0, float(np.max(np.abs(d)))):
        notes.append("method and reference are identical on every seed: no difference at all")
        return replace(
            result,
            test=PAIRED_T,
            p_value=1.0,
            diff_mean=0.0,
            diff_ci_low=0.0,
            diff_ci_high=0.0,
            p_t=1.0,
            p_wilcoxon=1.0,
            wilcoxon_method=wilcoxon_method,
            effect_size=0.0,
            warnings=tuple(notes),
        )
    notes.append(
        "the difference is the same on every seed (zero variance): t-test and effect size undefined, "
        "Wilcoxon signed-rank test is the primary test"
    )
    return replace(
        result,
        test=WILCOXON,
        p_value=p_wilcoxon,
        diff_ci_low=diff,
        diff_ci_high=diff,
        p_wilcoxon=p_wilcoxon,
        wilcoxon_method=wilcoxon_method,
        warnings=tuple(notes),
    )


def _wilcoxon(d: np.ndarray) -> tuple[float | None, str]:
    nonzero = d[d != 0.0]
    has_ties_or_zeros = nonzero.size < d.size or np.unique(np.abs(nonzero)).size < nonzero.size
    if not has_ties_or_zeros and d.size <= _WILCOXON_EXACT_MAX_N:
        method = "exact"
    elif has_ties_or_zeros and d.size <= _WILCOXON_EXACT_MAX_N_TIES:
        method = "exact permutation (ties or zeros)"
    else:
        method = "normal approximation"
    if nonzero.size == 0:
        return 1.0, method
    with warnings.catch_warnings():
        # Too few non-zero differences make scipy warn; the p-value it returns is still the answer.
        warnings.simplefilter("ignore")
        p = stats.wilcoxon(d, method="auto").pvalue
    return clean_float(p), method


def _compare_welch(
    values: Sequence[float | None],
    reference: Sequence[float | None],
    confidence: float,
    higher_is_better: bool,
) -> Comparison:
    x, dropped_x = finite_values(values)
    y, dropped_y = finite_values(reference)
    result = _empty(int(x.size), int(y.size), False, confidence, higher_is_better)
    notes: list[str] = []
    if dropped_x or dropped_y:
        notes.append(f"{dropped_x + dropped_y} missing or non-finite value(s) left out")
    if x.size == 0 or y.size == 0:
        side = "method" if x.size == 0 else "reference"
        return replace(result, warnings=(*notes, f"no values for the {side}: nothing to compare"))

    diff_mean = float(np.mean(x) - np.mean(y))
    # P(method beats reference) over all cross pairs: the common-language effect size.
    beats = np.sign(x[:, None] - y[None, :]) * (1.0 if higher_is_better else -1.0)
    result = replace(result, diff_mean=diff_mean, prob_improvement=float(np.mean((beats + 1.0) / 2.0)))
    notes += _low_n_note(min(x.size, y.size))
    if x.size < 2 or y.size < 2:
        notes.append("Welch t-test needs at least two values on each side: no interval and no test")
        return replace(result, warnings=tuple(notes))

    if has_zero_spread(x) and has_zero_spread(y):
        if abs(diff_mean) <= 1e-12 * max(1.0, float(np.max(np.abs(np.concatenate([x, y]))))):
            notes.append("method and reference values are all identical: no difference at all")
            return replace(
                result,
                test=WELCH_T,
                p_value=1.0,
                diff_mean=0.0,
                diff_ci_low=0.0,
                diff_ci_high=0.0,
                p_t=1.0,
                effect_size=0.0,
                warnings=tuple(notes),
            )
        notes.append("both sides have zero variance: Welch t-test and effect size undefined")
        return replace(result, diff_ci_low=diff_mean, diff_ci_high=diff_mean, warnings=tuple(notes))

    test = stats.ttest_ind(x, y, equal_var=False)
    interval = test.confidence_interval(confidence_level=confidence)
    standard_error = math.sqrt(np.var(x, ddof=1) / x.size + np.var(y, ddof=1) / y.size)
    return replace(
        result,
        test=WELCH_T,
        p_value=clean_float(test.pvalue),
        diff_ci_low=clean_float(interval.low),
        diff_ci_high=clean_float(interval.high),
        p_t=clean_float(test.pvalue),
        effect_size=hedges_g(x, y),
        mde_80=minimum_detectable_effect(
            standard_error, float(test.df), alpha=1.0 - confidence, power=DEFAULT_POWER
        ),
        warnings=tuple(notes),
    )


def hedges_g(x: np.ndarray, y: np.ndarray) -> float | None:
    """Standardised mean difference with the pooled sd and the exact small-sample bias correction."""
    df = x.size + y.size - 2
    pooled_var = ((x.size - 1) * np.var(x, ddof=1) + (y.size - 1) * np.var(y, ddof=1)) / df
    if pooled_var <= 0.0:
        return None
    cohens_d = (np.mean(x) - np.mean(y)) / math.sqrt(pooled_var)
    # J(df) = Gamma(df/2) / (sqrt(df/2) Gamma((df-1)/2)) ~ 1 - 3 / (4 df - 1)
    correction = math.exp(special.gammaln(df / 2) - special.gammaln((df - 1) / 2)) / math.sqrt(df / 2)
    return float(cohens_d * correction)
