"""The sections of a spec besides its knobs: model, scheduler, budget, data options, resources."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import (
    Field,
    field_validator,
    model_validator,
)

from studies.spec.distributions import _Strict
from studies.spec.names import _DATASET_FAMILY, _FAMILY_BACKBONE, KNOWN_MODELS, MODEL_CONFIG_FIELDS, Scalar
from studies.trial_config import Key


class ModelSpec(_Strict):
    """A models.build_model name or preset plus field overrides; `model: vit_lite_tiny` is shorthand."""

    preset: str | None = None  # None: the dataset's default backbone (DatasetBundle.default_model)
    overrides: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        return {"preset": data} if isinstance(data, str) else data

    @field_validator("preset")
    @classmethod
    def _known(cls, preset: str | None) -> str | None:
        if preset is not None and preset not in KNOWN_MODELS:
            raise ValueError(f"unknown model '{preset}'; known models: {', '.join(KNOWN_MODELS)}")
        return preset

    def backbone(self, dataset: str) -> str:
        """The models.build_model backbone this spec builds: the preset's, else the dataset's default."""
        if self.preset is None:
            return _FAMILY_BACKBONE[_DATASET_FAMILY[dataset]]
        return next(b for b in MODEL_CONFIG_FIELDS if self.preset.startswith(b))


class SchedulerSpec(_Strict):
    """Early stopping of tuning trials: `asha` (Ray Tune ASHAScheduler) or `none`; `scheduler: asha` works."""

    type: Literal["asha", "none"] = "none"
    grace_period: int = Field(1, ge=1)  # epochs every trial runs before ASHA may stop it
    reduction_factor: float = Field(3.0, gt=1.0)  # ASHA keeps 1/reduction_factor of trials per rung
    max_t: int | None = Field(None, ge=1)  # None: the budget's epochs

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        return {"type": data} if isinstance(data, str) else data


class Budget(_Strict):
    """Training budget of every trial."""

    epochs: int = Field(10, ge=1)
    batch_size: int = Field(128, ge=1, le=65_536)
    warmup_epochs: int = Field(0, ge=0)  # linear warmup before the cosine schedule
    # torch.compile of each trial's training forward: "default" (inductor kernels) or "reduce-overhead"
    # (inductor plus CUDA graphs, for small models that leave a GPU launch-bound). Falls back to eager,
    # with a warning, where no compiler is available.
    compile: Literal["none", "default", "reduce-overhead"] = "none"
    # Seconds of training between a trial's checkpoints: its last epoch is always checkpointed, an earlier
    # one once this much time has passed since the previous checkpoint, so a failed trial redoes at most
    # this much; 0: every epoch. None: the service's NORMLAB_CHECKPOINT_EVERY_S (10 s by default).
    checkpoint_every_s: float | None = Field(None, ge=0)

    @model_validator(mode="after")
    def _warmup_inside(self) -> Budget:
        if self.warmup_epochs >= self.epochs and self.warmup_epochs > 0:
            raise ValueError(f"warmup_epochs ({self.warmup_epochs}) must be below epochs ({self.epochs})")
        return self


class DataOptions(_Strict):
    """Which corruption eval sets a corruption dataset (DATASET_CORRUPTIONS) builds for the final phase.

    Every chosen corruption at every chosen severity becomes one test set, reported as
    test_<metric>_<corruption> (one severity) or test_<metric>_<corruption>_s<severity> (several), plus
    test_<metric>_corruption_mean over all of them.
    """

    corruptions: list[str] | None = Field(None, min_length=1)  # None: gaussian_noise, motion_blur, brightness
    severities: list[Annotated[int, Field(ge=1, le=5)]] | None = Field(None, min_length=1)  # None: [3]

    @field_validator("corruptions", "severities")
    @classmethod
    def _no_repeats(cls, values: list[Any] | None) -> list[Any] | None:
        if values is not None and len(set(values)) != len(values):
            raise ValueError(f"values must be unique, got {values}")
        return values

    def trial_config(self) -> dict[str, list[Any]]:
        """The trial config keys (workers.training.TrainConfig fields) for the options that are set."""
        options = {Key.CORRUPTIONS: self.corruptions, Key.SEVERITIES: self.severities}
        return {key: list(values) for key, values in options.items() if values is not None}


MAX_SEEDS_PER_TRIAL = 64


class Resources(_Strict):
    """Resources Ray reserves for one trial, and how many seeds one trial trains at once.

    gpu: a fraction, so small trials share a device; "auto" (the default) is 0 on a cluster without GPUs
    and otherwise the share that one trial's measured peak memory leaves room for (the driver measures a
    trial on a GPU node before the study starts). seeds_per_trial: final and grid seeds trained together in
    one trial process, stacked (each seed keeps its own init, data order, row, MLflow run and checkpoint);
    "auto" is 1 on CPU and with budget.compile, else up to 8. A number > 1 with budget.compile compiles
    the stacked step.
    """

    cpu: float = Field(1.0, gt=0, le=256)
    gpu: float | Literal["auto"] = Field("auto")
    seeds_per_trial: int | Literal["auto"] = Field("auto")

    # "before" validators: one clear message at the field's own path instead of one error per union branch.
    @field_validator("gpu", mode="before")
    @classmethod
    def _gpu_fraction(cls, gpu: Any) -> Any:
        if gpu == "auto":
            return gpu
        if isinstance(gpu, bool) or not isinstance(gpu, (int, float)) or not 0 <= gpu <= 1:
            raise ValueError(f"gpu must be a fraction in [0, 1] or 'auto', got {gpu!r}")
        return float(gpu)

    @field_validator("seeds_per_trial", mode="before")
    @classmethod
    def _seed_batch_size(cls, k: Any) -> Any:
        if k == "auto":
            return k
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_SEEDS_PER_TRIAL:
            raise ValueError(
                f"seeds_per_trial must be 'auto' or an integer in [1, {MAX_SEEDS_PER_TRIAL}], got {k!r}"
            )
        return k


@dataclass(frozen=True)
class GridPoint:
    """One point of a grid study: `label` names the grid knobs' values (the results-table group)."""

    label: str
    knobs: dict[str, Scalar]
