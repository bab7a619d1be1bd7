"""The CLI on a sequential study: `submit` says the trial count is a maximum, `--wait` prints each look's
decisions as it is taken, and `status` shows the design and where each comparison stands."""

from __future__ import annotations

import json

import yaml
from typer.testing import CliRunner

import service.cli.client as api_client
import service.cli.commands as cli
from studies.store import session_scope, set_study_status
from tests.factories import QUICK_SPEC_YAML
from tests.studies.store.sequential_study import add_sequential_study

runner = CliRunner()


def test_submit_says_a_sequential_studys_trials_are_a_maximum(wired, tmp_path):
    spec = {k: v for k, v in yaml.safe_load(QUICK_SPEC_YAML).items() if k != "seeds"}
    spec["sequential"] = {"first_seeds": 3, "seeds_per_look": 1, "max_seeds": 5, "effect": 0.01}
    path = tmp_path / "sequential.json"
    path.write_text(json.dumps(spec))
    result = runner.invoke(cli.app, ["submit", str(path)])
    assert result.exit_code == 0, result.output
    assert "up to 21 trials: sequential seeds" in result.output  # 2 x 3 tune trials + 3 methods x 5 seeds


def test_following_a_study_prints_every_look_once_with_its_decisions(wired, app_engine, capsys):
    study_id, monitor = add_sequential_study(app_engine)
    with session_scope(app_engine) as session:
        set_study_status(session, study_id=study_id, status="running")
        set_study_status(session, study_id=study_id, status="succeeded")
    api_client.follow_study("http://normlab.test", study_id, poll_s=0)
    out = capsys.readouterr().out
    assert [line.split(" (")[0] for line in out.splitlines() if line.startswith("look ")] == [
        f"look {r.look}" for r in monitor.records
    ]
    assert "dyt: |z|" in out and "-> differs: stop" in out and "all decided" in out


def test_status_shows_the_design_and_each_comparisons_decision(wired, app_engine):
    study_id, _ = add_sequential_study(app_engine)
    result = runner.invoke(cli.app, ["status", study_id])
    assert result.exit_code == 0, result.output
    assert "O'Brien-Fleming, looks at 3/5/7/9 seeds" in result.output
    assert "dyt vs frozen_ln: stopped: differs from the reference" in result.output
    assert "23 of the fixed design's 27 seed-trials" in result.output
