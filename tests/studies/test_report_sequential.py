"""A sequential study's outcomes reach a claim's check in the metric's own units: method minus reference,
so a lower-is-better metric's differences and intervals are turned back from the looks' "positive is
better" convention, and an equivalence claim is judged on the repeated interval."""

from __future__ import annotations

import pytest

from studies.claims import SUPPORTED, DifferenceCheck, StudyData, TrialData
from studies.report.sequential import looks_outcomes
from studies.sequential import SequentialMonitor
from studies.spec import StudySpec
from studies.store import sequential_summary

RMSE = {  # autonorm_s is 0.002 worse (higher RMSE) than frozen_ln on every seed, give or take
    "frozen_ln": {0: 0.550, 1: 0.553, 2: 0.549, 3: 0.551, 4: 0.552},
    "autonorm_s": {0: 0.552, 1: 0.5555, 2: 0.5508, 3: 0.553, 4: 0.5541},
}


@pytest.fixture
def summary():
    spec = StudySpec.model_validate(
        {
            "name": "california",
            "dataset": "california_housing",
            "methods": ["autonorm_s", "frozen_ln"],
            "method_search": {"autonorm_s": {"t_freeze": 8}},
            "sequential": {"test": "equivalence", "margin": 0.0275, "max_seeds": 5},
        }
    )
    monitor = SequentialMonitor(
        spec.sequential, methods=spec.methods, reference="frozen_ln", higher_is_better=False
    )
    first = {m: {s: v for s, v in values.items() if s < 3} for m, values in RMSE.items()}
    monitor.look(first)
    if monitor.open_arms():
        monitor.look(RMSE)
    return sequential_summary(spec, monitor.records, higher_is_better=False)


def test_a_lower_is_better_outcome_reads_as_method_minus_reference_in_metric_units(summary):
    outcome = looks_outcomes(summary)["autonorm_s"]
    assert outcome.estimate == pytest.approx(0.0018, abs=5e-4)  # higher RMSE: a positive difference
    assert outcome.interval_low < outcome.estimate < outcome.interval_high
    (stored,) = summary["outcomes"]
    assert stored["estimate"] == pytest.approx(-outcome.estimate)  # the looks' "positive is better"
    assert outcome.alpha == 0.05 and outcome.decision == "equivalent"


def test_the_equivalence_claim_is_supported_on_the_repeated_interval(summary):
    trials = tuple(
        TrialData(method=m, seed=s, status="succeeded", value=v)
        for m, values in RMSE.items()
        for s, v in values.items()
    )
    data = StudyData(
        "california_housing", "test_rmse", False, "frozen_ln", trials, sequential=looks_outcomes(summary)
    )
    result = DifferenceCheck(method="autonorm_s", expect="no_difference", relative_margin=0.05).evaluate(data)
    assert result.verdict == SUPPORTED
    assert "sequential design: stopped: equivalence shown" in result.findings[0].note
