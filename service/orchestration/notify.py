"""Announcing a study's end to NORMLAB_NOTIFY_URL, once per study: a researcher learns that an overnight
study finished (or failed, and why) without watching its page.

One JSON POST per ended study: `text` (one line, for chat webhooks that show only that), and the study's
id, name, dataset, status, error, and links to its page, results and report. A study is recorded as
announced (studies.store.mark_announced) only after the URL answered 2xx, so a POST that fails is tried
again on the next tick and a restart never announces a study twice.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any
from urllib.parse import quote

import httpx
from sqlalchemy import Engine

from studies.store import StudyView, mark_announced, session_scope, studies_to_announce

__all__ = ["StudyNotifier", "announcement"]

log = logging.getLogger(__name__)

_TIMEOUT_S = 5.0
_BATCH = 10


def announcement(study: StudyView, *, api_url: str) -> dict[str, Any]:
    """The JSON body for one ended study."""
    page = f"{api_url}/studies/{quote(study.id, safe='')}"
    progress = study.progress
    why = f": {study.error.strip().splitlines()[0]}" if study.error and study.error.strip() else ""
    text = (
        f"NormLab study {study.name} {study.status} ({progress.done}/{progress.planned} trials, "
        f"{study.dataset}){why}. {page}"
    )
    return {
        "text": text,
        "study_id": study.id,
        "name": study.name,
        "dataset": study.dataset,
        "status": study.status,
        "error": study.error,
        "finished_at": study.finished_at.isoformat() if study.finished_at else None,
        "trials": {"done": progress.done, "planned": progress.planned, "failed": progress.failed},
        "links": {
            "page": page,
            "results": f"{api_url}/results/{quote(study.dataset, safe='')}?study={quote(study.id, safe='')}",
            "report": f"{page}/report?format=html",
        },
    }


class StudyNotifier:
    """Posts each newly ended study to `url` (see the module docstring)."""

    def __init__(
        self,
        engine: Engine,
        *,
        url: str,
        api_url: str,
        window_s: float = 3600.0,
        clock: Callable[[], datetime] = lambda: datetime.now(timezone.utc),
        post: Callable[..., httpx.Response] = httpx.post,
    ) -> None:
        self.engine = engine
        self.url = url
        self.api_url = api_url.rstrip("/")
        self.window = timedelta(seconds=window_s)
        self.clock = clock
        self.post = post
        self._warned: set[str] = set()  # studies whose failed POST was logged already

    def tick(self) -> None:
        with session_scope(self.engine, readonly=True) as session:
            ended = studies_to_announce(session, ended_since=self.clock() - self.window, limit=_BATCH)
        for study in ended:
            try:
                response = self.post(
                    self.url, json=announcement(study, api_url=self.api_url), timeout=_TIMEOUT_S
                )
                response.raise_for_status()
            except httpx.HTTPError as exc:
                if study.id not in self._warned:
                    log.warning(
                        "could not announce study %s to %s (tried again each tick): %s",
                        study.id,
                        self.url,
                        exc,
                    )
                    self._warned.add(study.id)
                return  # the URL is down or refusing: the rest wait for the next tick too
            with session_scope(self.engine) as session:
                mark_announced(session, study_id=study.id, at=self.clock())
