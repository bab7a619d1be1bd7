"""AutoNorm: a learned per-sample choice between DyT and LayerNorm,

    AutoNorm(X) = w_DyT(X) * DyT(X) + w_LN(X) * LN(X)

The gate comes from a NormSelector MLP on the token mean of the layer input ((B, T, D) -> (B, D) ->
hidden -> 2 logits, index 0 = DyT, index 1 = LN); given a `token_mask`, the mean runs over real tokens
only, so padding never moves a gate. In a causal model (`causal`, set by the lm encoder) the selector
reads the prefix mean of tokens 0..t instead, so the gate is per token, (B, T, 2), and position t never
sees a later token. Training uses a soft Gumbel-Softmax with temperature tau (one draw per gate: per
sample, or per token when causal; a hard straight-through sample is an option); eval uses the
noise-free softmax, so evaluation is deterministic. The gate is computed in float32 even under autocast
(fp16 Gumbel noise is a NaN source).

Documented choices where the paper is silent: the selector's hidden width is max(8, D // 4) with GELU,
and its last layer is zero-initialised (`zero_init_last`, which backbones call again after their own
init), so every gate starts at exactly (0.5, 0.5) with entropy ln 2. The selector's first layer keeps
torch's default Linear init: the backbone's branch init scale never touches it.
AutoNorm-S is this layer plus `GateFreezer` (models/norms/freeze.py).

After AutoNorm-S freezes a layer's selector (`selector_frozen`, set by `GateFreezer.apply`), the gate
follows `post_freeze_gate` (the paper does not say; a spec knob, see POST_FREEZE_GATES). The default,
`sample`, keeps today's gate: only the selector's learning stops, the forward is unchanged, so the freeze
is the one intervention and results stored before the knob existed stay comparable.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from models.norms.autonorm_fused import autonorm_fused
from models.norms.conditioning import TokenConditionedNorm
from models.norms.mixed import (
    _TRITON_INSTALLED,
    _fast_path_applies,
    _traced_or_captured,
    _under_torch_func,
    all_float32,
    as_samples,
    mixed_norm,
    sample_token_mask,
    token_weights,
)
from normlab.plugin import norm_layer

__all__ = ["POST_FREEZE_GATES", "AutoNorm", "NormSelector", "gate_entropy", "hard_gate"]

DYT_INDEX, LN_INDEX = 0, 1
MAX_ENTROPY = math.log(2.0)

# The gate of a frozen selector (AutoNorm-S, after its freeze), the spec knob `post_freeze_gate`:
# - "sample": unchanged, a Gumbel-Softmax draw in training and the noise-free softmax in eval (default);
# - "expected": the noise-free softmax in training too, so the frozen gate is a deterministic function
#   of the input (the gate's path to x is still differentiated);
# - "hard": the argmax one-hot of the noise-free softmax (ties pick DyT, index 0), in training AND eval,
#   so the backbone is evaluated with the one-norm-per-sample network it kept training after the freeze.
#   A one-hot is piecewise constant in the logits: no gradient flows through it (nor needs to, the
#   selector is frozen), unlike the straight-through `hard` Gumbel option of the unfrozen gate.
# The study knob `studies.knobs.KNOBS["post_freeze_gate"]` lists the same names (tested).
POST_FREEZE_GATES: tuple[str, ...] = ("sample", "expected", "hard")


def layer_kernel_mode(environ: Mapping[str, str]) -> str:
    """NORMLAB_AUTONORM_LAYER_KERNEL: "auto" (default: where an H200 measured it faster, see
    layer_kernel_pays_off), "on" (1, true, yes, always: every CUDA call it supports) or "off" (0, ...)."""
    value = environ.get("NORMLAB_AUTONORM_LAYER_KERNEL", "auto").strip().lower() or "auto"
    if value == "auto":
        return "auto"
    if value in ("1", "true", "yes", "on", "always"):
        return "on"
    if value in ("0", "false", "no", "off", "never"):
        return "off"
    raise ValueError(f"NORMLAB_AUTONORM_LAYER_KERNEL must be auto, 1 or 0; got {value!r}")


# Under "auto", traced or captured calls take the whole-layer kernel up to this row width: one program per
# sample, so a wide row leaves the GPU under-filled. Measured on an H200 (BENCHMARKS.md, GPU section),
# forward+backward under CUDA graphs against the mixed-norm kernels it replaces: D = 128 (B 128, T 65)
# 60 us against 174 us; D = 768 (B 64, T 197) 612 us against 353 us. Widths in between are unmeasured.
LAYER_KERNEL_MAX_TRACED_DIM = 128


def layer_kernel_pays_off(dim: int, *, traced_or_captured: bool, transformed: bool) -> bool:
    """The "auto" rule, from the H200 measurements: plain eager calls always (host-bound there, and one
    launch each way beats the ~25 of the gate in torch: 0.94-1.04 ms per forward+backward against
    1.60-1.95 ms for the eager composite, at D = 128 and 768, float32 and bf16);
    traced or captured calls up to LAYER_KERNEL_MAX_TRACED_DIM; never under a torch.func transform
    (stacked seeds), where only the mixed-norm kernels have been measured."""
    if transformed:
        return False
    return not traced_or_captured or dim <= LAYER_KERNEL_MAX_TRACED_DIM


# The whole layer as one Triton kernel each way on CUDA (models/norms/autonorm_triton.py). Checked on an
# H200 against the float64 layer and the mixed-norm path, eager, compiled and captured. Off, CUDA inputs
# take the eager gate and the mixed norm (its kernels or its composite, models/norms/mixed.py).
LAYER_KERNEL_MODE = layer_kernel_mode(os.environ)
TRITON_LAYER_ON_CUDA = LAYER_KERNEL_MODE != "off"
LAYER_KERNEL_EVERYWHERE = LAYER_KERNEL_MODE == "on"


def _layer_kernel_wanted(xs: torch.Tensor) -> bool:
    """Whether this CUDA call should take the whole-layer kernel (the switch is on: TRITON_LAYER_ON_CUDA)."""
    if LAYER_KERNEL_EVERYWHERE:
        return True
    return layer_kernel_pays_off(
        xs.shape[-1], traced_or_captured=_traced_or_captured(), transformed=_under_torch_func()
    )


def gate_entropy(probs: torch.Tensor) -> torch.Tensor:
    """Entropy of noise-free gate probabilities (..., 2) -> (...), in [0, ln 2]: per sample for (B, 2),
    per token for causal (B, T, 2) gates."""
    return -(probs * torch.log(probs.clamp_min(1e-12))).sum(dim=-1)


def hard_gate(probs: torch.Tensor) -> torch.Tensor:
    """The argmax one-hot (..., 2) of gate probabilities (..., 2); a tie picks DyT (index 0), as argmax.
    Written as a comparison rather than argmax + one_hot, so it runs under vmap and torch.compile."""
    pick_ln = (probs[..., LN_INDEX : LN_INDEX + 1] > probs[..., DYT_INDEX : DYT_INDEX + 1]).to(probs.dtype)
    return torch.cat([1.0 - pick_ln, pick_ln], dim=-1)


class NormSelector(nn.Module):
    """Two-layer MLP on the token mean -> 2 logits; one per normalization site."""

    def __init__(self, dim: int, hidden: int | None = None) -> None:
        super().__init__()
        hidden = hidden or max(8, dim // 4)
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, 2)
        self.zero_init_last()

    def zero_init_last(self) -> None:
        nn.init.zeros_(self.fc2.weight)
        nn.init.zeros_(self.fc2.bias)

    def forward(self, pooled: torch.Tensor) -> torch.Tensor:
        # Parameters follow the (>= float32) input dtype, so a half-precision model still gates in float32.
        dtype = pooled.dtype
        hidden = F.linear(pooled, self.fc1.weight.to(dtype), self.fc1.bias.to(dtype))
        return F.linear(self.act(hidden), self.fc2.weight.to(dtype), self.fc2.bias.to(dtype))  # (..., 2)


@norm_layer("autonorm")
class AutoNorm(TokenConditionedNorm):
    def __init__(
        self,
        dim: int,
        tau: float = 0.5,
        hard: bool = False,
        alpha_init: float = 0.5,
        selector_hidden: int | None = None,
        eps: float = 1e-5,
        post_freeze_gate: str = "sample",
    ) -> None:
        super().__init__()
        if tau <= 0:
            raise ValueError(f"tau must be > 0, got {tau}")
        if post_freeze_gate not in POST_FREEZE_GATES:
            raise ValueError(
                f"post_freeze_gate must be one of {', '.join(POST_FREEZE_GATES)}, got {post_freeze_gate!r}"
            )
        self.tau, self.hard, self.eps = float(tau), bool(hard), eps
        self.post_freeze_gate = post_freeze_gate
        # Whether AutoNorm-S has frozen this layer's selector (GateFreezer.apply sets it; never undone).
        self.selector_frozen = False
        # Stacked seeds (workers.training.seed_step) freeze per seed: there the step passes each seed's
        # flag, a 0-d bool tensor, in place of this None through functional_call. Only read when
        # post_freeze_gate is not "sample".
        self.seed_frozen: torch.Tensor | None = None
        self.dyt_alpha = nn.Parameter(torch.tensor(float(alpha_init)))
        self.dyt_weight = nn.Parameter(torch.ones(dim))
        self.dyt_bias = nn.Parameter(torch.zeros(dim))
        self.ln_weight = nn.Parameter(torch.ones(dim))
        self.ln_bias = nn.Parameter(torch.zeros(dim))
        self.selector = NormSelector(dim, selector_hidden)
        # Noise-free probabilities of the last forward, (B, 2) or causal (B, T, 2), detached: what
        # gate_summary reads.
        self.last_probs: torch.Tensor | None = None

    def zero_init_last(self) -> None:
        self.selector.zero_init_last()

    def gate(
        self, xs: torch.Tensor, token_mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, T, D) and an optional (B, T) mask of real tokens -> (mixing weights, noise-free
        probabilities), both float32, (B, 2) per sample or (B, T, 2) per token when causal."""
        with torch.autocast(device_type=xs.device.type, enabled=False):
            gate_dtype = torch.promote_types(xs.dtype, torch.float32)
            pooled = self.pooled(xs, token_mask).to(gate_dtype)  # (B, D) or causal (B, T, D)
            logits = self.selector(pooled)  # (B, 2) or (B, T, 2)
            probs = logits.softmax(dim=-1)
            if self._frozen_gate() != "sample":
                # A frozen selector's fixed gate: no Gumbel draw (the fused kernel draws none either).
                weights = probs if self.post_freeze_gate == "expected" else hard_gate(probs)
            elif self.training:
                # Causal logits (B, T, 2) get one independent Gumbel draw per (sample, token).
                weights = F.gumbel_softmax(logits, tau=self.tau, hard=self.hard, dim=-1)
            else:
                weights = probs
            if self.seed_frozen is not None and self.post_freeze_gate != "sample":
                # One stacked seed under vmap: its own flag picks the fixed gate or the usual one.
                fixed = probs if self.post_freeze_gate == "expected" else hard_gate(probs)
                weights = torch.where(self.seed_frozen, fixed, weights)
        return weights, probs

    def _frozen_gate(self) -> str:
        """The gate this layer's calls take: "sample" (the usual one) until the selector is frozen, then
        `post_freeze_gate`."""
        return self.post_freeze_gate if self.selector_frozen else "sample"

    def forward(self, x: torch.Tensor, token_mask: torch.Tensor | None = None) -> torch.Tensor:
        xs = as_samples(x)  # (B, T, D)
        mask = None if token_mask is None else sample_token_mask(token_mask, x)  # (B, T)
        params = self.kernel_parameters()
        gate = self._frozen_gate()
        kernel = self._one_call_kernel(xs, params) if self._kernel_can_gate(gate) else None
        if kernel is not None:
            # The kernels pool with per-token weights when a mask is given (1 / n_real on real tokens,
            # 0 on pads), so padded batches keep the fused path; no mask keeps the plain 1 / T mean.
            pool_weights = None if mask is None else token_weights(mask, torch.float32).contiguous()
            # A frozen "expected" gate is the kernels' eval gate (noise-free softmax, differentiated as
            # such), whatever the module's mode.
            noisy = self.training and gate == "sample"
            y, probs = kernel(xs, params, noisy, self.tau, self.hard, self.eps, token_weights=pool_weights)
            # Already non-differentiable. A plain attribute (never a parameter or buffer), so it skips
            # nn.Module.__setattr__'s registry checks on this per-step path.
            self.__dict__["last_probs"] = probs
            return y if x.dim() == 3 else y.reshape(x.shape)
        weights, probs = self.gate(xs, mask)
        self.last_probs = probs.detach()
        w_dyt = weights[..., DYT_INDEX : DYT_INDEX + 1].to(self.ln_weight.dtype)  # (B, 1) or (B, T, 1)
        w_ln = weights[..., LN_INDEX : LN_INDEX + 1].to(self.ln_weight.dtype)  # (B, 1) or (B, T, 1)
        # Fold gate and affine parameters on (B, D) tensors, (B, T, D) when causal; then one mixed pass.
        cl = w_ln * self.ln_weight
        cd = w_dyt * self.dyt_weight
        c0 = w_dyt * self.dyt_bias + w_ln * self.ln_bias
        return mixed_norm(xs, self.dyt_alpha, cl, cd, c0, eps=self.eps).reshape(x.shape)

    def _kernel_can_gate(self, gate: str) -> bool:
        """Whether the one-call kernels can compute this call's gate: they know the Gumbel draw and the
        noise-free softmax, not the one-hot of a frozen "hard" gate nor a per-seed choice between
        gates; those take the eager gate (then the mixed norm, with its own kernels)."""
        if gate == "hard":
            return False
        return self.seed_frozen is None or self.post_freeze_gate == "sample"

    def _one_call_kernel(
        self, xs: torch.Tensor, params: tuple[torch.Tensor, ...]
    ) -> Callable[..., Any] | None:
        """The kernel that runs this whole layer call (gate included), or None for the eager gate."""
        if self.causal:  # the kernels pool one mean per sample; causal prefix means stay eager
            return None
        if _fast_path_applies(xs) and all_float32(params):
            return autonorm_fused
        if xs.is_cuda and TRITON_LAYER_ON_CUDA and _TRITON_INSTALLED and _layer_kernel_wanted(xs):
            from models.norms.autonorm_triton import autonorm_triton, autonorm_triton_applies

            if autonorm_triton_applies(xs, params):
                return autonorm_triton
        return None

    def kernel_parameters(self) -> tuple[nn.Parameter, ...]:
        """Every parameter, in the order the fused kernel takes them (cheaper than .parameters())."""
        # Direct dict lookups: nn.Module.__getattr__ costs ~0.5 us per attribute, paid every forward.
        selector = self._modules["selector"]._modules  # type: ignore[union-attr]
        own, fc1, fc2 = self._parameters, selector["fc1"]._parameters, selector["fc2"]._parameters  # type: ignore[union-attr]
        return (
            own["dyt_alpha"], own["dyt_weight"], own["dyt_bias"], own["ln_weight"], own["ln_bias"],
            fc1["weight"], fc1["bias"], fc2["weight"], fc2["bias"],
        )  # type: ignore[return-value]  # fmt: skip

    def extra_repr(self) -> str:
        return (
            f"dim={self.ln_weight.numel()}, tau={self.tau}, hard={self.hard}, causal={self.causal}, "
            f"post_freeze_gate={self.post_freeze_gate}"
        )
