"""The AutoNorm mechanism summary (studies.evidence.mechanism): per method and seed, whether and when the
freeze fired, the entropy trajectory, the selector gradient variance, and the knobs the trial ran with."""

from __future__ import annotations

import json

from studies.claims.trials import StudyData, TrialData
from studies.evidence import mechanism_summary
from studies.evidence.mechanism import ENTROPY_KEYS, SELECTOR_GRAD_VAR, seed_mechanism

EPOCHS = 4


def history(entropies, variances, freeze_epoch=None, signal="train"):
    """Epoch 0 (no training: no train entropy, no variance), then one row per trained epoch, as the loop
    reports them; a variance of None is left out of the row (a frozen epoch)."""
    rows = [{"epoch": 0, "gate_entropy_mean": 0.693, "gates_frozen": 0, "freeze_epoch": -1}]
    for epoch, (entropy, variance) in enumerate(zip(entropies, variances, strict=True), start=1):
        frozen = freeze_epoch is not None and epoch >= freeze_epoch
        row = {
            "epoch": epoch,
            "train_gate_entropy_mean": entropy if signal == "train" else entropy + 0.01,
            "gate_entropy_mean": entropy if signal == "val" else entropy + 0.01,
            "gates_frozen": int(frozen),
            "freeze_epoch": freeze_epoch if frozen else -1,
        }
        if variance is not None:
            row[SELECTOR_GRAD_VAR] = variance
        rows.append(row)
    return tuple(rows)


def trial(method, seed, rows, knobs=None, status="succeeded", group=None):
    return TrialData(
        method=method,
        seed=seed,
        status=status,
        value=0.9,
        metrics=rows[-1] if rows else {},
        group=group,
        knobs=knobs or {},
        history=rows,
        trial_key=f"{method}/{group}/{seed}",
    )


FROZE = trial(
    "autonorm_s",
    0,
    history([0.69, 0.68, 0.68, 0.67], [1e-3, 2e-3, None, None], freeze_epoch=2),
    knobs={"t_freeze": 2, "eps_h": 0.1, "tau": 0.5},
)
DIPPED = trial(
    "autonorm_s",
    1,
    history([0.5, 0.05, 0.2, 0.3], [1e-3, 5e-4, 4e-4, 3e-4]),
    knobs={"t_freeze": 2, "eps_h": 0.1, "tau": 0.5, "post_freeze_gate": "hard"},
)
PLAIN = trial("autonorm", 0, history([0.6, 0.5, 0.4, 0.3], [1e-2, 1e-2, 1e-2, 1e-2]), knobs={"tau": 0.5})
BASELINE = trial("frozen_ln", 0, ({"epoch": 0, "gates_frozen": 0, "freeze_epoch": -1},))
STUDY = StudyData("digits", "test_accuracy", True, "frozen_ln", (DIPPED, FROZE, PLAIN, BASELINE))


def test_the_summary_has_one_entry_per_gated_method_and_one_per_seed_in_seed_order():
    summary = mechanism_summary(STUDY)
    assert [m.label for m in summary.methods] == ["autonorm_s", "autonorm"]
    autonorm_s = summary.method("autonorm_s")
    assert autonorm_s is not None and [s.seed for s in autonorm_s.seeds] == [0, 1]
    assert autonorm_s.n_frozen == 1 and autonorm_s.freeze_epochs == {0: 2, 1: None}
    assert summary.method("frozen_ln") is None  # no gate, no mechanism
    assert mechanism_summary(list(STUDY.trials)) == summary  # a plain list of trials works alike


def test_a_seed_that_froze_shows_when_its_trajectory_and_its_knobs():
    seed = seed_mechanism(FROZE)
    assert (seed.froze, seed.freeze_epoch, seed.freeze_decided) == (True, 2, True)
    assert seed.epochs == (0, 1, 2, 3, 4)
    assert seed.entropy_key == ENTROPY_KEYS["train"] == "train_gate_entropy_mean"
    assert seed.entropy == (None, 0.69, 0.68, 0.68, 0.67)  # the training reading: none before epoch 1
    # No selector trained after the freeze: absent, never a 0.
    assert seed.selector_grad_var == (None, 1e-3, 2e-3, None, None)
    assert seed.series("selector_grad_var") == [(1, 1e-3), (2, 2e-3)]
    assert (seed.eps_h, seed.t_freeze, seed.post_freeze_gate) == (0.1, 2, "sample")
    assert seed.defaulted == ("freeze_signal", "freeze_scope", "post_freeze_gate")


def test_a_seed_whose_entropy_dipped_below_eps_h_never_froze():
    seed = seed_mechanism(DIPPED)
    assert (seed.froze, seed.freeze_epoch, seed.freeze_decided) == (False, None, True)
    assert seed.post_freeze_gate == "hard" and "post_freeze_gate" not in seed.defaulted
    assert seed.selector_grad_var[1:] == (1e-3, 5e-4, 4e-4, 3e-4)


def test_plain_autonorm_has_no_freeze_schedule():
    seed = seed_mechanism(PLAIN)
    assert (seed.froze, seed.freeze_epoch, seed.freeze_decided) == (False, None, None)
    assert (seed.eps_h, seed.t_freeze, seed.freeze_signal, seed.post_freeze_gate) == (None,) * 4
    assert seed.defaulted == ()
    assert seed.selector_grad_var[1:] == (1e-2,) * 4


def test_unset_knobs_take_the_training_defaults_and_say_so():
    seed = seed_mechanism(trial("autonorm_s", 0, history([0.6] * EPOCHS, [1e-3] * EPOCHS)))
    assert (seed.eps_h, seed.t_freeze, seed.freeze_scope) == (0.1, 10, "global")
    assert {"eps_h", "t_freeze"} <= set(seed.defaulted)
    assert seed.freeze_decided is False  # four epochs never reach the default T_freeze of 10


def test_the_trajectory_follows_the_trials_freeze_signal_or_falls_back_and_says_which():
    val = trial(
        "autonorm_s", 0, history([0.6] * EPOCHS, [1e-3] * EPOCHS, signal="val"), {"freeze_signal": "val"}
    )
    seed = seed_mechanism(val)
    assert seed.entropy_key == "gate_entropy_mean" and seed.entropy == (0.693, 0.6, 0.6, 0.6, 0.6)
    older = [{k: v for k, v in row.items() if k != "train_gate_entropy_mean"} for row in FROZE.history]
    seed = seed_mechanism(trial("autonorm_s", 0, tuple(older), {"t_freeze": 2}))
    assert seed.entropy_key == "gate_entropy_mean"  # a run from before the training-batch reading


def test_grid_points_are_rows_of_their_own_with_knobs_read_from_the_label():
    rows = history([0.6] * EPOCHS, [1e-3] * EPOCHS)
    trials = [
        trial("autonorm_s", s, rows, group=f"eps_h={eps},t_freeze=2") for eps in (0.05, 0.2) for s in (0, 1)
    ]
    summary = mechanism_summary(trials)
    assert [m.label for m in summary.methods] == [
        "autonorm_s [eps_h=0.05,t_freeze=2]",
        "autonorm_s [eps_h=0.2,t_freeze=2]",
    ]
    assert [s.eps_h for m in summary.methods for s in m.seeds] == [0.05, 0.05, 0.2, 0.2]
    assert all(s.t_freeze == 2 and "eps_h" not in s.defaulted for m in summary.methods for s in m.seeds)


def test_unfinished_trials_are_left_out_unless_asked_for_and_then_are_undecided():
    stopped = trial("autonorm_s", 2, history([0.6], [1e-3]), {"t_freeze": 2}, status="failed")
    assert [s.seed for s in mechanism_summary([FROZE, stopped]).methods[0].seeds] == [0]
    seeds = mechanism_summary([FROZE, stopped], include_incomplete=True).methods[0].seeds
    assert [(s.seed, s.completed, s.froze, s.freeze_decided) for s in seeds] == [
        (0, True, True, True),
        (2, False, False, False),  # stopped before T_freeze: not evidence of "did not freeze"
    ]


def test_a_history_less_trial_reads_its_last_metrics_and_a_repeated_epoch_keeps_the_last_report():
    last = {"epoch": 4, "gates_frozen": 1, "freeze_epoch": 2, "train_gate_entropy_mean": 0.6}
    seed = seed_mechanism(TrialData("autonorm_s", 0, "succeeded", 0.9, metrics=last, knobs={"t_freeze": 2}))
    assert (seed.epochs, seed.froze, seed.freeze_epoch, seed.entropy) == ((4,), True, 2, (0.6,))
    resumed = (*FROZE.history, {**FROZE.history[-1], "train_gate_entropy_mean": 0.5})
    assert seed_mechanism(trial("autonorm_s", 0, resumed, {"t_freeze": 2})).entropy[-1] == 0.5


def test_the_summary_serialises_to_json():
    data = mechanism_summary(STUDY).to_json()
    assert json.loads(json.dumps(data)) == data
    first = data["methods"][0]
    assert first["label"] == "autonorm_s" and first["n_frozen"] == 1
    assert first["seeds"][0]["selector_grad_var"] == [None, 1e-3, 2e-3, None, None]


def test_an_unreadable_knob_is_unknown_rather_than_guessed():
    assert seed_mechanism(trial("autonorm_s", 0, FROZE.history, {"t_freeze": "ten"})).t_freeze is None
    assert seed_mechanism(trial("autonorm_s", 0, FROZE.history, {"eps_h": "x"})).eps_h is None
