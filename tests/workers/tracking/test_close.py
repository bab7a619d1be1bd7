"""A trial's end never waits on MLflow beyond CLOSE_TIMEOUT_S; what MLflow has not taken is journaled and
delivered later. Unit tests of workers.tracking.tracker against a stand-in client that hangs like a paused server
(the real server, paused with SIGSTOP: test_tracking_outage)."""

import threading
import time
import uuid
from types import SimpleNamespace

import pytest

from workers.tracking.deadline import TrackingTimeoutError
from workers.tracking.spool import RunJournal, journal_paths, read_spooled_run
from workers.tracking.tracker import CLOSE_TIMEOUT_S, TrialTracker, close_trackers, find_trial_run

# Slack for thread wake-ups on a loaded machine; far below the many minutes a paused server costs.
SLACK_S = 2.0


class HangingMlflow:
    """An in-memory MlflowClient stand-in whose every call blocks while the server is `paused`, as a call to
    a stopped process does (the connection is accepted, no answer comes), and fails while it is `down`."""

    def __init__(self):
        self.answering = threading.Event()
        self.answering.set()
        self.held = threading.Event()  # set once a call waits on the paused server
        self.down = False
        self.tracking_uri = "http://mlflow.test"
        self.runs = {}
        self.metrics = []

    def pause(self):
        self.answering.clear()

    def resume(self):
        self.answering.set()

    def _wait(self):
        if not self.answering.is_set():
            self.held.set()
        self.answering.wait()
        if self.down:
            raise ConnectionError("connection refused")

    def search_runs(self, experiment_ids, filter_string, **kwargs):
        self._wait()
        return [run for run in self.runs.values() if filter_string.endswith(f"'{run.key}'")]

    def create_run(self, experiment_id, tags, run_name):
        self._wait()
        run = SimpleNamespace(
            key=tags["normlab.trial_key"],
            info=SimpleNamespace(run_id=uuid.uuid4().hex, status="RUNNING"),
            data=SimpleNamespace(params={}),
        )
        self.runs[run.info.run_id] = run
        return run

    def log_batch(self, run_id, metrics=(), params=(), synchronous=None):
        self._wait()
        self.metrics.extend(metrics)
        self.runs[run_id].data.params.update({p.key: p.value for p in params})

    def get_metric_history(self, run_id, key):
        self._wait()
        return [m for m in self.metrics if m.key == key]

    def update_run(self, run_id, status):
        self._wait()
        self.runs[run_id].info.status = status

    def set_terminated(self, run_id, status):
        self._wait()
        self.runs[run_id].info.status = status


def tracker(client, key="s1/tune/dyt/seed0", **options):
    return TrialTracker(
        tracking_uri=client.tracking_uri,
        experiment_id="1",
        trial_key=key,
        params={"lr": "0.1"},
        client=client,
        flush_interval_s=0.2,
        **options,
    )


def claimable(path) -> bool:
    journal = RunJournal.claim(path)
    if journal is None:
        return False
    journal.release()
    return True


def wait_for(predicate, timeout_s=10.0):
    deadline = time.monotonic() + timeout_s
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.05)
    return predicate()


def test_a_trial_ends_within_the_close_bound_while_mlflow_hangs_and_its_run_completes_afterwards(tmp_path):
    client = HangingMlflow()
    trial = tracker(client, spool_dir=tmp_path).start()
    client.pause()
    for epoch in range(3):
        trial.log_metrics({"epoch": epoch, "objective": 0.1 * epoch}, step=epoch)

    started = time.monotonic()
    assert trial.close("FINISHED") is False
    assert time.monotonic() - started < CLOSE_TIMEOUT_S + SLACK_S
    # Everything the trial logged and its status are on disk, the journal still the tracker's.
    spooled = read_spooled_run(trial.journal_path)
    assert spooled.status == "FINISHED"
    assert sorted((m.key, m.step) for m in spooled.metrics) == [
        ("epoch", 0), ("epoch", 1), ("epoch", 2), ("objective", 0), ("objective", 1), ("objective", 2),
    ]  # fmt: skip
    assert RunJournal.claim(trial.journal_path) is None

    client.resume()
    assert wait_for(lambda: journal_paths(tmp_path) == [])  # delivered by the tracker's own thread
    (run,) = client.runs.values()
    assert run.info.status == "FINISHED" and run.data.params == {"lr": "0.1"}
    assert sorted(m.step for m in client.metrics if m.key == "objective") == [0, 1, 2]


def test_the_seeds_of_a_trial_close_within_one_bound_not_one_each():
    client = HangingMlflow()
    trackers = [tracker(client, key=f"s1/final/dyt/seed{seed}").start() for seed in range(4)]
    client.pause()
    for seed_tracker in trackers:
        seed_tracker.log_metrics({"objective": 0.5}, step=0)
    started = time.monotonic()
    assert close_trackers(trackers, "FINISHED", timeout_s=1.0) is False
    assert time.monotonic() - started < 1.0 + SLACK_S
    client.resume()
    assert wait_for(lambda: all(run.info.status == "FINISHED" for run in client.runs.values()))
    assert len(client.runs) == 4


def test_without_a_spool_the_close_is_still_bounded_and_the_run_completes_while_the_process_lives():
    client = HangingMlflow()
    trial = tracker(client).start()
    client.pause()
    trial.log_metrics({"objective": 0.5}, step=0)
    assert trial.close("FAILED", timeout_s=0.5) is False and trial.journal_path is None
    client.resume()
    assert trial.wait_closed(10.0)
    assert client.runs[trial.run_id].info.status == "FAILED"


def test_a_tracker_that_gives_up_leaves_its_journal_to_a_later_delivery(tmp_path):
    client = HangingMlflow()
    client.down = True
    trial = tracker(client, spool_dir=tmp_path, background_delivery_s=0.5).start(resolve_timeout_s=0)
    trial.log_metrics({"objective": 0.5}, step=0)
    path = trial.journal_path
    assert trial.close("FINISHED", timeout_s=0.2) is False
    assert wait_for(lambda: claimable(path))  # unlocked: a later delivery may take it
    spooled = read_spooled_run(path)
    assert spooled.status == "FINISHED" and [m.step for m in spooled.metrics] == [0]


def test_metrics_dropped_from_a_full_queue_stay_in_the_journal_after_the_rest_was_delivered(tmp_path):
    client = HangingMlflow()
    trial = tracker(client, spool_dir=tmp_path, max_queue=1).start()
    client.pause()
    trial.log_metrics({"objective": 0.0}, step=0)
    # The tracker's thread delivers epoch 0 and hangs on the paused server: its queue of one then overflows.
    threading.Thread(target=trial.flush, kwargs={"timeout_s": 10.0}, daemon=True).start()
    assert client.held.wait(10.0)
    for epoch in range(1, 5):
        trial.log_metrics({"objective": float(epoch)}, step=epoch)
    client.resume()
    assert trial.close("FINISHED", timeout_s=10.0)
    (path,) = journal_paths(tmp_path)
    assert sorted(m.step for m in read_spooled_run(path).metrics) == [0, 1, 2, 3, 4]


def test_a_spool_that_cannot_be_written_leaves_tracking_in_memory(tmp_path):
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    client = HangingMlflow()
    trial = tracker(client, spool_dir=blocker / "spool").start()
    trial.log_metrics({"objective": 0.5}, step=0)
    assert trial.journal_path is None
    assert trial.close("FINISHED")
    assert [m.step for m in client.metrics] == [0]


def test_a_run_lookup_gives_up_after_its_bound_and_fails_at_once_until_mlflow_answers():
    client = HangingMlflow()
    client.pause()
    started = time.monotonic()
    with pytest.raises(TrackingTimeoutError):
        find_trial_run(client, "1", "s1/tune/dyt/seed0", timeout_s=0.5)
    assert time.monotonic() - started < 0.5 + SLACK_S
    started = time.monotonic()
    with pytest.raises(TrackingTimeoutError):  # e.g. the next seed of a finished trial
        find_trial_run(client, "1", "s1/tune/dyt/seed1", timeout_s=5.0)
    assert time.monotonic() - started < 0.5
    client.resume()

    def answers() -> bool:
        try:
            return find_trial_run(client, "1", "s1/tune/dyt/seed1", timeout_s=1.0) is None
        except TrackingTimeoutError:  # the earlier lookup is still on its way back
            return False

    assert wait_for(answers)
