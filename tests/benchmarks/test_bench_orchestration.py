"""The orchestration benchmark's arithmetic: wall vs ideal, per-trial overhead and its per-phase split."""

from __future__ import annotations

import json

import pytest

from benchmarks.bench_orchestration import (
    EpochReport,
    StudyFigures,
    TrialTimeline,
    services_section,
    study_figures,
    study_section,
    trial_processes,
)


def _trial(key: str, start: float, reports: list[tuple[float, float]], end: float) -> TrialTimeline:
    """reports: (arrival time, epoch_time_s) for epochs 0, 1, 2, ..."""
    epochs = tuple(EpochReport(e, at, took) for e, (at, took) in enumerate(reports))
    return TrialTimeline(key=key, phase="final", started_at=start, ended_at=end, epochs=epochs)


# Started at 10; setup until the epoch-0 report began at 13.5 (it took 0.5 s, arrived at 14); epochs of
# 2 s and 3 s arrived at 16.5 and 19.7 (0.5 s and 0.2 s of reporting each); completed at 20.
TRIAL = _trial("a", 10.0, [(14.0, 0.5), (16.5, 2.0), (19.7, 3.0)], 20.0)


def test_a_trials_time_outside_training_splits_into_setup_epoch0_reporting_and_close():
    phases = TRIAL.phases()
    assert phases == pytest.approx({"setup": 3.5, "epoch0_report": 0.5, "epoch_reporting": 0.7, "close": 0.3})
    assert TRIAL.training_s == pytest.approx(5.0)  # epochs 1..E only: the epoch-0 report is overhead
    assert sum(phases.values()) + TRIAL.training_s == pytest.approx(TRIAL.ended_at - TRIAL.started_at)


def test_study_figures_add_up_to_slot_time_and_compare_the_wall_with_the_ideal():
    other = _trial("b", 12.0, [(13.0, 0.2), (21.0, 7.8)], 22.0)
    figures = study_figures([TRIAL, other], submitted_at=3.0, finished_at=28.0, slots=2, processes=1)
    assert figures.wall_s == pytest.approx(25.0) and figures.training_s == pytest.approx(12.8)
    assert figures.ideal_s == pytest.approx(6.4) and figures.ratio == pytest.approx(25.0 / 6.4)
    assert figures.overhead_per_trial_s == pytest.approx((2 * 25.0 - 12.8) / 2)
    # Idle slot time (50 - two spans of 10 s): 2 x 7 s before the first trial, 2 x 6 s after the last,
    # and 2 s between (trial b started 2 s after trial a on the other slot, which idled 2 s at the end).
    assert figures.phase_totals["study_start"] == pytest.approx(14.0)
    assert figures.phase_totals["study_close"] == pytest.approx(12.0)
    assert figures.phase_totals["between_trials"] == pytest.approx(4.0)
    assert sum(figures.phase_totals.values()) == pytest.approx(2 * 25.0 - 12.8)


def test_a_study_without_trials_has_no_figures():
    with pytest.raises(ValueError, match="without trials"):
        study_figures([], submitted_at=0.0, finished_at=1.0, slots=2)


def test_the_report_names_the_ratio_the_overhead_and_every_phase():
    figures = StudyFigures(
        wall_s=100.0,
        slots=2,
        trials=4,
        training_s=120.0,
        processes=2,
        phase_totals={"study_start": 40.0, "setup": 20.0, "close": 20.0},
    )
    text = study_section(figures, "quick-digits")
    assert "**1.67x** its ideal" in text and "**20.0 s** per trial" in text and "2 trial processes" in text
    assert "| 10.00 |" in text and "| 5.00 |" in text  # study start and setup, per trial


def test_trial_processes_counts_distinct_pids_in_tunes_result_files(tmp_path):
    for trial, pids in {"t1": [7, 7], "t2": [7], "t3": [9]}.items():
        path = tmp_path / "tune" / trial / "result.json"
        path.parent.mkdir(parents=True)
        path.write_text("".join(json.dumps({"pid": pid}) + "\n" for pid in pids))
    assert trial_processes(tmp_path) == 2
    assert trial_processes(tmp_path / "missing") is None


def test_the_services_table_lists_every_study_of_each_service_in_order():
    def figures(wall: float, cpu: float | None = 32.0) -> StudyFigures:
        return StudyFigures(wall_s=wall, slots=2, trials=4, training_s=40.0, processes=2, training_cpu_s=cpu)

    text = services_section(
        {"warm trial hosts": [figures(30.0), figures(24.0)], "no trial hosts": [figures(36.0, None)]}, "quick"
    )
    rows = [line for line in text.splitlines() if line.startswith("| warm") or line.startswith("| no")]
    assert rows == [
        "| warm trial hosts | first, right after `normlab serve` came up | 30.0 | 20.0 | 1.50x | 1.88x | 5.0 |",
        "| warm trial hosts | second | 24.0 | 20.0 | 1.20x | 1.50x | 2.0 |",
        "| no trial hosts | first, right after `normlab serve` came up | 36.0 | 20.0 | 1.80x | n/a | 8.0 |",
    ]


def test_the_cpu_ideal_counts_the_training_threads_cpu_time_and_is_unknown_when_a_trial_lacks_it():
    def trial(key: str, cpu: list[float | None]) -> TrialTimeline:
        # Epochs of 2 s wall each; the epoch-0 report (index 0) never counts as training.
        epochs = tuple(EpochReport(e, 1.0 + 2 * e, 2.0, c) for e, c in enumerate(cpu))
        return TrialTimeline(key=key, phase="final", started_at=0.0, ended_at=10.0, epochs=epochs)

    measured = [trial("a", [9.0, 1.5, 1.5]), trial("b", [None, 1.0, 1.0])]
    figures = study_figures(measured, submitted_at=0.0, finished_at=10.0, slots=2)
    assert figures.ideal_s == pytest.approx(4.0) and figures.cpu_ideal_s == pytest.approx(2.5)
    assert figures.cpu_ratio == pytest.approx(4.0) and "4.00x the ideal from" in study_section(figures, "q")
    unknown = study_figures([*measured, trial("c", [0.5, None])], submitted_at=0.0, finished_at=10.0, slots=2)
    assert unknown.cpu_ideal_s is None and unknown.cpu_ratio is None
