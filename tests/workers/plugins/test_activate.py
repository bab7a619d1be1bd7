"""A study's plugins in a driver or a trial: imported from the source the study stored (never from the
user's path), one study's at a time in a long-lived process, and its user datasets registered."""

from __future__ import annotations

import numpy as np
import pytest

from normlab import REGISTRY
from normlab.loading import keep_only_plugins, read_plugin
from workers.plugins.activate import activate_extensions, stored_extensions

PLUGIN = 'from normlab.plugin import method\nmethod("{name}", norm="layernorm")\n'


@pytest.fixture(autouse=True)
def _builtins_only_afterwards():
    yield
    keep_only_plugins(())
    for source in {r.source for r in REGISTRY.datasets if r.source.startswith("user_files:")}:
        REGISTRY.datasets.remove_source(source)


def _stored_entry(path) -> dict:
    source = read_plugin(str(path))
    return {
        "path": str(path),
        "package": source.package,
        "sha256": source.sha256,
        "files": dict(source.files),
    }


def test_a_resumed_study_imports_the_source_it_stored_even_after_the_file_changed(tmp_path):
    path = tmp_path / "mine.py"
    path.write_text(PLUGIN.format(name="as_submitted"))
    entry = _stored_entry(path)
    path.write_text(PLUGIN.format(name="edited_since"))
    activate_extensions(stored_extensions({"plugins": [entry]}))
    assert "as_submitted" in REGISTRY.methods
    assert "edited_since" not in REGISTRY.methods


def test_the_next_study_in_the_same_process_sees_its_own_plugins_only(tmp_path):
    (tmp_path / "a.py").write_text(PLUGIN.format(name="study_a_method"))
    (tmp_path / "b.py").write_text(PLUGIN.format(name="study_b_method"))
    activate_extensions({"plugins": [_stored_entry(tmp_path / "a.py")]})
    activate_extensions({"plugins": [_stored_entry(tmp_path / "b.py")]})
    assert "study_b_method" in REGISTRY.methods and "study_a_method" not in REGISTRY.methods
    activate_extensions(None)
    assert {r.source for r in REGISTRY.methods} == {"builtin"}


def test_a_user_dataset_registers_its_facts_in_the_driver_and_its_builder_in_a_trial(tmp_path):
    rng = np.random.default_rng(0)
    path = tmp_path / "blobs.npz"
    np.savez(path, x=rng.normal(size=(60, 4)).astype("float32"), y=rng.normal(size=60).astype("float32"))
    declaration = {"name": "blobs", "path": str(path), "task": "tabular_regression"}
    activate_extensions({"user_datasets": [declaration]}, data_builders=False)
    record = REGISTRY.datasets.get("blobs")
    assert record.metric == "rmse" and record.build is None
    activate_extensions({"user_datasets": [declaration]})
    assert REGISTRY.datasets.get("blobs").build is not None
