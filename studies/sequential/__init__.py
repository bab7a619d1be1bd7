"""Group-sequential designs for comparisons over seeds (pure numpy/scipy).

A study looks at its comparisons after each batch of seeds and stops those already decided. The design is
a group-sequential test with a Lan & DeMets (1983) alpha-spending function, O'Brien-Fleming-type by
default:

- spending adapts to the looks actually taken: the boundaries of a look depend only on the information
  fractions (seeds so far / maximum seeds) reached up to it, so batches may be unequal, a trial that fails
  shifts a look, and the number of looks need not be fixed in advance;
- O'Brien-Fleming-type spending stops early only on overwhelming evidence (5 equal looks at two-sided
  0.05: z >= 4.88 at the first), so an early stop is conservative, and its last boundary (2.03) stays close
  to the fixed design's 1.96: the power lost against a fixed design with the maximum seeds is small (the
  maximum information is 1-3 % larger). Pocock-type spending is offered for studies that value early stops
  more than the final look (its last boundary is 2.39 for 5 looks).

Boundaries are on the z scale; with few seeds a t statistic is compared through matched tail
probabilities (`critical_values`, `z_from_t`). After a stop, `repeated_confidence_interval` and
`stagewise_p_value` give intervals and p-values that account for the looks.

Family-wise error across the comparisons of a study: each comparison (against the reference, or each
pair where a claim needs it) runs its own design at its share of alpha, Bonferroni's alpha / m to begin
with and, with Holm's step-down, alpha / (m - j) once j comparisons are rejected (`holm_level`; see
`studies.sequential.multiplicity`). Each design keeps its error at or below its share over all its looks,
so the study's family-wise error over all comparisons and all looks stays at or below alpha.

- `efficacy_boundaries(fractions, alpha=, sided=, spending=)`, `with_futility(design, drift=, beta=)`,
  `classical_boundaries(looks, "pocock" | "obrien_fleming")`, `critical_values(design, dfs)`.
- `operating_characteristics(design, drift)`, `drift_for_power(design, power=)`, `inflation_factor`.
- `SequentialMonitor`: a study's looks and decisions (studies.sequential.looks), which the driver runs.
- `repeated_confidence_interval(...)`, `stagewise_p_value(...)`, `z_from_t(...)`, `holm_level(...)`.
"""

from studies.sequential._integration import DEFAULT_GRID_SIZE, crossing_probabilities
from studies.sequential.arms import monitor_for
from studies.sequential.boundaries import (
    Boundaries,
    classical_boundaries,
    critical_values,
    efficacy_boundaries,
    with_futility,
)
from studies.sequential.inference import repeated_confidence_interval, stagewise_p_value, z_from_t
from studies.sequential.looks import (
    DECISIONS,
    ComparisonOutcome,
    LookPoint,
    LookRecord,
    SequentialMonitor,
    comparison_name,
)
from studies.sequential.multiplicity import holm_level
from studies.sequential.operating import (
    OperatingCharacteristics,
    drift_for_power,
    inflation_factor,
    operating_characteristics,
)
from studies.sequential.spending import (
    SPENDING_FUNCTIONS,
    SpendingFunction,
    hwang_shih_decani,
    obrien_fleming_spending,
    pocock_spending,
    spending_function,
)

__all__ = [
    "DECISIONS",
    "DEFAULT_GRID_SIZE",
    "SPENDING_FUNCTIONS",
    "Boundaries",
    "ComparisonOutcome",
    "LookPoint",
    "LookRecord",
    "OperatingCharacteristics",
    "SequentialMonitor",
    "SpendingFunction",
    "classical_boundaries",
    "comparison_name",
    "critical_values",
    "crossing_probabilities",
    "drift_for_power",
    "efficacy_boundaries",
    "holm_level",
    "hwang_shih_decani",
    "inflation_factor",
    "monitor_for",
    "obrien_fleming_spending",
    "operating_characteristics",
    "pocock_spending",
    "repeated_confidence_interval",
    "spending_function",
    "stagewise_p_value",
    "with_futility",
    "z_from_t",
]
