"""scripts/paper_costs.py: beside each paper-size study's fixed-design GPU-hours, a spec with a `sequential:`
block gets its expected and maximum GPU-hours, from the seeds `normlab plan` predicts and the cost model's
price per seed; a fixed-seed spec gets "–"; and --check fails when docs/paper_costs.md is stale."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from studies.catalog import load_catalog_spec
from studies.catalog.cost import final_trial_hours, predicted_gpu_cost, tune_phase_hours
from studies.planning import History, plan_study
from studies.spec import StudySpec

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "paper_costs.py"
CLAIM = "cifar10_c_robustness"  # two methods on the measured configuration: a quick simulation
DESIGN = {"effect": 0.01, "first_seeds": 2, "seeds_per_look": 2, "max_seeds": 6}


def _script():
    spec = importlib.util.spec_from_file_location("paper_costs", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _sequential(claim: str = CLAIM, **design: object) -> StudySpec:
    """The claim's paper spec with a sequential design, as an author would write it: the design derives
    the seeds (and the tune seed after them), and a sequential spec names no claim (the spec rules)."""
    data = load_catalog_spec(claim, "paper").model_dump(mode="json")
    for derived in ("seeds", "tune_seeds", "claim"):
        data.pop(derived)
    return StudySpec.model_validate({**data, "sequential": design or DESIGN})


def _cells(row: str) -> list[str]:
    return [cell.strip() for cell in row.strip("|").split("|")]


def test_a_sequential_spec_gets_expected_figures_no_larger_than_its_maximum():
    figures = _script().sequential_figures(_sequential())
    assert figures.max_seeds == 6
    assert figures.expected_seeds is not None and figures.expected_hours is not None
    for seeds, hours in zip(figures.expected_seeds, figures.expected_hours, strict=True):
        assert 2 <= seeds <= figures.max_seeds
        assert 0 < hours <= figures.max_hours
    # Stopping early saves more when no method differs: futility closes the comparisons sooner.
    effect, null = figures.expected_hours
    assert null < effect


def test_the_maximum_is_every_method_on_max_seeds_at_the_cost_models_price_per_seed():
    spec = _sequential()
    per_seed = final_trial_hours(spec)
    figures = _script().sequential_figures(spec)
    assert figures.max_hours == pytest.approx(tune_phase_hours(spec) + 6 * sum(per_seed.values()))
    # The spec lists the design's maximum as its seeds, so its fixed `with ASHA` column is the same figure.
    assert figures.max_hours == pytest.approx(predicted_gpu_cost(spec).hours_with_asha)


def test_the_expected_seeds_are_the_ones_normlab_plan_prints():
    spec = _sequential()
    plan = plan_study(spec, history=History()).sequential
    scenarios = {s.name: s for s in plan.scenarios}
    figures = _script().sequential_figures(spec)
    assert figures.expected_seeds == (
        scenarios["effect"].expected.seeds_per_method,
        scenarios["no_effect"].expected.seeds_per_method,
    )
    per_seed = final_trial_hours(spec)
    priced = tune_phase_hours(spec) + sum(
        n * per_seed[m] for m, n in scenarios["effect"].seeds_by_method.items()
    )
    assert figures.expected_hours[0] == pytest.approx(priced)
    assert "prior" in figures.basis and "random seed" in figures.basis


def test_a_margin_design_is_simulated_level_and_at_its_margin():
    figures = _script().sequential_figures(
        _sequential(test="non_inferiority", margin=0.01, first_seeds=2, seeds_per_look=2, max_seeds=6)
    )
    assert figures.test == "non-inferiority" and figures.difference == "margin 0.01"
    assert figures.expected_hours is not None
    assert all(hours <= figures.max_hours for hours in figures.expected_hours)


def test_a_metric_without_a_prior_spread_gets_a_maximum_but_no_expected_figures():
    figures = _script().sequential_figures(_sequential("california_housing_no_gain", **DESIGN))
    assert figures.max_seeds == 6 and figures.expected_seeds is None and figures.expected_hours is None
    assert figures.max_hours is None  # and its backbone was never timed on a GPU
    assert "no prior for rmse" in figures.basis


def test_a_fixed_seed_spec_gets_a_dash_in_both_sequential_columns():
    script = _script()
    spec = load_catalog_spec(CLAIM, "paper")
    assert script.sequential_figures(spec) is None
    cells = _cells(script.cost_row(CLAIM, spec, None))
    assert cells[5:7] == ["–", "–"]
    assert cells[3] != "–"  # its fixed figures are there


def test_the_document_lists_a_sequential_study_in_both_tables():
    script = _script()
    fixed = load_catalog_spec("cifar10_c_robustness", "paper")
    costs, seeds = script.render([(CLAIM, _sequential()), ("cifar10_c_robustness", fixed)]).split(
        "## Sequential"
    )
    figures = script.sequential_figures(_sequential())
    sequential_row, fixed_row = (_cells(line) for line in costs.splitlines() if line.startswith("| `"))
    effect, null = figures.expected_hours
    assert sequential_row[5:7] == [f"{effect:,.1f} / {null:,.1f}", f"{figures.max_hours:,.1f}"]
    assert fixed_row[5:7] == ["–", "–"]
    (row,) = (_cells(line) for line in seeds.splitlines() if line.startswith("| `"))
    low, high = figures.expected_seeds
    assert row[:5] == [f"`{CLAIM}`", "superiority, effect 0.01", "2, 4, 6", f"{low:.1f} / {high:.1f}", "6"]


def test_the_document_says_so_when_no_study_is_sequential():
    text = _script().render([(CLAIM, load_catalog_spec(CLAIM, "paper"))])
    assert "No paper-size spec has a `sequential:` block yet." in text


def test_the_figures_are_the_same_on_every_run():
    from studies.planning.simulate import _simulate

    script = _script()
    first = script.render([(CLAIM, _sequential())])
    _simulate.cache_clear()  # simulate afresh: the seeded simulation, not its cache, must repeat
    assert script.render([(CLAIM, _sequential())]) == first


def test_check_passes_on_the_committed_document_and_fails_on_a_stale_or_missing_one(
    tmp_path, monkeypatch, capsys
):
    script = _script()
    assert script.main(["--check"]) == 0, "run python scripts/paper_costs.py"
    stale = tmp_path / "paper_costs.md"
    monkeypatch.setattr(script, "OUTPUT", stale)
    assert script.main(["--check"]) == 1  # missing
    stale.write_text(script.render() + "a line the script does not write\n", encoding="utf-8")
    assert script.main(["--check"]) == 1
    assert "run python scripts/paper_costs.py" in capsys.readouterr().err
    assert script.main([]) == 0 and script.main(["--check"]) == 0
