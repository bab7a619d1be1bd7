"""studies.sizing against the models it describes without torch: its tables are models', the catalog's and
workers.data's; its parameter count is the built model's, exactly; its activation count bounds what autograd
really saves in a training step, from above and within a stated factor."""

from __future__ import annotations

import dataclasses
import itertools

import pytest
import torch

from models import PRESETS, build_model
from models.build import MODELS
from studies.datasets import dataset_record
from studies.methods import METHODS, norm_for_method
from studies.sizing import (
    BACKBONE_DEFAULTS,
    DEFAULT_GPU_SEEDS_PER_TRIAL,
    PRESET_FIELDS,
    activation_floats_per_sample,
    format_bytes,
    model_fields,
    parameter_count,
    shape_problems,
    trial_memory,
)
from studies.spec.names import KNOWN_MODELS

NORMS = sorted({norm_for_method(m).kind for m in METHODS})
# The activation estimate is an upper bound of the tensors one eager float32 training step saves for its
# backward pass, and at most this many times them (the mixed norms' eager composite, the dropout masks and
# the T x T attention weights are counted where a configuration may use the fused, smaller forms).
ACTIVATION_OVERESTIMATE_AT_MOST = 2.5

# (dataset, preset, overrides): every backbone, text heads of each kind, every placement and branch.
SHAPES = [
    ("digits", "vit_lite_tiny", {}),
    ("cifar10", "vit_lite_paper", {}),
    ("mnist", "vit_lite_tiny", {"dim": 48, "heads": 3, "mlp_ratio": 3.3}),
    ("cifar10", "vit_lite_paper", {"depth": 2, "layer_scale_init": None, "norm_placement": "none"}),
    ("cifar10", "vit_lite_paper", {"depth": 2, "branch": "one_matrix", "norm_placement": "output"}),
    ("energy", "tabular_tiny", {}),
    ("energy", "tabular_paper", {"norm_placement": "post"}),
    ("sst2", "encoder_tiny", {}),
    ("ptb_pos_sample", "encoder_tiny", {}),
    ("ptb_lm_sample", "encoder_tiny", {}),
    ("digits", "mlp_classifier_tiny", {}),
    ("cifar10", "mlp_classifier_paper", {"branch": "one_matrix", "norm_placement": "post", "depth": 4}),
]


def _build(dataset: str, preset: str, overrides: dict, norm: str) -> tuple[str, dict, torch.nn.Module]:
    backbone, fields = model_fields(dataset, preset, overrides=overrides)
    if backbone == "encoder":
        fields["vocab_size"] = 300  # a built vocabulary; the table's is an upper estimate
    return backbone, fields, build_model(preset, {**fields, "norm": norm})


def _inputs(backbone: str, fields: dict, batch: int) -> torch.Tensor:
    if backbone in ("vit_lite", "mlp_classifier"):
        side = fields["image_size"]
        return torch.randn(batch, fields["in_channels"], side, side)
    if backbone == "encoder":
        return torch.randint(1, fields["vocab_size"], (batch, fields["max_len"]))
    return torch.randn(batch, fields["num_features"])


def _saved_floats_per_sample(model: torch.nn.Module, x: torch.Tensor) -> float:
    """The float32 elements autograd saves for one training step's backward, per sample: every saved
    tensor's storage once, leaving out the parameters and the input batch (the estimate counts those apart)."""
    own = {p.untyped_storage().data_ptr() for p in model.parameters()} | {x.untyped_storage().data_ptr()}
    saved: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in own:
            saved[storage.data_ptr()] = storage.nbytes()
        return tensor

    model.train()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        loss = model(x).float().pow(2).mean()
    loss.backward()
    return sum(saved.values()) / 4 / x.shape[0]


def test_backbone_defaults_are_the_config_dataclasses():
    for backbone, defaults in BACKBONE_DEFAULTS.items():
        config = MODELS[backbone][0]()
        assert {k: getattr(config, k) for k in defaults} == dict(defaults), backbone


def test_preset_fields_are_models_presets_for_every_model_a_study_may_train():
    presets = {name for name in KNOWN_MODELS if name in PRESETS}
    assert set(PRESET_FIELDS) == presets
    for name in presets:
        assert dict(PRESET_FIELDS[name]) == {k: v for k, v in PRESETS[name].items() if k != "model"}, name


def test_the_task_fields_are_what_the_builder_makes_of_an_offline_dataset():
    from workers.data import get_dataset

    bundle = get_dataset("digits", download=False)
    assert dict(dataset_record("digits").task_fields) == bundle.model_fields
    assert model_fields("digits", None)[0] == "vit_lite"  # the record's default model, vit_lite_tiny


def test_the_gpu_seed_batch_is_the_trial_plans():
    from workers.trials.plan import DEFAULT_GPU_SEEDS_PER_TRIAL as PLAN

    assert DEFAULT_GPU_SEEDS_PER_TRIAL == PLAN


@pytest.mark.parametrize(("shape", "norm"), list(itertools.product(SHAPES, NORMS)))
def test_the_parameter_count_is_the_built_models_exactly(shape, norm):
    backbone, fields, model = _build(*shape, norm)
    assert parameter_count(backbone, fields, norm) == sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize(
    ("shape", "norm"),
    [(shape, norm) for shape in SHAPES for norm in ("layernorm", "autonorm", "adanorm")],
    ids=lambda value: value[1] if isinstance(value, tuple) else value,
)
def test_the_activation_count_bounds_what_a_training_step_saves(shape, norm):
    backbone, fields, model = _build(*shape, norm)
    torch.manual_seed(0)
    measured = _saved_floats_per_sample(model, _inputs(backbone, fields, batch=3))
    estimate = activation_floats_per_sample(backbone, fields, norm)
    assert measured <= estimate <= ACTIVATION_OVERESTIMATE_AT_MOST * measured, (estimate, measured)


def test_a_trial_counts_sixteen_bytes_a_parameter_per_seed_and_its_batch():
    backbone, fields = model_fields("digits", "vit_lite_tiny")
    one = trial_memory(backbone, fields, "layernorm", batch_size=64)
    three = trial_memory(backbone, fields, "layernorm", batch_size=64, seeds=3)
    assert one.state_bytes == 16 * one.parameters
    assert three.state_bytes == 3 * one.state_bytes
    assert three.activation_bytes >= 3 * activation_floats_per_sample(backbone, fields, "layernorm") * 64 * 4
    assert one.total_bytes == one.state_bytes + one.activation_bytes + one.input_bytes


def test_a_language_models_evaluation_logits_count_when_they_exceed_the_training_step():
    backbone, fields = model_fields("ptb_lm", "encoder_paper")
    memory = trial_memory(backbone, fields, "layernorm", batch_size=1)
    # 512 samples x 128 positions x 10,002 words, the outputs and one copy: about 5 GiB.
    assert memory.activation_bytes == 2 * 512 * 128 * 10_002 * 4


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"heads": 0}, "heads"),
        ({"dim": 0}, "dim"),
        ({"depth": -1}, "depth"),
        ({"depth": 2.5}, "depth"),
        ({"dim": True}, "dim"),
        ({"dim": 30, "heads": 4}, "heads"),
        ({"patch_size": 3}, "patch_size"),
    ],
)
def test_impossible_shapes_are_named_by_their_field(overrides, field):
    backbone, fields = model_fields("digits", "vit_lite_tiny", overrides=overrides)
    assert field in shape_problems(backbone, fields)


def test_possible_shapes_have_no_problem_however_large():
    backbone, fields = model_fields("digits", "vit_lite_tiny", overrides={"dim": 10**6, "depth": 1000})
    assert shape_problems(backbone, fields) == {}
    assert parameter_count(backbone, fields, "layernorm") > 10**15


def test_bytes_are_shown_in_binary_units():
    assert [format_bytes(n) for n in (512, 1536, 5 * 2**30, 12 * 2**40)] == [
        "512 B",
        "1.5 KiB",
        "5 GiB",
        "12 TiB",
    ]


def test_a_config_field_of_every_model_is_known_to_the_estimate():
    """Every shape field the estimate reads exists on its backbone's config (a rename in models breaks here)."""
    for backbone, defaults in BACKBONE_DEFAULTS.items():
        names = {f.name for f in dataclasses.fields(MODELS[backbone][0])}
        assert set(defaults) <= names, backbone
