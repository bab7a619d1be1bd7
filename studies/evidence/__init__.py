"""Mechanism evidence behind a results table (pure numpy/scipy; no torch, no database).

- `gate_evidence(trials)`: per method and layer, the final DyT weight and gate entropy (mean and t interval
  over seeds) and the layers x epochs matrices of both (science.md sections 1 and 4).
- `rank_evidence(trials, metric=..., higher_is_better=...)`: init effective rank against depth per norm
  placement, and the final metric against the init rank (science.md section 3).
- `build_evidence(trials, dataset=..., metric=..., higher_is_better=...)`: both, as one `Evidence` with
  `to_json()`.
- `mechanism_summary(study)`: per method and seed, AutoNorm-S's freeze (whether, when), the gate
  entropy trajectory against eps_H / T_freeze and the selector gradient variance per epoch, from a
  study's claim-check trials (studies.evidence.mechanism).

Trials are `EvidenceTrial` records: a final-phase (or grid) trial with its per-epoch history.
"""

from studies.evidence._summary import MeanInterval
from studies.evidence.build import Evidence, build_evidence
from studies.evidence.gates import (
    GATE_QUANTITIES,
    GateEvidence,
    GateQuantity,
    LayerGates,
    MethodGates,
    gate_evidence,
    layer_gate_values,
)
from studies.evidence.mechanism import (
    MechanismSummary,
    MethodMechanism,
    SeedMechanism,
    mechanism_summary,
)
from studies.evidence.ranks import (
    DEFAULT_RANK_KEY,
    DEPTH_MEASURE,
    DepthPoint,
    RankDepthCurve,
    RankEvidence,
    RankPoint,
    depth_series,
    rank_evidence,
)
from studies.evidence.trials import DEFAULT_PLACEMENT, EvidenceTrial

__all__ = [
    "DEFAULT_PLACEMENT",
    "DEFAULT_RANK_KEY",
    "DEPTH_MEASURE",
    "GATE_QUANTITIES",
    "DepthPoint",
    "Evidence",
    "EvidenceTrial",
    "GateEvidence",
    "GateQuantity",
    "LayerGates",
    "MeanInterval",
    "MechanismSummary",
    "MethodGates",
    "MethodMechanism",
    "RankDepthCurve",
    "RankEvidence",
    "RankPoint",
    "SeedMechanism",
    "build_evidence",
    "depth_series",
    "gate_evidence",
    "layer_gate_values",
    "mechanism_summary",
    "rank_evidence",
]
