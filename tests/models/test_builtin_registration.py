"""models registers its norm layers and backbones as built-ins whoever imports it first: a plugin whose
builder imports models.norms.build_norm must not make them its own (a long-lived process drops a plugin's
records when it moves on to the next study)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

FIRST_IMPORTED_BY_A_PLUGIN = """
from normlab import REGISTRY
from normlab.plugin import registering_as

with registering_as("plugin.py@12345678"):
    from models.norms import build_norm  # noqa: F401
sources = {r.source for section in ("norms", "backbones") for r in REGISTRY.section(section)}
assert sources == {"builtin"}, sources
assert all(r.build is not None for r in REGISTRY.backbones)
"""


def test_a_plugin_that_first_imports_models_leaves_its_records_built_in():
    root = Path(__file__).resolve().parents[2]
    finished = subprocess.run(
        [sys.executable, "-c", FIRST_IMPORTED_BY_A_PLUGIN], capture_output=True, text=True, cwd=root
    )
    assert finished.returncode == 0, finished.stderr
