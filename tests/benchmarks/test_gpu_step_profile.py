"""benchmarks/gpu_step_profile.py runs end to end (tiny sizes on CPU) with the service's dependencies
unimportable, and gives every method and mode a wall time and every phase of the step its host time."""

import re
import subprocess
import sys
from pathlib import Path

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
