"""The whole AutoNorm layer as one Triton kernel each way on CUDA: the GPU twin of `autonorm_fused`.

The per-sample mixed-norm kernels of `mixed_triton` leave AutoNorm's gate in torch: the token mean, the
selector MLP, the (Gumbel-)softmax and the folding of gate and affine parameters are about 25 small
kernels each way, which on a GPU cost more than the (B, T, D) work itself (3.3-3.65x nn.LayerNorm in
CUDA-graph device time on an H200 at (128, 65, 128)). Here one program per sample does everything the C
kernel does for its sample:

    forward:  pass 1 row stats and the token mean -> selector MLP, gate, folded coefficients -> pass 2 y
    backward: pass 1 the (D,) coefficient sums -> gate and selector backward down to dpool -> pass 2 dx

Per-sample partial gradients land in one (B, P) buffer that a single torch sum finishes (no atomics, so
gradients are bit-for-bit reproducible); the selector's weight gradients are two small matmuls over
the saved per-sample activations. A forward is the noise draw plus one kernel, a backward one kernel,
one sum and two matmuls.

Scope: float32 parameters; x float32, bfloat16 or float16 (the output is float32, as on the eager path
whose float32 coefficients promote it); one gate per sample (causal per-token gates stay eager).
Stacked seeds: under torch.func.vmap (and grad) both operators fold the V copies into the samples of
one launch, each copy reading its own parameters, so k seeds cost one launch as one seed does. Forward-
mode AD and double backward are not supported (the latter raises). Both launches are
`torch.library.triton_op`s, so torch.compile traces them and CUDA graphs capture them.
On CPU tensors the kernels run only under Triton's interpreter (TRITON_INTERPRET=1 before import),
which is how the tests check their results without a GPU; the tests also compile them for an sm_90 GPU
with Triton's own compiler (tests/models/norms/gpu_compile.py), which the interpreter does not stand
in for.

Not done: splitting a sample's tokens over several programs, as `mixed_triton` does. One program per
sample fills an H200's 132 SMs at the ViT-Lite paper batch (128) but not at small batches or at
(64, 197, 768), where each program walks 50 row tiles; the gate needs the whole sample's mean before
any row is mixed, so a split costs a launch each way.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch._library.triton import set_wrap_triton_enabled
from torch.library import triton_op, wrap_triton

from models.norms.mixed import all_float32, checked_token_weights
from models.norms.mixed_triton import (
    MAX_DIM,
    SUPPORTED_DTYPES,
    _direct_launch_applies,
    _fold,
    _RefuseDoubleBackward,
    _tanh,
    _unfold,
    _vmapped_first,
)

__all__ = ["autonorm_triton", "autonorm_triton_applies"]

FORWARD_TILE_ELEMENTS = 4096  # of a (BLOCK_T, BLOCK_D) row tile
BACKWARD_TILE_ELEMENTS = 2048  # the backward keeps about twice as many live values per element
SELECTOR_TILE_ELEMENTS = 8192  # of a (BLOCK_H, BLOCK_D) tile of fc1's rows
GATE_WIDTH = 4  # per-sample gate state: soft[2] (what the gradient flows through), weights[2] (what mixes)
# The GPU compiler reads only constexpr globals inside a kernel (the interpreter reads any).
INV_SQRT2 = tl.constexpr(0.7071067811865476)
INV_SQRT_2PI = tl.constexpr(0.3989422804014327)


@triton.jit
def _erf(v):
    """Rational erf (Eigen's float form, the one the CPU kernel uses), max abs error ~4e-7 in float32;
    plain arithmetic, which Triton's interpreter runs as well as the GPU."""
    v = tl.minimum(tl.maximum(v, -4.0), 4.0)
    v2 = v * v
    p = v2 * -2.72614225801306e-10 + 2.77068142495902e-08
    p = p * v2 + -2.10102402082508e-06
    p = p * v2 + -5.69250639462346e-05
    p = p * v2 + -7.34990630326855e-04
    p = p * v2 + -2.95459980854025e-03
    p = p * v2 + -1.60960333262415e-02
    p = p * v
    q = v2 * -1.45660718464996e-05 + -2.13374055278905e-04
    q = q * v2 + -1.68282697438203e-03
    q = q * v2 + -7.37332916720468e-03
    q = q * v2 + -1.42647390514189e-02
    return p / q


@triton.jit
def _row_tile(sample, start, tokens, dim, cols, col_mask, BLOCK_T: tl.constexpr):
    """Rows start.. of one sample: their (BLOCK_T,) row indices into (B * T) and mask, and the
    (BLOCK_T, BLOCK_D) element mask and offsets."""
    token = start + tl.arange(0, BLOCK_T)
    row_mask = token < tokens
    rows = sample * tokens + token
    mask = row_mask[:, None] & col_mask[None, :]
    return rows, row_mask, mask, rows[:, None] * dim + cols[None, :]


@triton.jit
def _row_stats(x, mask, dim, eps):
    """Each row's mean, its centred values (0 on masked lanes) and rstd."""
    mean = tl.sum(x, axis=1) / dim
    centred = tl.where(mask, x - mean[:, None], 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(centred * centred, axis=1) / dim + eps)
    return mean, centred, rstd


@triton.jit
def _backward_tile(grad_ptr, x_ptr, mean_ptr, rstd_ptr, rows, row_mask, mask, offsets, alpha):
    """g, x, rstd, x_hat and tanh(alpha x) of a row tile, from x and the forward's saved row stats.
    Masked lanes load g = 0 and x = 0, so they add nothing to any sum over them."""
    g = tl.load(grad_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    mean = tl.load(mean_ptr + rows, mask=row_mask, other=0.0)
    rstd = tl.load(rstd_ptr + rows, mask=row_mask, other=0.0)
    x_hat = tl.where(mask, (x - mean[:, None]) * rstd[:, None], 0.0)
    return g, x, rstd, x_hat, _tanh(alpha * x)


@triton.jit
def _autonorm_forward_kernel(
    x_ptr, alpha_ptr, dyt_w_ptr, dyt_b_ptr, ln_w_ptr, ln_b_ptr, w1_ptr, b1_ptr, w2_ptr, b2_ptr,
    noise_ptr, tw_ptr, y_ptr, mean_ptr, rstd_ptr, pooled_ptr, pre_ptr, hidden_ptr, gate_ptr, probs_ptr,
    tokens, dim, width, samples_per_copy, tau, eps,
    HAS_NOISE: tl.constexpr, HAS_TOKEN_WEIGHTS: tl.constexpr, HARD: tl.constexpr,
    BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_H: tl.constexpr,
):  # fmt: skip
    # Inductor may pass Python floats as float64 scalars: keep every value float32, as a direct launch does.
    tau = tl.cast(tau, tl.float32)
    eps = tl.cast(eps, tl.float32)
    sample = tl.program_id(0).to(tl.int64)
    # Stacked seeds (vmap) fold their copies into the samples; each copy reads its own parameters.
    copy = sample // samples_per_copy
    alpha_ptr += copy
    dyt_w_ptr += copy * dim
    dyt_b_ptr += copy * dim
    ln_w_ptr += copy * dim
    ln_b_ptr += copy * dim
    w1_ptr += copy * width * dim
    b1_ptr += copy * width
    w2_ptr += copy * 2 * width
    b2_ptr += copy * 2
    cols = tl.arange(0, BLOCK_D)
    col_mask = cols < dim
    # Pass 1: each row's mean and rstd (saved for the backward) and the token mean the selector reads.
    pooled = tl.zeros([BLOCK_D], dtype=tl.float32)
    for start in range(0, tokens, BLOCK_T):
        rows, row_mask, mask, offsets = _row_tile(sample, start, tokens, dim, cols, col_mask, BLOCK_T)
        x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
        mean, _centred, rstd = _row_stats(x, mask, dim, eps)
        tl.store(mean_ptr + rows, mean, mask=row_mask)
        tl.store(rstd_ptr + rows, rstd, mask=row_mask)
        if HAS_TOKEN_WEIGHTS:
            weight = tl.load(tw_ptr + rows, mask=row_mask, other=0.0)  # (BLOCK_T,), 0 on pads
            pooled += tl.sum(x * weight[:, None], axis=0)
        else:
            pooled += tl.sum(x, axis=0)
    if not HAS_TOKEN_WEIGHTS:
        pooled = pooled / tokens  # token weights already sum to 1 (or 0 for a sample of pads only)
    tl.store(pooled_ptr + sample * dim + cols, pooled, mask=col_mask)
    # Selector MLP, D -> H (GELU) -> 2, in (BLOCK_H, BLOCK_D) tiles of fc1's rows.
    logit_dyt = tl.load(b2_ptr).to(tl.float32)
    logit_ln = tl.load(b2_ptr + 1).to(tl.float32)
    for h_start in range(0, width, BLOCK_H):
        units = h_start + tl.arange(0, BLOCK_H)
        unit_mask = units < width
        w1 = tl.load(
            w1_ptr + units[:, None] * dim + cols[None, :],
            mask=unit_mask[:, None] & col_mask[None, :],
            other=0.0,
        )
        pre = tl.sum(w1 * pooled[None, :], axis=1) + tl.load(b1_ptr + units, mask=unit_mask, other=0.0)
        hidden = pre * 0.5 * (1.0 + _erf(pre * INV_SQRT2))  # exact (erf) GELU, as nn.GELU()
        hidden = tl.where(unit_mask, hidden, 0.0)
        tl.store(pre_ptr + sample * width + units, pre, mask=unit_mask)
        tl.store(hidden_ptr + sample * width + units, hidden, mask=unit_mask)
        logit_dyt += tl.sum(tl.load(w2_ptr + units, mask=unit_mask, other=0.0) * hidden, axis=0)
        logit_ln += tl.sum(tl.load(w2_ptr + width + units, mask=unit_mask, other=0.0) * hidden, axis=0)
    # Noise-free probabilities (what gate_summary reads), then the gate the layer mixes with.
    top = tl.maximum(logit_dyt, logit_ln)
    e_dyt, e_ln = tl.exp(logit_dyt - top), tl.exp(logit_ln - top)
    prob_dyt, prob_ln = e_dyt / (e_dyt + e_ln), e_ln / (e_dyt + e_ln)
    tl.store(probs_ptr + sample * 2, prob_dyt)
    tl.store(probs_ptr + sample * 2 + 1, prob_ln)
    soft_dyt, soft_ln = prob_dyt, prob_ln
    if HAS_NOISE:
        # A standard exponential draw E per logit: the Gumbel noise is -log(E), as F.gumbel_softmax has it.
        z_dyt = (logit_dyt - tl.log(tl.load(noise_ptr + sample * 2))) / tau
        z_ln = (logit_ln - tl.log(tl.load(noise_ptr + sample * 2 + 1))) / tau
        top = tl.maximum(z_dyt, z_ln)
        e_dyt, e_ln = tl.exp(z_dyt - top), tl.exp(z_ln - top)
        soft_dyt, soft_ln = e_dyt / (e_dyt + e_ln), e_ln / (e_dyt + e_ln)
    w_dyt, w_ln = soft_dyt, soft_ln
    if HARD:
        # Straight-through: the one-hot mixes, the soft gate carries the gradient (torch.argmax: a tie
        # goes to the first index, DyT).
        pick_ln = (soft_ln > soft_dyt).to(tl.float32)
        w_dyt, w_ln = 1.0 - pick_ln, pick_ln
    tl.store(gate_ptr + sample * 4, soft_dyt)
    tl.store(gate_ptr + sample * 4 + 1, soft_ln)
    tl.store(gate_ptr + sample * 4 + 2, w_dyt)
    tl.store(gate_ptr + sample * 4 + 3, w_ln)
    # Folded coefficients: y = cl * LN0(x) + cd * tanh(alpha x) + c0.
    alpha = tl.load(alpha_ptr).to(tl.float32)
    ln_w = tl.load(ln_w_ptr + cols, mask=col_mask, other=0.0)
    ln_b = tl.load(ln_b_ptr + cols, mask=col_mask, other=0.0)
    cl = w_ln * ln_w
    cd = w_dyt * tl.load(dyt_w_ptr + cols, mask=col_mask, other=0.0)
    c0 = w_dyt * tl.load(dyt_b_ptr + cols, mask=col_mask, other=0.0) + w_ln * ln_b
    # Pass 2. The row stats are recomputed, not read back: another thread of this program stored them,
    # and nothing orders that store before this load.
    for start in range(0, tokens, BLOCK_T):
        _rows, _row_mask, mask, offsets = _row_tile(sample, start, tokens, dim, cols, col_mask, BLOCK_T)
        x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
        _mean, centred, rstd = _row_stats(x, mask, dim, eps)
        y = centred * rstd[:, None] * cl[None, :] + _tanh(alpha * x) * cd[None, :] + c0[None, :]
        tl.store(y_ptr + offsets, y, mask=mask)


@triton.jit
def _autonorm_backward_kernel(
    grad_ptr, x_ptr, alpha_ptr, dyt_w_ptr, dyt_b_ptr, ln_w_ptr, ln_b_ptr, w1_ptr, w2_ptr,
    mean_ptr, rstd_ptr, pre_ptr, gate_ptr, tw_ptr, dx_ptr, partial_ptr,
    tokens, dim, width, samples_per_copy, partial_width, inv_tau,
    HAS_TOKEN_WEIGHTS: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_H: tl.constexpr,
):  # fmt: skip
    # As in the forward: a float64 inv_tau from Inductor would turn dpool's loop-carried sum float64.
    inv_tau = tl.cast(inv_tau, tl.float32)
    sample = tl.program_id(0).to(tl.int64)
    copy = sample // samples_per_copy  # as in the forward
    alpha_ptr += copy
    dyt_w_ptr += copy * dim
    dyt_b_ptr += copy * dim
    ln_w_ptr += copy * dim
    ln_b_ptr += copy * dim
    w1_ptr += copy * width * dim
    w2_ptr += copy * 2 * width
    cols = tl.arange(0, BLOCK_D)
    col_mask = cols < dim
    alpha = tl.load(alpha_ptr).to(tl.float32)
    w_dyt = tl.load(gate_ptr + sample * 4 + 2)
    w_ln = tl.load(gate_ptr + sample * 4 + 3)
    # Only cd lives through pass 1; the other (D,) vectors are loaded where they are needed, which keeps
    # the backward's registers from spilling at (BLOCK_T, BLOCK_D) = (16, 128).
    cd = w_dyt * tl.load(dyt_w_ptr + cols, mask=col_mask, other=0.0)
    # Pass 1: the gradients of the folded (D,) coefficients and of alpha, summed over the sample's rows.
    dcl = tl.zeros([BLOCK_D], dtype=tl.float32)
    dcd = tl.zeros([BLOCK_D], dtype=tl.float32)
    dc0 = tl.zeros([BLOCK_D], dtype=tl.float32)
    dalpha = tl.zeros([BLOCK_T], dtype=tl.float32)
    for start in range(0, tokens, BLOCK_T):
        rows, row_mask, mask, offsets = _row_tile(sample, start, tokens, dim, cols, col_mask, BLOCK_T)
        g, x, _rstd, x_hat, th = _backward_tile(
            grad_ptr, x_ptr, mean_ptr, rstd_ptr, rows, row_mask, mask, offsets, alpha
        )
        dcl += tl.sum(g * x_hat, axis=0)
        dcd += tl.sum(g * th, axis=0)
        dc0 += tl.sum(g, axis=0)
        dalpha += tl.sum(g * cd[None, :] * (1.0 - th * th) * x, axis=1)
    # Gate backward: the two mixing weights, then the (Gumbel-)softmax down to the logits.
    soft_dyt = tl.load(gate_ptr + sample * 4)
    soft_ln = tl.load(gate_ptr + sample * 4 + 1)
    dyt_w = tl.load(dyt_w_ptr + cols, mask=col_mask, other=0.0)
    dyt_b = tl.load(dyt_b_ptr + cols, mask=col_mask, other=0.0)
    ln_w = tl.load(ln_w_ptr + cols, mask=col_mask, other=0.0)
    ln_b = tl.load(ln_b_ptr + cols, mask=col_mask, other=0.0)
    d_dyt = tl.sum(dcd * dyt_w + dc0 * dyt_b, axis=0)
    d_ln = tl.sum(dcl * ln_w + dc0 * ln_b, axis=0)
    soft_dot = soft_dyt * d_dyt + soft_ln * d_ln
    dlogit_dyt = soft_dyt * (d_dyt - soft_dot) * inv_tau
    dlogit_ln = soft_ln * (d_ln - soft_dot) * inv_tau
    # This sample's row of partial (B, P): d ln_w, d dyt_w, d dyt_b, d ln_b (D each), dalpha, then the
    # selector's dpre (H) and dlogits (2), which also feed its weight-gradient matmuls.
    partial = partial_ptr + sample * partial_width
    tl.store(partial + cols, w_ln * dcl, mask=col_mask)
    tl.store(partial + dim + cols, w_dyt * dcd, mask=col_mask)
    tl.store(partial + 2 * dim + cols, w_dyt * dc0, mask=col_mask)
    tl.store(partial + 3 * dim + cols, w_ln * dc0, mask=col_mask)
    tl.store(partial + 4 * dim, tl.sum(dalpha, axis=0))
    tl.store(partial + 4 * dim + 1 + width, dlogit_dyt)
    tl.store(partial + 4 * dim + 2 + width, dlogit_ln)
    # Selector backward, down to dpool: the gradient each token receives through the token mean.
    dpool = tl.zeros([BLOCK_D], dtype=tl.float32)
    for h_start in range(0, width, BLOCK_H):
        units = h_start + tl.arange(0, BLOCK_H)
        unit_mask = units < width
        pre = tl.load(pre_ptr + sample * width + units, mask=unit_mask, other=0.0)
        dgelu = 0.5 * (1.0 + _erf(pre * INV_SQRT2)) + pre * tl.exp(-0.5 * pre * pre) * INV_SQRT_2PI
        w2_dyt = tl.load(w2_ptr + units, mask=unit_mask, other=0.0)
        w2_ln = tl.load(w2_ptr + width + units, mask=unit_mask, other=0.0)
        dpre = tl.where(unit_mask, (dlogit_dyt * w2_dyt + dlogit_ln * w2_ln) * dgelu, 0.0)
        tl.store(partial + 4 * dim + 1 + units, dpre, mask=unit_mask)
        w1 = tl.load(
            w1_ptr + units[:, None] * dim + cols[None, :],
            mask=unit_mask[:, None] & col_mask[None, :],
            other=0.0,
        )
        dpool += tl.sum(w1 * dpre[:, None], axis=0)
    if not HAS_TOKEN_WEIGHTS:
        dpool = dpool / tokens
    # Pass 2: dx = the LayerNorm and DyT terms of each row + its token's share of dpool.
    cl = w_ln * tl.load(ln_w_ptr + cols, mask=col_mask, other=0.0)
    for start in range(0, tokens, BLOCK_T):
        rows, row_mask, mask, offsets = _row_tile(sample, start, tokens, dim, cols, col_mask, BLOCK_T)
        g, x, rstd, x_hat, th = _backward_tile(
            grad_ptr, x_ptr, mean_ptr, rstd_ptr, rows, row_mask, mask, offsets, alpha
        )
        g_ln = g * cl[None, :]
        mean_g = tl.sum(g_ln, axis=1) / dim  # (BLOCK_T,)
        mean_g_xhat = tl.sum(g_ln * x_hat, axis=1) / dim
        dx = rstd[:, None] * (g_ln - mean_g[:, None] - x_hat * mean_g_xhat[:, None])
        dx += alpha * g * cd[None, :] * (1.0 - th * th)
        if HAS_TOKEN_WEIGHTS:
            dx += tl.load(tw_ptr + rows, mask=row_mask, other=0.0)[:, None] * dpool[None, :]
        else:
            dx += dpool[None, :]
        tl.store(dx_ptr + offsets, dx.to(dx_ptr.dtype.element_ty), mask=mask)


def _blocks(tokens: int, dim: int, width: int, tile_elements: int) -> tuple[int, int, int, int]:
    """(BLOCK_T, BLOCK_D, BLOCK_H, num_warps): whole rows per tile, about `tile_elements` values a row
    tile and SELECTOR_TILE_ELEMENTS a tile of fc1."""
    block_d = triton.next_power_of_2(dim)
    block_t = max(1, min(triton.next_power_of_2(tokens), tile_elements // block_d))
    block_h = max(1, min(triton.next_power_of_2(width), SELECTOR_TILE_ELEMENTS // block_d))
    num_warps = min(16, max(4, block_t * block_d // 1024))
    return block_t, block_d, block_h, num_warps


def _samples_per_copy(batch: int, alpha: torch.Tensor) -> int:
    """Samples that share one copy of the parameters: all of them, or batch / V for V stacked copies
    (the vmap rules below pass each parameter as (V, ...), alpha as (V,))."""
    return batch // alpha.numel()


def _dummy(x: torch.Tensor) -> torch.Tensor:
    """A stand-in for an absent optional input: the kernels never read it (its flag is off)."""
    return x.new_empty(1, dtype=torch.float32)


def _forward_kernels(
    x: torch.Tensor,
    alpha: torch.Tensor,
    dyt_w: torch.Tensor,
    dyt_b: torch.Tensor,
    ln_w: torch.Tensor,
    ln_b: torch.Tensor,
    w1: torch.Tensor,
    b1: torch.Tensor,
    w2: torch.Tensor,
    b2: torch.Tensor,
    exp_noise: torch.Tensor | None,
    token_weights: torch.Tensor | None,
    tau: float,
    hard: bool,
    eps: float,
) -> tuple[
    torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor
]:  # fmt: skip  # spelled out: the operator schema is inferred from it
    """-> y (B, T, D) float32, probs (B, 2), and the saved state: mean, rstd (B, T), pooled (B, D),
    pre and hidden (B, H), gate (B, 4) = soft[2], weights[2]."""
    batch, tokens, dim = x.shape
    width = w1.shape[-2]  # fc1 is (H, D), or (V, H, D) for V stacked copies

    def buffer(*shape: int) -> torch.Tensor:
        return torch.empty(shape, dtype=torch.float32, device=x.device)

    y, probs = buffer(batch, tokens, dim), buffer(batch, 2)
    mean, rstd = buffer(batch, tokens), buffer(batch, tokens)
    pooled, pre, hidden = buffer(batch, dim), buffer(batch, width), buffer(batch, width)
    gate = buffer(batch, GATE_WIDTH)
    block_t, block_d, block_h, num_warps = _blocks(tokens, dim, width, FORWARD_TILE_ELEMENTS)
    wrap_triton(_autonorm_forward_kernel)[(batch,)](
        x, alpha, dyt_w, dyt_b, ln_w, ln_b, w1, b1, w2, b2,
        _dummy(x) if exp_noise is None else exp_noise, _dummy(x) if token_weights is None else token_weights,
        y, mean, rstd, pooled, pre, hidden, gate, probs,
        tokens, dim, width, _samples_per_copy(batch, alpha), tau, eps,
        HAS_NOISE=exp_noise is not None, HAS_TOKEN_WEIGHTS=token_weights is not None,
        HARD=hard and exp_noise is not None,
        BLOCK_T=block_t, BLOCK_D=block_d, BLOCK_H=block_h, num_warps=num_warps,
    )  # fmt: skip
    return y, probs, mean, rstd, pooled, pre, hidden, gate


def _backward_kernels(
    grad: torch.Tensor,
    x: torch.Tensor,
    alpha: torch.Tensor,
    dyt_w: torch.Tensor,
    dyt_b: torch.Tensor,
    ln_w: torch.Tensor,
    ln_b: torch.Tensor,
    w1: torch.Tensor,
    w2: torch.Tensor,
    mean: torch.Tensor,
    rstd: torch.Tensor,
    pre: torch.Tensor,
    gate: torch.Tensor,
    token_weights: torch.Tensor | None,
    inv_tau: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """-> dx (B, T, D) in x's dtype and the float32 per-sample partials (B, 4D + 1 + H + 2)."""
    grad = grad.contiguous()
    batch, tokens, dim = x.shape
    width = w1.shape[-2]  # fc1 is (H, D), or (V, H, D) for V stacked copies
    partial_width = 4 * dim + 1 + width + 2
    dx = torch.empty_like(x)
    partial = torch.empty(batch, partial_width, dtype=torch.float32, device=x.device)
    block_t, block_d, block_h, num_warps = _blocks(tokens, dim, width, BACKWARD_TILE_ELEMENTS)
    wrap_triton(_autonorm_backward_kernel)[(batch,)](
        grad, x, alpha, dyt_w, dyt_b, ln_w, ln_b, w1, w2, mean, rstd, pre, gate,
        _dummy(x) if token_weights is None else token_weights, dx, partial,
        tokens, dim, width, _samples_per_copy(batch, alpha), partial_width, inv_tau,
        HAS_TOKEN_WEIGHTS=token_weights is not None,
        BLOCK_T=block_t, BLOCK_D=block_d, BLOCK_H=block_h, num_warps=num_warps,
    )  # fmt: skip
    return dx, partial


_forward_op = triton_op("normlab::autonorm_forward", mutates_args=())(_forward_kernels)
_backward_op = triton_op("normlab::autonorm_backward", mutates_args=())(_backward_kernels)


# Plain eager calls launch the kernels without the operator dispatch; torch.compile traces the ops and vmap
# batches them through the rules below: the mixed norm's rule.
_direct_launch = _direct_launch_applies


def _run_forward(*args: object) -> tuple[torch.Tensor, ...]:
    if _direct_launch():
        with set_wrap_triton_enabled(False):
            return _forward_kernels(*args)  # type: ignore[arg-type]
    return _forward_op(*args)


def _run_backward(*args: object) -> tuple[torch.Tensor, torch.Tensor]:
    if _direct_launch():
        with set_wrap_triton_enabled(False):
            return _backward_kernels(*args)  # type: ignore[arg-type]
    return _backward_op(*args)


def _stacked(batch_size: int, in_dims: tuple[int | None, ...], tensors: tuple) -> list:  # type: ignore[type-arg]
    """Under vmap: each tensor (V, ...) with its vmapped dim first (unbatched ones expanded); None stays."""
    present = [(i, t) for i, t in enumerate(tensors) if t is not None]
    moved = _vmapped_first(batch_size, tuple(in_dims[i] for i, _ in present), tuple(t for _, t in present))
    result: list = list(tensors)  # type: ignore[type-arg]
    for (i, _), t in zip(present, moved, strict=True):
        result[i] = t
    return result


def _folded(t: torch.Tensor | None) -> torch.Tensor | None:
    """(V, B, ...) -> contiguous (V * B, ...): every copy's samples in one launch."""
    return None if t is None else _fold(t).contiguous()


@_forward_op.register_vmap
def _forward_vmap(info, in_dims, *args):  # type: ignore[no-untyped-def]
    # x (V, B, T, D) -> (V * B, T, D); the parameters stay (V, ...), read per copy (`_samples_per_copy`).
    tensors = _stacked(info.batch_size, in_dims[:12], args[:12])
    x, params, noise, weights = tensors[0], tensors[1:10], tensors[10], tensors[11]
    outputs = _forward_op(
        _folded(x), *(p.contiguous() for p in params), _folded(noise), _folded(weights), *args[12:]
    )
    return tuple(_unfold(info.batch_size, t) for t in outputs), (0,) * len(outputs)


@_backward_op.register_vmap
def _backward_vmap(info, in_dims, *args):  # type: ignore[no-untyped-def]
    # args: grad, x, the seven parameters the backward reads, mean, rstd, pre, gate, token_weights, inv_tau
    tensors = _stacked(info.batch_size, in_dims[:14], args[:14])
    per_sample = [_folded(t) for t in tensors[:2]], [_folded(t) for t in tensors[9:14]]
    params = [p.contiguous() for p in tensors[2:9]]
    outputs = _backward_op(*per_sample[0], *params, *per_sample[1], args[14])
    return tuple(_unfold(info.batch_size, t) for t in outputs), (0, 0)


class _AutoNormTritonFunction(torch.autograd.Function):
    # Under vmap (stacked seeds) functorch runs forward and backward on batched tensors, and the ops'
    # vmap rules fold the copies into the samples of one launch.
    generate_vmap_rule = True

    @staticmethod
    def forward(  # type: ignore[override]
        x, alpha, dyt_w, dyt_b, ln_w, ln_b, w1, b1, w2, b2, exp_noise, token_weights,
        tau: float, hard: bool, eps: float,
    ):  # type: ignore[no-untyped-def]  # fmt: skip
        # -> y, probs, then the state the backward reads: mean, rstd, pooled, pre, hidden, gate
        return _run_forward(
            x, alpha, dyt_w, dyt_b, ln_w, ln_b, w1, b1, w2, b2, exp_noise, token_weights, tau, hard, eps
        )

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:  # type: ignore[no-untyped-def]
        x, alpha, dyt_w, dyt_b, ln_w, ln_b, w1, _b1, w2, _b2, exp_noise, token_weights, tau = inputs[:13]
        _y, probs, mean, rstd, pooled, pre, hidden, gate = output
        # token_weights (or None) rides along undifferentiated: a constant of the mask.
        ctx.save_for_backward(
            x, alpha, dyt_w, dyt_b, ln_w, ln_b, w1, w2, mean, rstd, pooled, pre, hidden, gate, token_weights
        )
        ctx.inv_tau = 1.0 if exp_noise is None else 1.0 / tau  # eval differentiates the plain softmax
        ctx.mark_non_differentiable(probs, mean, rstd, pooled, pre, hidden, gate)
        ctx.set_materialize_grads(False)  # only y ever has a gradient: no zeros to allocate for the rest

    @staticmethod
    def backward(ctx, grad, *_state_grads):  # type: ignore[no-untyped-def,override]
        if grad is None:  # only reachable with materialize_grads off: nothing flowed into y
            return (None,) * 15
        saved = ctx.saved_tensors
        # kernel_inputs: x, alpha, dyt_w, dyt_b, ln_w, ln_b, w1, w2, mean, rstd, as the backward kernel takes them
        *kernel_inputs, pooled, pre, hidden, gate, token_weights = saved
        x, alpha, w1 = kernel_inputs[0], kernel_inputs[1], kernel_inputs[6]
        # Detached inputs: the ops have no autograd formula of their own for the engine to look for.
        dx, partial = _run_backward(
            grad.detach(), *(t.detach() for t in kernel_inputs), pre.detach(), gate.detach(),
            None if token_weights is None else token_weights.detach(), ctx.inv_tau,
        )  # fmt: skip
        if torch.is_grad_enabled():
            anchors = [t for t in saved if t is not None]
            dx, partial = _RefuseDoubleBackward.apply(dx, partial, grad, *anchors)
        dim, width = x.shape[-1], w1.shape[-2]
        needs = ctx.needs_input_grad
        totals = partial.sum(dim=0)  # (P,)
        d_ln_w, d_dyt_w, d_dyt_b, d_ln_b = totals[: 4 * dim].view(4, dim).unbind(0)
        d_alpha = totals[4 * dim].reshape(alpha.shape)
        d_b1, d_b2 = totals[4 * dim + 1 : 4 * dim + 1 + width], totals[4 * dim + 1 + width :]
        # A frozen selector (GateFreezer) asks for no gradient: its two matmuls are skipped.
        d_w1 = partial[:, 4 * dim + 1 : 4 * dim + 1 + width].t() @ pooled if needs[6] else None  # (H, D)
        d_w2 = partial[:, 4 * dim + 1 + width :].t() @ hidden if needs[8] else None  # (2, H)
        return (
            dx if needs[0] else None,
            d_alpha if needs[1] else None,
            d_dyt_w if needs[2] else None,
            d_dyt_b if needs[3] else None,
            d_ln_w if needs[4] else None,
            d_ln_b if needs[5] else None,
            d_w1,
            d_b1 if needs[7] else None,
            d_w2,
            d_b2 if needs[9] else None,
            None, None, None, None, None,
        )  # fmt: skip


# Function.apply's Python wrapper binds default arguments and checks for torch.func transforms (tens of
# microseconds a call); plain eager calls, which need neither, go straight to the C entry point.
_apply_directly = super(torch.autograd.Function, _AutoNormTritonFunction).apply


def autonorm_triton_applies(xs: torch.Tensor, params: tuple[torch.Tensor, ...]) -> bool:
    """Whether the kernels take this layer call: xs (B, T, D) in a supported dtype with rows of at most
    MAX_DIM and float32 parameters. (The device is the caller's call.)"""
    if xs.dim() != 3 or xs.shape[-1] > MAX_DIM or xs.dtype not in SUPPORTED_DTYPES:
        return False
    return all_float32(params)


def autonorm_triton(
    xs: torch.Tensor,
    params: tuple[torch.Tensor, ...],
    training: bool,
    tau: float,
    hard: bool,
    eps: float,
    token_weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """AutoNorm on xs (B, T, D) -> (y (B, T, D) float32, noise-free probs (B, 2)); call only where
    `autonorm_triton_applies`. params and token_weights as `autonorm_fused` takes them."""
    # One standard exponential draw per logit, shaped as F.gumbel_softmax draws it on the eager path, so
    # a seeded run consumes the generator the same way on both paths.
    # Shaped after xs itself, so that under vmap the draw is batched: one per stacked copy.
    exp_noise = None
    if training:
        exp_noise = torch.empty_like(xs[:, 0, :1], dtype=torch.float32).expand(-1, 2).contiguous()
        exp_noise.exponential_()
    contiguous = [p.contiguous() for p in params]
    apply = _apply_directly if _direct_launch() else _AutoNormTritonFunction.apply
    y, probs, *_state = apply(
        xs.contiguous(), *contiguous, exp_noise, checked_token_weights(token_weights, xs),
        float(tau), bool(hard), float(eps),
    )  # fmt: skip
    return y, probs
