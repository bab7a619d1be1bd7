"""What a plan says: the value objects POST /plans answers with and `normlab plan` prints.

Frozen pydantic models, so the API documents them in its OpenAPI schema as they are. Every figure that is
predicted carries where it came from (`basis`): measured, extrapolated or a prior, and why there is none.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "Cost",
    "FixedDesignPlan",
    "GpuPricing",
    "MemoryPlan",
    "PhaseTrials",
    "Scenario",
    "ScenarioName",
    "SequentialPlan",
    "Spread",
    "StudyPlan",
    "WallPricing",
]


class _Value(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class PhaseTrials(_Value):
    """One phase of the study as the spec writes it (a sequential design at its maximum)."""

    phase: Literal["tune", "final", "grid"]
    # Trials per method as the store counts them: one per seed (a seed-batched Tune trial is several).
    trials: dict[str, int]
    # Tune trials per method: a batch of seeds trained together in one process is one.
    processes: dict[str, int]
    seeds_per_method: int | None  # final and grid: the seeds each method trains; None for tune
    epochs_per_trial: float  # mean epochs a trial trains (under ASHA, the rungs' mean)


class Cost(_Value):
    """What one design trains and what that takes: a count, or a mean over simulated studies."""

    seeds_per_method: float  # final-phase seeds each method trains (a mean where the design is sequential)
    trials: float  # every trial, tune included, one per seed
    processes: float  # Tune trials, tune included: a seed batch is one
    gpu_hours: float | None = Field(description="on the plan's GPU; null: no prediction (`gpu` says why)")
    wall_hours: float | None = Field(description="on this cluster; null: no prediction (`wall` says why)")


class GpuPricing(_Value):
    """How the GPU-hours are priced: studies/catalog/cost.py's rates, and the measured speed-ups applied."""

    gpu: str  # the GPU the rates were measured on
    provenance: Literal["measured", "extrapolated", "none"]
    basis: list[str]  # how the figures were made, sentence by sentence; why there are none


class WallPricing(_Value):
    """How the wall time on this cluster is predicted."""

    source: Literal["history", "gpu_prior", "cpu_prior", "none"]
    prior: bool  # True unless it comes from trials this cluster finished
    studies: list[str]  # the earlier studies whose trials were timed ("name (id)"), newest first
    concurrency: float | None  # trials assumed to train at once
    basis: list[str]


class Spread(_Value):
    """The seed-to-seed standard deviation of paired differences (method - reference) the sizing assumes."""

    sd: float | None  # in the units of the dataset's primary metric; null: none known
    source: Literal["study", "prior", "none"]
    study: str | None  # the stored study it was measured on, "name (id)"
    comparisons: int  # paired comparisons pooled
    seeds: int  # paired seeds per comparison, at most
    basis: str


class FixedDesignPlan(_Value):
    """A fixed design of the same test: every method on the same number of seeds, decided once."""

    question: str  # what it must show, in words
    comparisons: int  # comparisons with the reference (each tested at alpha / comparisons, Bonferroni)
    seeds_needed: int | None  # per method, for the requested power; null: cannot be sized (`reason`)
    cost: Cost | None  # at seeds_needed
    # The smallest true difference the spec's listed seeds find with 80 % power (a fixed spec without an
    # effect of interest); null where not computed.
    detectable_effect: float | None
    reason: str


# effect: every method better by the design's effect; no_effect: all level; at_margin: a margin test's null.
ScenarioName = Literal["effect", "no_effect", "at_margin"]


class Scenario(_Value):
    """The sequential design simulated under one truth."""

    name: ScenarioName
    truth: float  # true difference of every method from the reference, positive = better
    description: str
    expected: Cost  # means over the simulated studies
    seeds_by_method: dict[str, float]  # mean final seeds each method trains (the reference trains the most)
    seeds_standard_error: float  # Monte Carlo standard error of expected.seeds_per_method
    rejected: float  # share of comparisons decided for their goal (power, or type-I error where it is null)
    any_rejected: float  # share of studies with at least one comparison decided for its goal
    stopped_early: float  # share of studies decided before the last look
    decisions: dict[str, float]  # share of comparisons ending in each decision (SequentialMonitor's names)


class SequentialPlan(_Value):
    """The sequential design: its first look, its maximum and, simulated, what it is expected to take."""

    test: str
    effect: float | None
    margin: float | None
    alpha: float
    power: float
    looks: list[int]  # cumulative seeds per method at each look
    first: Cost  # through the first look
    maximum: Cost  # every method on max_seeds
    scenarios: list[Scenario]  # empty where no spread is known (`reason`)
    simulations: int  # simulated studies per scenario
    random_seed: int
    reason: str


class MemoryPlan(_Value):
    """The memory of the study's largest trial (studies.sizing, at the worst case its search allows), and
    what a trial may use where it would run (studies.limits); the submission refuses one over it."""

    bytes: int  # the largest trial's estimate: parameters, gradients, AdamW state, one batch's activations
    parameters: int  # of one of its models
    seeds_per_trial: int  # models that trial trains at once
    batch_size: int
    method: str  # the method of that trial (the norm decides the parameters)
    device: Literal["cpu", "gpu"]  # where it is sized for: RAM per CPU trial, or its GPU share
    limit_bytes: int | None = Field(description="what one trial may use here; null: no limit was given")
    limit: str | None  # the limit in words, naming its setting
    basis: list[str]  # how the estimate was made


class StudyPlan(_Value):
    """Everything known about a study before it runs: trials, GPU-hours, wall time, seeds for power."""

    name: str
    dataset: str
    model: str
    kind: Literal["compare", "grid"]
    methods: list[str]
    reference: str
    metric: str  # the dataset's primary metric; effects, margins and the spread are in its units
    design: Literal["fixed", "sequential"]
    phases: list[PhaseTrials]
    seeds_per_trial: int  # final and grid seeds one Tune trial trains
    seeds_per_trial_basis: str
    planned: Cost  # the spec as written (a sequential design at its maximum)
    gpu: GpuPricing
    wall: WallPricing
    spread: Spread
    fixed: FixedDesignPlan
    sequential: SequentialPlan | None
    memory: MemoryPlan
