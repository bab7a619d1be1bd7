"""Seed-wise statistics for results tables (pure numpy/scipy).

- `summarize(values, confidence)`: mean, sd, sem, t and BCa bootstrap intervals, median, IQM.
- `compare(values, reference, paired=..., confidence=..., higher_is_better=...)` and
  `compare_by_seed({seed: value}, {seed: value})`: difference with its interval, paired t-test
  (primary) and Wilcoxon signed-rank test, or Welch's t-test when unpaired; effect size,
  probability of improvement, minimum detectable effect at 80 % power.
- `adjust(p_values, method="holm" | "bh")`: multiple-comparison adjustment in input order.
- `verdict(...)`: better / worse / no significant difference, respecting the metric's direction.
"""

from studies.stats._values import MEASUREMENT_NOISE_RTOL, varies_beyond_noise
from studies.stats.adjust import ADJUSTMENT_METHODS, adjust
from studies.stats.compare import (
    LOW_N_THRESHOLD,
    PAIRED_T,
    WELCH_T,
    WILCOXON,
    Comparison,
    compare,
    compare_by_seed,
    hedges_g,
)
from studies.stats.power import (
    DEFAULT_POWER,
    equivalence_power,
    minimum_detectable_effect,
    seeds_for_equivalence,
    seeds_for_power,
    t_test_power,
)
from studies.stats.summary import (
    DEFAULT_BOOTSTRAP_RESAMPLES,
    DEFAULT_BOOTSTRAP_SEED,
    Summary,
    interquartile_mean,
    summarize,
)
from studies.stats.verdict import (
    BETTER,
    INSUFFICIENT_DATA,
    NO_SIGNIFICANT_DIFFERENCE,
    REFERENCE,
    VERDICTS,
    WORSE,
    verdict,
)

__all__ = [
    "ADJUSTMENT_METHODS",
    "BETTER",
    "DEFAULT_BOOTSTRAP_RESAMPLES",
    "DEFAULT_BOOTSTRAP_SEED",
    "DEFAULT_POWER",
    "INSUFFICIENT_DATA",
    "LOW_N_THRESHOLD",
    "MEASUREMENT_NOISE_RTOL",
    "NO_SIGNIFICANT_DIFFERENCE",
    "PAIRED_T",
    "REFERENCE",
    "VERDICTS",
    "WELCH_T",
    "WILCOXON",
    "WORSE",
    "Comparison",
    "Summary",
    "adjust",
    "compare",
    "compare_by_seed",
    "equivalence_power",
    "hedges_g",
    "interquartile_mean",
    "minimum_detectable_effect",
    "seeds_for_equivalence",
    "seeds_for_power",
    "summarize",
    "t_test_power",
    "varies_beyond_noise",
    "verdict",
]
