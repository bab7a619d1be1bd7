"""The history the driver's MLflow finalisation reads back from Tune's record of a trial."""

from __future__ import annotations

import pandas as pd
import pytest

from workers.driver.finalize import reported_history


def test_a_retried_trials_repeated_epochs_keep_their_last_report_once_each_in_epoch_order():
    # Attempt 1 reported epochs 0..3 and died; attempt 2 resumed from its epoch-1 checkpoint.
    frame = pd.DataFrame(
        [{"epoch": e, "objective": 0.1 * e, "time_total_s": 1.0, "trial_id": "t"} for e in range(4)]
        + [{"epoch": e, "objective": 0.2 * e, "time_total_s": 2.0, "trial_id": "t"} for e in range(2, 5)]
    )
    rows = reported_history(frame)
    assert [row["epoch"] for row in rows] == [0, 1, 2, 3, 4]
    # Epochs 2 and 3 as attempt 2 reported them.
    assert [row["objective"] for row in rows] == pytest.approx([0.0, 0.1, 0.4, 0.6, 0.8])
    assert all(set(row) == {"epoch", "objective"} for row in rows)  # Tune's bookkeeping left out


def test_a_trial_without_a_recorded_history_has_none():
    assert reported_history(None) == []
