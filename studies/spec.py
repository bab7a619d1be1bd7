"""The study specification: what a user POSTs, what the service stores and what the driver runs.

A study compares normalization methods on one dataset. `kind: compare` tunes each method's knobs on the
validation split with seeds of their own (`tune_seeds`, phase `tune`), then re-runs each method's best
config on the SAME seeds on the test split (phase `final`), so comparisons are paired. `kind: grid`
skips tuning and runs every grid point of the search space on every seed (phase `grid`), e.g. the
Transforming-Rank sweeps.

Validation is strict on purpose: a knob that does not apply to a method, a typo in a field name, or a
distribution a phase cannot use is an error with a field path, never silently ignored.

This module imports neither torch nor FastAPI: the service validates specs without the training stack.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Union

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from studies.knobs import DEFAULT_EPS_H, DEFAULT_T_FREEZE, KNOB_MODEL_FIELDS, KNOBS, Knob
from studies.limits import StudyLimits

__all__ = [
    "DATASET_CORRUPTIONS",
    "DATASET_METRICS",
    "DATASET_TASK_FIELDS",
    "DEFAULT_EPS_H",
    "DEFAULT_NUM_SAMPLES",
    "DEFAULT_T_FREEZE",
    "JSON_CONTENT_TYPES",
    "KNOBS",
    "KNOB_MODEL_FIELDS",
    "KNOWN_DATASETS",
    "KNOWN_MODELS",
    "METHODS",
    "MODEL_CONFIG_FIELDS",
    "YAML_CONTENT_TYPES",
    "Budget",
    "Choice",
    "DataOptions",
    "Distribution",
    "Fixed",
    "Grid",
    "GridPoint",
    "IntRange",
    "Knob",
    "LogUniform",
    "ModelSpec",
    "Resources",
    "SchedulerSpec",
    "SpecFormatError",
    "StudySpec",
    "Uniform",
    "UnsupportedContentTypeError",
    "has_searchable_knobs",
    "load_spec",
    "parse_spec_text",
    "validate_spec_data",
]

# Dataset names the workers' registry (workers.data.DATASETS) serves. Kept here as names only so the
# service can validate a spec without importing torch; a test checks the two stay in sync.
KNOWN_DATASETS: tuple[str, ...] = (
    "mnist",
    "fashion_mnist",
    "svhn",
    "cifar10",
    "cifar100",
    "cifar10_c",
    "ptb_pos",
    "ptb_lm",
    "sst2",
    "energy",
    "california_housing",
    "digits",
    "mnist_5k",
    "rotten_tomatoes_vader",
    "ptb_pos_sample",
    "digits_c",
    "fashion_mnist_c",
    "ptb_lm_sample",
    "cifar10_c_hendrycks",
)

# Which backbone family can read each dataset (image -> vit_lite, text -> encoder, tabular -> tabular).
_DATASET_FAMILY: dict[str, str] = {
    **dict.fromkeys(
        (
            "mnist",
            "fashion_mnist",
            "svhn",
            "cifar10",
            "cifar100",
            "cifar10_c",
            "digits",
            "mnist_5k",
            "digits_c",
            "fashion_mnist_c",
            "cifar10_c_hendrycks",
        ),
        "image",
    ),
    **dict.fromkeys(
        ("ptb_pos", "ptb_lm", "sst2", "rotten_tomatoes_vader", "ptb_pos_sample", "ptb_lm_sample"), "text"
    ),
    **dict.fromkeys(("energy", "california_housing"), "tabular"),
}

# Corruption eval sets each corruption dataset can build (workers.data.registry.DATASET_CORRUPTIONS; a
# test keeps them equal): our numpy re-implementation of 8 CIFAR-10-C corruptions, or the 19 published ones.
_OWN_CORRUPTIONS = (
    "gaussian_noise",
    "shot_noise",
    "impulse_noise",
    "speckle_noise",
    "gaussian_blur",
    "motion_blur",
    "brightness",
    "contrast",
)
_PUBLISHED_CORRUPTIONS = (
    *("gaussian_noise", "shot_noise", "impulse_noise", "defocus_blur", "glass_blur", "motion_blur"),
    *("zoom_blur", "snow", "frost", "fog", "brightness", "contrast", "elastic_transform", "pixelate"),
    *("jpeg_compression", "speckle_noise", "gaussian_blur", "spatter", "saturate"),
)
DATASET_CORRUPTIONS: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(("cifar10_c", "fashion_mnist_c", "digits_c"), _OWN_CORRUPTIONS),
    "cifar10_c_hendrycks": _PUBLISHED_CORRUPTIONS,
}

# Primary metric of each dataset and whether higher is better (as workers.data.DATASETS declares them).
_LOWER_IS_BETTER = {"ptb_lm": "perplexity", "ptb_lm_sample": "perplexity", "energy": "rmse"}
_LOWER_IS_BETTER["california_housing"] = "rmse"
DATASET_METRICS: dict[str, tuple[str, bool]] = {
    name: (_LOWER_IS_BETTER[name], False) if name in _LOWER_IS_BETTER else ("accuracy", True)
    for name in KNOWN_DATASETS
}

# Same names as models.methods.METHODS (kept here so studies.spec needs no torch).
METHODS: tuple[str, ...] = (
    "autonorm_s",
    "autonorm",
    "frozen_ln",
    "dyt",
    "random_selector",
    "adanorm",
    "film",
)

# Model names and presets of models.build_model that can train on a study dataset. `residual_mlp` (the
# rank experiments) is left out on purpose: it has no task head, so every trial of a study would fail.
KNOWN_MODELS: tuple[str, ...] = (
    "vit_lite",
    "vit_lite_paper",
    "vit_lite_tiny",
    "encoder",
    "encoder_paper",
    "encoder_tiny",
    "tabular",
    "tabular_paper",
    "tabular_tiny",
)
# Backbone of each data family; a preset's backbone is the prefix of its name.
_FAMILY_BACKBONE = {"image": "vit_lite", "text": "encoder", "tabular": "tabular"}
_BACKBONE_FAMILY = {backbone: family for family, backbone in _FAMILY_BACKBONE.items()}
_FAMILY_MODELS = {"image": "vit_lite_tiny or vit_lite_paper", "text": "encoder_tiny or encoder_paper"}
_FAMILY_MODELS["tabular"] = "tabular_tiny or tabular_paper"

# Config field names of each backbone's dataclass in models (TransformerConfig plus the task fields), so
# overrides are checked here without torch; a test checks they equal dataclasses.fields of the real ones.
_TRANSFORMER_FIELDS: tuple[str, ...] = (
    "dim",
    "depth",
    "heads",
    "mlp_ratio",
    "dropout",
    "drop_path",
    "layer_scale_init",
    "norm",
    "norm_options",
    "norm_placement",
    "skip_scale",
    "init_scale",
    "activation",
    "branch",
)
MODEL_CONFIG_FIELDS: dict[str, tuple[str, ...]] = {
    "vit_lite": (*_TRANSFORMER_FIELDS, "image_size", "in_channels", "num_classes", "patch_size"),
    "encoder": (*_TRANSFORMER_FIELDS, "vocab_size", "max_len", "num_classes", "head", "pad_id"),
    "tabular": (*_TRANSFORMER_FIELDS, "num_features", "num_outputs"),
}

# Model fields a spec may not override: the method decides the norm ...
_RESERVED_MODEL_FIELDS = frozenset({"norm", "norm_options"})
# ... and the dataset decides the task fields (DatasetBundle.model_fields); an override would either be
# replaced or break the model's fit to the data.
DATASET_TASK_FIELDS: tuple[str, ...] = (
    "image_size",
    "in_channels",
    "num_classes",
    "vocab_size",
    "max_len",
    "head",
    "pad_id",
    "num_features",
    "num_outputs",
)

JSON_CONTENT_TYPES = frozenset({"application/json"})
YAML_CONTENT_TYPES = frozenset({"application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml"})
_LN2 = math.log(2.0)
DEFAULT_NUM_SAMPLES = 8  # tuning trials per method when a compare study does not say

# A knob value; null only where the knob is nullable (Knob.nullable), which _check_distribution enforces.
Scalar = Union[bool, int, float, str, None]  # noqa: UP007 (pydantic reads the union at runtime on py3.10)


# ------------------------------------------------------------------------------------- distributions


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class Uniform(_Strict):
    """A float drawn uniformly from [low, high]."""

    type: Literal["uniform"]
    low: float
    high: float

    @model_validator(mode="after")
    def _ordered(self) -> Uniform:
        if not self.low < self.high:
            raise ValueError(f"low ({self.low:g}) must be below high ({self.high:g})")
        return self


class LogUniform(_Strict):
    """A float drawn uniformly in log space from [low, high]; low must be positive."""

    type: Literal["loguniform"]
    low: float
    high: float

    @model_validator(mode="after")
    def _ordered_positive(self) -> LogUniform:
        if self.low <= 0:
            raise ValueError(f"loguniform needs low > 0, got {self.low:g}")
        if not self.low < self.high:
            raise ValueError(f"low ({self.low:g}) must be below high ({self.high:g})")
        return self


class IntRange(_Strict):
    """An integer drawn from low..high inclusive (every `step`, or log-uniformly when `log`)."""

    type: Literal["int"]
    low: int
    high: int
    step: int = Field(1, ge=1)
    log: bool = False

    @model_validator(mode="after")
    def _ordered(self) -> IntRange:
        if not self.low < self.high:
            raise ValueError(f"low ({self.low}) must be below high ({self.high})")
        if self.log and (self.low < 1 or self.step != 1):
            raise ValueError("an int distribution with log: true needs low >= 1 and step 1")
        return self


class _Values(_Strict):
    values: list[Scalar] = Field(min_length=1)

    @field_validator("values")
    @classmethod
    def _unique(cls, values: list[Scalar]) -> list[Scalar]:
        return _check_unique(values)


class Choice(_Values):
    """One of `values`, picked by the tuner (kind: compare)."""

    type: Literal["choice"]


class Grid(_Values):
    """Every one of `values`, each run on every seed (kind: grid)."""

    type: Literal["grid"]


class Fixed(_Strict):
    """A constant; `knob: 0.5` in a spec is shorthand for `knob: {type: fixed, value: 0.5}`."""

    type: Literal["fixed"]
    value: Scalar


def _check_unique(values: list[Scalar]) -> list[Scalar]:
    seen = [(type(v).__name__, v) for v in values]
    if len(set(seen)) != len(seen):
        raise ValueError(f"values must be unique, got {values}")
    return values


Distribution = Annotated[Uniform | LogUniform | IntRange | Choice | Grid | Fixed, Field(discriminator="type")]


def _points(dist: Distribution) -> list[Scalar]:
    """The discrete values of a grid or fixed distribution."""
    if isinstance(dist, Grid):
        return list(dist.values)
    if isinstance(dist, Fixed):
        return [dist.value]
    raise TypeError(f"{dist.type} has no discrete points")


def _check_distribution(knob: Knob, dist: Distribution) -> str | None:
    """Why `dist` cannot drive `knob`, or None when it can."""
    if knob.kind == "categorical":
        if isinstance(dist, (Uniform, LogUniform, IntRange)):
            return f"knob '{knob.name}' is categorical ({knob.describe_range()}): use choice, grid or fixed"
        bad = [v for v in _discrete_values(dist) if v not in knob.categories]
        if bad:
            return f"knob '{knob.name}' must be {knob.describe_range()}, got {bad}"
        return None
    if knob.kind == "int" and isinstance(dist, (Uniform, LogUniform)):
        return f"knob '{knob.name}' takes integers: use type int, choice, grid or fixed, not {dist.type}"
    if isinstance(dist, (Uniform, LogUniform, IntRange)):
        values: list[Any] = [dist.low, dist.high]
    else:
        values = [v for v in _discrete_values(dist) if not (knob.nullable and v is None)]
    for value in values:
        numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not numeric or (knob.kind == "int" and not isinstance(value, int)):
            kind = "an integer" if knob.kind == "int" else "a number"
            return f"knob '{knob.name}' takes {kind}, got {value!r}"
        if not knob.contains(float(value)):
            return f"knob '{knob.name}' must lie in {knob.describe_range()}, got {value:g}"
    return None


def _discrete_values(dist: Choice | Grid | Fixed) -> list[Scalar]:
    return [dist.value] if isinstance(dist, Fixed) else list(dist.values)


# Knobs that only make sense on images, with the value that switches each off.
_IMAGE_ONLY_KNOBS: dict[str, Scalar] = {"augment": "none", "mixup": 0.0, "cutmix": 0.0}


def _can_enable(dist: Distribution) -> bool:
    """Whether some value of `dist` switches an image-only knob on (anything but none / 0 / false)."""
    if isinstance(dist, (Uniform, LogUniform, IntRange)):
        return dist.high > 0
    return any(value not in ("none", 0, 0.0, False) for value in _discrete_values(dist))


def has_searchable_knobs(space: Mapping[str, Distribution]) -> bool:
    """Whether a tuner has anything to search: some knob is not fixed. The driver skips tuning otherwise
    (workers.driver.search_space.has_searchable_knobs applies the same rule; a test keeps them equal)."""
    return any(not isinstance(dist, Fixed) for dist in space.values())


def _scalar_shorthand(space: Any) -> Any:
    """Turn `knob: 0.5` into a fixed distribution; leave everything else to the validators."""
    if not isinstance(space, Mapping):
        return space
    return {k: v if isinstance(v, Mapping) else {"type": "fixed", "value": v} for k, v in space.items()}


# ----------------------------------------------------------------------------------- spec sections


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
        options = {"corruptions": self.corruptions, "severities": self.severities}
        return {key: list(values) for key, values in options.items() if values is not None}


MAX_SEEDS_PER_TRIAL = 64


class Resources(_Strict):
    """Resources Ray reserves for one trial, and how many seeds one trial trains at once.

    gpu: a fraction, so small trials share a device; "auto" (the default) is 0 on a cluster without GPUs
    and otherwise the share that one trial's measured peak memory leaves room for (the driver measures a
    trial on a GPU node before the study starts). seeds_per_trial: final and grid seeds trained together in
    one trial process, stacked (each seed keeps its own init, data order, row, MLflow run and checkpoint);
    "auto" is 1 on CPU and with budget.compile, else up to 8.
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


# ------------------------------------------------------------------------------------------ the spec


class StudySpec(_Strict):
    """A study: which methods to compare on which dataset, how to tune them and on which seeds."""

    name: str = Field(min_length=1, max_length=120)
    description: str | None = Field(None, max_length=4000)
    dataset: str
    kind: Literal["compare", "grid"] = "compare"
    model: ModelSpec = Field(default_factory=ModelSpec)
    methods: list[str] = Field(min_length=1)
    # Knob distributions shared by every method; each knob must apply to every method.
    search: dict[str, Distribution] = Field(default_factory=dict)
    # Per-method knobs, added to (and overriding) `search` for that method only.
    method_search: dict[str, dict[str, Distribution]] = Field(default_factory=dict)
    # Tuning trials per method (kind: compare; None -> DEFAULT_NUM_SAMPLES); a mapping gives each method
    # its own count. Grid studies leave it unset: every grid point runs on every seed.
    num_samples: int | dict[str, int] | None = None
    scheduler: SchedulerSpec = Field(default_factory=SchedulerSpec)
    # Seeds of the final phase (or of every grid point): replicates, the same for every method.
    seeds: list[int] = Field(default_factory=lambda: [0, 1, 2], min_length=1)
    # Seeds of the tune phase, disjoint from `seeds` so the configs are not picked on the seeds that then
    # report them. None -> [max(seeds) + 1]. The tune phase runs every sample on the first (`tune_seed`).
    tune_seeds: list[int] | None = Field(None, min_length=1, validate_default=True)
    split_seed: int = Field(0, ge=0)  # fixes the train/val split for every trial of the study
    budget: Budget = Field(default_factory=Budget)
    data: DataOptions = Field(default_factory=DataOptions)  # corruption eval sets (cifar10_c & co)
    resources: Resources = Field(default_factory=Resources)
    max_failures: int = Field(1, ge=0, le=10)  # retries per trial after a crash
    reference_method: str | None = None  # None: frozen_ln when compared, else the first method
    # The paper's reported value per method, in the metric's own unit (accuracy as a fraction in [0, 1]).
    paper_numbers: dict[str, float] = Field(default_factory=dict)
    claim: str | None = Field(None, min_length=1, max_length=120)  # id of the catalog claim this study tests

    @field_validator("name")
    @classmethod
    def _name_not_blank(cls, name: str) -> str:
        if not name.strip():
            raise ValueError("name must not be blank")
        return name.strip()

    @field_validator("dataset")
    @classmethod
    def _known_dataset(cls, dataset: str) -> str:
        if dataset not in KNOWN_DATASETS:
            raise PydanticCustomError(
                "unknown_dataset",
                "unknown dataset '{dataset}'; known datasets: {known}",
                {"dataset": dataset, "known": ", ".join(KNOWN_DATASETS)},
            )
        return dataset

    @field_validator("methods")
    @classmethod
    def _known_unique_methods(cls, methods: list[str]) -> list[str]:
        unknown = [m for m in methods if m not in METHODS]
        if unknown:
            raise PydanticCustomError(
                "unknown_method",
                "unknown method(s) {unknown}; known methods: {known}",
                {"unknown": ", ".join(unknown), "known": ", ".join(METHODS)},
            )
        if len(set(methods)) != len(methods):
            raise ValueError(f"methods must be unique, got {methods}")
        return methods

    @field_validator("search", mode="before")
    @classmethod
    def _search_shorthand(cls, space: Any) -> Any:
        return _scalar_shorthand(space)

    @field_validator("method_search", mode="before")
    @classmethod
    def _method_search_shorthand(cls, spaces: Any) -> Any:
        if not isinstance(spaces, Mapping):
            return spaces
        return {m: _scalar_shorthand(space) for m, space in spaces.items()}

    @field_validator("num_samples")
    @classmethod
    def _positive_samples(cls, num_samples: int | dict[str, int] | None) -> int | dict[str, int] | None:
        if num_samples is None:
            return None
        counts = num_samples.values() if isinstance(num_samples, dict) else [num_samples]
        if any(c < 1 for c in counts):
            raise ValueError(f"num_samples must be at least 1, got {num_samples}")
        return num_samples

    @field_validator("seeds")
    @classmethod
    def _unique_seeds(cls, seeds: list[int]) -> list[int]:
        if len(set(seeds)) != len(seeds):
            raise ValueError(f"seeds must be unique (they are replicates), got {seeds}")
        if any(s < 0 or s >= 2**32 for s in seeds):
            raise ValueError("seeds must lie in [0, 2**32)")
        return seeds

    @field_validator("tune_seeds", mode="before")
    @classmethod
    def _default_tune_seeds(cls, tune_seeds: Any, info: ValidationInfo) -> Any:
        seeds = info.data.get("seeds")
        if tune_seeds is not None or not seeds:  # without valid seeds, `seeds` reports the problem
            return tune_seeds
        return [_default_tune_seed(seeds)]

    @field_validator("tune_seeds")
    @classmethod
    def _unique_tune_seeds(cls, tune_seeds: list[int] | None) -> list[int] | None:
        if tune_seeds is None:
            return None
        if len(set(tune_seeds)) != len(tune_seeds):
            raise ValueError(f"tune_seeds must be unique, got {tune_seeds}")
        if any(s < 0 or s >= 2**32 for s in tune_seeds):
            raise ValueError("tune_seeds must lie in [0, 2**32)")
        return tune_seeds

    @field_validator("claim")
    @classmethod
    def _known_claim(cls, claim: str | None, info: ValidationInfo) -> str | None:
        # Checked where a submission is validated (the service passes a context); a stored spec re-read
        # without one still loads, so a claim the catalog later renames cannot break a study's driver.
        if claim is None or info.context is None:
            return claim
        from studies.catalog import claim_ids  # imported here: the catalog loads its specs with this module

        if claim not in claim_ids():
            raise PydanticCustomError(
                "unknown_claim",
                "unknown claim '{claim}'; catalog claims (studies/catalog/claims.yaml): {known}",
                {"claim": claim, "known": ", ".join(claim_ids())},
            )
        return claim

    @model_validator(mode="after")
    def _consistent(self, info: ValidationInfo) -> StudySpec:
        # Cross-field rules, all collected so one response lists every problem with its field path.
        errors: list[InitErrorDetails] = []

        def fail(loc: tuple[str | int, ...], kind: str, message: str, value: Any) -> None:
            errors.append(InitErrorDetails(type=PydanticCustomError(kind, message), loc=loc, input=value))

        family = _DATASET_FAMILY[self.dataset]
        if self.model.preset is not None:
            model_family = _BACKBONE_FAMILY[self.model.backbone(self.dataset)]
            if model_family != family:
                fail(
                    ("model", "preset"),
                    "model_dataset_mismatch",
                    f"model '{self.model.preset}' is a {model_family} backbone but dataset '{self.dataset}' "
                    f"holds {family} data; use {_FAMILY_MODELS[family]}",
                    self.model.preset,
                )
        self._check_overrides(fail)

        for knob_name, dist in self.search.items():
            self._check_knob(("search", knob_name), knob_name, dist, self.methods, fail)
        for method, space in self.method_search.items():
            if method not in self.methods:
                fail(
                    ("method_search", method),
                    "method_not_in_study",
                    f"method_search names '{method}', which is not in methods {self.methods}",
                    method,
                )
                continue
            for knob_name, dist in space.items():
                self._check_knob(("method_search", method, knob_name), knob_name, dist, [method], fail)

        if isinstance(self.num_samples, dict):
            for method in self.num_samples.keys() - set(self.methods):
                fail(("num_samples", method), "method_not_in_study", f"'{method}' is not in methods", method)
            missing = [m for m in self.methods if m not in self.num_samples]
            if missing:
                names = ", ".join(f"'{m}'" for m in missing)
                fail(("num_samples",), "missing_method", f"num_samples has no entry for {names}", missing)

        if self.kind == "grid":
            if self.num_samples is not None:
                fail(
                    ("num_samples",),
                    "not_for_grid",
                    "num_samples does not apply to kind: grid (every grid point runs on every seed)",
                    self.num_samples,
                )
            if self.scheduler.type != "none":
                fail(
                    ("scheduler",),
                    "not_for_grid",
                    "kind: grid runs every point to the end; an early-stopping scheduler needs kind: compare",
                    self.scheduler.type,
                )
        max_t = self.scheduler.max_t or self.budget.epochs
        if self.scheduler.max_t is not None and self.scheduler.max_t > self.budget.epochs:
            fail(
                ("scheduler", "max_t"),
                "over_budget",
                f"scheduler.max_t ({max_t}) exceeds budget.epochs ({self.budget.epochs})",
                max_t,
            )
        if self.scheduler.type == "asha" and self.scheduler.grace_period > max_t:
            fail(
                ("scheduler", "grace_period"),
                "over_budget",
                f"scheduler.grace_period ({self.scheduler.grace_period}) exceeds the {max_t} epochs a trial runs",
                self.scheduler.grace_period,
            )

        if self.reference_method is not None and self.reference_method not in self.methods:
            fail(
                ("reference_method",),
                "method_not_in_study",
                f"reference_method '{self.reference_method}' is not in methods {self.methods}",
                self.reference_method,
            )
        for method, value in self.paper_numbers.items():
            if method not in self.methods:
                fail(
                    ("paper_numbers", method), "method_not_in_study", f"'{method}' is not in methods", method
                )
                continue
            problem = _paper_number_problem(DATASET_METRICS[self.dataset][0], value)
            if problem is not None:
                fail(("paper_numbers", method), "paper_number_unit", problem, value)
        if self.tune_seeds is not None:
            shared = sorted(set(self.tune_seeds) & set(self.seeds))
            if shared:
                fail(
                    ("tune_seeds",),
                    "tune_seeds_overlap",
                    f"tune_seeds {shared} are also final seeds; tune on seeds of their own "
                    f"(e.g. tune_seeds: [{_default_tune_seed(self.seeds)}]) so the final phase does not "
                    "report the seeds its configs were picked on",
                    self.tune_seeds,
                )
        self._check_freeze_schedule(fail)

        self._check_data_options(fail)
        k = self.resources.seeds_per_trial
        if isinstance(k, int) and k > 1 and self.budget.compile != "none":
            fail(
                ("resources", "seeds_per_trial"),
                "seed_batch_with_compile",
                f"seeds_per_trial {k} stacks seeds under torch.func, which budget.compile "
                f"'{self.budget.compile}' cannot compile; set seeds_per_trial: 1 or budget.compile: none",
                k,
            )

        limits = (info.context or {}).get("limits") if info.context else None
        if not errors and limits is not None:
            self._check_limits(limits, fail)
        if errors:
            raise ValidationError.from_exception_data(type(self).__name__, errors)
        return self

    def _check_overrides(self, fail) -> None:
        """Every override must be a config field of the backbone that the study and the dataset leave free."""
        backbone = self.model.backbone(self.dataset)
        fields = MODEL_CONFIG_FIELDS[backbone]
        free = [f for f in fields if f not in _RESERVED_MODEL_FIELDS and f not in DATASET_TASK_FIELDS]
        for key, value in self.model.overrides.items():
            loc = ("model", "overrides", key)
            if key in _RESERVED_MODEL_FIELDS:
                fail(
                    loc,
                    "reserved_model_field",
                    f"model overrides may not set '{key}': the study's methods choose the norm",
                    value,
                )
            elif key in DATASET_TASK_FIELDS:
                fail(
                    loc,
                    "dataset_task_field",
                    f"model overrides may not set '{key}': dataset '{self.dataset}' decides the task fields "
                    f"({', '.join(DATASET_TASK_FIELDS)})",
                    value,
                )
            elif key not in fields:
                fail(
                    loc,
                    "unknown_model_field",
                    f"{backbone} has no config field '{key}'; fields a spec may override: {', '.join(free)}",
                    value,
                )
            else:
                knob = self._knob_setting_field(key)
                if knob is not None:
                    # Overrides are applied after knobs, so the override would silently beat the search.
                    fail(
                        loc,
                        "override_shadows_knob",
                        f"model override '{key}' is also set by knob '{knob}' in the search space; "
                        "set it in one place (a fixed value in `search` or the override, not both)",
                        value,
                    )

    def _check_data_options(self, fail) -> None:
        """Corruption options need a corruption dataset, and names that dataset can build."""
        known = DATASET_CORRUPTIONS.get(self.dataset)
        if known is None:
            for field, value in self.data.trial_config().items():
                fail(
                    ("data", field),
                    "no_corruption_sets",
                    f"dataset '{self.dataset}' has no corruption eval sets; data.{field} applies to "
                    f"{', '.join(DATASET_CORRUPTIONS)}",
                    value,
                )
            return
        for index, name in enumerate(self.data.corruptions or []):
            if name not in known:
                fail(
                    ("data", "corruptions", index),
                    "unknown_corruption",
                    f"unknown corruption '{name}' for dataset '{self.dataset}'; known: {', '.join(known)}",
                    name,
                )

    def _check_freeze_schedule(self, fail) -> None:
        """AutoNorm-S decides after epoch t_freeze, so a t_freeze that can reach budget.epochs never freezes
        and the method silently becomes plain AutoNorm."""
        if "autonorm_s" not in self.methods:
            return
        epochs = self.budget.epochs
        knob = KNOBS["t_freeze"]
        loc: tuple[str, ...]
        if "t_freeze" in self.method_search.get("autonorm_s", {}):  # method_search wins over search
            loc, dist = (
                ("method_search", "autonorm_s", "t_freeze"),
                self.method_search["autonorm_s"]["t_freeze"],
            )
        elif "t_freeze" in self.search:
            loc, dist = ("search", "t_freeze"), self.search["t_freeze"]
        else:
            if epochs <= DEFAULT_T_FREEZE:
                fail(
                    ("budget", "epochs"),
                    "autonorm_s_never_freezes",
                    f"autonorm_s watches its gate entropy for the default t_freeze of {DEFAULT_T_FREEZE} "
                    f"epochs, which budget.epochs {epochs} does not outlast, so it would never freeze and "
                    f"would run as plain autonorm; set method_search.autonorm_s.t_freeze below {epochs} "
                    f"or raise budget.epochs above {DEFAULT_T_FREEZE}",
                    epochs,
                )
            return
        if not all(knob.applies_to(m) for m in self.methods if loc[0] == "search"):
            return  # `search.t_freeze` beside other methods is already an error at this path
        wrong_phase = (
            isinstance(dist, Grid) if self.kind == "compare" else not isinstance(dist, (Grid, Fixed))
        )
        if wrong_phase or _check_distribution(knob, dist) is not None:
            return  # reported by _check_knob
        reach = _largest_int(dist)
        if reach < epochs:
            return
        fix = f"keep t_freeze below {epochs} (at most {epochs - 1}) or " if epochs > 1 else ""
        fail(
            loc,
            "autonorm_s_never_freezes",
            f"t_freeze can be {reach} but budget.epochs is {epochs}: AutoNorm-S decides after epoch "
            f"t_freeze, so a run with t_freeze >= epochs never freezes and is plain autonorm; "
            f"{fix}raise budget.epochs above {reach}",
            dist.model_dump(),
        )

    def _knob_setting_field(self, field: str) -> str | None:
        for method in self.methods:
            for knob in {**self.search, **self.method_search.get(method, {})}:
                if KNOB_MODEL_FIELDS.get(knob) == field:
                    return knob
        return None

    def _check_knob(self, loc, knob_name: str, dist: Distribution, methods: Iterable[str], fail) -> None:
        knob = KNOBS.get(knob_name)
        if knob is None:
            fail(
                loc, "unknown_knob", f"unknown knob '{knob_name}'; known knobs: {', '.join(KNOBS)}", knob_name
            )
            return
        for method in methods:
            if not knob.applies_to(method):
                assert knob.methods is not None
                hint = ""
                if loc[0] == "search":
                    hint = f"; move it under method_search.{knob.methods[0]}"
                fail(
                    loc,
                    "knob_not_applicable",
                    f"knob '{knob_name}' does not apply to method '{method}' "
                    f"(it applies to {', '.join(knob.methods)} only){hint}",
                    knob_name,
                )
                return
        problem = _check_distribution(knob, dist)
        if problem is not None:
            fail(loc, "knob_out_of_range", problem, dist.model_dump())
        elif (
            knob_name in _IMAGE_ONLY_KNOBS and _DATASET_FAMILY[self.dataset] != "image" and _can_enable(dist)
        ):
            # The trial would only fail when it starts; say so before anything runs.
            fail(
                loc,
                "image_only_knob",
                f"knob '{knob_name}' transforms images, but dataset '{self.dataset}' holds "
                f"{_DATASET_FAMILY[self.dataset]} data; remove it (or set it to {_IMAGE_ONLY_KNOBS[knob_name]!r})",
                dist.model_dump(),
            )
        elif self.kind == "compare" and isinstance(dist, Grid):
            fail(
                loc,
                "grid_in_compare",
                f"knob '{knob_name}': grid distributions belong to kind: grid studies; "
                "use type: choice to let the tuner pick",
                dist.model_dump(),
            )
        elif self.kind == "grid" and not isinstance(dist, (Grid, Fixed)):
            fail(
                loc,
                "random_in_grid",
                f"knob '{knob_name}': kind: grid runs listed points only; "
                f"a {dist.type} distribution needs a tuner (kind: compare), use type: grid",
                dist.model_dump(),
            )

    def _check_limits(self, limits: StudyLimits, fail) -> None:
        if self.budget.epochs > limits.max_epochs:
            fail(
                ("budget", "epochs"),
                "over_limit",
                f"budget.epochs is {self.budget.epochs} but this server allows at most "
                f"{limits.max_epochs} epochs per trial (NORMLAB_MAX_EPOCHS)",
                self.budget.epochs,
            )
        if len(self.seeds) > limits.max_seeds:
            fail(
                ("seeds",),
                "over_limit",
                f"the study lists {len(self.seeds)} seeds but this server allows at most "
                f"{limits.max_seeds} (NORMLAB_MAX_SEEDS)",
                len(self.seeds),
            )
        planned = self.planned_trials()
        if planned > limits.max_trials:
            phases = " + ".join(f"{phase} {n}" for phase, n in self.planned_trials_by_phase().items())
            fail(
                ("num_samples",) if self.kind == "compare" else ("search",),
                "over_limit",
                f"the study plans {planned} trials ({phases}) but this server allows at most "
                f"{limits.max_trials} per study (NORMLAB_MAX_TRIALS); reduce num_samples, methods, "
                "grid points or seeds",
                planned,
            )

    # --------------------------------------------------------------------------- helpers for the driver

    @property
    def tune_seed(self) -> int:
        """The seed of every tune-phase trial and of the tuner's sampler: the first of `tune_seeds`."""
        assert self.tune_seeds is not None, "validation fills tune_seeds in"
        return self.tune_seeds[0]

    @property
    def reference(self) -> str:
        """The method others are compared against: reference_method, else frozen_ln, else the first."""
        if self.reference_method is not None:
            return self.reference_method
        return "frozen_ln" if "frozen_ln" in self.methods else self.methods[0]

    def search_space_for(self, method: str) -> dict[str, Distribution]:
        """The knob distributions of one method: `search` overlaid with `method_search[method]`."""
        if method not in self.methods:
            raise KeyError(f"method '{method}' is not in this study's methods {self.methods}")
        return {**self.search, **self.method_search.get(method, {})}

    def num_samples_for(self, method: str) -> int:
        if method not in self.methods:
            raise KeyError(f"method '{method}' is not in this study's methods {self.methods}")
        if self.num_samples is None:
            return DEFAULT_NUM_SAMPLES
        return self.num_samples[method] if isinstance(self.num_samples, dict) else self.num_samples

    def grid_points(self, method: str) -> list[GridPoint]:
        """Every grid point of a method (kind: grid), in a stable order; fixed knobs ride along."""
        if self.kind != "grid":
            raise ValueError("grid_points applies to kind: grid studies")
        space = self.search_space_for(method)
        grid_knobs = [k for k, d in space.items() if isinstance(d, Grid)]
        fixed = {k: _points(d)[0] for k, d in space.items() if isinstance(d, Fixed)}
        points = []
        for combo in itertools.product(*(_points(space[k]) for k in grid_knobs)):
            values = dict(zip(grid_knobs, combo, strict=True))
            label = ",".join(f"{k}={v}" for k, v in values.items()) or "base"
            points.append(GridPoint(label=label, knobs={**fixed, **values}))
        return points

    def tunes(self, method: str) -> bool:
        """Whether the tune phase runs for `method` (kind: compare): only when some knob is searchable."""
        return self.kind == "compare" and has_searchable_knobs(self.search_space_for(method))

    def planned_trials_by_phase(self) -> dict[str, int]:
        if self.kind == "grid":
            return {"grid": sum(len(self.grid_points(m)) for m in self.methods) * len(self.seeds)}
        return {
            # A method without searchable knobs goes straight to the final phase (as the driver does).
            "tune": sum(self.num_samples_for(m) for m in self.methods if self.tunes(m)),
            "final": len(self.methods) * len(self.seeds),
        }

    def planned_trials(self) -> int:
        """How many trials the study runs in all phases together (ASHA-stopped trials included)."""
        return sum(self.planned_trials_by_phase().values())


def _default_tune_seed(seeds: list[int]) -> int:
    """One seed outside `seeds`: the next after the largest, or the smallest free one at the top of the range."""
    if max(seeds) + 1 < 2**32:
        return max(seeds) + 1
    return min(set(range(len(seeds) + 1)) - set(seeds))


def _largest_int(dist: Distribution) -> int:
    """The largest value an integer knob's (valid) distribution can take."""
    if isinstance(dist, IntRange):
        return dist.high if dist.log else dist.low + (dist.high - dist.low) // dist.step * dist.step
    return max(int(v) for v in _discrete_values(dist))  # type: ignore[arg-type]


def _paper_number_problem(metric: str, value: float) -> str | None:
    """Why a paper number is not in the dataset metric's own unit, or None when it is."""
    if metric == "accuracy" and not 0.0 <= value <= 1.0:
        hint = f"; write {value / 100:.6g}" if 1.0 < value <= 100.0 else ""
        return (
            f"accuracy is a fraction in [0, 1], as the results report it, so 86.35 % is 0.8635; "
            f"got {value:g}{hint}"
        )
    if metric == "rmse" and not value > 0.0:
        return f"rmse is positive, in the target's own units; got {value:g}"
    if metric == "perplexity" and not value >= 1.0:
        return f"perplexity is at least 1 (the exp of a mean cross-entropy); got {value:g}"
    return None


# ---------------------------------------------------------------------------------------- loading


class SpecFormatError(ValueError):
    """The spec text is not a readable JSON or YAML mapping."""


class UnsupportedContentTypeError(SpecFormatError):
    """The spec came with a content type that is neither JSON nor YAML."""


class _SpecYamlLoader(yaml.SafeLoader):
    """Safe YAML that rejects duplicate keys and reads `1e-3` as a float (YAML 1.1 would keep a string)."""

    def construct_mapping(self, node, deep=False):  # type: ignore[override]
        keys = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in keys:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark
                )
            keys.add(key)
        return super().construct_mapping(node, deep=deep)


_SpecYamlLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
        |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
        |\.[0-9_]+(?:[eE][-+][0-9]+)?
        |[-+]?\.(?:inf|Inf|INF)
        |\.(?:nan|NaN|NAN))$""",
        re.X,
    ),
    list("-+0123456789."),
)


def _media_type(content_type: str | None) -> str | None:
    if content_type is None:
        return None
    return content_type.split(";")[0].strip().lower() or None


# Values (mappings, lists and scalars) a spec may hold once YAML aliases are expanded; real specs hold
# a few hundred.
MAX_EXPANDED_NODES = 20_000


def _expanded_size(value: Any, sizes: dict[int, int], on_path: set[int]) -> int:
    """How many values `value` holds with every alias expanded, counted once per shared object (memoised
    by identity), and stopping as soon as the count passes MAX_EXPANDED_NODES. Self-references count once
    (json_problems reports them)."""
    if not isinstance(value, (dict, list)):
        return 1
    key = id(value)
    if key in sizes:
        return sizes[key]
    if key in on_path:
        return 1
    on_path.add(key)
    total = 1
    for child in value.values() if isinstance(value, dict) else value:
        total += _expanded_size(child, sizes, on_path)
        if total > MAX_EXPANDED_NODES:
            break
    on_path.discard(key)
    sizes[key] = total
    return total


def parse_spec_text(text: str, content_type: str | None = None) -> dict[str, Any]:
    """Parse JSON (application/json, *+json) or YAML (yaml types, text/plain or no type) into a mapping."""
    media = _media_type(content_type)
    is_json = media is not None and (media in JSON_CONTENT_TYPES or media.endswith("+json"))
    if not is_json and media not in YAML_CONTENT_TYPES | {None, "text/plain"}:
        raise UnsupportedContentTypeError(
            f"unsupported content type '{media}': send the spec as application/json or application/yaml"
        )
    try:
        data = json.loads(text) if is_json else yaml.load(text, Loader=_SpecYamlLoader)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise SpecFormatError(f"the spec is not valid {'JSON' if is_json else 'YAML'}: {exc}") from exc
    if not is_json and _expanded_size(data, {}, set()) > MAX_EXPANDED_NODES:
        # YAML aliases share one object per anchor, so a few hundred bytes of nested anchors ("billion
        # laughs") expand to billions of nodes once anything walks the tree: refuse before anything does.
        raise SpecFormatError(
            f"the spec's YAML aliases expand to more than {MAX_EXPANDED_NODES} values; a study spec needs "
            "far fewer: write it without nested anchors"
        )
    if not isinstance(data, dict):
        raise SpecFormatError(
            f"a study spec is a mapping of fields (name, dataset, methods, ...), got {type(data).__name__}"
        )
    return data


def validate_spec_data(data: Mapping[str, Any], *, limits: StudyLimits | None = None) -> StudySpec:
    """Validate parsed spec data the way the API does: strict types in JSON mode, so `false` is no
    integer and "5" no number (lax mode would coerce a value the author never wrote)."""
    return StudySpec.model_validate_json(
        json.dumps(data), strict=True, context={"limits": limits} if limits is not None else None
    )


def load_spec(
    source: str | Path, content_type: str | None = None, *, limits: StudyLimits | None = None
) -> StudySpec:
    """Read a spec from a path or from JSON/YAML text; `limits` (from the service settings) caps its size.

    Raises SpecFormatError for unreadable text and pydantic.ValidationError (with field paths) for an
    invalid spec.
    """
    if isinstance(source, Path) or (
        "\n" not in source and source.endswith((".yaml", ".yml", ".json")) and Path(source).is_file()
    ):
        path = Path(source)
        text = path.read_text(encoding="utf-8")
        if content_type is None:
            content_type = "application/json" if path.suffix == ".json" else "application/yaml"
    else:
        text = source
    data = parse_spec_text(text, content_type)
    return StudySpec.model_validate(data, context={"limits": limits} if limits is not None else None)
