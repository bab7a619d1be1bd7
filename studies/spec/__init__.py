"""The study specification: what a user POSTs, what the service stores and what the driver runs.

A study compares normalization methods on one dataset. `kind: compare` tunes each method's knobs on the
validation split with seeds of their own (`tune_seeds`, phase `tune`), then re-runs each method's best
config on the SAME seeds on the test split (phase `final`), so comparisons are paired; with `sequential`
the final phase adds those seeds look by look and stops each comparison once it is decided. `kind: grid`
skips tuning and runs every grid point of the search space on every seed (phase `grid`), e.g. the
Transforming-Rank sweeps.

Validation is strict on purpose: a knob that does not apply to a method, a typo in a field name, or a
distribution a phase cannot use is an error with a field path, never silently ignored.

The package imports neither torch nor FastAPI: the service validates specs without the training stack.

Layout: `names` (datasets, models, fields), `metrics` (which way each metric is better), `distributions`
(knob distributions), `sections` (model, scheduler, budget, data, resources, sequential design), `study`
(StudySpec), `rules` (its cross-field rules) and `loading` (YAML/JSON text -> validated spec). The knobs
and the methods are studies.knobs' and studies.methods' (plain Python, which the trials read too). Import
from `studies.spec`; the modules are its layout.
"""

from studies.datasets import DATASET_CORRUPTIONS, DATASET_METRICS, KNOWN_DATASETS
from studies.knobs import DEFAULT_EPS_H, DEFAULT_T_FREEZE, KNOB_MODEL_FIELDS, KNOBS, Knob
from studies.methods import METHODS
from studies.spec.distributions import (
    Choice,
    Distribution,
    Fixed,
    Grid,
    IntRange,
    LogUniform,
    Uniform,
    has_searchable_knobs,
)
from studies.spec.loading import (
    SpecFormatError,
    UnsupportedContentTypeError,
    load_spec,
    parse_spec_text,
    validate_spec_data,
)
from studies.spec.metrics import METRIC_DIRECTIONS, UnknownMetricError, higher_is_better, known_metrics
from studies.spec.names import (
    DATASET_TASK_FIELDS,
    DEFAULT_NUM_SAMPLES,
    JSON_CONTENT_TYPES,
    KNOWN_MODELS,
    MODEL_CONFIG_FIELDS,
    YAML_CONTENT_TYPES,
)
from studies.spec.sections import (
    Budget,
    DataOptions,
    GridPoint,
    ModelSpec,
    Resources,
    SchedulerSpec,
    SequentialDesign,
    SequentialTest,
)
from studies.spec.study import StudySpec

__all__ = [
    "DATASET_CORRUPTIONS",
    "DATASET_METRICS",
    "DATASET_TASK_FIELDS",
    "DEFAULT_EPS_H",
    "DEFAULT_NUM_SAMPLES",
    "DEFAULT_T_FREEZE",
    "JSON_CONTENT_TYPES",
    "KNOBS",
    "KNOB_MODEL_FIELDS",
    "KNOWN_DATASETS",
    "KNOWN_MODELS",
    "METHODS",
    "METRIC_DIRECTIONS",
    "MODEL_CONFIG_FIELDS",
    "YAML_CONTENT_TYPES",
    "Budget",
    "Choice",
    "DataOptions",
    "Distribution",
    "Fixed",
    "Grid",
    "GridPoint",
    "IntRange",
    "Knob",
    "LogUniform",
    "ModelSpec",
    "Resources",
    "SchedulerSpec",
    "SequentialDesign",
    "SequentialTest",
    "SpecFormatError",
    "StudySpec",
    "Uniform",
    "UnknownMetricError",
    "UnsupportedContentTypeError",
    "has_searchable_knobs",
    "higher_is_better",
    "known_metrics",
    "load_spec",
    "parse_spec_text",
    "validate_spec_data",
]
