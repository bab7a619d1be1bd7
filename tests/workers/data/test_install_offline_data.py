"""scripts/install_offline_data.sh is a fast no-op once the sources are installed."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
SCRIPT = REPO / "scripts" / "install_offline_data.sh"

pytestmark = [pytest.mark.offline_data, pytest.mark.usefixtures("offline_sources")]


def test_second_run_installs_nothing_and_reports_every_source_present() -> None:
    env = {**os.environ, "VENV": str(Path(sys.executable).parent.parent)}
    started = time.perf_counter()
    result = subprocess.run(
        ["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    elapsed = time.perf_counter() - started
    assert result.returncode == 0, result.stderr
    assert "installed " not in result.stdout
    present = [line for line in result.stdout.splitlines() if line.strip().startswith("present")]
    assert len(present) == 5, result.stdout
    assert elapsed < 30


def test_script_is_valid_bash() -> None:
    assert subprocess.run(["bash", "-n", str(SCRIPT)], check=False).returncode == 0
