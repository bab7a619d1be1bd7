"""The epochs every run goes through (workers.training.epochs): one loop and one epoch shape for the
single-seed TrainingRun and the seed-batched SeedBatchedRun."""

from dataclasses import replace

import pytest

from tests.workers.training.test_seed_batch import NOISE_FREE
from workers.training import CHECKPOINT_FILE, TrainingRun, load_checkpoint, run_training
from workers.training.checkpoint import CheckpointSchedule
from workers.training.epochs import run_epochs
from workers.training.seed_batch import SeedBatchedRun, run_seed_batch, seed_checkpoint_path

SEEDS = [4, 7]

# AutoNorm-S with eps_h 0: no entropy ever drops below 0, so every run freezes all selectors after epoch
# t_freeze, whatever its gates did. The final phase adds the test metrics to the last epoch.
FREEZING = replace(
    NOISE_FREE,
    method="autonorm_s",
    knobs={"t_freeze": 2, "eps_h": 0.0},
    epochs=3,
    max_steps_per_epoch=2,
    eval_split="test",
)


# ----- run_epochs, on a stand-in run ------------------------------------------------------------------


class FakeRun:
    """A run of `num_seeds` seeds that only records what the loop asks of it."""

    def __init__(self, events: list, num_seeds: int = 1) -> None:
        self.events = events
        self.num_seeds = num_seeds
        self.epoch = 0

    def initial_report(self) -> dict:
        self.events.append("epoch 0")
        return {"epoch": 0}

    def train_one_epoch(self) -> dict:
        self.epoch += 1
        self.events.append(f"trained {self.epoch}")
        return {"epoch": self.epoch}

    def seed_states(self) -> list[dict]:
        return [{"epoch": self.epoch, "index": i} for i in range(self.num_seeds)]

    def load_seed_states(self, states) -> None:
        self.events.append(f"resumed at {[state['epoch'] for state in states]}")
        self.epoch = states[0]["epoch"]


def _drive(run, tmp_path, *, epochs=3, every_s=0.0, resume=True, stop_at=None):
    files = [tmp_path / f"seed{i}" / CHECKPOINT_FILE for i in range(run.num_seeds)]

    def report(metrics, directory):
        written = [load_checkpoint(path)["epoch"] for path in files] if directory is not None else None
        run.events.append(("report", metrics["epoch"], written))
        if metrics["epoch"] == stop_at:
            raise SystemExit(0)  # how Tune (ASHA, a stop criterion) ends a trial at a report

    run_epochs(
        run,
        epochs=epochs,
        checkpoint_dir=tmp_path,
        checkpoint_files=files,
        resume=resume,
        report=report,
        settle=lambda: run.events.append("settled"),
        start_schedule=lambda: CheckpointSchedule(every_s),
    )
    return files


def test_a_fresh_run_reports_epoch_zero_then_trains_settles_checkpoints_and_reports_each_epoch(tmp_path):
    events: list = []
    _drive(FakeRun(events, num_seeds=2), tmp_path, epochs=2)
    assert events == [
        "epoch 0",
        ("report", 0, None),  # epoch 0 has no checkpoint
        "trained 1", "settled", ("report", 1, [1, 1]),  # every seed's file is written before the report
        "trained 2", "settled", ("report", 2, [2, 2]),
    ]  # fmt: skip


def test_a_run_with_every_seeds_checkpoint_continues_after_it_without_reporting_epoch_zero(tmp_path):
    _drive(FakeRun([], num_seeds=2), tmp_path, epochs=1)
    events: list = []
    _drive(FakeRun(events, num_seeds=2), tmp_path, epochs=3)
    assert events == [
        "resumed at [1, 1]",
        "trained 2", "settled", ("report", 2, [2, 2]),
        "trained 3", "settled", ("report", 3, [3, 3]),
    ]  # fmt: skip


def test_a_run_missing_one_seeds_checkpoint_or_told_not_to_resume_starts_over(tmp_path):
    files = _drive(FakeRun([], num_seeds=2), tmp_path, epochs=1)
    fresh: list = []
    _drive(FakeRun(fresh, num_seeds=2), tmp_path, epochs=1, resume=False)
    assert fresh[0] == "epoch 0"
    files[1].unlink()
    partial: list = []
    _drive(FakeRun(partial, num_seeds=2), tmp_path, epochs=1)
    assert partial[0] == "epoch 0"


def test_epochs_between_checkpoints_are_reported_without_a_directory_and_the_last_is_always_written(tmp_path):
    events: list = []
    _drive(FakeRun(events), tmp_path, epochs=3, every_s=3600.0)
    assert [event for event in events if event[0] == "report"] == [
        ("report", 0, None),
        ("report", 1, None),
        ("report", 2, None),
        ("report", 3, [3]),
    ]


def test_a_stop_raised_at_a_report_ends_the_run_before_the_next_epoch_trains(tmp_path):
    events: list = []
    with pytest.raises(SystemExit):
        _drive(FakeRun(events), tmp_path, epochs=4, stop_at=2)
    assert events[-1] == ("report", 2, [2]) and "trained 3" not in events


# ----- the same epochs for one seed and for k stacked seeds ---------------------------------------------


def _single(cfg, seed, checkpoint_dir, reports, stop_at=None):
    def report(metrics, _):
        reports.append(metrics)
        if metrics["epoch"] == stop_at:
            raise SystemExit(0)

    run_training(replace(cfg, seed=seed), checkpoint_dir=checkpoint_dir, report=report)
    return reports


def _batch(cfg, checkpoint_dir, reports, stop_at=None):
    def report(per_seed, _):
        reports.append(per_seed)
        if per_seed[0]["epoch"] == stop_at:
            raise SystemExit(0)

    run_seed_batch(cfg, SEEDS, checkpoint_dir=checkpoint_dir, report=report)
    return reports


@pytest.fixture(scope="module")
def both_runs(tmp_path_factory):
    """Every report of the single-seed run of SEEDS[0] and of the batch of SEEDS, over FREEZING's epochs."""
    root = tmp_path_factory.mktemp("both")
    return _single(FREEZING, SEEDS[0], root / "single", []), _batch(FREEZING, root / "batch", [])


def test_both_runs_report_the_same_keys_in_the_same_order_every_epoch(both_runs):
    single, batch = both_runs
    assert [m["epoch"] for m in single] == [per_seed[0]["epoch"] for per_seed in batch] == [0, 1, 2, 3]
    for metrics, per_seed in zip(single, batch, strict=True):
        for seed_metrics in per_seed:
            assert list(seed_metrics) == list(metrics)
    assert "init_erank_jacobian" in single[0] and "test_accuracy" in single[-1]


def test_both_runs_freeze_after_the_same_epoch(both_runs):
    single, batch = both_runs
    frozen = [m["gates_frozen"] for m in single]
    assert frozen == [0, 0, 1, 1]
    assert [m["freeze_epoch"] for m in single] == [-1, -1, 2, 2]
    for index in range(len(SEEDS)):
        assert [per_seed[index]["gates_frozen"] for per_seed in batch] == frozen
        assert [per_seed[index]["freeze_epoch"] for per_seed in batch] == [-1, -1, 2, 2]


def test_a_stop_at_epoch_n_ends_both_runs_the_same_way(tmp_path):
    cfg = replace(FREEZING, eval_split="val")
    single: list = []
    batch: list = []
    with pytest.raises(SystemExit):
        _single(cfg, SEEDS[0], tmp_path / "single", single, stop_at=1)
    with pytest.raises(SystemExit):
        _batch(cfg, tmp_path / "batch", batch, stop_at=1)
    # Nothing after the stopping report: epoch 1 is the last one trained, checkpointed and reported.
    assert [m["epoch"] for m in single] == [per_seed[0]["epoch"] for per_seed in batch] == [0, 1]
    assert load_checkpoint(tmp_path / "single" / CHECKPOINT_FILE)["epoch"] == 1
    assert [load_checkpoint(seed_checkpoint_path(tmp_path / "batch", s))["epoch"] for s in SEEDS] == [1, 1]


# ----- what is not shared ----------------------------------------------------------------------------


def test_the_optimizer_step_is_each_runs_own_so_noise_is_not_the_single_seed_runs_noise():
    # Why the step cannot be shared: k stacked seeds train under vmap(randomness="different"), which draws
    # dropout (and drop-path, Gumbel) noise per seed from the global generator, not the stream a
    # single-seed run of that seed draws. Noise-free, the two match (test_seed_batch); with dropout they
    # train on different masks, so the epoch is shared but the step is not.
    cfg = replace(NOISE_FREE, model_overrides={"dropout": 0.3}, epochs=1)
    batch = SeedBatchedRun(cfg, SEEDS).train_one_epoch()
    single = TrainingRun(replace(cfg, seed=SEEDS[0])).train_one_epoch()
    assert list(batch[0]) == list(single)
    assert batch[0]["train_loss"] != pytest.approx(single["train_loss"], rel=1e-4)


def test_each_run_cuts_its_own_checkpoint_states_in_the_one_single_seed_format():
    # Why state is not shared: a batch's seed state is a slice of stacked tensors and of the stacked
    # AdamW state, a single run's is its module's and optimizer's own. Both write the same format, so a
    # batch's seed continues as a single-seed run (and single-seed checkpoints resume as a batch).
    batch = SeedBatchedRun(replace(NOISE_FREE, epochs=1), SEEDS)
    batch.train_one_epoch()
    single = TrainingRun(replace(NOISE_FREE, epochs=1, seed=SEEDS[1]))
    single.load_seed_states([batch.seed_states()[1]])
    assert single.epoch == 1
    # The same entries, and a batch's own note of which batch a state came from.
    assert set(batch.seed_states()[1]) - set(single.seed_states()[0]) == {"seed_batch"}
