"""The study driver never imports torch: every study pays the driver's start-up once, and torch's import
is seconds of it. Trials import torch in their own processes."""

import subprocess
import sys

import workers.training


def _loaded_after(imports: str, watched: str) -> str:
    """What a fresh interpreter prints after `imports`: the sorted modules loaded that `watched` (a
    predicate on `m`, as Python source) picks."""
    code = f"import sys\n{imports}\nprint(sorted(m for m in sys.modules if {watched}))\n"
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240)
    assert completed.returncode == 0, completed.stderr[-2000:]
    return completed.stdout.strip()


def test_the_driver_and_its_tune_callbacks_import_without_torch():
    imports = (
        "import workers.driver.study, workers.driver.recorder, workers.trials.entry\n"
        "import workers.trials.plan, workers.tracking.tracker"
    )
    assert _loaded_after(imports, "m == 'torch' or m.startswith('torch.')") == "[]"


def test_the_driver_defers_what_it_needs_only_at_the_end_or_never():
    # The results code (scipy's statistics, through studies.report and studies.tables) runs when the study
    # ends, and migrations never run in a driver: importing either would lengthen every study's start.
    deferred = ("alembic", "studies.report", "studies.stats", "studies.tables", "studies.store.results")
    assert _loaded_after("import workers.driver.study", f"m in {deferred!r}") == "[]"


def test_the_training_package_exports_every_name_it_resolves_lazily():
    assert sorted(workers.training.__all__) == sorted(workers.training._SOURCES)
    for name in workers.training.__all__:
        assert getattr(workers.training, name) is not None
