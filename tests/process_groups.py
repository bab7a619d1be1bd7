"""Stopping a server a test started in its own process group (start_new_session=True)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess


def stop_process_group(process: subprocess.Popen, *, grace_s: float = 30) -> None:
    """SIGCONT (a paused group would not see SIGTERM), SIGTERM, then SIGKILL after `grace_s`."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGCONT)
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
