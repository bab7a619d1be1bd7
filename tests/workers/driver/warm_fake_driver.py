"""A stand-in driver for the warm driver server's tests: what it does is chosen by its first argument."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path


def main(argv: list[str]) -> None:
    action, *rest = argv
    if action == "describe":  # what a driver sees of its job
        print(f"argv={argv} cwd={os.getcwd()} job={os.environ.get('FAKE_JOB')} pid={os.getpid()}", flush=True)
        print("to stderr", file=sys.stderr, flush=True)
    elif action == "exit":
        raise SystemExit(int(rest[0]) if rest[0].isdigit() else rest[0])
    elif action == "raise":
        raise RuntimeError("the fake driver failed")
    elif action == "wait-for-sigterm":  # as the real driver: SIGTERM becomes SystemExit(143)
        signal.signal(signal.SIGTERM, lambda signum, frame: _exit_noting(Path(rest[0]), 128 + signum))
        _wait(Path(rest[0]))
    elif action == "wait":
        _wait(Path(rest[0]))


def _wait(note: Path) -> None:
    note.write_text(str(os.getpid()))
    time.sleep(120)


def _exit_noting(note: Path, code: int) -> None:
    note.write_text("terminated")
    raise SystemExit(code)
