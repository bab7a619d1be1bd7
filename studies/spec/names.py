"""The names a spec may use: datasets (and their families, metrics, corruptions), methods, models and
their config fields. Names only, so the service validates specs without importing torch. The datasets are
studies.datasets' records (normlab.REGISTRY.datasets), which workers.data builds (a test checks it builds
every built-in); the model names and fields are checked against models, which may import nothing of
studies. The methods are studies' own table (studies.methods), which the workers build models from."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Union

from studies.dataset_views import DatasetFacts
from studies.datasets import FAMILY_BACKBONE

# Which data family each dataset holds (image -> vit_lite, text -> encoder, tabular -> tabular). A view of
# the dataset records, not a table: it reads normlab.REGISTRY at each lookup (studies.catalog.lint reads it
# by this name; new code calls studies.datasets.dataset_family).
_DATASET_FAMILY: Mapping[str, str] = DatasetFacts(lambda record: record.family)

# Model names and presets of models.build_model that can train on a study dataset. The bare
# `residual_mlp` is left out on purpose: it has no task head, so every trial of a study would fail; the
# rank studies train it as `mlp_classifier` (an input projection, the residual MLP, a head).
KNOWN_MODELS: tuple[str, ...] = (
    "vit_lite",
    "vit_lite_paper",
    "vit_lite_tiny",
    "encoder",
    "encoder_paper",
    "encoder_tiny",
    "tabular",
    "tabular_paper",
    "tabular_tiny",
    "mlp_classifier",
    "mlp_classifier_paper",
    "mlp_classifier_tiny",
)
# Data family each backbone reads (a preset's backbone is the prefix of its name): each family's default
# backbone, and the residual-MLP classifier (flattened images).
_BACKBONE_FAMILY = {backbone: family for family, backbone in FAMILY_BACKBONE.items()}
_BACKBONE_FAMILY["mlp_classifier"] = "image"
_FAMILY_MODELS = {"image": "vit_lite_tiny or vit_lite_paper", "text": "encoder_tiny or encoder_paper"}
_FAMILY_MODELS["tabular"] = "tabular_tiny or tabular_paper"

# Config field names of each backbone's dataclass in models (TransformerConfig plus the task fields), so
# overrides are checked here without torch; a test checks they equal dataclasses.fields of the real ones.
_TRANSFORMER_FIELDS: tuple[str, ...] = (
    "dim",
    "depth",
    "heads",
    "mlp_ratio",
    "dropout",
    "drop_path",
    "layer_scale_init",
    "norm",
    "norm_options",
    "norm_placement",
    "skip_scale",
    "init_scale",
    "activation",
    "branch",
)
# The residual MLP's fields (models.residual_mlp.ResidualMLPConfig): no heads, dropout, drop path or
# LayerScale, so knobs that set those do not apply to it (rules.knob_fits_the_model).
_RESIDUAL_MLP_FIELDS: tuple[str, ...] = (
    "dim",
    "depth",
    "mlp_ratio",
    "norm",
    "norm_options",
    "norm_placement",
    "skip_scale",
    "init_scale",
    "activation",
    "branch",
)
MODEL_CONFIG_FIELDS: dict[str, tuple[str, ...]] = {
    "vit_lite": (*_TRANSFORMER_FIELDS, "image_size", "in_channels", "num_classes", "patch_size"),
    "encoder": (*_TRANSFORMER_FIELDS, "vocab_size", "max_len", "num_classes", "head", "pad_id"),
    "tabular": (*_TRANSFORMER_FIELDS, "num_features", "num_outputs"),
    "mlp_classifier": (*_RESIDUAL_MLP_FIELDS, "image_size", "in_channels", "num_classes"),
}

# Model fields a spec may not override: the method decides the norm ...
_RESERVED_MODEL_FIELDS = frozenset({"norm", "norm_options"})
# ... and the dataset decides the task fields (DatasetBundle.model_fields); an override would either be
# replaced or break the model's fit to the data.
DATASET_TASK_FIELDS: tuple[str, ...] = (
    "image_size",
    "in_channels",
    "num_classes",
    "vocab_size",
    "max_len",
    "head",
    "pad_id",
    "num_features",
    "num_outputs",
)

JSON_CONTENT_TYPES = frozenset({"application/json"})
YAML_CONTENT_TYPES = frozenset({"application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml"})
_LN2 = math.log(2.0)
DEFAULT_NUM_SAMPLES = 8  # tuning trials per method when a compare study does not say

# A knob value; null only where the knob is nullable (Knob.nullable), which _check_distribution enforces.
Scalar = Union[bool, int, float, str, None]  # noqa: UP007 (pydantic reads the union at runtime on py3.10)
