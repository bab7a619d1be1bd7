"""k models of one architecture as one set of stacked tensors, run together with torch.func.

Every parameter and buffer of the k models is stacked along a new leading seed dimension, (k, ...), and
the template module (a copy of the first model) is called with one seed's slice at a time under `vmap`.
The stacked tensors are plain tensors (no autograd leaves): gradients come from `torch.func.grad`, and
the optimizer updates them in place, elementwise, so each seed's slice evolves on its own.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch
from torch import nn
from torch.func import functional_call, grad_and_value, stack_module_state, vmap

if TYPE_CHECKING:
    from models.layers import Attention

__all__ = ["StackedModels", "attention_backends_for_vmap"]


def attention_backends_for_vmap(device: torch.device) -> contextlib.AbstractContextManager:
    """The SDPA backends the stacked step allows on `device` (use around vmap(grad) and the vmapped eval).

    CPU: the math kernel, plain batched matmuls; the flash kernel has no batching rule there, and vmap
    would loop over the seeds. CUDA: flash, then memory-efficient, then math; never cuDNN attention (an
    H200 run found no vmap derivative for its backward). Measured on an H200 (ViT-Lite paper preset, bf16, 32 seeds): flash is the
    fastest choice (44k samples/s vs 38k with efficient only) although vmap runs its backward seed by
    seed (no batching rule, a one-time warning); the math kernel fails under vmap with bf16 autocast.
    """
    from torch.nn.attention import SDPBackend, sdpa_kernel

    if device.type == "cuda":
        return sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH])
    return sdpa_kernel([SDPBackend.MATH])


class StackedModels:
    """The parameters and buffers of k same-architecture models, stacked (k, ...), plus a template module.

    `params` / `buffers` map the template's parameter / buffer names (tied parameters once) to stacked
    tensors. The template's own parameter values are never used: `functional_call` substitutes a seed's
    slice for every one of them. Persistent buffers are stacked like parameters and never changed by the
    batched forward (the backbones hold no running statistics).
    """

    def __init__(self, models: Sequence[nn.Module]) -> None:
        if not models:
            raise ValueError("StackedModels needs at least one model")
        names = [name for name, _ in models[0].named_parameters()]
        for model in models[1:]:
            if [name for name, _ in model.named_parameters()] != names:
                raise ValueError("stacked models must share one architecture (same parameter names)")
        params, buffers = stack_module_state(list(models))
        self.params: dict[str, torch.Tensor] = {name: p.detach() for name, p in params.items()}  # (k, ...)
        self.buffers: dict[str, torch.Tensor] = {name: b.detach() for name, b in buffers.items()}
        self.num_seeds = len(models)
        self.template = copy.deepcopy(models[0])
        # state_dict key -> stacked name (tied parameters appear under several keys, stacked once)
        stacked_names = {id(t): name for name, t in self.template.named_parameters()}
        stacked_names.update({id(t): name for name, t in self.template.named_buffers()})
        self._state_keys = {
            key: stacked_names[id(t)] for key, t in self.template.state_dict(keep_vars=True).items()
        }

    # ----- functional calls ---------------------------------------------------------------------------

    def call(self, params: Mapping[str, torch.Tensor], buffers: Mapping[str, torch.Tensor], x: Any) -> Any:
        """The template run with ONE seed's tensors (use inside vmap)."""
        return functional_call(self.template, (dict(params), dict(buffers)), (x,))

    def grad_fn(
        self, loss_fn: Callable[..., tuple[torch.Tensor, Any]]
    ) -> Callable[..., tuple[dict[str, torch.Tensor], tuple[torch.Tensor, Any]]]:
        """vmap over seeds of grad_and_value(loss_fn) with its first argument the parameters.

        `loss_fn(params, buffers, x, y) -> (loss, aux)` sees one seed; the result is
        (grads (k, ...) per name, (loss (k,), aux stacked (k, ...))). Random ops (dropout, drop path,
        Gumbel noise) draw independently per seed (`randomness="different"`) from the global generator.
        """
        return vmap(grad_and_value(loss_fn, has_aux=True), in_dims=(0, 0, 0, 0), randomness="different")

    def forward_shared_input(
        self,
        fn: Callable[[Mapping[str, torch.Tensor], Mapping[str, torch.Tensor], Any], Any],
        x: Any,
        buffers: Mapping[str, torch.Tensor] | None = None,
    ) -> Any:
        """fn(params, buffers, x) for every seed on the same input x (evaluation): outputs stacked (k, ...).
        `buffers` replaces the stacked buffers (e.g. with per-seed flags added); default: `self.buffers`."""
        buffers = self.buffers if buffers is None else buffers
        with attention_backends_for_vmap(self.device):
            return vmap(fn, in_dims=(0, 0, None), randomness="different")(self.params, buffers, x)

    @contextlib.contextmanager
    def compilable_forms(self) -> Iterator[None]:
        """Within: the template's attention as plain matmuls (models.layers.Attention.explicit_math) and the
        mixed norms as their eager composite instead of the Triton kernels (models.norms.mixed
        .TRITON_ON_CUDA, and AutoNorm's whole-layer kernel, models.norms.autonorm.TRITON_LAYER_ON_CUDA):
        the forms that vmap(grad) compiles on every device. The fused attention
        kernels' backwards have no batching rule (vmap loops over the seeds) and cuDNN's none that
        compiles; the Triton operators are left out of an untested trace. Outside, evaluation and an
        eager fallback keep the fused kernels."""
        from models.norms import autonorm, mixed

        attention = self._attention_modules()
        triton_on_cuda, layer_kernel = mixed.TRITON_ON_CUDA, autonorm.TRITON_LAYER_ON_CUDA
        for module in attention:
            module.explicit_math = True
        mixed.TRITON_ON_CUDA = autonorm.TRITON_LAYER_ON_CUDA = False
        try:
            yield
        finally:
            for module in attention:
                module.explicit_math = False
            mixed.TRITON_ON_CUDA, autonorm.TRITON_LAYER_ON_CUDA = triton_on_cuda, layer_kernel

    def _attention_modules(self) -> list[Attention]:
        from models.layers import Attention

        return [module for module in self.template.modules() if isinstance(module, Attention)]

    @property
    def device(self) -> torch.device:
        return next(iter(self.params.values())).device

    # ----- per-seed views -----------------------------------------------------------------------------

    def seed_state_dict(self, seed_index: int) -> dict[str, torch.Tensor]:
        """Seed `seed_index`'s model state_dict, key for key what the single model's state_dict() holds."""
        stacked = {**self.params, **self.buffers}
        return {key: stacked[name][seed_index].clone() for key, name in self._state_keys.items()}

    def load_seed_state_dict(self, seed_index: int, state: Mapping[str, torch.Tensor]) -> None:
        """Overwrite seed `seed_index`'s slice from a single model's state_dict (strict: same keys)."""
        missing = set(self._state_keys) - set(state)
        unexpected = set(state) - set(self._state_keys)
        if missing or unexpected:
            raise ValueError(
                f"state_dict does not fit the model: missing {sorted(missing)}, unexpected {sorted(unexpected)}"
            )
        stacked = {**self.params, **self.buffers}
        with torch.no_grad():
            for key, name in self._state_keys.items():
                stacked[name][seed_index].copy_(state[key])

    def materialize(self, seed_index: int) -> nn.Module:
        """A standalone copy of the template holding seed `seed_index`'s values (e.g. for the rank report)."""
        model = copy.deepcopy(self.template)
        model.load_state_dict(self.seed_state_dict(seed_index))
        return model

    def to(self, device: torch.device) -> StackedModels:
        self.params = {name: p.to(device) for name, p in self.params.items()}
        self.buffers = {name: b.to(device) for name, b in self.buffers.items()}
        self.template.to(device)
        return self
