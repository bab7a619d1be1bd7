"""The results table of a sequential study: its comparisons show the repeated confidence interval and the
stage-wise p-value its looks give, never a fixed-n t interval on seeds that stopped when the data looked
decided; a comparison no look analysed (a pooled table, another metric, another reference) is not tested;
the markdown and HTML say how each comparison stopped; fixed-seed tables are what they always were."""

from __future__ import annotations

import pytest

from studies.datasets import DATASET_METRICS
from studies.spec import StudySpec
from studies.stats import compare_by_seed
from studies.store import get_study, list_trials, session_scope, study_sequential
from studies.store.results import (
    ResultsSelection,
    planned_seeds,
    results_table,
    select_results,
    stored_looks,
    study_results,
)
from studies.store.results_evidence import RESULT_PHASES
from studies.tables import ResultsTable, build_results_table
from studies.tables.formatting import format_p
from studies.tables.sequential import NOT_TESTED, OPEN
from tests.factories import add_final_trials, add_study, digits_spec
from tests.studies.store.sequential_study import ACCURACY, SPEC, add_sequential_study


def _selection(engine, study_ids: list[str], metric: str | None = None) -> ResultsSelection:
    with session_scope(engine, readonly=True) as session:
        studies = [get_study(session, study_id=i) for i in study_ids]
        trials = [t for s in studies for t in list_trials(session, study_id=s.id, phase=list(RESULT_PHASES))]
        return select_results(
            studies[0].dataset, studies, trials, metric, looks=stored_looks(session, studies)
        )


def _summary(engine, study_id: str):
    with session_scope(engine, readonly=True) as session:
        return study_sequential(session, study=get_study(session, study_id=study_id))


def _rows(table: ResultsTable):
    return {row.method: row for row in table.rows}


def test_a_sequential_studys_comparison_shows_its_repeated_interval_not_the_fixed_n_one(engine):
    study_id, monitor = add_sequential_study(engine)
    rows = _rows(results_table(_selection(engine, [study_id])))
    outcome = {o.method: o for o in monitor.outcomes()}["dyt"]
    dyt = rows["dyt"]
    # DyT stopped at look 2 with 5 paired seeds: the interval its looks give, at 95 % over both
    # comparisons and every look.
    assert (dyt.diff_ci_low, dyt.diff_ci_high) == pytest.approx(outcome.interval)
    assert dyt.diff_mean == pytest.approx(outcome.estimate)
    assert dyt.p_value == pytest.approx(outcome.p_value)
    assert (
        dyt.test == "group-sequential: 97.5 % repeated CI, stage-wise p"
    )  # tested at 0.05 / 2 and dyt.paired is True
    assert dyt.verdict == "better"
    # The fixed-n paired t interval on the same 5 seeds ignores the looks and the other comparison: it is
    # narrower, strictly inside the repeated one.
    naive = compare_by_seed(
        dict(enumerate(ACCURACY["dyt"][:5])),
        dict(enumerate(ACCURACY["frozen_ln"])),
        higher_is_better=True,
        on_mismatch="intersect",
    )
    assert naive.paired and naive.diff_mean == pytest.approx(dyt.diff_mean)
    assert dyt.diff_ci_low < naive.diff_ci_low < naive.diff_ci_high < dyt.diff_ci_high
    # Nothing of the fixed-n test is left on the row.
    fixed_n = (dyt.p_adjusted, dyt.p_t, dyt.p_wilcoxon, dyt.effect_size, dyt.prob_improvement, dyt.mde_80)
    assert fixed_n == (None,) * 6
    assert dyt.warnings[0].startswith(
        f"sequential study {study_id}: stopped: differs from the reference at look 2; Δ is the mean paired "
        "difference of its 5 paired seeds at look 2"
    )
    assert not any(w.startswith("seed sets differ") for w in dyt.warnings)  # the looks paired them


def test_each_arm_is_planned_the_seeds_its_looks_gave_it(engine):
    study_id, _ = add_sequential_study(engine)
    rows = _rows(results_table(_selection(engine, [study_id])))
    assert {m: (r.n, r.n_planned, r.n_unfinished) for m, r in rows.items()} == {
        "frozen_ln": (9, 9, 0),
        "dyt": (5, 5, 0),  # stopped at look 2: its seeds 5 to 8 were never planned
        "autonorm": (9, 9, 0),
    }


def test_a_running_studys_open_comparisons_are_open_with_their_interval_and_no_p_value(engine):
    study_id, _ = add_sequential_study(engine, looks=1)
    summary = _summary(engine, study_id)
    rows = _rows(results_table(_selection(engine, [study_id])))
    for method in ("dyt", "autonorm"):
        outcome = next(o for o in summary["outcomes"] if o["method"] == method)
        row = rows[method]
        assert (row.verdict, row.p_value) == (OPEN, None)
        assert [row.diff_ci_low, row.diff_ci_high] == pytest.approx(outcome["interval"])
        # Look 2's seeds are training: each arm planned 5, has 3.
        assert (row.n, row.n_planned, row.n_unfinished) == (3, 5, 2)


@pytest.mark.parametrize(
    ("choose", "why"),
    [
        (lambda engine, seq, fixed: _selection(engine, [seq], "train_loss"), "tested the dataset's primary"),
        (lambda engine, seq, fixed: _selection(engine, [seq, fixed]), "pools the seeds of sequential study"),
    ],
    ids=["another-metric", "pooled"],
)
def test_a_comparison_its_looks_did_not_analyse_is_not_tested(engine, choose, why):
    sequential, _ = add_sequential_study(engine)
    fixed = add_study(engine, digits_spec(methods=["frozen_ln", "dyt", "autonorm"], seeds=[0, 1, 2])).id
    add_final_trials(engine, fixed, {m: ACCURACY[m][:3] for m in ("frozen_ln", "dyt", "autonorm")})
    table = results_table(choose(engine, sequential, fixed))
    for method in ("dyt", "autonorm"):
        row = _rows(table)[method]
        assert (row.verdict, row.test, row.p_value, row.p_adjusted) == (NOT_TESTED, None, None, None)
        assert (row.diff_ci_low, row.diff_ci_high) == (None, None)
        assert why in row.warnings[0]
    assert set(table.sequential) == {sequential}


def test_against_another_reference_the_comparisons_are_not_tested(engine):
    study_id, _ = add_sequential_study(engine)
    table = results_table(_selection(engine, [study_id]), reference="dyt")
    for method in ("frozen_ln", "autonorm"):
        row = _rows(table)[method]
        assert row.verdict == NOT_TESTED
        assert f"sequential study {study_id} compares with frozen_ln" in row.warnings[0]


def test_a_lower_is_better_metric_shows_the_difference_in_its_own_units(engine):
    # RMSE: the looks decide on an improvement (reference - method); the table shows method - reference.
    spec = {**SPEC, "dataset": "california_housing", "model": {"preset": "tabular_paper"}}
    rmse = {m: [1.0 - v for v in values] for m, values in ACCURACY.items()}
    assert DATASET_METRICS["california_housing"] == ("rmse", False)
    study_id, monitor = add_sequential_study(engine, spec, rmse)
    outcome = {o.method: o for o in monitor.outcomes()}["dyt"]
    dyt = _rows(results_table(_selection(engine, [study_id])))["dyt"]
    low, high = outcome.interval
    assert outcome.estimate > 0.0 and dyt.diff_mean == pytest.approx(-outcome.estimate)
    assert (dyt.diff_ci_low, dyt.diff_ci_high) == pytest.approx((-high, -low))
    assert dyt.verdict == "better"


def test_the_json_carries_the_studys_summary_and_the_text_says_how_each_comparison_stopped(engine):
    study_id, monitor = add_sequential_study(engine)
    dyt = {o.method: o for o in monitor.outcomes()}["dyt"]
    table = results_table(_selection(engine, [study_id]))
    assert table.to_json()["sequential"] == {study_id: _summary(engine, study_id)}
    design = "sequential: superiority, O'Brien-Fleming, looks at 3/5/7/9 seeds, alpha 0.05 family-wise"
    markdown, html = table.to_markdown(), table.to_html()
    assert f"**Sequential study {study_id}**: {design}" in markdown
    assert (
        "- dyt vs frozen_ln: stopped: differs from the reference at look 2 (5 paired seeds, tested at "
        "level 0.025); "
        f"Δ {dyt.estimate:+.4f}, 97.5 % repeated CI [{dyt.interval[0]:+.4f}, {dyt.interval[1]:+.4f}], "
        f"stage-wise p {format_p(dyt.p_value)}"
    ) in markdown
    # AutoNorm was decided at Holm's raised level, 0.05 once DyT was rejected: its repeated interval is at
    # that level too, so it agrees with the decision, and the line says at which level it was tested.
    assert (
        "- autonorm vs frozen_ln: stopped: differs from the reference at look 4 (9 paired seeds, tested at "
        "level 0.05)" in markdown
    )
    assert "- trials: 23 of the fixed design's 27 (4 saved, 15 %)" in markdown
    assert "Δ CI (see test)" in markdown and "group-sequential: 97.5 % repeated CI, stage-wise p" in markdown
    assert "<h2>Sequential design</h2>" in html and "O&#x27;Brien-Fleming, looks at 3/5/7/9 seeds" in html
    assert "dyt vs frozen_ln: stopped: differs from the reference at look 2" in html


def test_the_drivers_saved_results_of_a_sequential_study_are_its_results_page(engine):
    study_id, _ = add_sequential_study(engine)
    with session_scope(engine, readonly=True) as session:
        saved = study_results(session, study_id=study_id)
    assert saved is not None
    assert saved.table.to_json() == results_table(_selection(engine, [study_id])).to_json()


def test_a_fixed_seed_table_is_the_table_studies_tables_builds(engine):
    study_id = add_study(engine, digits_spec(methods=["frozen_ln", "dyt"], seeds=[0, 1, 2])).id
    add_final_trials(engine, study_id, {"frozen_ln": [0.90, 0.91, 0.89], "dyt": [0.92, 0.93, 0.915]})
    selection = _selection(engine, [study_id])
    spec = StudySpec.model_validate(selection.studies[0].spec)
    built = build_results_table(
        [r for r in _records(selection)],
        dataset="digits",
        metric="accuracy",
        higher_is_better=True,
        reference="frozen_ln",
        planned_seeds=planned_seeds([spec]),
        dataset_note=results_table(selection).dataset_note,
    )
    table = results_table(selection)
    assert table == built and "sequential" not in table.to_json()
    assert table.to_markdown() == built.to_markdown() and table.to_html() == built.to_html()


def _records(selection: ResultsSelection):
    from studies.store.results import trial_records

    return trial_records(selection.trials)


def test_a_sequential_spec_plans_the_seeds_given_to_each_arm_else_the_designs_maximum():
    spec = StudySpec.model_validate(SPEC)
    assert planned_seeds([spec]) == {method: list(range(9)) for method in spec.methods}
    given = planned_seeds([spec], seeds_per_arm=[{"frozen_ln": 9, "dyt": 5, "autonorm": 9}])
    assert given == {"frozen_ln": list(range(9)), "dyt": list(range(5)), "autonorm": list(range(9))}
