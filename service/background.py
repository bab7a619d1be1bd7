"""The reconcile loop: queued studies become Ray jobs; dead drivers become failed studies.

Routes only persist (dstack style); this loop does the slow work, so a POST returns at once and an
API restart loses nothing: the next tick picks up whatever the database says is still to do.
"""

from __future__ import annotations

import logging
import threading

from sqlalchemy.engine import Engine

from service.dispatcher import DispatchError, JobState, RayJobDispatcher
from service.store import (
    InvalidStatusTransitionError,
    get_study,
    list_studies,
    session_scope,
    set_study_runtime,
    set_study_status,
)

__all__ = ["StudyReconciler"]

log = logging.getLogger(__name__)


class StudyReconciler:
    def __init__(
        self, engine: Engine, dispatcher: RayJobDispatcher, *, interval_s: float = 2.0, max_running: int = 1
    ) -> None:
        self.engine = engine
        self.dispatcher = dispatcher
        self.interval_s = interval_s
        self.max_running = max_running  # studies share the cluster; more would only queue inside Ray
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="normlab-reconciler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.tick()
            except Exception:  # one bad tick must not end the loop
                log.exception("reconcile tick failed")
            self._stop.wait(self.interval_s)

    def tick(self) -> None:
        self._submit_queued()
        self._check_running()

    def _submit_queued(self) -> None:
        with session_scope(self.engine, readonly=True) as session:
            queued = list_studies(session, status="queued", order="oldest")  # submission order
            running = len(list_studies(session, status="running"))
        queued = queued[: max(0, self.max_running - running)]
        for study in queued:
            try:
                job_id = self.dispatcher.submit(study.id, study.spec)
            except DispatchError as exc:
                log.warning("study %s stays queued: %s", study.id, exc)
                return  # the cluster is unreachable: try again next tick, in submission order
            with session_scope(self.engine) as session:
                set_study_runtime(session, study_id=study.id, ray_job_id=job_id)
                try:
                    set_study_status(session, study_id=study.id, status="running")
                except InvalidStatusTransitionError:
                    cancelled_meanwhile = True
                else:
                    cancelled_meanwhile = False
            if cancelled_meanwhile:
                # Cancelled between our read and the submit: take the job down again (outside the
                # transaction, so a slow or failing Ray call cannot roll back the recorded job id).
                try:
                    self.dispatcher.cancel(job_id)
                except DispatchError as exc:
                    log.warning("could not stop Ray job %s of cancelled study %s: %s", job_id, study.id, exc)

    def _check_running(self) -> None:
        with session_scope(self.engine, readonly=True) as session:
            running = list_studies(session, status="running")
        for study in running:
            if not study.ray_job_id:
                continue
            try:
                state = self.dispatcher.state(study.ray_job_id)
            except DispatchError as exc:
                log.warning("cannot check study %s: %s", study.id, exc)
                return
            if not state.terminal:
                continue
            with session_scope(self.engine) as session:
                current = get_study(session, study_id=study.id)
                if current.status != "running":
                    continue  # the driver recorded its own outcome
                error = self._driver_death_message(state, study.ray_job_id)
                set_study_status(session, study_id=study.id, status="failed", error=error)

    def _driver_death_message(self, state: JobState, job_id: str) -> str:
        if state is JobState.MISSING:
            return (
                f"Ray job {job_id} is unknown to the cluster (head restarted?); the study's driver is gone."
            )
        tail = self.dispatcher.logs_tail(job_id, max_chars=2000)
        return f"study driver ended ({state.value}) without recording an outcome. Log tail:\n{tail}"
