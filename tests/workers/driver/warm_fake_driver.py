"""A stand-in driver for the warm driver server's tests: what it does is chosen by its first argument."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

_POOL = ThreadPoolExecutor(max_workers=1)  # module-level, as MLflow's asynchronous logging keeps one


def main(argv: list[str]) -> None:
    action, *rest = argv
    if action == "describe":  # what a driver sees of its job
        print(f"argv={argv} cwd={os.getcwd()} job={os.environ.get('FAKE_JOB')} pid={os.getpid()}", flush=True)
        print("to stderr", file=sys.stderr, flush=True)
    elif action == "exit":
        raise SystemExit(None if rest[0] == "none" else int(rest[0]) if rest[0].isdigit() else rest[0])
    elif action == "kill-self":
        os.kill(os.getpid(), signal.SIGKILL)
    elif action == "leave-threads":  # the interpreter waits for both before it exits
        _POOL.submit(time.sleep, 0.2)
        note = Path(rest[0])
        threading.Thread(target=lambda: (time.sleep(0.3), note.write_text("joined"))).start()
    elif action == "raise":
        raise RuntimeError("the fake driver failed")
    elif action == "wait-for-sigterm":  # as the real driver: SIGTERM becomes SystemExit(143)
        signal.signal(signal.SIGTERM, lambda signum, frame: _exit_noting(Path(rest[0]), 128 + signum))
        _wait(Path(rest[0]))
    elif action == "wait":
        _wait(Path(rest[0]))
    elif action == "print-and-wait":
        print("a line the job's log shows at once")
        _wait(Path(rest[0]))


def _wait(note: Path) -> None:
    note.write_text(str(os.getpid()))
    time.sleep(120)


def _exit_noting(note: Path, code: int) -> None:
    note.write_text("terminated")
    raise SystemExit(code)
