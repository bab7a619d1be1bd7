"""The whole training step in one compiled region, on a GPU: AutoNorm-S against FrozenLN and stacked seeds
against one eager trial, side by side in one run (issue 39, item 3).

    python3 benchmarks/gpu_whole_step.py --quick [--out FILE]    # on a CUDA machine, under 10 minutes
    python3 benchmarks/gpu_whole_step.py [--mode default] [--seeds 5,8,10] [--budget-s S]

What it measures, for FrozenLN and AutoNorm-S (ViT-Lite paper preset, batch 128, bf16 autocast, AdamW,
gradient clipping at 1.0, the warmup-cosine schedule; SYNTHETIC CIFAR-sized data placed on the GPU, so
the figures are speed only), each as samples/s over a timed window after an untimed warm-up (which holds
the compilation and the CUDA-graph recording):

1. one trial, eager: the training loop's eager step (benchmarks/gpu.py's TrialStep: the batch gather and
   crop+flip on the GPU, forward, gate entropy, loss, backward, clipping, AdamW, schedule). It is the
   baseline of every "x eager" ratio, per method.
2. one trial, the whole step compiled: the loop's compiled step (workers.training.whole_step
   .CompiledTrainStep: forward + loss + gate entropy, backward, and one update graph holding clipping,
   the AutoNorm-S freeze's per-step masks and AdamW with a device lr), under `--mode` (default
   reduce-overhead: CUDA graphs), with the same batch pipeline as row 1.
3. k seeds stacked in one trial, the whole step compiled as one graph (workers.training.seed_step
   .SeedBatchedStep, as benchmarks/gpu_seed_batch.py builds it: one fixed synthetic batch per seed
   already on the device), for every k of `--seeds` (default 5, 8 and 10).
4. if time is left: one trial with only the forward and backward compiled and clipping, gate entropy and
   AdamW eager (benchmarks/gpu.py's compiled TrialStep: the compiled path before the whole step), and
   the largest k stacked eagerly.

Printed: a table of samples/s and "x eager" per method, the step time AutoNorm-S / FrozenLN of each
row (the goal is <= 1.2x for the compiled rows), the goal lines (AutoNorm-S / FrozenLN <= 1.2x under the
default compiled path; >= 15x one eager trial at 10 seeds for FrozenLN, moonshot 30x), and per row the
warm-up seconds, the graphs dynamo compiled and the CUDA-graph skips inductor reported (0: every graph
replays as a CUDA graph). Rows run in priority order under a time budget (`--budget-s`; --quick: 450 s,
shorter windows): a compiled row starts only while the longest warm-up so far (90 s before the first)
still fits, else it is reported as skipped (a second run with `--seeds` naming the skipped k measures
them). The table is rewritten after every row (to --out and, where set, $OUT/gpu_whole_step.md), so an
interrupted run keeps what it measured.

Needs torch with CUDA (and Triton for inductor) and this repository's models/ and workers/training: not
Ray, MLflow or pydantic (`--block-imports` makes them unimportable, as on a bare GPU machine). Without a
CUDA device it refuses to run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # run as a file (`python3 benchmarks/gpu_whole_step.py`)
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks.gpu import (  # noqa: E402  (torch-free at import: the refusal needs no GPU stack)
    METHOD_NAMES,
    METHODS,
    SERVICE_PACKAGES,
    Sizes,
    _BlockImports,
)

MODES = ("default", "reduce-overhead")
DEFAULT_SEEDS = (5, 8, 10)
FROZEN_GOAL, SPEEDUP_GOAL, SPEEDUP_MOONSHOT, GOAL_SEEDS = 1.2, 15.0, 30.0, 10


@dataclass(frozen=True)
class Plan:
    """What one run measures and how long it may take."""

    mode: str = "reduce-overhead"
    seeds: tuple[int, ...] = DEFAULT_SEEDS
    preset: str = "vit_lite_paper"
    model_fields: dict[str, Any] = field(
        default_factory=lambda: {"image_size": 32, "in_channels": 3, "num_classes": 10}
    )
    batch: int = 128
    dataset_size: int = 8192
    warmup_steps: int = 10
    measure_s: float = 4.0
    budget_s: float = 1200.0
    # Seconds a compiled row is assumed to need before its window (cold compile, CUDA-graph recording)
    # until one was measured (then the longest measured): a row starts only while that much is left.
    compile_s: float = 90.0
    compile_backend: str = "inductor"
    quick: bool = False

    def sizes(self) -> Sizes:
        """benchmarks/gpu.py's Sizes for its TrialStep (one trial's model, data and batch)."""
        return Sizes(
            preset=self.preset, model_fields=dict(self.model_fields), batch=self.batch,
            dataset_size=self.dataset_size, warmup_steps=self.warmup_steps, measure_s=self.measure_s,
            concurrency=(), seeds_per_trial=self.seeds, seed_batch_steps=0, packed_seeds=0,
            layer_shape=(1, 1, 1), layer_iters=0, budget_s=self.budget_s,
            compile_backend=self.compile_backend,
        )  # fmt: skip


QUICK = Plan(warmup_steps=6, measure_s=2.0, budget_s=450.0, quick=True)


# ----- pure helpers (tested on CPU) ---------------------------------------------------------------------


def parse_seeds(text: str) -> tuple[int, ...]:
    """'5,8,10' -> (5, 8, 10): distinct stacked-seed counts >= 2, in the given order."""
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"seeds must be comma-separated integers, got {text!r}") from error
    if not values or any(k < 2 for k in values) or len(set(values)) != len(values):
        raise argparse.ArgumentTypeError(f"seeds must be distinct integers >= 2, got {text!r}")
    return tuple(values)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick", action="store_true", help="short windows, a 450 s budget: under 10 minutes"
    )
    parser.add_argument(
        "--mode", choices=MODES, default="reduce-overhead", help="compile mode of the compiled rows"
    )
    parser.add_argument(
        "--seeds", type=parse_seeds, default=DEFAULT_SEEDS, help="stacked seeds per trial, e.g. 5,8,10"
    )
    parser.add_argument(
        "--budget-s", type=float, help="seconds the rows may take (default 1200, --quick 450)"
    )
    parser.add_argument(
        "--out", type=Path, help="also write the markdown table here (and the results as .json)"
    )
    parser.add_argument(
        "--block-imports", action="store_true", help=f"make {', '.join(SERVICE_PACKAGES)} unimportable"
    )  # fmt: skip
    return parser


def plan_from_args(args: argparse.Namespace) -> Plan:
    plan = QUICK if args.quick else Plan()
    plan = replace(plan, mode=args.mode, seeds=tuple(args.seeds))
    if args.budget_s is not None:
        plan = replace(plan, budget_s=float(args.budget_s))
    return plan


@dataclass(frozen=True)
class Row:
    """One configuration, measured for every method: key, label, and what builds one step of it."""

    key: str
    label: str
    compiled: bool  # whether it compiles (then it needs Plan.compile_s of the budget before its window)
    seeds: int = 1  # seeds stepped together (samples per step = seeds * batch)


def rows_in_priority_order(plan: Plan) -> list[Row]:
    """The rows a run measures, most important first: the eager baseline, the compiled trial (the 1.2x
    goal), the largest k (the 15x goal), the other k from large to small, then the before/after extras."""
    mode = "CUDA graphs" if plan.mode == "reduce-overhead" else "torch.compile default"
    ks = sorted(plan.seeds, reverse=True)
    rows = [
        Row("eager", "1 trial, eager (baseline)", compiled=False),
        Row("whole", f"1 trial, whole step compiled ({mode})", compiled=True),
        *[Row(f"stacked/{k}", f"{k} seeds stacked, whole step compiled ({mode})", True, k) for k in ks],
        Row("forward_only", f"1 trial, forward+backward compiled, the rest eager ({mode})", compiled=True),
    ]
    if ks:
        rows.append(
            Row(f"stacked_eager/{ks[0]}", f"{ks[0]} seeds stacked, eager", compiled=False, seeds=ks[0])
        )
    return rows


def step_ratio(rates: dict[str, float | None]) -> float | None:
    """AutoNorm-S step time over FrozenLN's, from samples/s at the same samples per step."""
    frozen, auto = rates.get("frozen_ln"), rates.get("autonorm_s")
    return frozen / auto if frozen and auto else None


def speedup(rate: float | None, base: float | None) -> float | None:
    return rate / base if rate and base else None


def render(results: dict[str, Any], plan: Plan, device_name: str) -> str:
    """The markdown table of a (possibly partial) run."""
    rows, measured = rows_in_priority_order(plan), results["rows"]
    base = {m: measured.get("eager", {}).get(m, {}).get("rate") for m in METHODS}
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    command = "benchmarks/gpu_whole_step.py" + (" --quick" if plan.quick else "")
    lines = [
        "## The whole training step compiled: AutoNorm-S against FrozenLN, stacked seeds against one eager "
        "trial",
        "",
        f"Device: {device_name}; torch {results.get('torch', '?')}; {when}; "
        f"{results.get('elapsed_s', 0):.0f} s. {command}, compile mode {plan.mode}. Model {plan.preset} "
        f"{plan.model_fields}, batch {plan.batch} per seed, bf16 autocast, AdamW, clipping 1.0. SYNTHETIC "
        f"data (speed only); {plan.measure_s:g} s windows after {plan.warmup_steps} warm-up steps "
        "(compilation excluded). x eager: samples/s over one eager trial of the same method.",
        "",
        f"| configuration | {METHOD_NAMES['frozen_ln']} samples/s (x eager) | "
        f"{METHOD_NAMES['autonorm_s']} samples/s (x eager) | step AutoNorm-S / FrozenLN | warm-up s | "
        "graphs compiled | CUDA-graph skips |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        entry = measured.get(row.key)
        if entry is None:
            why = results["skipped"].get(row.key, "not run")
            lines.append(f"| {row.label} | {why} | | | | | |")
            continue
        cells, rates = [], {}
        for method in METHODS:
            value = entry.get(method, {})
            if "rate" in value:
                rates[method] = value["rate"]
                ratio = speedup(value["rate"], base[method])
                cells.append(f"{value['rate']:,.0f}" + (f" ({ratio:.1f}x)" if ratio else ""))
            else:
                cells.append(value.get("error", "n/a"))
        ratio = step_ratio(rates)
        extra = [
            " / ".join(f"{entry.get(m, {}).get(key, 0):.0f}" for m in METHODS)
            for key in ("warmup_s", "graphs", "cudagraph_skips")
        ]
        ratio_cell = f"{ratio:.2f}x" if ratio else "n/a"
        lines.append(f"| {row.label} | {cells[0]} | {cells[1]} | {ratio_cell} | " + " | ".join(extra) + " |")
    lines += ["", *goal_lines(results, plan), ""]
    return "\n".join(lines)


def goal_lines(results: dict[str, Any], plan: Plan) -> list[str]:
    """The issue's targets against what this run measured (or why it could not say)."""
    measured = results["rows"]

    def rate(key: str, method: str) -> float | None:
        return measured.get(key, {}).get(method, {}).get("rate")

    whole = step_ratio({m: rate("whole", m) for m in METHODS})
    verdict = "not measured"
    if whole:
        verdict = f"{whole:.2f}x (goal <= {FROZEN_GOAL}x: {'met' if whole <= FROZEN_GOAL else 'not met'})"
    lines = [f"- AutoNorm-S step / FrozenLN step, one trial, whole step compiled ({plan.mode}): {verdict}"]
    for k in sorted(plan.seeds):
        parts = []
        for method in METHODS:
            ratio = speedup(rate(f"stacked/{k}", method), rate("eager", method))
            parts.append(
                f"{METHOD_NAMES[method]} {ratio:.1f}x" if ratio else f"{METHOD_NAMES[method]} not measured"
            )
        goal = (
            f" (goal for FrozenLN >= {SPEEDUP_GOAL:g}x, moonshot {SPEEDUP_MOONSHOT:g}x)"
            if k == GOAL_SEEDS
            else ""
        )
        label = f"- {k} seeds stacked, whole step compiled, samples/s over one eager trial"
        lines.append(f"{label}: {', '.join(parts)}{goal}")
    return lines


# ----- the steps ------------------------------------------------------------------------------------------


class WholeTrialStep:
    """One trial's step as the training loop runs it under budget.compile: benchmarks/gpu.py's TrialStep
    (model, optimizer, schedule, synthetic data on the device, the crop+flip augmentation) with the whole
    step compiled (workers.training.whole_step.CompiledTrainStep) instead of the eager one."""

    def __init__(self, method: str, plan: Plan, device: Any, *, seed: int = 0) -> None:
        from benchmarks.gpu import TrialStep
        from workers.training.whole_step import CompiledTrainStep

        # TrialStep in eager mode builds everything but the step; the step here replaces its __call__.
        self.base = TrialStep(method, "none", plan.sizes(), device, seed=seed)
        self.device = device
        self.step = CompiledTrainStep(
            self.base.model, loss_fn=self.base.loss_fn, optimizer=self.base.optimizer, grad_clip=1.0,
            device=device, amp=device.type == "cuda", mode=plan.mode, backend=plan.compile_backend,
        )  # fmt: skip
        if not self.step.active:
            raise RuntimeError(f"compile {plan.mode} is not available on {device}")
        self.step.start_epoch()

    def __call__(self) -> None:
        x, y = self.base._next_batch()
        x, y = x.to(self.device, non_blocking=True), y.to(self.device, non_blocking=True)
        x = self.base.augmenter(x)
        self.step(x, y)
        self.base.scheduler.step()
        if not (self.step.forward.active and self.step.update.active):
            raise RuntimeError("the compiled step fell back to eager")


def build_step(row: Row, method: str, plan: Plan, device: Any) -> Callable[[], None]:
    """A callable that runs one training step of `row` for `method`."""
    from benchmarks.gpu import TrialStep
    from benchmarks.gpu_seed_batch import build_seed_batched_step

    kind, _, k = row.key.partition("/")
    if kind == "eager":
        return TrialStep(method, "none", plan.sizes(), device)
    if kind == "forward_only":
        return TrialStep(method, plan.mode, plan.sizes(), device)
    if kind == "whole":
        return WholeTrialStep(method, plan, device)
    compile_mode = plan.mode if kind == "stacked" else "none"
    return build_seed_batched_step(
        plan.preset, method, int(k), str(device), plan.batch,
        compile=compile_mode, compile_backend=plan.compile_backend,
    )  # fmt: skip


# ----- the run ---------------------------------------------------------------------------------------------


def measure(row: Row, method: str, plan: Plan, device: Any) -> dict[str, float]:
    """samples/s of `row` for `method` over a timed window, with its warm-up seconds, the graphs dynamo
    compiled and the CUDA-graph skips inductor counted meanwhile."""
    import torch
    from torch._dynamo.utils import counters

    from benchmarks.gpu import measure_steps, warm_up

    graphs_before = counters["stats"]["unique_graphs"]
    skips_before = counters["inductor"]["cudagraph_skips"]
    started = time.perf_counter()
    step = build_step(row, method, plan, device)
    warm_up(step, device, plan.warmup_steps)
    warm_s = time.perf_counter() - started  # building, compiling, recording the CUDA graphs, warm-up steps
    count, elapsed = measure_steps(step, device, plan.measure_s)
    result = {
        "rate": count * row.seeds * plan.batch / elapsed,
        "ms_per_step": elapsed / count * 1000,
        "warmup_s": warm_s,
        "graphs": counters["stats"]["unique_graphs"] - graphs_before,
        "cudagraph_skips": counters["inductor"]["cudagraph_skips"] - skips_before,
    }
    del step
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()
    return result


def run(plan: Plan, device: Any, device_name: str, write: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    import torch

    started = time.perf_counter()
    results: dict[str, Any] = {"rows": {}, "skipped": {}, "torch": torch.__version__, "plan": asdict(plan)}

    def log(message: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)

    compile_s: list[float] = []  # warm-up seconds of the compiled rows so far
    for row in rows_in_priority_order(plan):
        for method in METHODS:
            left = plan.budget_s - (time.perf_counter() - started)
            need = plan.measure_s + 10 + (max(compile_s, default=plan.compile_s) if row.compiled else 0)
            if left < need:
                results["skipped"].setdefault(
                    row.key, f"skipped: {left:.0f} s of the budget left, needs ~{need:.0f} s"
                )
                log(f"{row.key} {method}: {results['skipped'][row.key]}")
                continue
            entry = results["rows"].setdefault(row.key, {})
            with section(entry, method, log):
                entry[method] = measure(row, method, plan, device)
                value = entry[method]
                if row.compiled:
                    compile_s.append(value["warmup_s"])
                log(
                    f"{row.label}, {METHOD_NAMES[method]}: {value['rate']:,.0f} samples/s, "
                    f"{value['ms_per_step']:.2f} ms/step (warm-up {value['warmup_s']:.0f} s, "
                    f"{value['graphs']} graphs, {value['cudagraph_skips']} CUDA-graph skips)"
                )
            results["elapsed_s"] = time.perf_counter() - started
            write(results)
    results["elapsed_s"] = time.perf_counter() - started
    write(results)
    return results


@contextlib.contextmanager
def section(entry: dict[str, Any], method: str, log: Callable[[str], None]) -> Iterator[None]:
    """A failing measurement is written into its cell; the rest of the run goes on (a lent GPU, one shot)."""
    try:
        yield
    except Exception as error:
        traceback.print_exc()
        first = str(error).splitlines()[0][:160] if str(error) else ""
        entry[method] = {"error": f"failed: {type(error).__name__}: {first}"}
        log(f"{method}: {entry[method]['error']}")


def targets(out: Path | None) -> list[Path]:
    found = [out] if out else []
    if os.environ.get("OUT"):
        found.append(Path(os.environ["OUT"]) / "gpu_whole_step.md")
    return list(dict.fromkeys(found))


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.block_imports:
        sys.meta_path.insert(0, _BlockImports(SERVICE_PACKAGES))
    import torch

    if not torch.cuda.is_available():
        parser.error(
            "no CUDA device: this benchmark times the compiled training step on a GPU (CUDA graphs, "
            "inductor's Triton kernels); run it on a CUDA machine. The CPU tests check the compiled step "
            "itself (tests/workers/training/test_whole_step.py)."
        )
    plan = plan_from_args(args)
    device, device_name = torch.device("cuda"), torch.cuda.get_device_name(0)
    torch.set_num_threads(1)  # what a trial gets by default (resources.cpu 1), as in gpu.py
    paths = targets(args.out)

    def write(results: dict[str, Any]) -> None:
        table = render(results, plan, device_name)
        for path in paths:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(table)
            path.with_suffix(".json").write_text(json.dumps(results, indent=2, default=str))

    results = run(plan, device, device_name, write)
    print(render(results, plan, device_name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
