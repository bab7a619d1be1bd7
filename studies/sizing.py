"""How much memory one trial needs, without torch: its model's parameters (with their gradients and AdamW's
two moments) and the activations a training step keeps for its backward pass.

A spec names a preset or a backbone, the dataset's record (studies.datasets) fixes the task fields, knobs
and overrides change the rest; `model_fields` resolves them in the order the trial does (backbone defaults,
preset, dataset, knobs, overrides: workers.training.config.model_config then models.build_model), and
`trial_memory` prices the result. Plain Python: the service checks a spec against the trial's memory at
submission (studies.spec rules) and the plan shows the estimate, with no torch anywhere.

The formulas are counted from the modules in models/ (tests/studies/test_sizing.py checks them):

- Parameters are exact: every Linear, embedding, positional table, LayerScale and norm layer, per backbone.
- Training state is 16 bytes a parameter: float32 weights, their gradients and AdamW's exp_avg and
  exp_avg_sq. A trial that trains k seeds at once (resources.seeds_per_trial) holds k copies.
- Activations are the tensors autograd saves in one training step, in float32, per sample: per token and
  block 10 d + 3 m + 3 h T plus two norm sites (d the width, m the MLP's hidden width, h the heads, T the
  tokens), the embedding, the final norm, the head's logits and the loss's log-probabilities. That is the
  eager count with dropout and LayerScale on (the unfused attention of the compiled seed-batched step keeps
  the same T x T weights); what a configuration does not use (dropout 0, no LayerScale, fused attention,
  bf16 autocast on a GPU, which stores most of them in half the bytes) only makes the real step smaller,
  so the estimate is an upper bound of the step's saved tensors (checked against torch's own, within the
  tolerance the test states).
- Evaluation (no backward, EVAL_BATCH_SIZE samples at once) peaks at about two of its largest per-sample
  tensors live at once (for a seed batch, every seed's output and one seed's loss); the trial's peak is
  the larger of the two phases.
- A plugin's backbone (normlab.plugin.backbone) has no formula here: its parameters and the floats one
  training sample saves are what the plugin's check measured with torch (normlab.records.Backbone), the
  most over its presets and its family's datasets, not at a spec's overrides; its evaluation pass is
  counted at its logits alone.

Left out: the dataset's own tensors (loaded once per trial process, or once per warm trial host), the
framework's resident memory and a GPU's CUDA context; the limits the estimate is checked against leave
room for them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from normlab import REGISTRY
from studies.backbones import PresetFields, plugin_backbone
from studies.backbones import backbone_of as _backbone_of
from studies.datasets import dataset_record, default_model

__all__ = [
    "BACKBONE_DEFAULTS",
    "BYTES_PER_PARAMETER",
    "DEFAULT_GPU_SEEDS_PER_TRIAL",
    "EVAL_BATCH_SIZE",
    "PRESET_FIELDS",
    "SHAPE_FIELDS",
    "TrialMemory",
    "activation_floats_per_sample",
    "backbone_of",
    "format_bytes",
    "model_fields",
    "parameter_count",
    "shape_problems",
    "trial_memory",
]

FLOAT_BYTES = 4  # float32: parameters, gradients, optimizer moments and (upper bound) activations
# Weights, gradients, AdamW's exp_avg and exp_avg_sq: four float32 copies of every parameter.
BYTES_PER_PARAMETER = 4 * FLOAT_BYTES
# workers.training.config.TrainConfig.eval_batch_size: evaluation's batch (no backward pass, so larger).
EVAL_BATCH_SIZE = 512
# workers.trials.plan's "auto" on a GPU: at most this many final/grid seeds per trial (tests check they agree).
DEFAULT_GPU_SEEDS_PER_TRIAL = 8

# The size fields of each backbone's config dataclass in models/ (their defaults; tests check them).
BACKBONE_DEFAULTS: Mapping[str, Mapping[str, Any]] = MappingProxyType(
    {
        name: MappingProxyType(fields)
        for name, fields in {
            "vit_lite": {
                **{"dim": 128, "depth": 8, "heads": 4, "mlp_ratio": 2.0, "layer_scale_init": 1e-4},
                **{"norm_placement": "pre", "branch": "two_matrix"},
                **{"image_size": 32, "in_channels": 3, "num_classes": 10, "patch_size": 4},
            },
            "encoder": {
                **{"dim": 128, "depth": 12, "heads": 8, "mlp_ratio": 2.0, "layer_scale_init": 1e-4},
                **{"norm_placement": "pre", "branch": "two_matrix"},
                **{"vocab_size": 1000, "max_len": 128, "num_classes": 2, "head": "sequence"},
            },
            "tabular": {
                **{"dim": 128, "depth": 12, "heads": 8, "mlp_ratio": 2.0, "layer_scale_init": 1e-4},
                **{"norm_placement": "pre", "branch": "two_matrix"},
                **{"num_features": 8, "num_outputs": 1},
            },
            "mlp_classifier": {
                **{"dim": 64, "depth": 8, "mlp_ratio": 4.0, "norm_placement": "pre", "branch": "two_matrix"},
                **{"image_size": 8, "in_channels": 1, "num_classes": 10},
            },
        }.items()
    }
)

# The fields of every preset a study may train (studies.spec.names.KNOWN_MODELS): the backbone records'
# (studies.backbones; the built-ins' are models.presets.PRESETS without their `model` key, which a test
# checks), read from the registry at each lookup, so a plugin's presets are in it too.
PRESET_FIELDS: Mapping[str, Mapping[str, Any]] = PresetFields()

# The config fields that give a model its shape: positive whole numbers (studies.spec.rules checks overrides).
SHAPE_FIELDS: tuple[str, ...] = ("dim", "depth", "heads", "patch_size")
_TRANSFORMERS = ("vit_lite", "encoder", "tabular")  # attention heads divide their width


def backbone_of(model: str) -> str:
    """The backbone a model name or preset builds (its record's, studies.backbones)."""
    return _backbone_of(model)


def model_fields(
    dataset: str,
    model: str | None,
    *,
    knobs: Mapping[str, Any] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> tuple[str, dict[str, Any]]:
    """(backbone, config fields) of the model a trial builds: the backbone's defaults, the preset's fields,
    the dataset's task fields, the knobs' model fields, then the overrides (the trial's own order).
    `model` None: the dataset's default model."""
    name = model or default_model(dataset)
    backbone = backbone_of(name)
    fields = dict(BACKBONE_DEFAULTS.get(backbone, {}))  # a plugin's backbone defaults its own fields
    fields.update(PRESET_FIELDS.get(name, {}))
    fields.update(dataset_record(dataset).task_fields)
    fields.update(knobs or {})
    fields.update(overrides or {})
    return backbone, fields


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def shape_problems(backbone: str, fields: Mapping[str, Any]) -> dict[str, str]:
    """{field: why it cannot build} for every shape the model could not have: a width, depth, head count
    or patch that is not a positive whole number, a width the heads do not divide, a patch that does not
    tile the image. Empty when the shape can be built (whatever its size). The other fields with a range
    (mlp_ratio, dropout, ...) are their knobs' (studies.knobs), which the spec's rules check."""
    problems: dict[str, str] = {}
    for name in SHAPE_FIELDS:
        if name in fields and not _positive_int(fields[name]):
            problems[name] = f"{name} must be a positive whole number, got {fields[name]!r}"
    if backbone in _TRANSFORMERS and "dim" not in problems and "heads" not in problems:
        dim, heads = fields["dim"], fields["heads"]
        if dim % heads:
            problems["heads"] = (
                f"dim {dim} must be divisible by heads {heads} (each head attends over dim / heads "
                f"channels); choose heads among {', '.join(map(str, _divisors(dim, 8)))} or a dim that "
                f"{heads} divides"
            )
    if backbone == "vit_lite" and "patch_size" not in problems:
        side, patch = fields["image_size"], fields["patch_size"]
        if side % patch:
            problems["patch_size"] = (
                f"patch_size {patch} does not tile the dataset's {side}x{side} images; choose one of "
                f"{', '.join(map(str, _divisors(side, 8)))}"
            )
    return problems


def _divisors(n: int, most: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0][:most]


def _norm_parameters(norm: str, dim: int) -> int:
    """Parameters of one norm layer of width `dim` (models.norms; the selector/modulator hidden width is
    max(8, dim // 4))."""
    hidden = max(8, dim // 4)
    if norm == "layernorm":
        return 2 * dim
    if norm == "dyt":
        return 2 * dim + 1
    if norm == "adanorm":
        return 0
    if norm == "film":  # Linear(d, hidden), Linear(hidden, 2d)
        return dim * hidden + hidden + hidden * 2 * dim + 2 * dim
    if norm == "random":  # DyT's and LayerNorm's affine parameters and DyT's alpha
        return 4 * dim + 1
    if norm == "autonorm":  # the same, plus the selector Linear(d, hidden), Linear(hidden, 2)
        return 4 * dim + 1 + dim * hidden + hidden + hidden * 2 + 2
    record = REGISTRY.norms.find(norm)  # a plugin's layer: its check measured the count at three widths
    if record is not None and record.parameters is not None:
        c2, c1, c0 = record.parameters
        return max(0, round(c2 * dim * dim + c1 * dim + c0))
    raise ValueError(f"unknown norm kind {norm!r}")


def _norm_site_floats(norm: str, dim: int, *, causal: bool) -> tuple[int, int]:
    """(per token, per sample) floats one norm layer saves for backward, counted on its eager form (the
    fused CPU kernels and the Triton ones save less). `causal`: the language-model encoder conditions
    AutoNorm's and FiLM's mix on each token's running mean, so their coefficients are per token too."""
    if norm == "layernorm":
        return dim + 2, 0  # its input, mean and reciprocal std
    if norm == "dyt":
        return 2 * dim, 0
    if norm == "adanorm":
        return 2 * dim + 2, 0
    if norm in (
        "film",
        "random",
        "autonorm",
    ):  # both branches, the mix, and the per-sample gate or modulation
        return (6 if causal else 3) * dim + 2, 5 * dim
    if norm in REGISTRY.norms:  # a plugin's layer, unseen here: counted as the largest built-in saves
        return (6 if causal else 3) * dim + 2, 5 * dim
    raise ValueError(f"unknown norm kind {norm!r}")


def _hidden(fields: Mapping[str, Any]) -> int:
    """The MLP branch's hidden width (models.layers.MlpBranch): round(mlp_ratio * d), d for one_matrix."""
    if fields.get("branch", "two_matrix") == "one_matrix":
        return int(fields["dim"])
    return max(1, round(float(fields["mlp_ratio"]) * int(fields["dim"])))


def _has_norms(fields: Mapping[str, Any]) -> tuple[bool, bool]:
    """(a norm in every residual unit, a final norm): placement none has neither, post no final norm."""
    placement = fields.get("norm_placement", "pre")
    return placement != "none", placement in ("pre", "output")


def tokens_per_sample(backbone: str, fields: Mapping[str, Any]) -> int:
    """Tokens the trunk sees per sample: patches + class token, the padded sequence, features + class
    token, or one (the residual-MLP classifier reads a flattened image as one token)."""
    if backbone == "vit_lite":
        return (int(fields["image_size"]) // int(fields["patch_size"])) ** 2 + 1
    if backbone == "encoder":
        return int(fields["max_len"])
    if backbone == "tabular":
        return int(fields["num_features"]) + 1
    return 1


def _outputs(backbone: str, fields: Mapping[str, Any]) -> tuple[int, int]:
    """(positions the head writes per sample, outputs per position)."""
    if backbone == "encoder":
        head = fields.get("head", "sequence")
        if head == "lm":
            return int(fields["max_len"]), int(fields["vocab_size"])
        return (int(fields["max_len"]) if head == "token" else 1), int(fields["num_classes"])
    if backbone == "tabular":
        return 1, int(fields["num_outputs"])
    return 1, int(fields["num_classes"])


def parameter_count(backbone: str, fields: Mapping[str, Any], norm: str) -> int:
    """The model's trainable parameters, exactly as models/ builds them with every norm of kind `norm`; for
    a plugin's backbone, the count its check measured (0 where none did)."""
    plugin = plugin_backbone(backbone)
    if plugin is not None:
        return plugin.parameters or 0
    d, depth, hidden = int(fields["dim"]), int(fields["depth"]), _hidden(fields)
    unit_norm, final_norm = _has_norms(fields)
    norm_params = _norm_parameters(norm, d)
    two_matrix = fields.get("branch", "two_matrix") != "one_matrix"
    mlp = d * hidden + hidden + ((hidden * d + d) if two_matrix else 0)  # fc_up (+ fc_down)
    _, out = _outputs(backbone, fields)
    head = d * out + out
    final = norm_params if final_norm else 0
    if backbone == "mlp_classifier":
        pixels = int(fields["in_channels"]) * int(fields["image_size"]) ** 2
        block = mlp + (norm_params if unit_norm else 0)  # one residual unit, no LayerScale
        return pixels * d + d + depth * block + final + head
    layer_scale = d if fields.get("layer_scale_init") is not None else 0
    per_unit = (norm_params if unit_norm else 0) + layer_scale
    attention = d * 3 * d + 3 * d + d * d + d  # qkv and proj
    block = attention + mlp + 2 * per_unit
    if backbone == "vit_lite":
        patch, channels = int(fields["patch_size"]), int(fields["in_channels"])
        embed = (
            channels * patch * patch * d + d + d + tokens_per_sample(backbone, fields) * d
        )  # conv, cls, pos
    elif backbone == "encoder":
        embed = int(fields["vocab_size"]) * d + int(fields["max_len"]) * d  # token table, positions
    elif backbone == "tabular":
        embed = 2 * int(fields["num_features"]) * d + d  # per-feature weight and bias, class token
    else:
        raise ValueError(f"unknown backbone {backbone!r}")
    return embed + depth * block + final + head


def activation_floats_per_sample(backbone: str, fields: Mapping[str, Any], norm: str) -> int:
    """Floats one training sample keeps for the backward pass (the module docstring's count); for a plugin's
    backbone, what its check measured (0 where none did)."""
    plugin = plugin_backbone(backbone)
    if plugin is not None:
        return plugin.activations or 0
    d, depth, hidden = int(fields["dim"]), int(fields["depth"]), _hidden(fields)
    tokens = tokens_per_sample(backbone, fields)
    unit_norm, final_norm = _has_norms(fields)
    causal = backbone == "encoder" and fields.get("head") == "lm"
    site_token, site_sample = _norm_site_floats(norm, d, causal=causal)
    positions, out = _outputs(backbone, fields)
    logits = 2 * positions * out  # the logits and the loss's log-probabilities
    final = (tokens * site_token + site_sample) if final_norm else 0
    if backbone == "mlp_classifier":
        # One residual unit per block, without dropout or LayerScale: fc_up's input, the activation's,
        # fc_down's; then the projected input, the blocks and the head's input.
        norms = (tokens * site_token + site_sample) if unit_norm else 0
        return d + depth * (tokens * (d + 2 * hidden) + norms) + final + d + logits
    norms = 2 * (tokens * site_token + site_sample) if unit_norm else 0
    mlp = tokens * (3 * d + 3 * hidden)  # fc_up's input, the activation, its dropout, fc_down's, LayerScale
    heads = int(fields["heads"])
    # qkv's input, q, k, v, proj's input, its dropout, LayerScale; softmax weights, their dropout mask and
    # the dropped weights (T x T per head).
    attention = tokens * (7 * d + 3 * heads * tokens)
    embed = 2 * tokens * d  # the embedded tokens and their dropout
    readout = tokens * d if backbone == "encoder" else d  # pooling or per-token head input; class token
    return embed + depth * (attention + mlp + norms) + final + readout + logits


def _eval_floats_per_sample(backbone: str, fields: Mapping[str, Any]) -> int:
    """The largest tensor an evaluation pass (no graph kept) makes per sample: the attention weights, the
    MLP's hidden activations or the logits. The pass holds about two at once (an op's input and output).
    A plugin's backbone: its logits, the one tensor of its pass whose size is known here."""
    plugin = plugin_backbone(backbone)
    if plugin is not None:
        positions, out = _outputs({"text": "encoder", "tabular": "tabular"}.get(plugin.family, ""), fields)
        return positions * out
    tokens = tokens_per_sample(backbone, fields)
    positions, out = _outputs(backbone, fields)
    heads = int(fields.get("heads", 1)) if backbone != "mlp_classifier" else 0
    return max(
        heads * tokens * tokens, tokens * _hidden(fields), positions * out, tokens * int(fields["dim"])
    )


def format_bytes(n: float) -> str:
    """1.5 GiB, 12 TiB, 640 MiB: binary units, three significant figures."""
    value, unit = float(n), "B"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        if value < 1024 or unit == "EiB":
            break
        value /= 1024
    return f"{value:.3g} {unit}"


@dataclass(frozen=True)
class TrialMemory:
    """The memory one trial needs at its peak: `seeds` models trained together, each with its state and
    the activations of one batch of `batch_size` samples."""

    parameters: int  # of one model
    seeds: int  # models the trial trains at once (resources.seeds_per_trial)
    batch_size: int
    state_bytes: int  # parameters, gradients and AdamW moments of every model
    activation_bytes: int  # the larger of a training step's saved tensors and an evaluation pass's peak
    input_bytes: int  # one training batch per model

    @property
    def total_bytes(self) -> int:
        return self.state_bytes + self.activation_bytes + self.input_bytes

    def describe(self) -> str:
        """One line: the total and what it is made of."""
        seeds = f" x {self.seeds} seeds" if self.seeds > 1 else ""
        return (
            f"{format_bytes(self.total_bytes)} per trial: {self.parameters:,} parameters{seeds} "
            f"({format_bytes(self.state_bytes)} with gradients and AdamW state) and "
            f"{format_bytes(self.activation_bytes + self.input_bytes)} of activations at batch size "
            f"{self.batch_size}"
        )


def _input_floats_per_sample(backbone: str, fields: Mapping[str, Any]) -> int:
    family = REGISTRY.backbones.get(backbone).family  # a plugin's backbone reads its family's inputs too
    if family == "image":
        return int(fields["in_channels"]) * int(fields["image_size"]) ** 2
    if family == "text":
        return 2 * int(fields["max_len"])  # token ids and targets (int64: two floats' bytes each)
    return int(fields["num_features"]) + 1


def trial_memory(
    backbone: str, fields: Mapping[str, Any], norm: str, *, batch_size: int, seeds: int = 1
) -> TrialMemory:
    """The peak memory of a trial that trains `seeds` models of this shape at `batch_size`."""
    parameters = parameter_count(backbone, fields, norm)
    train = seeds * activation_floats_per_sample(backbone, fields, norm) * batch_size
    # A seed batch evaluates its models on one shared batch: every seed's outputs at once, then one seed's
    # loss at a time (its float copy and log-probabilities).
    evaluation = (seeds + 1) * _eval_floats_per_sample(backbone, fields) * EVAL_BATCH_SIZE
    return TrialMemory(
        parameters=parameters,
        seeds=seeds,
        batch_size=batch_size,
        state_bytes=seeds * parameters * BYTES_PER_PARAMETER,
        activation_bytes=max(train, evaluation) * FLOAT_BYTES,
        input_bytes=seeds * batch_size * _input_floats_per_sample(backbone, fields) * FLOAT_BYTES,
    )
