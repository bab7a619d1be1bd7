"""A study's tuning views from its spec: tuned methods of a compare study get importance and history on
the validation objective; swept methods of a sweep get importance and a response per varied knob on the
test metric; a study with nothing tuned or swept has none."""

from __future__ import annotations

import json

from studies.spec import StudySpec
from studies.tuning import TUNING_PHASES, study_tuning
from tests.studies.tuning.synthetic import grid_trials, tune_trials

COMPARE = StudySpec.model_validate(
    {
        "name": "compare",
        "dataset": "digits",
        "methods": ["autonorm_s", "frozen_ln"],
        "num_samples": 10,
        "search": {"lr": 0.001},
        "method_search": {
            "autonorm_s": {
                "eps_h": {"type": "uniform", "low": 0.05, "high": 0.2},
                "t_freeze": {"type": "int", "low": 2, "high": 8},
            }
        },
        "budget": {"epochs": 10},
    }
)
SWEEP = StudySpec.model_validate(
    {
        "name": "sweep",
        "dataset": "digits",
        "kind": "grid",
        "methods": ["autonorm_s", "autonorm", "frozen_ln"],
        "method_search": {
            "autonorm_s": {
                "t_freeze": {"type": "grid", "values": [5, 10, 20]},
                "eps_h": {"type": "grid", "values": [0.05, 0.1, 0.2]},
                "tau": {"type": "grid", "values": [0.5]},
            },
            "autonorm": {"tau": {"type": "grid", "values": [0.5]}},
        },
        "budget": {"epochs": 30},
    }
)


def test_a_compare_study_shows_its_tuned_methods_on_the_validation_objective():
    trials = tune_trials(
        lambda k: 0.9 - (k["eps_h"] - 0.1) ** 2,
        {"eps_h": lambda rng: float(rng.uniform(0.05, 0.2)), "t_freeze": lambda rng: int(rng.integers(2, 9))},
        10,
    )
    tuning = study_tuning(COMPARE, trials, study_id="s1")
    assert tuning is not None
    assert (tuning.phase, tuning.objective, tuning.higher_is_better) == ("tune", "val_accuracy", True)
    (method,) = tuning.methods  # frozen_ln's knobs are all fixed: it is not tuned
    assert method.method == "autonorm_s" and method.response == ()
    assert method.history is not None and len(method.history.points) == 10
    assert set(method.importance.knobs) == {"eps_h", "t_freeze"}
    assert json.loads(json.dumps(tuning.to_json()))["methods"][0]["history"]["best_number"] is not None


def test_a_sweep_shows_its_swept_methods_with_a_response_per_varied_knob_on_the_test_metric():
    trials = grid_trials(
        lambda k, seed: 0.9 - (k["eps_h"] - 0.1) ** 2 + seed / 100,
        {"t_freeze": [5, 10, 20], "eps_h": [0.05, 0.1, 0.2], "tau": [0.5]},
    )
    tuning = study_tuning(SWEEP, trials, study_id="s2")
    assert tuning is not None
    assert (tuning.phase, tuning.objective) == ("grid", "test_accuracy")
    (method,) = tuning.methods  # autonorm runs one tau, frozen_ln no grid: nothing swept
    assert method.history is None
    assert [r.knob for r in method.response] == ["t_freeze", "eps_h"]
    assert method.importance.omitted == {"tau": "one value in the spec: nothing to attribute to it"}
    assert method.importance.evaluators[0].knobs[0].knob == "eps_h"


def test_a_study_with_no_trials_yet_shows_why_each_method_has_no_importance():
    tuning = study_tuning(COMPARE, [], study_id="s3")
    assert tuning is not None
    (method,) = tuning.methods
    assert method.importance.reason is not None and method.importance.reason.startswith(
        "not enough tune trials: 0"
    )
    assert method.history is not None and method.history.points == ()


def test_a_study_that_neither_tunes_nor_sweeps_has_no_tuning_views():
    plain = StudySpec.model_validate(
        {"name": "plain", "dataset": "digits", "methods": ["frozen_ln", "autonorm"]}
    )
    assert study_tuning(plain, [], study_id="s4") is None
    assert TUNING_PHASES == {"compare": "tune", "grid": "grid"}
