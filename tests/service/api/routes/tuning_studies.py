"""Studies with tune (or grid) trials recorded straight through the store, for the tuning views of
GET /results and /studies/{id}/report: a tuned study whose eps_h drives the objective (trial 2 is the best,
trial 5 failed), and a sweep of eps_h x t_freeze on two seeds."""

from __future__ import annotations

from tests.factories import add_trial, digits_spec, submit

TUNED = digits_spec(
    name="tuned",
    methods=["autonorm_s", "frozen_ln"],
    num_samples=8,
    method_search={
        "autonorm_s": {
            "eps_h": {"type": "uniform", "low": 0.05, "high": 0.2},
            "t_freeze": {"type": "int", "low": 1, "high": 3},
        }
    },
    epochs=4,
    batch_size=32,
)
SWEEP = digits_spec(
    name="sweep",
    kind="grid",
    methods=["autonorm_s"],
    method_search={
        "autonorm_s": {
            "eps_h": {"type": "grid", "values": [0.05, 0.1, 0.2]},
            "t_freeze": {"type": "grid", "values": [1, 2]},
        }
    },
    epochs=4,
    batch_size=32,
)


def record(engine, study_id, key, *, phase, method, seed, knobs, value, status="succeeded"):
    add_trial(
        engine,
        study_id,
        f"{study_id}/{key}",
        phase=phase,
        method=method,
        config={"method": method, "seed": seed, "knobs": knobs},
        seed=seed,
        status=status,
        metrics={"objective": value, "epoch": 4} if value is not None else {},
        metric_value=value,
    )


def finals(engine, study_id, methods, *, seeds=(0, 1), value=0.9, per_seed=0.0):
    """A final trial of each method on each seed, scoring `value + per_seed * seed`."""
    for method in methods:
        for seed in seeds:
            record(
                engine,
                study_id,
                f"final/{method}/{seed}",
                phase="final",
                method=method,
                seed=seed,
                knobs={},
                value=value + per_seed * seed,
            )


def tuned_study_of(client, app_engine) -> str:
    """A tuned study: 8 tune trials of autonorm_s on eps_h x t_freeze, and final trials of both methods."""
    study_id = submit(client, TUNED)
    for i in range(8):
        eps_h, t_freeze = 0.05 + 0.02 * i, 1 + i % 3
        value = 0.9 - 10 * (eps_h - 0.1) ** 2
        status = "failed" if i == 5 else "succeeded"
        knobs = {"eps_h": eps_h, "t_freeze": t_freeze}
        record(
            app_engine,
            study_id,
            f"tune/{i}",
            phase="tune",
            method="autonorm_s",
            seed=2,
            knobs=knobs,
            value=None if status == "failed" else value,
            status=status,
        )
    finals(app_engine, study_id, ["autonorm_s", "frozen_ln"])
    return study_id
