"""Rank measurements of Transforming Rank, at initialisation, in float64.

- effective rank (Roy & Vetterli 2007): exp(H(p)), p_k = s_k / sum(s) over singular values
  (L1 normalisation: NOT softmax of s, NOT s squared). `normalize=True` divides by min(rows, cols), the
  largest value it can take (= the width for a square Jacobian).
- input-output Jacobian d h_L / d h_0 of the block stack via torch.func.jacrev;
- residual representation Z_l (tokens x width) at every depth and its effective rank;
- branch Jacobian J_f = W_down diag(act'(W_up x)) W_up in closed form;
- mean-spike ratio ||mean component of Z|| / ||Z||, and the mean the blocks add (its size per depth);
- branch-to-skip ratio of every residual unit: ||branch contribution|| / ||skip input||;
- the branch Jacobians' spectra at the inputs each branch really sees: normalised effective rank,
  numerical full rank, and sigma_min in units of the square-matrix hard edge (d sigma_min / RMS sigma),
  each beside the same measurement on a Gaussian null model of the same shapes;
- the soft count of a branch's hidden units that pass gradient, sum_i act'(z_i)^2 / d (a diagnostic:
  (m/d) E[act'(z)^2] by construction).

Everything works on any backbone with `embed(x) -> (B, T, D)`, `attention_mask(x)`, `token_mask(x)`,
`blocks` and `forward_blocks(h, mask, token_mask)` (every model `models.build_model` returns). A model
that wraps a residual MLP (models.mlp_classifier) offers `rank_view(x) -> (trunk, tokens (B, D))`
instead: the measurements are then of the trunk's stream, fed the batch's tokens as one token set.
Measurements run on a float64 eval copy of the model, so the caller's model is untouched.
"""

from __future__ import annotations

import copy
import math
import warnings
import zlib
from collections.abc import Callable
from typing import cast

import torch
from torch import nn

from models.backbone import TokenTransformer
from models.blocks import ResidualUnit
from models.layers import MlpBranch
from models.residual_mlp import ResidualMLP, ResidualMLPConfig

__all__ = [
    "ResidualMLP",
    "ResidualMLPConfig",
    "activation_derivative",
    "activation_derivative_power",
    "branch_active_widths",
    "branch_jacobian",
    "branch_jacobian_spectra",
    "branch_jacobian_summary",
    "branch_skip_ratios",
    "depth_jacobian_eranks",
    "effective_rank",
    "gaussian_null_spectrum",
    "hidden_states",
    "init_rank_report",
    "input_output_jacobian",
    "mean_spike_ratio",
    "measurable",
    "representation_eranks",
    "scale_free_smin",
    "spectrum_erank",
    "spectrum_is_full_rank",
    "token_jacobian",
]


def effective_rank(matrix: torch.Tensor, normalize: bool = False) -> float:
    """Roy-Vetterli effective rank of a 2-D matrix, in [1, min(shape)] (or (0, 1] normalised)."""
    if matrix.dim() != 2:
        raise ValueError(f"effective_rank needs a 2-D matrix, got shape {tuple(matrix.shape)}")
    erank = spectrum_erank(torch.linalg.svdvals(matrix.detach().double()))
    return erank / min(matrix.shape) if normalize else erank


def spectrum_erank(s: torch.Tensor) -> float:
    """Roy-Vetterli effective rank exp(H(s / sum(s))) of a vector of singular values (unnormalised)."""
    total = s.sum()
    if total <= 0:
        return 0.0
    p = s / total
    p = p[p > 0]
    return float(torch.exp(-(p * p.log()).sum()))


def scale_free_smin(s: torch.Tensor) -> float:
    """n sigma_min / RMS(sigma) of the n singular values of a square n x n matrix (descending order).

    Why n and the RMS: dividing by the RMS singular value (||J||_F / sqrt(n)) removes the matrix's scale
    with the most stable statistic of its spectrum; the factor n removes its size. A full-rank square
    random matrix has its smallest singular value at the hard edge, about RMS / n (Edelman: a square
    Gaussian matrix's n sigma_min / RMS has an O(1) limit law), so sigma_min / RMS or sigma_min /
    sigma_max alone shrink like 1/n at every width; times n they are comparable across widths and
    sizes: O(0.1-1) when the matrix is full rank, float64 round-off (~1e-15) when it is singular."""
    rms = s.pow(2).mean().sqrt()
    return float(s.shape[0] * s[-1] / rms) if rms > 0 else 0.0


def spectrum_is_full_rank(s: torch.Tensor) -> bool:
    """Numerical full rank as numpy's and torch's matrix_rank decide it: sigma_min > n eps sigma_max."""
    return bool(s[-1] > s[0] * s.shape[0] * torch.finfo(s.dtype).eps)


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


Stack = TokenTransformer | ResidualMLP


def _measured(model: nn.Module, example_input: torch.Tensor) -> tuple[Stack, torch.Tensor]:
    """The float64 eval copy of the stack to measure and the one example it reads: the model and the first
    example of the batch; for a model with `rank_view` (a wrapped residual MLP), its trunk and the whole
    batch's tokens as one token set (1, B, D), so Z_l is examples x width as in the paper."""
    copy64 = _float64_eval_copy(model)
    view = getattr(copy64, "rank_view", None)
    if callable(view):
        x = example_input.double() if example_input.is_floating_point() else example_input
        with torch.no_grad():
            trunk, tokens = view(x)
        return cast("ResidualMLP", trunk), tokens.detach().reshape(1, -1, tokens.shape[-1])
    return copy64, _one_example(example_input, copy64)


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
    model, x = _measured(model, example_input)
    h = model.embed(x)  # (1, T, D)
    mask, token_mask = model.attention_mask(x), model.token_mask(x)
    states = [h[0]]
    for block in model.blocks:
        h = block(h, mask=mask, token_mask=token_mask)
        states.append(h[0])
    return states


def _branch_inputs(
    model: nn.Module, example_input: torch.Tensor
) -> tuple[Stack, list[tuple[MlpBranch, torch.Tensor]]]:
    """Every MLP branch of the measured stack with the input it really sees (after whatever norm precedes
    it), as (tokens, D) float64."""
    stack, x = _measured(model, example_input)
    branches = [m for m in stack.modules() if isinstance(m, MlpBranch)]
    inputs: list[torch.Tensor] = []
    hooks = [b.register_forward_pre_hook(lambda _m, args: inputs.append(args[0].detach())) for b in branches]
    try:
        with torch.no_grad():
            stack.forward_blocks(stack.embed(x), stack.attention_mask(x), token_mask=stack.token_mask(x))
    finally:
        for hook in hooks:
            hook.remove()
    return stack, [(b, i.reshape(-1, i.shape[-1])) for b, i in zip(branches, inputs, strict=True)]


def branch_jacobian_ranks(model: nn.Module, example_input: torch.Tensor, token: int = 0) -> list[float]:
    """Numerical rank of each block's MLP-branch Jacobian J_f / width, at the input the branch really sees
    (token `token` of one example, after whatever norm precedes it), float64.

    The width-threshold claim: J_f is full rank only when m/d > 1 / p(act) (ReLU: 2). For GELU this rank
    is full for every m >= d (GELU' never vanishes). Over several tokens, with a Gaussian null model
    beside it: `branch_jacobian_summary`."""
    stack, branch_inputs = _branch_inputs(model, example_input)
    activation = stack.config.activation
    ranks = []
    for branch, branch_input in branch_inputs:
        vector = branch_input[token]  # (D,)
        jacobian = branch_jacobian(branch, vector, activation)  # (D, D)
        ranks.append(float(torch.linalg.matrix_rank(jacobian)) / jacobian.shape[-1])
    return ranks


BRANCH_JACOBIAN_TOKENS = (
    4  # tokens per example whose branch Jacobians are measured (x blocks: 32 at 8 blocks)
)


def gaussian_null_spectrum(
    dim: int,
    hidden: int,
    activation: str,
    pre_rms: float,
    generator: torch.Generator,
    two_matrix: bool = True,
) -> torch.Tensor:
    """Singular values of the branch Jacobian of a Gaussian null model with the branch's shapes:
    W_down (d, m) and W_up (m, d) with i.i.d. Gaussian entries and slopes act'(z) at i.i.d. pre-activations
    z ~ N(0, pre_rms^2), independent of W_up (one_matrix: diag(act'(z)) W, d x d). The weights' scale
    cancels in every scale-free measure, so only the shapes, the activation and the pre-activations'
    spread matter. For ReLU it has rank min(d, k), k ~ Binomial(m, 1/2) active units."""
    up = torch.randn(hidden, dim, generator=generator, dtype=torch.float64)
    z = pre_rms * torch.randn(hidden, generator=generator, dtype=torch.float64)
    inner = activation_derivative(activation, z).unsqueeze(1) * up
    if two_matrix:
        inner = torch.randn(dim, hidden, generator=generator, dtype=torch.float64) @ inner
    return torch.linalg.svdvals(inner)


def branch_jacobian_spectra(
    model: nn.Module, example_input: torch.Tensor, tokens: int = BRANCH_JACOBIAN_TOKENS
) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Singular values of every block's MLP-branch Jacobian J_f at the first `tokens` inputs the branch
    really sees (after whatever norm precedes it), float64, and as many spectra of the Gaussian null model
    (`gaussian_null_spectrum`) at the branch's shapes and the RMS of its measured pre-activations.

    The null's generator is seeded from the branch's own weights (crc32 of W_up): deterministic, different
    for every model seed, and the global RNG, which training goes on to use, is left untouched."""
    stack, branch_inputs = _branch_inputs(model, example_input)
    activation = stack.config.activation
    measured: list[torch.Tensor] = []
    null: list[torch.Tensor] = []
    for branch, branch_input in branch_inputs:
        vectors = branch_input[:tokens]
        up = branch.fc_up
        with torch.no_grad():
            pre = vectors @ up.weight.double().T + (up.bias.double() if up.bias is not None else 0.0)
            weights = up.weight.detach().double().contiguous().numpy().tobytes()
            generator = torch.Generator().manual_seed(zlib.crc32(weights))
            for vector in vectors:
                measured.append(torch.linalg.svdvals(branch_jacobian(branch, vector, activation).detach()))
                null.append(
                    gaussian_null_spectrum(
                        vectors.shape[-1], up.out_features, activation, float(pre.pow(2).mean().sqrt()),
                        generator, two_matrix=branch.branch == "two_matrix",
                    )
                )  # fmt: skip
    return measured, null


def branch_jacobian_summary(
    model: nn.Module, example_input: torch.Tensor, tokens: int = BRANCH_JACOBIAN_TOKENS
) -> dict[str, float]:
    """The branch Jacobians' spectra in three numbers, each the mean over blocks and tokens, beside the
    same mean over the Gaussian null model (`<name>_null`); {} for a stack without MLP branches.

    - `init_branch_jacobian_full_rank`: the fraction of J_f that are numerically full rank;
    - `init_branch_jacobian_smin`: d sigma_min / RMS sigma (`scale_free_smin`): ~1e-15 when singular,
      O(0.1-1) when full rank (J_f is square, so its sigma_min sits at the hard edge ~RMS / d even far
      above any threshold: the Marchenko-Pastur edge (sqrt(k) - sqrt(d))^2 of one k x d factor does not
      carry over to the d x d product);
    - `init_branch_jacobian_erank`: the normalised effective rank of J_f.

    The paper's width threshold: J_f is full rank only when m/d > 1 / E[act'(z)^2]. For ReLU, J_f =
    W_down[:, A] W_up[A, :] over the k active units, rank min(d, k) almost surely with k ~ m/2, so the
    full-rank fraction steps from 0 to 1 around m/d = 2. GELU' never vanishes: J_f is full rank at every
    m >= d."""
    measured, null = branch_jacobian_spectra(model, example_input, tokens)
    if not measured:
        return {}
    report: dict[str, float] = {}
    for suffix, spectra in (("", measured), ("_null", null)):
        count = len(spectra)
        report[f"init_branch_jacobian_full_rank{suffix}"] = sum(map(spectrum_is_full_rank, spectra)) / count
        report[f"init_branch_jacobian_smin{suffix}"] = sum(map(scale_free_smin, spectra)) / count
        report[f"init_branch_jacobian_erank{suffix}"] = (
            sum(spectrum_erank(s) / s.shape[0] for s in spectra) / count
        )
    return report


def branch_active_widths(model: nn.Module, example_input: torch.Tensor) -> list[float]:
    """Per block, the soft count of the branch's hidden units that pass gradient, per model width:
    sum_i act'(z_i)^2 / d at the pre-activations z = W_up x + b the branch really sees, averaged over the
    example's tokens (float64).

    A diagnostic, not the paper's quantity: its mean is (m/d) E[act'(z)^2] by construction, so it
    crosses 1 at m/d = 1 / p(act) for any activation, whatever J_f does. For ReLU the squared gain is 0
    or 1, so the count is the number of active units and rank(J_f) = min(d, count) almost surely: at
    one token, min(1, this) is `branch_jacobian_ranks`. For GELU, J_f is full rank at every m >= d
    while this count is below 1 up to m/d = 2.19. The rank itself: `branch_jacobian_summary`."""
    stack, branch_inputs = _branch_inputs(model, example_input)
    activation = stack.config.activation
    widths = []
    for branch, branch_input in branch_inputs:
        up = branch.fc_up
        with torch.no_grad():
            pre = branch_input @ up.weight.double().T + (up.bias.double() if up.bias is not None else 0.0)
            gain = activation_derivative(activation, pre) ** 2  # (tokens, m)
        widths.append(float(gain.sum(dim=-1).mean()) / branch_input.shape[-1])
    return widths


def branch_skip_ratios(model: nn.Module, example_input: torch.Tensor) -> list[float]:
    """Branch-to-skip ratio of every residual unit, in order: ||c_k||_F / ||h_k||_F over the example's
    tokens, where h_k is the stream the unit reads (after k units) and c_k what it adds to it,
    beta * LS(f(norm(h_k))) (pre), beta * LS(f(h_k)) (post: before the norm that follows the sum),
    beta * LS(norm(f(h_k))) (output), beta * LS(f(h_k)) (none). Float64, eval mode (no drop path).

    The paper: Post-Norm keeps this ratio constant; Pre-Norm's stream grows ~sqrt(k) under branches of
    constant size, so the ratio decays ~1/sqrt(k). A Transformer block holds two units (attention, MLP),
    a residual-MLP block one."""
    stack, x = _measured(model, example_input)
    units = [m for m in stack.modules() if isinstance(m, ResidualUnit)]
    skips: list[torch.Tensor] = []
    outs: list[torch.Tensor] = []
    hooks = []
    for unit in units:
        hooks.append(unit.register_forward_pre_hook(lambda _m, args: skips.append(args[0].detach())))
        # What the unit adds before its LayerScale and beta: the branch output, normalised first under
        # the output placement (where the norm follows the branch).
        source = unit.norm if unit.placement == "output" else unit.branch
        hooks.append(source.register_forward_hook(lambda _m, _args, out: outs.append(out.detach())))
    try:
        with torch.no_grad():
            stack.forward_blocks(stack.embed(x), stack.attention_mask(x), token_mask=stack.token_mask(x))
    finally:
        for hook in hooks:
            hook.remove()
    ratios = []
    with torch.no_grad():
        for unit, skip, out in zip(units, skips, outs, strict=True):
            added = unit.layer_scale(out) * unit.skip_scale
            ratios.append(float(added.norm() / skip.norm().clamp_min(1e-300)))
    return ratios


def depth_jacobian_eranks(model: nn.Module, example_input: torch.Tensor, token: int = 0) -> list[float]:
    """Normalised effective rank of d h_l / d h_0 at every depth l = 1..L for a token-wise stack (a
    residual MLP: each vector is its own input, so the Jacobian is the product of the block Jacobians);
    [] for stacks whose tokens interact (attention), where depth-wise Jacobians would cost L times more."""
    stack, x = _measured(model, example_input)
    if not isinstance(stack, ResidualMLP):
        return []
    with torch.no_grad():
        h = stack.embed(x)[0, token]  # (D,)
    jacobian = torch.eye(h.shape[0], dtype=torch.float64)
    eranks = []
    for block in stack.blocks:

        def step(vector: torch.Tensor, block: nn.Module = block) -> torch.Tensor:  # (D,) -> (D,)
            return cast("torch.Tensor", block(vector.reshape(1, 1, -1))).reshape(-1)

        jacobian = input_output_jacobian(step, h) @ jacobian
        with torch.no_grad():
            h = step(h)
        eranks.append(effective_rank(jacobian, normalize=True))
    return eranks


def representation_eranks(model: nn.Module, example_input: torch.Tensor) -> list[float]:
    """Normalised effective rank of Z_l for l = 0..L (divided by min(T, D))."""
    return [effective_rank(z, normalize=True) for z in hidden_states(model, example_input)]


def token_jacobian(model: nn.Module, example_input: torch.Tensor, token: int = 0) -> torch.Tensor:
    """d h_L[token] / d h_0[token] of the block stack for one example: a (D, D) float64 matrix.

    The other tokens stay fixed at their embedded values, so attention paths through them count; for
    token-wise stacks (ResidualMLP) this is exactly the per-vector Jacobian of the paper.
    """
    model, x = _measured(model, example_input)
    with torch.no_grad():
        h0 = model.embed(x)  # (1, T, D)
    mask, token_mask = model.attention_mask(x), model.token_mask(x)

    def stack(vector: torch.Tensor) -> torch.Tensor:  # (D,) -> (D,)
        h = torch.cat([h0[:, :token], vector.reshape(1, 1, -1), h0[:, token + 1 :]], dim=1)
        return model.forward_blocks(h, mask, token_mask)[0, token]

    return input_output_jacobian(stack, h0[0, token])


def measurable(model: nn.Module) -> bool:
    """Whether the rank tools can measure `model`: a Transformer trunk, a residual MLP or a model with a
    `rank_view` (every built-in backbone). A plugin's backbone (normlab.plugin.backbone) need not be one."""
    return isinstance(model, (TokenTransformer, ResidualMLP)) or callable(getattr(model, "rank_view", None))


def init_rank_report(model: nn.Module, example_input: torch.Tensor, token: int = 0) -> dict[str, float]:
    """Init-time rank summary for any built-in backbone (keys prefixed `init_`, values are plain floats);
    empty for a model the rank tools cannot measure (`measurable`: a plugin's backbone of its own shape).

    Per depth l = 0 (the stream's input) .. L: `init_erank_repr_<l>` (normalised erank of Z_l),
    `init_mean_spike_<l>` (mean-spike ratio), `init_mean_drift_<l>` (RMS of the mean token the blocks have
    added, ||mean(Z_l) - mean(Z_0)|| / sqrt(D)), `init_stream_rms_<l>` (||Z_l||_F / sqrt(T D)); per
    residual unit k = 0..K-1, `init_branch_skip_ratio_<k>` (what unit k+1 adds over the stream h_k it
    reads); for token-wise stacks, `init_erank_jacobian_<l>` (l = 1..L) as well. For stacks with MLP
    branches, the branch Jacobian's `init_branch_jacobian_{full_rank,smin,erank}` and their Gaussian-null
    counterparts (`branch_jacobian_summary`), `init_branch_rank` (numerical rank / d at `token`) and the
    diagnostic `init_branch_active_width`."""
    if not measurable(model):
        return {}
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
        widths = branch_active_widths(model, example_input)
        report["init_branch_active_width"] = sum(widths) / len(widths)
        report.update(branch_jacobian_summary(model, example_input))
    # Per depth l = 0 (embedded tokens) .. L: the rank-against-depth curves and the mean-spike growth
    # claims need every depth, not only the two ends.
    mean_0 = states[0].mean(dim=0)
    for depth, (z, rank, spike) in enumerate(zip(states, reprs, spikes, strict=True)):
        report[f"init_erank_repr_{depth}"] = rank
        report[f"init_mean_spike_{depth}"] = spike
        report[f"init_mean_drift_{depth}"] = float((z.mean(dim=0) - mean_0).norm()) / math.sqrt(z.shape[-1])
        report[f"init_stream_rms_{depth}"] = float(z.norm()) / math.sqrt(z.numel())
    for unit, ratio in enumerate(branch_skip_ratios(model, example_input)):
        report[f"init_branch_skip_ratio_{unit}"] = ratio
    for depth, erank in enumerate(depth_jacobian_eranks(model, example_input, token), start=1):
        report[f"init_erank_jacobian_{depth}"] = erank
    return report
