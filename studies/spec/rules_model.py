"""The spec rules about the model's size and shape: a shape that exists (positive widths and depths,
heads that divide the width, patches that tile the images) and a largest trial that fits the memory one
trial has here (studies.spec.memory's estimate against the server's limits)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from studies.datasets import dataset_family
from studies.limits import StudyLimits
from studies.sizing import format_bytes, model_fields, shape_problems
from studies.spec.fail import Fail
from studies.spec.memory import memory_budget, worst_trial_memory
from studies.spec.names import (
    _BACKBONE_FAMILY,
    _RESERVED_MODEL_FIELDS,
    DATASET_TASK_FIELDS,
    MODEL_CONFIG_FIELDS,
)

if TYPE_CHECKING:
    from studies.spec.study import StudySpec

__all__ = ["model_shape_is_possible", "trial_fits_its_memory"]


def model_shape_is_possible(spec: StudySpec, fail: Fail) -> None:
    """The model the spec builds has a shape that exists: positive whole widths, depths, head counts and
    patches, heads that divide the width, patches that tile the dataset's images (`heads: 0` would reach a
    trial as a division by zero, a patch that does not tile as a failed build). How large it may be is
    trial_fits_its_memory's."""
    backbone = spec.model.backbone(spec.dataset)
    if _BACKBONE_FAMILY[backbone] != dataset_family(spec.dataset):
        return  # model_fits_dataset reports it
    known = {
        k: v
        for k, v in spec.model.overrides.items()
        if k in MODEL_CONFIG_FIELDS[backbone]
        and k not in _RESERVED_MODEL_FIELDS
        and k not in DATASET_TASK_FIELDS
    }
    _, fields = model_fields(spec.dataset, spec.model.preset, overrides=known)
    for field, problem in shape_problems(backbone, fields).items():
        if field in known:
            fail(("model", "overrides", field), "impossible_model_shape", problem, known[field])
        elif field == "heads" and "dim" in known:  # the override of the width meets the preset's heads
            fail(("model", "overrides", "dim"), "impossible_model_shape", problem, known["dim"])
        else:  # the preset's own shape on this dataset's inputs
            model = spec.model.preset or "the default model"
            fail(
                ("model", "preset") if spec.model.preset else ("model",),
                "impossible_model_shape",
                f"{model} on dataset '{spec.dataset}': {problem}",
                spec.model.preset,
            )


def trial_fits_its_memory(spec: StudySpec, limits: StudyLimits, fail: Fail) -> None:
    """The study's largest trial (studies.spec.memory: its model's parameters with their gradients and
    AdamW state, and the activations of one batch) fits the memory one trial has here, so a model that
    cannot fit is refused before any trial allocates it, naming the field to change, the estimate and
    the limit."""
    budget = memory_budget(spec, limits)
    estimate = worst_trial_memory(spec, device=budget.device)
    if estimate.memory.total_bytes <= budget.bytes:
        return
    memory = estimate.memory
    seeds = spec.resources.seeds_per_trial
    fewer_seeds = " or resources.seeds_per_trial" if memory.seeds > 1 else ""
    estimated = f"; the estimate counts {estimate.estimated}" if estimate.estimated else ""
    need = (
        f"the largest trial of this study ({estimate.method}) needs about {memory.describe()}, but a trial "
        f"here has {budget.describe()}{estimated}"
    )
    fits = estimate.largest_batch_size(budget.bytes)
    if fits >= 1:
        fail(
            ("budget", "batch_size"),
            "over_memory",
            f"{need}; budget.batch_size {fits:,} or less fits{fewer_seeds}",
            spec.budget.batch_size,
        )
        return
    at_one = format_bytes(estimate.at_batch_size(1).total_bytes)
    # The overrides that grow a model (a smaller patch grows it too, but is no fix to suggest lowering).
    shape = [f for f in ("dim", "depth", "mlp_ratio") if f in spec.model.overrides]
    fix = f"lower {' or '.join(f'model.overrides.{f}' for f in shape)}" if shape else "choose a smaller model"
    if memory.seeds > 1:
        fix += f" or resources.seeds_per_trial (now {seeds})"
    if budget.device == "gpu" and spec.resources.gpu != "auto" and spec.resources.gpu < 1:
        fix += " or raise resources.gpu"
    loc: tuple[str, ...]
    if shape:
        loc, value = ("model", "overrides", shape[0]), spec.model.overrides[shape[0]]
    else:
        loc, value = (("model", "preset"), spec.model.preset) if spec.model.preset else (("model",), None)
    fail(loc, "over_memory", f"{need}; even at batch size 1 it needs {at_one}: {fix}", value)
