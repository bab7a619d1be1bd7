"""Training under torch.compile (`budget.compile`), falling back to eager where it cannot run.

A single-seed run compiles its training forward (CompiledForward); a seed-batched run compiles its
vmap(grad) of the k stacked seeds (CompiledCall, workers.training.seed_step).

Modes (TrainConfig.compile):
- "none": the module itself.
- "default": inductor kernels (fused elementwise work, fewer launches).
- "reduce-overhead": inductor plus CUDA graphs: the forward and its backward replay as one graph each, so
  a small model at a small batch is no longer bound by kernel launches. On CPU it is "default" (warned).

Shapes stay static (dynamic=False): the last, shorter batch of an epoch gets its own graph, compiled once
and replayed every epoch, so nothing is dropped or padded and a run trains on exactly the batches an eager
run does. The AutoNorm-S freeze (requires_grad False on the selectors) fails a guard and compiles once
more (a seed-batched run freezes by masking gradients outside the compiled call, and never recompiles
for it); the recompiles stay far below dynamo's recompile limit. Only the training forward and its
backward are compiled: evaluation runs the eager module (other batch sizes, no backward, a small share of
a trial), and clipping and the optimizer step run eagerly.

Numerics: a compiled run matches the eager one to float tolerance, not bit for bit, and inductor draws
dropout, drop-path and Gumbel noise from its own Philox stream (seeded from torch's generator), so it is
reproducible for its seed but does not repeat the eager run's noise. On CUDA the AutoNorm layer compiles
as its eager composite (one graph, no breaks); the fused C kernel of the CPU path is opaque to dynamo.

This module imports torch only, so scripts without the service's dependencies can load it.
"""

from __future__ import annotations

import shutil
import warnings
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

__all__ = [
    "RECOMPILE_LIMIT",
    "CompiledCall",
    "CompiledForward",
    "compiler_unavailable_reason",
    "raise_recompile_limit",
]


def compiler_unavailable_reason(device: torch.device) -> str | None:
    """Why torch.compile's inductor backend cannot run on `device` here, or None when it can."""
    try:
        import torch._dynamo

        if hasattr(torch._dynamo, "is_dynamo_supported") and not torch._dynamo.is_dynamo_supported():
            return "torch.compile does not support this Python version"
    except Exception as error:  # a broken or stripped torch install
        return f"torch._dynamo cannot be imported ({error})"
    if device.type == "cuda":
        from torch.utils._triton import has_triton

        return None if has_triton() else "inductor needs Triton on CUDA and it is not installed"
    if device.type == "cpu":
        try:
            from torch._inductor.cpp_builder import get_cpp_compiler

            compiler: str | None = get_cpp_compiler()
        except Exception:
            compiler = shutil.which("g++") or shutil.which("clang++")
        return None if compiler and shutil.which(compiler) else "inductor needs a C++ compiler (g++) on CPU"
    return f"no torch.compile support assumed for device type {device.type!r}"


# Graphs one code object may keep. Every seed-batched step of a process compiles the same code object
# (torch.func's vmap wrapper), one entry per configuration and batch shape; a warm trial process runs many
# trials, and past dynamo's default of 8 it would run the rest eagerly with no more than a log line.
RECOMPILE_LIMIT = 64


def raise_recompile_limit() -> None:
    """Dynamo's per-code-object limit raised to RECOMPILE_LIMIT (never lowered)."""
    import torch._dynamo

    config = torch._dynamo.config
    config.recompile_limit = max(config.recompile_limit, RECOMPILE_LIMIT)
    config.accumulated_recompile_limit = max(config.accumulated_recompile_limit, 4 * RECOMPILE_LIMIT)


class CompiledCall:
    """Calls `fn(*args)` through torch.compile(mode=...); eager when mode is "none" or compiling fails.

    A compile failure (no compiler found up front, or a dynamo or backend error at the first call or a
    recompile) warns once and switches this call to eager for the rest of the run. That is safe only for
    a call that changes no state before it returns, as a forward or a gradient computation does.
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        mode: str,
        device: torch.device,
        *,
        backend: str | Callable[..., Any] = "inductor",
    ) -> None:
        self.fn = fn
        self.requested_mode = mode
        self.cuda_graphs = False
        self._compiled: Callable[..., Any] | None = None
        if mode == "none":
            return
        if mode not in ("default", "reduce-overhead"):
            raise ValueError(f"compile must be one of none, default, reduce-overhead, got {mode!r}")
        if backend == "inductor":
            reason = compiler_unavailable_reason(device)
            if reason is not None:
                self._warn(f"{reason}; training runs eager")
                return
            if mode == "reduce-overhead" and device.type != "cuda":
                warnings.warn(
                    f"compile: reduce-overhead uses CUDA graphs, which need a CUDA device, not "
                    f"{device.type}; compiling with mode default instead",
                    stacklevel=3,
                )
                mode = "default"
            self.cuda_graphs = mode == "reduce-overhead"
            self._compiled = torch.compile(fn, mode=mode, dynamic=False)
        else:  # another backend (tests, benchmark smoke runs): no inductor mode to pass
            self._compiled = torch.compile(fn, backend=backend, dynamic=False)
        raise_recompile_limit()

    @property
    def active(self) -> bool:
        """True while calls go through torch.compile."""
        return self._compiled is not None

    def __call__(self, *args: Any) -> Any:
        if self._compiled is None:
            return self.fn(*args)
        if self.cuda_graphs:
            # Each call starts a new training step: outputs of the previous replay (already consumed by
            # its loss and backward) may be overwritten.
            torch.compiler.cudagraph_mark_step_begin()
        try:
            return self._compiled(*args)
        except torch._dynamo.exc.TorchDynamoException as error:
            self._warn(f"the compiler failed ({type(error).__name__}: {str(error).splitlines()[0][:300]}); "
                       "training continues eager")  # fmt: skip
            self._compiled, self.cuda_graphs = None, False
            return self.fn(*args)

    def _warn(self, what: str) -> None:
        warnings.warn(f"compile: {self.requested_mode} requested but {what}", RuntimeWarning, stacklevel=3)


class CompiledForward(CompiledCall):
    """The training forward `module(x)` as a CompiledCall."""

    def __init__(
        self,
        module: nn.Module,
        mode: str,
        device: torch.device,
        *,
        backend: str | Callable[..., Any] = "inductor",
    ) -> None:
        super().__init__(module, mode, device, backend=backend)
        self.module = module
