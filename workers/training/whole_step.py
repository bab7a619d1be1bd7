"""The whole training step of one model inside compiled code (budget.compile not "none"), and the parts the
seed-batched step (workers.training.seed_step) shares with it.

`CompiledTrainStep` is one optimizer step in two compiled calls (workers.training.compiled.CompiledCall):

1. the forward: the model (as `functional_call` of a training copy of it on the model's own parameters),
   the loss and the per-layer gate entropy of the batch; AOTAutograd compiles its backward, which
   `loss.backward()` runs;
2. the update, traced as one graph (fullgraph): the step's loss and gate entropy added to the epoch's sums
   on the device (`EpochTotals`), the AutoNorm-S freeze's per-step part (a frozen selector's gradient
   zeroed, its parameter, AdamW moments and step count held where they were), the selector-gradient sums
   of selector_grad_var, gradient clipping, and AdamW (workers.training.optim.GraphAdamW: foreach,
   capturable, the lr a device tensor).

Under CUDA graphs (compile reduce-overhead) each is replayed as a graph: the forward's, the backward's and
the update's. Around them, eagerly: filling the lr tensors from the schedule (a fill per parameter group,
no sync), the autograd call
that starts the backward, and setting the gradients to None after the update. Nothing in the step reads a
value back to the host; the epoch's sums are read once, when it ends (`EpochTotals`).

The freeze never changes what is compiled. The host decides it once per epoch from the accumulated
entropy (workers.training.epochs) and `freeze` writes the decision into a (L,) tensor the update reads; the
selectors keep requires_grad (a flip would fail a guard and recompile the forward), and the training copy
of the model never sees `selector_frozen`: where a frozen gate differs from the sampled one
(post_freeze_gate "expected" or "hard"), each layer's flag reaches it as a 0-d tensor (AutoNorm.seed_frozen).
So a trial compiles the forward once per batch shape (a last, shorter batch is a second) and the update
once, whether or not and whenever the freeze fires. The step matches the eager one to float tolerance
(tests/workers/training/test_whole_step.py): a frozen selector adds nothing to the clipping norm or to
selector_grad_var, and neither moves nor decays.

This module imports torch only (and models/ when a step is built), as the GPU benchmarks need.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Sequence
from typing import Any, cast

import torch
from torch import nn
from torch.func import functional_call

from workers.training.compiled import CompiledCall
from workers.training.optim import GraphAdamW

__all__ = ["CompiledTrainStep", "EpochTotals", "hold", "restore_held_"]

# (output, target) -> scalar loss (workers.training.metrics.TaskLoss)
LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


class EpochTotals:
    """What one epoch's compiled steps add up on the device, in place, and how many they added (host ints).

    Every tensor keeps its address for the run (`zero_` clears it in place), so a CUDA graph adds into it
    directly. Shapes lead with `seeds`: (k,) for stacked seeds, (1,) for one model. Never 0-d: under torch
    2.13 dynamo drops an in-place update of a 0-d float64 input whose result the function does not return
    (found here: selector_grad_var came out 0).

    - loss: the training loss summed over samples (the batch mean times the batch size, per step);
    - gate_entropy (..., L): per gated layer, the noise-free gate entropy summed over its gate decisions
      (workers.training.metrics.TrainGateEntropy's sums); `gate_decisions` counts them per seed and layer;
    - selector_grad (..., P) float64 and selector_square (...) float64: the running sums of
      selector_grad_var (workers.training.metrics.SelectorGradVariance) over every selector parameter,
      a frozen selector's elements zero; `steps` counts the steps.
    """

    def __init__(
        self, seeds: tuple[int, ...], *, layers: int, selector_elements: int, device: torch.device
    ) -> None:
        import torch._dynamo

        self.loss = torch.zeros(seeds, device=device)
        self.gate_entropy = torch.zeros((*seeds, layers), device=device)
        self.selector_grad = torch.zeros((*seeds, selector_elements), dtype=torch.float64, device=device)
        self.selector_square = torch.zeros(seeds, dtype=torch.float64, device=device)
        self.gate_decisions = 0
        self.steps = 0
        for tensor in self.tensors():
            torch._dynamo.mark_static_address(tensor)

    def tensors(self) -> list[torch.Tensor]:
        return [self.loss, self.gate_entropy, self.selector_grad, self.selector_square]

    def zero_(self) -> None:
        """Start an epoch."""
        for tensor in self.tensors():
            tensor.zero_()
        self.gate_decisions = 0
        self.steps = 0


def hold(tensors: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """Copies of `tensors` taken before an update (to put frozen values back with `restore_held_`)."""
    return [tensor.clone() for tensor in tensors]


def restore_held_(
    tensors: Sequence[torch.Tensor], held: Sequence[torch.Tensor], frozen: torch.Tensor
) -> None:
    """Where `frozen` (a 0-d bool, or (k,) per stacked seed) is set, each tensor gets its held value back."""
    for tensor, before in zip(tensors, held, strict=True):
        mask = frozen.reshape(tuple(frozen.shape) + (1,) * (tensor.dim() - frozen.dim()))
        tensor.copy_(torch.where(mask, before, tensor))


class CompiledTrainStep:
    """One optimizer step of `model` on a batch, in compiled code (see the module docstring).

    `optimizer` is the run's AdamW (workers.training.optim.build_optimizer), left as built: its state is
    updated in place and its state_dict stays an eager run's. The run steps its lr schedule after each call
    (the lr reaches the next step through GraphAdamW.sync_lr), calls `start_epoch` before an epoch's steps
    and reads `totals` after them, and `freeze(layers)` when the AutoNorm-S freeze fires (or a checkpoint
    brings one back); after `optimizer.load_state_dict` it calls `state_loaded`. `active` is False when no
    compiler is available: the run then takes its eager step.
    """

    def __init__(
        self,
        model: nn.Module,
        *,
        loss_fn: LossFn,
        optimizer: torch.optim.Optimizer,
        grad_clip: float | None,
        device: torch.device,
        amp: bool,
        mode: str,
        backend: str | Callable[..., Any] = "inductor",
    ) -> None:
        import torch._dynamo

        from models.norms import gated_norms

        self.model = model
        self.loss_fn = loss_fn
        self.optimizer = optimizer
        self.grad_clip = grad_clip if grad_clip is not None and grad_clip > 0 else None
        self.device = device
        self.amp = amp and device.type == "cuda"
        norms = gated_norms(model)
        # Per gated layer (models.norms.gated_norms order): its selector's parameters in the model.
        self.selectors: list[list[nn.Parameter]] = [list(norm.selector.parameters()) for _, norm in norms]
        self.selector_sizes = [sum(p.numel() for p in layer) for layer in self.selectors]
        # (L,) bool: which gated layers' selectors are frozen (the host's decision, read by the update).
        self.frozen = torch.zeros(len(norms), dtype=torch.bool, device=device)
        fixed_gate = any(norm.post_freeze_gate != "sample" for _, norm in norms)
        self._flag_names = [f"{name}.seed_frozen" for name, _ in norms] if fixed_gate else []
        # The module the forward calls with the model's own parameters and buffers: a copy in training
        # mode that no freeze touches, so the compiled forward never depends on one.
        self.template = copy.deepcopy(model).train()
        self.gated = [norm for _, norm in gated_norms(self.template)]
        self.params: dict[str, torch.Tensor] = dict(model.named_parameters())
        self.buffers = dict(model.named_buffers())
        self.adamw = GraphAdamW(optimizer, device)
        # One model's sums as one seed's: (1,), not 0-d (see EpochTotals).
        self.totals = EpochTotals(
            (1,), layers=len(norms), selector_elements=sum(self.selector_sizes), device=device
        )
        for tensor in [self.frozen, *self.params.values(), *self.buffers.values()]:
            torch._dynamo.mark_static_address(tensor)
        self.forward = CompiledCall(self._forward, mode, device, backend=backend)
        self.update = CompiledCall(
            self._update,
            self.forward.mode,  # "none" when the forward found no compiler (it warned)
            device,
            backend=backend,
            fullgraph=True,
            starts_step=False,  # within the forward's step: its outputs must stay valid
            on_fallback=self.adamw.eager,
        )
        if not self.update.active:
            self.adamw.eager()
        # Set by _prepare: every selector parameter the update steps as (group, index in group, gated layer),
        # and the tensors a freeze holds, with their gated layer.
        self._selector_slots: list[tuple[int, int, int]] = []
        self._held: list[tuple[torch.Tensor, int]] = []

    @property
    def active(self) -> bool:
        """Whether the step runs compiled (else the run takes its eager step)."""
        return self.forward.active

    # ----- what the run calls ---------------------------------------------------------------------------

    def __call__(self, x: torch.Tensor, y: torch.Tensor) -> None:
        """One optimizer step on the batch (x, y); its loss and gates go into `totals`."""
        self.adamw.sync_lr()
        loss, weighted_loss, entropy, decisions = self.forward(x, y)
        loss.backward()
        if self.adamw.tensors is None:  # the first step (or the first after a checkpoint was loaded)
            self._prepare()
        with torch.no_grad():  # the update updates parameters in place
            self.update(weighted_loss, entropy)
        self.adamw.note_step()
        self.totals.gate_decisions += decisions
        self.totals.steps += 1
        self.optimizer.zero_grad(set_to_none=True)

    def start_epoch(self) -> None:
        self.totals.zero_()

    def trained_selector_elements(self) -> int:
        """How many selector parameter elements still train (those of unfrozen layers)."""
        frozen = self.frozen.tolist()
        return sum(size for size, is_frozen in zip(self.selector_sizes, frozen, strict=True) if not is_frozen)

    def freeze(self, layers: Sequence[int]) -> None:
        """Freeze the selectors of gated layers `layers` (GateFreezer.frozen_layers) from the next step on.

        GateFreezer.apply has already marked the model (selector_frozen, for evaluation) and switched off
        their requires_grad; the step holds them itself, so requires_grad goes back on: the compiled
        forward keeps its graph, and their gradients are zeroed in the update."""
        for layer in layers:
            self.frozen[layer] = True
            for param in self.selectors[layer]:
                param.requires_grad_(True)

    def state_loaded(self) -> None:
        """The optimizer's state was replaced (a checkpoint): list its tensors again at the next step."""
        self.adamw.tensors = None

    # ----- the compiled parts -------------------------------------------------------------------------

    def _prepare(self) -> None:
        """List what the update reads, once its tensors exist (after the first backward)."""
        self.adamw.prepare(lambda param: param.grad is not None)
        layer_of = {id(p): layer for layer, params in enumerate(self.selectors) for p in params}
        slots = [
            (group, index, layer_of[id(param)])
            for group, params in enumerate(self.adamw.params)
            for index, param in enumerate(params)
            if id(param) in layer_of
        ]
        # models.norms.selector_parameters order, the order of SelectorGradVariance's flattened gradient
        rank = {id(p): position for position, p in enumerate(p for layer in self.selectors for p in layer)}
        self._selector_slots = sorted(slots, key=lambda slot: rank[id(self.adamw.params[slot[0]][slot[1]])])
        # A frozen selector's parameter and its AdamW state, each with its gated layer: held around AdamW.
        self._held = [
            (tensor, layer)
            for group, index, layer in self._selector_slots
            for param in [self.adamw.params[group][index]]
            for tensor in (param, *self.adamw.moments_of(param), self.adamw.step_count_of(param))
        ]

    def _forward(
        self, x: torch.Tensor, y: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]:
        """(loss, loss * batch size detached, (L,) gate entropy summed over the batch's gate decisions,
        gate decisions per layer)."""
        buffers = dict(self.buffers)
        for index, name in enumerate(self._flag_names):
            buffers[name] = self.frozen[index]
        with self.autocast():
            output = functional_call(self.template, (self.params, buffers), (x,))
        loss = self.loss_fn(output, y)
        from models.norms.autonorm import gate_entropy

        probs = [cast(torch.Tensor, norm.last_probs) for norm in self.gated]  # set by this forward, detached
        for norm in self.gated:
            norm.last_probs = None  # nothing of the traced step stays on the module
        if probs:
            entropy = gate_entropy(torch.stack(probs)).flatten(1)  # (L, N): one entry per gate decision
            totals, decisions = entropy.sum(dim=1), entropy.shape[1]
        else:
            totals, decisions = torch.zeros(0, device=loss.device), 0
        return loss, loss.detach() * x.shape[0], totals, decisions

    def _update(self, weighted_loss: torch.Tensor, entropy: torch.Tensor) -> None:
        """Everything of the step after the backward (see the module docstring), on the gradients in .grad."""
        totals = self.totals
        totals.loss.add_(weighted_loss)
        totals.gate_entropy.add_(entropy)
        grads = [[cast_grad(param) for param in params] for params in self.adamw.params]
        # The freeze: a frozen selector's gradient is zero (as if it had none: it adds nothing to the
        # clipping norm nor to selector_grad_var) ...
        for group, index, layer in self._selector_slots:
            grads[group][index] = grads[group][index].masked_fill(self.frozen[layer], 0.0)
        if self._selector_slots:
            flat = torch.cat([grads[group][index].reshape(-1) for group, index, _ in self._selector_slots])
            flat = flat.to(torch.float64)
            totals.selector_grad.add_(flat)
            totals.selector_square.add_(torch.dot(flat, flat))
        if self.grad_clip is not None:
            grads = clip_grads(grads, self.grad_clip)
        # ... and AdamW neither moves nor decays it, nor counts its step: held, and put back after.
        before = hold([tensor for tensor, _ in self._held])
        self.adamw.step_(grads)
        for (tensor, layer), value in zip(self._held, before, strict=True):
            restore_held_([tensor], [value], self.frozen[layer])

    def autocast(self) -> contextlib.AbstractContextManager:
        """bf16 autocast around the model on CUDA when the config asks for it (TrainingRun's rule)."""
        if self.amp:
            return torch.autocast(device_type="cuda", dtype=torch.bfloat16)
        return contextlib.nullcontext()


def cast_grad(param: torch.Tensor) -> torch.Tensor:
    """A prepared parameter's gradient (every one has one after the backward)."""
    grad = param.grad
    if grad is None:
        raise RuntimeError("a parameter the compiled step updates got no gradient")
    return grad


def clip_grads(grads: Sequence[Sequence[torch.Tensor]], max_norm: float) -> list[list[torch.Tensor]]:
    """nn.utils.clip_grad_norm_'s arithmetic on gradients grouped like the optimizer's, out of place: the L2
    norm of the per-tensor norms, coefficient max_norm / (norm + 1e-6) clamped at 1."""
    norms = [torch.linalg.vector_norm(g) for group in grads for g in group]
    total = torch.linalg.vector_norm(torch.stack(norms))
    coefficient = (max_norm / (total + 1e-6)).clamp(max=1.0)
    return [[g * coefficient.to(g.dtype) for g in group] for group in grads]
