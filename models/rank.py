"""Rank measurements of Transforming Rank, at initialisation, in float64.

- effective rank (Roy & Vetterli 2007): exp(H(p)), p_k = s_k / sum(s) over singular values
  (L1 normalisation: NOT softmax of s, NOT s squared). `normalize=True` divides by min(rows, cols), the
  largest value it can take (= the width for a square Jacobian).
- input-output Jacobian d h_L / d h_0 of the block stack via torch.func.jacrev;
- residual representation Z_l (tokens x width) at every depth and its effective rank;
- branch Jacobian J_f = W_down diag(act'(W_up x)) W_up in closed form;
- mean-spike ratio ||mean component of Z|| / ||Z||.

Everything works on any backbone with `embed(x) -> (B, T, D)`, `attention_mask(x)`, `token_mask(x)`,
`blocks` and `forward_blocks(h, mask, token_mask)` (every model `models.build_model` returns).
Measurements run on a float64 eval copy of the model, so the caller's model is untouched.
"""

from __future__ import annotations

import copy
import math
import warnings
from collections.abc import Callable
from typing import cast

import torch
from torch import nn

from models.backbone import TokenTransformer
from models.layers import MlpBranch
from models.residual_mlp import ResidualMLP, ResidualMLPConfig

__all__ = [
    "ResidualMLP",
    "ResidualMLPConfig",
    "activation_derivative",
    "activation_derivative_power",
    "branch_jacobian",
    "effective_rank",
    "hidden_states",
    "init_rank_report",
    "input_output_jacobian",
    "mean_spike_ratio",
    "representation_eranks",
    "token_jacobian",
]


def effective_rank(matrix: torch.Tensor, normalize: bool = False) -> float:
    """Roy-Vetterli effective rank of a 2-D matrix, in [1, min(shape)] (or (0, 1] normalised)."""
    if matrix.dim() != 2:
        raise ValueError(f"effective_rank needs a 2-D matrix, got shape {tuple(matrix.shape)}")
    s = torch.linalg.svdvals(matrix.detach().double())
    total = s.sum()
    if total <= 0:
        return 0.0
    p = s / total
    p = p[p > 0]
    erank = float(torch.exp(-(p * p.log()).sum()))
    return erank / min(matrix.shape) if normalize else erank


def mean_spike_ratio(z: torch.Tensor) -> float:
    """Z (tokens, width): ||1 mu^T||_F / ||Z||_F with mu the mean token; 1 = all tokens identical."""
    mean_component = z.mean(dim=0, keepdim=True).expand_as(z)
    return float(mean_component.norm() / z.norm().clamp_min(1e-300))


def activation_derivative(name: str, z: torch.Tensor) -> torch.Tensor:
    """act'(z) for relu, gelu (exact erf form, as nn.GELU) and tanh."""
    if name == "relu":
        return (z > 0).to(z.dtype)
    if name == "gelu":
        cdf = 0.5 * (1.0 + torch.erf(z / math.sqrt(2.0)))
        pdf = torch.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)
        return cdf + z * pdf
    if name == "tanh":
        return 1.0 - torch.tanh(z) ** 2
    raise ValueError(f"unknown activation {name!r}")


def activation_derivative_power(name: str, points: int = 200_001) -> float:
    """p(act) = E[act'(z)^2] for z ~ N(0, 1) (trapezoid rule): relu 0.5, gelu ~0.456.
    J_f is full rank only if m/d > 1 / p(act)."""
    z = torch.linspace(-12.0, 12.0, points, dtype=torch.float64)
    density = torch.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)
    return float(torch.trapezoid(activation_derivative(name, z) ** 2 * density, z))


def branch_jacobian(branch: MlpBranch, x: torch.Tensor, activation: str) -> torch.Tensor:
    """Closed-form Jacobian of an MLP branch at one input x (D,), float64:
    two_matrix: W_down diag(act'(W_up x + b)) W_up; one_matrix: diag(act'(W x + b)) W."""
    w_up = branch.fc_up.weight.double()  # (m, d)
    b_up = branch.fc_up.bias.double() if branch.fc_up.bias is not None else 0.0
    slope = activation_derivative(activation, w_up @ x.double() + b_up)  # (m,)
    inner = slope.unsqueeze(1) * w_up  # diag(act') W_up, (m, d)
    if branch.branch == "one_matrix":
        return inner
    down = branch.fc_down
    assert isinstance(down, nn.Linear)  # a two_matrix branch ends in its down-projection
    return down.weight.double() @ inner  # (d, d)


def _float64_eval_copy(model: nn.Module) -> TokenTransformer | ResidualMLP:
    # Every model the rank tools measure is one of the two trunks (embed, forward_blocks, blocks, config).
    return cast("TokenTransformer | ResidualMLP", copy.deepcopy(model).double().eval())


def _one_example(example_input: torch.Tensor, model: nn.Module) -> torch.Tensor:
    if isinstance(model, ResidualMLP) and example_input.dim() == 2:
        example = example_input.unsqueeze(0)  # (1, T, D): one set of tokens
    else:
        example = example_input[:1]
    return example.double() if example.is_floating_point() else example


def input_output_jacobian(fn: Callable[[torch.Tensor], torch.Tensor], h: torch.Tensor) -> torch.Tensor:
    """d fn(h) / d h as a (fn(h).numel(), h.numel()) float64 matrix, by reverse-mode torch.func."""
    h = h.detach().double()
    with warnings.catch_warnings():
        # SDPA's backward has no vmap batching rule yet: torch falls back to a loop, correct but noisy.
        warnings.filterwarnings("ignore", message=".*batching rule.*")
        jac = torch.func.jacrev(fn)(h).detach()
    out_numel = jac.numel() // h.numel()
    return jac.reshape(out_numel, h.numel())


@torch.no_grad()
def hidden_states(model: nn.Module, example_input: torch.Tensor) -> list[torch.Tensor]:
    """Residual representations Z_0 (embedded tokens), Z_1, ..., Z_L of one example, each (T, D) float64."""
    model = _float64_eval_copy(model)
    x = _one_example(example_input, model)
    h = model.embed(x)  # (1, T, D)
    mask, token_mask = model.attention_mask(x), model.token_mask(x)
    states = [h[0]]
    for block in model.blocks:
        h = block(h, mask=mask, token_mask=token_mask)
        states.append(h[0])
    return states


def branch_jacobian_ranks(model: nn.Module, example_input: torch.Tensor, token: int = 0) -> list[float]:
    """Numerical rank of each block's MLP-branch Jacobian J_f / width, at the input the branch really sees
    (token `token` of one example, after whatever norm precedes it), float64.

    The width-threshold claim: J_f is full rank only when m/d > 1 / p(act) (ReLU: 2)."""
    model = _float64_eval_copy(model)
    x = _one_example(example_input, model)
    branches = [m for m in model.modules() if isinstance(m, MlpBranch)]
    inputs: list[torch.Tensor] = []
    hooks = [b.register_forward_pre_hook(lambda _m, args: inputs.append(args[0].detach())) for b in branches]
    try:
        with torch.no_grad():
            model.forward_blocks(model.embed(x), model.attention_mask(x), token_mask=model.token_mask(x))
    finally:
        for hook in hooks:
            hook.remove()
    activation = model.config.activation
    ranks = []
    for branch, branch_input in zip(branches, inputs, strict=True):
        vector = branch_input.reshape(-1, branch_input.shape[-1])[token]  # (D,)
        jacobian = branch_jacobian(branch, vector, activation)  # (D, D)
        ranks.append(float(torch.linalg.matrix_rank(jacobian)) / jacobian.shape[-1])
    return ranks


def representation_eranks(model: nn.Module, example_input: torch.Tensor) -> list[float]:
    """Normalised effective rank of Z_l for l = 0..L (divided by min(T, D))."""
    return [effective_rank(z, normalize=True) for z in hidden_states(model, example_input)]


def token_jacobian(model: nn.Module, example_input: torch.Tensor, token: int = 0) -> torch.Tensor:
    """d h_L[token] / d h_0[token] of the block stack for one example: a (D, D) float64 matrix.

    The other tokens stay fixed at their embedded values, so attention paths through them count; for
    token-wise stacks (ResidualMLP) this is exactly the per-vector Jacobian of the paper.
    """
    model = _float64_eval_copy(model)
    x = _one_example(example_input, model)
    with torch.no_grad():
        h0 = model.embed(x)  # (1, T, D)
    mask, token_mask = model.attention_mask(x), model.token_mask(x)

    def stack(vector: torch.Tensor) -> torch.Tensor:  # (D,) -> (D,)
        h = torch.cat([h0[:, :token], vector.reshape(1, 1, -1), h0[:, token + 1 :]], dim=1)
        return model.forward_blocks(h, mask, token_mask)[0, token]

    return input_output_jacobian(stack, h0[0, token])


def init_rank_report(model: nn.Module, example_input: torch.Tensor, token: int = 0) -> dict[str, float]:
    """Init-time rank summary for any backbone (keys prefixed `init_`, values are plain floats)."""
    jacobian = token_jacobian(model, example_input, token)
    states = hidden_states(model, example_input)
    reprs = [effective_rank(z, normalize=True) for z in states]
    spikes = [mean_spike_ratio(z) for z in states]
    report = {
        "init_erank_jacobian": effective_rank(jacobian, normalize=True),
        "init_erank_jacobian_raw": effective_rank(jacobian),
        "init_erank_repr_first": reprs[0],
        "init_erank_repr_last": reprs[-1],
        "init_erank_repr_min": min(reprs),
        "init_mean_spike_first": spikes[0],
        "init_mean_spike_last": spikes[-1],
    }
    branch_ranks = branch_jacobian_ranks(model, example_input, token)
    if branch_ranks:
        report["init_branch_rank"] = sum(branch_ranks) / len(branch_ranks)
    # Per depth l = 0 (embedded tokens) .. L: the rank-against-depth curves and the mean-spike growth
    # claims need every depth, not only the two ends.
    for depth, (rank, spike) in enumerate(zip(reprs, spikes, strict=True)):
        report[f"init_erank_repr_{depth}"] = rank
        report[f"init_mean_spike_{depth}"] = spike
    return report
