"""The freeze sweep judges AutoNorm-S only at the points where AutoNorm-S acted: a point whose freeze fired
in too few of its seeds ran as unfrozen AutoNorm, value for value, so it is `not tested` (never a
difference of exactly 0 [0, 0] against AutoNorm), it takes no part in the Holm adjustment, and the
summary counts it."""

from __future__ import annotations

import pytest

from studies.claims import StudyData, SweepCheck, TrialData
from studies.claims.verdicts import CONTRADICTED, NOT_TESTED, SUPPORTED
from studies.stats import adjust

NOISE = (0.004, -0.003, 0.002, -0.001, 0.0)
SWEEP = SweepCheck(focus={"eps_h": 0.1, "tau": 0.5})


def _history(froze: bool) -> tuple[dict[str, float], ...]:
    """What the training loop records: nothing frozen at the start; frozen after epoch 5, or never."""
    return (
        {"epoch": 0, "gates_frozen": 0, "freeze_epoch": -1},
        {"epoch": 10, "gates_frozen": int(froze), "freeze_epoch": 5 if froze else -1},
    )


def _sweep(points: dict[tuple[int, float], tuple[float, int]]) -> StudyData:
    """Unfrozen AutoNorm at 0.80 (tau 0.5) and AutoNorm-S at each (t_freeze, eps_h) point with its gain
    and the number of seeds (of five) whose freeze fired. A seed that did not freeze IS AutoNorm: same
    value."""
    trials = [
        TrialData("autonorm", s, "succeeded", 0.80 + w, group="tau=0.5", knobs={"tau": 0.5})
        for s, w in enumerate(NOISE)
    ]
    for (t_freeze, eps_h), (gain, fired) in points.items():
        for seed, wobble in enumerate(NOISE):
            froze = seed < fired
            value = 0.80 + wobble + (gain + NOISE[(seed + 1) % 5] if froze else 0.0)
            trials.append(
                TrialData(
                    "autonorm_s",
                    seed,
                    "succeeded",
                    value,
                    group=f"t_freeze={t_freeze},eps_h={eps_h},tau=0.5",
                    knobs={"t_freeze": t_freeze, "eps_h": eps_h, "tau": 0.5},
                    history=_history(froze),
                )
            )
    return StudyData("digits", "test_accuracy", True, "frozen_ln", tuple(trials))


def _finding(result, t_freeze: int, eps_h: float):
    (finding,) = [f for f in result.findings if f"t_freeze={t_freeze},eps_h={eps_h}," in f.label]
    return finding


def test_a_point_where_the_freeze_never_fired_is_not_tested_and_offers_no_difference():
    result = SWEEP.evaluate(_sweep({(5, 0.1): (0.05, 5), (20, 0.1): (0.05, 0), (20, 0.2): (0.05, 0)}))
    never = _finding(result, 20, 0.2)
    assert never.verdict == NOT_TESTED
    assert (never.measured, never.ci_low, never.ci_high, never.p_value) == (None, None, None, None)
    assert never.note.startswith("freeze did not fire: froze in 0 of 5 seeds, needs 4")
    assert _finding(result, 5, 0.1).verdict == SUPPORTED


def test_a_point_where_the_freeze_fired_in_too_few_seeds_is_not_tested_either():
    result = SWEEP.evaluate(_sweep({(5, 0.1): (0.05, 5), (10, 0.05): (0.05, 3), (10, 0.2): (0.05, 4)}))
    assert _finding(result, 10, 0.05).verdict == NOT_TESTED  # 3 of 5 froze: below 80 %
    assert "froze in seeds 0, 1, 2 (3 of 5), needs 4" in _finding(result, 10, 0.05).note
    assert _finding(result, 10, 0.2).verdict != NOT_TESTED  # 4 of 5: enough


def test_holm_adjusts_over_the_tested_points_only():
    result = SWEEP.evaluate(_sweep({(5, 0.1): (0.05, 5), (5, 0.2): (0.02, 5), (20, 0.2): (0.05, 0)}))
    tested = [f for f in result.findings if f.verdict != NOT_TESTED]
    assert len(tested) == 2
    assert [f.p_adjusted for f in tested] == pytest.approx(adjust([f.p_value for f in tested], "holm"))


def test_the_summary_counts_the_points_not_tested():
    result = SWEEP.evaluate(_sweep({(5, 0.1): (0.05, 5), (20, 0.05): (0.05, 1), (20, 0.2): (0.05, 0)}))
    assert "1 of 1 tested sweep points significantly better" in result.summary
    assert "2 of 3 points not tested (freeze did not fire)" in result.summary


def test_the_papers_setting_is_not_tested_where_its_freeze_did_not_fire():
    # the focus (eps_h 0.1 at every T_freeze) holds one point that never froze: tested only in part
    result = SWEEP.evaluate(_sweep({(5, 0.1): (0.05, 5), (20, 0.1): (0.05, 0)}))
    assert result.verdict == NOT_TESTED
    # a tested focus point that loses still refutes the claim
    result = SWEEP.evaluate(_sweep({(5, 0.1): (-0.05, 5), (20, 0.1): (0.05, 0)}))
    assert result.verdict == CONTRADICTED


def test_a_sweep_of_a_method_without_the_freeze_needs_no_freeze_record():
    data = _sweep({(5, 0.1): (0.05, 5)})
    renamed = tuple(
        TrialData("autonorm_plus", t.seed, t.status, t.value, group=t.group, knobs=t.knobs)
        if t.method == "autonorm_s"
        else t
        for t in data.trials
    )
    check = SweepCheck(method="autonorm_plus", focus={"eps_h": 0.1, "tau": 0.5})
    result = check.evaluate(StudyData("digits", "test_accuracy", True, "frozen_ln", renamed))
    assert result.verdict == SUPPORTED
