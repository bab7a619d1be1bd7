"""One optimizer step of k stacked seeds: vmap(grad) forward/backward, per-seed clipping, per-seed
AutoNorm-S selector freezes, AdamW on the stacked tensors, and the shared warmup+cosine schedule.

With `compile` (budget.compile) the whole step is one compiled graph (workers.training.compiled,
fullgraph) in the template's compilable forms (StackedModels.compilable_forms): the vmap(grad), the
step's loss and per-seed gate entropy added to the epoch's sums on the device
(workers.training.whole_step.EpochTotals), the frozen selectors' gradients zeroed, the selector-gradient
sums, per-seed clipping, AdamW (workers.training.optim.GraphAdamW: foreach, capturable, a device lr) and
the frozen slices put back. The freeze is data there: each seed's frozen layers are a (L, k) tensor the
graph reads, so a freeze never recompiles it. Only the lr schedule's host-side step (its value reaches
the graph through a fill of the device lr) runs outside. Without `compile` the step is the eager one below.

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
from workers.training.optim import GraphAdamW, adamw, parameter_groups
from workers.training.seed_metrics import StackedSelectorGradVariance
from workers.training.stacked import StackedModels, attention_backends_for_vmap
from workers.training.whole_step import EpochTotals, hold, restore_held_

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
        # The eager step's vmap(grad).
        self.grads = CompiledCall(stacked.grad_fn(self._seed_loss), "none", device)
        # budget.compile: the whole step as one compiled graph (`_whole_step`), its epoch sums in `totals`;
        # None (and no totals) runs the eager step, as when no compiler is found. Compiled whole
        # (fullgraph), a compiler failure leaves every tensor as it was, and `_whole_step` goes on eagerly.
        self.whole: CompiledCall | None = None
        self.totals: EpochTotals | None = None
        self.adamw: GraphAdamW | None = None
        if compile != "none":
            self.adamw = GraphAdamW(optimizer, device)
            whole = CompiledCall(
                self._whole_step,
                compile,
                device,
                backend=compile_backend,
                fullgraph=True,
                on_fallback=self.adamw.eager,
            )
            if whole.active:
                self.whole = whole
                self.totals = EpochTotals(
                    (stacked.num_seeds,),
                    layers=len(self.gated),
                    selector_elements=sum(self.freezes.layer_sizes),
                    device=device,
                )
        self._group_names: list[list[str]] = []  # per optimizer group, its stacked names (set by _prepare)
        self._held: list[tuple[torch.Tensor, int]] = []  # set by _prepare

    @property
    def compiled(self) -> bool:
        """Whether the step runs as one compiled graph (not eager, nor fallen back to eager)."""
        return self.whole is not None and self.whole.active

    def __call__(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
        """One step; returns each seed's loss (k,) and the noise-free gate probabilities it trained with,
        one (k, B, 2) (or causal (k, B, T, 2)) tensor per gated layer. A compiled step also adds both into
        `totals`; under CUDA graphs what it returns is valid until the next step."""
        if self.whole is not None:
            return self._compiled_call(x, y)
        params = self.stacked.params
        with attention_backends_for_vmap(self.device):
            grads, (loss, probs) = self.grads(params, self.call_buffers(), x, y)
        self.clear_gate_cache()
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

    def start_epoch(self) -> None:
        """Before an epoch's steps: a compiled step's sums start from zero."""
        if self.totals is not None:
            self.totals.zero_()

    def state_loaded(self) -> None:
        """The optimizer's state was replaced (a checkpoint): a compiled step lists its tensors again."""
        if self.adamw is not None:
            self.adamw.tensors = None

    def _compiled_call(
        self, x: torch.Tensor, y: torch.Tensor
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
        assert self.whole is not None and self.totals is not None and self.adamw is not None
        if self.adamw.tensors is None:
            self._prepare()
        self.adamw.sync_lr()
        forms = self.stacked.compilable_forms() if self.whole.active else contextlib.nullcontext()
        with attention_backends_for_vmap(self.device), forms:
            loss, probs, self.last_grad_norms = self.whole(self.stacked.params, self.stacked.buffers, x, y)
        self.clear_gate_cache()
        self.adamw.note_step()
        self.scheduler.step()
        if probs:  # gate decisions per seed and layer: a sample's (or, causal, each of its tokens')
            self.totals.gate_decisions += probs[0][0].numel() // probs[0].shape[-1]
        self.totals.steps += 1
        return loss, probs

    def _prepare(self) -> None:
        """What the compiled step reads, listed once its tensors exist (first step, or after a checkpoint)."""
        import torch._dynamo

        assert self.adamw is not None
        self.adamw.prepare(lambda param: True)
        names = {id(tensor): name for name, tensor in self.stacked.params.items()}
        self._group_names = [[names[id(param)] for param in params] for params in self.adamw.params]
        # Per selector parameter of each gated layer: its stacked tensor and AdamW moments (not the step
        # count, one for all k seeds), held around AdamW for the seeds that froze the layer.
        self._held = [
            (tensor, layer)
            for layer, layer_names in enumerate(self.freezes.layer_params)
            for name in layer_names
            for tensor in (self.stacked.params[name], *self.adamw.moments_of(self.stacked.params[name]))
        ]
        # Updated in place by the step or between epochs: fixed addresses for a CUDA graph.
        for tensor in [
            *self.stacked.params.values(),
            *self.stacked.buffers.values(),
            self.freezes.layer_frozen,
        ]:
            torch._dynamo.mark_static_address(tensor)

    def _whole_step(
        self,
        params: Mapping[str, torch.Tensor],
        buffers: Mapping[str, torch.Tensor],
        x: torch.Tensor,
        y: torch.Tensor,
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, ...], torch.Tensor | None]:
        """The eager step's arithmetic, one graph: (each seed's loss, the gate probabilities, the pre-clip
        gradient norms or None); the loss and gate entropy go into `totals`, the update into the tensors."""
        from models.norms.autonorm import gate_entropy

        assert self.totals is not None and self.adamw is not None
        totals, num_seeds = self.totals, self.stacked.num_seeds
        flags = self.freezes.gate_flags()
        grads, (loss, probs) = self.grads.fn(params, {**buffers, **flags} if flags else buffers, x, y)
        loss = loss.detach()
        totals.loss.add_(loss * x.shape[1])
        if probs:
            entropy = torch.stack([gate_entropy(p).reshape(num_seeds, -1) for p in probs], dim=1)  # (k, L, N)
            totals.gate_entropy.add_(entropy.sum(dim=2))
        grads = dict(grads)
        frozen = self.freezes.layer_frozen  # (L, k)
        for layer, names in enumerate(self.freezes.layer_params):
            for name in names:  # a frozen seed's selector gradient is zero (SelectorFreezes.zero_grads_)
                grad = grads[name]
                grads[name] = grad.masked_fill(frozen[layer].view(-1, *([1] * (grad.dim() - 1))), 0.0)
        if self.selector_grads.names:
            flat = torch.cat(
                [grads[name].reshape(num_seeds, -1) for name in self.selector_grads.names], dim=1
            )
            flat = flat.to(torch.float64)  # (k, P)
            totals.selector_grad.add_(flat)
            totals.selector_square.add_((flat * flat).sum(dim=1))
        norms = clip_grad_norm_per_seed_(list(grads.values()), self.grad_clip) if self.grad_clip else None
        # A frozen seed's selector slices and their AdamW moments come back unchanged (SelectorFreezes.held).
        before = hold([tensor for tensor, _ in self._held])
        self.adamw.step_([[grads[name] for name in names] for names in self._group_names])
        for (tensor, layer), value in zip(self._held, before, strict=True):
            restore_held_([tensor], [value], frozen[layer])
        return loss, probs, norms

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
