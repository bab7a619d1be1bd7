"""A spec's plugins: named by a path or an entry point, validated from the facts the server's check
filled in, so a stored study reads back anywhere without the plugin's code."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from normlab import REGISTRY
from studies.spec import StudySpec
from studies.spec.plugins import PluginEntry

SHA = "a" * 64
SOURCE = f"rms.py@{SHA[:8]}"
PROVIDES = {
    "norms": [{"name": "rms", "options": ["eps"], "supports_functional": False, "source": SOURCE}],
    "methods": [{"name": "rms", "norm": "rms", "source": SOURCE}],
    "knobs": [
        {
            "name": "rms_eps",
            "kind": "float",
            "help": "eps",
            "low": 1e-8,
            "high": 1e-2,
            "methods": ["rms"],
            "norm_option": "eps",
            "source": SOURCE,
        }
    ],
}
CHECKED = {"path": "rms.py", "package": "normlab_plugin_rms_aaaaaaaa", "sha256": SHA, "provides": PROVIDES}


def _spec(**changes):
    return {
        "name": "rms",
        "dataset": "digits",
        "model": "vit_lite_tiny",
        "methods": ["rms", "frozen_ln"],
        "plugins": [CHECKED],
        **changes,
    }


def test_a_checked_plugin_s_method_and_knob_validate_like_built_ins():
    spec = StudySpec.model_validate(_spec(method_search={"rms": {"rms_eps": 1e-5}}))
    assert spec.methods == ["rms", "frozen_ln"]
    assert spec.plugins[0].ref == "rms.py"


def test_outside_validation_the_registry_does_not_keep_the_plugin_s_records():
    spec = StudySpec.model_validate(_spec())
    assert "rms" not in REGISTRY.methods
    with spec.plugins_visible():
        assert REGISTRY.methods.get("rms").norm == "rms"


def test_a_plugin_knob_outside_its_range_is_refused_at_its_field():
    with pytest.raises(ValidationError) as error:
        StudySpec.model_validate(_spec(method_search={"rms": {"rms_eps": 0.5}}))
    (problem,) = error.value.errors()
    assert problem["loc"] == ("method_search", "rms", "rms_eps")


def test_an_unchecked_plugin_s_method_is_unknown():
    with pytest.raises(ValidationError, match="unknown method"):
        StudySpec.model_validate(_spec(plugins=[{"path": "rms.py"}]))


@pytest.mark.parametrize(
    "entry",
    [{}, {"path": "a.py", "entry_point": "b"}, {**CHECKED, "provides": {"widgets": []}}],
    ids=["neither", "both", "unknown-section"],
)
def test_a_plugin_entry_names_exactly_one_source_and_known_sections(entry):
    with pytest.raises(ValidationError):
        PluginEntry.model_validate(entry)


def test_a_plain_string_is_a_path():
    assert PluginEntry.model_validate("rms.py").path == "rms.py"


def test_a_layer_torch_func_cannot_stack_runs_one_seed_per_trial():
    assert StudySpec.model_validate(_spec()).unstackable_methods() == ["rms"]
    with pytest.raises(ValidationError, match="seeds_per_trial"):
        StudySpec.model_validate(_spec(resources={"seeds_per_trial": 4}))
