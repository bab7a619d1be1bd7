"""Orchestration overhead on CPU: the quick study's wall time against its ideal, and where a trial's time
outside training goes.

    python -m benchmarks.bench_orchestration [--quick]

Part 1 runs studies/examples/quick.yaml end to end exactly as a user does: `normlab serve` (MLflow server,
Ray head, API) on free loopback ports in a throwaway data dir, the study POSTed over HTTP, polled until it
ends, then POSTed again (a user's next study): the first study meets a service that has just come up, the
later ones a service that has run studies before. Five services are measured one after the other: the
default (warm drivers, warm trial hosts, trials training ahead of Tune, a checkpoint per 10 s of training:
with the quick study's sub-second epochs, each trial's last epoch only), the default checkpointing every
epoch (`NORMLAB_CHECKPOINT_EVERY_S=0`), the default without training ahead
(`NORMLAB_TRAIN_AHEAD=0`: a trial waits for Tune's answer after every epoch), cold drivers
(`NORMLAB_WARM_DRIVERS=0`: each study's job imports its driver), and cold drivers without trial hosts (also
`NORMLAB_TRIAL_HOSTS=0`). A study's ideal is its trials' training compute (the `epoch_time_s` of epochs
1..E: training steps plus evaluation) spread over the Ray CPU slots; everything else is orchestration:

    per-trial overhead = (slots x wall - training compute) / trials

An epoch's compute is its wall time, so work that runs beside training on the same cores (the driver, the
relays, MLflow) counts as training while it overlaps an epoch. Training ahead moves the driver's round trip
under the next epoch: it lowers that ratio more than the wall. Each epoch also reports the CPU time of its
training thread (`epoch_cpu_s`, the epoch's whole compute on one torch thread), and the study's CPU ideal
is that sum over the slots: a ratio that no overlap can flatter. Compare the walls, or the CPU ratios, of
the first two services for what training ahead saves.

The breakdown comes from the timestamps the driver writes as the study runs (trial start, every epoch
report, trial end) and from Tune's per-trial records (which process ran each trial):

- study start: submission to the first trial starting (the dispatcher, the driver's start, the first trial
  processes and the imports of the trial class), on every slot;
- between trials: slot time with no trial started on it after that (trial process starts, waits for a
  phase to end, a slot left idle beside the last trial);
- study close: after the last trial (the results artifacts of the parent run);
- setup: trial start to its first report (imports, dataset, model, MLflow run), less the epoch-0 report;
- epoch-0 report: the init rank report and the untrained validation pass;
- epoch reporting: per epoch, report arrival minus the previous one minus the epoch's compute
  (checkpoint write, its copy into Tune storage, the driver round trip);
- close: last report to the trial's completion record (MLflow close, Tune stop).

Part 2 times the parts a trial process pays once, side by side in one process and fresh interpreters:
imports, first dataset load against the memoised one, model build, rank report, MLflow run creation.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
QUICK_SPEC = REPO / "studies" / "examples" / "quick.yaml"
SLOTS = 2  # Ray CPUs given to the stack: the 2-core laptop the quick study is sized for
TERMINAL = {"succeeded", "failed", "cancelled"}


# ----- the analysis (pure: unit-tested) ---------------------------------------------------------------


@dataclass(frozen=True)
class EpochReport:
    epoch: int
    recorded_at: float  # driver wall clock (s) when Tune delivered the report
    epoch_time_s: float  # the trial's own measurement of that epoch's compute
    epoch_cpu_s: float | None = None  # CPU time of its training thread (None: not reported)


@dataclass(frozen=True)
class TrialTimeline:
    key: str
    phase: str
    started_at: float  # driver wall clock (s): Tune started the trial (its process is up)
    ended_at: float  # driver wall clock (s): Tune recorded the trial's completion
    epochs: tuple[EpochReport, ...]

    @property
    def training_s(self) -> float:
        """Compute of epochs 1..E (training steps and evaluation): what the ideal schedule pays."""
        return sum(e.epoch_time_s for e in self.epochs if e.epoch >= 1)

    @property
    def training_cpu_s(self) -> float | None:
        """CPU time of the training thread in epochs 1..E (None when an epoch did not report it)."""
        cpu = [e.epoch_cpu_s for e in self.epochs if e.epoch >= 1]
        return None if any(c is None for c in cpu) else sum(c for c in cpu if c is not None)

    def phases(self) -> dict[str, float]:
        """Seconds of this trial's span outside training, by phase (see the module docstring)."""
        ordered = sorted(self.epochs, key=lambda e: e.epoch)
        if not ordered:
            return {"setup": self.ended_at - self.started_at}
        first = ordered[0]
        reporting = sum(
            later.recorded_at - earlier.recorded_at - later.epoch_time_s
            for earlier, later in itertools.pairwise(ordered)
        )
        epoch0 = first.epoch_time_s if first.epoch == 0 else 0.0
        return {
            "setup": first.recorded_at - self.started_at - epoch0,
            "epoch0_report": epoch0,
            "epoch_reporting": reporting,
            "close": self.ended_at - ordered[-1].recorded_at,
        }


@dataclass(frozen=True)
class StudyFigures:
    wall_s: float
    slots: int
    trials: int
    training_s: float  # summed over trials
    processes: int | None  # distinct trial processes (None: unknown)
    phase_totals: dict[str, float] = field(default_factory=dict)  # summed over trials, plus slot idle
    training_cpu_s: float | None = None  # summed over trials (None: a trial did not report it)

    @property
    def ideal_s(self) -> float:
        return self.training_s / self.slots

    @property
    def ratio(self) -> float:
        return self.wall_s / self.ideal_s if self.ideal_s > 0 else float("inf")

    @property
    def cpu_ideal_s(self) -> float | None:
        """The ideal from the training threads' CPU time: what the study would take if its slots did
        nothing but train, whatever else ran on the cores meanwhile."""
        return None if self.training_cpu_s is None else self.training_cpu_s / self.slots

    @property
    def cpu_ratio(self) -> float | None:
        ideal = self.cpu_ideal_s
        return None if not ideal else self.wall_s / ideal

    @property
    def overhead_per_trial_s(self) -> float:
        return (self.slots * self.wall_s - self.training_s) / self.trials

    def per_trial(self, phase: str) -> float:
        return self.phase_totals.get(phase, 0.0) / self.trials


def study_figures(
    timelines: Sequence[TrialTimeline],
    *,
    submitted_at: float,
    finished_at: float,
    slots: int,
    processes: int | None = None,
) -> StudyFigures:
    """Wall (submission to the study's end) vs ideal, and the per-phase split of the slot time not spent
    training. The phases add up to slots x wall - training: slot time no trial span covers is idle, split
    into the study's start (submission to the first trial), its close (after the last trial) and the rest."""
    if not timelines:
        raise ValueError("a study without trials has no orchestration figures")
    totals: dict[str, float] = {}
    for timeline in timelines:
        for phase, seconds in timeline.phases().items():
            totals[phase] = totals.get(phase, 0.0) + seconds
    wall = finished_at - submitted_at
    spans = sum(t.ended_at - t.started_at for t in timelines)
    start = slots * (min(t.started_at for t in timelines) - submitted_at)
    close = slots * (finished_at - max(t.ended_at for t in timelines))
    totals["study_start"] = start
    totals["between_trials"] = slots * wall - spans - start - close
    totals["study_close"] = close
    cpu = [t.training_cpu_s for t in timelines]
    return StudyFigures(
        wall_s=wall,
        slots=slots,
        trials=len(timelines),
        training_s=sum(t.training_s for t in timelines),
        processes=processes,
        phase_totals=totals,
        training_cpu_s=None if any(c is None for c in cpu) else sum(c for c in cpu if c is not None),
    )


# ----- part 1: the quick study on the real stack ------------------------------------------------------


@dataclass(frozen=True)
class ServedStack:
    process: subprocess.Popen  # the `normlab serve` launcher (its process tree is the stack)
    api: str
    token: str
    data_dir: Path


@contextmanager
def serve_stack(work: Path, switches: dict[str, str] | None = None) -> Iterator[ServedStack]:
    """A `normlab serve` started for this run on free ports (with `switches`, NORMLAB_* variables, set),
    stopped with Ctrl-C on exit."""
    from service.stack.processes import http_ok, private_serve_environment, wait_until

    data_dir = work / "data"
    data_dir.mkdir()
    ray_temp = Path("/tmp") / f"nl-bench-{uuid.uuid4().hex[:6]}"  # short: Ray's socket paths are limited
    token = "bench-" + uuid.uuid4().hex
    env = private_serve_environment(data_dir, ray_temp, api_token=token, ray_cpus=SLOTS)
    env.update(switches or {})
    api = f"http://127.0.0.1:{env['NORMLAB_API_PORT']}"
    with open(work / "serve.log", "wb") as log:
        process = subprocess.Popen(
            [str(Path(sys.executable).parent / "normlab"), "serve"],
            cwd=REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        up = wait_until(
            lambda: process.poll() is not None or http_ok(f"{api}/healthz"), timeout=300, interval=1
        )
        if not up or process.poll() is not None:
            raise RuntimeError(
                f"`normlab serve` did not come up:\n{(work / 'serve.log').read_text()[-3000:]}"
            )
        yield ServedStack(process, api, token, data_dir)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGINT)
            try:
                process.wait(timeout=90)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=30)
        shutil.rmtree(ray_temp, ignore_errors=True)


def submit_and_wait(api: str, token: str, spec_text: str, timeout_s: float = 1800) -> dict[str, Any]:
    """Submit a study and wait for it to end; its final JSON."""
    import httpx

    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/yaml"}
    with httpx.Client(base_url=api, timeout=30) as client:
        created = client.post("/studies", content=spec_text, headers=headers)
        created.raise_for_status()
        study_id = created.json()["id"]
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            study = client.get(f"/studies/{study_id}").json()
            if study["status"] in TERMINAL:
                return study
            time.sleep(0.5)
    raise RuntimeError(f"study {study_id} did not finish in {timeout_s:.0f} s")


def _seconds(moment: datetime) -> float:
    return moment.timestamp()


def read_timelines(database_url: str, study_id: str) -> list[TrialTimeline]:
    """Every trial of the study with the driver's timestamps, from the study database."""
    from sqlalchemy import select

    from studies.store import make_engine, session_scope
    from studies.store.tables import Trial, TrialEpoch
    from studies.store.views import _aware

    timelines = []
    with session_scope(make_engine(database_url), readonly=True) as session:
        epochs: dict[str, list[EpochReport]] = {}
        for row in session.scalars(select(TrialEpoch).where(TrialEpoch.study_id == study_id)):
            epochs.setdefault(row.trial_key, []).append(
                EpochReport(
                    epoch=row.epoch,
                    recorded_at=_seconds(_aware(row.recorded_at)),
                    epoch_time_s=float(row.metrics.get("epoch_time_s") or 0.0),
                    epoch_cpu_s=_float_or_none(row.metrics.get("epoch_cpu_s")),
                )
            )
        for trial in session.scalars(select(Trial).where(Trial.study_id == study_id)):
            timelines.append(
                TrialTimeline(
                    key=trial.trial_key,
                    phase=trial.phase,
                    started_at=_seconds(_aware(trial.created_at)),
                    ended_at=_seconds(_aware(trial.updated_at)),
                    epochs=tuple(sorted(epochs.get(trial.trial_key, []), key=lambda e: e.epoch)),
                )
            )
    return timelines


def _float_or_none(value: Any) -> float | None:
    return None if value is None else float(value)


def trial_processes(tune_dir: Path) -> int | None:
    """Distinct process ids that reported results in the study's Tune storage (None: nothing found)."""
    pids = set()
    for path in tune_dir.glob("*/*/result.json"):
        for line in path.read_text().splitlines():
            if line.strip():
                pids.add(json.loads(line).get("pid"))
    pids.discard(None)
    return len(pids) or None


def measure_service(
    spec_path: Path = QUICK_SPEC, *, studies: int = 3, switches: dict[str, str] | None = None
) -> tuple[list[StudyFigures], str]:
    """The study `studies` times back to back on one `normlab serve`, as a user submits one after another:
    the first right after the service came up, the others on a service that has run studies before.
    Returns each study's figures in submission order, and the spec's name."""
    import yaml

    spec = yaml.safe_load(spec_path.read_text())
    figures = []
    with tempfile.TemporaryDirectory(prefix="bench-orch-") as tmp:
        work = Path(tmp)
        with serve_stack(work, switches) as stack:
            api, token, data_dir = stack.api, stack.token, stack.data_dir
            for index in range(studies):
                text = yaml.safe_dump({**spec, "name": f"{spec['name']}-{index + 1}"}, sort_keys=False)
                study = submit_and_wait(api, token, text)
                if study["status"] != "succeeded":
                    raise RuntimeError(f"study {study['status']}: {study.get('error')}")
                timelines = read_timelines(f"sqlite:///{data_dir / 'normlab.db'}", study["id"])
                figures.append(
                    study_figures(
                        timelines,
                        submitted_at=_seconds(datetime.fromisoformat(study["created_at"])),
                        finished_at=_seconds(datetime.fromisoformat(study["finished_at"])),
                        slots=SLOTS,
                        processes=trial_processes(data_dir / "ray_results" / study["id"]),
                    )
                )
    return figures, spec["name"]


# ----- part 2: what a trial process pays once ---------------------------------------------------------

# Runs in a fresh interpreter (as a new trial process does) and prints one JSON line of timings: each step
# the first time, then again in the same process (what a reused process pays).
_PROCESS_PROBE = r"""
import json, sys, time
marks = {}
def timed(name, action):
    started = time.perf_counter()
    value = action()
    marks[name] = time.perf_counter() - started
    return value
timed("import ray.tune", lambda: __import__("ray.tune"))
timed("import workers.trials.trainable", lambda: __import__("workers.trials.trainable"))
timed("import workers.trials.entry", lambda: __import__("workers.trials.entry"))
import torch
torch.set_num_threads(1)
from workers.data import get_dataset
from workers.training import TrainConfig
from workers.training.loop import RANK_EXAMPLE_SIZE, TrainingRun
from workers.training.batches import iterate_batches
from models.rank import init_rank_report
cfg = TrainConfig(method="frozen_ln", dataset="digits", model="vit_lite_tiny", epochs=2, batch_size=64,
                  warmup_epochs=1, num_threads=1, progress=False)
timed("dataset first", lambda: get_dataset("digits"))
timed("dataset again", lambda: get_dataset("digits"))
run = timed("model+optimizer first", lambda: TrainingRun(cfg))
timed("model+optimizer again", lambda: TrainingRun(cfg))
example = next(iterate_batches(run.bundle.train, RANK_EXAMPLE_SIZE))[0]
timed("rank report first", lambda: init_rank_report(run.model, example))
timed("rank report again", lambda: init_rank_report(run.model, example))
from models import build_model
paper = build_model("vit_lite_paper", {"in_channels": 1, "image_size": 28, "num_classes": 10})
timed("rank report, vit_lite_paper", lambda: init_rank_report(paper, torch.randn(8, 1, 28, 28)))
print(json.dumps(marks))
"""


def process_costs(repeats: int = 3) -> dict[str, float]:
    """Median seconds of each one-time step of a trial process over `repeats` fresh interpreters."""
    samples: dict[str, list[float]] = {}
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    for _ in range(repeats):
        done = subprocess.run(
            [sys.executable, "-c", _PROCESS_PROBE],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        for name, seconds in json.loads(done.stdout.strip().splitlines()[-1]).items():
            samples.setdefault(name, []).append(seconds)
    return {name: statistics.median(values) for name, values in samples.items()}


def mlflow_start_costs(repeats: int = 5) -> dict[str, float]:
    """Seconds a trial waits for its MLflow run: waiting for it (the old start) vs letting the thread do it."""
    from mlflow.tracking import MlflowClient

    from benchmarks.bench_training import mlflow_server
    from workers.tracking.tracker import TrialTracker

    waits: dict[str, list[float]] = {"MLflow run, waited for": [], "MLflow run, created by the thread": []}
    with tempfile.TemporaryDirectory(prefix="bench-orch-mlflow-") as tmp, mlflow_server(Path(tmp)) as uri:
        experiment_id = MlflowClient(uri).create_experiment(f"bench-{uuid.uuid4().hex[:6]}")
        params = {f"param{i}": str(i) for i in range(30)}  # a trial config flattens to ~30 params
        for i in range(repeats):
            for label, timeout in (
                ("MLflow run, waited for", 10.0),
                ("MLflow run, created by the thread", 0.0),
            ):
                tracker = TrialTracker(
                    tracking_uri=uri, experiment_id=experiment_id, trial_key=f"{label}-{i}", params=params
                )
                started = time.perf_counter()
                tracker.start(resolve_timeout_s=timeout)
                waits[label].append(time.perf_counter() - started)
                tracker.close("FINISHED")
    return {label: statistics.median(values) for label, values in waits.items()}


# ----- report ------------------------------------------------------------------------------------------

_PHASE_LABELS = {
    "study_start": "study start: submission to the first trials (dispatch, driver start, first trial processes)",
    "between_trials": "slots idle between trials (trial process starts, waits for a phase, the last trial)",
    "study_close": "study close: after the last trial (results artifacts, parent run)",
    "setup": "trial setup (imports, dataset, model, MLflow run)",
    "epoch0_report": "epoch-0 report (init rank report, untrained validation)",
    "epoch_reporting": "epoch reporting (checkpoint, copy to Tune storage, driver round trip)",
    "close": "trial close (MLflow close, Tune stop)",
}


def study_section(figures: StudyFigures, spec_name: str) -> str:
    rows = [
        f"| {label} | {figures.per_trial(phase):.2f} |"
        for phase, label in _PHASE_LABELS.items()
        if phase in figures.phase_totals
    ]
    processes = "unknown" if figures.processes is None else str(figures.processes)
    cpu = (
        ""
        if figures.cpu_ratio is None
        else f" ({figures.cpu_ratio:.2f}x the ideal from the training threads' CPU time, "
        f"{figures.cpu_ideal_s:.1f} s)"
    )
    return (
        f"Study `{spec_name}` ({figures.trials} trials, {figures.slots} Ray CPU slots, {processes} trial "
        f"processes): wall {figures.wall_s:.1f} s, ideal {figures.ideal_s:.1f} s (training compute "
        f"{figures.training_s:.0f} s / {figures.slots} slots), **{figures.ratio:.2f}x** its ideal{cpu}; "
        f"**{figures.overhead_per_trial_s:.1f} s** per trial outside training.\n\n"
        "| where the time outside training goes | s per trial |\n|---|---:|\n" + "\n".join(rows) + "\n"
    )


def services_section(runs: dict[str, list[StudyFigures]], spec_name: str) -> str:
    """Every study of every service, side by side: its place in the service's life, ratio, overhead."""
    rows = []
    for service, figures in runs.items():
        for index, study in enumerate(figures):
            when = "first, right after `normlab serve` came up" if index == 0 else f"{_ordinal(index + 1)}"
            cpu = "n/a" if study.cpu_ratio is None else f"{study.cpu_ratio:.2f}x"
            rows.append(
                f"| {service} | {when} | {study.wall_s:.1f} | {study.ideal_s:.1f} | {study.ratio:.2f}x | "
                f"{cpu} | {study.overhead_per_trial_s:.1f} |"
            )
    return (
        f"Study `{spec_name}` submitted several times back to back on one service (the same 2 Ray CPU slots), "
        "on each of these services, one after the other in this run. The ideal is the trials' training "
        "time (the epochs' wall time) over the slots; the CPU ideal is the same from the CPU time of the "
        "training threads, which work beside training on the same cores does not inflate:\n\n"
        "| service | study | wall (s) | ideal (s) | wall / ideal | wall / CPU ideal | "
        "s per trial outside training |\n"
        "|---|---|---:|---:|---:|---:|---:|\n" + "\n".join(rows) + "\n"
    )


def _ordinal(n: int) -> str:
    return {2: "second", 3: "third", 4: "fourth"}.get(n, f"{n}th")


def process_section(costs: dict[str, float]) -> str:
    rows = "\n".join(f"| {name} | {seconds:.2f} |" for name, seconds in costs.items())
    return (
        "One-time steps of a trial process (median of fresh interpreters, 1 torch thread; `again` = the same "
        "step in the same process, which is what a reused trial process pays; imports are cumulative in "
        "the order listed):\n\n| step | s |\n|---|---:|\n" + rows + "\n"
    )


SERVICES: dict[str, dict[str, str]] = {  # label -> the switches its `normlab serve` runs with
    "default: warm drivers, trial hosts, training ahead, checkpoints every 10 s": {},
    "checkpoints every epoch (`NORMLAB_CHECKPOINT_EVERY_S=0`)": {"NORMLAB_CHECKPOINT_EVERY_S": "0"},
    "no training ahead (`NORMLAB_TRAIN_AHEAD=0`)": {"NORMLAB_TRAIN_AHEAD": "0"},
    "cold drivers (`NORMLAB_WARM_DRIVERS=0`)": {"NORMLAB_WARM_DRIVERS": "0"},
    "cold drivers, no trial hosts (also `NORMLAB_TRIAL_HOSTS=0`)": {
        "NORMLAB_WARM_DRIVERS": "0",
        "NORMLAB_TRIAL_HOSTS": "0",
    },
}


def run(quick: bool = False) -> str:
    studies = 2 if quick else 3
    runs: dict[str, list[StudyFigures]] = {}
    for label, switches in SERVICES.items():
        runs[label], spec_name = measure_service(studies=studies, switches=switches)
    costs = {**process_costs(repeats=1 if quick else 3), **mlflow_start_costs(repeats=2 if quick else 5)}
    breakdowns = "".join(
        f"\n{label}. " + study_section(figures[-1], f"{spec_name}-{studies}")
        for label, figures in runs.items()
    )
    return (
        "## Orchestration overhead on CPU (benchmarks/bench_orchestration.py)\n\n"
        + services_section(runs, spec_name)
        + "\nWhere the time outside training goes, in the last study of each service:\n"
        + breakdowns
        + "\n"
        + process_section(costs)
        + "\nTargets: per-trial overhead outside training <= 2 s; the quick study <= 1.3x its ideal.\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    print(run(quick=parser.parse_args().quick))


if __name__ == "__main__":
    main()
