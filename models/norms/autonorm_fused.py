"""The whole AutoNorm layer as ONE autograd node on CPU float32 (the default path there).

Eager AutoNorm is ~25 small autograd nodes around the (B, T, D) work; their dispatch overhead alone
costs about one LayerNorm. Here the selector MLP, the Gumbel-Softmax gate and the folding of gate and
affine parameters run inside one Function with a hand-written backward, and the (B, T, D) work is the
fused mixed-norm kernel plus two cheap passes (token mean forward, its broadcast gradient backward).
`AutoNorm` dispatches here only when `mixed._fast_path_applies`; the eager module path defines the
semantics and tests check the two agree.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from models.norms._kernel_loader import load_mixed_norm_library
from models.norms.mixed import _ptr

__all__ = ["autonorm_fused"]

_INV_SQRT2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def _gelu_grad(z: torch.Tensor) -> torch.Tensor:
    return 0.5 * (1.0 + torch.erf(z * _INV_SQRT2)) + z * torch.exp(-0.5 * z * z) * _INV_SQRT_2PI


class _AutoNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(  # type: ignore[override]
        ctx, x, alpha, dyt_w, dyt_b, ln_w, ln_b, w1, b1, w2, b2, noise, tau: float, hard: bool, eps: float
    ):  # type: ignore[no-untyped-def]
        lib = load_mixed_norm_library()
        assert lib is not None
        x = x.contiguous()
        batch, tokens, dim = x.shape
        threads = torch.get_num_threads()
        pooled = torch.empty(batch, dim)  # (B, D)
        lib.token_mean_forward(_ptr(x), batch, tokens, dim, threads, _ptr(pooled))
        pre = torch.addmm(b1, pooled, w1.t())  # (B, H)
        hidden = F.gelu(pre)
        logits = torch.addmm(b2, hidden, w2.t())  # (B, 2)
        probs = logits.softmax(dim=-1)
        if noise is None:
            soft = probs  # eval: noise-free
            weights = probs
        else:
            soft = ((logits + noise) / tau).softmax(dim=-1)
            # Straight-through: forward uses the one-hot sample, backward the soft sample's gradient.
            weights = F.one_hot(soft.argmax(-1), 2).to(soft.dtype) if hard else soft
        w_dyt, w_ln = weights[:, :1], weights[:, 1:]  # (B, 1) each
        cl = (w_ln * ln_w).contiguous()  # (B, D)
        cd = (w_dyt * dyt_w).contiguous()
        c0 = (w_dyt * dyt_b + w_ln * ln_b).contiguous()
        y = torch.empty_like(x)
        mean = torch.empty(batch, tokens)
        rstd = torch.empty(batch, tokens)
        alpha_value = float(alpha)
        lib.mixed_norm_forward(
            _ptr(x), _ptr(cl), _ptr(cd), _ptr(c0), alpha_value, float(eps), 1,
            batch, tokens, dim, threads, _ptr(y), _ptr(mean), _ptr(rstd),
        )  # fmt: skip
        ctx.save_for_backward(
            x, mean, rstd, cl, cd, weights, soft, pooled, pre, hidden, dyt_w, dyt_b, ln_w, ln_b, w1, w2
        )
        ctx.alpha_value, ctx.alpha_shape = alpha_value, alpha.shape
        ctx.tau = 1.0 if noise is None else tau
        ctx.mark_non_differentiable(probs)
        return y, probs

    @staticmethod
    def backward(ctx, grad, _grad_probs):  # type: ignore[no-untyped-def,override]
        lib = load_mixed_norm_library()
        assert lib is not None
        (x, mean, rstd, cl, cd, weights, soft, pooled, pre, hidden, dyt_w, dyt_b, ln_w, ln_b, w1, w2) = (
            ctx.saved_tensors
        )
        grad = grad.contiguous()
        batch, tokens, dim = x.shape
        threads = torch.get_num_threads()
        dx = torch.empty_like(x)
        dcl, dcd, dc0 = (torch.empty(batch, dim) for _ in range(3))
        dalpha = torch.empty(batch)
        lib.mixed_norm_backward(
            _ptr(grad), _ptr(x), _ptr(mean), _ptr(rstd), _ptr(cl), _ptr(cd), ctx.alpha_value, 1,
            batch, tokens, dim, threads, _ptr(dx), _ptr(dcl), _ptr(dcd), _ptr(dc0), _ptr(dalpha),
        )  # fmt: skip
        w_dyt, w_ln = weights[:, :1], weights[:, 1:]
        d_ln_w = (w_ln * dcl).sum(0)
        d_ln_b = (w_ln * dc0).sum(0)
        d_dyt_w = (w_dyt * dcd).sum(0)
        d_dyt_b = (w_dyt * dc0).sum(0)
        # Gradient w.r.t. the two gate weights, then through the (Gumbel-)softmax.
        d_weights = torch.stack([dcd @ dyt_w + dc0 @ dyt_b, dcl @ ln_w + dc0 @ ln_b], dim=1)  # (B, 2)
        d_logits = soft * (d_weights - (soft * d_weights).sum(-1, keepdim=True)) / ctx.tau
        d_w2 = d_logits.t() @ hidden
        d_b2 = d_logits.sum(0)
        d_pre = (d_logits @ w2) * _gelu_grad(pre)  # (B, H)
        d_w1 = d_pre.t() @ pooled
        d_b1 = d_pre.sum(0)
        d_pooled = (d_pre @ w1) / tokens  # (B, D): every token gets 1/T of the pooled gradient
        lib.add_token_broadcast(_ptr(dx), _ptr(d_pooled.contiguous()), batch, tokens, dim, threads)
        d_alpha = dalpha.sum().reshape(ctx.alpha_shape)
        return dx, d_alpha, d_dyt_w, d_dyt_b, d_ln_w, d_ln_b, d_w1, d_b1, d_w2, d_b2, None, None, None, None


def autonorm_fused(norm: torch.nn.Module, xs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """AutoNorm forward of `norm` on xs (B, T, D) float32 CPU -> (y (B, T, D), noise-free probs (B, 2))."""
    selector = norm.selector
    noise = None
    if norm.training:
        # Gumbel(0, 1) noise, as torch.nn.functional.gumbel_softmax draws it.
        noise = -torch.empty(xs.shape[0], 2).exponential_().log()
    with torch.autocast(device_type="cpu", enabled=False):
        return _AutoNormFunction.apply(
            xs, norm.dyt_alpha, norm.dyt_weight, norm.dyt_bias, norm.ln_weight, norm.ln_bias,
            selector.fc1.weight, selector.fc1.bias, selector.fc2.weight, selector.fc2.bias,
            noise, norm.tau, norm.hard, norm.eps,
        )  # fmt: skip
