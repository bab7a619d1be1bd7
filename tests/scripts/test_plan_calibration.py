"""scripts/plan_calibration.py: a row per finished study with its measured wall time and the plan's."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from tests.factories import add_study, run_to_the_end

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "plan_calibration.py"


def _script():
    spec = importlib.util.spec_from_file_location("plan_calibration", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_finished_study_gets_its_measured_and_predicted_minutes(tmp_path):
    from studies.planning import Cluster
    from studies.store import make_engine, session_scope
    from studies.store.migrate import upgrade_database

    url = f"sqlite:///{tmp_path / 'normlab.db'}"
    upgrade_database(url)
    engine = make_engine(url)
    with session_scope(engine) as session:
        study = add_study(session)
    run_to_the_end(
        engine, study.id, {"autonorm_s": [0.9, 0.91, 0.92], "frozen_ln": [0.9] * 3, "dyt": [0.9] * 3}
    )
    (row,) = _script().rows(url, Cluster(cpus=2.0, gpus=0.0, source="stated"))
    _name, dataset, trials, measured, prior = row[:5]
    assert dataset == "digits" and trials == "9"
    assert float(measured) >= 0.0 and float(prior) > 0.0
