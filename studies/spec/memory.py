"""A spec's largest trial and the memory it may have: studies.sizing's estimate taken at the worst case the
spec allows, and the trial's budget from the server's limits (studies.limits).

The worst case: every method (each trains with its own norm), every value the search can give a knob that
changes the model's size (the widest `width_expansion`, either MLP branch, every norm placement, LayerScale
on or off), the study's batch size, and the seeds one final or grid trial trains together (resolved as
workers.trials.plan resolves "auto"). A plugin's backbone is sized from what its check measured
(studies.sizing), which `MemoryEstimate.estimated` says. The rules refuse a spec whose worst case exceeds
its budget (rules.trial_fits_its_memory); the plan shows the same figure (studies.planning).

Reads the spec through the fields it names (`SizedSpec`), so it needs no import of StudySpec.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from studies.backbones import plugin_backbone
from studies.datasets import dataset_record
from studies.knobs import KNOB_MODEL_FIELDS
from studies.limits import DEFAULT_GPU_MEMORY_GIB, GIB, StudyLimits
from studies.methods import norm_for_method
from studies.sizing import (
    DEFAULT_GPU_SEEDS_PER_TRIAL,
    TrialMemory,
    format_bytes,
    model_fields,
    trial_memory,
)
from studies.spec.distributions import Choice, Distribution, Fixed, Grid, IntRange, LogUniform, Uniform
from studies.spec.sections import Budget, ModelSpec, Resources

__all__ = [
    "MemoryBudget",
    "MemoryEstimate",
    "SizedSpec",
    "measured_backbone",
    "memory_budget",
    "worst_trial_memory",
]

# The model fields whose value changes the estimate (studies.sizing): the MLP's width and branch, where the
# norms sit (placement none has none, post no final norm) and LayerScale.
_SIZE_FIELDS = ("mlp_ratio", "branch", "norm_placement", "layer_scale_init")
_NUMERIC_SIZE_FIELDS = frozenset({"mlp_ratio"})  # larger is larger: only the largest value matters


class SizedSpec(Protocol):
    """The fields of a StudySpec the estimate reads (read-only: a spec is frozen)."""

    @property
    def dataset(self) -> str: ...
    @property
    def model(self) -> ModelSpec: ...
    @property
    def methods(self) -> list[str]: ...
    @property
    def seeds(self) -> list[int]: ...
    @property
    def budget(self) -> Budget: ...
    @property
    def resources(self) -> Resources: ...
    def search_space_for(self, method: str) -> dict[str, Distribution]: ...


@dataclass(frozen=True)
class MemoryBudget:
    """The memory one trial of the study may use, and where that figure comes from."""

    bytes: int
    device: Literal["cpu", "gpu"]
    source: str  # in words, naming the setting

    def describe(self) -> str:
        return f"{format_bytes(self.bytes)} ({self.source})"


@dataclass(frozen=True)
class MemoryEstimate:
    """The study's largest trial: its memory, and what makes it the largest."""

    memory: TrialMemory
    method: str  # the method whose trial needs the most
    backbone: str
    fields: Mapping[str, Any]  # that trial's model fields (worst-case knob values included)
    device: Literal["cpu", "gpu"]
    estimated: str | None  # which dataset figures are estimates (a fitted vocabulary), or None

    def at_batch_size(self, batch_size: int) -> TrialMemory:
        """The same trial at another batch size."""
        return _memory(
            self.backbone, self.fields, self.method, batch_size=batch_size, seeds=self.memory.seeds
        )

    def largest_batch_size(self, limit_bytes: int) -> int:
        """The largest batch size whose trial fits `limit_bytes`; 0 when not even one sample does."""
        if self.at_batch_size(1).total_bytes > limit_bytes:
            return 0
        low, high = 1, max(1, self.memory.batch_size)
        while self.at_batch_size(high).total_bytes <= limit_bytes:
            low, high = high, high * 2
            if high > 2**20:
                return high
        while high - low > 1:  # at_batch_size(low) fits, at_batch_size(high) does not
            middle = (low + high) // 2
            low, high = (
                (middle, high) if self.at_batch_size(middle).total_bytes <= limit_bytes else (low, middle)
            )
        return low


def memory_budget(spec: SizedSpec, limits: StudyLimits) -> MemoryBudget:
    """What one trial may use: its GPU share of a GPU, or one CPU trial slot's RAM (studies.limits)."""
    gpu = spec.resources.gpu
    if gpu == "auto" and limits.gpu_memory_gib is not None:
        return MemoryBudget(
            int(limits.gpu_memory_gib * GIB),
            "gpu",
            'one GPU at most: resources.gpu "auto" on GPUs of NORMLAB_GPU_MEMORY_GIB',
        )
    if gpu != "auto" and gpu > 0:
        device_gib = limits.gpu_memory_gib if limits.gpu_memory_gib is not None else DEFAULT_GPU_MEMORY_GIB
        setting = (
            "NORMLAB_GPU_MEMORY_GIB" if limits.gpu_memory_gib is not None else "no NORMLAB_GPU_MEMORY_GIB set"
        )
        return MemoryBudget(
            int(gpu * device_gib * GIB),
            "gpu",
            f"resources.gpu {gpu:g} of a {device_gib:g} GiB GPU, {setting}",
        )
    why = "resources.gpu 0" if gpu != "auto" else 'resources.gpu "auto" with no GPU declared'
    return MemoryBudget(
        int(limits.trial_memory_gib * GIB), "cpu", f"RAM per CPU trial: NORMLAB_TRIAL_MEMORY_GIB; {why}"
    )


def seeds_per_trial(spec: SizedSpec, *, on_gpu: bool) -> int:
    """The seeds one final or grid trial trains together, as workers.trials.plan resolves "auto"."""
    requested = spec.resources.seeds_per_trial
    if requested != "auto":
        return int(requested)
    if not on_gpu or spec.budget.compile != "none":
        return 1
    return max(1, min(len(spec.seeds), DEFAULT_GPU_SEEDS_PER_TRIAL))


def worst_trial_memory(spec: SizedSpec, *, device: Literal["cpu", "gpu"]) -> MemoryEstimate:
    """The study's largest trial (the module docstring's worst case) on `device`."""
    seeds = seeds_per_trial(spec, on_gpu=device == "gpu")
    worst: MemoryEstimate | None = None
    notes = (dataset_record(spec.dataset).estimated, measured_backbone(spec.model.backbone(spec.dataset)))
    estimated = "; ".join(note for note in notes if note) or None
    for method in spec.methods:
        for knobs in _size_knob_cases(spec.search_space_for(method)):
            backbone, fields = model_fields(
                spec.dataset, spec.model.preset, knobs=knobs, overrides=spec.model.overrides
            )
            memory = _memory(backbone, fields, method, batch_size=spec.budget.batch_size, seeds=seeds)
            if worst is None or memory.total_bytes > worst.memory.total_bytes:
                worst = MemoryEstimate(memory, method, backbone, fields, device, estimated)
    assert worst is not None, "a spec has at least one method"
    return worst


def measured_backbone(backbone: str) -> str | None:
    """What the estimate of a plugin's backbone stands on, in words (None for a built-in, which
    studies.sizing counts from its modules): the sizes its check measured, or nothing at all."""
    record = plugin_backbone(backbone)
    if record is None:
        return None
    if record.parameters is None or record.activations is None:
        return (
            f"nothing of the model: {backbone} is a backbone of plugin {record.source} whose sizes no check "
            "measured, so only its input batch and an evaluation batch's logits are counted"
        )
    return (
        f"{backbone} (a backbone of plugin {record.source}) as the plugin's check measured it: "
        f"{record.parameters:,} parameters and {record.activations:,} floats saved per training sample, the "
        f"most over its presets and the {record.family} datasets, at its own sizes (model.overrides are not "
        "counted)"
    )


def _memory(
    backbone: str, fields: Mapping[str, Any], method: str, *, batch_size: int, seeds: int
) -> TrialMemory:
    return trial_memory(backbone, fields, norm_for_method(method).kind, batch_size=batch_size, seeds=seeds)


def _size_knob_cases(space: Mapping[str, Distribution]) -> list[dict[str, Any]]:
    """Every combination of the values the search can give the size fields (the largest of a number)."""
    options: dict[str, list[Any]] = {}
    for knob, dist in space.items():
        field = KNOB_MODEL_FIELDS.get(knob)
        if field not in _SIZE_FIELDS:
            continue
        values = _values(dist)
        if field in _NUMERIC_SIZE_FIELDS:
            numbers = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
            values = [max(numbers)] if numbers else values
        options[field] = values
    fields = list(options)
    return [dict(zip(fields, combo, strict=True)) for combo in itertools.product(*options.values())]


def _values(dist: Distribution) -> list[Any]:
    if isinstance(dist, (Uniform, LogUniform, IntRange)):
        return [dist.high]  # only width_expansion is continuous among the size fields: larger is larger
    if isinstance(dist, (Choice, Grid)):
        return list(dict.fromkeys(dist.values))
    assert isinstance(dist, Fixed)
    return [dist.value]
