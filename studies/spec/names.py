"""The names a spec may use: datasets (and their families, metrics, corruptions), methods, models and
their config fields. Names only, so the service validates specs without importing torch. The datasets are
studies.datasets' records (normlab.REGISTRY.datasets), which workers.data builds (a test checks it builds
every built-in); the models are studies.backbones' records (normlab.REGISTRY.backbones), whose built-in
names and fields are checked against models, which may import nothing of studies. The methods are
studies' own table (studies.methods), which the workers build models from."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Union

from normlab import REGISTRY
from normlab.views import FactView, LiveNames
from studies.backbones import known_model, model_names

# Which data family each dataset holds (image -> vit_lite, text -> encoder, tabular -> tabular). A view of
# the dataset records, not a table: it reads normlab.REGISTRY at each lookup (studies.catalog.lint reads it
# by this name; new code calls studies.datasets.dataset_family).
_DATASET_FAMILY: Mapping[str, str] = FactView(REGISTRY.datasets, lambda record: record.family)

# Model names and presets a spec may name: every registered backbone (studies.backbones: the built-ins,
# a plugin's, or one the current overlay shows) and its presets. A view: it reads normlab.REGISTRY at
# each use. The bare `residual_mlp` is not a registered backbone (it has no task head).
KNOWN_MODELS: Sequence[str] = LiveNames(model_names, known_model)
# Data family each backbone reads: each family's default backbone, the residual-MLP classifier (flattened
# images), and a plugin's. A view of the backbone records.
_BACKBONE_FAMILY: Mapping[str, str] = FactView(REGISTRY.backbones, lambda record: record.family)
_FAMILY_MODELS = {"image": "vit_lite_tiny or vit_lite_paper", "text": "encoder_tiny or encoder_paper"}
_FAMILY_MODELS["tabular"] = "tabular_tiny or tabular_paper"

# Config field names of each backbone (for a built-in, its dataclass's in models: TransformerConfig plus
# the task fields), so overrides are checked here without torch; a test checks they equal
# dataclasses.fields of the real ones. A view of the backbone records.
MODEL_CONFIG_FIELDS: Mapping[str, tuple[str, ...]] = FactView(
    REGISTRY.backbones, lambda record: record.config_fields
)

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
