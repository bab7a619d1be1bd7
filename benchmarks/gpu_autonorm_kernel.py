"""The Triton norm kernels on a CUDA GPU: correctness, then layer and model timings.

The mixed norm (models/norms/mixed_triton.py, AutoNorm's gate in torch) and the whole-layer AutoNorm
kernel (models/norms/autonorm_triton.py; on by default where this script measured it faster:
`autonorm.layer_kernel_pays_off`). Each path is forced in turn below, whatever the defaults.

    python3 benchmarks/gpu_autonorm_kernel.py [--iters N] [--compile]   # CUDA, torch + triton; < 60 s

Needs only torch, triton and models/. First every check below must pass, or the script stops with exit
status 1 and prints what differed (no timings are printed then):

- the kernels' forward and all five gradients (x, alpha, cl, cd, c0) against the eager composite
  `mixed_norm_reference` evaluated in float64 on the same values: float32 inputs tightly, bfloat16
  loosely, with and without the LayerNorm term, odd widths, T = 1, one sample split over programs;
- under bf16 autocast (output dtype and values), and vmap(grad) over stacked seeds with a per-seed alpha;
- the AutoNorm, DyT, Random Selector and FiLM layers, Triton path against their eager path (values and
  every parameter gradient), and one CUDA-graph replay of AutoNorm's forward+backward against eager;
- the whole-layer AutoNorm kernel against the mixed-norm path in training mode (the same Gumbel draw),
  soft and hard, with and without padded tokens, float32 and bfloat16 inputs, and its CUDA-graph replay.

Then forward+backward time per call of nn.LayerNorm, AutoNorm, DyT and the bare mixed norm (given
coefficients), each on the eager composite and on the Triton path (`use_path` below), at
(128, 65, 128) and (64, 197, 768), float32 and bf16 autocast; with --compile also torch.compile'd
nn.LayerNorm and AutoNorm. Two columns: eager calls (the host's dispatch and autograd work included,
as training runs without graphs) and CUDA-graph replays of one captured forward+backward (device time,
as training under CUDA graphs runs). Each time: CUDA events around `--iters` calls after warm-up; each
ratio divides by the plain nn.LayerNorm row measured the same way in the same row group. Layers run in
training mode (AutoNorm draws its Gumbel noise; Random Selector is not timed).

Last, the ViT-Lite paper model's forward+backward at batch 128 under bf16 autocast (no optimizer step,
SYNTHETIC inputs), FrozenLN against AutoNorm-S on each of its three CUDA paths, eager and as a CUDA-graph
replay: the step-time ratio issue 9 asks to bring to 1.2x; and DyT, eager composite against Triton.
The defaults: DyT and the other mixed norms take the composite in plain eager calls (measured faster
there: they are host-bound) and the mixed-norm kernels where launches are captured; AutoNorm takes the
whole-layer kernel in plain eager calls and, up to D = 128, where launches are captured, else the
mixed-norm path. So at D = 128 the "whole-layer Triton" rows are what an AutoNorm trial runs by default.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # run as a file, not as a module
    sys.path.insert(0, str(REPO_ROOT))

import torch  # noqa: E402

SHAPES = ((128, 65, 128), (64, 197, 768))  # (B, T, D): the ViT-Lite paper layer and a ViT-B/16 layer
WARMUP_CALLS = 10
# The kernel switches as the modules set them at import (use_path(None) restores them).
_IMPORT_DEFAULTS: list[bool] = []
EPS = 1e-5


class MismatchError(AssertionError):
    """A Triton result differs from the eager composite beyond its tolerance."""


def require(condition: bool, what: str) -> None:
    if not condition:
        raise MismatchError(what)


def assert_close(got: torch.Tensor, expected: torch.Tensor, rtol: float, atol: float, what: str) -> None:
    try:
        torch.testing.assert_close(got.double(), expected.double(), rtol=rtol, atol=atol)
    except AssertionError as error:
        raise MismatchError(f"{what}: {error}") from None


# ----- correctness ----------------------------------------------------------------------------------------


def kernel_vs_float64(
    shape: tuple[int, int, int], dtype: torch.dtype, use_ln: bool, rtol: float, atol: float, autocast: bool
) -> None:
    """mixed_norm_triton's output and five gradients against the float64 composite on the same values."""
    from models.norms.mixed import mixed_norm_reference
    from models.norms.mixed_triton import mixed_norm_triton

    batch, tokens, dim = shape
    x = (
        torch.randn(batch, tokens, dim, device="cuda") * 2 + torch.randn(batch, tokens, 1, device="cuda")
    ).to(dtype)
    inputs = (
        x,
        torch.tensor(0.8, device="cuda"),
        *(torch.randn(batch, dim, device="cuda") for _ in range(3)),
    )
    upstream = torch.randn(batch, tokens, dim, device="cuda")

    def run(fn: Callable[..., torch.Tensor], tensors: tuple[torch.Tensor, ...], under_autocast: bool):  # type: ignore[no-untyped-def]
        leaves = [t.detach().clone().requires_grad_(True) for t in tensors]
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=under_autocast):
            y = fn(*leaves, EPS, use_ln)
        grads = torch.autograd.grad((y * upstream.to(y.dtype)).sum(), leaves, allow_unused=True)
        return y, grads

    y, grads = run(mixed_norm_triton, inputs, autocast)
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
        eager_dtype = mixed_norm_reference(*inputs, EPS, use_ln).dtype
    label = f"kernel {shape} {dtype} use_ln={use_ln} autocast={autocast}"
    require(y.dtype == eager_dtype, f"{label}: output dtype {y.dtype}, eager composite gives {eager_dtype}")
    # The exact values: float64, no autocast (which would round the eager composite's tanh to bf16).
    y_ref, grads_ref = run(mixed_norm_reference, tuple(t.double() for t in inputs), False)
    assert_close(y, y_ref, rtol, atol, f"{label}: output")
    for name, grad, grad_ref in zip(("x", "alpha", "cl", "cd", "c0"), grads, grads_ref, strict=True):
        require((grad is None) == (grad_ref is None), f"{label}: grad {name} presence differs")
        if grad is not None:
            # dalpha sums B * T * D terms: its tolerance scales with its size.
            scale = max(1.0, float(grad_ref.abs().max())) if name == "alpha" else 1.0
            assert_close(grad, grad_ref, rtol, atol * scale, f"{label}: grad {name}")


def seeds_under_vmap_grad() -> None:
    """vmap(grad) over 4 stacked seeds, each with its own alpha, against the eager composite."""
    from models.norms.mixed import mixed_norm_reference
    from models.norms.mixed_triton import mixed_norm_triton

    seeds, batch, tokens, dim = 4, 8, 65, 128
    params = {name: torch.randn(seeds, dim, device="cuda") for name in ("lw", "lb", "dw", "db", "probe")}
    params["alpha"] = torch.rand(seeds, device="cuda") + 0.2
    xs = torch.randn(seeds, batch, tokens, dim, device="cuda")
    upstream = torch.randn(seeds, batch, tokens, dim, device="cuda")

    def grads(norm_fn):  # type: ignore[no-untyped-def]
        def loss(p, x, g):  # type: ignore[no-untyped-def]
            gate = torch.sigmoid(x.mean(dim=1) @ p["probe"]).unsqueeze(-1)  # (B, 1)
            cl, cd, c0 = gate * p["lw"], (1 - gate) * p["dw"], gate * p["lb"] + (1 - gate) * p["db"]
            return (norm_fn(x, p["alpha"], cl, cd, c0, EPS) * g).sum()

        return torch.func.vmap(torch.func.grad(loss, argnums=(0, 1)))(params, xs, upstream)

    (got_params, got_x), (ref_params, ref_x) = grads(mixed_norm_triton), grads(mixed_norm_reference)
    for name in params:
        scale = max(1.0, float(ref_params[name].abs().max()))
        assert_close(got_params[name], ref_params[name], 1e-4, 1e-4 * scale, f"vmap(grad) grad {name}")
    assert_close(got_x, ref_x, 1e-4, 1e-4, "vmap(grad) grad x")


def layers_vs_eager_path() -> None:
    """Each mixed-norm layer (eval: the same gates twice) on the Triton path against its eager path."""
    from models.norms import AutoNorm, DyT, FiLMNorm, RandomSelectorNorm

    x = torch.randn(16, 65, 128, device="cuda")
    upstream = torch.randn_like(x)
    for layer_cls in (AutoNorm, DyT, RandomSelectorNorm, FiLMNorm):
        layer = layer_cls(128).to("cuda").eval()
        with torch.no_grad():
            for param in layer.parameters():
                param.add_(0.1 * torch.randn_like(param))
        results = []
        for path in ("mixed", "eager"):
            use_path(path)
            leaf = x.clone().requires_grad_(True)
            params = list(layer.parameters())
            y = layer(leaf)
            results.append([y, *torch.autograd.grad(y, [leaf, *params], upstream)])
        use_path(None)
        for index, (got, expected) in enumerate(zip(*results, strict=True)):
            assert_close(got, expected, 1e-4, 1e-4, f"{layer_cls.__name__} output/grad #{index}")


def use_path(path: str | None) -> None:
    """Route the mixed norms on CUDA, in eager calls and captured ones alike: "eager" (the composite),
    "mixed" (the mixed-norm kernels, AutoNorm's gate in torch) or "layer" (AutoNorm's whole-layer
    kernel, at every width). None restores the defaults: the composite in plain eager calls and the
    mixed-norm kernels under torch.compile and CUDA-graph capture, for AutoNorm the whole-layer kernel
    where its "auto" rule takes it (models/norms/autonorm.py, layer_kernel_pays_off)."""
    from models.norms import autonorm, mixed

    switches = ((mixed, "TRITON_ON_CUDA"), (mixed, "TRITON_IN_PLAIN_EAGER"),
                (autonorm, "TRITON_LAYER_ON_CUDA"), (autonorm, "LAYER_KERNEL_EVERYWHERE"))  # fmt: skip
    if not _IMPORT_DEFAULTS:  # what the modules set at import, from this run's environment
        _IMPORT_DEFAULTS.extend(getattr(module, name) for module, name in switches)
    if path is None:
        for (module, name), value in zip(switches, _IMPORT_DEFAULTS, strict=True):
            setattr(module, name, value)
        return
    mixed.TRITON_ON_CUDA = path != "eager"
    mixed.TRITON_IN_PLAIN_EAGER = path in ("mixed", "layer")
    autonorm.TRITON_LAYER_ON_CUDA = autonorm.LAYER_KERNEL_EVERYWHERE = path == "layer"


def whole_layer_vs_mixed_path(dtype: torch.dtype, hard: bool, padded: bool, rtol: float, atol: float) -> None:
    """AutoNorm in training mode through the whole-layer kernel against the mixed-norm path, one draw."""
    from models.norms import AutoNorm

    torch.manual_seed(1)
    layer = AutoNorm(128, tau=0.7, hard=hard).to("cuda").train()
    with torch.no_grad():
        for param in layer.parameters():
            param.add_(0.3 * torch.randn_like(param))
    x = torch.randn(16, 65, 128, device="cuda").to(dtype)
    upstream = torch.randn(16, 65, 128, device="cuda")
    mask = (torch.rand(16, 65, device="cuda") > 0.3) if padded else None
    if mask is not None:
        mask[:, 0] = True
    results = []
    for path in ("layer", "mixed"):
        use_path(path)
        leaf = x.clone().requires_grad_(True)
        torch.manual_seed(2)  # the same Gumbel draw on both paths
        y = layer(leaf, token_mask=mask)
        results.append(
            [y.float(), layer.last_probs, *torch.autograd.grad(y, [leaf, *layer.parameters()], upstream)]
        )
    use_path(None)
    label = f"whole-layer AutoNorm {dtype} hard={hard} padded={padded}"
    for index, (got, expected) in enumerate(zip(*results, strict=True)):
        # Parameter gradients sum B * T terms: the tolerance scales with their size.
        scale = max(1.0, float(expected.detach().abs().max()))
        assert_close(got, expected, rtol, atol * scale, f"{label}, output/probs/grad #{index}")


def graph_replay_vs_eager(path: str = "mixed") -> None:
    """One captured AutoNorm forward+backward replayed on new data equals the eager call on that data."""
    from models.norms import AutoNorm

    use_path(path)
    layer = AutoNorm(128).to("cuda").eval()
    with torch.no_grad():
        layer.selector.fc2.weight.normal_(std=0.5)
    step = FwdBwd(layer, torch.randn(32, 65, 128, device="cuda"))
    graph = step.capture()
    new_x, new_upstream = torch.randn_like(step.x), torch.randn_like(step.upstream)
    step.x.detach().copy_(new_x)
    step.upstream.copy_(new_upstream)
    graph.replay()
    torch.cuda.synchronize()
    replayed = [t.clone() for t in step.outputs]
    step.outputs = []
    eager = step()
    for index, (got, expected) in enumerate(zip(replayed, eager, strict=True)):
        assert_close(
            got, expected, 1e-5, 1e-5, f"CUDA-graph replay of AutoNorm ({path}), output/grad #{index}"
        )
    use_path(None)


def run_checks() -> int:
    """Every correctness check; returns how many ran (each raises MismatchError on a difference)."""
    count = 0
    for shape in ((128, 65, 128), (3, 7, 200), (5, 1, 96), (1, 300, 96), (2, 9, 768)):
        for use_ln in (True, False):
            kernel_vs_float64(shape, torch.float32, use_ln, rtol=2e-5, atol=2e-5, autocast=False)
            kernel_vs_float64(shape, torch.bfloat16, use_ln, rtol=2e-2, atol=3e-2, autocast=False)
            count += 2
    kernel_vs_float64((128, 65, 128), torch.bfloat16, True, rtol=2e-2, atol=3e-2, autocast=True)
    kernel_vs_float64((128, 65, 128), torch.float32, True, rtol=2e-5, atol=2e-5, autocast=True)
    seeds_under_vmap_grad()
    layers_vs_eager_path()
    graph_replay_vs_eager()
    return count + 5


def run_whole_layer_checks() -> int:
    """The whole-layer kernel's checks, kept apart: it is the candidate, so a failure here drops only
    its own rows from the timings."""
    count = 0
    for dtype in (torch.float32, torch.bfloat16):
        # bf16 inputs give bf16 input gradients, which the two paths may round a unit apart.
        tolerance = 1e-4 if dtype == torch.float32 else 2e-2
        for hard in (False, True):
            for padded in (False, True):
                whole_layer_vs_mixed_path(dtype, hard, padded, rtol=tolerance, atol=tolerance)
                count += 1
    graph_replay_vs_eager("layer")
    return count + 1


# ----- timing ---------------------------------------------------------------------------------------------


class FwdBwd:
    """One forward+backward of `module` on a fixed input: output, input grad and parameter grads."""

    def __init__(
        self, module: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, autocast: bool = False
    ):
        self.module, self.autocast = module, autocast
        self.x = x.detach().clone().requires_grad_(True)
        # Shaped like the output: made by the first call (a model's logits are not its input's shape).
        self.upstream: torch.Tensor | None = None
        params = module.parameters() if isinstance(module, torch.nn.Module) else ()
        self.inputs = [self.x, *(p for p in params if p.requires_grad)]
        self.outputs: list[torch.Tensor] = []

    def __call__(self) -> list[torch.Tensor]:
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=self.autocast):
            y = self.module(self.x)
        if self.upstream is None:
            self.upstream = torch.randn(y.shape, device=y.device)
        self.outputs = [y, *torch.autograd.grad(y, self.inputs, self.upstream.to(y.dtype))]
        return self.outputs

    def capture(self) -> torch.cuda.CUDAGraph:
        # Autograd graphs still alive from earlier calls keep their leaves' gradient accumulators on the
        # stream that made them; capture needs fresh ones on its own stream, so drop every such graph.
        self.outputs = []
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up off the default stream, as graph capture requires
            for _ in range(3):
                self()
        self.outputs = []
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self()
        return graph


def time_per_call(run: Callable[[], object], iters: int) -> float:
    """Microseconds per call of `run`, between CUDA events, after warm-up calls."""
    for _ in range(WARMUP_CALLS):
        run()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(iters):
        run()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1000.0 / iters


@dataclass
class Row:
    label: str
    eager_us: float
    graph_us: float
    error: str = ""  # why the row could not be timed (its times are then NaN)


def progress(message: str) -> None:
    """One line per finished measurement on stderr, so a run cut off at its limit still says how far it got."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


class BareMixedNorm(torch.nn.Module):
    """`mixed_norm` alone with fixed (B, D) coefficients: the kernel without AutoNorm's gate."""

    def __init__(self, batch: int, dim: int) -> None:
        super().__init__()
        self.alpha = torch.nn.Parameter(torch.tensor(0.5))
        self.coefficients = torch.nn.Parameter(torch.randn(3, batch, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        from models.norms.mixed import mixed_norm

        cl, cd, c0 = self.coefficients.unbind(0)
        return mixed_norm(x, self.alpha, cl, cd, c0, EPS)


def timed_row(label: str, module: torch.nn.Module, x: torch.Tensor, autocast: bool, iters: int) -> Row:
    """Eager and CUDA-graph-replay microseconds per forward+backward of module on x. A row that fails (a
    compile error, a capture the path does not support) is reported as failed and the run goes on: it is
    one-shot on a lent machine."""
    try:
        step = FwdBwd(module.to("cuda").train(), x, autocast=autocast)
        eager_us = time_per_call(step, iters)
        graph = step.capture()
        row = Row(label, eager_us, time_per_call(graph.replay, iters))
        del graph
    except Exception as error:
        first_line = str(error).splitlines()[0][:160] if str(error) else ""
        row = Row(label, float("nan"), float("nan"), f"{type(error).__name__}: {first_line}")
        torch.cuda.synchronize()
    progress(f"{label}: {row.error or f'{row.eager_us:.1f} us eager, {row.graph_us:.1f} us CUDA graph'}")
    return row


def time_rows(
    shape: tuple[int, int, int], autocast: bool, iters: int, compiled: bool, whole_layer: bool
) -> list[Row]:
    from models.norms import AutoNorm, DyT

    batch, tokens, dim = shape
    dtype = torch.bfloat16 if autocast else torch.float32
    x = torch.randn(batch, tokens, dim, device="cuda", dtype=dtype)
    layers: list[tuple[str, torch.nn.Module, str]] = [
        ("nn.LayerNorm", torch.nn.LayerNorm(dim), "mixed"),
        ("AutoNorm, eager composite", AutoNorm(dim), "eager"),
        ("AutoNorm, Triton", AutoNorm(dim), "mixed"),
        ("AutoNorm, whole-layer Triton", AutoNorm(dim), "layer"),
        ("DyT, eager composite", DyT(dim), "eager"),
        ("DyT, Triton", DyT(dim), "mixed"),
        ("mixed norm alone, eager composite", BareMixedNorm(batch, dim), "eager"),
        ("mixed norm alone, Triton", BareMixedNorm(batch, dim), "mixed"),
    ]
    if compiled:
        layers += [
            ("nn.LayerNorm, torch.compile", torch.compile(torch.nn.LayerNorm(dim).cuda()), "mixed"),
            ("AutoNorm, Triton, torch.compile", torch.compile(AutoNorm(dim).cuda()), "mixed"),
            ("AutoNorm, whole-layer Triton, torch.compile", torch.compile(AutoNorm(dim).cuda()), "layer"),
        ]
    rows = []
    for label, layer, path in layers:
        if path == "layer" and not whole_layer:
            continue
        use_path(path)
        rows.append(timed_row(label, layer, x, autocast, iters))
    use_path(None)
    return rows


def model_rows(iters: int, whole_layer: bool) -> list[Row]:
    """ViT-Lite paper, batch 128, bf16 autocast: FrozenLN, then AutoNorm-S on each CUDA path."""
    from models import build_model
    from studies.methods import norm_for_method

    fields = {"image_size": 32, "in_channels": 3, "num_classes": 10}
    images = torch.randn(128, 3, 32, 32, device="cuda")  # SYNTHETIC: speed only
    runs = [
        ("ViT-Lite FrozenLN", "frozen_ln", "mixed"),
        ("ViT-Lite AutoNorm-S, eager composite", "autonorm_s", "eager"),
        ("ViT-Lite AutoNorm-S, Triton mixed norm", "autonorm_s", "mixed"),
        ("ViT-Lite AutoNorm-S, whole-layer Triton", "autonorm_s", "layer"),
        ("ViT-Lite DyT, eager composite", "dyt", "eager"),
        ("ViT-Lite DyT, Triton mixed norm", "dyt", "mixed"),
    ]
    rows = []
    for label, method, path in runs:
        if path == "layer" and not whole_layer:
            continue
        use_path(path)
        torch.manual_seed(0)
        model = build_model("vit_lite_paper", {"norm": norm_for_method(method).kind, **fields})
        rows.append(timed_row(label, model, images, True, max(10, iters // 4)))
    use_path(None)
    return rows


def table(results: dict[str, list[Row]]) -> str:
    lines = [
        "| shape, precision | layer fwd+bwd | eager us/call | x first row | CUDA graph us/call | x first row |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for group, rows in results.items():
        layernorm = rows[0]
        for row in rows:
            if row.error:
                lines.append(f"| {group} | {row.label} | failed: {row.error} | | | |")
                continue
            lines.append(
                f"| {group} | {row.label} | {row.eager_us:.1f} | {row.eager_us / layernorm.eager_us:.2f}x "
                f"| {row.graph_us:.1f} | {row.graph_us / layernorm.graph_us:.2f}x |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iters", type=int, default=100, help="timed calls per measurement")
    parser.add_argument(
        "--compile",
        action="store_true",
        help="also time torch.compile'd nn.LayerNorm and AutoNorm (adds about a minute of compilation)",
    )
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("needs a CUDA device (torch.cuda.is_available() is False)", file=sys.stderr)
        return 2
    import triton

    # Each compiled layer below (2 shapes x 2 precisions x 2 AutoNorm paths) is a recompile of the same
    # forward code: past dynamo's default limit of 8 it would silently run eager and time the wrong thing.
    torch._dynamo.config.cache_size_limit = 64
    started = time.perf_counter()
    torch.manual_seed(0)
    try:
        checks = run_checks()
    except MismatchError as error:
        print(f"MISMATCH between the Triton path and the eager composite: {error}", file=sys.stderr)
        return 1
    print(f"All {checks} correctness checks passed ({time.perf_counter() - started:.1f} s).")
    try:
        whole_layer_checks = run_whole_layer_checks()
    except Exception as error:  # a mismatch, or the kernel failing to compile on this GPU
        use_path(None)
        whole_layer = False
        print(f"Whole-layer AutoNorm kernel FAILED its checks, so its rows are left out: {error}\n")
    else:
        whole_layer = True
        print(f"All {whole_layer_checks} whole-layer AutoNorm checks passed.\n")
    results = {}
    for shape in SHAPES:
        for autocast in (False, True):
            group = f"{shape}, {'bf16 autocast' if autocast else 'float32'}"
            results[group] = time_rows(shape, autocast, args.iters, args.compile, whole_layer)
            print(table({group: results[group]}), file=sys.stderr, flush=True)
    results["ViT-Lite paper model, batch 128, bf16 autocast"] = model_rows(args.iters, whole_layer)
    device = torch.cuda.get_device_name()
    print(f"Device: {device}; torch {torch.__version__}; triton {triton.__version__}.\n")
    print(table(results))
    print(f"\nWhole run {time.perf_counter() - started:.1f} s.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
