"""Claim checks: each turns a study's trials into findings and a verdict (pure numpy/scipy).

- `StudyData` / `TrialData`: a study's final-phase (or grid) trials as the checks read them.
- `CheckResult` / `Finding`: the verdict (supported, contradicted, inconclusive at this power) and the
  measured quantities it rests on.

A check's parameters are a strict pydantic model with a `type` discriminator, so the catalog's
claims.yaml validates them; `check.evaluate(StudyData, paper=...)` returns a CheckResult.

| type | claim shape |
|---|---|
| difference | one method vs a reference on a metric (better / worse / higher / lower / no_difference) |
| ordering | several such pairs, all of which must hold (Holm across pairs) |
| sweep | every grid point of a method vs a matching reference row; the verdict is the paper's setting's |
| gate_pattern | AutoNorm gates: collapse to LN in every layer, or mixed with DyT rising with depth |
| rank_vs_depth | Post-Norm init Jacobian rank collapses while Pre-Norm's plateaus |
| ratio_vs_depth | Pre-Norm's branch-to-skip ratio decays ~ l^(-1/2), Post-Norm's stays constant |
| mean_spike | one-matrix ReLU branches grow a mean spike (linearly with depth) that two matrices or tanh avoid |
| width_threshold | the branch Jacobian is full rank only above m/d = 1 / E[act'(z)²] |
| trend | Spearman correlation of one quantity with another across grid points |
| rank_trainability | init rank predicts training within norm placement (learning rate chosen per configuration) |

The rank checks can show their verdict across a swept knob (`sensitivity: {knob: init_scale, at: 1}`,
studies.claims.sensitivity): the headline is the pre-registered value's, the notes hold the table.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, TypeAdapter

from studies.claims._pairs import PairSpec
from studies.claims.difference import DifferenceCheck
from studies.claims.gate_pattern import GatePatternCheck
from studies.claims.mean_spike import LinearGrowth, MeanSpikeCheck
from studies.claims.ordering import OrderingCheck
from studies.claims.rank_depth import RankVsDepthCheck
from studies.claims.ratio_depth import RatioVsDepthCheck
from studies.claims.sensitivity import Sensitivity, verdict_by
from studies.claims.sweep import SweepCheck
from studies.claims.trainability import RankTrainabilityCheck
from studies.claims.trend import ReferenceRow, TrendCheck
from studies.claims.trials import PRIMARY, StudyData, TrialData
from studies.claims.verdicts import (
    CONTRADICTED,
    INCONCLUSIVE,
    SUPPORTED,
    VERDICTS,
    CheckResult,
    Finding,
    combine_verdicts,
)
from studies.claims.width_threshold import WidthThresholdCheck

__all__ = [
    "CONTRADICTED",
    "INCONCLUSIVE",
    "PRIMARY",
    "SUPPORTED",
    "VERDICTS",
    "Check",
    "CheckResult",
    "DifferenceCheck",
    "Finding",
    "GatePatternCheck",
    "LinearGrowth",
    "MeanSpikeCheck",
    "OrderingCheck",
    "PairSpec",
    "RankTrainabilityCheck",
    "RankVsDepthCheck",
    "RatioVsDepthCheck",
    "ReferenceRow",
    "Sensitivity",
    "StudyData",
    "SweepCheck",
    "TrendCheck",
    "TrialData",
    "WidthThresholdCheck",
    "combine_verdicts",
    "parse_check",
    "verdict_by",
]

Check = Annotated[
    DifferenceCheck
    | OrderingCheck
    | SweepCheck
    | GatePatternCheck
    | RankVsDepthCheck
    | RatioVsDepthCheck
    | MeanSpikeCheck
    | WidthThresholdCheck
    | TrendCheck
    | RankTrainabilityCheck,
    Field(discriminator="type"),
]
_ADAPTER: TypeAdapter[Check] = TypeAdapter(Check)


def parse_check(data: object) -> Check:
    """A check from its mapping ({"type": "difference", ...}); pydantic.ValidationError when invalid."""
    return _ADAPTER.validate_python(data)
