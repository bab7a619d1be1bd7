"""The tuning figures (studies.tables.render_tuning_svg): well-formed XML with one mark per datum: a bar per
knob and evaluator, a dot per scored tune trial and a cross per unscored one, a panel per swept knob with
a dot per grid trial; `tuning_figures` lists the ones the data allow."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from studies.tables.render_evidence_svg import standalone_svg
from studies.tables.render_tuning_svg import history_svg, importance_svg, response_svg, tuning_figures
from studies.tuning import TuningTrial, study_tuning
from tests.studies.tuning.synthetic import grid_trials, tune_trials
from tests.studies.tuning.test_build import COMPARE, SWEEP

DRAWS = {
    "eps_h": lambda rng: float(rng.uniform(0.05, 0.2)),
    "t_freeze": lambda rng: int(rng.integers(2, 9)),
}
TUNE = tune_trials(lambda k: 0.9 - 20 * (k["eps_h"] - 0.1) ** 2, DRAWS, 8)
TUNE[5] = TuningTrial("failed", "autonorm_s", 3, "failed", None, TUNE[5].knobs)
TUNED = study_tuning(COMPARE, TUNE, study_id="compare")
SWEPT = study_tuning(
    SWEEP,
    grid_trials(
        lambda k, seed: 0.9 - 20 * (k["eps_h"] - 0.1) ** 2 + seed / 100,
        {"t_freeze": [5, 10, 20], "eps_h": [0.05, 0.1, 0.2], "tau": [0.5]},
    ),
    study_id="sweep",
)
assert TUNED is not None and SWEPT is not None


def parse(svg: str) -> ET.Element:
    return ET.fromstring(standalone_svg(svg))


def by_class(root: ET.Element, css: str) -> list[ET.Element]:
    return [e for e in root.iter() if e.get("class") == css]


def test_the_importance_figure_has_a_bar_per_knob_and_evaluator_and_whiskers_where_fits_differ():
    (method,) = TUNED.methods
    root = parse(importance_svg(method, TUNED))
    bars = by_class(root, "importance-bar")
    assert sorted((b.get("data-knob"), b.get("data-evaluator")) for b in bars) == [
        ("eps_h", "fanova"),
        ("eps_h", "ped_anova"),
        ("t_freeze", "fanova"),
        ("t_freeze", "ped_anova"),
    ]
    # fANOVA's forest seeds give a range, PED-ANOVA's one fit none.
    assert 1 <= len(by_class(root, "importance-whisker")) <= 2
    assert "fANOVA" in "".join(root.itertext()) and "PED-ANOVA" in "".join(root.itertext())


def test_the_history_has_a_dot_per_scored_trial_a_cross_per_unscored_one_and_a_ring_on_the_best():
    (method,) = TUNED.methods
    root = parse(history_svg(method, TUNED))
    dots = by_class(root, "trial-point")
    assert [d.get("data-number") for d in dots] == ["0", "1", "2", "3", "4", "6", "7"]
    assert len(by_class(root, "no-value")) == 1
    (ring,) = by_class(root, "best-trial")
    best = method.history.best_number
    (best_dot,) = [d for d in dots if d.get("data-number") == str(best)]
    assert (ring.get("cx"), ring.get("cy")) == (best_dot.get("cx"), best_dot.get("cy"))
    (line,) = by_class(root, "best-so-far")
    ys = [float(p.split(",")[1]) for p in (line.get("points") or "").split()]
    assert ys == sorted(
        ys, reverse=True
    )  # higher is better: the best so far never goes down (SVG y grows down)


def test_the_response_figure_has_a_panel_per_swept_knob_and_a_dot_per_trial():
    (method,) = SWEPT.methods
    root = parse(response_svg(method, SWEPT))
    panels = by_class(root, "knob-panel")
    assert [p.get("data-knob") for p in panels] == ["t_freeze", "eps_h"]
    for panel in panels:
        assert len([e for e in panel.iter() if e.get("class") == "trial-point"]) == 27  # 9 points x 3 seeds
        assert len([e for e in panel.iter() if e.get("class") == "point"]) == 3  # the mean at each value
        assert len([e for e in panel.iter() if e.get("class") == "whisker"]) == 3
    labels = [t.text for t in by_class(root, "tick") if t.get("text-anchor") == "middle"]
    assert labels == ["5", "10", "20", "0.05", "0.1", "0.2"]


def test_the_figures_a_study_gets_depend_on_what_it_ran():
    assert [f.name for f in tuning_figures(TUNED)] == [
        "knob_importance_autonorm_s",
        "optimisation_history_autonorm_s",
    ]
    assert [f.name for f in tuning_figures(SWEPT)] == [
        "knob_importance_autonorm_s",
        "knob_response_autonorm_s",
    ]
    for figure in tuning_figures(TUNED) + tuning_figures(SWEPT):
        parse(figure.svg)
    caption = tuning_figures(TUNED)[0].caption
    assert "forest seeds" in caption  # the caption says what the spread is over


def test_a_method_without_importance_numbers_gets_no_importance_figure():
    tuning = study_tuning(COMPARE, TUNE[:2], study_id="early")
    assert tuning is not None
    assert [f.name for f in tuning_figures(tuning)] == ["optimisation_history_autonorm_s"]
