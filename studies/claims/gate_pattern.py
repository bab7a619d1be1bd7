"""`gate_pattern`: where AutoNorm's gates end up, layer by layer (final-epoch, noise-free DyT weights).

- `collapse_to_ln` (vision): every layer's final DyT weight lies below `threshold` (the catalog's 0.25:
  the gate clearly prefers LN; gates start at 0.5, so a threshold of 0.5 would count any drift, which
  studies.catalog.lint rejects), each tested against the threshold over seeds (Holm across layers).
- `mixed_deeper_dyt` (NLP): the gates stay mixed (mean final gate entropy above `min_entropy`, the
  NormLab's default eps_H) and the DyT weight rises with depth (per-seed least-squares slope over the
  layer index, tested against 0 over seeds).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Literal

import numpy as np
from pydantic import Field

from studies.claims._base import CheckBase, against_level, comparison_finding, directional_verdict
from studies.claims.trials import StudyData, TrialData
from studies.claims.verdicts import INCONCLUSIVE, SUPPORTED, CheckResult, Finding, combine_verdicts
from studies.stats import adjust

__all__ = ["GatePatternCheck", "layer_values"]

_WEIGHT = re.compile(r"^gate_dyt_weight_(\d+)$")
_ENTROPY = re.compile(r"^gate_entropy_(\d+)$")


def layer_values(trial: TrialData, pattern: re.Pattern[str]) -> list[float]:
    """A trial's per-layer gate values, ordered by layer index (empty when the trial has no gates)."""
    found = {}
    for key, value in trial.metrics.items():
        match = pattern.match(key)
        if match and isinstance(value, (int, float)) and not isinstance(value, bool):
            found[int(match.group(1))] = float(value)
    return [found[i] for i in sorted(found)]


class GatePatternCheck(CheckBase):
    type: Literal["gate_pattern"] = "gate_pattern"
    pattern: Literal["collapse_to_ln", "mixed_deeper_dyt"]
    method: str = "autonorm_s"
    threshold: float = Field(0.5, gt=0.0, lt=1.0)  # DyT weight below it: the gate prefers LN
    min_entropy: float = Field(0.1, gt=0.0, lt=0.6931471805599453)  # "mixed": entropy above it (eps_H)

    def evaluate(self, data: StudyData, *, paper: Mapping[str, float] | None = None) -> CheckResult:
        trials = [t for t in data.completed() if t.method == self.method]
        weights = [w for t in trials if (w := layer_values(t, _WEIGHT))]
        if not weights:
            return CheckResult(
                check=self.type,
                verdict=INCONCLUSIVE,
                summary=f"no completed {self.method} trial reports gate weights (gate_dyt_weight_<layer>)",
                confidence=self.confidence,
            )
        depth = min(len(w) for w in weights)
        matrix = np.asarray([w[:depth] for w in weights])  # (seeds, layers)
        if self.pattern == "collapse_to_ln":
            findings = self._collapse(matrix)
            expectation = f"every layer's final DyT weight below {self.threshold:g}"
        else:
            entropies = [e for t in trials if (e := layer_values(t, _ENTROPY))]
            findings = self._mixed_deeper(matrix, entropies)
            expectation = (
                f"mean final gate entropy above {self.min_entropy:g} and the DyT weight rising with depth"
            )
        verdict = combine_verdicts(f.verdict for f in findings)
        return CheckResult(
            check=self.type,
            verdict=verdict,
            summary=f"{self.method}, {matrix.shape[0]} seed(s), {depth} gated layers: expected {expectation}; "
            f"{verdict} ({sum(f.verdict == SUPPORTED for f in findings)} of {len(findings)} findings support it).",
            findings=tuple(findings),
            confidence=self.confidence,
        )

    def _collapse(self, matrix: np.ndarray) -> list[Finding]:
        comparisons = [
            against_level(list(matrix[:, i]), self.threshold, self.alpha) for i in range(matrix.shape[1])
        ]
        adjusted = adjust([c.p_value for c in comparisons], "holm")
        findings = []
        for i, (c, p_adj) in enumerate(zip(comparisons, adjusted, strict=True)):
            verdict, note = directional_verdict(c, p_adj, -1, self.alpha)
            findings.append(
                comparison_finding(
                    c,
                    label=f"layer {i}: final DyT weight",
                    expected=f"< {self.threshold:g}",
                    verdict=verdict,
                    note=note,
                    p_adjusted=p_adj,
                    level=self.threshold,
                )
            )
        return findings

    def _mixed_deeper(self, matrix: np.ndarray, entropies: list[list[float]]) -> list[Finding]:
        layers = np.arange(matrix.shape[1], dtype=float)
        slopes = [float(np.polyfit(layers, row, 1)[0]) for row in matrix] if matrix.shape[1] >= 2 else []
        slope = against_level(slopes, 0.0, self.alpha)
        mean_entropy = [float(np.mean(e)) for e in entropies]
        mixed = against_level(mean_entropy, self.min_entropy, self.alpha)
        p_slope, p_mixed = adjust([slope.p_value, mixed.p_value], "holm")
        slope_verdict, slope_note = directional_verdict(slope, p_slope, 1, self.alpha)
        if matrix.shape[1] < 2:
            slope_verdict, slope_note = INCONCLUSIVE, "one gated layer: no depth trend to measure"
        mixed_verdict, mixed_note = directional_verdict(mixed, p_mixed, 1, self.alpha)
        return [
            comparison_finding(
                slope,
                label="slope of the final DyT weight over layer index (per layer)",
                expected="> 0",
                verdict=slope_verdict,
                note=slope_note,
                p_adjusted=p_slope,
            ),
            comparison_finding(
                mixed,
                label="mean final gate entropy over layers",
                expected=f"> {self.min_entropy:g}",
                verdict=mixed_verdict,
                note=mixed_note,
                p_adjusted=p_mixed,
                level=self.min_entropy,
            ),
        ]
