"""The checks a user's norm layer must pass before a study may use it: `check_norm_layer(make_layer)`."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import nn
from torch.func import functional_call, grad, stack_module_state, vmap

__all__ = ["CHECKS", "CheckResult", "ConformanceReport", "check_norm_layer"]

LayerFactory = Callable[[int], nn.Module]

SHAPE = "shape"
DTYPE = "dtype"
INPUT_GRADIENT = "input_gradient"
PARAMETER_GRADIENT = "parameter_gradient"
DETERMINISTIC = "deterministic"
FUNCTIONAL = "functional"
CHECKS: tuple[str, ...] = (SHAPE, DTYPE, INPUT_GRADIENT, PARAMETER_GRADIENT, DETERMINISTIC, FUNCTIONAL)
# A layer that fails these still trains, one seed per trial process; every other failure rules it out.
NON_FATAL = frozenset({FUNCTIONAL})

# Leading shapes cover a token matrix, a sequence batch and one extra axis (heads, patches).
LEADING_SHAPES: tuple[tuple[int, ...], ...] = ((4,), (2, 3), (2, 3, 5))
# Batched kernels under vmap may sum in another order than per-copy calls: float32 round-off only.
FUNCTIONAL_RTOL, FUNCTIONAL_ATOL = 1e-4, 1e-5


@dataclass(frozen=True)
class CheckResult:
    name: str
    passed: bool
    detail: str
    fatal: bool = True  # False: a failure narrows how the layer runs, it does not rule the layer out
    skipped: bool = False  # not run, because the layer declares it unsupported


@dataclass(frozen=True)
class ConformanceReport:
    checks: tuple[CheckResult, ...]

    @property
    def ok(self) -> bool:
        """Every fatal check passed: a study may use the layer."""
        return all(check.passed for check in self.checks if check.fatal)

    @property
    def functional(self) -> bool:
        """The layer runs under torch.func, so a trial may train several seeds as one vmapped stack."""
        return any(check.name == FUNCTIONAL and check.passed for check in self.checks)

    @property
    def max_seeds_per_trial(self) -> int | None:
        """1 where the layer cannot run under vmap; None: no limit from the layer."""
        return None if self.functional else 1

    @property
    def failed(self) -> tuple[CheckResult, ...]:
        return tuple(check for check in self.checks if not check.passed)

    def describe(self) -> str:
        """One line per failed check with its error, fatal ones first, then what a non-fatal one costs."""
        if not self.failed:
            return f"all {len(self.checks)} checks passed"
        fatal = [check for check in self.failed if check.fatal]
        lines = []
        if fatal:
            lines.append(f"{len(fatal)} of {len(self.checks)} checks failed; a study cannot use this layer:")
            lines.extend(f"  {check.name}: {check.detail}" for check in fatal)
        for check in self.failed:
            if not check.fatal:
                lines.append(f"{check.name} (not fatal): {check.detail}")
        if not self.functional:
            lines.append("  seeds_per_trial falls back to 1: each seed trains in its own trial process")
        return "\n".join(lines)

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "functional": self.functional,
            "checks": [asdict(check) for check in self.checks],
        }


def check_norm_layer(make_layer: LayerFactory, *, dim: int = 16, seed: int = 0) -> ConformanceReport:
    """Run every check in CHECKS on layers from `make_layer(dim)` (a norm over the last dimension).

    A layer that raises, returns the wrong thing or is not a module fails the check it was in; nothing
    the layer does raises here. The global RNG is seeded for reproducible inputs and restored after.
    """
    checks: dict[str, Callable[[], CheckResult]] = {
        SHAPE: lambda: _check_shape(make_layer, dim),
        DTYPE: lambda: _check_dtype(make_layer, dim),
        INPUT_GRADIENT: lambda: _check_input_gradient(make_layer, dim),
        PARAMETER_GRADIENT: lambda: _check_parameter_gradient(make_layer, dim),
        DETERMINISTIC: lambda: _check_deterministic(make_layer, dim, seed),
        FUNCTIONAL: lambda: _check_functional(make_layer, dim),
    }
    results = []
    # The caller's RNG stream must not depend on whether (or how often) the layer draws numbers.
    with torch.random.fork_rng(devices=[]), torch.enable_grad():
        for name in CHECKS:
            torch.manual_seed(seed)
            results.append(_guarded(name, checks[name]))
    return ConformanceReport(tuple(results))


def _guarded(name: str, check: Callable[[], CheckResult]) -> CheckResult:
    try:
        return check()
    except Exception as exc:  # the layer's bug is this check's failure, never the caller's crash
        return CheckResult(name, False, f"raised {type(exc).__name__}: {exc}", fatal=name not in NON_FATAL)


def _build(make_layer: LayerFactory, dim: int) -> nn.Module:
    layer = make_layer(dim)
    if not isinstance(layer, nn.Module):
        raise TypeError(f"make_layer({dim}) returned {type(layer).__name__}, not a torch.nn.Module")
    return layer


def _forward(layer: nn.Module, x: torch.Tensor) -> torch.Tensor:
    out = layer(x)
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"forward returned {type(out).__name__}, not a Tensor")
    return out


def _check_shape(make_layer: LayerFactory, dim: int) -> CheckResult:
    layer = _build(make_layer, dim)
    wrong = []
    with torch.no_grad():
        for leading in LEADING_SHAPES:
            x = torch.randn(*leading, dim)
            out = _forward(layer, x)
            if out.shape != x.shape:
                wrong.append(f"{tuple(x.shape)} gave {tuple(out.shape)}")
    if wrong:
        return CheckResult(SHAPE, False, "; ".join(wrong))
    return CheckResult(SHAPE, True, f"(..., {dim}) -> (..., {dim}) for {len(LEADING_SHAPES)} leading shapes")


def _check_dtype(make_layer: LayerFactory, dim: int) -> CheckResult:
    wrong = []
    with torch.no_grad():
        for dtype in (torch.float32, torch.float64):
            layer = _build(make_layer, dim).to(dtype)
            out = _forward(layer, torch.randn(4, dim, dtype=dtype))
            if out.dtype != dtype:
                wrong.append(f"{_dtype_name(dtype)} input gave {_dtype_name(out.dtype)} output")
    if wrong:
        return CheckResult(DTYPE, False, "; ".join(wrong))
    return CheckResult(DTYPE, True, "float32 and float64 kept")


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _backward(layer: nn.Module, x: torch.Tensor) -> None:
    """Backward from a randomly weighted sum: a plain sum of a normalized output is constant (zero
    gradient) for mean-centering norms and would hide a broken backward."""
    out = _forward(layer, x)
    if not out.requires_grad:
        raise RuntimeError("the output is not connected to the autograd graph (detached or under no_grad)")
    (out * torch.randn(out.shape, dtype=out.dtype)).sum().backward()


def _check_input_gradient(make_layer: LayerFactory, dim: int) -> CheckResult:
    layer = _build(make_layer, dim)
    x = torch.randn(2, 3, dim, requires_grad=True)
    _backward(layer, x)
    if x.grad is None:
        return CheckResult(INPUT_GRADIENT, False, "no gradient reached the input (is it detached?)")
    if not torch.isfinite(x.grad).all():
        return CheckResult(INPUT_GRADIENT, False, "the input gradient has NaN or inf entries")
    if not x.grad.any():
        return CheckResult(INPUT_GRADIENT, False, "the input gradient is zero everywhere")
    return CheckResult(INPUT_GRADIENT, True, "finite and non-zero")


def _check_parameter_gradient(make_layer: LayerFactory, dim: int) -> CheckResult:
    layer = _build(make_layer, dim)
    trainable = [(name, p) for name, p in layer.named_parameters() if p.requires_grad]
    if not trainable:
        return CheckResult(PARAMETER_GRADIENT, True, "the layer has no trainable parameters")
    _backward(layer, torch.randn(2, 3, dim, requires_grad=True))
    missing = [name for name, p in trainable if p.grad is None]
    not_finite = [name for name, p in trainable if p.grad is not None and not torch.isfinite(p.grad).all()]
    problems = []
    if missing:
        problems.append(f"no gradient for {', '.join(missing)} (unused in forward?)")
    if not_finite:
        problems.append(f"NaN or inf gradient for {', '.join(not_finite)}")
    if problems:
        return CheckResult(PARAMETER_GRADIENT, False, "; ".join(problems))
    return CheckResult(PARAMETER_GRADIENT, True, f"finite gradients for all {len(trainable)} parameters")


def _check_deterministic(make_layer: LayerFactory, dim: int, seed: int) -> CheckResult:
    x = torch.randn(2, 3, dim)
    torch.manual_seed(seed)
    first = _build(make_layer, dim).eval()
    torch.manual_seed(seed)
    second = _build(make_layer, dim).eval()
    # No reseeding between calls: a layer that draws random numbers in eval mode must show it.
    with torch.no_grad():
        a, b, again = _forward(first, x), _forward(second, x), _forward(first, x)
    if not _identical(a, b):
        return CheckResult(
            DETERMINISTIC,
            False,
            f"two layers built under torch.manual_seed({seed}) differ by up to {_max_difference(a, b):.3g}",
        )
    if not _identical(a, again):
        return CheckResult(
            DETERMINISTIC,
            False,
            f"two eval-mode calls on one input differ by up to {_max_difference(a, again):.3g}",
        )
    return CheckResult(DETERMINISTIC, True, "identical outputs across seeded builds and repeated calls")


def _identical(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and torch.allclose(a, b, rtol=0.0, atol=0.0, equal_nan=True)


def _max_difference(a: torch.Tensor, b: torch.Tensor) -> float:
    if a.shape != b.shape:
        return math.inf
    return float((a - b).detach().abs().nan_to_num(nan=math.inf).max())


def _check_functional(make_layer: LayerFactory, dim: int) -> CheckResult:
    """Several seeds train as one stack (workers.training.stacked): functional_call + vmap over stacked
    parameters, with the parameter gradients from torch.func.grad. Both must match per-copy calls."""
    copies = [_build(make_layer, dim) for _ in range(2)]
    kind = type(copies[0])
    if getattr(kind, "supports_functional", True) is False:
        return CheckResult(
            FUNCTIONAL,
            False,
            f"{kind.__name__} declares supports_functional = False; not run under torch.func",
            fatal=False,
            skipped=True,
        )
    # Distinct parameters per copy: a batched call that used one copy's values for both must show.
    with torch.no_grad():
        for p in copies[1].parameters():
            if p.is_floating_point():
                p.add_(0.1 * torch.randn_like(p))
    for copy in copies:
        copy.eval()  # a comparison needs no train-time randomness
    params, buffers = stack_module_state(copies)
    template = copies[0]  # functional_call swaps in each copy's slice and restores the template after
    x = torch.randn(len(copies), 2, 3, dim)  # (K, B, T, D): one batch per copy, as per seed in training
    weights = torch.randn(len(copies), 2, 3, dim)

    def call(p: dict[str, torch.Tensor], b: dict[str, torch.Tensor], xs: torch.Tensor) -> torch.Tensor:
        return functional_call(template, (p, b), (xs,))

    def loss(
        p: dict[str, torch.Tensor], b: dict[str, torch.Tensor], xs: torch.Tensor, w: torch.Tensor
    ) -> torch.Tensor:
        return (call(p, b, xs) * w).sum()

    trainable = [name for name, p in template.named_parameters() if p.requires_grad]
    batched = vmap(call, randomness="different")(params, buffers, x)
    # Without trainable parameters there is nothing to differentiate (and torch.func.grad would refuse).
    batched_grads = vmap(grad(loss), randomness="different")(params, buffers, x, weights) if trainable else {}

    expected = []
    mismatched_grads: set[str] = set()
    for k, copy in enumerate(copies):
        out = _forward(copy, x[k])
        expected.append(out.detach())
        if not trainable:
            continue
        named = dict(copy.named_parameters())
        references = torch.autograd.grad(
            (out * weights[k]).sum(), [named[name] for name in trainable], allow_unused=True
        )
        for name, reference in zip(trainable, references, strict=True):
            # An unused parameter has no autograd gradient, where torch.func gives it zeros.
            expected_grad = torch.zeros_like(named[name]) if reference is None else reference
            if not _close(batched_grads[name][k], expected_grad):
                mismatched_grads.add(name)
    reference_out = torch.stack(expected)
    if not (batched.shape == reference_out.shape and _close(batched, reference_out)):
        return CheckResult(
            FUNCTIONAL,
            False,
            "vmap over stacked parameters differs from per-copy calls by up to "
            f"{_max_difference(batched, reference_out):.3g}",
            fatal=False,
        )
    if mismatched_grads:
        return CheckResult(
            FUNCTIONAL,
            False,
            f"torch.func gradients differ from per-copy backward for {', '.join(sorted(mismatched_grads))}",
            fatal=False,
        )
    return CheckResult(FUNCTIONAL, True, "vmap over 2 stacked copies matches per-copy outputs and gradients")


def _close(a: torch.Tensor, b: torch.Tensor) -> bool:
    return torch.allclose(a, b, rtol=FUNCTIONAL_RTOL, atol=FUNCTIONAL_ATOL)
