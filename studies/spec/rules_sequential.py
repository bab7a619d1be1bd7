"""The spec rule of a sequential design: it compares methods of a compare study (or the grid points its
pairs name), owns the seeds, serves only a claim its looks can answer, and states its differences in the
metric's unit."""

from __future__ import annotations

from typing import TYPE_CHECKING

from studies.datasets import DATASET_METRICS
from studies.spec.fail import Fail

if TYPE_CHECKING:
    from studies.spec.study import StudySpec

__all__ = ["sequential_design_fits_the_study"]


def _pairs_fit_the_arms(spec: StudySpec, fail: Fail) -> None:
    """Each extra pair names two different arms of the study (its methods; in a grid, its points as results
    rows name them), neither pair repeated (in either order), and none is a comparison with the reference,
    which every method of a compare study has already."""
    assert spec.sequential is not None
    arms = spec.sequential_arms
    seen: set[frozenset[str]] = set()
    for index, (method, against) in enumerate(spec.sequential.pairs):
        where = ("sequential", "pairs", index)
        unknown = [name for name in (method, against) if name not in arms]
        if unknown:
            what = "grid points" if spec.kind == "grid" else "methods"
            fail(
                where,
                "pair_not_a_method",
                f"pair [{method}, {against}] names {', '.join(unknown)}, not among the study's {what} "
                f"{arms}: a pair compares two of them",
                [method, against],
            )
        elif method == against:
            fail(
                where,
                "pair_with_itself",
                f"pair [{method}, {against}] compares a method with itself",
                [method, against],
            )
        elif spec.sequential_reference in (method, against):
            fail(
                where,
                "pair_with_reference",
                f"pair [{method}, {against}] includes the reference {spec.reference}, which every method is "
                "compared with already: remove the pair",
                [method, against],
            )
        elif frozenset((method, against)) in seen:
            fail(
                where,
                "pair_repeated",
                f"pair [{method}, {against}] is listed twice (in some order)",
                [method, against],
            )
        seen.add(frozenset((method, against)))


def sequential_design_fits_the_study(spec: StudySpec, fail: Fail) -> None:
    """A sequential design compares methods (kind: compare) or named grid points (kind: grid), owns the
    seeds (0 to max_seeds - 1, so the looks take them in order and none is trained twice), and states its
    differences in the metric's unit."""
    design = spec.sequential
    if design is None:
        return
    if spec.kind == "grid" and not design.pairs:
        fail(
            ("sequential", "pairs"),
            "grid_needs_pairs",
            "a grid has no single reference point, so a sequential grid compares only the points its pairs "
            f"name: add pairs of [point, against] from {spec.sequential_arms}, or remove sequential and list "
            "the seeds",
            [],
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
    if spec.kind != "grid" and len(spec.methods) < 2:
        fail(
            ("sequential",),
            "sequential_needs_a_comparison",
            f"sequential decides comparisons with the reference, and methods {spec.methods} has none: add "
            "the methods to compare, or remove sequential and list the seeds",
            spec.methods,
        )
    _pairs_fit_the_arms(spec, fail)
    problem = spec.sequential_claim_problem()
    if problem is not None:
        fail(
            ("sequential",),
            "claim_with_sequential",
            f"claim {spec.claim!r} cannot be judged on a sequential design's looks: {problem}; a fixed-seed "
            "test of the seeds the looks chose would overstate the evidence. Remove claim (the report and "
            "/results give the design's own decisions, repeated confidence intervals and stage-wise "
            "p-values), or remove sequential and list the seeds",
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
