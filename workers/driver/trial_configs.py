"""Every trial config of a study, built from its StudySpec in one place (their keys: studies.trial_config).

Tune puts each trial's config together from parts, and `StudyTrialConfigs(spec)` builds every part:

- `base(...)`: what every trial of the study has, from the spec (dataset, model, budget, splits, data
  options, threads) and from the driver (the study id, where trials report, how often they checkpoint):
  the experiment's param_space;
- `tuning`: what the search adds to every tuning trial, beside the method and the knobs it samples;
- `finals(k)`: what it adds to each final trial of a method, one per seed batch of at most k seeds
  (`final_for(batch)` for one batch, which a sequential design's looks use);
- `variants(k)`: a grid study's trials, one per method, grid point and seed batch, which Tune
  grid-searches under Key.VARIANT; `variant_fields(phase)` is what they all add to the base;
- `probes(k)`: one final trial per method at its widest, which the GPU memory probe runs before the
  trial plan (workers.trials.plan) is known.

The seed batch size k comes from the trial plan, which measures the probes first; every other part
depends on the spec alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from studies.spec import StudySpec, has_searchable_knobs
from studies.trial_config import FINAL_PHASE, TUNE_PHASE, Key, seed_fields
from workers.trials.plan import seed_batches

__all__ = ["StudyTrialConfigs"]

# The knob that grows the model: the memory probe runs each method at its largest value.
_WIDTH_KNOB = "width_expansion"


@dataclass(frozen=True)
class StudyTrialConfigs:
    """The parts of every trial config of one study (see the module docstring)."""

    spec: StudySpec

    def base(
        self,
        *,
        study_id: str,
        checkpoint_every_s: float,
        mlflow_tracking_uri: str,
        mlflow_experiment_id: str,
        mlflow_parent_run_id: str,
        mlflow_spool_dir: str,
    ) -> dict[str, Any]:
        """What every trial of the study has: the experiment's param_space."""
        spec = self.spec
        return {
            Key.STUDY_ID: study_id,
            Key.DATASET: spec.dataset,
            Key.MODEL: spec.model.preset,
            Key.MODEL_OVERRIDES: dict(spec.model.overrides),
            Key.EPOCHS: spec.budget.epochs,
            Key.BATCH_SIZE: spec.budget.batch_size,
            Key.WARMUP_EPOCHS: spec.budget.warmup_epochs,
            Key.COMPILE: spec.budget.compile,
            Key.CHECKPOINT_EVERY_S: checkpoint_every_s,
            Key.SPLIT_SEED: spec.split_seed,
            **spec.data.trial_config(),  # corruption eval sets (corruptions, severities) where the spec sets them
            Key.NUM_THREADS: max(1, int(spec.resources.cpu)),
            Key.MLFLOW_TRACKING_URI: mlflow_tracking_uri,
            Key.MLFLOW_EXPERIMENT_ID: mlflow_experiment_id,
            Key.MLFLOW_PARENT_RUN_ID: mlflow_parent_run_id,
            Key.MLFLOW_SPOOL_DIR: mlflow_spool_dir,
            **({Key.EXTENSIONS: extensions} if (extensions := spec.extensions()) else {}),
        }

    @property
    def tuned_methods(self) -> list[str]:
        """The methods a compare study searches: those with a searchable knob, in the spec's order."""
        return [m for m in self.spec.methods if has_searchable_knobs(self.spec.search_space_for(m))]

    @property
    def early_stopping(self) -> bool:
        """Whether a scheduler (ASHA, per method) may stop tuning trials before their last epoch."""
        return self.spec.scheduler.type == "asha" and bool(self.tuned_methods)

    @property
    def tuning(self) -> dict[str, Any]:
        """What every tuning trial adds to the base, beside its method and knobs: the tune seed (the first
        of the spec's tune seeds, never a final one) and the validation split."""
        return {
            Key.PHASE: TUNE_PHASE,
            Key.SEED: self.spec.tune_seed,
            Key.EVAL_SPLIT: "val",
            Key.MAY_STOP_EARLY: self.early_stopping,
        }

    def finals(self, seeds_per_trial: int) -> list[dict[str, Any]]:
        """What each final trial of a method adds to the base, beside its method and best knobs: one per
        seed batch, on the test split, never stopped early."""
        return [self.final_for(batch) for batch in seed_batches(self.spec.seeds, seeds_per_trial)]

    @staticmethod
    def final_for(batch: Sequence[int]) -> dict[str, Any]:
        """One final trial's fields for one seed batch (a sequential design's looks build theirs with it)."""
        return {
            Key.PHASE: FINAL_PHASE,
            **seed_fields(batch),
            Key.EVAL_SPLIT: "test",
            Key.MAY_STOP_EARLY: False,
        }

    def variants(self, seeds_per_trial: int) -> list[dict[str, Any]]:
        """A grid study's trials: every method x grid point x seed batch."""
        return [
            {Key.METHOD: m, Key.GROUP: point.label, Key.KNOBS: dict(point.knobs), **seed_fields(batch)}
            for m in self.spec.methods
            for point in self.spec.grid_points(m)
            for batch in seed_batches(self.spec.seeds, seeds_per_trial)
        ]

    @staticmethod
    def variant_fields(phase: str) -> dict[str, Any]:
        """What every variant of a final or grid experiment adds to the base (before its variant): the
        test split; no scheduler, so every trial runs to its end."""
        return {Key.PHASE: phase, Key.EVAL_SPLIT: "test", Key.MAY_STOP_EARLY: False}

    def probes(self, seeds_per_trial: int) -> list[dict[str, Any]]:
        """What each memory probe adds to the base: one final trial per method, with its largest
        `width_expansion` (the one knob that grows the model; the other knobs keep their defaults), on
        the first seed batch of the study, evaluating the validation split."""
        seeds = self.spec.seeds[: max(1, seeds_per_trial)]
        probes = []
        for method in self.spec.methods:
            widths = [
                value
                for value in _knob_values(self.spec.search_space_for(method).get(_WIDTH_KNOB))
                if isinstance(value, (int, float)) and not isinstance(value, bool)
            ]
            knobs = {_WIDTH_KNOB: max(widths)} if widths else {}
            probes.append(
                {Key.PHASE: FINAL_PHASE, Key.EVAL_SPLIT: "val", Key.METHOD: method, Key.KNOBS: knobs,
                 Key.SEED: seeds[0], Key.SEEDS: seeds}
            )  # fmt: skip
        return probes


def _knob_values(distribution: Any) -> list[Any]:
    if distribution is None:
        return []
    for attribute in ("values", "value"):
        if hasattr(distribution, attribute):
            value = getattr(distribution, attribute)
            return list(value) if isinstance(value, list) else [value]
    return [distribution.low, distribution.high]
