"""The plan's memory line: the study's largest trial as the submission checks it (studies.spec.memory), on
the device it would train on, against what one trial may use there when the server's limits are known."""

from __future__ import annotations

from studies.limits import StudyLimits
from studies.planning.model import MemoryPlan
from studies.planning.wall import Cluster, trains_on_gpu
from studies.spec import StudySpec
from studies.spec.memory import measured_backbone, memory_budget, worst_trial_memory

__all__ = ["memory_plan"]

_COUNTED = (
    "counted from the models: float32 weights, gradients and AdamW's two moments (16 bytes a parameter), "
    "and the activations one training batch keeps for its backward pass (or an evaluation batch, where "
    "larger), in float32: an upper bound; the dataset and the framework are not counted"
)

_MEASURED = (
    "16 bytes a parameter (float32 weights, gradients and AdamW's two moments) and the float32 activations "
    "a training batch keeps for its backward pass, as the plugin's check measured them (or an evaluation "
    "batch's logits, where larger); the dataset and the framework are not counted"
)


def memory_plan(spec: StudySpec, *, cluster: Cluster, limits: StudyLimits | None) -> MemoryPlan:
    """The largest trial's memory; with `limits`, sized where the submission sizes it and set against it,
    else on the device the cluster gives it (resources.gpu, or "auto" on the cluster's GPUs)."""
    budget = memory_budget(spec, limits) if limits is not None else None
    device = budget.device if budget is not None else ("gpu" if trains_on_gpu(spec, cluster) else "cpu")
    estimate = worst_trial_memory(spec, device=device)
    memory = estimate.memory
    # A plugin's backbone: measured by its check, which estimate.estimated says, not counted from models.
    counted = _COUNTED if measured_backbone(estimate.backbone) is None else _MEASURED
    basis = [memory.describe(), counted]
    if estimate.estimated:
        basis.append(f"the estimate counts {estimate.estimated}")
    return MemoryPlan(
        bytes=memory.total_bytes,
        parameters=memory.parameters,
        seeds_per_trial=memory.seeds,
        batch_size=memory.batch_size,
        method=estimate.method,
        device=device,
        limit_bytes=budget.bytes if budget is not None else None,
        limit=budget.source if budget is not None else None,
        basis=basis,
    )
