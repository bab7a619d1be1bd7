"""The README's configuration tables name every variable the code reads: the service's Settings, the
worker side's WorkerSettings and the norm kernels' switches."""

import re
from pathlib import Path

from service.settings import Settings

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
CONFIGURATION = README[README.index("## Configuration") : README.index("## Performance")]
PRODUCT = [
    Path(__file__).resolve().parents[1] / package for package in ("models", "service", "studies", "workers")
]


def _settings_variables() -> set[str]:
    names = set()
    for name, field in Settings.model_fields.items():
        alias = field.validation_alias
        choices = getattr(alias, "choices", None)
        names.add(str(choices[0]) if choices else f"NORMLAB_{name.upper()}")
    return names


def _variables_read_in_code() -> set[str]:
    read = re.compile(r"""(?:environ\.get|getenv|env\.get)\(\s*["']([A-Z][A-Z0-9_]+)["']""")
    found = set()
    for package in PRODUCT:
        for path in package.rglob("*.py"):
            found.update(read.findall(path.read_text(encoding="utf-8")))
    return found


def test_every_setting_has_a_row():
    missing = sorted(v for v in _settings_variables() if f"`{v}`" not in CONFIGURATION)
    assert missing == []


def test_every_variable_the_workers_and_kernels_read_has_a_row():
    # The system's and Python's own variables.
    system = {"PATH", "CC", "HOME", "PYTHONUNBUFFERED", "PYTHONPATH"}
    read = _variables_read_in_code() - system
    assert {"NORMLAB_OFFLINE_DATA", "NORMLAB_FUSED_NORMS"} <= read  # the scan finds them
    missing = sorted(v for v in read if f"`{v}`" not in CONFIGURATION)
    assert missing == []
