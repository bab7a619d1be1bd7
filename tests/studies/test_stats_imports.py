"""studies.stats and studies.tables stay pure numpy/scipy: no torch, no FastAPI, no rich until asked."""

from __future__ import annotations

import subprocess
import sys


def test_importing_stats_and_tables_loads_neither_torch_nor_fastapi_nor_rich() -> None:
    code = (
        "import sys, studies.stats, studies.tables; "
        "print(sorted(m for m in ('torch', 'fastapi', 'rich', 'mlflow', 'ray') if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert result.stdout.strip() == "[]"


def test_importing_the_spec_loads_no_scipy() -> None:
    # The CLI, the API's request parsing and every study driver import studies.spec; scipy costs seconds.
    code = "import sys, studies.spec; print('scipy' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert result.stdout.strip() == "False"
