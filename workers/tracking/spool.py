"""The tracking spool: each trial tracker's journal of what it logged, kept on disk until MLflow holds it.

A tracker appends every metric to its journal before queueing it for MLflow, and the status its trial
closed with, so neither a tracking outage nor the death of the trial process loses them. The tracker
removes its journal once MLflow holds everything; otherwise the journal stays in the spool directory for
later delivery (workers.tracking.delivery). A tracker holds an exclusive lock (flock) on its journal for as
long as it may still write or deliver it: an unlocked journal belongs to a tracker that gave it up, or to
a process that died, and whoever claims it may deliver it.

One file per tracker, `<digest of the trial key>-<unique id>.jsonl`, JSON lines:

    {"run": {"tracking_uri": ..., "experiment_id": ..., "trial_key": ..., "tags": {...}, "params": {...}}}
    {"metrics": [[key, value, timestamp_ms, step], ...]}      one line per logged batch
    {"status": "FINISHED"}                                     once the trial has closed

Metrics keep the timestamp they were logged with: MLflow stores a metric identical in key, value,
timestamp and step only once, so delivering a journal again (or after its tracker delivered part of it)
adds nothing twice.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import threading
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from mlflow.entities import Metric

__all__ = [
    "SPOOL_DIR_NAME",
    "RunJournal",
    "SpooledRun",
    "TrialRunIdentity",
    "journal_paths",
    "read_spooled_run",
]

logger = logging.getLogger(__name__)

# The spool's directory under a node's data directory (NORMLAB_DATA_DIR).
SPOOL_DIR_NAME = "mlflow_spool"
_SUFFIX = ".jsonl"
_STAGING_SUFFIX = ".staging"
_REFUSED_SUFFIX = ".refused"


@dataclass(frozen=True)
class TrialRunIdentity:
    """Everything needed to find or create a trial's MLflow run without the trial."""

    tracking_uri: str
    experiment_id: str
    trial_key: str
    tags: Mapping[str, str] = field(default_factory=dict)
    params: Mapping[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "tracking_uri": self.tracking_uri,
            "experiment_id": self.experiment_id,
            "trial_key": self.trial_key,
            "tags": dict(self.tags),
            "params": dict(self.params),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TrialRunIdentity:
        return cls(
            tracking_uri=str(data["tracking_uri"]),
            experiment_id=str(data["experiment_id"]),
            trial_key=str(data["trial_key"]),
            tags={str(k): str(v) for k, v in data.get("tags", {}).items()},
            params={str(k): str(v) for k, v in data.get("params", {}).items()},
        )


@dataclass(frozen=True)
class SpooledRun:
    """A journal's contents: the run, its metrics in logging order, and the status it closed with (None:
    the trial has not closed, or its process died before it could)."""

    identity: TrialRunIdentity
    metrics: list[Metric]
    status: str | None


class RunJournal:
    """One tracker's journal file, locked while open. Thread-safe: the training thread appends the metrics it
    logs, the tracker's sender thread its backfilled epochs. Methods raise OSError when the disk fails."""

    def __init__(self, path: Path, handle: IO[str]) -> None:
        self._path = path
        self._handle: IO[str] | None = handle
        self._lock = threading.Lock()

    @property
    def path(self) -> Path:
        return self._path

    @classmethod
    def create(cls, spool_dir: str | os.PathLike[str], identity: TrialRunIdentity) -> RunJournal:
        """A new locked journal in `spool_dir` that starts with `identity`."""
        directory = Path(spool_dir)
        directory.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha256(identity.trial_key.encode()).hexdigest()[:16]
        stem = f"{digest}-{uuid.uuid4().hex}"
        staging = directory / f"{stem}{_STAGING_SUFFIX}"
        handle = staging.open("x", encoding="utf-8")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            handle.write(json.dumps({"run": identity.to_json()}) + "\n")
            handle.flush()
            path = directory / f"{stem}{_SUFFIX}"
            # Renamed only once locked and complete: a courier never sees a journal without its run.
            staging.rename(path)
        except BaseException:
            handle.close()
            with contextlib.suppress(OSError):
                staging.unlink()
            raise
        return cls(path, handle)

    @classmethod
    def claim(cls, path: str | os.PathLike[str]) -> RunJournal | None:
        """The journal at `path`, locked for its delivery; None while its tracker (or another courier) holds
        it, or when it is gone."""
        journal_path = Path(path)
        try:
            # Without O_CREAT: a journal delivered since it was listed must not come back empty.
            handle = os.fdopen(os.open(journal_path, os.O_WRONLY | os.O_APPEND), "a", encoding="utf-8")
        except FileNotFoundError:
            return None
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            # Removed (and maybe recreated) between our open and our lock: not the file we hold.
            if os.fstat(handle.fileno()).st_ino != journal_path.stat().st_ino:
                raise FileNotFoundError(journal_path)
        except (BlockingIOError, FileNotFoundError):
            handle.close()
            return None
        except BaseException:
            handle.close()
            raise
        return cls(journal_path, handle)

    def read(self) -> SpooledRun | None:
        """What the journal holds (None when its first line is unreadable)."""
        return read_spooled_run(self._path)

    def append_metrics(self, metrics: Iterable[Metric]) -> None:
        rows = [[m.key, m.value, m.timestamp, m.step] for m in metrics]
        if rows:
            self._write({"metrics": rows}, sync=False)

    def record_status(self, status: str) -> None:
        """The status the trial closed with, synced to disk: from here on the journal is complete."""
        self._write({"status": status}, sync=True)

    def discard(self) -> None:
        """MLflow holds everything: remove the journal (then unlock it)."""
        with self._lock:
            if self._handle is None:
                return
            with contextlib.suppress(FileNotFoundError):
                self._path.unlink()
            self._close()

    def set_aside(self) -> Path:
        """MLflow refused this journal (its experiment is gone, say): rename it out of the spool, kept for a
        person to read, so that it no longer blocks the journals after it."""
        with self._lock:
            aside = self._path.with_suffix(_REFUSED_SUFFIX)
            if self._handle is not None:
                with contextlib.suppress(FileNotFoundError):
                    self._path.rename(aside)
                self._close()
            return aside

    def release(self) -> None:
        """Keep the journal for a later delivery and unlock it."""
        with self._lock:
            if self._handle is None:
                return
            with contextlib.suppress(OSError):
                self._handle.flush()
                os.fsync(self._handle.fileno())
            self._close()

    def _write(self, record: Mapping[str, Any], *, sync: bool) -> None:
        with self._lock:
            if self._handle is None:
                return
            # Flushed at once: what reached the OS survives the process being killed right after.
            self._handle.write(json.dumps(record) + "\n")
            self._handle.flush()
            if sync:
                os.fsync(self._handle.fileno())

    def _close(self) -> None:
        assert self._handle is not None
        handle, self._handle = self._handle, None
        handle.close()  # also drops the lock


def journal_paths(spool_dir: str | os.PathLike[str]) -> list[Path]:
    """The journals in `spool_dir`, oldest first (so statuses land in the order the trials closed)."""
    directory = Path(spool_dir)
    if not directory.is_dir():
        return []
    found = []
    for path in directory.glob(f"*{_SUFFIX}"):
        with contextlib.suppress(FileNotFoundError):  # delivered meanwhile
            found.append((path.stat().st_mtime, path.name, path))
    return [path for _, _, path in sorted(found)]


def read_spooled_run(path: str | os.PathLike[str]) -> SpooledRun | None:
    """Parse a journal; a torn last line (the process died while writing it) is ignored."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return None
    records = []
    for index, line in enumerate(lines):
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            if index != len(lines) - 1:
                logger.warning("skipping an unreadable line %d of %s", index + 1, path)
    if not records or "run" not in records[0]:
        return None
    metrics: list[Metric] = []
    status = None
    for record in records[1:]:
        if "metrics" in record:
            metrics.extend(
                Metric(key=str(key), value=float(value), timestamp=int(timestamp), step=int(step))
                for key, value, timestamp, step in record["metrics"]
            )
        elif "status" in record:
            status = str(record["status"])
    return SpooledRun(identity=TrialRunIdentity.from_json(records[0]["run"]), metrics=metrics, status=status)
