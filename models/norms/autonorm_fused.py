"""The whole AutoNorm layer as ONE autograd node and ONE C call each way on CPU float32 (the default
path there).

Eager AutoNorm is ~25 small autograd nodes around the (B, T, D) work, and even a hand-written
backward in torch ops is ~40 small ops; at ~10 us each their dispatch alone costs about one LayerNorm.
Here the token mean, the selector MLP (forward and backward), the (Gumbel-)softmax gate, the folding of
gate and affine parameters and the mixed norm all run inside `autonorm_forward` / `autonorm_backward`
(kernels/mixed_norm_cpu.c), which visit each sample's rows while they are in L2. Python only allocates
the outputs and draws the Gumbel noise with torch's generator, so `torch.manual_seed` reproduces a run
exactly as on the eager path. `AutoNorm` dispatches here only when `mixed._fast_path_applies`; the eager
module path defines the semantics and tests check the two agree. Padded batches stay on this path: the
token mean then takes per-token weights (`mixed.token_weights`, 0 on pads) instead of 1 / T.
"""

from __future__ import annotations

import ctypes
import threading

import torch
from torch.autograd.function import once_differentiable

from models.norms._kernel_loader import load_mixed_norm_library
from models.norms.mixed import checked_token_weights

__all__ = ["autonorm_fused"]

_SELECTOR_INPUTS = slice(6, 10)  # w1, b1, w2, b2 in the argument order of _AutoNormFunction.forward
_scratch = threading.local()
_widths: dict[tuple[int, int, int], tuple[int, int]] = {}


def _state_and_work_widths(lib: ctypes.CDLL, tokens: int, dim: int, hidden: int) -> tuple[int, int]:
    """Per-sample widths of the saved state and the backward scratch, asked from C once per shape."""
    key = (tokens, dim, hidden)
    widths = _widths.get(key)
    if widths is None:
        widths = _widths[key] = (
            lib.autonorm_state_width(tokens, dim, hidden),
            lib.autonorm_work_width(tokens, dim, hidden),
        )
    return widths


def _work_buffer(numel: int) -> torch.Tensor:
    """Per-thread scratch for the backward's per-sample gradients; it never leaves the C call, so it is
    reused instead of allocated each step (a fresh ~300 KB buffer per step perturbs glibc's heap enough
    to make the big (B, T, D) outputs page-fault again)."""
    buffer = getattr(_scratch, "work", None)
    if buffer is None or buffer.numel() < numel:
        buffer = _scratch.work = torch.empty(numel)
    return buffer


class _AutoNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(  # type: ignore[override]
        ctx, x, alpha, dyt_w, dyt_b, ln_w, ln_b, w1, b1, w2, b2, exp_noise, token_weights,
        tau: float, hard: bool, eps: float,
    ):  # type: ignore[no-untyped-def]  # fmt: skip
        lib = load_mixed_norm_library()
        assert lib is not None
        batch, tokens, dim = x.shape
        hidden = w1.shape[0]
        y = torch.empty_like(x)  # (B, T, D)
        # Per-sample mean, rstd, pooled input, MLP activations and gate: see the C layout comment.
        state = torch.empty(batch, _state_and_work_widths(lib, tokens, dim, hidden)[0])
        probs = torch.empty(batch, 2)  # noise-free, what gate_summary reads
        # Read the float32 scalar straight from memory: float(alpha) is a dispatcher call (.item()), which
        # costs ~15 us right after the previous layer's kernel has evicted torch's code from the caches.
        alpha_value = ctypes.c_float.from_address(alpha.data_ptr()).value
        lib.autonorm_forward(
            x.data_ptr(), alpha_value, dyt_w.data_ptr(), dyt_b.data_ptr(), ln_w.data_ptr(), ln_b.data_ptr(),
            w1.data_ptr(), b1.data_ptr(), w2.data_ptr(), b2.data_ptr(),
            None if exp_noise is None else exp_noise.data_ptr(),
            None if token_weights is None else token_weights.data_ptr(), tau, int(hard), eps,
            batch, tokens, dim, hidden, torch.get_num_threads(), y.data_ptr(), state.data_ptr(), probs.data_ptr(),
        )  # fmt: skip
        ctx.save_for_backward(x, state, dyt_w, dyt_b, ln_w, ln_b, w1, w2, token_weights)
        ctx.alpha_value, ctx.alpha_shape = alpha_value, alpha.shape
        ctx.tau = 1.0 if exp_noise is None else tau  # eval differentiates the plain softmax
        ctx.mark_non_differentiable(probs)
        ctx.set_materialize_grads(False)  # probs never has a gradient: no zeros (B, 2) to allocate for it
        return y, probs

    @staticmethod
    def backward(ctx, grad, _grad_probs):  # type: ignore[no-untyped-def,override]
        # Backward runs with grad mode off unless someone asked for create_graph; only then does the
        # once_differentiable wrapper (which makes a double backward fail loudly) have work to do.
        if torch.is_grad_enabled():
            return _backward_refusing_double_backward(ctx, grad)
        return _backward(ctx, grad)


def _backward(ctx, grad):  # type: ignore[no-untyped-def]
    """Gradients of x and the nine parameters of `_AutoNormFunction.forward` (None for the rest)."""
    if grad is None:  # only reachable with materialize_grads off: nothing flowed into y
        return (None,) * 15
    lib = load_mixed_norm_library()
    assert lib is not None
    x, state, dyt_w, dyt_b, ln_w, ln_b, w1, w2, token_weights = ctx.saved_tensors
    grad = grad.contiguous()
    batch, tokens, dim = x.shape
    hidden = w1.shape[0]
    dx = torch.empty_like(x)
    work = _work_buffer(batch * _state_and_work_widths(lib, tokens, dim, hidden)[1])
    d_alpha = torch.empty(ctx.alpha_shape)
    d_dyt_w, d_dyt_b, d_ln_w, d_ln_b = (torch.empty(dim) for _ in range(4))
    # A frozen selector (GateFreezer) gets no gradient, so the kernel skips those reductions; the
    # gate's path to x is still differentiated, as on the eager path.
    d_w1: torch.Tensor | None
    d_b1: torch.Tensor | None
    d_w2: torch.Tensor | None
    d_b2: torch.Tensor | None
    selector_ptrs: tuple[int | None, ...]
    if any(ctx.needs_input_grad[_SELECTOR_INPUTS]):
        d_w1, d_b1, d_w2, d_b2 = (
            torch.empty(hidden, dim),
            torch.empty(hidden),
            torch.empty(2, hidden),
            torch.empty(2),
        )
        selector_ptrs = (d_w1.data_ptr(), d_b1.data_ptr(), d_w2.data_ptr(), d_b2.data_ptr())
    else:
        d_w1 = d_b1 = d_w2 = d_b2 = None
        selector_ptrs = (None, None, None, None)
    lib.autonorm_backward(
        grad.data_ptr(), x.data_ptr(), ctx.alpha_value, dyt_w.data_ptr(), dyt_b.data_ptr(),
        ln_w.data_ptr(), ln_b.data_ptr(), w1.data_ptr(), w2.data_ptr(), state.data_ptr(),
        None if token_weights is None else token_weights.data_ptr(), ctx.tau,
        int(d_w1 is not None), batch, tokens, dim, hidden, torch.get_num_threads(),
        dx.data_ptr(), work.data_ptr(), d_alpha.data_ptr(), d_dyt_w.data_ptr(), d_dyt_b.data_ptr(),
        d_ln_w.data_ptr(), d_ln_b.data_ptr(), *selector_ptrs,
    )  # fmt: skip
    return dx, d_alpha, d_dyt_w, d_dyt_b, d_ln_w, d_ln_b, d_w1, d_b1, d_w2, d_b2, None, None, None, None, None


_backward_refusing_double_backward = once_differentiable(_backward)


# Function.apply's Python wrapper only adds functorch bookkeeping (~10 us a call); `_fast_path_applies`
# already sends every functorch transform to the eager path, so the fused path calls the C entry point.
_apply = super(torch.autograd.Function, _AutoNormFunction).apply


def autonorm_fused(
    xs: torch.Tensor,
    params: tuple[torch.Tensor, ...],
    training: bool,
    tau: float,
    hard: bool,
    eps: float,
    token_weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """AutoNorm on xs (B, T, D) float32 CPU -> (y (B, T, D), noise-free probs (B, 2)).

    params: float32 (dyt_alpha, dyt_weight, dyt_bias, ln_weight, ln_bias, fc1.weight, fc1.bias,
    fc2.weight, fc2.bias) as `AutoNorm.kernel_parameters` lists them. token_weights: None for the plain
    token mean, else contiguous float32 (B, T) pooling weights (`mixed.token_weights` of the mask). The
    kernel only runs C, so autocast has nothing to cast here: the gate is float32 whatever autocast is
    active.
    """
    # Training: a standard exponential draw E per logit; the kernel turns it into Gumbel noise -log(E),
    # consuming torch's generator exactly as torch.nn.functional.gumbel_softmax does.
    exp_noise = torch.empty(xs.shape[0], 2).exponential_() if training else None
    token_weights = checked_token_weights(token_weights, xs)
    alpha, dyt_w, dyt_b, ln_w, ln_b, w1, b1, w2, b2 = params
    return _apply(
        xs.contiguous(), alpha, dyt_w.contiguous(), dyt_b.contiguous(), ln_w.contiguous(), ln_b.contiguous(),
        w1.contiguous(), b1.contiguous(), w2.contiguous(), b2.contiguous(), exp_noise, token_weights,
        tau, hard, eps,
    )  # fmt: skip
