"""Write docs/paper_costs.md: the predicted GPU-hours of every paper-size catalog study.

    python scripts/paper_costs.py            # rewrites docs/paper_costs.md
    python scripts/paper_costs.py --check    # exits 1 when the file is out of date (the tests run this)

The figures come from studies.catalog.cost: step rates measured on an H200 (BENCHMARKS.md), extrapolated
where the study's methods, image size or depth differ, and no figure where nothing was measured. A spec
with a `sequential:` block also gets its expected and maximum GPU-hours: the seeds come from the planner
(studies.planning.plan_study, the figures `normlab plan` prints for an empty store), the hours per seed
from studies.catalog.cost, so they stand beside the fixed columns at the same eager, one-trial price.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import NamedTuple

from studies.catalog import claim_ids, load_catalog_spec, spec_path, study_claim
from studies.catalog.cost import final_trial_hours, predicted_gpu_cost, tune_phase_hours
from studies.planning import History, plan_study
from studies.planning.simulate import RANDOM_SEED
from studies.planning.spread import PRIOR_SD
from studies.spec import StudySpec

OUTPUT = Path(__file__).resolve().parents[1] / "docs" / "paper_costs.md"

# The planner's scenario names, per test: the truth the design is powered for, then its null (the truth
# under which a decision is a type-I error).
_SCENARIOS = {
    "superiority": ("effect", "no_effect"),
    "non_inferiority": ("no_effect", "at_margin"),
    "equivalence": ("no_effect", "at_margin"),
}


# A NamedTuple, not a dataclass: the tests load this script by path, outside sys.modules, where a dataclass
# with postponed annotations cannot resolve its module.
class SequentialFigures(NamedTuple):
    """A sequential design's seeds as the planner predicts them, priced at the cost model's eager rates."""

    test: str
    difference: str  # "effect 0.01" or "margin 0.005", in the metric's unit
    looks: list[int]  # cumulative seeds per method at each look
    expected_seeds: tuple[float, float] | None  # mean final seeds per method: (effect, null)
    max_seeds: float  # final seeds per method when no comparison stops early
    expected_hours: tuple[float, float] | None  # GPU-hours: (effect, null)
    max_hours: float | None
    basis: str  # how the planner got the expected seeds (the spread included), or why it has none


def _design_hours(spec: StudySpec, seeds: dict[str, float]) -> float | None:
    """GPU-hours of the tune phase (at ASHA's rungs) plus `seeds[a]` final seeds of each arm a (a method,
    or one point of a grid method, which costs its share of the method's seed)."""
    per_seed, tune = final_trial_hours(spec), tune_phase_hours(spec)
    if per_seed is None or tune is None:
        return None
    per_arm = dict(per_seed)  # a grid method named whole: every point on each seed
    if spec.kind == "grid":
        per_arm.update(
            (spec.arm_of(m, point.label), per_seed[m] / len(spec.grid_points(m)))
            for m in spec.methods
            for point in spec.grid_points(m)
        )
    return tune + sum(n * per_arm[arm] for arm, n in seeds.items())


def sequential_figures(spec: StudySpec) -> SequentialFigures | None:
    """The expected and maximum seeds and GPU-hours of `spec`'s sequential design; None for fixed seeds.

    The planner is given an empty store, as this script has none: the spread is its stated prior."""
    if spec.sequential is None:
        return None
    plan = plan_study(spec, history=History())
    sequential = plan.sequential
    assert sequential is not None, "the planner plans every sequential design"
    scenarios = {s.name: s for s in sequential.scenarios}
    names = _SCENARIOS[sequential.test]
    expected_seeds = expected_hours = None
    if all(name in scenarios for name in names):
        chosen = [scenarios[name] for name in names]
        expected_seeds = (chosen[0].expected.seeds_per_method, chosen[1].expected.seeds_per_method)
        hours = [_design_hours(spec, s.seeds_by_method) for s in chosen]
        if hours[0] is not None and hours[1] is not None:
            expected_hours = (hours[0], hours[1])
    max_seeds = sequential.maximum.seeds_per_method
    difference = (
        f"effect {sequential.effect:g}" if sequential.effect is not None else f"margin {sequential.margin:g}"
    )
    return SequentialFigures(
        test=sequential.test.replace("_", "-"),
        difference=difference,
        looks=sequential.looks,
        expected_seeds=expected_seeds,
        max_seeds=max_seeds,
        expected_hours=expected_hours,
        max_hours=_design_hours(spec, dict.fromkeys(spec.methods, max_seeds)),
        basis=sequential.reason,
    )


def _hours(value: float | None) -> str:
    return "–" if value is None else f"{value:,.1f}"


def _pair(values: tuple[float, float] | None) -> str:
    return "–" if values is None else f"{values[0]:,.1f} / {values[1]:,.1f}"


def paper_studies() -> Iterator[tuple[str, StudySpec]]:
    """(claim, spec) of every paper-size study, once per study (a shared study under its host claim)."""
    for claim in claim_ids():
        if study_claim(claim, "paper") == claim and spec_path(claim, "paper").exists():
            yield claim, load_catalog_spec(claim, "paper")


def cost_row(claim: str, spec: StudySpec, figures: SequentialFigures | None) -> str:
    cost = predicted_gpu_cost(spec)
    measured = "yes" if cost.measured else ("extrapolated" if cost.hours_no_stopping is not None else "no")
    expected = _pair(figures.expected_hours) if figures else "–"
    maximum = _hours(figures.max_hours) if figures else "–"
    return (
        f"| `{claim}` | {spec.dataset} | {spec.planned_trials()} | {_hours(cost.hours_no_stopping)} | "
        f"{_hours(cost.hours_with_asha)} | {expected} | {maximum} | {measured} | {cost.basis[0]} |"
    )


def sequential_row(claim: str, figures: SequentialFigures) -> str:
    looks = ", ".join(str(n) for n in figures.looks)
    return (
        f"| `{claim}` | {figures.test}, {figures.difference} | {looks} | "
        f"{_pair(figures.expected_seeds)} | {figures.max_seeds:g} | {figures.basis} |"
    )


_INTRO = [
    "# Paper-size catalog studies: predicted GPU-hours",
    "",
    "Written by `scripts/paper_costs.py` from `studies/catalog/cost.py`. One configuration was measured",
    "(ViT-Lite paper size, 32 x 32 inputs, batch 128, bf16, one eager trial on an NVIDIA H200; see",
    "BENCHMARKS.md); every other figure is extrapolated from it, and the `measured` column says which.",
    "Training samples only, one trial at a time (packing several trials on a GPU, CUDA graphs or seed",
    "batching shorten these several-fold; see BENCHMARKS.md). Claims that share a study are listed once.",
    "",
    'The `sequential` columns are for specs with a `sequential:` block and read "–" for fixed seeds. A',
    "sequential spec's `trials` and fixed columns count its maximum, every method on `max_seeds`. Its",
    "sequential figures price the tune phase at ASHA's rungs, as the `with ASHA` column does, plus the final",
    "seeds the design trains, at the same per-seed rates, so the row's `measured` label holds for them too",
    "(its max GPU-hours equal its `with ASHA` figure). The seeds are predicted, never measured: they are",
    "what `normlab plan` prints for an empty store (`studies.planning.plan_study`), SequentialMonitor run",
    f"on simulated studies (random seed {RANDOM_SEED}) under two truths. `effect` is the truth the design is",
    "powered for: superiority, every method better than the reference by the spec's `sequential.effect`;",
    "non-inferiority and equivalence, level with it. `null` is the truth under which a decision is a",
    "type-I error: superiority, no difference; the others, a difference at `sequential.margin`. The effect",
    "and margin are what the spec states. The seed-to-seed spread of paired differences is the planner's",
    f"stated prior, sd {PRIOR_SD:g} (one accuracy point), not a measurement: the planner takes a measured",
    "spread only from an earlier study of the same dataset and model in the store, which this script does",
    "not open, and does not read the cpu-tier reports under reports/ (a smaller model in any case). Other",
    "metrics than accuracy have no prior, so their designs get a maximum but no expected figures.",
    "",
]


def render(studies: Iterable[tuple[str, StudySpec]] | None = None) -> str:
    rows = [
        (claim, spec, sequential_figures(spec))
        for claim, spec in (paper_studies() if studies is None else studies)
    ]
    lines = [
        *_INTRO,
        "| claim | dataset | trials | GPU-hours, no early stopping | GPU-hours with ASHA | "
        "sequential: expected GPU-hours (effect / null) | sequential: max GPU-hours | measured | basis |",
        "|---|---|---:|---:|---:|---:|---:|---|---|",
        *(cost_row(claim, spec, figures) for claim, spec, figures in rows),
        "",
        "## Sequential designs: the seeds behind the figures",
        "",
    ]
    sequential = [(claim, figures) for claim, _, figures in rows if figures is not None]
    if not sequential:
        lines.append("No paper-size spec has a `sequential:` block yet.")
    else:
        lines += [
            "| claim | test | looks (seeds per method) | expected seeds per method "
            "(effect / null) | max seeds per method | basis |",
            "|---|---|---|---:|---:|---|",
            *(sequential_row(claim, figures) for claim, figures in sequential),
        ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="fail when docs/paper_costs.md is out of date")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        if not OUTPUT.exists() or OUTPUT.read_text(encoding="utf-8") != text:
            print(f"{OUTPUT} is out of date: run python scripts/paper_costs.py", file=sys.stderr)
            return 1
        return 0
    OUTPUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUTPUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
