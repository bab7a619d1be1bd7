"""AdamW with three parameter groups: decayed matrices, undecayed norms/biases, and the gate selectors."""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["adamw", "build_optimizer", "parameter_groups"]


def parameter_groups(model: nn.Module, *, weight_decay: float) -> list[dict]:
    """Split parameters for AdamW.

    - "selector": AutoNorm selector MLPs, in their own group so the AutoNorm-S freeze (requires_grad False,
      grad None) visibly removes a whole group from updates and decay, and so they can be inspected apart.
    - "no_decay": every parameter owned by a normalization layer (LN affine, DyT alpha/weight/bias, FiLM's
      modulation MLP) and every 1-D parameter (biases, scalars): decaying them pulls norms toward zero
      gain, which is not regularisation but a change of the function.
    - "decay": the remaining matrices (attention, MLP, patch and token embeddings, heads).
    """
    from models.norms import selector_parameters

    selector_ids = {id(p) for p in selector_parameters(model)}
    norm_ids = {id(p) for module in model.modules() if _is_norm_layer(module) for p in module.parameters()}
    groups: dict[str, list[nn.Parameter]] = {"decay": [], "no_decay": [], "selector": []}
    for param in model.parameters():
        if id(param) in selector_ids:
            groups["selector"].append(param)
        elif id(param) in norm_ids or param.ndim < 2:
            groups["no_decay"].append(param)
        else:
            groups["decay"].append(param)
    decays = {"decay": weight_decay, "no_decay": 0.0, "selector": weight_decay}
    return [
        {"name": name, "params": params, "weight_decay": decays[name]}
        for name, params in groups.items()
        if params
    ]


def build_optimizer(model: nn.Module, *, lr: float, weight_decay: float) -> torch.optim.AdamW:
    return adamw(parameter_groups(model, weight_decay=weight_decay), lr=lr)


def adamw(groups: list[dict], *, lr: float) -> torch.optim.AdamW:
    """torch's AdamW over `groups`; fused where every parameter is on a CUDA device.

    The step runs eagerly even when the forward is a CUDA graph (budget.compile), and torch's default
    foreach implementation issues about a dozen multi-tensor launches per parameter group, each with its
    own host-side list handling: host time every GPU step pays. The fused implementation is one kernel
    per group, the same update to float tolerance (torch's documentation ranks it fastest). CPU runs
    keep the default, so their results stay bit for bit what they were.
    """
    params = [p for group in groups for p in group["params"]]
    return torch.optim.AdamW(groups, lr=lr, fused=True if fused_applies(params) else None)


def fused_applies(params: list[torch.Tensor]) -> bool:
    """Whether AdamW over `params` runs fused: all of them on CUDA (the fused kernel needs one device type)."""
    return bool(params) and all(p.is_cuda for p in params)


def _is_norm_layer(module: nn.Module) -> bool:
    """Norm layers are torch's own or any layer class defined in models.norms."""
    if isinstance(module, (nn.LayerNorm, nn.GroupNorm, nn.RMSNorm, nn.modules.batchnorm._BatchNorm)):
        return True
    return type(module).__module__.startswith("models.norms")
