"""What an idle `normlab serve` holds in memory: PSS per process of the whole local stack.

    python -m benchmarks.bench_idle_memory [--quick] [--settle S] [--study]

Starts `normlab serve` as a user does (on free loopback ports, in a throwaway data dir, 2 Ray CPUs), waits
until the API answers and the stack has settled, then reads /proc/<pid>/smaps_rollup of the launcher and
every process below it. PSS (proportional set size) splits each shared page among the processes that map
it, so the column adds up to what the stack really takes: RSS would count torch's and Python's shared
libraries once per process. With `--study`, the quick study then runs once and the stack is measured
again: the warm processes a study starts (warm driver server, trial hosts) show up there, and leave again
after NORMLAB_WARM_IDLE_S.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.bench_orchestration import REPO, SLOTS, serve_stack, submit_and_wait

SETTLE_S = 20.0  # after the API answers: Ray's workers and the dashboard's modules finish starting
GOAL_MB = 1200.0


@dataclass(frozen=True)
class ProcessMemory:
    pid: int
    name: str  # what the process is (see `role`)
    pss_mb: float
    rss_mb: float


def role(cmdline: list[str], comm: str) -> str:
    """A short name for one of the stack's processes, from its command line."""
    text = " ".join(cmdline)
    if comm.startswith("ray-dashboard-"):  # a dashboard module (Job, Node, State, Report, ...), forked
        return "ray dashboard module"
    if text.startswith("ray::") or comm.startswith("ray::"):
        return (cmdline[0] if cmdline else comm).split(" ")[0]
    for needle, name in (
        ("ray_watch.py", "ray head watcher"),  # run by path; its arguments name gcs_server and the rest
        ("service.stack.ray_start", "ray start --block"),
        ("ray.util.client.server", "ray client server"),
        ("multiprocessing.forkserver", "ray dashboard modules' forkserver"),
        ("multiprocessing.resource_tracker", "ray dashboard's resource tracker"),
        ("workers.driver.warm_server", "warm driver server"),
        ("service.stack.local_stack guard", "stack guard"),
        ("dashboard/agent.py", "ray dashboard agent"),
        ("runtime_env/agent/main.py", "ray runtime env agent"),
        ("dashboard/dashboard.py", "ray dashboard"),
        ("log_monitor.py", "ray log monitor"),
        ("monitor.py", "ray monitor (autoscaler)"),
        ("gcs_server", "ray gcs_server"),
        ("raylet", "raylet"),
        ("default_worker.py", "ray idle worker"),
        ("normlab serve", "normlab serve (API, reconcile loop)"),
        ("uvicorn", "mlflow server (uvicorn)"),
        ("mlflow server", "mlflow server"),
        ("ray start", "ray start --block"),
    ):
        if needle in text:
            return name
    return comm or (cmdline[0] if cmdline else "?")


def _kib(line: str) -> float:
    return float(line.split()[1])


def process_memory(pid: int) -> ProcessMemory | None:
    """PSS and RSS of one process (None: gone, or not readable)."""
    try:
        rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
        cmdline = [
            p for p in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0") if p
        ]
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return None
    fields = {line.split(":")[0]: line for line in rollup.splitlines() if ":" in line}
    if "Pss" not in fields:
        return None  # a zombie, or a kernel thread
    return ProcessMemory(
        pid=pid,
        name=role(cmdline, comm),
        pss_mb=_kib(fields["Pss"]) / 1024,
        rss_mb=_kib(fields["Rss"]) / 1024,
    )


def descendants(root: int) -> list[int]:
    """`root` and every process below it (the stack's processes all descend from the launcher: the ones
    started in sessions of their own too, as their parent is still the launcher)."""
    import psutil

    try:
        top = psutil.Process(root)
        return [root, *(child.pid for child in top.children(recursive=True))]
    except psutil.NoSuchProcess:
        return []


def stack_memory(root: int) -> list[ProcessMemory]:
    found = (process_memory(pid) for pid in descendants(root))
    return sorted((m for m in found if m is not None), key=lambda m: m.pss_mb, reverse=True)


def table(rows: list[ProcessMemory]) -> str:
    """A markdown table, one line per kind of process (their count in brackets), largest first."""
    grouped: dict[str, list[ProcessMemory]] = {}
    for row in rows:
        grouped.setdefault(row.name, []).append(row)
    lines = ["| process | count | PSS (MB) |", "|---|---:|---:|"]
    for name, members in sorted(grouped.items(), key=lambda item: -sum(m.pss_mb for m in item[1])):
        lines.append(f"| {name} | {len(members)} | {sum(m.pss_mb for m in members):.0f} |")
    total = sum(row.pss_mb for row in rows)
    lines.append(f"| **total** | **{len(rows)}** | **{total:.0f}** |")
    return "\n".join(lines) + "\n"


def _run_quick_study(api: str, token: str) -> str:
    spec = (REPO / "studies" / "examples" / "quick.yaml").read_text()
    return str(submit_and_wait(api, token, spec, timeout_s=900)["status"])


def measure(*, settle_s: float = SETTLE_S, study: bool = False) -> dict[str, list[ProcessMemory]]:
    """The stack's processes when idle after start-up (and, with `study`, idle after one quick study)."""
    taken: dict[str, list[ProcessMemory]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-mem-") as tmp, serve_stack(Path(tmp)) as stack:
        time.sleep(settle_s)
        taken["idle after start-up"] = stack_memory(stack.process.pid)
        if study:
            status = _run_quick_study(stack.api, stack.token)
            time.sleep(settle_s)
            taken[f"idle after one quick study ({status})"] = stack_memory(stack.process.pid)
    return taken


def run(quick: bool = False) -> str:
    taken = measure(settle_s=10.0 if quick else SETTLE_S, study=not quick)
    parts = [
        "## An idle local stack's memory (benchmarks/bench_idle_memory.py)\n\n"
        f"`normlab serve` with its defaults ({SLOTS} Ray CPUs), PSS summed per kind of process over the "
        f"launcher's process tree (/proc/<pid>/smaps_rollup). Goal: under {GOAL_MB:.0f} MB idle.\n"
    ]
    for label, rows in taken.items():
        parts.append(f"\n{label}:\n\n{table(rows)}")
    return "".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="idle after start-up only, shorter settling")
    parser.add_argument("--settle", type=float, default=SETTLE_S, help="seconds to wait before measuring")
    parser.add_argument("--study", action="store_true", help="also measure after one quick study")
    parser.add_argument("--pids", action="store_true", help="one line per process, not per kind")
    args = parser.parse_args()
    taken = measure(settle_s=args.settle, study=args.study)
    for label, rows in taken.items():
        print(f"\n{label}:\n")
        if args.pids:
            for row in rows:
                print(f"{row.pid:>8} {row.pss_mb:8.1f} MB PSS {row.rss_mb:8.1f} MB RSS  {row.name}")
        print(table(rows))


if __name__ == "__main__":
    main()
