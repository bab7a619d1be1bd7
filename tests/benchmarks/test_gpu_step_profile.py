"""benchmarks/gpu_step_profile.py runs end to end (tiny sizes on CPU) with the service's dependencies
unimportable, and gives every method and mode a wall time and every phase of the step its host time."""

import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

REPO_ROOT = Path(__file__).resolve().parents[2]

RUN_BLOCKED = """
import runpy, sys
sys.path.insert(0, '.')
from benchmarks.gpu import SERVICE_PACKAGES, _BlockImports
sys.meta_path.insert(0, _BlockImports(SERVICE_PACKAGES))
sys.argv = ['gpu_step_profile.py', '--smoke', '--steps', '2', '--out', sys.argv[1]]
runpy.run_path('benchmarks/gpu_step_profile.py', run_name='__main__')
"""


def test_the_smoke_profile_times_every_phase_of_both_methods_in_both_modes(tmp_path):
    out = tmp_path / "profile.md"
    completed = subprocess.run(
        [sys.executable, "-c", RUN_BLOCKED, str(out)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        env={"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1", "HOME": str(tmp_path)},
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    table = out.read_text()
    assert "SMOKE RUN" in table
    header = next(line for line in table.splitlines() if line.startswith("| method | mode |"))
    phases = [cell.split()[0] for cell in header.strip("|").split("|")[3:]]
    assert phases == ["batch", "forward", "gate_entropy", "loss", "backward", "clip", "optimizer"]
    for method in ("FrozenLN", "AutoNorm-S"):
        for mode in ("eager", "CUDA graphs"):
            row = next(line for line in table.splitlines() if line.startswith(f"| {method} | {mode} |"))
            cells = [cell.strip() for cell in row.strip("|").split("|")]
            assert float(cells[2]) > 0  # wall ms per step
            host = {
                phase: float(re.match(r"([\d.]+) /", cell).group(1))
                for phase, cell in zip(phases, cells[3:], strict=True)
            }
            for phase in ("forward", "backward", "optimizer"):  # each really ran inside its range
                assert host[phase] > 0, (method, mode, phase)
    assert re.search(r"\| CUDA graphs \| [\d.]+x \|", table)  # the AutoNorm-S / FrozenLN ratios


def _event(name, start, end, device_us=0.0, device_type="DeviceType.CPU"):  # type: ignore[no-untyped-def]
    return SimpleNamespace(
        name=name,
        time_range=SimpleNamespace(start=start, end=end),
        self_device_time_total=device_us,
        device_type=device_type,
    )


def test_a_phase_gets_the_kernels_launched_while_it_ran_from_any_thread_each_once():
    from benchmarks.gpu_step_profile import phase_times

    events = [
        _event("step/forward", 0, 1000),
        _event("aten::mm", 10, 20, device_us=500),  # the step's own thread
        _event("step/backward", 1000, 3000),
        # The backward's ops run on autograd's thread: no child of the range, but launched while it ran.
        _event("autograd::engine::evaluate_function: MmBackward0", 1200, 1300, device_us=800),
        _event("step/backward", 1050, 2900, device_us=9999, device_type="DeviceType.CUDA"),  # GPU-side copy
        _event("aten::add", 3500, 3600, device_us=70),  # between steps: no phase
    ]
    host, device = phase_times(events, steps=2)
    assert host["forward"] == 0.5 and host["backward"] == 1.0  # ms per step
    assert device["forward"] == 0.25 and device["backward"] == 0.4
    assert sum(device.values()) == 0.65
