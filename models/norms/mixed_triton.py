"""The per-sample mixed norm of `models.norms.mixed` as Triton kernels, the path CUDA inputs take:

    y[b, t, :] = cl[b] * LN0(x[b, t]) + cd[b] * tanh(alpha[b] * x[b, t]) + c0[b]

One forward kernel and one backward kernel, each a grid of (sample, token range) programs that walk
their rows in (BLOCK_T, BLOCK_D) tiles with float32 accumulation; x may be float32, bfloat16 or
float16. The backward recomputes LN0 and tanh from x and the saved per-row mean and rstd, and reduces
the (B, D) coefficient gradients and the per-sample alpha gradient into per-program partial sums that
a torch sum finishes: no atomics, so every gradient is bit-for-bit reproducible.

Both launches are also `torch.library.triton_op`s, so torch.compile traces them into its graph (and
CUDA graphs capture them), and each has a vmap rule that folds the vmapped dimension into the sample
dimension. The kernels read alpha as one value or one per sample for that reason: stacked seeds
(torch.func.vmap over models) each carry their own alpha. Plain eager calls launch the kernels without
the operator dispatch, which only costs host time there. The autograd formula is `_MixedNormFunction`,
an autograd.Function with a generated vmap rule, so `torch.func.grad` and `vmap(grad(...))`
differentiate the kernels themselves. Forward-mode AD (jvp) and double backward are not supported;
double backward raises.

Importing this module needs triton; `models.norms.mixed` imports it only for CUDA inputs. Run on CPU
tensors, the kernels work only under Triton's interpreter (TRITON_INTERPRET=1 before this import),
which is how the tests check them on a machine without a GPU.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch._library.triton import set_wrap_triton_enabled
from torch.library import triton_op, wrap_triton

__all__ = ["SUPPORTED_DTYPES", "mixed_norm_triton", "triton_path_applies"]

SUPPORTED_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
MAX_DIM = 16384  # one row must fit one tile; wider rows take the eager composite
# Enough programs to fill a large GPU several times over; samples split their tokens to get there.
TARGET_PROGRAMS = 512
FORWARD_TILE_ELEMENTS = 4096
BACKWARD_TILE_ELEMENTS = 2048  # the backward keeps about twice as many live values per element
PARTIAL_ROWS = 4  # dcl, dcd, dc0 and dalpha, stacked in the backward's partial sums


@triton.jit
def _tanh(v):
    """Rational tanh (the 13/6 minimax form the CPU kernel uses), max abs error ~1e-7 in float32.

    Plain arithmetic instead of libdevice, which Triton's interpreter does not provide."""
    clamp = 7.90531110763549805
    v = tl.minimum(tl.maximum(v, -clamp), clamp)
    v2 = v * v
    p = v2 * -2.76076847742355e-16 + 2.00018790482477e-13
    p = p * v2 + -8.60467152213735e-11
    p = p * v2 + 5.12229709037114e-08
    p = p * v2 + 1.48572235717979e-05
    p = p * v2 + 6.37261928875436e-04
    p = p * v2 + 4.89352455891786e-03
    p = p * v
    q = v2 * 1.19825839466702e-06 + 1.18534705686654e-04
    q = q * v2 + 2.26843463243900e-03
    q = q * v2 + 4.89352518554385e-03
    return p / q


@triton.jit
def _mixed_norm_forward_kernel(
    x_ptr, alpha_ptr, cl_ptr, cd_ptr, c0_ptr, y_ptr, mean_ptr, rstd_ptr,
    tokens, dim, alpha_stride, cl_stride, cd_stride, c0_stride, tokens_per_program, eps,
    USE_LN: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr,
):  # fmt: skip
    # Inductor may pass Python floats as float64 scalars; the math stays float32.
    eps = tl.cast(eps, tl.float32)
    sample = tl.program_id(0).to(tl.int64)
    first_token = tl.program_id(1) * tokens_per_program
    end_token = tl.minimum(first_token + tokens_per_program, tokens)
    cols = tl.arange(0, BLOCK_D)
    col_mask = cols < dim
    alpha = tl.load(alpha_ptr + sample * alpha_stride).to(tl.float32)
    cd = tl.load(cd_ptr + sample * cd_stride + cols, mask=col_mask, other=0.0).to(tl.float32)  # (BLOCK_D,)
    c0 = tl.load(c0_ptr + sample * c0_stride + cols, mask=col_mask, other=0.0).to(tl.float32)
    if USE_LN:
        cl = tl.load(cl_ptr + sample * cl_stride + cols, mask=col_mask, other=0.0).to(tl.float32)
    for start in range(first_token, end_token, BLOCK_T):
        rows = sample * tokens + start + tl.arange(0, BLOCK_T)  # (BLOCK_T,) row indices into (B * T)
        row_mask = start + tl.arange(0, BLOCK_T) < end_token
        mask = row_mask[:, None] & col_mask[None, :]
        offsets = rows[:, None] * dim + cols[None, :]  # (BLOCK_T, BLOCK_D)
        x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
        y = _tanh(alpha * x) * cd[None, :] + c0[None, :]
        if USE_LN:
            mean = tl.sum(x, axis=1) / dim  # (BLOCK_T,)
            centred = tl.where(mask, x - mean[:, None], 0.0)
            rstd = 1.0 / tl.sqrt(tl.sum(centred * centred, axis=1) / dim + eps)
            y += centred * rstd[:, None] * cl[None, :]
            tl.store(mean_ptr + rows, mean, mask=row_mask)
            tl.store(rstd_ptr + rows, rstd, mask=row_mask)
        tl.store(y_ptr + offsets, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _mixed_norm_backward_kernel(
    grad_ptr, x_ptr, alpha_ptr, cl_ptr, cd_ptr, mean_ptr, rstd_ptr, dx_ptr, partial_ptr,
    tokens, dim, alpha_stride, cl_stride, cd_stride, tokens_per_program, splits,
    USE_LN: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr,
):  # fmt: skip
    sample = tl.program_id(0).to(tl.int64)
    split = tl.program_id(1)
    first_token = split * tokens_per_program
    end_token = tl.minimum(first_token + tokens_per_program, tokens)
    cols = tl.arange(0, BLOCK_D)
    col_mask = cols < dim
    alpha = tl.load(alpha_ptr + sample * alpha_stride).to(tl.float32)
    cd = tl.load(cd_ptr + sample * cd_stride + cols, mask=col_mask, other=0.0).to(tl.float32)  # (BLOCK_D,)
    if USE_LN:
        cl = tl.load(cl_ptr + sample * cl_stride + cols, mask=col_mask, other=0.0).to(tl.float32)
    dcl = tl.zeros([BLOCK_D], dtype=tl.float32)
    dcd = tl.zeros([BLOCK_D], dtype=tl.float32)
    dc0 = tl.zeros([BLOCK_D], dtype=tl.float32)
    dalpha = tl.zeros([BLOCK_T], dtype=tl.float32)
    for start in range(first_token, end_token, BLOCK_T):
        rows = sample * tokens + start + tl.arange(0, BLOCK_T)  # (BLOCK_T,)
        row_mask = start + tl.arange(0, BLOCK_T) < end_token
        mask = row_mask[:, None] & col_mask[None, :]
        offsets = rows[:, None] * dim + cols[None, :]  # (BLOCK_T, BLOCK_D)
        # Masked lanes load g = 0 and x = 0, so they add nothing to any sum below.
        g = tl.load(grad_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
        x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
        th = _tanh(alpha * x)
        d_pre = g * cd[None, :] * (1.0 - th * th)  # gradient at alpha * x
        dx = alpha * d_pre
        dalpha += tl.sum(d_pre * x, axis=1)
        dcd += tl.sum(g * th, axis=0)
        dc0 += tl.sum(g, axis=0)
        if USE_LN:
            mean = tl.load(mean_ptr + rows, mask=row_mask, other=0.0)
            rstd = tl.load(rstd_ptr + rows, mask=row_mask, other=0.0)
            x_hat = tl.where(mask, (x - mean[:, None]) * rstd[:, None], 0.0)
            g_ln = g * cl[None, :]
            mean_g = tl.sum(g_ln, axis=1) / dim  # (BLOCK_T,)
            mean_g_xhat = tl.sum(g_ln * x_hat, axis=1) / dim
            dx += rstd[:, None] * (g_ln - mean_g[:, None] - x_hat * mean_g_xhat[:, None])
            dcl += tl.sum(g * x_hat, axis=0)
        tl.store(dx_ptr + offsets, dx.to(dx_ptr.dtype.element_ty), mask=mask)
    # This program's partial sums, rows of partial (B, splits, 4, D): dcl, dcd, dc0, and dalpha in
    # column 0 of the last row (one buffer, so one torch sum finishes them all).
    partial = partial_ptr + (sample * splits + split) * 4 * dim + cols
    tl.store(partial, dcl, mask=col_mask)
    tl.store(partial + dim, dcd, mask=col_mask)
    tl.store(partial + 2 * dim, dc0, mask=col_mask)
    tl.store(partial + 3 * dim, tl.where(cols == 0, tl.sum(dalpha, axis=0), 0.0), mask=col_mask)


def _launch_config(batch: int, tokens: int, dim: int, tile_elements: int) -> tuple[int, int, int, int, int]:
    """(BLOCK_T, BLOCK_D, tokens per program, programs per sample, num_warps) for a (B, T, D) input."""
    block_d = triton.next_power_of_2(dim)
    block_t = max(1, min(triton.next_power_of_2(tokens), tile_elements // block_d))
    tiles_per_sample = triton.cdiv(tokens, block_t)
    splits = max(1, min(triton.cdiv(TARGET_PROGRAMS, batch), tiles_per_sample))
    # Whole tiles per program, so only a sample's last tile is ragged.
    tokens_per_program = triton.cdiv(tiles_per_sample, splits) * block_t
    splits = triton.cdiv(tokens, tokens_per_program)
    num_warps = min(16, max(4, block_t * block_d // 1024))
    return block_t, block_d, tokens_per_program, splits, num_warps


def _alpha_stride(alpha: torch.Tensor) -> int:
    """alpha is one value every sample reads (any shape), or (B,), one per sample (stacked seeds)."""
    return 0 if alpha.numel() == 1 else alpha.stride(0)


def _unit_stride_rows(t: torch.Tensor) -> torch.Tensor:
    """A (B, D) coefficient whose rows the kernels can read with one stride: expanded (stride-0)
    rows stay views, anything else with a non-unit inner stride is copied."""
    return t if t.stride(-1) == 1 else t.contiguous()


def _forward_kernels(
    x: torch.Tensor,
    alpha: torch.Tensor,
    cl: torch.Tensor,
    cd: torch.Tensor,
    c0: torch.Tensor,
    eps: float,
    use_ln: bool,
    out_dtype: torch.dtype,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """x (B, T, D), alpha one element or (B,), cl/cd/c0 (B, D) -> y (B, T, D) in out_dtype, float32 mean
    and rstd (B, T) (left unwritten when not use_ln)."""
    x = x.contiguous()
    cl, cd, c0 = (_unit_stride_rows(t) for t in (cl, cd, c0))
    batch, tokens, dim = x.shape
    y = torch.empty(x.shape, dtype=out_dtype, device=x.device)  # (B, T, D)
    mean = torch.empty(batch, tokens, dtype=torch.float32, device=x.device)  # (B, T)
    rstd = torch.empty(batch, tokens, dtype=torch.float32, device=x.device)  # (B, T)
    block_t, block_d, tokens_per_program, splits, num_warps = _launch_config(
        batch, tokens, dim, FORWARD_TILE_ELEMENTS
    )
    wrap_triton(_mixed_norm_forward_kernel)[(batch, splits)](
        x, alpha, cl, cd, c0, y, mean, rstd,
        tokens, dim, _alpha_stride(alpha), cl.stride(0), cd.stride(0), c0.stride(0), tokens_per_program, eps,
        USE_LN=use_ln, BLOCK_T=block_t, BLOCK_D=block_d, num_warps=num_warps,
    )  # fmt: skip
    return y, mean, rstd


def _backward_kernels(
    grad: torch.Tensor,
    x: torch.Tensor,
    alpha: torch.Tensor,
    cl: torch.Tensor,
    cd: torch.Tensor,
    mean: torch.Tensor,
    rstd: torch.Tensor,
    use_ln: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    """-> dx (B, T, D) in x's dtype and float32 sums (B, 4, D): rows dcl, dcd, dc0 per sample, and the
    per-sample dalpha in column 0 of row 3."""
    grad, x = grad.contiguous(), x.contiguous()
    cl, cd = _unit_stride_rows(cl), _unit_stride_rows(cd)
    batch, tokens, dim = x.shape
    block_t, block_d, tokens_per_program, splits, num_warps = _launch_config(
        batch, tokens, dim, BACKWARD_TILE_ELEMENTS
    )
    dx = torch.empty_like(x)  # (B, T, D)
    # Partial sums (B, splits, 4, D); with one program per sample they are the result, allocated in
    # its final shape (an operator's outputs must not be views).
    partial_shape = (batch, PARTIAL_ROWS, dim) if splits == 1 else (batch, splits, PARTIAL_ROWS, dim)
    partial = torch.empty(partial_shape, dtype=torch.float32, device=x.device)
    wrap_triton(_mixed_norm_backward_kernel)[(batch, splits)](
        grad, x, alpha, cl, cd, mean, rstd, dx, partial,
        tokens, dim, _alpha_stride(alpha), cl.stride(0), cd.stride(0), tokens_per_program, splits,
        USE_LN=use_ln, BLOCK_T=block_t, BLOCK_D=block_d, num_warps=num_warps,
    )  # fmt: skip
    return dx, partial if splits == 1 else partial.sum(dim=1)


# The same launches as custom operators: what torch.compile traces (and Inductor sees the kernels in)
# and what vmap batches through the rules below.
_forward_op = triton_op("normlab::mixed_norm_forward", mutates_args=())(_forward_kernels)
_backward_op = triton_op("normlab::mixed_norm_backward", mutates_args=())(_backward_kernels)


def _direct_launch_applies() -> bool:
    """Plain eager calls skip the operator's dispatch (tens of microseconds a call on a host-bound step)
    and launch the kernels straight away, as the operator itself does on plain tensors."""
    return not torch.compiler.is_compiling() and not torch._C._are_functorch_transforms_active()


def _run_forward(*args: object) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    if _direct_launch_applies():
        with set_wrap_triton_enabled(False):
            return _forward_kernels(*args)  # type: ignore[arg-type]
    return _forward_op(*args)


def _run_backward(*args: object) -> tuple[torch.Tensor, torch.Tensor]:
    if _direct_launch_applies():
        with set_wrap_triton_enabled(False):
            return _backward_kernels(*args)  # type: ignore[arg-type]
    return _backward_op(*args)


def _vmapped_first(batch_size: int, in_dims: tuple[int | None, ...], tensors: tuple[torch.Tensor, ...]):  # type: ignore[no-untyped-def]
    """Under vmap: each tensor with its vmapped dim moved first; unbatched ones expanded to batch_size."""
    return [
        t.movedim(d, 0) if d is not None else t.expand(batch_size, *t.shape)
        for t, d in zip(tensors, in_dims, strict=True)
    ]


def _fold(t: torch.Tensor) -> torch.Tensor:
    """(V, B, ...) -> (V * B, ...): the vmapped dim folded into the samples."""
    return t.reshape(-1, *t.shape[2:])


def _unfold(batch_size: int, t: torch.Tensor) -> torch.Tensor:
    """(V * B, ...) -> (V, B, ...)."""
    return t.reshape(batch_size, -1, *t.shape[1:])


def _per_sample_alpha(alpha: torch.Tensor, batch: int) -> torch.Tensor:
    """(V, ...) alphas of one element each, or (V, B) -> (V * B,): each vmapped copy keeps its own alpha
    for its samples."""
    return alpha.reshape(alpha.shape[0], -1).expand(-1, batch).reshape(-1)


@_forward_op.register_vmap
def _forward_vmap(info, in_dims, x, alpha, cl, cd, c0, eps, use_ln, out_dtype):  # type: ignore[no-untyped-def]
    x, alpha, cl, cd, c0 = _vmapped_first(info.batch_size, in_dims[:5], (x, alpha, cl, cd, c0))
    batch = x.shape[1]
    outputs = _forward_op(
        _fold(x), _per_sample_alpha(alpha, batch), _fold(cl), _fold(cd), _fold(c0), eps, use_ln, out_dtype
    )
    return tuple(_unfold(info.batch_size, t) for t in outputs), (0, 0, 0)


@_backward_op.register_vmap
def _backward_vmap(info, in_dims, grad, x, alpha, cl, cd, mean, rstd, use_ln):  # type: ignore[no-untyped-def]
    tensors = _vmapped_first(info.batch_size, in_dims[:7], (grad, x, alpha, cl, cd, mean, rstd))
    grad, x, alpha, cl, cd, mean, rstd = tensors
    batch = x.shape[1]
    folded = (_fold(t) for t in (grad, x))
    rest = (_fold(t) for t in (cl, cd, mean, rstd))
    outputs = _backward_op(*folded, _per_sample_alpha(alpha, batch), *rest, use_ln)
    return tuple(_unfold(info.batch_size, t) for t in outputs), (0, 0)


class _RefuseDoubleBackward(torch.autograd.Function):
    """Identity on the first-order gradients that ties them to the backward's inputs, so that
    differentiating them again (create_graph, nested torch.func.grad) fails loudly instead of
    silently missing the kernel's second-order terms."""

    generate_vmap_rule = True

    @staticmethod
    def forward(dx, sums, *anchors):  # type: ignore[no-untyped-def,override]
        # anchors: the upstream gradient and the saved tensors, inputs only so that the outputs
        # require grad exactly when a second differentiation could reach them.
        return dx.view_as(dx), sums.view_as(sums)

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:  # type: ignore[no-untyped-def]
        pass

    @staticmethod
    def backward(ctx, *grads):  # type: ignore[no-untyped-def,override]
        raise RuntimeError(
            "The Triton norm kernels have no double backward; NORMLAB_GPU_NORM_KERNELS=off and "
            "NORMLAB_AUTONORM_LAYER_KERNEL=0 (or models.norms.mixed.TRITON_ON_CUDA and "
            "models.norms.autonorm.TRITON_LAYER_ON_CUDA = False) differentiate the eager composite twice."
        )


class _MixedNormFunction(torch.autograd.Function):
    # Under vmap, functorch runs forward and backward on batched tensors and the ops' vmap rules fold
    # the vmapped dim into the samples.
    generate_vmap_rule = True

    @staticmethod
    def forward(x, alpha, cl, cd, c0, eps: float, use_ln: bool, out_dtype: torch.dtype):  # type: ignore[no-untyped-def,override]
        return _run_forward(x, alpha, cl, cd, c0, eps, use_ln, out_dtype)

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:  # type: ignore[no-untyped-def]
        x, alpha, cl, cd, c0, _eps, use_ln, _out_dtype = inputs
        _y, mean, rstd = output
        ctx.save_for_backward(x, alpha, cl, cd, mean, rstd)
        ctx.use_ln = use_ln
        ctx.grad_dtypes = (cl.dtype, cd.dtype, c0.dtype, alpha.dtype)
        ctx.alpha_shape = alpha.shape
        ctx.mark_non_differentiable(mean, rstd)
        ctx.set_materialize_grads(False)  # mean and rstd never get a gradient: no zeros to allocate

    @staticmethod
    def backward(ctx, grad, _grad_mean, _grad_rstd):  # type: ignore[no-untyped-def,override]
        if grad is None:
            return (None,) * 8
        saved = ctx.saved_tensors
        # The op has no autograd formula of its own: detached inputs keep the autograd engine (and
        # torch.func.grad, which always builds a graph) from looking for one.
        outputs = _run_backward(grad.detach(), *(t.detach() for t in saved), ctx.use_ln)
        if torch.is_grad_enabled():
            outputs = _RefuseDoubleBackward.apply(*outputs, grad, *saved)
        dx, sums = outputs  # sums (B, 4, D): dcl, dcd, dc0 rows, per-sample dalpha in column 0 of row 3
        dcl, dcd, dc0, dalpha_row = sums.unbind(1)
        # Row 3 is zero outside column 0, so its total is alpha's gradient.
        dalpha = dalpha_row.sum()
        if ctx.alpha_shape != dalpha.shape:
            dalpha = dalpha.reshape(ctx.alpha_shape)
        grads = [
            g if g.dtype == dtype else g.to(dtype)
            for g, dtype in zip((dcl, dcd, dc0, dalpha), ctx.grad_dtypes, strict=True)
        ]
        needs = ctx.needs_input_grad
        return (
            dx if needs[0] else None,
            grads[3] if needs[1] else None,
            grads[0] if ctx.use_ln and needs[2] else None,
            grads[1] if needs[3] else None,
            grads[2] if needs[4] else None,
            None,
            None,
            None,
        )


# Function.apply's Python wrapper binds default arguments and checks for torch.func transforms (tens
# of microseconds a call); plain eager calls, which need neither, go straight to the C entry point.
_apply_directly = super(torch.autograd.Function, _MixedNormFunction).apply


def _eager_output_dtype(
    x: torch.Tensor, alpha: torch.Tensor, cl: torch.Tensor, cd: torch.Tensor, c0: torch.Tensor, use_ln: bool
) -> torch.dtype:
    """The dtype `mixed_norm_reference` returns: type promotion over its terms, with the LayerNorm term
    in (at least) float32 under autocast, whose policy runs layer_norm in float32."""
    # A 0-dim alpha does not promote x (torch.result_type's rule, spelled out: torch.compile folds
    # promote_types but cannot trace result_type).
    alpha_x = x.dtype if alpha.dim() == 0 else torch.promote_types(alpha.dtype, x.dtype)
    dtype = torch.promote_types(alpha_x, cd.dtype)
    dtype = torch.promote_types(dtype, c0.dtype)
    if use_ln:
        ln_dtype = x.dtype
        if torch.is_autocast_enabled(x.device.type):
            ln_dtype = torch.promote_types(ln_dtype, torch.float32)
        dtype = torch.promote_types(torch.promote_types(dtype, ln_dtype), cl.dtype)
    return dtype


def triton_path_applies(
    x: torch.Tensor, alpha: torch.Tensor, cl: torch.Tensor, cd: torch.Tensor, c0: torch.Tensor
) -> bool:
    """Whether the kernels take these arguments: x (B, T, D) and per-sample (B, D) coefficients in the
    supported dtypes, a one-element alpha, rows of at most MAX_DIM. (The device is the caller's call.)"""
    if x.dim() != 3 or alpha.numel() != 1 or x.shape[-1] > MAX_DIM:
        return False
    if any(t.dim() != 2 for t in (cl, cd, c0)):
        return False
    return all(t.dtype in SUPPORTED_DTYPES for t in (x, alpha, cl, cd, c0))


def mixed_norm_triton(
    x: torch.Tensor,
    alpha: torch.Tensor,
    cl: torch.Tensor,
    cd: torch.Tensor,
    c0: torch.Tensor,
    eps: float = 1e-5,
    use_ln: bool = True,
) -> torch.Tensor:
    """`mixed_norm_reference` through the kernels: x (B, T, D); cl, cd, c0 (B, D); alpha one element ->
    (B, T, D) in the dtype the reference returns. Call only where `triton_path_applies`."""
    args = (x, alpha, cl, cd, c0, float(eps), use_ln, _eager_output_dtype(x, alpha, cl, cd, c0, use_ln))
    apply = _apply_directly if _direct_launch_applies() else _MixedNormFunction.apply
    y, _mean, _rstd = apply(*args)
    return y
