"""Planning runs in the API process, which never imports torch: the package imports neither torch nor
FastAPI nor the workers."""

from __future__ import annotations

import subprocess
import sys


def test_importing_planning_loads_neither_torch_nor_fastapi_nor_the_workers() -> None:
    code = (
        "import sys, studies.planning; "
        "print(sorted(m for m in ('torch', 'fastapi', 'workers', 'models', 'ray') if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert result.stdout.strip() == "[]"
