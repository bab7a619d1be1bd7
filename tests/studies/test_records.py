"""TrialRecord, and the small deterministic CIFAR-like study the other table tests share."""

from __future__ import annotations

from studies.tables import COMPLETED_STATUSES, FAILED_STATUSES, TrialRecord

REFERENCE_ACC = [0.830, 0.826, 0.842, 0.818, 0.835, 0.829]
# Clearly better on every seed, with a little seed-to-seed wobble in the gain.
BETTER_ACC = [v + g for v, g in zip(REFERENCE_ACC, [0.011, 0.009, 0.012, 0.010, 0.008, 0.011], strict=True)]
# Clearly worse on every seed.
WORSE_ACC = [v - g for v, g in zip(REFERENCE_ACC, [0.020, 0.018, 0.022, 0.019, 0.021, 0.020], strict=True)]
# Indistinguishable: gains of both signs.
NOISE_ACC = [v + g for v, g in zip(REFERENCE_ACC, [0.004, -0.003, 0.001, -0.004, 0.002, -0.001], strict=True)]


def records_for(method: str, values: list[float | None], *, study_id: str = "s1", group: str | None = None):
    return [
        TrialRecord(
            study_id=study_id,
            method=method,
            seed=seed,
            value=value,
            status="succeeded" if value is not None else "failed",
            mlflow_run_id=f"{method}-{group or ''}-{seed}",
            group=group,
        )
        for seed, value in enumerate(values)
    ]


def cifar_records() -> list[TrialRecord]:
    return (
        records_for("autonorm_s", BETTER_ACC)
        + records_for("frozen_ln", REFERENCE_ACC)
        + records_for("film", WORSE_ACC)
        + records_for("dyt", NOISE_ACC)
    )


def test_a_row_label_is_the_method_or_method_and_grid_point() -> None:
    assert TrialRecord("s1", "dyt", 0, 0.8, "succeeded").label == "dyt"
    assert TrialRecord("s1", "autonorm", 0, 0.8, "succeeded", group="tau=0.5").label == "autonorm [tau=0.5]"


def test_store_statuses_map_onto_completed_and_failed() -> None:
    assert "succeeded" in COMPLETED_STATUSES and "failed" in FAILED_STATUSES
    assert "running" not in COMPLETED_STATUSES | FAILED_STATUSES
    assert "cancelled" not in COMPLETED_STATUSES | FAILED_STATUSES


def test_the_shared_records_cover_four_methods_on_six_seeds() -> None:
    records = cifar_records()
    assert len(records) == 24
    assert {r.method for r in records} == {"autonorm_s", "frozen_ln", "film", "dyt"}
