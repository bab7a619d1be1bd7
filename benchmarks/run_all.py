"""`make bench`: run every benchmark side by side and rewrite BENCHMARKS.md.

Each benchmark module exposes `run(quick: bool = False) -> str` (a markdown section). Ratios, not
absolute times, are the results: this machine is shared and noisy, so every comparison is measured
interleaved within one run.
"""

from __future__ import annotations

import argparse
import importlib
import os
import platform
import subprocess
import sys
import time
import traceback
from datetime import datetime, timezone
from pathlib import Path

BENCHMARKS = (
    "benchmarks.bench_norms",
    "benchmarks.bench_model_step",
    "benchmarks.bench_training",
    "benchmarks.bench_orchestration",
    "benchmarks.bench_api_burst",
    "benchmarks.bench_idle_memory",
    "benchmarks.bench_sequential",
)


def _machine() -> str:
    import torch

    try:
        revision = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        revision = "unknown"
    return (
        f"- date: {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, git {revision}\n"
        f"- machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"torch {torch.__version__} ({torch.get_num_threads()} threads)\n"
    )


# Sections `make bench` keeps as written: readings taken by hand (before/after comparisons, the test tiers'
# timings) and on a GPU machine (benchmarks/gpu.py; none here). They are appended, never re-measured.
KEPT_SECTIONS = (Path(__file__).with_name("recorded.md"), Path(__file__).with_name("gpu_results.md"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--output", type=Path, default=Path("BENCHMARKS.md"))
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (a smoke run)")
    parser.add_argument("--only", nargs="*", default=None, help="module names to run")
    args = parser.parse_args(argv)
    sections, failed = [], []
    for name in BENCHMARKS:
        if args.only and name.rsplit(".", 1)[-1] not in args.only and name not in args.only:
            continue
        started = time.perf_counter()
        print(f"running {name} ...", file=sys.stderr, flush=True)
        try:
            section = importlib.import_module(name).run(quick=args.quick)
        except Exception:
            failed.append(name)
            section = f"## {name}\n\nFAILED:\n\n```\n{traceback.format_exc()}\n```\n"
        sections.append(section.rstrip() + f"\n\n_(took {time.perf_counter() - started:.0f} s)_\n")
    header = (
        "# NormLab benchmarks\n\n"
        "Reproduce with `make bench` (all) or `python -m benchmarks.<name>` (one). Results are ratios of "
        "interleaved measurements taken in one run on a shared, noisy machine; absolute times are for "
        "orientation only.\n\n" + _machine()
    )
    if not args.only:
        sections.extend(path.read_text(encoding="utf-8") for path in KEPT_SECTIONS)
    args.output.write_text(header + "\n" + "\n".join(sections))
    print(f"wrote {args.output}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
