"""The local Ray head's watcher: what `ray start --block` does once the head runs, in an interpreter that
imports nothing but the standard library (~6 MB PSS, where `ray start` holds ~130 MB of Ray for it).

`python -m service.stack.ray_start` starts the head as `ray start --block` does, then replaces itself with
`python -I -S <this file> NAME=PID ...` (exec: same pid, same children). Ray started those children bound to
that process (PR_SET_PDEATHSIG), and exec keeps the binding: they still die with it however it ends. Like
`ray start --block`, the watcher then
- stops them all when told to (SIGTERM, SIGINT, SIGHUP): the raylet first, so that it stops its workers,
  then the GCS, then the rest (Ray's own order), each group with GRACE_S before SIGKILL;
- stops the rest and exits when one ends on its own: status 0 if it ended as Ray's own stop ends it (exit
  0, or SIGTERM), else 1 (Ray's `--block` stops the rest only in that second case; a head missing any of
  its processes serves no study, so here either way ends it, and the launcher sees the head gone).

Run by path with `-I -S`, it must not import the project or anything installed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable, Sequence

GRACE_S = 5.0
POLL_S = 0.5
STOP_FIRST = ("raylet", "gcs_server")  # Ray's process type names; the rest go after them
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def parse(argv: Sequence[str]) -> dict[int, str]:
    """`NAME=PID` arguments (one per process of the head) as {pid: name}."""
    children = {}
    for arg in argv:
        name, _, pid = arg.rpartition("=")
        if not name or not pid.isdigit():
            raise ValueError(f"expected NAME=PID, got {arg!r}")
        children[int(pid)] = name
    return children


def stop_order(children: dict[int, str]) -> list[list[int]]:
    """The pids in the groups they are stopped in: the raylet, the GCS, then everything else."""
    groups = [[pid for pid, name in children.items() if name == first] for first in STOP_FIRST]
    groups.append([pid for pid, name in children.items() if name not in STOP_FIRST])
    return [group for group in groups if group]


def ended_gracefully(status: int) -> bool:
    """Whether a wait status is one Ray's own stop leaves: exit 0, killed by SIGTERM, or exit 128+SIGTERM."""
    code = os.waitstatus_to_exitcode(status)
    return code in (0, -signal.SIGTERM, 128 + signal.SIGTERM)


def describe(status: int) -> str:
    code = os.waitstatus_to_exitcode(status)
    return f"killed by {signal.Signals(-code).name}" if code < 0 else f"exited with status {code}"


class Watch:
    """The head's processes, reaped as they end (they are this process's children)."""

    def __init__(self, children: dict[int, str], *, log: Callable[[str], None]) -> None:
        self.running = dict(children)
        self.log = log

    def reap(self) -> list[tuple[str, int]]:
        """(name, wait status) of each watched process that ended since the last call."""
        ended = []
        while self.running:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:  # none left at all, whether we saw them go or not
                ended += [(name, 0) for name in self.running.values()]
                self.running.clear()
                break
            if pid == 0:
                break
            name = self.running.pop(pid, None)
            if name is not None:
                ended.append((name, status))
        return ended

    def stop(self, *, grace_s: float = GRACE_S) -> None:
        """SIGTERM each group in stop_order, SIGKILL what outlives its grace period, and reap them all."""
        for group in stop_order(self.running):
            for pid in group:
                _signal(pid, signal.SIGTERM)
            deadline = time.monotonic() + grace_s
            while any(pid in self.running for pid in group) and time.monotonic() < deadline:
                self.reap()
                time.sleep(0.05)
            for pid in group:
                if pid in self.running:
                    self.log(f"{self.running[pid]} (pid {pid}) outlived {grace_s:g} s: SIGKILL")
                    _signal(pid, signal.SIGKILL)
        while self.running:
            self.reap()
            time.sleep(0.05)


def _signal(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signum)


def watch(children: dict[int, str], *, poll_s: float = POLL_S, grace_s: float = GRACE_S) -> int:
    """Watch until told to stop or until a process of the head ends; returns the exit status."""

    def log(line: str) -> None:
        print(f"ray head watcher: {line}", file=sys.stderr, flush=True)

    asked: list[int] = []
    for signum in _STOP_SIGNALS:
        signal.signal(signum, lambda received, _frame: asked.append(received))
    watched = Watch(children, log=log)
    while True:
        if asked:
            log(f"{signal.Signals(asked[0]).name}: stopping the head's {len(watched.running)} process(es)")
            watched.stop(grace_s=grace_s)
            return 0
        ended = watched.reap()
        if ended:
            for name, status in ended:
                log(f"{name} {describe(status)}: stopping the rest of the head")
            watched.stop(grace_s=grace_s)
            return 0 if all(ended_gracefully(status) for _, status in ended) else 1
        time.sleep(poll_s)


def main(argv: Sequence[str]) -> int:
    try:
        children = parse(argv)
    except ValueError as error:
        print(f"usage: python {__file__} NAME=PID ... ({error})", file=sys.stderr)
        return 2
    return watch(children)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
