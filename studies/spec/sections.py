"""The sections of a spec besides its knobs: model, scheduler, budget, data options, resources, sequential
design."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import (
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from studies.backbones import backbone_of
from studies.datasets import default_model
from studies.spec.distributions import _Strict, raise_field_problems
from studies.spec.integers import Integer, PositiveInteger, Severity, integral_to_int
from studies.spec.names import KNOWN_MODELS, Scalar
from studies.trial_config import Key


class ModelSpec(_Strict):
    """A models.build_model name or preset (a built-in's or a plugin's backbone) plus field overrides;
    `model: vit_lite_tiny` is shorthand."""

    preset: str | None = None  # None: the dataset's default model (studies.datasets.default_model)
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
        """The models.build_model backbone this spec builds: the preset's, else the dataset's default model's."""
        return backbone_of(self.preset or default_model(dataset))


class SchedulerSpec(_Strict):
    """Early stopping of tuning trials: `asha` (Ray Tune ASHAScheduler) or `none`; `scheduler: asha` works."""

    type: Literal["asha", "none"] = "none"
    grace_period: Integer = Field(1, ge=1)  # epochs every trial runs before ASHA may stop it
    reduction_factor: float = Field(3.0, gt=1.0)  # ASHA keeps 1/reduction_factor of trials per rung
    max_t: PositiveInteger | None = None  # None: the budget's epochs

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        return {"type": data} if isinstance(data, str) else data


class Budget(_Strict):
    """Training budget of every trial."""

    epochs: Integer = Field(10, ge=1)
    batch_size: Integer = Field(128, ge=1, le=65_536)
    warmup_epochs: Integer = Field(0, ge=0)  # linear warmup before the cosine schedule
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
    severities: list[Severity] | None = Field(None, min_length=1)  # None: [3]

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
        k = integral_to_int(k)  # 2.0 is 2, as for every integer field (studies.spec.integers)
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_SEEDS_PER_TRIAL:
            raise ValueError(
                f"seeds_per_trial must be 'auto' or an integer in [1, {MAX_SEEDS_PER_TRIAL}], got {k!r}"
            )
        return k


SequentialTest = Literal["superiority", "non_inferiority", "equivalence"]
MAX_SEQUENTIAL_SEEDS = 1_000


class SequentialDesign(_Strict):
    """Seeds added look by look until every comparison is decided: each method with the reference (kind:
    compare), or the grid points its `pairs` name (kind: grid).

    The final phase starts every method on `first_seeds` seeds, then, after each look, adds
    `seeds_per_look` seeds to each method that still has an open comparison, up to `max_seeds`. Each look
    tests every open comparison against a group-sequential boundary from a Lan-DeMets alpha-spending
    function, so the study's family-wise error stays at `alpha` across every comparison and every look.
    The seeds are derived, not listed: 0 to max_seeds - 1, taken in that order, so every method trains
    the same seeds (the comparisons stay paired) and no seed is trained twice.

    Defaults: test superiority, first_seeds 3, seeds_per_look 2, max_seeds 10 (looks at 3, 5, 7, 9 and
    10 seeds), alpha 0.05, power 0.8, spending obrien_fleming, futility on. `effect` (superiority) or
    `margin` (non_inferiority, equivalence) has no default: it is in the units of the dataset's primary
    metric (one accuracy point is 0.01) and only the study's author knows what difference matters.
    """

    # superiority: does the method differ from the reference (two-sided), sized to find a true difference
    # of `effect` with probability `power`?
    # non_inferiority: is the method worse than the reference by less than `margin` (in the metric's own
    # direction)? equivalence: does the difference lie within +-margin?
    test: SequentialTest = "superiority"
    first_seeds: Integer = 3  # seeds of every method before the first look; >= 2, a spread needs two
    seeds_per_look: Integer = 2  # seeds added to each method still open, per look; >= 1
    max_seeds: Integer = 10  # cap per method; the last look may add fewer than seeds_per_look to reach it
    alpha: float = 0.05  # family-wise type-I error across every comparison and every look; in (0, 0.5)
    power: float = 0.8  # chance to decide a comparison whose true difference is `effect`; in (0.5, 1)
    effect: float | None = None  # smallest difference of interest (superiority and its futility bound)
    margin: float | None = None  # largest difference still level (non_inferiority, equivalence)
    # Lan-DeMets spending function: obrien_fleming spends almost no alpha early (a near-fixed-design final
    # test), pocock spends it evenly (stops earlier under a large effect, but needs a larger max_seeds for
    # the same power).
    spending: Literal["obrien_fleming", "pocock"] = "obrien_fleming"
    # Stop a comparison that can no longer reach its goal at the design's power (a non-binding bound:
    # ignoring it never raises the type-I error).
    futility: bool = True
    # Comparisons besides each method with the reference, where a claim needs them: [method, against]
    # (e.g. [adanorm, autonorm_s]: is adanorm better than autonorm_s?). Each is one more comparison under
    # the family-wise alpha, and both its arms train while it is open. In a grid study the arms are grid
    # points, named as their results rows ("autonorm_s [post_freeze_gate=hard]"), and the pairs are its
    # only comparisons: a grid has no single reference point.
    pairs: list[Annotated[list[str], Field(min_length=2, max_length=2)]] = Field(default_factory=list)

    @field_validator("first_seeds")
    @classmethod
    def _first_batch_has_a_spread(cls, first_seeds: int) -> int:
        if first_seeds < 2:
            raise PydanticCustomError(
                "too_few_first_seeds",
                "first_seeds must be at least 2: the first look estimates the seed-to-seed spread, which "
                "one seed cannot give; got {value}",
                {"value": first_seeds},
            )
        return first_seeds

    @field_validator("max_seeds")
    @classmethod
    def _max_seeds_bounded(cls, max_seeds: int) -> int:
        # Checked before the server's own limit: the seeds are derived as a list of max_seeds ids.
        if max_seeds > MAX_SEQUENTIAL_SEEDS:
            raise PydanticCustomError(
                "too_many_seeds",
                "max_seeds must be at most {limit} seeds per method; got {value}",
                {"limit": MAX_SEQUENTIAL_SEEDS, "value": max_seeds},
            )
        return max_seeds

    @field_validator("seeds_per_look")
    @classmethod
    def _looks_add_seeds(cls, seeds_per_look: int) -> int:
        if seeds_per_look < 1:
            raise PydanticCustomError(
                "too_few_seeds_per_look",
                "seeds_per_look must be at least 1: a look that adds no seed learns nothing; got {value}",
                {"value": seeds_per_look},
            )
        return seeds_per_look

    @field_validator("alpha")
    @classmethod
    def _alpha_in_range(cls, alpha: float) -> float:
        if not 0.0 < alpha < 0.5:
            raise PydanticCustomError(
                "alpha_out_of_range",
                "alpha is the study's family-wise error rate (every comparison, every look) and must lie "
                "in (0, 0.5); got {value} (0.05 is the usual choice)",
                {"value": alpha},
            )
        return alpha

    @field_validator("power")
    @classmethod
    def _power_in_range(cls, power: float) -> float:
        if not 0.5 < power < 1.0:
            raise PydanticCustomError(
                "power_out_of_range",
                "power is the chance to decide a comparison whose true difference is the effect of "
                "interest and must lie in (0.5, 1); got {value} (0.8 or 0.9 are the usual choices)",
                {"value": power},
            )
        return power

    @field_validator("effect", "margin")
    @classmethod
    def _positive_difference(cls, value: float | None, info: ValidationInfo) -> float | None:
        if value is not None and not value > 0.0:
            field = info.field_name
            assert field is not None, "a field validator always knows its field"
            raise PydanticCustomError(
                "not_positive",
                "{field} must be positive: {meaning}, in the units of the dataset's primary metric "
                "(e.g. {field}: 0.01 for one accuracy point); got {value}",
                {"field": field, "meaning": _DIFFERENCE_MEANING[field], "value": value},
            )
        return value

    @model_validator(mode="after")
    def _consistent(self) -> SequentialDesign:
        raise_field_problems(type(self).__name__, self._problems())
        return self

    def _problems(self) -> list[tuple[str, str, str, Any]]:
        problems: list[tuple[str, str, str, Any]] = []
        if self.max_seeds < self.first_seeds:
            problems.append(
                (
                    "max_seeds",
                    "max_below_first_seeds",
                    f"max_seeds ({self.max_seeds}) is below first_seeds ({self.first_seeds}): raise "
                    "max_seeds or lower first_seeds",
                    self.max_seeds,
                )
            )
        elif self.max_seeds == self.first_seeds:
            problems.append(
                (
                    "max_seeds",
                    "single_look",
                    f"max_seeds ({self.max_seeds}) equals first_seeds ({self.first_seeds}), which leaves a "
                    "single look: that is a fixed design; remove sequential and list the seeds "
                    f"(seeds: {list(range(self.max_seeds))}), or raise max_seeds above first_seeds",
                    self.max_seeds,
                )
            )
        if self.test == "superiority":
            if self.margin is not None:
                problems.append(
                    (
                        "margin",
                        "margin_not_for_superiority",
                        "margin applies to test: non_inferiority or equivalence; a superiority test is "
                        "sized by effect: remove margin, or set the test that the margin belongs to",
                        self.margin,
                    )
                )
            if self.effect is None:
                problems.append(
                    (
                        "effect",
                        "effect_required",
                        "a superiority test needs effect: the smallest difference worth detecting, in the "
                        "units of the dataset's primary metric (e.g. effect: 0.01 for one accuracy "
                        "point); it sets the design's power and its futility bound",
                        None,
                    )
                )
        else:
            if self.margin is None:
                problems.append(
                    (
                        "margin",
                        "margin_required",
                        f"test: {self.test} needs margin: {_DIFFERENCE_MEANING['margin']}, in the units "
                        "of the dataset's primary metric (e.g. margin: 0.01 for one accuracy point)",
                        None,
                    )
                )
            if self.effect is not None:
                problems.append(
                    (
                        "effect",
                        "effect_not_for_margin_tests",
                        f"effect applies to test: superiority; test: {self.test} is sized by its margin "
                        "(at a true difference of 0): remove effect",
                        self.effect,
                    )
                )
        return problems

    def seed_ids(self) -> list[int]:
        """Every seed a method can receive, in the order the looks take them: 0 to max_seeds - 1."""
        return list(range(self.max_seeds))

    def looks(self) -> list[int]:
        """The cumulative seeds per method at each look, e.g. [3, 5, 7, 9, 10] for the defaults."""
        return [*range(self.first_seeds, self.max_seeds, self.seeds_per_look), self.max_seeds]

    def information_fractions(self) -> list[float]:
        """Each look's share of the maximum information (seeds / max_seeds), the spending function's time."""
        return [n / self.max_seeds for n in self.looks()]

    def seeds_added_at(self, look: int) -> list[int]:
        """The seeds a method still open trains for look `look` (0-based): the first look's are 0 to
        first_seeds - 1, each later look's continue where the previous one stopped."""
        looks = self.looks()
        if not 0 <= look < len(looks):
            raise IndexError(f"look {look} is outside this design's {len(looks)} looks")
        start = looks[look - 1] if look > 0 else 0
        return list(range(start, looks[look]))


_DIFFERENCE_MEANING = {
    "effect": "the smallest difference worth detecting",
    "margin": "the largest difference that still counts as level",
}


@dataclass(frozen=True)
class GridPoint:
    """One point of a grid study: `label` names the grid knobs' values (the results-table group)."""

    label: str
    knobs: dict[str, Scalar]
