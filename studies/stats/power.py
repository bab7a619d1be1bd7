"""Power of the paired comparisons claims are judged by, from the noncentral t distribution: the minimum
detectable effect, the seeds an effect or an equivalence needs, and whether a design can decide at all."""

from __future__ import annotations

import math
from dataclasses import dataclass

from scipy import optimize, stats

__all__ = [
    "DEFAULT_POWER",
    "Feasibility",
    "design_feasibility",
    "equivalence_power",
    "minimum_detectable_effect",
    "seeds_for_equivalence",
    "seeds_for_power",
    "t_test_power",
]

# Conventional target power: an effect this large is found four times out of five.
DEFAULT_POWER = 0.8


def t_test_power(noncentrality: float, df: float, alpha: float) -> float:
    """Power of a two-sided t-test at level `alpha` when the t statistic is noncentral t(df, noncentrality).

    NaN when scipy cannot evaluate the noncentral t (callers must check).
    """
    t_crit = stats.t.ppf(1.0 - alpha / 2.0, df)
    # Power is symmetric in the noncentrality. Both tails are taken as survival functions, because
    # scipy's nct.cdf far in the lower tail returns NaN at small df (e.g. df 1, nc 8), while
    # P(T < -t | nc) = P(T > t | -nc) stays finite.
    shift = abs(noncentrality)
    toward = stats.nct.sf(t_crit, df, shift)
    away = stats.nct.sf(t_crit, df, -shift)
    return float(toward + away)


def minimum_detectable_effect(
    standard_error: float, df: float, *, alpha: float = 0.05, power: float = DEFAULT_POWER
) -> float | None:
    """Smallest true difference (in metric units) a two-sided t-test detects with probability `power`.

    `standard_error` is the standard error of the difference (paired: sd of differences / sqrt(n);
    Welch: sqrt(s1^2/n1 + s2^2/n2)) and `df` its degrees of freedom. Returns None where it is
    undefined: no degrees of freedom, no (or an infinite) standard error, or a power scipy cannot
    evaluate (a results table shows a blank rather than failing).
    """
    if not (df > 0 and math.isfinite(df) and standard_error > 0 and math.isfinite(standard_error)):
        return None
    if not (0.0 < alpha < 1.0 and alpha < power < 1.0):
        raise ValueError(f"need 0 < alpha < power < 1, got alpha={alpha}, power={power}")

    def shortfall(noncentrality: float) -> float:
        gap = t_test_power(noncentrality, df, alpha) - power
        if not math.isfinite(gap):
            raise _PowerUndefined
        return gap

    try:
        # Power grows with the noncentrality; double the bracket until it contains the target power.
        high = 4.0
        while shortfall(high) < 0.0:
            high *= 2.0
            if high > 1e6:
                return None
        noncentrality = optimize.brentq(shortfall, 0.0, high, xtol=1e-10)
    except _PowerUndefined:
        return None
    return float(noncentrality * standard_error)


class _PowerUndefined(ArithmeticError):
    """scipy returned NaN for the power somewhere on the search path."""


def seeds_for_power(
    effect: float, sd: float, *, alpha: float = 0.05, power: float = DEFAULT_POWER, max_seeds: int = 10_000
) -> int | None:
    """Paired seeds a two-sided paired t-test needs to detect a true difference `effect` with probability
    `power`, when the paired differences have standard deviation `sd`. None when undefined (no effect or
    no spread) or beyond `max_seeds`."""
    if not (math.isfinite(effect) and math.isfinite(sd) and effect != 0.0 and sd > 0.0):
        return None
    for n in range(2, max_seeds + 1):
        achieved = t_test_power(abs(effect) / (sd / math.sqrt(n)), n - 1, alpha)
        if math.isfinite(achieved) and achieved >= power:
            return n
    return None


def equivalence_power(effect: float, sd: float, n: int, margin: float, *, alpha: float = 0.05) -> float:
    """Probability that the paired (1 - alpha) t interval of the mean difference lies within ±`margin`
    (how `no_difference` claims are judged: two one-sided tests at alpha/2 each) when the true difference
    is `effect` and the paired differences have standard deviation `sd`, over `n` seeds.

    Each side's rejection is a noncentral t event; the power of both is bounded below by their sum less
    one (exact joint power needs Owen's Q), so this is conservative: a little low near 0.5 power, tight
    near 0.8 and above.
    """
    df = n - 1
    se = sd / math.sqrt(n)
    t_crit = stats.t.ppf(1.0 - alpha / 2.0, df)
    above_lower = stats.nct.sf(t_crit, df, (effect + margin) / se)  # P((d - (-margin)) / se > t_crit)
    below_upper = stats.nct.sf(t_crit, df, (margin - effect) / se)  # P((margin - d) / se > t_crit)
    return max(0.0, float(above_lower + below_upper) - 1.0)


def seeds_for_equivalence(
    effect: float,
    sd: float,
    margin: float,
    *,
    alpha: float = 0.05,
    power: float = DEFAULT_POWER,
    max_seeds: int = 10_000,
) -> int | None:
    """Paired seeds an equivalence claim within ±`margin` needs to be supported with probability `power`
    when the true difference is `effect`. None when no number of seeds can (the effect is at or beyond
    the margin), when there is no spread, or beyond `max_seeds`."""
    if not (math.isfinite(effect) and math.isfinite(sd) and sd > 0.0 and margin > abs(effect)):
        return None
    for n in range(2, max_seeds + 1):
        if equivalence_power(effect, sd, n, margin, alpha=alpha) >= power:
            return n
    return None


@dataclass(frozen=True)
class Feasibility:
    """Whether a design can decide a claim before it runs: the chance that the decisive outcome (the
    effect found, or equivalence shown) comes out when the stated truth holds, and the seeds it needs."""

    question: str  # what the design must show, e.g. "equivalence within ±0.01 when the true difference is 0"
    sd: float | None  # standard deviation of the paired per-seed differences assumed
    seeds: int  # paired seeds per arm in the design
    power: float | None  # probability that every needed finding comes out, at `seeds`
    seeds_needed: int | None  # the fewest seeds reaching the target power (None: undefined or past the cap)
    target_power: float
    reason: str  # one sentence a report or a catalog entry can print

    @property
    def can_decide(self) -> bool:
        return self.power is not None and self.power >= self.target_power


def design_feasibility(
    sd: float | None,
    seeds: int,
    *,
    effect: float | None = None,
    margin: float | None = None,
    alpha: float = 0.05,
    comparisons: int = 1,
    findings_needed: int = 1,
    power: float = DEFAULT_POWER,
    max_seeds: int = 10_000,
) -> Feasibility:
    """Can `seeds` paired seeds per arm decide the claim, given the spread `sd` of the paired differences
    (from an earlier run's report, or a stated prior)?

    - With a `margin` (an equivalence claim): the chance that the (1 - alpha) interval lies within
      ±margin when the true difference is `effect` (0, a null effect, when None). Intervals are not
      adjusted for multiplicity, as studies.claims judges equivalence.
    - Without one (a directional claim): the chance that a two-sided paired t-test finds `effect`, the
      effect of interest, at the Holm level of a family of `comparisons` tests. Holm rejects any one
      hypothesis at least whenever Bonferroni (alpha / comparisons) does, so this is a lower bound.

    A verdict that needs `findings_needed` findings to come out together (every focus point of a sweep,
    every pair of an ordering) is given each a power of `power ** (1 / findings_needed)`, as if they were
    independent; comparisons sharing a reference arm are positively correlated, so the joint chance is,
    if anything, higher.
    """
    if seeds < 2 or comparisons < 1 or findings_needed < 1:
        raise ValueError("need at least 2 seeds, 1 comparison and 1 needed finding")
    if margin is not None:
        truth = 0.0 if effect is None else effect
        question = f"equivalence within ±{margin:.4g} when the true difference is {truth:.4g}"
        problem = _spread_problem(sd) or _margin_problem(truth, margin)

        def finding_power(n: int) -> float:
            return equivalence_power(truth, sd, n, margin, alpha=alpha)  # type: ignore[arg-type]

    else:
        if effect is None:
            raise ValueError(
                "a directional design needs the effect of interest (or a margin for equivalence)"
            )
        level = alpha / comparisons
        family = f" at the Holm level of {comparisons} comparisons" if comparisons > 1 else ""
        question = f"a true difference of {effect:.4g}{family}"
        problem = _spread_problem(sd) or (None if effect != 0.0 else "no effect of interest to detect")

        def finding_power(n: int) -> float:
            achieved = t_test_power(abs(effect) / (sd / math.sqrt(n)), n - 1, level)  # type: ignore[operator]
            return achieved if math.isfinite(achieved) else 0.0

    if findings_needed > 1:
        question += f", jointly in the {findings_needed} findings the verdict needs"
    if problem is not None:
        return Feasibility(question, sd, seeds, None, None, power, f"cannot be sized: {problem}")

    per_finding = power ** (1.0 / findings_needed)
    achieved = finding_power(seeds) ** findings_needed
    needed = next((n for n in range(2, max_seeds + 1) if finding_power(n) >= per_finding), None)
    spread = f"sd of the paired differences {sd:.3g}"
    gives = f"{seeds} seeds give {_percent(achieved)} power for {question} ({spread})"
    if achieved >= power:
        reason = f"can decide: {gives}"
    else:
        needs = f"more than {max_seeds}" if needed is None else str(needed)
        reason = f"cannot decide: {gives}; {_percent(power)} needs {needs} seeds"
    return Feasibility(question, sd, seeds, achieved, needed, power, reason)


def _spread_problem(sd: float | None) -> str | None:
    if sd is None or not math.isfinite(sd) or sd <= 0.0:
        return "no spread of the paired differences is known (fewer than two paired seeds, or none varied)"
    return None


def _margin_problem(truth: float, margin: float) -> str | None:
    if abs(truth) >= margin:
        return (
            f"a true difference of {truth:.4g} is at or past the margin ±{margin:.4g}: no number of seeds "
            "shows equivalence"
        )
    return None


def _percent(probability: float) -> str:
    # The equivalence power is a lower bound that reads 0 far from the target: "under 1 %", not "0 %".
    return "under 1 %" if probability < 0.005 else f"{probability * 100:.0f} %"
