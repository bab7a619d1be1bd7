"""MLflow requests that a caller may only wait for so long.

MLflow's client waits up to MLFLOW_HTTP_REQUEST_TIMEOUT (120 s) for each answer and retries
MLFLOW_HTTP_REQUEST_MAX_RETRIES (7) times with exponential backoff, so one request to a server that
accepts connections but does not answer (paused, overloaded) blocks for many minutes. Where a loop
must go on (the driver recording a finished trial), the request runs in a thread of its own and the
caller stops waiting after its bound; the request itself finishes, or fails, in the background.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["MLFLOW_REQUEST_LIMITS", "TrackingTimeoutError", "call_with_deadline"]

# MLflow's client defaults (120 s per answer, 7 retries with backoff up to 2 min) let one request to an
# unreachable server take many minutes. In a trial process (and a warm trial host) only the trackers'
# background threads talk to MLflow and they retry on their own, so a request gives up sooner and the next
# retry sees a server that is back within seconds.
MLFLOW_REQUEST_LIMITS = {"MLFLOW_HTTP_REQUEST_TIMEOUT": "20", "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2"}

T = TypeVar("T")

# Per client, the last bounded request: while it is unanswered the server is taken as not answering, and
# the next request fails at once instead of adding one more waiting thread (one lookup per seed of every
# trial that finishes during an outage would otherwise cost the caller the full bound each).
_unanswered: weakref.WeakKeyDictionary[Any, threading.Thread] = weakref.WeakKeyDictionary()
_unanswered_lock = threading.Lock()


class TrackingTimeoutError(TimeoutError):
    """MLflow did not answer within the caller's bound."""


def call_with_deadline(client: Any, request: Callable[[], T], *, timeout_s: float) -> T:
    """`request()` (a call through `client`), or TrackingTimeoutError after `timeout_s`, or at once while an
    earlier bounded request through the same client is still unanswered. Errors of `request` propagate."""
    outcome: dict[str, Any] = {}
    answered = threading.Event()

    def run() -> None:
        try:
            outcome["value"] = request()
        except BaseException as error:  # handed to the caller (if it still waits)
            outcome["error"] = error
        finally:
            answered.set()

    with _unanswered_lock:
        earlier = _unanswered.get(client)
        if earlier is not None and earlier.is_alive():
            raise TrackingTimeoutError("MLflow has not answered an earlier request yet")
        thread = threading.Thread(target=run, name="mlflow-bounded-request", daemon=True)
        _unanswered[client] = thread
        thread.start()
    if not answered.wait(timeout_s):
        raise TrackingTimeoutError(f"MLflow did not answer within {timeout_s:g} s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]
