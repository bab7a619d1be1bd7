"""The one computation behind AutoNorm, Random Selector, DyT and FiLM: a per-sample mixture of
DyT and affine-free LayerNorm,

    y[b, t, :] = cl[b] * LN0(x[b, t]) + cd[b] * tanh(alpha * x[b, t]) + c0[b]

with cl, cd, c0 of shape (B, D) (gate weights times per-channel affine parameters, folded on tiny
tensors by the caller). On CPU float32 this runs as one fused kernel forward and one backward
(`_kernel_loader`); on CUDA in float32, bfloat16 or float16 it runs as Triton kernels (`mixed_triton`,
where triton is installed and `TRITON_ON_CUDA` is on) wherever their launches are traced or captured
(`_triton_pays_off`); everywhere else (float64, CPU autocast dtypes,
torch.func transforms on CPU) it runs as the eager composite below, which autograd differentiates and
which defines the semantics.

Causal conditioning (the language-model encoder) makes the coefficients per token, cl[b, t] etc. of
shape (B, T, D), computed from `causal_token_mean`; those always take the eager composite.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
from collections.abc import Mapping, Sequence

import torch
import torch.nn.functional as F

from models.norms._kernel_loader import load_mixed_norm_library

__all__ = [
    "as_samples",
    "causal_token_mean",
    "mixed_norm",
    "mixed_norm_reference",
    "sample_token_mask",
    "token_mean",
    "token_weights",
]


def as_samples(x: torch.Tensor) -> torch.Tensor:
    """View any (..., D) input as (B, T, D): leading dims are samples, dim -2 are the tokens.

    A 2-D input (N, D) is N samples of one token each, so gates are per row.
    """
    if x.dim() == 3:
        return x
    if x.dim() > 3:
        return x.reshape(-1, x.shape[-2], x.shape[-1])
    return x.reshape(-1, 1, x.shape[-1])


class _TokenMean(torch.autograd.Function):
    """x.mean(-2) whose backward returns a stride-0 broadcast instead of a dense (B, T, D) tensor:
    the autograd engine then adds it straight into the fused kernel's dx (one pass instead of three)."""

    @staticmethod
    def forward(x: torch.Tensor) -> torch.Tensor:
        return x.mean(dim=-2)

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:  # type: ignore[no-untyped-def]
        (x,) = inputs
        ctx.shape = x.shape

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        tokens = ctx.shape[-2]
        return (grad / tokens).unsqueeze(-2).expand(ctx.shape)


def sample_token_mask(token_mask: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """The (B, T) bool mask of `as_samples(x)` for a mask shaped like x without its last dim."""
    if token_mask.shape != x.shape[:-1]:
        raise ValueError(
            f"token_mask shape {tuple(token_mask.shape)} must be the input shape without its last dim, "
            f"{tuple(x.shape[:-1])}"
        )
    xs_shape = as_samples(x).shape
    return token_mask.reshape(xs_shape[0], xs_shape[1]).to(dtype=torch.bool, device=x.device)


def token_weights(token_mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """(B, T) bool -> (B, T) weights 1 / n_real on real tokens, 0 on pads; a sample with no real token
    gets all zeros, so it pools to the zero vector (as the encoder's masked mean pooling does)."""
    weights = token_mask.to(dtype)
    return weights / weights.sum(dim=-1, keepdim=True).clamp_min(1.0)


def checked_token_weights(token_weights: torch.Tensor | None, x: torch.Tensor) -> torch.Tensor | None:
    """Pooling weights as the one-call AutoNorm kernels read them: contiguous float32 (B, T) for x (B, T, D),
    or None. They read B * T floats through a raw pointer, so a wrong shape or dtype is refused here."""
    if token_weights is None:
        return None
    if token_weights.shape != x.shape[:2] or token_weights.dtype != torch.float32:
        raise ValueError(
            f"token_weights must be float32 {tuple(x.shape[:2])}, got "
            f"{token_weights.dtype} {tuple(token_weights.shape)}"
        )
    return token_weights.contiguous()


def all_float32(tensors: Sequence[torch.Tensor]) -> bool:
    float32 = torch.float32
    return all([t.dtype is float32 for t in tensors])


def token_mean(x: torch.Tensor, token_mask: torch.Tensor | None = None) -> torch.Tensor:
    """Mean over tokens, (B, T, D) -> (B, D); with a (B, T) token_mask, over the real tokens only."""
    if token_mask is not None:
        weights = token_weights(token_mask, x.dtype)  # (B, T)
        return torch.bmm(weights.unsqueeze(1), x).squeeze(1)  # (B, D)
    if _fast_path_applies(x):
        return _TokenMean.apply(x)
    return x.mean(dim=-2)


def causal_token_mean(x: torch.Tensor, token_mask: torch.Tensor | None = None) -> torch.Tensor:
    """Prefix mean, (B, T, D) -> (B, T, D): row t is the mean of tokens 0..t (with a (B, T) token_mask,
    of the real ones among them), so it never depends on a later token. A prefix without any real token
    pools to the zero vector, as `token_weights` does for an all-pad sample."""
    # Running sums in at least float32: a half-precision cumsum over T tokens drifts.
    acc_dtype = torch.promote_types(x.dtype, torch.float32)
    if token_mask is None:
        weights = torch.ones(x.shape[:-1], dtype=acc_dtype, device=x.device)  # (B, T)
    else:
        weights = token_mask.to(acc_dtype)  # (B, T)
    sums = (x.to(acc_dtype) * weights.unsqueeze(-1)).cumsum(dim=-2)  # (B, T, D)
    counts = weights.cumsum(dim=-1).clamp_min(1.0).unsqueeze(-1)  # (B, T, 1)
    return (sums / counts).to(x.dtype)


GPU_KERNEL_MODES = ("auto", "always", "off")


def gpu_kernel_mode(environ: Mapping[str, str]) -> str:
    """NORMLAB_GPU_NORM_KERNELS: "auto" (the default: the Triton kernels where `_triton_pays_off`),
    "always" (plain eager calls too) or "off" (the composite everywhere on CUDA)."""
    mode = environ.get("NORMLAB_GPU_NORM_KERNELS", "auto").strip().lower() or "auto"
    if mode not in GPU_KERNEL_MODES:
        raise ValueError(
            f"NORMLAB_GPU_NORM_KERNELS must be one of {', '.join(GPU_KERNEL_MODES)}; got {mode!r}"
        )
    return mode


_MODE = gpu_kernel_mode(os.environ)
# Module-level switch: False keeps CUDA inputs on the eager composite (the benchmarks compare both).
TRITON_ON_CUDA = _MODE != "off"
# Plain eager CUDA calls take the composite even with TRITON_ON_CUDA on: such a call is host-bound, and
# on an H200 the kernels' launches cost more host time than their fusion saves (fwd+bwd per call: DyT
# 967 vs 595 us, AutoNorm 2322 vs 2270 us; BENCHMARKS.md). Traced by torch.compile or captured in a CUDA
# graph, where host time is gone, the kernels take 0.6-0.7x the composite's device time for DyT and the
# bare mixed norm. True sends plain eager calls to the kernels as well (the benchmarks time both).
TRITON_IN_PLAIN_EAGER = _MODE == "always"
# Looked up without importing triton: CPU-only runs never pay for that import.
_TRITON_INSTALLED = importlib.util.find_spec("triton") is not None


def _traced_or_captured() -> bool:
    """Whether this call's launches are traced (torch.compile) or captured (a CUDA graph), not plain eager."""
    return torch.compiler.is_compiling() or (
        torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()
    )


def _under_torch_func() -> bool:
    """Whether a torch.func transform is active (vmap over stacked seeds, grad, jacrev)."""
    return torch._C._are_functorch_transforms_active()


def _triton_pays_off() -> bool:
    """Whether a CUDA call should launch the Triton kernels: under torch.compile (Inductor launches them),
    while a CUDA graph is being captured, under a torch.func transform (vmap over stacked seeds, where
    the kernels' batching rules fold the seeds into one launch), or everywhere with TRITON_IN_PLAIN_EAGER."""
    return TRITON_IN_PLAIN_EAGER or _traced_or_captured() or _under_torch_func()


def _per_token(coefficient: torch.Tensor) -> torch.Tensor:
    """(B, D) per-sample coefficients broadcast over tokens as (B, 1, D); (B, T, D) ones stay as they are."""
    return coefficient.unsqueeze(1) if coefficient.dim() == 2 else coefficient


def mixed_norm_reference(
    x: torch.Tensor,
    alpha: torch.Tensor,
    cl: torch.Tensor,
    cd: torch.Tensor,
    c0: torch.Tensor,
    eps: float,
    use_ln: bool = True,
) -> torch.Tensor:
    """Eager composite; x (B, T, D), cl/cd/c0 (B, D) or (B, T, D), alpha a scalar tensor -> (B, T, D)."""
    y = torch.tanh(alpha * x) * _per_token(cd) + _per_token(c0)
    if use_ln:
        y = y + F.layer_norm(x, x.shape[-1:], eps=eps) * _per_token(cl)
    return y


def _fast_path_applies(x: torch.Tensor) -> bool:
    if x.device.type != "cpu" or x.dtype != torch.float32:
        return False
    # torch.compile traces the eager composite: the ctypes kernels are opaque to dynamo (graph breaks).
    if torch.compiler.is_compiling():
        return False
    # torch.func transforms (and their wrapped tensors) differentiate the eager composite: the fused
    # Functions define no setup_context / vmap rule.
    if torch._C._are_functorch_transforms_active() or torch._C._functorch.is_functorch_wrapped_tensor(x):
        return False
    return load_mixed_norm_library() is not None


def _ptr(t: torch.Tensor) -> ctypes.c_void_p:
    return ctypes.c_void_p(t.data_ptr())


class _FusedMixedNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, alpha, cl, cd, c0, eps: float, use_ln: bool):  # type: ignore[no-untyped-def,override]
        lib = load_mixed_norm_library()
        assert lib is not None
        x = x.contiguous()
        cl, cd, c0 = (t.detach().float().contiguous() for t in (cl, cd, c0))
        batch, tokens, dim = x.shape
        y = torch.empty_like(x)  # (B, T, D)
        mean = torch.empty(batch, tokens, dtype=x.dtype)  # (B, T)
        rstd = torch.empty(batch, tokens, dtype=x.dtype)  # (B, T)
        alpha_value = float(alpha)
        lib.mixed_norm_forward(
            _ptr(x), _ptr(cl), _ptr(cd), _ptr(c0), alpha_value, float(eps), int(use_ln),
            batch, tokens, dim, torch.get_num_threads(), _ptr(y), _ptr(mean), _ptr(rstd),
        )  # fmt: skip
        ctx.save_for_backward(x, mean, rstd, cl, cd)
        ctx.alpha_value = alpha_value
        ctx.use_ln = use_ln
        ctx.alpha_shape = alpha.shape
        return y

    @staticmethod
    def backward(ctx, grad):  # type: ignore[no-untyped-def,override]
        lib = load_mixed_norm_library()
        assert lib is not None
        x, mean, rstd, cl, cd = ctx.saved_tensors
        grad = grad.contiguous().float()
        batch, tokens, dim = x.shape
        dx = torch.empty_like(x)
        dcl, dcd, dc0 = (torch.empty(batch, dim) for _ in range(3))
        dalpha = torch.empty(batch)
        lib.mixed_norm_backward(
            _ptr(grad), _ptr(x), _ptr(mean), _ptr(rstd), _ptr(cl), _ptr(cd), ctx.alpha_value, int(ctx.use_ln),
            batch, tokens, dim, torch.get_num_threads(), _ptr(dx), _ptr(dcl), _ptr(dcd), _ptr(dc0), _ptr(dalpha),
        )  # fmt: skip
        return dx, dalpha.sum().reshape(ctx.alpha_shape), dcl, dcd, dc0, None, None


def mixed_norm(
    x: torch.Tensor,
    alpha: torch.Tensor,
    cl: torch.Tensor,
    cd: torch.Tensor,
    c0: torch.Tensor,
    eps: float = 1e-5,
    use_ln: bool = True,
) -> torch.Tensor:
    """x (B, T, D); cl, cd, c0 (B, D) or per token (B, T, D); alpha scalar tensor -> (B, T, D).
    Fused on CPU float32 and on CUDA (Triton) for per-sample coefficients."""
    # The kernel reads one coefficient row per sample, so per-token (causal) coefficients take the eager
    # composite.
    per_sample = cl.dim() == 2
    if per_sample and _fast_path_applies(x) and all(t.dtype == torch.float32 for t in (alpha, cl, cd, c0)):
        with torch.autocast(device_type="cpu", enabled=False):
            return _FusedMixedNorm.apply(x, alpha, cl, cd, c0, eps, use_ln)
    if per_sample and TRITON_ON_CUDA and _TRITON_INSTALLED and x.device.type == "cuda" and _triton_pays_off():
        from models.norms.mixed_triton import mixed_norm_triton, triton_path_applies

        if triton_path_applies(x, alpha, cl, cd, c0):
            return mixed_norm_triton(x, alpha, cl, cd, c0, eps, use_ln)
    return mixed_norm_reference(x, alpha, cl, cd, c0, eps, use_ln)
