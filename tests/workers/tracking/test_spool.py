import math
import os

from mlflow.entities import Metric

from workers.tracking.spool import RunJournal, TrialRunIdentity, journal_paths, read_spooled_run

IDENTITY = TrialRunIdentity(
    tracking_uri="http://127.0.0.1:5000",
    experiment_id="3",
    trial_key="s1/final/dyt/seed0",
    tags={"normlab.trial_key": "s1/final/dyt/seed0", "normlab.seed": "0"},
    params={"lr": "0.001", "knobs.alpha": "0.5"},
)


def metrics(step: int, **values: float) -> list[Metric]:
    return [Metric(key=k, value=v, timestamp=1_000 + step, step=step) for k, v in values.items()]


def test_a_journal_reads_back_its_run_every_metric_with_its_timestamp_and_the_closing_status(tmp_path):
    journal = RunJournal.create(tmp_path, IDENTITY)
    journal.append_metrics(metrics(0, objective=0.1, train_loss=2.0))
    journal.append_metrics(metrics(1, objective=0.4, train_loss=float("nan")))
    journal.record_status("FINISHED")
    journal.release()

    spooled = read_spooled_run(journal.path)
    assert spooled.identity == IDENTITY
    assert spooled.status == "FINISHED"
    assert [(m.key, m.step, m.timestamp) for m in spooled.metrics] == [
        ("objective", 0, 1000), ("train_loss", 0, 1000), ("objective", 1, 1001), ("train_loss", 1, 1001),
    ]  # fmt: skip
    assert spooled.metrics[0].value == 0.1 and math.isnan(spooled.metrics[3].value)


def test_a_journal_without_a_status_is_one_whose_trial_has_not_closed(tmp_path):
    journal = RunJournal.create(tmp_path, IDENTITY)
    journal.append_metrics(metrics(0, objective=0.1))
    assert read_spooled_run(journal.path).status is None  # readable while its tracker still writes


def test_a_live_journal_cannot_be_claimed_until_its_tracker_releases_it(tmp_path):
    journal = RunJournal.create(tmp_path, IDENTITY)
    assert RunJournal.claim(journal.path) is None
    journal.release()
    claimed = RunJournal.claim(journal.path)
    assert claimed is not None
    assert RunJournal.claim(journal.path) is None  # one courier at a time
    claimed.discard()
    assert not journal.path.exists() and journal_paths(tmp_path) == []


def test_claiming_a_journal_that_was_delivered_meanwhile_does_not_bring_it_back(tmp_path):
    journal = RunJournal.create(tmp_path, IDENTITY)
    path = journal.path
    journal.discard()
    assert RunJournal.claim(path) is None
    assert not path.exists()


def test_journals_are_listed_oldest_first_and_a_half_created_one_is_not_listed(tmp_path):
    first = RunJournal.create(tmp_path, IDENTITY)
    second = RunJournal.create(tmp_path, IDENTITY)
    (tmp_path / "abc-123.staging").write_text("")
    os.utime(second.path, (2, 2))
    os.utime(first.path, (1, 1))
    assert journal_paths(tmp_path) == [first.path, second.path]
    assert journal_paths(tmp_path / "missing") == []


def test_a_line_torn_by_a_killed_process_is_ignored(tmp_path):
    journal = RunJournal.create(tmp_path, IDENTITY)
    journal.append_metrics(metrics(0, objective=0.1))
    journal.release()
    with journal.path.open("a") as handle:
        handle.write('{"metrics": [["objective", 0.2, 10')
    spooled = read_spooled_run(journal.path)
    assert [(m.key, m.step) for m in spooled.metrics] == [("objective", 0)]


def test_writes_after_the_journal_was_discarded_are_ignored(tmp_path):
    journal = RunJournal.create(tmp_path, IDENTITY)
    journal.discard()
    journal.append_metrics(metrics(0, objective=0.1))
    journal.record_status("FAILED")
    assert journal_paths(tmp_path) == []
