"""The spec rule of a sequential design: it compares methods of a compare study, owns the seeds, serves
only a claim its looks can answer, and states its differences in the metric's unit."""

from __future__ import annotations

from typing import TYPE_CHECKING

from studies.datasets import DATASET_METRICS
from studies.spec.fail import Fail

if TYPE_CHECKING:
    from studies.spec.study import StudySpec

__all__ = ["sequential_design_fits_the_study"]


def _pairs_fit_the_methods(spec: StudySpec, fail: Fail) -> None:
    """Each extra pair names two different methods of the study, neither pair repeated (in either order),
    and none is a comparison with the reference, which every method has already."""
    assert spec.sequential is not None
    seen: set[frozenset[str]] = set()
    for index, (method, against) in enumerate(spec.sequential.pairs):
        where = ("sequential", "pairs", index)
        unknown = [name for name in (method, against) if name not in spec.methods]
        if unknown:
            fail(
                where,
                "pair_not_a_method",
                f"pair [{method}, {against}] names {', '.join(unknown)}, not among methods {spec.methods}: "
                "a pair compares two of the study's methods",
                [method, against],
            )
        elif method == against:
            fail(
                where,
                "pair_with_itself",
                f"pair [{method}, {against}] compares a method with itself",
                [method, against],
            )
        elif spec.reference in (method, against):
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
    _pairs_fit_the_methods(spec, fail)
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
