"""Why a trial or a study failed, in words: a failed trial's row (and its MLflow run's `normlab.error`
tag) says `<Type>: <message>` and the last lines of its trace, read from the error file Tune writes on
the driver; a study whose every trial failed says so in its error's first line, with the first error and
the trial it came from."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from studies.store import get_study, list_trials, make_engine, record_trial, session_scope, upgrade_database
from studies.store.views import TrialView
from tests.factories import add_study, digits_spec
from workers.driver import recorder as recorder_module
from workers.driver import study as driver_study
from workers.driver.recorder import TrialRecorder
from workers.driver.trial_errors import (
    MAX_STUDY_ERROR_CHARS,
    NO_ERROR_RECORDED,
    TRACE_LINES,
    NoTrialSucceededError,
    describe_trial_error,
    study_error,
    trial_error_text,
)
from workers.tracking.runs import ERROR_TAG

# What Tune wrote into a trial's error.txt for a trial that raised twice (max_failures=1), as Ray 2.60
# formats it: one block per failure, the remote task's name in colour, carets under expressions.
TUNE_ERROR_TEXT = (
    "Failure # 1 (occurred at 2026-12-06_06-00-52)\n"
    "\x1b[36mray::ImplicitFunc.train()\x1b[39m (pid=13851, ip=192.0.2.2, actor_id=aa99, repr=train)\n"
    '  File "/venv/ray/tune/trainable/trainable.py", line 329, in train\n'
    "    raise skipped from exception_cause(skipped)\n"
    "RuntimeError: an earlier attempt\n"
    "Failure # 2 (occurred at 2026-12-06_06-00-54)\n"
    "\x1b[36mray::ImplicitFunc.train()\x1b[39m (pid=13897, ip=192.0.2.2, actor_id=9cd2, repr=train)\n"
    "           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
    '  File "/venv/ray/tune/trainable/trainable.py", line 329, in train\n'
    "    raise skipped from exception_cause(skipped)\n"
    '  File "/venv/ray/air/_internal/util.py", line 98, in run\n'
    "    self._ret = self._target(*self._args, **self._kwargs)\n"
    "                ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
    '  File "/venv/ray/tune/trainable/function_trainable.py", line 249, in _trainable_func\n'
    "    output = fn()\n"
    "             ^^^^\n"
    '  File "/repo/workers/trials/entry.py", line 40, in study_trial\n'
    "    run_trial(config)\n"
    '  File "/repo/models/build.py", line 88, in build_model\n'
    "    blocks = [Block(dim) for _ in range(depth)]\n"
    '  File "/venv/torch/nn/modules/linear.py", line 106, in __init__\n'
    "    self.weight = Parameter(torch.empty((out_features, in_features), **factory_kwargs))\n"
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 11.64 TiB. GPU 0 has 79.1 GiB\n"
)

# A trial whose process died (the OOM killer): Ray's RayActorError, which names no exception type.
ACTOR_DIED_TEXT = (
    "Failure # 1 (occurred at 2026-12-06_07-00-00)\n"
    "The actor died unexpectedly before finishing this task.\n"
    "\tclass_name: ImplicitFunc\n"
    "\tactor_id: 5d1e\n"
    "\tpid: 4242\n"
    "The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR\n"
)


def test_a_tune_error_file_becomes_the_last_failures_type_message_and_trace_tail():
    error = describe_trial_error(TUNE_ERROR_TEXT)
    lines = error.splitlines()
    assert (
        lines[0]
        == "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 11.64 TiB. GPU 0 has 79.1 GiB"
    )
    assert "an earlier attempt" not in error  # the last failure is the one that ended the trial
    assert "\x1b[" not in error and not any(set(line.strip()) == {"^"} for line in lines)
    assert len(lines) == 1 + TRACE_LINES
    assert 'File "/repo/models/build.py", line 88, in build_model' in error  # the frames near the cause


def test_a_dead_trial_process_is_named_by_rays_first_line():
    error = describe_trial_error(ACTOR_DIED_TEXT)
    assert error.splitlines()[0] == "The actor died unexpectedly before finishing this task."
    assert "Worker exit type: SYSTEM_ERROR" in error


def test_an_error_raised_on_a_warm_trial_host_names_the_hosts_own_error():
    # workers.trials.host._portable: an error that does not pickle travels as a RuntimeError with the
    # host's traceback in its message; the host's own exception line is the last one.
    text = textwrap.dedent(
        """\
        Failure # 1 (occurred at 2026-12-06_08-00-00)
        ray::ImplicitFunc.train() (pid=1, ip=192.0.2.2, actor_id=1, repr=study_trial)
          File "/repo/workers/trials/relay.py", line 200, in relay
            raise event.error
        RuntimeError: OutOfMemoryError: CUDA out of memory on its warm trial host:
        Traceback (most recent call last):
          File "/repo/workers/training/loop.py", line 77, in step
            loss.backward()
        torch.OutOfMemoryError: CUDA out of memory
        """
    )
    assert describe_trial_error(text).splitlines()[0] == "torch.OutOfMemoryError: CUDA out of memory"


@pytest.mark.parametrize("text", [None, "", "  \n"])
def test_no_error_text_says_so(text):
    assert describe_trial_error(text) == NO_ERROR_RECORDED


def test_a_huge_error_keeps_its_headline_and_the_end_of_its_trace():
    text = "Failure # 1 (occurred at x)\n" + "  frame\n" * 10 + "ValueError: " + "x" * 20_000 + "\n"
    error = describe_trial_error(text)
    assert len(error) <= 4000 and error.startswith("ValueError: xxx")


@dataclass
class FakeTrial:
    """The attributes of ray.tune.experiment.Trial the recorder reads about a failure."""

    config: dict[str, Any]
    error_file: str | None = None
    stored_error: str | None = None  # what Trial.get_error finds in the experiment's storage
    trial_id: str = "t_00001"
    last_result: dict[str, Any] | None = None

    def get_error(self) -> str | None:
        return self.stored_error


def test_the_error_file_on_the_driver_is_read_before_tune_syncs_it_to_storage(tmp_path):
    path = tmp_path / "error.txt"
    path.write_text(TUNE_ERROR_TEXT)
    # At on_trial_error Tune has written the file on the driver; its storage copy (get_error) is not there
    # yet: reading only that one stored "no error recorded" for every failed trial.
    assert trial_error_text(FakeTrial({}, error_file=str(path), stored_error=None)) == TUNE_ERROR_TEXT
    assert trial_error_text(FakeTrial({}, error_file=str(tmp_path / "gone"), stored_error="later")) == "later"
    assert trial_error_text(FakeTrial({})) is None


class FakeMlflow:
    def __init__(self) -> None:
        self.tags: dict[tuple[str, str], str] = {}

    def set_tag(self, run_id: str, key: str, value: str) -> None:
        self.tags[(run_id, key)] = value


@pytest.fixture
def database(tmp_path) -> tuple[str, Any, str]:
    url = f"sqlite:///{tmp_path / 'normlab.db'}"
    upgrade_database(url)
    engine = make_engine(url)
    return url, engine, add_study(engine, digits_spec(name="errors")).id


def test_a_failed_trial_records_its_error_in_its_row_and_on_its_mlflow_run(database, tmp_path, monkeypatch):
    url, engine, study_id = database
    path = tmp_path / "error.txt"
    path.write_text(TUNE_ERROR_TEXT)
    config = {"study_id": study_id, "phase": "final", "variant": {"method": "dyt", "seed": 0, "knobs": {}}}
    mlflow = FakeMlflow()
    recorder = TrialRecorder(url, metric_key="test_accuracy", tracking_uri="http://mlflow", experiment_id="1")
    recorder._mlflow = mlflow  # type: ignore[assignment]  # the client the recorder would open
    monkeypatch.setattr(
        recorder_module,
        "find_trial_run",
        lambda client, experiment, key: SimpleNamespace(info=SimpleNamespace(run_id="run-1")),
    )

    recorder.on_trial_error(0, [], FakeTrial(config, error_file=str(path)))

    with session_scope(engine, readonly=True) as session:
        [row] = list_trials(session, study_id=study_id)
    assert row.status == "failed" and row.mlflow_run_id == "run-1"
    assert row.error.startswith("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 11.64 TiB")
    assert mlflow.tags[("run-1", ERROR_TAG)] == row.error


# --------------------------------------------------------------------------------------- the study


def _trial(status: str, key: str, error: str | None = None, study_id: str = "s1") -> TrialView:
    return TrialView(
        id=0,
        study_id=study_id,
        trial_key=f"{study_id}/{key}",
        phase=key.split("/")[0],
        method=key.split("/")[1],
        group=None,
        config={},
        seed=0,
        status=status,
        metrics={},
        metric_value=None,
        mlflow_run_id=None,
        error=error,
        created_at=None,  # type: ignore[arg-type]
        updated_at=None,  # type: ignore[arg-type]
    )


BOOM = 'RuntimeError: boom\n  File "/repo/models/build.py", line 3, in build\nRuntimeError: boom'
TRACE = 'Traceback (most recent call last):\n  File "study.py", line 1, in run\nRuntimeError: no tuning trial of method dyt reported a finite objective\n'


def test_a_study_whose_every_trial_failed_says_why_in_its_first_line():
    trials = [_trial("failed", "final/dyt/seed0", BOOM), _trial("failed", "final/dyt/seed1", "ValueError: x")]
    error = study_error(trials, cause=NoTrialSucceededError("no trial succeeded"), trace="")
    first, _, rest = error.partition("\n")
    assert first == "every trial failed (2); first error: RuntimeError: boom (trial final/dyt/seed0)"
    assert 'File "/repo/models/build.py", line 3' in rest  # the first trial's trace after it


def test_a_driver_error_after_every_trial_failed_keeps_the_one_line_and_the_traceback():
    trials = [_trial("failed", "tune/dyt/t_1", BOOM)]
    error = study_error(
        trials, cause=RuntimeError("no tuning trial of method dyt reported a finite objective"), trace=TRACE
    )
    assert (
        error.splitlines()[0]
        == "every trial failed (1); first error: RuntimeError: boom (trial tune/dyt/t_1)"
    )
    assert error.rstrip().endswith("reported a finite objective")  # the traceback is kept, last


def test_a_driver_error_names_itself_first_and_counts_the_failed_trials():
    trials = [_trial("succeeded", "final/dyt/seed0"), _trial("failed", "final/dyt/seed1", BOOM)]
    error = study_error(trials, cause=RuntimeError("could not reach MLflow\nafter 6 attempts"), trace=TRACE)
    assert error.splitlines()[0] == (
        "RuntimeError: could not reach MLflow (1 of 2 trials failed; first error: RuntimeError: boom "
        "(trial final/dyt/seed1))"
    )
    assert "Traceback (most recent call last)" in error


def test_a_study_error_is_bounded_and_keeps_its_first_line():
    trials = [_trial("failed", "final/dyt/seed0", "RuntimeError: boom\n" + "frame\n" * 5000)]
    error = study_error(trials, cause=RuntimeError("x"), trace="t" * 50_000)
    assert len(error) <= MAX_STUDY_ERROR_CHARS
    assert error.startswith("every trial failed (1); first error: RuntimeError: boom (trial final/dyt/seed0)")


def test_run_study_fails_a_study_whose_every_trial_failed_with_that_line(database, monkeypatch):
    url, engine, study_id = database

    def every_trial_fails(study_id: str, spec, ctx) -> None:  # Tune ran the experiment; each trial raised
        with session_scope(engine) as session:
            for seed in (0, 1):
                record_trial(
                    session,
                    study_id=study_id,
                    trial_key=f"{study_id}/final/dyt/seed{seed}",
                    phase="final",
                    method="dyt",
                    config={"method": "dyt", "seed": seed},
                    seed=seed,
                    status="failed",
                    metrics={},
                    metric_value=None,
                    mlflow_run_id=None,
                    error=describe_trial_error(TUNE_ERROR_TEXT),
                )

    monkeypatch.setattr(driver_study, "_run", every_trial_fails)
    ctx = driver_study.DriverContext(
        engine=engine,
        database_url=url,
        mlflow_tracking_uri="http://127.0.0.1:9",
        results_dir=Path("/nonexistent"),
    )
    with pytest.raises(NoTrialSucceededError):
        driver_study.run_study(study_id, ctx)
    with session_scope(engine, readonly=True) as session:
        study = get_study(session, study_id=study_id)
    assert study.status == "failed"
    assert study.error.splitlines()[0] == (
        "every trial failed (2); first error: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
        "11.64 TiB. GPU 0 has 79.1 GiB (trial final/dyt/seed0)"
    )
