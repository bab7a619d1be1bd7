"""Stop signals for `normlab serve`: Ctrl-C, SIGTERM (supervisors, `docker stop`) and SIGHUP (the terminal
closed) ask for one orderly stop, a second one hurries it, and a stop that hangs ends the process anyway.

`stopped_by_signals` takes the signals for the whole of `serve` (StopSignals); `hurried_by_signals` takes
them while a stack stops outside it (service.stack.launcher.local_stack used on its own). Both install their
handler in the main thread only (Python delivers signals there) and restore the previous ones after.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator

__all__ = [
    "STOP_DEADLINE_S",
    "StopRequested",
    "StopSignals",
    "exit_if_the_stop_hangs",
    "hurried_by_signals",
    "stop_signal_numbers",
    "stopped_by_signals",
]

# Once a stop is asked for, the process ends within this long whatever hangs: a last resort (a stop takes
# under 10 s; a Ctrl-C during a burst was once still running 27 minutes later), leaving to the stack's
# guard whatever the launcher had not stopped yet.
STOP_DEADLINE_S = 30.0

Say = Callable[[str], None]


class StopRequested(KeyboardInterrupt):
    """A stop signal (Ctrl-C, SIGTERM, SIGHUP) while the stack starts: a KeyboardInterrupt, so every handler
    of Ctrl-C applies."""


def _print(message: str) -> None:
    """Print, unless the terminal is gone (SIGHUP): stopping must not fail for want of somewhere to say so."""
    with contextlib.suppress(OSError):
        print(message, file=sys.stderr)


def stop_signal_numbers() -> list[signal.Signals]:
    """Ctrl-C, SIGTERM (supervisors, `docker stop`), SIGHUP (the terminal closed; none on Windows)."""
    return [signal.SIGINT, signal.SIGTERM, *([signal.SIGHUP] if hasattr(signal, "SIGHUP") else [])]


@contextlib.contextmanager
def _handling_stop_signals(handler: Callable[[int, object], None]) -> Iterator[None]:
    """`handler` takes the stop signals while the block runs; the previous handlers come back after. Off
    the main thread nothing is installed: signal handlers belong to it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.signal(signum, handler) for signum in stop_signal_numbers()}
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


class StopSignals:
    """Ctrl-C, SIGTERM and SIGHUP for the whole of `normlab serve`, in one handler: no signal falls between
    two handlers and is lost, and none breaks off the stop halfway.

    The first signal asks for the stop: while the stack starts (`interrupting`) by raising StopRequested,
    which ends whatever the start waits for and unwinds into the stop; once the API serves by setting
    `requested`, which the main thread polls. Every later signal sets `hurry`: the stop's remaining waits
    end, and what still runs is killed (SIGKILL) at once.
    """

    def __init__(self, say: Say = _print) -> None:
        self.requested = threading.Event()
        self.hurry = threading.Event()
        self.interrupting = True
        self._say = say

    def __call__(self, signum: int, frame: object) -> None:
        # Sets events only, which the main thread never waits on (it polls): a handler that needed a lock
        # the interrupted code holds would wait forever.
        if not self.requested.is_set():
            self.requested.set()
            if self.interrupting:
                raise StopRequested(signal.Signals(signum).name)
            return
        if not self.hurry.is_set():
            self._say("[yellow]stopping at once (SIGKILL)[/]")
        self.hurry.set()


@contextlib.contextmanager
def stopped_by_signals(say: Say = _print) -> Iterator[StopSignals]:
    """Stop signals handled by one StopSignals while the block runs (by default SIGTERM and SIGHUP would
    end this process at once and orphan the stack)."""
    signals = StopSignals(say)
    with _handling_stop_signals(signals):
        yield signals


@contextlib.contextmanager
def hurried_by_signals(
    hurry: threading.Event | None = None, *, say: Say = _print
) -> Iterator[threading.Event]:
    """While a stack stops, Ctrl-C, SIGTERM or SIGHUP again cuts the grace period short (SIGKILL now)
    instead of interrupting the stop halfway. `hurry`: an event an earlier signal may have set already."""
    hurry = threading.Event() if hurry is None else hurry

    def hurry_up(signum: int, frame: object) -> None:
        if not hurry.is_set():
            say("[yellow]stopping at once (SIGKILL)[/]")
        hurry.set()

    with _handling_stop_signals(hurry_up):
        yield hurry


def exit_if_the_stop_hangs(signals: StopSignals, finished: threading.Event, *, say: Say = _print) -> None:
    """In a daemon thread: once a stop is asked for, end the process STOP_DEADLINE_S later if it still
    runs then (exit status 1). Returns once `finished` is set without a stop asked for."""
    while not signals.requested.wait(timeout=1.0):
        if finished.is_set():
            return
    time.sleep(STOP_DEADLINE_S)
    say(
        f"[red]still stopping {STOP_DEADLINE_S:g} s after the signal: exiting now (the guard stops the rest)[/]"
    )
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(1)
