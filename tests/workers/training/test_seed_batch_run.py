"""run_seed_batch: the k-seed counterpart of run_training, with one checkpoint file per seed."""

from dataclasses import replace

from tests.workers.training.test_seed_batch import NOISE_FREE, TIMING_KEYS
from workers.training import TrainingRun, load_checkpoint
from workers.training.seed_batch import run_seed_batch, seed_checkpoint_path

SEEDS = [4, 7]
CFG = replace(NOISE_FREE, method="dyt", epochs=2)


def _without_timing(metrics):
    return {k: v for k, v in metrics.items() if k not in TIMING_KEYS}


def test_every_epoch_is_reported_per_seed_after_each_seeds_checkpoint_is_written(tmp_path):
    reports = []

    def report(per_seed, checkpoint_dir):
        # The checkpoint of this epoch is on disk for every seed before the report (what Tune copies).
        written = [
            load_checkpoint(seed_checkpoint_path(tmp_path, seed)) if checkpoint_dir else None
            for seed in SEEDS
        ]
        reports.append(([m["epoch"] for m in per_seed], [s and s["epoch"] for s in written]))

    last = run_seed_batch(CFG, SEEDS, checkpoint_dir=tmp_path, report=report)
    assert reports == [([0, 0], [None, None]), ([1, 1], [1, 1]), ([2, 2], [2, 2])]
    assert [m["epoch"] for m in last] == [2, 2] and last[0]["train_loss"] != last[1]["train_loss"]


def test_settle_runs_after_each_epoch_and_before_any_seeds_checkpoint_is_rewritten(tmp_path):
    events = []

    def before_checkpoint():
        states = [load_checkpoint(seed_checkpoint_path(tmp_path, seed)) for seed in SEEDS]
        events.append(("before checkpoint", [s and s["epoch"] for s in states]))

    run_seed_batch(
        CFG,
        SEEDS,
        checkpoint_dir=tmp_path,
        report=lambda per_seed, _: events.append(("report", per_seed[0]["epoch"])),
        settle=before_checkpoint,
    )
    assert events == [
        ("report", 0),
        ("before checkpoint", [None, None]),
        ("report", 1),
        ("before checkpoint", [1, 1]),
        ("report", 2),
    ]


def test_on_an_interval_longer_than_the_run_only_the_last_epoch_of_every_seed_is_checkpointed(tmp_path):
    reports = []

    def report(per_seed, checkpoint_dir):
        written = [load_checkpoint(seed_checkpoint_path(tmp_path, seed)) for seed in SEEDS]
        reports.append(
            (per_seed[0]["epoch"], checkpoint_dir is not None, [s and s["epoch"] for s in written])
        )

    run_seed_batch(CFG, SEEDS, checkpoint_dir=tmp_path, report=report, checkpoint_every_s=3600.0)
    assert reports == [(0, False, [None, None]), (1, False, [None, None]), (2, True, [2, 2])]


class Killed(Exception):
    """The trial process dying right after epoch 1 was checkpointed and reported."""


def _interrupted_after_epoch_one(checkpoint_dir):
    def report(per_seed, _):
        if per_seed[0]["epoch"] == 1:
            raise Killed

    try:
        run_seed_batch(CFG, SEEDS, checkpoint_dir=checkpoint_dir, report=report)
    except Killed:
        return
    raise AssertionError("the run was not interrupted")


def test_each_seeds_checkpoint_continues_as_a_single_seed_training_run(tmp_path):
    _interrupted_after_epoch_one(tmp_path)
    state = load_checkpoint(seed_checkpoint_path(tmp_path, SEEDS[1]))
    single = TrainingRun(replace(CFG, seed=SEEDS[1]))
    single.load_state_dict(state)
    assert single.epoch == 1 and single.cfg.seed == SEEDS[1]


def test_a_resumed_batch_reports_only_the_remaining_epochs_and_ends_as_the_uninterrupted_one(tmp_path):
    straight = run_seed_batch(CFG, SEEDS, checkpoint_dir=tmp_path / "straight")
    _interrupted_after_epoch_one(tmp_path / "resumed")
    epochs_reported = []
    resumed = run_seed_batch(
        CFG,
        SEEDS,
        checkpoint_dir=tmp_path / "resumed",
        report=lambda per_seed, _: epochs_reported.append(per_seed[0]["epoch"]),
    )
    assert epochs_reported == [2]
    assert [_without_timing(m) for m in resumed] == [_without_timing(m) for m in straight]
