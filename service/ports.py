"""What the API needs from the cluster side, as a Protocol (the Ray Jobs implementation lives elsewhere)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

__all__ = ["Dispatcher"]


@runtime_checkable
class Dispatcher(Protocol):
    """Submits a study's driver as a cluster job and stops it again (service.dispatcher implements it)."""

    def submit(self, study_id: str, spec: Mapping[str, Any]) -> str:
        """Start the study's driver; returns the cluster's job id."""
        ...

    def cancel(self, ray_job_id: str) -> None:
        """Stop the job and its trials; a job that already ended is not an error."""
        ...
