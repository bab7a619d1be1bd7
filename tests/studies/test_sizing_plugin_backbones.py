"""The memory estimate of a plugin's backbone, which studies.sizing cannot count without torch: the
parameters and saved activations its check measured, said in the estimate's words; one no check measured
is sized at its input batch and its logits and says so; never an error."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from normlab import REGISTRY, Backbone
from studies.limits import StudyLimits
from studies.planning import plan_study
from studies.sizing import BYTES_PER_PARAMETER, EVAL_BATCH_SIZE, model_fields, shape_problems, trial_memory
from studies.spec import StudySpec
from studies.spec.memory import worst_trial_memory

SHA = "b" * 64
SOURCE = f"tiny.py@{SHA[:8]}"
FIELDS = ["dim", "norm", "norm_options", "image_size", "in_channels", "num_classes"]
MEASURED = {
    "name": "tiny",
    "family": "image",
    "config_fields": FIELDS,
    "presets": {"tiny_wide": {"dim": 128}},
    "source": SOURCE,
    "parameters": 1_000,
    "activations": 500,
}


def _spec(backbone: dict, **changes) -> dict:
    provides = {"backbones": [backbone]}
    plugin = {
        "path": "tiny.py",
        "package": "normlab_plugin_tiny_bbbbbbbb",
        "sha256": SHA,
        "provides": provides,
    }
    return {
        "name": "t",
        "dataset": "digits",
        "model": "tiny",
        "methods": ["frozen_ln", "autonorm"],
        "plugins": [plugin],
        **changes,
    }


def test_its_trial_is_its_measured_parameters_with_their_state_and_its_measured_activations():
    spec = StudySpec.model_validate(
        _spec(MEASURED, budget={"batch_size": 100}, resources={"seeds_per_trial": 2})
    )
    with spec.plugins_visible():
        estimate = worst_trial_memory(spec, device="cpu")
    memory = estimate.memory
    assert memory.parameters == 1_000
    assert memory.state_bytes == 2 * 1_000 * BYTES_PER_PARAMETER
    assert memory.activation_bytes == 2 * 500 * 100 * 4  # above an evaluation batch's logits
    assert memory.input_bytes == 2 * 100 * 1 * 8 * 8 * 4  # digits: 1 x 8 x 8 float32 images
    assert "as the plugin's check measured it" in (estimate.estimated or "")
    assert "model.overrides are not counted" in (estimate.estimated or "")


def test_the_memory_rule_refuses_it_naming_the_measured_basis():
    data = _spec({**MEASURED, "parameters": 10**9})
    with pytest.raises(ValidationError, match="as the plugin's check measured it") as error:
        StudySpec.model_validate(data, context={"limits": StudyLimits(trial_memory_gib=1.0)})
    assert error.value.errors()[0]["type"] == "over_memory"


def test_one_no_check_measured_is_sized_at_its_inputs_and_logits_and_says_so():
    unmeasured = {k: v for k, v in MEASURED.items() if k not in ("parameters", "activations")}
    spec = StudySpec.model_validate(_spec(unmeasured), context={"limits": StudyLimits(trial_memory_gib=1.0)})
    with spec.plugins_visible():
        estimate = worst_trial_memory(spec, device="cpu")
    assert estimate.memory.parameters == 0
    # One training batch of inputs; an evaluation batch's 10 logits per sample (for one seed and its loss).
    assert estimate.memory.input_bytes == 128 * 1 * 8 * 8 * 4
    assert estimate.memory.activation_bytes == 2 * 10 * EVAL_BATCH_SIZE * 4
    assert "whose sizes no check measured" in (estimate.estimated or "")


def test_its_fields_are_its_preset_s_and_the_dataset_s_and_only_its_shape_fields_are_checked():
    record = Backbone("tiny", "image", tuple(FIELDS), {"tiny_wide": {"dim": 128}}, source=SOURCE)
    with REGISTRY.overlay([record]):
        backbone, fields = model_fields("digits", "tiny_wide")
        assert (backbone, fields) == (
            "tiny",
            {"dim": 128, "image_size": 8, "in_channels": 1, "num_classes": 10},
        )
        assert shape_problems(backbone, fields) == {}
        assert set(shape_problems(backbone, {**fields, "dim": 0})) == {"dim"}
        assert trial_memory(backbone, fields, "layernorm", batch_size=4).parameters == 0


def test_the_plan_of_its_study_shows_the_measured_estimate_and_what_it_stands_on():
    memory = plan_study(StudySpec.model_validate(_spec(MEASURED))).memory
    assert memory.parameters == 1_000
    assert any("as the plugin's check measured them" in line for line in memory.basis)
    assert not any(line.startswith("counted from the models") for line in memory.basis)
