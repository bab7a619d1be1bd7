"""What a plugin's backbone must do before a study may train it, and the sizes the memory estimate reads:
`check_backbone(record, task_fields)`.

The backbone and each of its presets are built through models.build_model, as a trial builds them, on the
task fields of every dataset of its family, with every MEASURED_NORMS kind. Each build must hold norm
layers of the kind its config names (built with models.norms.build_norm, so every method can be compared
on it), map a batch of two of the family's inputs to the outputs the family's built-in backbones give,
and train (a backward pass). It reports the most trainable parameters and the most floats one training
sample saves for the backward pass over those builds (studies.sizing cannot count a plugin's modules).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from models.build import build_model
from normlab import REGISTRY, Backbone

__all__ = ["MEASURED_NORMS", "BackboneReport", "check_backbone", "example_batch", "expected_output_shape"]

# LayerNorm, the reference, and FiLM, the built-in norm with the most parameters, whose eager form saves
# as much for the backward pass as any built-in (studies.sizing): two kinds, so a backbone that ignores
# config["norm"] is caught, and sizes that no built-in method exceeds.
MEASURED_NORMS: tuple[str, ...] = ("layernorm", "film")
BATCH = 2


@dataclass(frozen=True)
class BackboneReport:
    parameters: int  # the most trainable parameters of one build
    activations: int  # the most floats one training sample saved for the backward pass
    problem: str | None  # the first requirement a build failed; None: a study may train it

    @property
    def ok(self) -> bool:
        return self.problem is None


def example_batch(family: str, task: Mapping[str, Any], batch: int = BATCH) -> torch.Tensor:
    """A batch of the family's inputs: images (B, C, H, W), token ids (B, T) or features (B, F)."""
    generator = torch.Generator().manual_seed(0)
    if family == "image":
        side, channels = int(task["image_size"]), int(task["in_channels"])
        return torch.randn(batch, channels, side, side, generator=generator)
    if family == "text":
        vocab = int(task["vocab_size"])
        return torch.randint(1, max(2, vocab), (batch, int(task["max_len"])), generator=generator)
    return torch.randn(batch, int(task["num_features"]), generator=generator)


def expected_output_shape(family: str, task: Mapping[str, Any], batch: int = BATCH) -> tuple[int, ...]:
    """The outputs the family's built-in backbones give a batch (what the trial's loss reads)."""
    if family == "image":
        return (batch, int(task["num_classes"]))
    if family == "tabular":
        return (batch, int(task["num_outputs"]))
    head = task.get("head", "sequence")
    if head == "lm":
        return (batch, int(task["max_len"]), int(task["vocab_size"]))
    if head == "token":
        return (batch, int(task["max_len"]), int(task["num_classes"]))
    return (batch, int(task["num_classes"]))


def _saved_bytes(model: nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, int]:
    """The model's output on `x` in training mode, and the bytes autograd saved for its backward pass
    (every storage once, the parameters' own left out: the training state counts them)."""
    own = {p.untyped_storage().data_ptr() for p in model.parameters()}
    saved: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in own:
            saved[storage.data_ptr()] = storage.nbytes()
        return tensor

    model.train()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        output = model(x)
        loss = output.float().square().mean()
    loss.backward()
    return output, sum(saved.values())


def _norm_layers(model: nn.Module, kind: str) -> int:
    layer = REGISTRY.norms.get(kind).layer
    if not isinstance(layer, type):
        return -1  # a factory: its layers cannot be told apart, so not counted
    return sum(1 for module in model.modules() if isinstance(module, layer))


def _build_and_measure(record: Backbone, model: str, task: Mapping[str, Any], norm: str) -> tuple[int, int]:
    where = f"{model} on task fields {dict(task)} with norm {norm!r}"
    try:
        built = build_model(model, {**task, "norm": norm})
    except Exception as error:
        raise ValueError(f"{where}: the build failed: {type(error).__name__}: {error}") from error
    if not isinstance(built, nn.Module):
        raise ValueError(f"{where}: the builder returned {type(built).__name__}, not a torch.nn.Module")
    if _norm_layers(built, norm) == 0:
        raise ValueError(
            f"{where}: it holds no {norm} layer; build every norm layer with "
            'models.norms.build_norm(config["norm"], dim, **config["norm_options"]) so that the study\'s '
            "methods are what it compares"
        )
    x = example_batch(record.family, task)
    try:
        output, saved = _saved_bytes(built, x)
    except Exception as error:
        raise ValueError(f"{where}: a training step failed: {type(error).__name__}: {error}") from error
    expected = expected_output_shape(record.family, task)
    if not isinstance(output, torch.Tensor) or tuple(output.shape) != expected:
        shape = tuple(output.shape) if isinstance(output, torch.Tensor) else type(output).__name__
        raise ValueError(
            f"{where}: a batch of {tuple(x.shape)} inputs gave outputs {shape}; the {record.family} "
            f"backbones give {expected}"
        )
    parameters = sum(p.numel() for p in built.parameters() if p.requires_grad)
    # The saved tensors per sample, and the logits and the loss's log-probabilities (studies.sizing's count).
    per_output = math.prod(expected[1:])
    activations = math.ceil(saved / 4 / x.shape[0]) + 2 * per_output
    return parameters, activations


def check_backbone(record: Backbone, task_fields: Iterable[Mapping[str, Any]]) -> BackboneReport:
    """Build, run and measure `record` (its builder registered in this process) on every set of task
    fields (those of its family's datasets) with every MEASURED_NORMS kind; the first failure stops it."""
    tasks = list({repr(sorted(t.items())): dict(t) for t in task_fields}.values())
    if not tasks:
        return BackboneReport(0, 0, f"no {record.family} dataset is registered to build it for")
    parameters = activations = 0
    torch.manual_seed(0)
    for model in record.model_names():
        for task in tasks:
            for norm in MEASURED_NORMS:
                try:
                    counted, saved = _build_and_measure(record, model, task, norm)
                except ValueError as error:
                    return BackboneReport(parameters, activations, str(error))
                parameters, activations = max(parameters, counted), max(activations, saved)
    return BackboneReport(parameters, activations, None)
