"""The study driver never imports torch: every study pays the driver's start-up once, and torch's import
is seconds of it. Trials import torch in their own processes."""

import subprocess
import sys

import workers.training


def test_the_driver_and_its_tune_callbacks_import_without_torch():
    code = (
        "import sys\n"
        "import workers.driver.study, workers.driver.recorder, workers.driver.trainable_entry\n"
        "import workers.driver.trial_plan, workers.tracking\n"
        "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))\n"
    )
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240)
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert completed.stdout.strip() == "[]"


def test_the_driver_defers_what_it_needs_only_at_the_end_or_never():
    # The results code (scipy's statistics, through studies.report and studies.tables) runs when the study
    # ends, and migrations never run in a driver: importing either would lengthen every study's start.
    code = (
        "import sys\n"
        "import workers.driver.study\n"
        "deferred = ('alembic', 'studies.report', 'studies.stats', 'studies.tables', 'service.study_results')\n"
        "print(sorted(m for m in deferred if m in sys.modules))\n"
    )
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240)
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert completed.stdout.strip() == "[]"


def test_the_training_package_exports_every_name_it_resolves_lazily():
    assert sorted(workers.training.__all__) == sorted(workers.training._SOURCES)
    for name in workers.training.__all__:
        assert getattr(workers.training, name) is not None
