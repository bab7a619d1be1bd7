"""How much tuning each arm of a comparison got, read from the study's spec, so a report can say whether
the comparison was fair to the treatment.

A recipe chosen where the reference trains and then applied unchanged to the treatment favours the
reference: part of a "treatment worse" may be that asymmetry. The report therefore states, per arm,
which knobs the tune phase searched and with how many trials, and whether every arm got the same effort.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from studies.spec import StudySpec
from studies.spec.distributions import Fixed, Grid

__all__ = ["ArmTuning", "TuningEffort", "tuning_effort"]

# Knobs that make an arm what it is (its gate's temperature, its freeze schedule) are part of the method,
# not tuning effort: two arms are equally tuned when they searched the same recipe knobs equally often.
_RECIPE_KNOBS = ("lr", "weight_decay", "warmup_epochs", "grad_clip", "batch_size", "dropout", "drop_path")


@dataclass(frozen=True)
class ArmTuning:
    method: str
    searched: tuple[str, ...]  # knobs the tune phase drew values for
    trials: int  # tune-phase trials (0: the arm ran its fixed values)

    def describe(self) -> str:
        if not self.trials:
            return f"{self.method}: not tuned"
        return f"{self.method}: {self.trials} tuning trial(s) over {', '.join(self.searched)}"


@dataclass(frozen=True)
class TuningEffort:
    arms: tuple[ArmTuning, ...]
    fixed_recipe: Mapping[str, Any]  # recipe knobs every arm shares at one fixed value

    @property
    def equal(self) -> bool:
        recipe = {(tuple(k for k in arm.searched if k in _RECIPE_KNOBS), arm.trials) for arm in self.arms}
        return len(recipe) <= 1

    @property
    def tuned(self) -> bool:
        return any(arm.trials for arm in self.arms)

    def sentence(self) -> str:
        """The report's note: which arms were tuned and whether the effort was equal."""
        fixed = ", ".join(f"{k} {v}" for k, v in self.fixed_recipe.items())
        if not self.tuned:
            shared = f" ({fixed})" if fixed else ""
            return (
                f"tuning effort: no arm was tuned; every arm ran the same fixed recipe{shared}. A fixed "
                "recipe may suit one arm better than another, so a difference here can partly reflect the "
                "recipe rather than the method"
            )
        arms = "; ".join(arm.describe() for arm in self.arms)
        if self.equal:
            return f"tuning effort: equal for every arm ({arms})"
        return (
            f"tuning effort: UNEQUAL ({arms}); a difference between arms can partly reflect the tuning they "
            "got rather than the method"
        )


def tuning_effort(spec: Mapping[str, Any]) -> TuningEffort | None:
    """The tuning effort of a compare study's arms; None for a grid study (every point runs as given) or a
    spec that no longer validates (a report of an old study must still build)."""
    try:
        study = StudySpec.model_validate(dict(spec))
    except ValidationError:
        return None
    if study.kind != "compare":
        return None
    arms = []
    for method in study.methods:
        space = study.search_space_for(method)
        searched = tuple(k for k, d in space.items() if not isinstance(d, (Fixed, Grid)))
        trials = study.num_samples_for(method) if study.tunes(method) else 0
        arms.append(ArmTuning(method, searched, trials))
    spaces = [study.search_space_for(m) for m in study.methods]
    fixed_recipe = {
        knob: dist.value
        for knob, dist in spaces[0].items()
        if knob in _RECIPE_KNOBS
        and isinstance(dist, Fixed)
        and all(isinstance(s.get(knob), Fixed) and s[knob] == dist for s in spaces)
    }
    return TuningEffort(tuple(arms), fixed_recipe)
