"""The spec rule a plugin's norm layers add: a layer torch.func cannot stack trains one seed per trial."""

from __future__ import annotations

from typing import TYPE_CHECKING

from studies.spec.fail import Fail

if TYPE_CHECKING:
    from studies.spec.study import StudySpec

__all__ = ["plugin_layers_stack"]


def plugin_layers_stack(spec: StudySpec, fail: Fail) -> None:
    """resources.seeds_per_trial above 1 needs every method's norm layer to stack under torch.func; with
    "auto" the study falls back to one seed per trial on its own (workers.driver)."""
    requested = spec.resources.seeds_per_trial
    unstackable = spec.unstackable_methods()
    if requested == "auto" or int(requested) <= 1 or not unstackable:
        return
    fail(
        ("resources", "seeds_per_trial"),
        "layer_not_stackable",
        f"the norm layer of {', '.join(unstackable)} cannot be stacked with torch.func (its plugin says so, or "
        "failed that check), so its seeds train one per trial: set resources.seeds_per_trial to 1 or auto",
        requested,
    )
