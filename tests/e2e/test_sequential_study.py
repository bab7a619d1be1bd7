"""The sequential example end to end on the real stack: seeds are added look by look only to arms whose
comparison is open, every look is stored and logged on the MLflow parent run, and the study runs fewer
trials than its fixed-seed equivalent (every method on the maximum seeds)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from mlflow.tracking import MlflowClient

from studies.store import make_engine, session_scope, study_looks
from tests.e2e.test_grid_and_asha_studies import _run_to_end, _trials

pytestmark = pytest.mark.slow

EXAMPLE = Path(__file__).resolve().parents[2] / "studies" / "examples" / "sequential.yaml"


def test_the_sequential_example_decides_one_comparison_at_the_first_look_and_runs_fewer_trials(
    running_service,
):
    spec = yaml.safe_load(EXAMPLE.read_text())
    study = _run_to_end(running_service, spec)
    assert study["status"] == "succeeded", study.get("error")
    design = spec["sequential"]
    methods = spec["methods"]

    with session_scope(make_engine(running_service.database_url)) as session:
        looks = study_looks(session, study["id"])
    first = looks[0]
    decided_first = [m for m, d in first.decisions.items() if d != "open"]
    still_open = [m for m, d in first.decisions.items() if d == "open"]
    assert decided_first and still_open, [look.decisions for look in looks]
    assert looks[-1].final and looks[-1].open_arms == []

    finals = [t for t in _trials(running_service, study["id"]) if t.phase == "final"]
    seeds = {m: sorted(t.seed for t in finals if t.method == m) for m in methods}
    for method in decided_first:  # a method decided at the first look trained the first batch only
        assert seeds[method] == list(range(design["first_seeds"]))
    for method in still_open:
        assert len(seeds[method]) > design["first_seeds"]
    assert seeds[spec["reference_method"]] == list(range(max(len(s) for s in seeds.values())))
    assert len(finals) < len(methods) * design["max_seeds"]
    assert len({(t.method, t.seed) for t in finals}) == len(finals)  # no seed trained twice

    client = MlflowClient(running_service.mlflow_url)
    runs = client.search_runs([study["mlflow_experiment_id"]], max_results=100)
    parent = next(r for r in runs if r.data.tags.get("normlab.role") == "parent")
    assert {f"normlab.look.{look.look}" for look in looks} <= set(parent.data.tags)
    assert "stopped" in parent.data.tags["normlab.look.1"]
    artifacts = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert "sequential.json" in artifacts
    z_history = client.get_metric_history(parent.info.run_id, f"sequential/{still_open[0]}/z")
    assert [m.step for m in z_history] == list(range(1, len(z_history) + 1)) and len(z_history) >= 2


def test_a_sequential_grid_gives_later_seeds_only_to_the_points_of_an_open_pair(running_service):
    # Two learning rates of FrozenLN as grid points, one far too small to train in 3 epochs: the pair is
    # decided at the first look. DyT, in no pair, trains the first look's seeds only.
    fast, slow = "frozen_ln [lr=0.004]", "frozen_ln [lr=1e-06]"
    spec = {
        "name": "sequential-grid",
        "dataset": "digits",
        "kind": "grid",
        "model": "vit_lite_tiny",
        "methods": ["frozen_ln", "dyt"],
        "search": {"weight_decay": 0.03},
        "method_search": {
            "frozen_ln": {"lr": {"type": "grid", "values": [0.004, 1e-6]}},
            "dyt": {"lr": 0.004},
        },
        "sequential": {
            "test": "superiority",
            "effect": 0.03,
            "first_seeds": 3,
            "seeds_per_look": 2,
            "max_seeds": 5,
            "spending": "pocock",
            "pairs": [[slow, fast]],
        },
        "budget": {"epochs": 3, "batch_size": 64, "warmup_epochs": 0},
        "resources": {"cpu": 1, "gpu": 0},
        "max_failures": 1,
    }
    study = _run_to_end(running_service, spec)
    assert study["status"] == "succeeded", study.get("error")
    with session_scope(make_engine(running_service.database_url)) as session:
        looks = study_looks(session, study["id"])
    assert len(looks) == 1 and looks[0].decisions == {f"{slow} vs {fast}": "efficacy"}
    grid = [t for t in _trials(running_service, study["id"]) if t.phase == "grid"]
    seeds: dict[tuple[str, str | None], list[int]] = {}
    for trial in grid:
        seeds.setdefault((trial.method, trial.group), []).append(trial.seed)
    seeds = {arm: sorted(s) for arm, s in seeds.items()}
    assert seeds == {
        ("frozen_ln", "lr=0.004"): [0, 1, 2],
        ("frozen_ln", "lr=1e-06"): [0, 1, 2],
        ("dyt", "base"): [0, 1, 2],
    }
    assert len(grid) < 3 * spec["sequential"]["max_seeds"]  # the fixed design's every point on 5 seeds
