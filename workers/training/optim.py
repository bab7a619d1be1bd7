"""AdamW with three parameter groups: decayed matrices, undecayed norms/biases, and the gate selectors;
and `GraphAdamW`, the same AdamW update as a compiled (and CUDA-graph captured) training step runs it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

__all__ = ["GraphAdamW", "adamw", "build_optimizer", "parameter_groups"]


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


class GraphAdamW:
    """torch's AdamW update of `optimizer`, run on explicit tensors with a device lr: what a compiled training
    step (workers.training.whole_step) calls in place of `optimizer.step()`.

    The optimizer itself stays as `adamw()` built it (a float lr per group, its eager flags, its state in
    `optimizer.state`), so its state_dict, the checkpoints and the lr schedule are exactly an eager run's.
    This object keeps, per group, the tensors the update reads (the parameters it steps, their AdamW moments
    and step counts) and a 0-d lr tensor on the device, which `sync_lr` fills from the group's lr before
    each step: the schedule stays a host-side LambdaLR, and its new value reaches the graph as data (a
    fill per group, no host sync), not as a constant the graph would be recompiled for. `step_` runs
    torch.optim.adamw.adamw, the function AdamW.step runs, with foreach=True and capturable=True: tensor ops
    only, step counts on the device, nothing read back to the host, so dynamo traces it into the step's
    graph (and a CUDA graph replays it). After a compiler failure `eager()` makes it pass the optimizer's
    own flags and float lr instead: exactly `optimizer.step()` (capturable runs eagerly on CUDA only).
    """

    def __init__(self, optimizer: torch.optim.Optimizer, device: torch.device) -> None:
        self.optimizer = optimizer
        self.graph_safe = True
        # Where capturable also runs uncompiled (torch's list: CUDA, XPU, HPU); elsewhere a step that dynamo
        # leaves eager (a frame past its recompile limit) takes the optimizer's own flags and float lr.
        self._capturable_eagerly = device.type in ("cuda", "xpu", "hpu")
        self.lrs = [
            torch.tensor(float(group["lr"]), dtype=torch.float32, device=device)
            for group in optimizer.param_groups
        ]
        self._filled = [float(group["lr"]) for group in optimizer.param_groups]
        # Per group, set by `prepare`: the parameters stepped, then their exp_avg, exp_avg_sq,
        # max_exp_avg_sq (amsgrad only) and step tensors; and the group's other hyperparameters. The step
        # reads these, never `optimizer.param_groups`: dynamo would guard on every value there, the float
        # lr included, and recompile whenever the schedule moved it.
        self.tensors: list[tuple[list[torch.Tensor], ...]] | None = None
        self._hyper: list[dict[str, Any]] = []

    def eager(self) -> None:
        """Run the optimizer's own flags and float lr from now on (the eager fallback of a compiled step)."""
        self.graph_safe = False

    def prepare(self, include: Callable[[torch.Tensor], bool]) -> None:
        """List the tensors each group's update reads, for the parameters `include` accepts (those with a
        gradient). A parameter without AdamW state gets it as its first `optimizer.step()` would create it;
        a step count not on its parameter's device is moved there (capturable keeps it on the device, as
        the fused eager optimizer on CUDA does). Call again after `optimizer.load_state_dict`."""
        import torch._dynamo

        scalar_dtype = torch.float64 if torch.get_default_dtype() == torch.float64 else torch.float32
        tensors = []
        for group in self.optimizer.param_groups:
            params = [p for p in group["params"] if include(p)]
            lists: tuple[list[torch.Tensor], ...] = ([], [], [], [], [])
            for param in params:
                state = self.optimizer.state[param]
                if not state:
                    state["step"] = torch.zeros((), dtype=scalar_dtype, device=param.device)
                    state["exp_avg"] = torch.zeros_like(param, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(param, memory_format=torch.preserve_format)
                    if group["amsgrad"]:
                        state["max_exp_avg_sq"] = torch.zeros_like(param, memory_format=torch.preserve_format)
                if state["step"].device != param.device:
                    state["step"] = state["step"].to(param.device)
                lists[0].append(param)
                lists[1].append(state["exp_avg"])
                lists[2].append(state["exp_avg_sq"])
                if group["amsgrad"]:
                    lists[3].append(state["max_exp_avg_sq"])
                lists[4].append(state["step"])
            tensors.append(lists)
        keys = ("betas", "weight_decay", "eps", "amsgrad", "maximize", "foreach", "capturable", "fused")
        self._hyper = [{key: group[key] for key in keys} for group in self.optimizer.param_groups]
        # Mutated in place by every step: their addresses stay fixed, so a CUDA graph updates them directly.
        for lists in tensors:
            for tensor_list in lists:
                for tensor in tensor_list:
                    torch._dynamo.mark_static_address(tensor)
        for lr in self.lrs:
            torch._dynamo.mark_static_address(lr)
        self.tensors = tensors

    @property
    def params(self) -> list[list[torch.Tensor]]:
        """Per group, the parameters the update steps (in group order)."""
        if self.tensors is None:
            raise RuntimeError("GraphAdamW.prepare must run before the first step")
        return [lists[0] for lists in self.tensors]

    def moments_of(self, param: torch.Tensor) -> list[torch.Tensor]:
        """A prepared parameter's AdamW moments: exp_avg, exp_avg_sq (and max_exp_avg_sq with amsgrad)."""
        state = self.optimizer.state[param]
        return [state[key] for key in ("exp_avg", "exp_avg_sq", "max_exp_avg_sq") if key in state]

    def step_count_of(self, param: torch.Tensor) -> torch.Tensor:
        """A prepared parameter's AdamW step count (0-d, on its device)."""
        return self.optimizer.state[param]["step"]

    def note_step(self) -> None:
        """What optimizer.step() notes on the optimizer, and the lr schedule checks before its own step
        (call after a step, outside compiled code)."""
        self.optimizer._opt_called = True  # type: ignore[attr-defined]

    def sync_lr(self) -> None:
        """Write each group's current lr (the schedule's) into its device tensor, where it changed."""
        for index, (group, tensor) in enumerate(zip(self.optimizer.param_groups, self.lrs, strict=True)):
            value = float(group["lr"])
            if value != self._filled[index]:
                tensor.fill_(value)
                self._filled[index] = value

    def step_(self, grads: Sequence[Sequence[torch.Tensor]]) -> None:
        """One AdamW step of every prepared parameter; `grads[g][i]` is the gradient of `params[g][i]`."""
        from torch.optim.adamw import adamw as adamw_update

        if self.tensors is None:
            raise RuntimeError("GraphAdamW.prepare must run before the first step")
        graph_safe = self.graph_safe and (torch.compiler.is_compiling() or self._capturable_eagerly)
        for index, (hyper, lists, group_grads) in enumerate(
            zip(self._hyper, self.tensors, grads, strict=True)
        ):
            params, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps = lists
            if not params:
                continue
            beta1, beta2 = hyper["betas"]
            adamw_update(
                params,
                list(group_grads),
                exp_avgs,
                exp_avg_sqs,
                max_exp_avg_sqs,
                steps,
                foreach=True if graph_safe else hyper["foreach"],
                capturable=True if graph_safe else hyper["capturable"],
                differentiable=False,
                fused=None if graph_safe else hyper["fused"],
                has_complex=False,
                amsgrad=hyper["amsgrad"],
                beta1=beta1,
                beta2=beta2,
                lr=self.lrs[index] if graph_safe else self.optimizer.param_groups[index]["lr"],
                weight_decay=hyper["weight_decay"],
                eps=hyper["eps"],
                maximize=hyper["maximize"],
            )
