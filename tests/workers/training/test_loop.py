import json
import math
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from models.norms import gated_norms
from workers.training import CHECKPOINT_FILE, TrainConfig, TrainingRun, load_checkpoint, run_training
from workers.training.batches import iterate_batches
from workers.training.metrics import SELECTOR_GRAD_VAR
from workers.training.optim import parameter_groups

# Wall-clock measurements differ between any two runs; everything else must match bit for bit.
TIMING_KEYS = {"epoch_time_s", "epoch_cpu_s", "samples_per_s"}

# A few optimizer steps per epoch of the tiny ViT on real 8x8 digits, with every source of randomness on:
# dropout, Gumbel gate noise, MixUp/CutMix, data order.
SMALL = TrainConfig(
    method="autonorm_s",
    dataset="digits",
    model="vit_lite_tiny",
    model_overrides={"dropout": 0.1},
    knobs={"t_freeze": 2, "eps_h": 0.0, "tau": 0.5},
    epochs=4,
    batch_size=32,
    lr=3e-3,
    warmup_epochs=1,
    mixup=0.8,
    cutmix=1.0,
    max_steps_per_epoch=4,
    seed=7,
)


# Shorter runs of the same setup: AutoNorm-S must decide before its last epoch (t_freeze < epochs), so
# a two-epoch run decides after epoch 1 and a one-epoch run uses plain AutoNorm.
TWO_EPOCHS = replace(SMALL, epochs=2, knobs={**SMALL.knobs, "t_freeze": 1})
ONE_EPOCH = replace(SMALL, method="autonorm", epochs=1)


class Killed(Exception):
    """Raised from the report callback to stop a run the way a crash would, right after a checkpoint."""


def _without_timing(history):
    return [{k: v for k, v in metrics.items() if k not in TIMING_KEYS} for metrics in history]


def _run(cfg, checkpoint_dir, **kwargs):
    reports = []
    final = run_training(
        cfg, checkpoint_dir=checkpoint_dir, report=lambda m, d: reports.append((m, d)), **kwargs
    )
    return final, reports


def test_two_runs_with_the_same_seed_report_identical_metrics(tmp_path):
    cfg = TWO_EPOCHS
    _, first = _run(cfg, tmp_path / "a")
    _, second = _run(cfg, tmp_path / "b")
    assert _without_timing([m for m, _ in first]) == _without_timing([m for m, _ in second])
    _, other_seed = _run(replace(cfg, seed=8), tmp_path / "c")
    assert first[-1][0]["train_loss"] != other_seed[-1][0]["train_loss"]


def test_resuming_after_a_crash_in_a_new_process_equals_the_uninterrupted_run(tmp_path):
    straight_final, straight = _run(SMALL, tmp_path / "straight")

    def crash_after_epoch_2(metrics, checkpoint_dir):
        if metrics["epoch"] == 2:
            raise Killed

    with pytest.raises(Killed):
        run_training(SMALL, checkpoint_dir=tmp_path / "resumed", report=crash_after_epoch_2)
    assert load_checkpoint(tmp_path / "resumed" / CHECKPOINT_FILE)["epoch"] == 2

    # A fresh interpreter: nothing survives from this process except the checkpoint directory.
    script = (
        "import json, sys, torch\n"
        "torch.set_num_threads(1)\n"
        "from workers.training import TrainConfig, run_training\n"
        "cfg = TrainConfig(**json.loads(sys.argv[1]))\n"
        "reports = []\n"
        "run_training(cfg, checkpoint_dir=sys.argv[2], report=lambda m, d: reports.append(m))\n"
        "print(json.dumps(reports))\n"
    )
    result = subprocess.run(
        [
            sys.executable,
            "-W",
            "ignore",
            "-c",
            script,
            json.dumps(SMALL.to_dict()),
            str(tmp_path / "resumed"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=Path(__file__).resolve().parents[3],
        check=True,
    )
    resumed_reports = json.loads(result.stdout.strip().splitlines()[-1])
    assert [m["epoch"] for m in resumed_reports] == [3, 4]  # no epoch repeated, none skipped
    assert _without_timing(resumed_reports) == _without_timing([m for m, _ in straight[-2:]])
    assert straight_final["gates_frozen"] == 1 and straight_final["freeze_epoch"] == 2

    straight_state = load_checkpoint(tmp_path / "straight" / CHECKPOINT_FILE)
    resumed_state = load_checkpoint(tmp_path / "resumed" / CHECKPOINT_FILE)
    for name, tensor in straight_state["model"].items():
        assert torch.equal(tensor, resumed_state["model"][name]), name
    assert _without_timing(straight_state["history"]) == _without_timing(resumed_state["history"])


def test_a_completed_run_resumes_to_its_final_metrics_without_reporting_again(tmp_path):
    cfg = ONE_EPOCH
    final, _ = _run(cfg, tmp_path)
    again, reports = _run(cfg, tmp_path)
    assert reports == [] and again == final


def test_a_checkpoint_of_a_different_run_is_refused(tmp_path):
    _run(ONE_EPOCH, tmp_path)
    with pytest.raises(ValueError, match="different run"):
        _run(replace(ONE_EPOCH, lr=1e-2), tmp_path)


def test_short_training_on_digits_beats_chance_clearly(tmp_path):
    # Measured: 0.81 validation accuracy after 10 epochs (chance is 0.10).
    cfg = TrainConfig(
        method="frozen_ln",
        dataset="digits",
        model="vit_lite_tiny",
        epochs=10,
        batch_size=64,
        lr=5e-3,
        warmup_epochs=1,
        seed=0,
    )
    final, reports = _run(cfg, tmp_path)
    assert final["val_accuracy"] > 0.5
    assert reports[0][0]["val_accuracy"] < 0.3  # the untrained model is near chance
    assert final["train_loss"] < reports[1][0]["train_loss"]


def test_reports_epoch_zero_with_init_ranks_then_every_epoch_with_its_checkpoint(tmp_path):
    cfg = TWO_EPOCHS
    seen_checkpoints = []

    def report(metrics, checkpoint_dir):
        if checkpoint_dir is not None:
            seen_checkpoints.append(load_checkpoint(Path(checkpoint_dir) / CHECKPOINT_FILE)["epoch"])

    run_training(cfg, checkpoint_dir=tmp_path, report=report)
    _, reports = _run(cfg, tmp_path / "again")
    epoch0, _ = reports[0]
    assert reports[0][1] is None and epoch0["epoch"] == 0
    assert {"init_erank_jacobian", "init_erank_repr_last", "init_mean_spike_last"} <= set(epoch0)
    assert "objective" in epoch0 and "train_loss" not in epoch0
    assert seen_checkpoints == [1, 2]
    expected = {
        "epoch", "train_loss", "val_accuracy", "objective", "gate_dyt_weight_0", "gate_entropy_0",
        "gate_entropy_mean", "gates_frozen", "freeze_epoch", "epoch_time_s", "epoch_cpu_s", "samples_per_s", "lr",
        "gate_frozen_0", "train_gate_entropy_0", "train_gate_entropy_mean",
    }  # fmt: skip
    for metrics, _ in reports[1:]:
        assert expected <= set(metrics)
        assert metrics["objective"] == metrics["val_accuracy"]
        assert 0.0 <= metrics["gate_entropy_mean"] <= math.log(2) + 1e-6
        assert metrics["samples_per_s"] > 0
        assert 0 < metrics["epoch_cpu_s"] <= metrics["epoch_time_s"] + 0.05  # one thread: its CPU <= the wall


def test_settle_runs_once_an_epoch_has_trained_and_before_its_checkpoint_and_report(tmp_path):
    events = []

    def written():
        state = load_checkpoint(tmp_path / CHECKPOINT_FILE)
        return None if state is None else state["epoch"]

    def before_checkpoint():
        events.append(("before checkpoint", written()))

    def report(metrics, _):
        events.append(("report", metrics["epoch"], written()))

    run_training(TWO_EPOCHS, checkpoint_dir=tmp_path, report=report, settle=before_checkpoint)
    assert events == [
        ("report", 0, None),
        ("before checkpoint", None),  # epoch 1 trained; epoch 0 has no checkpoint
        ("report", 1, 1),
        ("before checkpoint", 1),  # epoch 2 trained; the checkpoint still holds epoch 1
        ("report", 2, 2),
    ]


def test_a_stop_raised_by_settle_leaves_the_last_reported_checkpoint_in_place(tmp_path):
    reports = []

    def stop_after_epoch_one():
        if reports[-1] == 1:
            raise SystemExit(0)  # as Tune's answer to the epoch-1 report, seen once epoch 2 has trained

    with pytest.raises(SystemExit):
        run_training(
            SMALL,
            checkpoint_dir=tmp_path,
            report=lambda m, _: reports.append(m["epoch"]),
            settle=stop_after_epoch_one,
        )
    assert reports == [0, 1]
    assert load_checkpoint(tmp_path / CHECKPOINT_FILE)["epoch"] == 1


def test_on_an_interval_longer_than_the_run_only_the_last_epoch_is_checkpointed_but_every_one_reported(
    tmp_path,
):
    events = []

    def report(metrics, checkpoint_dir):
        written = None if checkpoint_dir is None else load_checkpoint(checkpoint_dir / CHECKPOINT_FILE)
        events.append(("report", metrics["epoch"], written and written["epoch"]))

    run_training(
        SMALL,
        checkpoint_dir=tmp_path,
        report=report,
        settle=lambda: events.append(("settle",)),
        checkpoint_every_s=3600.0,
    )
    assert events == [
        ("report", 0, None),
        ("settle",),
        ("report", 1, None),
        ("settle",),
        ("report", 2, None),
        ("settle",),
        ("report", 3, None),
        ("settle",),  # nothing of an epoch is reported before the previous report was taken
        ("report", 4, 4),
    ]


class _EpochTwoAndLast:
    """A checkpoint schedule that picks epoch 2 (and the last), whatever the clock says."""

    def __init__(self, every_s):
        pass

    def due(self, epoch, last_epoch):
        return epoch in (2, last_epoch)


def test_a_run_that_dies_between_checkpoints_redoes_the_epochs_since_the_last_one_to_the_same_end(
    tmp_path, monkeypatch
):
    import workers.training.loop as loop

    straight_final, straight = _run(SMALL, tmp_path / "straight")
    monkeypatch.setattr(loop, "CheckpointSchedule", _EpochTwoAndLast)

    def crash_after_epoch_3(metrics, checkpoint_dir):
        if metrics["epoch"] == 3:
            raise Killed

    with pytest.raises(Killed):
        run_training(
            SMALL, checkpoint_dir=tmp_path / "resumed", report=crash_after_epoch_3, checkpoint_every_s=9
        )
    assert load_checkpoint(tmp_path / "resumed" / CHECKPOINT_FILE)["epoch"] == 2  # epoch 3 was not written
    final, resumed = _run(SMALL, tmp_path / "resumed", checkpoint_every_s=9)
    assert [m["epoch"] for m, _ in resumed] == [3, 4]  # epoch 3 again, from the epoch-2 checkpoint
    assert _without_timing([m for m, _ in resumed]) == _without_timing([m for m, _ in straight[-2:]])
    assert _without_timing([final]) == _without_timing([straight_final])


def _selector_state(state):
    return {k: v for k, v in state["model"].items() if ".selector." in k}


@pytest.mark.parametrize(
    "eps_h, frozen, freeze_epoch",
    [(0.0, 1, 1), (1.0, 0, -1)],  # entropy never drops below 0 -> freeze; always below 1 > ln 2 -> never
)
def test_autonorm_s_freeze_is_decided_by_the_loop_from_gate_entropy(tmp_path, eps_h, frozen, freeze_epoch):
    cfg = replace(SMALL, epochs=3, knobs={"t_freeze": 1, "eps_h": eps_h}, mixup=0.0, cutmix=0.0)
    snapshots = {}

    def report(metrics, checkpoint_dir):
        if checkpoint_dir is not None:
            snapshots[metrics["epoch"]] = load_checkpoint(Path(checkpoint_dir) / CHECKPOINT_FILE)

    final = run_training(cfg, checkpoint_dir=tmp_path, report=report)
    assert final["gates_frozen"] == frozen and final["freeze_epoch"] == freeze_epoch
    after_1, after_3 = _selector_state(snapshots[1]), _selector_state(snapshots[3])
    assert after_1, "the AutoNorm model has selector parameters"
    unchanged = all(torch.equal(after_1[k], after_3[k]) for k in after_1)
    assert unchanged == bool(frozen)
    backbone_moved = any(
        not torch.equal(v, snapshots[3]["model"][k])
        for k, v in snapshots[1]["model"].items()
        if ".selector." not in k
    )
    assert backbone_moved


def test_methods_without_gates_report_no_gate_metrics_and_never_freeze(tmp_path):
    final, _ = _run(replace(SMALL, method="dyt", epochs=1, knobs={}), tmp_path)
    assert not [k for k in final if k.startswith("gate_")]
    assert final["gates_frozen"] == 0 and final["freeze_epoch"] == -1


def test_final_phase_adds_test_and_per_corruption_metrics_to_the_last_report(tmp_path):
    cfg = replace(SMALL, dataset="digits_c", method="frozen_ln", knobs={}, epochs=2, eval_split="test")
    final, reports = _run(cfg, tmp_path)
    assert "test_accuracy" not in reports[1][0]
    corruptions = ["brightness", "gaussian_noise", "motion_blur"]
    for name in corruptions:
        assert 0.0 <= final[f"test_accuracy_{name}"] <= 1.0
    mean = sum(final[f"test_accuracy_{name}"] for name in corruptions) / 3
    assert final["test_accuracy_corruption_mean"] == pytest.approx(mean)
    assert 0.0 <= final["test_accuracy"] <= 1.0


@pytest.mark.parametrize(
    "dataset, model, metric",
    [
        ("ptb_pos_sample", "encoder_tiny", "val_accuracy"),
        ("ptb_lm_sample", "encoder_tiny", "val_perplexity"),
        ("california_housing", "tabular_tiny", "val_rmse"),
    ],
)
def test_every_task_type_trains_and_reports_its_metric(tmp_path, dataset, model, metric):
    cfg = TrainConfig(
        method="autonorm", dataset=dataset, model=model, epochs=1, batch_size=16, max_steps_per_epoch=3,
        eval_batch_size=256,
    )  # fmt: skip
    final = run_training(cfg, checkpoint_dir=tmp_path)
    assert math.isfinite(final[metric]) and final["objective"] == final[metric]
    assert math.isfinite(final["train_loss"]) and "gate_entropy_mean" in final


def test_norm_parameters_and_biases_get_no_weight_decay_and_selectors_their_own_group():
    from models import build_model

    model = build_model("vit_lite_tiny", {"norm": "autonorm", "num_classes": 10})
    groups = {g["name"]: g for g in parameter_groups(model, weight_decay=0.05)}
    assert groups["selector"]["weight_decay"] == 0.05 and groups["no_decay"]["weight_decay"] == 0.0
    names = {id(p): n for n, p in model.named_parameters()}
    no_decay = {names[id(p)] for p in groups["no_decay"]["params"]}
    decay = {names[id(p)] for p in groups["decay"]["params"]}
    assert all(".selector." in names[id(p)] for p in groups["selector"]["params"])
    assert any(n.endswith("bias") for n in no_decay)
    assert not any(n.endswith("bias") for n in decay)
    assert all(p.ndim >= 2 for p in groups["decay"]["params"])
    assert sum(len(g["params"]) for g in groups.values()) == len(list(model.parameters()))


def test_progress_bar_is_off_when_not_attached_to_a_terminal(tmp_path, capsys):
    run_training(ONE_EPOCH, checkpoint_dir=tmp_path)
    assert "epoch 1/1" not in capsys.readouterr().err


def test_checkpoint_directory_holds_only_the_checkpoint(tmp_path):
    run_training(TWO_EPOCHS, checkpoint_dir=tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [CHECKPOINT_FILE]
    shutil.rmtree(tmp_path)


def _keep_checkpoints(states):
    """A report callback that keeps each epoch's checkpoint in `states` (epoch -> state)."""

    def report(metrics, checkpoint_dir):
        if checkpoint_dir is not None:
            states[metrics["epoch"]] = load_checkpoint(Path(checkpoint_dir) / CHECKPOINT_FILE)

    return report


@pytest.mark.parametrize("signal, prefix", [("train", "train_gate_entropy_"), ("val", "gate_entropy_")])
def test_the_freeze_reads_train_batch_entropy_by_default_or_the_validation_split_on_request(
    tmp_path, signal, prefix
):
    knobs = dict(TWO_EPOCHS.knobs)
    if signal == "val":  # "train" is the default: left unset
        knobs["freeze_signal"] = "val"
    states = {}
    final = run_training(
        replace(TWO_EPOCHS, knobs=knobs), checkpoint_dir=tmp_path, report=_keep_checkpoints(states)
    )
    layers = range(5)  # vit_lite_tiny: five gated norms
    assert all(f"train_gate_entropy_{i}" in final for i in layers) and "train_gate_entropy_5" not in final
    first = states[1]["history"][-1]
    assert states[1]["freezer"]["entropy_history"] == [[first[f"{prefix}{i}"] for i in layers]]
    # The two readings differ (noise-free gates on training batches vs the validation split).
    assert [first[f"train_gate_entropy_{i}"] for i in layers] != [first[f"gate_entropy_{i}"] for i in layers]
    mean = sum(first[f"train_gate_entropy_{i}"] for i in layers) / len(layers)
    assert first["train_gate_entropy_mean"] == pytest.approx(mean)
    assert all(0.0 <= first[f"train_gate_entropy_{i}"] <= math.log(2) + 1e-6 for i in layers)


def test_a_per_layer_freeze_stops_exactly_the_selectors_whose_entropy_stayed_high(tmp_path):
    base = replace(TWO_EPOCHS, mixup=0.0, cutmix=0.0)
    probe = replace(base, knobs={**base.knobs, "eps_h": 0.0, "freeze_scope": "per_layer"})
    _, reports = _run(probe, tmp_path / "probe")
    epoch1 = reports[1][0]
    entropies = [epoch1[f"train_gate_entropy_{i}"] for i in range(5)]
    assert min(entropies) < max(entropies)
    eps_h = (min(entropies) + max(entropies)) / 2  # some layers above, some below
    states = {}
    cfg = replace(base, knobs={**base.knobs, "eps_h": eps_h, "freeze_scope": "per_layer"})
    final = run_training(cfg, checkpoint_dir=tmp_path / "run", report=_keep_checkpoints(states))
    expected = [int(h >= eps_h) for h in entropies]  # epoch 1 is the same run up to the decision
    assert [final[f"gate_frozen_{i}"] for i in range(5)] == expected
    assert final["gates_frozen"] == 1 and final["freeze_epoch"] == 1
    assert final[SELECTOR_GRAD_VAR] >= 0.0  # over the selectors that still train
    names = list(dict.fromkeys(k.split(".selector.")[0] for k in states[1]["model"] if ".selector." in k))
    for index, name in enumerate(names):
        keys = [k for k in states[1]["model"] if k.startswith(f"{name}.selector.")]
        unchanged = all(torch.equal(states[1]["model"][k], states[2]["model"][k]) for k in keys)
        assert unchanged == bool(expected[index]), name


def test_resuming_a_per_layer_validation_signal_run_equals_the_uninterrupted_run(tmp_path):
    cfg = replace(
        SMALL, knobs={**SMALL.knobs, "eps_h": 0.69, "freeze_signal": "val", "freeze_scope": "per_layer"}
    )
    _, straight = _run(cfg, tmp_path / "straight")

    def crash_after_epoch_2(metrics, checkpoint_dir):
        if metrics["epoch"] == 2:
            raise Killed

    with pytest.raises(Killed):
        run_training(cfg, checkpoint_dir=tmp_path / "resumed", report=crash_after_epoch_2)
    _, resumed = _run(cfg, tmp_path / "resumed")
    assert [m["epoch"] for m, _ in resumed] == [3, 4]
    assert _without_timing([m for m, _ in resumed]) == _without_timing([m for m, _ in straight[-2:]])
    straight_state = load_checkpoint(tmp_path / "straight" / CHECKPOINT_FILE)
    resumed_state = load_checkpoint(tmp_path / "resumed" / CHECKPOINT_FILE)
    assert straight_state["freezer"] == resumed_state["freezer"]
    for name, tensor in straight_state["model"].items():
        assert torch.equal(tensor, resumed_state["model"][name]), name


def test_every_epoch_reports_the_selector_gradient_variance_until_a_global_freeze(tmp_path):
    cfg = replace(SMALL, epochs=3, knobs={"t_freeze": 1, "eps_h": 0.0}, mixup=0.0, cutmix=0.0)
    _, reports = _run(cfg, tmp_path)
    epoch0, epoch1, epoch2, epoch3 = (metrics for metrics, _ in reports)
    assert SELECTOR_GRAD_VAR not in epoch0  # no step before epoch 1
    assert math.isfinite(epoch1[SELECTOR_GRAD_VAR]) and epoch1[SELECTOR_GRAD_VAR] > 0.0
    # Decided after epoch 1 (entropy never below 0): no selector gradient from then on, so no value.
    assert (epoch1["gates_frozen"], epoch1["freeze_epoch"]) == (1, 1)
    assert SELECTOR_GRAD_VAR not in epoch2 and SELECTOR_GRAD_VAR not in epoch3
    # The rest of the mechanism sits beside it in every trained epoch.
    for metrics in (epoch1, epoch2, epoch3):
        assert {"gate_entropy_mean", "train_gate_entropy_mean", "gates_frozen", "freeze_epoch"} <= set(
            metrics
        )
    unfrozen, _ = _run(replace(cfg, method="autonorm", knobs={}), tmp_path / "autonorm")
    assert unfrozen[SELECTOR_GRAD_VAR] > 0.0
    without_gates, _ = _run(replace(cfg, method="dyt", epochs=1, knobs={}), tmp_path / "dyt")
    assert SELECTOR_GRAD_VAR not in without_gates


@pytest.mark.parametrize("mode", ["expected", "hard"])
def test_the_post_freeze_gate_knob_fixes_the_frozen_gates_of_the_trained_model(mode):
    cfg = replace(
        SMALL,
        epochs=2,
        knobs={"t_freeze": 1, "eps_h": 0.0, "post_freeze_gate": mode},
        model_overrides={"dropout": 0.0, "drop_path": 0.0},
        mixup=0.0,
        cutmix=0.0,
    )
    run = TrainingRun(cfg)
    norms = [norm for _, norm in gated_norms(run.model)]
    assert norms and all(n.post_freeze_gate == mode and not n.selector_frozen for n in norms)
    run.train_one_epoch()  # decides: frozen
    assert all(n.selector_frozen for n in norms)
    run.train_one_epoch()  # trains on with the fixed gate
    x, _ = next(iterate_batches(run.bundle.train, 16))
    run.model.train()
    torch.manual_seed(1)
    first = run.model(x)
    torch.manual_seed(2)
    torch.testing.assert_close(run.model(x), first, rtol=0, atol=0)  # train mode, yet no gate noise
    resumed = TrainingRun(cfg)
    resumed.load_state_dict(run.state_dict())  # a restored freeze fixes the gates again
    assert all(norm.selector_frozen for _, norm in gated_norms(resumed.model))
