"""`layer_scale_init: null` switches LayerScale off: Transforming-Rank studies run without it (with
LayerScale 1e-4 every block starts as the identity and no rank effect shows)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from studies.spec import KNOBS, StudySpec, load_spec, validate_spec_data

EXAMPLES = Path(__file__).resolve().parents[2] / "studies" / "examples"
BASE = {"name": "rank", "dataset": "digits", "model": "vit_lite_tiny", "methods": ["frozen_ln"]}


def _layer_scales(model_name: str, fields: dict) -> list:
    from models import build_model
    from models.layers import LayerScale

    model = build_model(model_name, {"image_size": 8, "in_channels": 1, "num_classes": 10, **fields})
    return [m for m in model.modules() if isinstance(m, LayerScale)]


def test_a_null_layer_scale_override_passes_the_apis_strict_validation_and_builds_no_layerscale():
    data = {**BASE, "model": {"preset": "vit_lite_tiny", "overrides": {"layer_scale_init": None}}}
    spec = validate_spec_data(data)
    assert spec.model.overrides == {"layer_scale_init": None}
    assert _layer_scales("vit_lite_tiny", spec.model.overrides) == []
    assert _layer_scales("vit_lite_tiny", {"layer_scale_init": 1e-4})  # the AutoNorm backbones keep it


def test_layer_scale_init_is_the_one_nullable_knob():
    assert [name for name, knob in KNOBS.items() if knob.nullable] == ["layer_scale_init"]


def test_a_fixed_null_knob_switches_layerscale_off_for_the_trial():
    from workers.training.config import TrainConfig, model_config

    spec = validate_spec_data({**BASE, "search": {"layer_scale_init": None}})
    knobs = {k: d.value for k, d in spec.search_space_for("frozen_ln").items()}
    assert knobs == {"layer_scale_init": None}
    cfg = TrainConfig(model="vit_lite_tiny", knobs=knobs)
    fields = model_config(cfg, norm_kind="layernorm", model_fields={"num_classes": 10})
    assert "layer_scale_init" in fields and fields["layer_scale_init"] is None


def test_a_grid_may_compare_runs_with_and_without_layerscale():
    grid = {"type": "grid", "values": [None, 1e-4]}
    spec = StudySpec.model_validate({**BASE, "kind": "grid", "search": {"layer_scale_init": grid}})
    points = spec.grid_points("frozen_ln")
    assert [p.knobs["layer_scale_init"] for p in points] == [None, 1e-4]
    assert StudySpec.model_validate(spec.model_dump(mode="json")) == spec


@pytest.mark.parametrize("knob", ["lr", "skip_scale", "activation"])
def test_null_is_refused_for_every_other_knob(knob):
    with pytest.raises(ValidationError) as caught:
        StudySpec.model_validate({**BASE, "search": {knob: None}})
    [error] = caught.value.errors()
    assert error["loc"] == ("search", knob) and "None" in error["msg"]


def test_out_of_range_layer_scale_values_name_null_as_the_way_to_switch_it_off():
    with pytest.raises(ValidationError, match=r"\(0, 10\] or null"):
        StudySpec.model_validate({**BASE, "search": {"layer_scale_init": 0}})


def test_the_rank_grid_example_runs_without_layerscale():
    spec = load_spec(EXAMPLES / "fashion_mnist_rank_grid.yaml")
    overrides = spec.model.overrides
    assert "layer_scale_init" in overrides and overrides["layer_scale_init"] is None
    assert _layer_scales("vit_lite_tiny", overrides) == []
