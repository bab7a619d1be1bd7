"""What a study's tuning says about its knobs, from Optuna's own evaluators (no importance algorithm here).

- `study_tuning(spec, trials, study_id=...)`: per method, the importance of each swept knob (fANOVA and
  PED-ANOVA through `optuna.importance.get_param_importances`, with their spread over trial seeds or
  fANOVA's forest seeds), the optimisation history of its tune trials (kind compare) and the objective
  against each knob (a sweep, kind grid); `StudyTuning.to_json()`.

Trials are `TuningTrial` records (studies.store reads them from the database), read in the space
studies.search_space gives the tuner. Imports optuna, which imports no torch.
"""

from studies.tuning.build import TUNING_PHASES, study_tuning
from studies.tuning.importance import FANOVA_SEEDS, MIN_TRIALS, PED_ANOVA_MIN_TRIALS, method_importance
from studies.tuning.model import (
    EvaluatorImportance,
    HistoryPoint,
    KnobImportance,
    KnobResponse,
    MethodImportance,
    MethodTuning,
    OptimisationHistory,
    ResponsePoint,
    ResponseTrial,
    StudyTuning,
)
from studies.tuning.trials import TuningTrial

__all__ = [
    "FANOVA_SEEDS",
    "MIN_TRIALS",
    "PED_ANOVA_MIN_TRIALS",
    "TUNING_PHASES",
    "EvaluatorImportance",
    "HistoryPoint",
    "KnobImportance",
    "KnobResponse",
    "MethodImportance",
    "MethodTuning",
    "OptimisationHistory",
    "ResponsePoint",
    "ResponseTrial",
    "StudyTuning",
    "TuningTrial",
    "method_importance",
    "study_tuning",
]
