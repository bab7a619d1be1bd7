"""Run untrusted code in a child process: its own process group, an address-space limit and a timeout.

The one place NormLab starts a process for code it does not trust yet (a plugin's import and checks):
`models.plugins.isolated` for one layer, the service's plugin check for a whole plugin. Plain Python, so
the API process can use it without importing torch.
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["ONE_THREAD", "OUT_OF_MEMORY_SIGNS", "Finished", "last_line", "out_of_memory", "run_limited"]

# Every thread's stack and malloc arena is address space the limit counts; checks on small tensors gain
# nothing from threads, and one thread keeps measured limits valid on many-core machines.
ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
# How allocation failures read: Python, torch's CPU allocator, C++, OpenBLAS, the dynamic loader.
OUT_OF_MEMORY_SIGNS = (
    "memoryerror",
    "can't allocate memory",
    "cannot allocate memory",
    "bad_alloc",
    "memory allocation",
    "failed to map segment",
    "out of memory",
)


@dataclass(frozen=True)
class Finished:
    stdout: str
    stderr: str
    returncode: int
    timed_out: bool

    @property
    def how(self) -> str:
        """How the child ended, in words."""
        if self.timed_out:
            return "was stopped at its time limit"
        if self.returncode < 0:
            return f"was killed by {signal.Signals(-self.returncode).name}"
        return f"exited with {self.returncode}"


def run_limited(
    argv: Sequence[str],
    *,
    timeout_s: float,
    memory_mb: int,
    stdin: str | None = None,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
) -> Finished:
    """Run `argv` with `stdin`, killed (with everything it started) after `timeout_s` and limited to
    `memory_mb` of address space."""
    limit = memory_mb * 2**20

    def limit_memory() -> None:  # runs between fork and exec: one system call, no locks, no allocation
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    process = subprocess.Popen(
        list(argv),
        cwd=cwd or os.getcwd(),
        env={**os.environ, **ONE_THREAD, **(env or {})},
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group: a timeout ends whatever the code started too
        preexec_fn=limit_memory,
    )
    try:
        stdout, stderr = process.communicate(input=stdin, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        kill_group(process)
        stdout, stderr = process.communicate()
        return Finished(stdout, stderr, process.returncode, True)
    finally:
        if process.poll() is None:  # interrupted (Ctrl-C, a test timeout): leave nothing running
            kill_group(process)
            process.wait()
    return Finished(stdout, stderr, process.returncode, False)


def kill_group(process: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


def out_of_memory(text: str) -> bool:
    lowered = text.lower()
    return any(sign in lowered for sign in OUT_OF_MEMORY_SIGNS)


def last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "(no output)"
