"""A trial trains its next epoch while Tune takes its report only where no scheduler can stop it early:
the driver marks every trial (`may_stop_early`), and the trial process combines that mark with
NORMLAB_TRAIN_AHEAD (unit tests of workers.driver; the hosts' side is tested in tests/workers)."""

from __future__ import annotations

import pytest

import workers.trials.relay
from studies.spec import StudySpec
from studies.trial_config import Key
from tests.workers.driver.conftest import Stop
from tests.workers.driver.test_trial_reuse import CPU_PLAN, CTX, METRIC, SPEC
from workers.driver import study as driver_study
from workers.settings import WorkerSettings
from workers.trials import entry as trainable_entry
from workers.trials.entry import trains_ahead


def _suggested(tuners, spec: dict) -> list[dict]:
    with pytest.raises(Stop):
        driver_study._run_compare(
            StudySpec.model_validate(spec),
            CPU_PLAN,
            CTX,
            {"study_id": "s1"},
            metric=METRIC,
            client=None,
            parent=None,
        )
    config = tuners[0]["tune_config"]
    return [config.search_alg.suggest(f"t{i}") for i in range(config.num_samples)]


def test_without_a_scheduler_no_trial_of_a_compare_study_may_stop_early(tuners):
    suggested = [s for s in _suggested(tuners, SPEC) if isinstance(s, dict)]
    assert {s["phase"] for s in suggested} == {"tune", "final"}
    assert all(s[Key.MAY_STOP_EARLY] is False for s in suggested)


def test_under_asha_the_tuning_trials_may_stop_early_and_the_final_trials_never(tuners):
    asha = {**SPEC, "scheduler": {"type": "asha", "grace_period": 1, "reduction_factor": 2}}
    suggested = [s for s in _suggested(tuners, asha) if isinstance(s, dict)]
    assert {s["phase"]: s[Key.MAY_STOP_EARLY] for s in suggested} == {"tune": True, "final": False}


def test_no_trial_of_a_grid_study_may_stop_early(tuners):
    variants = [{"method": "dyt", "group": "lr=0.001", "knobs": {"lr": 1e-3}, "seed": 0}]
    with pytest.raises(Stop):
        driver_study._run_variants(
            StudySpec.model_validate(SPEC), CPU_PLAN, CTX, {}, variants, phase="grid", metric=METRIC,
            client=None, parent=None,
        )  # fmt: skip
    assert tuners[0]["param_space"][Key.MAY_STOP_EARLY] is False


@pytest.mark.parametrize(
    "config, setting, expected",
    [
        ({Key.MAY_STOP_EARLY: False}, "1", True),
        ({Key.MAY_STOP_EARLY: False}, "0", False),  # switched off
        ({Key.MAY_STOP_EARLY: True}, "1", False),  # ASHA may stop it after any report
        ({}, "1", False),  # a trial restored from an experiment older than the mark
    ],
)
def test_a_trial_trains_ahead_only_when_it_cannot_stop_early_and_the_setting_allows(
    config, setting, expected
):
    assert trains_ahead(config, WorkerSettings.from_env({"NORMLAB_TRAIN_AHEAD": setting})) is expected


@pytest.mark.filterwarnings("ignore:`get_trial_id` is meant")  # outside a Tune session: no trial id needed
def test_the_trial_process_tells_its_host_to_train_ahead_and_keeps_the_mark_out_of_the_training_config(
    monkeypatch,
):
    monkeypatch.setenv("NORMLAB_TRAIN_AHEAD", "1")
    handed: list[tuple[dict, bool]] = []

    def run_on_trial_host(config: dict, *, train_ahead: bool = False) -> bool:
        handed.append((config, train_ahead))
        return True

    monkeypatch.setattr(workers.trials.relay, "run_on_trial_host", run_on_trial_host)
    for may_stop_early in (False, True):
        variant = {"method": "dyt", "seed": 1, Key.MAY_STOP_EARLY: may_stop_early}
        trainable_entry.study_trial({"study_id": "s1", "phase": "final", "variant": variant})
    assert [ahead for _, ahead in handed] == [True, False]
    assert all(Key.MAY_STOP_EARLY not in config for config, _ in handed)
