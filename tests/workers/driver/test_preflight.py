"""Driver preflight: trials must fit on a node, and a short tracking outage must not fail a study."""

from __future__ import annotations

import pytest

from studies.spec import StudySpec
from workers.driver import study as driver_study

SPEC = {
    "name": "fit",
    "dataset": "digits",
    "model": "vit_lite_tiny",
    "methods": ["frozen_ln"],
    "seeds": [0],
    "budget": {"epochs": 1, "batch_size": 64},
}


def _nodes(*resources):
    return [{"Alive": True, "Resources": r} for r in resources] + [
        {"Alive": False, "Resources": {"GPU": 8.0}}
    ]


def test_a_trial_that_fits_on_one_alive_node_passes(monkeypatch):
    monkeypatch.setattr(driver_study.ray, "nodes", lambda: _nodes({"CPU": 2.0}, {"CPU": 8.0, "GPU": 1.0}))
    spec = StudySpec.model_validate({**SPEC, "resources": {"cpu": 4, "gpu": 0.5}})
    driver_study.check_cluster_fits(spec)


def test_a_gpu_trial_on_a_cpu_only_cluster_fails_naming_the_largest_node_and_the_fix(monkeypatch):
    monkeypatch.setattr(driver_study.ray, "nodes", lambda: _nodes({"CPU": 2.0}))
    spec = StudySpec.model_validate({**SPEC, "resources": {"cpu": 1, "gpu": 0.25}})
    with pytest.raises(RuntimeError, match=r"largest node: 2 CPU, 0 GPU.*lower `resources`"):
        driver_study.check_cluster_fits(spec)


def test_resources_spread_over_two_nodes_do_not_count_as_one_node(monkeypatch):
    monkeypatch.setattr(driver_study.ray, "nodes", lambda: _nodes({"CPU": 2.0}, {"CPU": 2.0}))
    spec = StudySpec.model_validate({**SPEC, "resources": {"cpu": 3}})
    with pytest.raises(RuntimeError, match="no Ray node can run a trial"):
        driver_study.check_cluster_fits(spec)


def test_a_short_tracking_outage_is_ridden_out_and_a_long_one_fails_with_what_was_attempted(monkeypatch):
    monkeypatch.setattr(driver_study.time, "sleep", lambda s: None)
    calls = []

    def flaky():
        calls.append(1)
        if len(calls) < 3:
            raise ConnectionError("connection refused")
        return "parent"

    assert driver_study._with_retries(flaky, what="reach MLflow") == "parent" and len(calls) == 3

    def down():
        raise ConnectionError("connection refused")

    with pytest.raises(RuntimeError, match=r"could not reach MLflow after 4 attempts: connection refused"):
        driver_study._with_retries(down, what="reach MLflow", attempts=4)
