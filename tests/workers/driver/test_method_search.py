"""A compare study as one Tune experiment: each method keeps its own search, sampler seed and ASHA rungs,
and a method's final trials run its best tuned knobs on every seed once its own tuning has ended."""

from __future__ import annotations

import math
from types import SimpleNamespace

import optuna
import pytest
from ray import tune
from ray.tune.schedulers import ASHAScheduler, TrialScheduler
from ray.tune.search import Searcher
from ray.tune.search.optuna import OptunaSearch

from studies.spec import Fixed, IntRange, LogUniform
from workers.driver.final_schedule import FixedFinals
from workers.driver.method_search import MethodScheduler, StudySearch
from workers.driver.search_space import to_tune_space

LR = LogUniform(type="loguniform", low=1e-4, high=1e-2)
# The driver's spaces (Optuna distributions, constants for fixed knobs) ...
SPACES = {
    "autonorm_s": to_tune_space(
        {"lr": LR, "t_freeze": IntRange(type="int", low=1, high=3), "tau": Fixed(type="fixed", value=0.5)}
    ),
    "dyt": to_tune_space({"lr": LR}),
}
# ... and the same spaces as Ray Tune domains, as one Tune experiment per method searched them.
TUNE_DOMAINS = {
    "autonorm_s": {"lr": tune.loguniform(1e-4, 1e-2), "t_freeze": tune.randint(1, 4), "tau": 0.5},
    "dyt": {"lr": tune.loguniform(1e-4, 1e-2)},
}
SEED = 3
TUNE = {"phase": "tune", "seed": SEED, "eval_split": "val"}
FINALS = [{"phase": "final", "seed": s, "eval_split": "test"} for s in (0, 1)]


def _search(num_samples=None, *, mode="max", fixed=None) -> StudySearch:
    num_samples = num_samples or {"autonorm_s": 2, "dyt": 1}
    fixed = fixed or {}
    return StudySearch(
        methods=[*num_samples, *fixed],
        spaces={m: SPACES[m] for m in num_samples},
        num_samples=num_samples,
        fixed_knobs=fixed,
        tune_config=TUNE,
        finals=FixedFinals(FINALS, [*num_samples, *fixed]),
        metric="objective",
        mode=mode,
        make_sampler=lambda: optuna.samplers.TPESampler(seed=SEED),
    )


def _one_experiment_per_method(method: str, trials: int) -> list[dict]:
    """What one Tune experiment per method suggested: OptunaSearch over the method's param space."""
    search = OptunaSearch(sampler=optuna.samplers.TPESampler(seed=SEED))
    search.set_search_properties("objective", "max", {"method": method, "knobs": TUNE_DOMAINS[method]})
    return [search.suggest(f"{method}-{i}")["knobs"] for i in range(trials)]


def _end(search: StudySearch, trial_id: str, objective: float | None) -> None:
    result = None if objective is None else {"objective": objective, "training_iteration": 3}
    search.on_trial_complete(trial_id, result, error=objective is None)


def test_tuning_trials_come_method_by_method_on_the_tune_seed_with_the_fixed_knobs_added():
    search = _search()
    suggestions = [search.suggest(f"t{i}") for i in range(3)]
    assert [s["method"] for s in suggestions] == ["autonorm_s", "autonorm_s", "dyt"]
    assert all({**s, **TUNE} == s for s in suggestions)  # phase tune, the tune seed, the validation split
    assert all(s["knobs"]["tau"] == 0.5 for s in suggestions[:2])
    assert search.suggest("t3") is None  # nothing to suggest until a method's tuning has ended


def test_each_method_draws_what_its_own_seeded_experiment_drew():
    search = _search()
    autonorm = [search.suggest(f"a{i}")["knobs"] for i in range(2)]
    dyt = [search.suggest("d0")["knobs"]]
    assert [
        {k: v for k, v in knobs.items() if k != "tau"} for knobs in autonorm
    ] == _one_experiment_per_method("autonorm_s", 2)
    assert dyt == _one_experiment_per_method("dyt", 1)  # not shifted by the draws of autonorm_s


def test_a_methods_final_trials_run_its_best_knobs_on_every_seed_once_its_own_tuning_has_ended():
    search = _search()
    search.suggest("a0")
    a1, d0 = search.suggest("a1"), search.suggest("d0")
    search.on_trial_result("a0", {"objective": 0.9, "training_iteration": 1})
    _end(search, "a0", 0.3)  # the LAST reported objective counts, not the best epoch
    assert search.suggest("x") is None  # a1 still runs: autonorm_s's tuning has not ended
    _end(search, "a1", 0.6)
    finals = [search.suggest(f"f{i}") for i in range(2)]
    assert [(f["method"], f["phase"], f["seed"], f["eval_split"]) for f in finals] == [
        ("autonorm_s", "final", 0, "test"),
        ("autonorm_s", "final", 1, "test"),
    ]
    assert all(f["knobs"] == a1["knobs"] for f in finals)
    assert search.suggest("x") is None  # dyt still tuning
    _end(search, "d0", 0.1)
    assert [search.suggest(f"g{i}")["knobs"] for i in range(2)] == [d0["knobs"]] * 2
    assert search.suggest("end") == Searcher.FINISHED
    assert search.total_trials == 3 + 2 * 2


def test_with_mode_min_the_lowest_last_objective_wins_and_a_tie_keeps_the_first():
    search = _search({"dyt": 3}, mode="min")
    trials = [search.suggest(f"d{i}") for i in range(3)]
    for i, value in enumerate([0.5, 0.2, 0.2]):
        _end(search, f"d{i}", value)
    assert search.best_knobs("dyt") == trials[1]["knobs"]


def test_an_errored_trial_counts_with_its_last_reported_objective_and_nan_never_counts():
    search = _search({"dyt": 2})
    trials = [search.suggest(f"d{i}") for i in range(2)]
    search.on_trial_result("d0", {"objective": 0.4, "training_iteration": 1})
    _end(search, "d0", None)  # errored after reporting 0.4
    _end(search, "d1", math.nan)
    assert search.best_knobs("dyt") == trials[0]["knobs"]


def test_a_method_none_of_whose_trials_reported_a_finite_objective_fails_naming_it():
    search = _search({"dyt": 1})
    search.suggest("d0")
    _end(search, "d0", math.inf)
    with pytest.raises(RuntimeError, match="no tuning trial of method dyt reported a finite objective"):
        search.suggest("next")


def test_a_method_without_searchable_knobs_runs_its_final_trials_without_waiting_for_any_tuning():
    search = _search({"dyt": 1}, fixed={"frozen_ln": {"lr": 5e-3}})
    assert search.suggest("t0")["phase"] == "tune"  # tuning first: finals fill the end of the study
    first, second = search.suggest("f0"), search.suggest("f1")  # dyt's tuning trial is still running
    assert (first["method"], first["phase"], first["knobs"]) == ("frozen_ln", "final", {"lr": 5e-3})
    assert [second["method"], second["seed"]] == ["frozen_ln", 1]
    assert search.suggest("f2") is None


def test_a_restored_search_goes_on_where_the_saved_one_stopped(tmp_path):
    search = _search({"dyt": 2})
    search.suggest("d0")
    _end(search, "d0", 0.4)
    search.save(str(tmp_path / "search.pkl"))
    restored = _search({"dyt": 2})
    restored.restore(str(tmp_path / "search.pkl"))
    last = restored.suggest("d1")
    assert last["phase"] == "tune" and restored.suggest("x") is None
    _end(restored, "d1", 0.1)
    assert [restored.suggest(f"f{i}")["phase"] for i in range(2)] == ["final", "final"]


def _trial(trial_id: str, method: str, phase: str = "tune") -> SimpleNamespace:
    return SimpleNamespace(trial_id=trial_id, config={"method": method, "phase": phase})


def _asha() -> ASHAScheduler:
    return ASHAScheduler(time_attr="epoch", max_t=4, grace_period=1, reduction_factor=2)


def _first_rung(scheduler: TrialScheduler, trials: list[tuple[str, str, str, float]]) -> dict[str, str]:
    """Each (trial id, method, phase, objective at epoch 1) in order -> the scheduler's decision for it."""
    scheduler.set_search_properties("objective", "max")
    decisions = {}
    for trial_id, method, phase, value in trials:
        trial = _trial(trial_id, method, phase)
        scheduler.on_trial_add(None, trial)
        decisions[trial_id] = scheduler.on_trial_result(None, trial, {"epoch": 1, "objective": value})
    return decisions


RUNG = [("a1", "autonorm_s", "tune", 0.9), ("d1", "dyt", "tune", 0.1), ("d2", "dyt", "tune", 0.05)]


def test_asha_per_method_never_stops_a_trial_against_another_methods_trials():
    decisions = _first_rung(MethodScheduler({"autonorm_s": _asha(), "dyt": _asha()}), RUNG)
    assert decisions["d1"] == TrialScheduler.CONTINUE  # first of its method at this rung
    assert decisions["d2"] == TrialScheduler.STOP  # below its own method's d1


def test_one_shared_asha_would_have_stopped_the_weaker_methods_first_trial():
    assert _first_rung(_asha(), [(t, m, p, v) for t, m, p, v in RUNG])["d1"] == TrialScheduler.STOP


def test_final_trials_are_never_stopped_early():
    decisions = _first_rung(
        MethodScheduler({"dyt": _asha()}),
        [("d1", "dyt", "tune", 0.9), ("f1", "dyt", "final", 0.01), ("f2", "dyt", "final", 0.001)],
    )
    assert decisions["f1"] == decisions["f2"] == TrialScheduler.CONTINUE


def test_the_method_scheduler_takes_the_experiments_metric_and_runs_trials_in_submission_order():
    scheduler = MethodScheduler({"dyt": _asha()})
    assert scheduler.set_search_properties("objective", "max")
    assert scheduler.metric == "objective"
    pending = SimpleNamespace(status="PENDING")
    controller = SimpleNamespace(get_trials=lambda: [SimpleNamespace(status="RUNNING"), pending])
    assert scheduler.choose_trial_to_run(controller) is pending
