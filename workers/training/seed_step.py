"""One optimizer step of k stacked seeds: vmap(grad) forward/backward, per-seed clipping, per-seed
AutoNorm-S selector freezes, AdamW on the stacked tensors, and the shared warmup+cosine schedule.

With `compile` (budget.compile) the vmap(grad) runs under torch.compile (workers.training.compiled) in
the template's compilable forms (StackedModels.compilable_forms); the rest of the step stays eager.

AdamW and the schedule are torch's own (workers.training.optim / .schedule), applied to (k, ...) tensors:
AdamW is elementwise, so every seed's slice follows exactly the update a single-seed run gives it, with
the same weight-decay groups. What needs care is what is NOT elementwise in a single-seed run:

- gradient clipping takes the norm over ALL of a run's gradients, so here the norm is taken per seed,
  over that seed's slices only (`clip_grad_norm_per_seed_`);
- a frozen AutoNorm-S selector has no gradient in a single-seed run, and AdamW then skips it (no
  momentum step, no decay). A stacked tensor cannot skip one slice, so a frozen seed's selector
  gradient is zeroed (it then adds nothing to that seed's clipping norm) and its parameter and AdamW
  moment slices are put back after the step (`SelectorFreezes`): AdamW with a zero gradient would
  still move the weights by momentum and decay them;
- a frozen selector's gate follows AutoNorm's `post_freeze_gate`; unless that is "sample" (the gate does
  not change at the freeze), each gated layer is handed its (k,) per-seed frozen flags through the
  vmapped call (`SelectorFreezes.gate_flags`, read as `AutoNorm.seed_frozen`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, cast

import torch
from torch import nn

from workers.training.compiled import CompiledCall
from workers.training.optim import adamw, parameter_groups
from workers.training.seed_metrics import StackedSelectorGradVariance
from workers.training.stacked import StackedModels, attention_backends_for_vmap

__all__ = [
    "SeedBatchedStep",
    "SelectorFreezes",
    "build_stacked_optimizer",
    "clip_grad_norm_per_seed_",
]

# (output, target) -> scalar loss of one seed (workers.training.metrics.TaskLoss)
LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def build_stacked_optimizer(
    stacked: StackedModels, *, lr: float, weight_decay: float
) -> tuple[torch.optim.AdamW, list[str]]:
    """AdamW over the stacked tensors with the single-seed run's groups (decay / no_decay / selector), and
    the stacked parameter names in optimizer index order (the order of a single-seed optimizer's state)."""
    names = {id(p): name for name, p in stacked.template.named_parameters()}
    groups, order = [], []
    for group in parameter_groups(stacked.template, weight_decay=weight_decay):
        group_names = [names[id(p)] for p in group["params"]]
        groups.append({**group, "params": [stacked.params[name] for name in group_names]})
        order.extend(group_names)
    return adamw(groups, lr=lr), order


def clip_grad_norm_per_seed_(grads: Sequence[torch.Tensor], max_norm: float) -> torch.Tensor:
    """nn.utils.clip_grad_norm_ for each seed on its own: stacked grads (k, ...) -> pre-clip norms (k,).

    Same arithmetic as torch's: the L2 norm of the per-parameter norms, coefficient
    max_norm / (norm + 1e-6) clamped at 1, gradients scaled in place.
    """
    num_seeds = grads[0].shape[0]
    per_param = torch.stack(
        [torch.linalg.vector_norm(g.reshape(num_seeds, -1), dim=1) for g in grads]
    )  # (P, k)
    total = torch.linalg.vector_norm(per_param, dim=0)  # (k,)
    coefficient = (max_norm / (total + 1e-6)).clamp(max=1.0)  # (k,)
    for g in grads:
        g.mul_(coefficient.to(g.dtype).view(num_seeds, *([1] * (g.dim() - 1))))
    return total


class SelectorFreezes:
    """Which seeds have which AutoNorm selector parameters frozen, as a (k,) bool mask per stacked name."""

    def __init__(self, template: nn.Module, num_seeds: int, device: torch.device) -> None:
        from models.norms import gated_norms

        self.num_seeds = num_seeds
        self.device = device
        norms = gated_norms(template)
        # per gated layer (models.norms.gated_norms order): the stacked names of its selector parameters
        self.layer_params: list[list[str]] = [
            [f"{layer}.selector.{name}" for name, _ in norm.selector.named_parameters()]
            for layer, norm in norms
        ]
        self.masks: dict[str, torch.Tensor] = {}  # stacked name -> (k,) bool, only names frozen somewhere
        # per gated layer: how many selector parameter elements it has
        self.layer_sizes = [sum(p.numel() for p in norm.selector.parameters()) for _, norm in norms]
        # (L, k) bool: which seeds froze each gated layer's selector; its rows are the per-seed flags the
        # vmapped forward reads where a frozen gate differs from the sampled one (`gate_flags`).
        self.layer_frozen = torch.zeros(len(norms), num_seeds, dtype=torch.bool, device=device)
        fixed_gate = any(norm.post_freeze_gate != "sample" for _, norm in norms)
        self._flag_names = [f"{layer}.seed_frozen" for layer, _ in norms] if fixed_gate else []

    def set_frozen_layers(self, seed_index: int, layers: Sequence[int]) -> None:
        """Freeze the selectors of gated layers `layers` for one seed (a freeze is never undone)."""
        for layer in layers:
            self.layer_frozen[layer, seed_index] = True
            for name in self.layer_params[layer]:
                mask = self.masks.setdefault(
                    name, torch.zeros(self.num_seeds, dtype=torch.bool, device=self.device)
                )
                mask[seed_index] = True

    def clear(self) -> None:
        """No selector frozen anywhere (before restoring a checkpoint's freezes)."""
        self.masks.clear()
        self.layer_frozen.zero_()

    def gate_flags(self) -> dict[str, torch.Tensor]:
        """What the vmapped forward passes beside the buffers: per gated layer `<layer>.seed_frozen`, its
        (k,) frozen flags (each seed sees a 0-d bool, AutoNorm.seed_frozen). Empty when every frozen gate
        keeps sampling (post_freeze_gate "sample"): nothing to choose between, the call is as before."""
        if not self._flag_names:
            return {}
        return dict(zip(self._flag_names, self.layer_frozen.unbind(0), strict=True))

    def trained_selector_elements(self) -> list[int]:
        """Per seed: how many selector parameter elements it still trains (those of unfrozen layers)."""
        frozen = self.layer_frozen.tolist()  # (L, k)
        return [
            sum(size for size, row in zip(self.layer_sizes, frozen, strict=True) if not row[seed])
            for seed in range(self.num_seeds)
        ]

    def is_frozen(self, seed_index: int, name: str) -> bool:
        mask = self.masks.get(name)
        return mask is not None and bool(mask[seed_index])

    def zero_grads_(self, grads: Mapping[str, torch.Tensor]) -> None:
        for name, mask in self.masks.items():
            grad = grads[name]
            grad.masked_fill_(mask.view(-1, *([1] * (grad.dim() - 1))), 0.0)

    @contextlib.contextmanager
    def held(self, params: Mapping[str, torch.Tensor], optimizer: torch.optim.Optimizer) -> Iterator[None]:
        """Around optimizer.step(): frozen slices of parameters and AdamW moments come back unchanged."""
        saved: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []
        for name, mask in self.masks.items():
            index = mask.nonzero().squeeze(1)  # (frozen seeds,)
            param = params[name]
            targets = [param] + [
                value
                for key, value in optimizer.state.get(param, {}).items()
                if key != "step" and torch.is_tensor(value) and value.shape == param.shape
            ]
            saved.extend((target, index, target.index_select(0, index)) for target in targets)
        yield
        with torch.no_grad():
            for target, index, values in saved:
                target.index_copy_(0, index, values)


class SeedBatchedStep:
    """Forward, backward and update of k stacked seeds on one stacked batch (x (k, B, ...), y (k, B, ...))."""

    def __init__(
        self,
        stacked: StackedModels,
        *,
        loss_fn: LossFn,
        optimizer: torch.optim.Optimizer,
        scheduler: torch.optim.lr_scheduler.LRScheduler,
        grad_clip: float | None,
        device: torch.device,
        amp: bool,
        compile: str = "none",
        compile_backend: str | Callable[..., Any] = "inductor",
    ) -> None:
        from models.norms import gated_norms

        self.stacked = stacked
        self.loss_fn = loss_fn
        self.optimizer = optimizer
        self.scheduler = scheduler
        self.grad_clip = grad_clip if grad_clip is not None and grad_clip > 0 else None
        self.device = device
        self.amp = amp and device.type == "cuda"
        self.gated = [norm for _, norm in gated_norms(stacked.template)]
        self.freezes = SelectorFreezes(stacked.template, stacked.num_seeds, device)
        # Per seed, the epoch's selector gradient variance (the run resets and reads it each epoch).
        self.selector_grads = StackedSelectorGradVariance(
            [name for names in self.freezes.layer_params for name in names], stacked.num_seeds
        )
        self.last_grad_norms: torch.Tensor | None = None  # (k,) pre-clip gradient norms of the last step
        # budget.compile: the vmap(grad) below under torch.compile. It returns gradients and changes no
        # state, so a compiler failure can fall back to the eager call safely (CompiledCall).
        self.grads = CompiledCall(stacked.grad_fn(self._seed_loss), compile, device, backend=compile_backend)

    def __call__(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
        """One step; returns each seed's loss (k,) and the noise-free gate probabilities it trained with,
        one (k, B, 2) (or causal (k, B, T, 2)) tensor per gated layer."""
        params = self.stacked.params
        forms = self.stacked.compilable_forms() if self.grads.active else contextlib.nullcontext()
        with attention_backends_for_vmap(self.device), forms:
            grads, (loss, probs) = self.grads(params, self.call_buffers(), x, y)
        self.clear_gate_cache()
        if self.grads.cuda_graphs:  # the next replay overwrites its outputs; these two outlive the step
            loss, probs = loss.clone(), tuple(p.clone() for p in probs)
        self.freezes.zero_grads_(grads)
        self.selector_grads.update(grads)  # each seed's own selector gradient, before clipping
        if self.grad_clip is not None:
            self.last_grad_norms = clip_grad_norm_per_seed_(list(grads.values()), self.grad_clip)
        for name, param in params.items():
            param.grad = grads[name]
        with self.freezes.held(params, self.optimizer):
            self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        return loss.detach(), probs

    def call_buffers(self) -> dict[str, torch.Tensor]:
        """What the vmapped template call substitutes besides the parameters, stacked (k, ...): the
        buffers, plus each gated layer's per-seed frozen flags where a frozen gate is fixed
        (SelectorFreezes.gate_flags)."""
        flags = self.freezes.gate_flags()
        return {**self.stacked.buffers, **flags} if flags else self.stacked.buffers

    def clear_gate_cache(self) -> None:
        """AutoNorm keeps its last probabilities on the module; under vmap those are transform-wrapped
        tensors that must not outlive the call."""
        for norm in self.gated:
            norm.last_probs = None

    def _seed_loss(
        self, params: Mapping[str, torch.Tensor], buffers: Mapping[str, torch.Tensor], x: Any, y: torch.Tensor
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
        with self.autocast():
            output = self.stacked.call(params, buffers, x)
        loss = self.loss_fn(output, y)
        probs = tuple(cast(torch.Tensor, norm.last_probs) for norm in self.gated)  # set by this forward
        # Taken off the modules inside the transform: a vmap-wrapped tensor left on a module would outlive
        # the call, and torch.compile cannot return one from its graph.
        self.clear_gate_cache()
        return loss, probs

    def autocast(self) -> contextlib.AbstractContextManager:
        """bf16 autocast around the forward on CUDA when the config asks for it (TrainingRun's rule)."""
        if self.amp:
            return torch.autocast(device_type="cuda", dtype=torch.bfloat16)
        return contextlib.nullcontext()
