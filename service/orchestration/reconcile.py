"""The reconcile loop: queued studies become Ray jobs, dead drivers are resubmitted (or fail their study once
it has had its attempts), and ended studies leave no MLflow run RUNNING.

Routes only persist (dstack style); this loop does the slow work, so a POST returns at once and an
API restart loses nothing: the next tick picks up whatever the database says is still to do.

A submission the cluster refuses or does not answer is never silent: it is recorded on the study as a failed
submission, in the cluster's words, and the same driver attempt is tried again after a backoff that doubles
per failure (`submit_backoff_s` up to `submit_backoff_max_s`; the queue waits for its oldest study meanwhile,
so studies still start in submission order); once one attempt has failed to submit `max_submit_failures`
times the study fails with the cluster's last words. A submission that fails because the stack is stopping
is not recorded: the next start submits it.

A driver died when its Ray job ended (failed, stopped, unknown to the cluster) while its study is still
running, i.e. without recording an outcome; a driver that fails a broken study records `failed` itself and
is never resubmitted. The next attempt is a new Ray job whose driver restores the study's Tune experiments
from storage, so trials that had finished are kept, and trial rows and MLflow runs are keyed by trial, so
a resumed trial continues its own. Studies whose driver is already gone when the service starts were
interrupted by a stop of the stack: `interrupted_studies` resumes them (not counted against
`max_study_attempts`) or cancels them; they are never failed for it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime, timedelta, timezone

from sqlalchemy.engine import Engine

from service.orchestration.dispatcher import condensed
from service.orchestration.notify import StudyNotifier
from service.orchestration.ports import Dispatcher, DispatchError, JobState
from service.orchestration.study_runs import MlflowUnavailableError, StudyRuns
from service.settings import Settings, get_settings
from studies.store import (
    InvalidStatusTransitionError,
    StudyStatus,
    StudyView,
    end_attempt,
    get_study,
    list_studies,
    list_studies_with_open_mlflow_runs,
    mark_mlflow_closed,
    record_attempt,
    record_submit_failure,
    session_scope,
    set_study_status,
)

__all__ = ["StudyReconciler", "submit_backoff_s"]

log = logging.getLogger(__name__)


def submit_backoff_s(failures: int, *, first_s: float, max_s: float) -> float:
    """Seconds to wait after a driver attempt's `failures`-th failed submission: `first_s`, doubled per
    failure, at most `max_s`."""
    return min(max_s, first_s * 2 ** max(0, failures - 1))


def _utcnow() -> datetime:
    return datetime.now(timezone.utc)


class StudyReconciler:
    """One tick: submit queued studies, look after running ones' drivers, close ended studies' runs, and
    announce ended studies where NORMLAB_NOTIFY_URL is set (service.orchestration.notify).

    `settings` gives the recovery rules and the MLflow server (None: the process's settings, read from the
    environment); `runs` closes MLflow runs (None: on that server); `close_batch` bounds the ended studies
    whose runs one tick closes; `clock` is the time failed submissions are retried by (tests move it).
    """

    def __init__(
        self,
        engine: Engine,
        dispatcher: Dispatcher,
        *,
        interval_s: float = 2.0,
        max_running: int = 1,
        settings: Settings | None = None,
        runs: StudyRuns | None = None,
        close_batch: int = 5,
        clock: Callable[[], datetime] = _utcnow,
    ) -> None:
        settings = settings if settings is not None else get_settings()
        self.engine = engine
        self.dispatcher = dispatcher
        self.interval_s = interval_s
        self.max_running = max_running  # studies share the cluster; more would only queue inside Ray
        self.max_attempts = settings.max_study_attempts
        self.interrupted_studies = settings.interrupted_studies
        self.max_submit_failures = settings.max_submit_failures
        self.submit_backoff_s = settings.submit_backoff_s
        self.submit_backoff_max_s = settings.submit_backoff_max_s
        self.clock = clock
        self.runs = runs if runs is not None else StudyRuns(str(settings.mlflow_tracking_uri))
        self.close_batch = close_batch
        self.notifier = (
            StudyNotifier(
                engine,
                url=settings.notify_url,
                api_url=str(settings.api_url),
                window_s=settings.notify_window_s,
            )
            if settings.notify_url
            else None
        )
        # Running studies as the first tick found them, until their job has been looked at once: a driver
        # already gone then was interrupted by a stop of the stack, not killed by its study.
        self._found_at_start: set[str] | None = None
        self._unclosable: set[str] = set()  # ended studies whose runs failed to close for another reason
        self._stop = threading.Event()
        # Set by wake(): a study was just queued, so the next tick need not wait out the interval.
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="normlab-reconciler", daemon=True)
        self._thread.start()

    def wake(self) -> None:
        """Tick now instead of at the end of the interval (the API calls this once a POST is stored)."""
        self._wake.set()

    def stop(self, *, wait_s: float = 2.0) -> None:
        """End the loop: no tick starts from now on, and one in progress acts on no answer it gets after this
        (`_stopping`: as the stack stops, Ray reports every job failed). Waits at most `wait_s` for the
        tick to end: one waiting on the cluster or MLflow may take far longer, and the thread is a daemon.
        A second call only waits again."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=wait_s)

    @property
    def _stopping(self) -> bool:
        return self._stop.is_set()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.tick()
            except Exception:  # one bad tick must not end the loop
                log.exception("reconcile tick failed")
            self._wake.wait(self.interval_s)
            self._wake.clear()

    def tick(self) -> None:
        if self._found_at_start is None:
            with session_scope(self.engine, readonly=True) as session:
                self._found_at_start = {s.id for s in list_studies(session, status=StudyStatus.RUNNING)}
        for step in (self._submit_queued, self._check_running, self._close_ended_runs, self._announce_ended):
            if self._stopping:
                return
            step()

    # ----- queued studies -----------------------------------------------------------------------------

    def _submit_queued(self) -> None:
        with session_scope(self.engine, readonly=True) as session:
            queued = list_studies(session, status=StudyStatus.QUEUED, order="oldest")  # submission order
            running = len(list_studies(session, status=StudyStatus.RUNNING))
        queued = queued[: max(0, self.max_running - running)]
        for study in queued:
            if self._stopping:
                return  # the cluster may be stopping: the next start submits the rest
            if self._backing_off(study):
                return  # the oldest queued study waits out its backoff: the rest wait behind it, in order
            try:
                job_id = self.dispatcher.submit(study.id, study.spec, attempt=1)
            except DispatchError as exc:
                self._submission_failed(study, attempt=1, error=exc)
                return  # the cluster is likely the same for the next study: it waits, in submission order
            with session_scope(self.engine) as session:
                record_attempt(session, study_id=study.id, ray_job_id=job_id)
                try:
                    set_study_status(session, study_id=study.id, status=StudyStatus.RUNNING)
                except InvalidStatusTransitionError:
                    cancelled_meanwhile = True
                else:
                    cancelled_meanwhile = False
            if cancelled_meanwhile:
                self._stop_job(job_id, study.id)

    def _backing_off(self, study: StudyView) -> bool:
        """Whether the study's next submission waits: its last one failed and its retry time is not yet."""
        failures = study.unsubmitted_failures
        return bool(failures) and failures[-1].retry_at is not None and self.clock() < failures[-1].retry_at

    def _submission_failed(self, study: StudyView, *, attempt: int, error: DispatchError) -> None:
        """Record the failed submission of the study's driver attempt `attempt` in the cluster's words, with
        when it is tried again; the study fails once the attempt has failed `max_submit_failures` times."""
        if self._stopping:
            return  # the cluster may be failing because the stack stops: not the study's failure
        words = condensed(str(error))
        with session_scope(self.engine) as session:
            current = get_study(session, study_id=study.id, lock=True)
            if current.status != study.status or current.ray_job_id != study.ray_job_id:
                return  # cancelled, or submitted by another loop, meanwhile
            failures = 1 + sum(1 for f in current.submit_failures if f.attempt == attempt)
            gave_up = failures >= self.max_submit_failures
            wait_s = submit_backoff_s(
                failures, first_s=self.submit_backoff_s, max_s=self.submit_backoff_max_s
            )
            retry_at = None if gave_up else self.clock() + timedelta(seconds=wait_s)
            record_submit_failure(session, study_id=study.id, attempt=attempt, error=words, retry_at=retry_at)
            if gave_up:
                message = (
                    f"Ray did not take the study's driver (attempt {attempt}): {failures} submissions failed "
                    f"(NORMLAB_MAX_SUBMIT_FAILURES={self.max_submit_failures}); the last one: {words}"
                )
                set_study_status(session, study_id=study.id, status=StudyStatus.FAILED, error=message)
        if gave_up:
            log.error("study %s failed: its driver attempt %d was not taken: %s", study.id, attempt, words)
        else:
            log.warning(
                "study %s: submitting driver attempt %d failed (%d of at most %d), next try in %.0f s: %s",
                study.id,
                attempt,
                failures,
                self.max_submit_failures,
                wait_s,
                words,
            )

    def _stop_job(self, job_id: str, study_id: str) -> None:
        # Cancelled between our read and the submit: take the job down again (outside the transaction,
        # so a slow or failing Ray call cannot roll back the recorded job id).
        try:
            self.dispatcher.cancel(job_id)
        except DispatchError as exc:
            log.warning("could not stop Ray job %s of cancelled study %s: %s", job_id, study_id, exc)

    # ----- running studies ----------------------------------------------------------------------------

    def _check_running(self) -> None:
        with session_scope(self.engine, readonly=True) as session:
            running = list_studies(session, status=StudyStatus.RUNNING)
        found_at_start = self._found_at_start if self._found_at_start is not None else set()
        for study in running:
            if not study.ray_job_id:
                continue
            try:
                state = self.dispatcher.state(study.ray_job_id)
            except DispatchError as exc:
                log.warning("cannot check study %s: %s", study.id, exc)
                return
            if self._stopping:
                return  # a job that ends now may end because the stack stops: the next start decides
            interrupted = study.id in found_at_start
            found_at_start.discard(study.id)
            if state.terminal:
                self._after_driver_death(study, state, interrupted=interrupted)

    def _after_driver_death(self, study: StudyView, state: JobState, *, interrupted: bool) -> None:
        attempt = study.current_attempt
        if attempt is not None and attempt.ended and attempt.ray_job_id == study.ray_job_id:
            self._resubmit(study)  # decided on an earlier tick, whose submission did not go through
            return
        job_id = str(study.ray_job_id)
        reason = self.dispatcher.end_reason(job_id, state)
        if self._stopping:
            return
        if interrupted and self.interrupted_studies == "cancel":
            error = (
                f"interrupted: the service restarted without its driver ({reason}); cancelled, as "
                "NORMLAB_INTERRUPTED_STUDIES=cancel asks"
            )
            self._end_study(study, StudyStatus.CANCELLED, error=error, reason=reason, interrupted=True)
            return
        if interrupted or self._attempts_used(study) < self.max_attempts:
            dead = self._record_death(study, reason, interrupted=interrupted)
            if dead is not None:
                log.warning(
                    "study %s: driver attempt %d died (%s); resubmitting", study.id, _number(dead), reason
                )
                self._resubmit(dead)
            return
        error = (
            f"{self._driver_death_message(state, job_id)}\n"
            f"(driver attempt {self._attempts_used(study)} of at most {self.max_attempts}: not resubmitted)"
        )
        self._end_study(study, StudyStatus.FAILED, error=error, reason=reason, interrupted=False)

    @staticmethod
    def _attempts_used(study: StudyView) -> int:
        """Attempts that count against the limit: all but those lost to an interruption (at least the one
        running now, also for a study whose job was recorded without an attempt)."""
        return max(1, sum(1 for a in study.attempts if not a.interrupted))

    def _record_death(self, study: StudyView, reason: str, *, interrupted: bool) -> StudyView | None:
        """End the current attempt with `reason`; None when the study moved on meanwhile (the driver recorded
        an outcome after all, or the study was cancelled)."""
        with session_scope(self.engine) as session:
            current = get_study(session, study_id=study.id, lock=True)
            if current.status != StudyStatus.RUNNING or current.ray_job_id != study.ray_job_id:
                return None
            return end_attempt(session, study_id=study.id, death_reason=reason, interrupted=interrupted)

    def _resubmit(self, study: StudyView) -> None:
        attempt = _number(study) + 1
        if self._stopping:
            return  # the death is recorded: the next start submits this attempt
        if self._backing_off(study):
            return  # the death is recorded: a later tick submits this attempt
        try:
            job_id = self.dispatcher.submit(study.id, study.spec, attempt=attempt)
        except DispatchError as exc:
            self._submission_failed(study, attempt=attempt, error=exc)
            return  # the death is recorded: a later tick submits this attempt again
        with session_scope(self.engine) as session:
            cancelled_meanwhile = (
                get_study(session, study_id=study.id, lock=True).status != StudyStatus.RUNNING
            )
            if not cancelled_meanwhile:
                record_attempt(session, study_id=study.id, ray_job_id=job_id)
        if cancelled_meanwhile:
            self._stop_job(job_id, study.id)

    def _end_study(
        self, study: StudyView, status: StudyStatus, *, error: str, reason: str, interrupted: bool
    ) -> None:
        with session_scope(self.engine) as session:
            current = get_study(session, study_id=study.id, lock=True)
            if current.status != StudyStatus.RUNNING or current.ray_job_id != study.ray_job_id:
                return  # the driver recorded its own outcome, or the study was cancelled, meanwhile
            set_study_status(session, study_id=study.id, status=status, error=error)
            end_attempt(session, study_id=study.id, death_reason=reason, interrupted=interrupted)

    def _driver_death_message(self, state: JobState, job_id: str) -> str:
        if state is JobState.MISSING:
            return (
                f"Ray job {job_id} is unknown to the cluster (head restarted?); the study's driver is gone."
            )
        tail = self.dispatcher.logs_tail(job_id, max_chars=2000)
        return f"study driver ended ({state.value}) without recording an outcome. Log tail:\n{tail}"

    # ----- ended studies ------------------------------------------------------------------------------

    def _announce_ended(self) -> None:
        if self.notifier is not None:
            self.notifier.tick()

    def _close_ended_runs(self) -> None:
        with session_scope(self.engine, readonly=True) as session:
            ended = list_studies_with_open_mlflow_runs(
                session, limit=self.close_batch + len(self._unclosable)
            )
        for study in [s for s in ended if s.id not in self._unclosable][: self.close_batch]:
            if study.ray_job_id is not None:
                try:
                    if not self.dispatcher.state(study.ray_job_id).terminal:
                        continue  # a stopped driver may still be closing its own runs
                except DispatchError as exc:
                    log.warning("cannot check the driver of ended study %s: %s", study.id, exc)
                    return
                if self._stopping:
                    return  # its driver may have ended with the stack, before it closed its runs
                # Read again now that the driver has ended: until then it may have recorded its MLflow
                # experiment (a study cancelled in its driver's first seconds), after the list above.
                with session_scope(self.engine, readonly=True) as session:
                    study = get_study(session, study_id=study.id)
            if study.mlflow_experiment_id is not None:
                try:
                    self.runs.close(
                        study_id=study.id, experiment_id=study.mlflow_experiment_id, study_status=study.status
                    )
                except MlflowUnavailableError as exc:
                    log.warning("MLflow runs of ended studies stay open for now: %s", exc)
                    return
                except Exception:
                    log.exception("could not close the MLflow runs of study %s; not trying again", study.id)
                    self._unclosable.add(study.id)
                    continue
            with session_scope(self.engine) as session:
                mark_mlflow_closed(session, study_id=study.id)


def _number(study: StudyView) -> int:
    attempt = study.current_attempt
    return attempt.number if attempt is not None else 1
