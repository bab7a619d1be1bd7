"""Training under torch.compile (`budget.compile`), falling back to eager where it cannot run.

What runs inside compiled code, for a single-seed run (workers.training.whole_step.CompiledTrainStep)
and for k stacked seeds (workers.training.seed_step.SeedBatchedStep) alike, is the whole training step:

- the forward, the loss and the per-layer gate entropy of the batch, and the backward;
- the AutoNorm-S freeze's per-step part: a frozen selector's gradient is zeroed (so it adds nothing to
  the clipping norm nor to selector_grad_var), and its parameter and AdamW state are held where they
  were (AdamW neither moves nor decays it);
- the running sums an epoch reports: the training loss, the gate entropy the freeze reads, the selector
  gradients of selector_grad_var (workers.training.whole_step.EpochTotals, on the device, in place);
- gradient clipping (per seed when stacked) and the AdamW update: torch's own AdamW arithmetic with
  foreach=True and capturable=True, its learning rate a device tensor (workers.training.optim.GraphAdamW).

One model takes two compiled calls: forward + loss + gate entropy (AOTAutograd compiles its backward,
which `loss.backward()` runs) and the update (one fullgraph graph). Stacked seeds take one: vmap(grad)
and the update in a single fullgraph graph. Under "reduce-overhead" each is replayed as a CUDA graph.

What stays eager, on the host: the batch (gather, augmentation, MixUp/CutMix); the lr schedule's step,
whose new value a fill per parameter group writes into the lr tensors (no host sync, and no recompile:
the graph reads the lr as data); for a single model, the autograd call that starts its backward and
setting its gradients to None after the update; evaluation (the eager module: other batch sizes, no
backward, a small share of a trial); the AutoNorm-S freeze decision, taken once per epoch from the
entropy summed on the device (one read per epoch, as for the loss); and checkpoints. The optimizer stays
the eager run's object (float lr, eager flags), so a compiled run's checkpoint is an eager run's, and
either resumes the other. One difference is visible on the model: under compile a frozen selector keeps
requires_grad (the step holds it instead; a flip would recompile the forward).

Modes (TrainConfig.compile):
- "none": the eager step (the module itself, `optimizer.step()`).
- "default": inductor kernels (fused elementwise work, fewer launches).
- "reduce-overhead": inductor plus CUDA graphs, so a small model at a small batch is no longer bound by
  kernel launches. On CPU it is "default" (warned).

Recompiles. Shapes stay static (dynamic=False): the last, shorter batch of an epoch gets its own graph,
compiled once and replayed every epoch, so nothing is dropped or padded and a run trains on exactly the
batches an eager run does. The freeze is data the graphs read (a per-layer, per-seed frozen-flag
tensor), never a guard, and a new lr is data too: a trial compiles once per batch shape (a single model:
its forward per shape plus one update) and never again, whether or not and whenever the freeze fires
(tests/workers/training/test_whole_step.py counts the graphs). The recompiles a process meets stay far
below dynamo's limit, which is raised for the many trials one process runs (RECOMPILE_LIMIT).

Numerics: a compiled run matches the eager one to float tolerance, not bit for bit (the kernels sum in
another order; the compiled AdamW reads its lr as a float32 tensor), and inductor draws dropout,
drop-path and Gumbel noise from its own Philox stream (seeded from torch's generator), so it is
reproducible for its seed but does not repeat the eager run's noise. On CUDA the AutoNorm layer compiles
as its eager composite or its Triton kernels; the fused C kernel of the CPU path is opaque to dynamo.

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
    recompile) warns once and switches this call to eager for the rest of the run, after `on_fallback()`
    (which puts what the compiled call relied on back into its eager form). That is safe for a call that
    changes no state before it returns, as a forward does, and for one compiled with `fullgraph`: a single
    graph is traced and compiled whole before any of it runs, so a failure leaves every tensor untouched.
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        mode: str,
        device: torch.device,
        *,
        backend: str | Callable[..., Any] = "inductor",
        fullgraph: bool = False,
        starts_step: bool = True,
        on_fallback: Callable[[], None] | None = None,
    ) -> None:
        self.fn = fn
        self.requested_mode = mode
        self.mode = "none"  # the mode it compiles with: requested_mode, or "default" for CUDA graphs on CPU
        self.backend = backend
        self.cuda_graphs = False
        # Under CUDA graphs: whether a call begins a new training step (the outputs of the previous one may
        # be overwritten). A second compiled call within the same step (the update after the forward and
        # backward) says False, so the first call's outputs stay valid for it.
        self.starts_step = starts_step
        self._on_fallback = on_fallback
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
            self.mode = mode
            self._compiled = torch.compile(fn, mode=mode, dynamic=False, fullgraph=fullgraph)
        else:  # another backend (tests, benchmark smoke runs): no inductor mode to pass
            self.mode = mode
            self._compiled = torch.compile(fn, backend=backend, dynamic=False, fullgraph=fullgraph)
        raise_recompile_limit()

    @property
    def active(self) -> bool:
        """True while calls go through torch.compile."""
        return self._compiled is not None

    def __call__(self, *args: Any) -> Any:
        if self._compiled is None:
            return self.fn(*args)
        if self.cuda_graphs and self.starts_step:
            # A call that starts a training step: outputs of the previous step's replays (already consumed
            # by its loss, backward and update) may be overwritten.
            torch.compiler.cudagraph_mark_step_begin()
        try:
            return self._compiled(*args)
        except torch._dynamo.exc.TorchDynamoException as error:
            self._warn(f"the compiler failed ({type(error).__name__}: {str(error).splitlines()[0][:300]}); "
                       "training continues eager")  # fmt: skip
            self._compiled, self.cuda_graphs, self.mode = None, False, "none"
            if self._on_fallback is not None:
                self._on_fallback()
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
