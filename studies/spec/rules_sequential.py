"""The spec rule of a sequential design: it compares methods of a compare study, owns the seeds, is not
judged by a claim's fixed-seed check, and states its differences in the metric's unit."""

from __future__ import annotations

from typing import TYPE_CHECKING

from studies.datasets import DATASET_METRICS
from studies.spec.fail import Fail

if TYPE_CHECKING:
    from studies.spec.study import StudySpec

__all__ = ["sequential_design_fits_the_study"]


def sequential_design_fits_the_study(spec: StudySpec, fail: Fail) -> None:
    """A sequential design compares methods (kind: compare), owns the seeds (0 to max_seeds - 1, so the looks
    take them in order and none is trained twice), and states its differences in the metric's unit."""
    design = spec.sequential
    if design is None:
        return
    if spec.kind == "grid":
        fail(
            ("sequential",),
            "not_for_grid",
            "sequential applies to kind: compare, whose final phase compares each method with the "
            "reference; kind: grid runs every point on every seed: remove sequential and list the seeds",
            spec.kind,
        )
    if spec.seeds != design.seed_ids():
        fail(
            ("seeds",),
            "seeds_with_sequential",
            f"seeds {spec.seeds} disagree with sequential, whose seeds are derived: 0 to "
            f"{design.max_seeds - 1} (max_seeds {design.max_seeds}), taken in order look by look so none "
            "is trained twice; remove seeds and size the design with first_seeds, seeds_per_look and "
            "max_seeds",
            spec.seeds,
        )
    if len(spec.methods) < 2:
        fail(
            ("sequential",),
            "sequential_needs_a_comparison",
            f"sequential decides comparisons with the reference, and methods {spec.methods} has none: add "
            "the methods to compare, or remove sequential and list the seeds",
            spec.methods,
        )
    if spec.claim is not None:
        # A claim's check computes fixed-design statistics over the seeds it finds; after looks that
        # stopped arms early those would overstate the evidence. The design's own decisions are the test.
        fail(
            ("sequential",),
            "claim_with_sequential",
            f"claim {spec.claim!r} is judged by its check's fixed-seed statistics, which a sequential "
            "design's early stops would bias: remove claim (the report and /results give the design's "
            "own decisions, repeated confidence intervals and stage-wise p-values), or remove sequential "
            "and list the seeds",
            spec.claim,
        )
    metric = DATASET_METRICS[spec.dataset][0]
    for field, value in (("effect", design.effect), ("margin", design.margin)):
        if value is not None and metric == "accuracy" and value >= 1.0:
            hint = f"; write {value / 100:.6g}" if value <= 100.0 else ""
            fail(
                ("sequential", field),
                "difference_unit",
                f"sequential.{field} is in accuracy's unit, a fraction, so one accuracy point is 0.01 and "
                f"{value:g} is beyond any difference two accuracies can have{hint}",
                value,
            )
