"""Minimum detectable effect of a two-sided t-test, from the noncentral t distribution."""

from __future__ import annotations

import math

from scipy import optimize, stats

__all__ = [
    "DEFAULT_POWER",
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
