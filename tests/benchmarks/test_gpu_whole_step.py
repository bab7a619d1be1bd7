"""benchmarks/gpu_whole_step.py: refuses to run without a CUDA device, parses its arguments into a plan,
renders partial runs, and builds and steps every configuration it times on the torch-only path (the GPU
machine has no pydantic, Ray or MLflow)."""

import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import gpu_whole_step as bench

REPO_ROOT = Path(__file__).resolve().parents[2]
ENV = {"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"}


def test_without_a_cuda_device_it_refuses_with_a_clear_message(tmp_path):
    completed = subprocess.run(
        [
            sys.executable,
            "benchmarks/gpu_whole_step.py",
            "--quick",
            "--block-imports",
            "--out",
            str(tmp_path / "t.md"),
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**ENV, "HOME": str(tmp_path), "CUDA_VISIBLE_DEVICES": ""},
    )
    assert completed.returncode == 2
    assert "no CUDA device" in completed.stderr and "run it on a CUDA machine" in completed.stderr
    assert not (tmp_path / "t.md").exists()  # nothing measured, nothing written


def test_quick_is_the_under_ten_minutes_plan_and_the_options_shape_it():
    quick = bench.plan_from_args(bench.build_parser().parse_args(["--quick"]))
    assert quick.quick and quick.mode == "reduce-overhead" and quick.seeds == (5, 8, 10)
    # The rows' budget leaves 2.5 minutes of a 10-minute lease for start-up and the last row's compile.
    assert quick.budget_s <= 450
    plan = bench.plan_from_args(
        bench.build_parser().parse_args(["--mode", "default", "--seeds", "10,4", "--budget-s", "90"])
    )
    assert (plan.quick, plan.mode, plan.seeds, plan.budget_s) == (False, "default", (10, 4), 90.0)
    assert plan.measure_s > quick.measure_s


@pytest.mark.parametrize("text", ["", "5,x", "1,8", "8,8"])
def test_seed_counts_must_be_distinct_integers_of_at_least_two(text, capsys):
    with pytest.raises(SystemExit):
        bench.build_parser().parse_args(["--seeds", text])
    assert "seeds must be" in capsys.readouterr().err


def test_rows_run_baseline_first_then_the_two_goals_then_the_extras():
    keys = [row.key for row in bench.rows_in_priority_order(bench.Plan(seeds=(5, 8, 10)))]
    assert keys == [
        "eager", "whole", "stacked/10", "stacked/8", "stacked/5", "forward_only", "stacked_eager/10",
    ]  # fmt: skip
    rows = {row.key: row for row in bench.rows_in_priority_order(bench.Plan(seeds=(5, 8, 10)))}
    assert rows["stacked/8"].seeds == 8 and rows["stacked/8"].compiled
    assert not rows["eager"].compiled and rows["eager"].seeds == 1


def test_ratios_compare_step_times_and_speedups_and_say_nothing_without_both_numbers():
    assert bench.step_ratio({"frozen_ln": 1200.0, "autonorm_s": 1000.0}) == pytest.approx(1.2)
    assert bench.step_ratio({"frozen_ln": 1200.0}) is None
    assert bench.speedup(15000.0, 1000.0) == 15.0
    assert bench.speedup(None, 1000.0) is None and bench.speedup(10.0, None) is None


def test_a_partial_run_renders_every_row_with_its_number_its_failure_or_why_it_was_skipped():
    plan = bench.Plan(seeds=(5, 10))
    cell = {"warmup_s": 40.0, "graphs": 2, "cudagraph_skips": 0, "ms_per_step": 10.0}
    results = {
        "rows": {
            "eager": {"frozen_ln": {"rate": 6000.0, **cell}, "autonorm_s": {"rate": 3000.0, **cell}},
            "whole": {"frozen_ln": {"rate": 24000.0, **cell}, "autonorm_s": {"rate": 21000.0, **cell}},
            "stacked/10": {
                "frozen_ln": {"rate": 96000.0, **cell},
                "autonorm_s": {"error": "failed: RuntimeError: out of memory"},
            },
        },
        "skipped": {"stacked/5": "skipped: 30 s of the budget left, needs ~102 s"},
        "torch": "2.13",
        "elapsed_s": 470.0,
    }
    table = bench.render(results, plan, "NVIDIA H100")
    lines = table.splitlines()
    whole = next(line for line in lines if line.startswith("| 1 trial, whole step compiled (CUDA graphs) |"))
    assert "24,000 (4.0x)" in whole and "21,000 (7.0x)" in whole and "| 1.14x |" in whole
    stacked = next(line for line in lines if line.startswith("| 10 seeds stacked"))
    assert "96,000 (16.0x)" in stacked and "failed: RuntimeError: out of memory" in stacked
    assert any(line.startswith("| 5 seeds stacked") and "skipped: 30 s" in line for line in lines)
    assert "one trial, whole step compiled (reduce-overhead): 1.14x (goal <= 1.2x: met)" in table
    assert "10 seeds stacked, whole step compiled, samples/s over one eager trial: FrozenLN 16.0x" in table
    assert "Device: NVIDIA H100" in table and "SYNTHETIC" in table


BUILD_BLOCKED = """
import sys, torch
sys.path.insert(0, '.')
from benchmarks.gpu import SERVICE_PACKAGES, _BlockImports
sys.meta_path.insert(0, _BlockImports(SERVICE_PACKAGES))
torch.set_num_threads(1)
import benchmarks.gpu_whole_step as bench
plan = bench.Plan(
    mode='default', seeds=(2,), preset='vit_lite_tiny', batch=8, dataset_size=32, warmup_steps=2,
    model_fields={'image_size': 8, 'in_channels': 3, 'num_classes': 10}, measure_s=0.1,
    compile_backend='aot_eager',
)
rows = {row.key: row for row in bench.rows_in_priority_order(plan)}
for key in ('whole', 'stacked/2'):
    result = bench.measure(rows[key], 'autonorm_s', plan, torch.device('cpu'))
    print(key, result['graphs'], result['rate'] > 0)
loaded = sorted(m for m in sys.modules if m.split('.')[0] in SERVICE_PACKAGES or m == 'studies.spec')
print('loaded:', loaded)
"""


def test_the_compiled_steps_it_times_build_and_run_with_pydantic_ray_and_mlflow_unimportable(tmp_path):
    # On CPU through dynamo's aot_eager backend: the same code path as on the GPU but inductor.
    completed = subprocess.run(
        [sys.executable, "-c", BUILD_BLOCKED],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**ENV, "HOME": str(tmp_path)},
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    lines = completed.stdout.splitlines()
    assert "whole 2 True" in lines  # forward (+ its backward) and the update: two graphs
    assert "stacked/2 1 True" in lines  # the stacked step: one graph
    assert "loaded: []" in lines
