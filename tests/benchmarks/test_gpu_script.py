"""benchmarks/gpu.py runs end to end (tiny sizes on CPU), and its own path needs none of the service's
dependencies (the GPU machine has torch but not pydantic, Ray or MLflow)."""

import dataclasses
import json
import runpy
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
ENV = {"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"}


def test_the_smoke_run_writes_every_row_of_the_gpu_table(tmp_path):
    out = tmp_path / "gpu_bench.md"
    completed = subprocess.run(
        [sys.executable, "benchmarks/gpu.py", "--smoke", "--out", str(out)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        env={**ENV, "HOME": str(tmp_path)},
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    table = out.read_text()
    assert completed.stdout.strip() == table.strip()
    results = json.loads(out.with_suffix(".json").read_text())
    assert results["errors"] == {}
    for method in ("frozen_ln", "autonorm_s"):
        for mode in ("none", "default", "reduce-overhead"):
            assert results["single"][method][mode] > 0
        for mode in ("none", "reduce-overhead"):
            assert results["concurrent"][f"2/{mode}/{method}"] > 0
        assert results["seed_batch"][f"2/{method}"] > 0
        assert results["seed_batch_compiled"][f"2/{method}"] > 0
    assert set(results["layer"]) == {"eager", "compiled"}
    for label in (
        "| 1 trial, eager | ",
        "| 1 trial, torch.compile (default) | ",
        "| 1 trial, CUDA graphs (compile reduce-overhead) | ",
        "| 2 concurrent trial processes, eager | ",
        "| 2 concurrent trial processes, CUDA graphs | ",
        "| 2 seeds batched in one trial | ",
        "| 2 seeds batched in one trial, CUDA graphs (compile reduce-overhead) | ",
        "| eager | ",
        "SYNTHETIC",
        "SMOKE RUN",
        "graph break",
    ):
        assert label in table
    eager_row = next(line for line in table.splitlines() if line.startswith("| 1 trial, eager |"))
    assert eager_row.count("(1.0x)") == 2  # each method's eager trial is its own baseline


def test_a_trial_step_builds_and_runs_with_pydantic_ray_and_mlflow_unimportable():
    script = (
        "import sys, torch\n"
        "sys.argv = ['gpu.py']\n"
        "import runpy\n"
        "bench = runpy.run_path('benchmarks/gpu.py', run_name='gpu_bench')\n"
        "sys.meta_path.insert(0, bench['_BlockImports'](bench['SERVICE_PACKAGES']))\n"
        "step = bench['TrialStep']('autonorm_s', 'none', bench['SMOKE'], torch.device('cpu'))\n"
        "step(); step()\n"
        "service = ('pydantic', 'ray', 'mlflow')\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in service or m == 'studies.spec')\n"
        "print('loaded:', loaded)\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, env=ENV
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert "loaded: []" in completed.stdout


def test_a_packed_trial_process_reports_its_peak_then_steps_a_timed_window_on_request():
    process = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.gpu_seed_batch", "--serve", "--preset", "vit_lite_tiny",
         "--method", "autonorm_s", "--k", "2", "--device", "cpu", "--batch-size", "4",
         "--compile", "none"],
        cwd=REPO_ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=ENV,
    )  # fmt: skip
    try:
        ready = json.loads(process.stdout.readline())
        assert ready == {"ready": True, "peak_bytes": 0, "device_bytes": 0}  # no CUDA memory to report on CPU
        process.stdin.write(json.dumps({"start_at": 0, "seconds": 0.2}) + "\n")
        process.stdin.flush()
        window = json.loads(process.stdout.readline())
        assert window["steps"] >= 1 and window["elapsed"] >= 0.2
        process.stdin.write(json.dumps({"stop": True}) + "\n")
        process.stdin.flush()
        assert process.wait(timeout=30) == 0
    finally:
        process.kill()


def test_skipped_sections_leave_their_rows_out_and_the_table_names_them():
    bench = runpy.run_path(str(REPO_ROOT / "benchmarks/gpu.py"), run_name="gpu_bench")
    skipped = ("concurrent", "packed", "layer", "seed_batch", "default")
    sizes = dataclasses.replace(bench["SMOKE"], skipped=skipped, concurrency=())
    results = {
        "single": {m: {"none": 100.0} for m in bench["METHODS"]}, "concurrent": {}, "seed_batch": {},
        "seed_batch_compiled": {}, "notes": {}, "errors": {}, "graph_breaks": "1 graph(s)", "layer": {},
        "packed": {}, "elapsed_s": 1.0, "torch": "x",
    }  # fmt: skip
    table = bench["render"](results, sizes, "CPU", smoke=True)
    assert "Not measured in this run (--skip): concurrent, packed, layer, seed_batch, default." in table
    for left_out in ("concurrent trial processes", "norm layer fwd+bwd", "| 2 seeds batched in one trial |",
                     "torch.compile (default)"):  # fmt: skip
        assert left_out not in table
    assert "2 seeds batched in one trial, CUDA graphs" in table  # the compiled row is not "seed_batch"


def test_an_unknown_section_to_skip_is_refused_naming_the_choices():
    completed = subprocess.run(
        [sys.executable, "benchmarks/gpu.py", "--smoke", "--skip", "concurrent,kernels"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env=ENV,
    )
    assert completed.returncode == 2
    assert (
        "unknown section(s) kernels; choose from concurrent, packed, layer, seed_batch, default"
        in completed.stderr
    )
