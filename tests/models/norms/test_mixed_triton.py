"""The Triton mixed norm (models/norms/mixed_triton.py) against the eager composite that defines it.

On a CUDA machine the kernels run compiled on the GPU; elsewhere they run under Triton's interpreter on
CPU tensors (tests/models/norms/conftest.py turns it on before the module is imported), so the same
kernels are checked in CI without a GPU. Tests of the dispatch from `mixed_norm`, the layers and
torch.compile need CUDA and skip without it.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from models.norms import AutoNorm, DyT, FiLMNorm, RandomSelectorNorm
from models.norms import autonorm as autonorm_module
from models.norms import mixed as mixed_module
from models.norms.mixed import mixed_norm, mixed_norm_reference

mixed_triton = pytest.importorskip("models.norms.mixed_triton", reason="triton is not installed")

HAS_CUDA = torch.cuda.is_available()
DEVICE = "cuda" if HAS_CUDA else "cpu"
if not HAS_CUDA and type(mixed_triton._mixed_norm_forward_kernel).__name__ != "InterpretedFunction":
    pytest.skip(
        "no CUDA device and the kernels were compiled for one: set TRITON_INTERPRET=1 before "
        "models.norms.mixed_triton is imported (tests/models/norms/conftest.py does)",
        allow_module_level=True,
    )
needs_cuda = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device")

EPS = 1e-5
Tensors = tuple[torch.Tensor, ...]


def autograd_node_names(y: torch.Tensor) -> set[str]:
    """Class names of every node in y's autograd graph."""
    names: set[str] = set()
    stack, seen = [y.grad_fn], set()
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        names.add(type(node).__name__)
        stack.extend(next_node for next_node, _ in node.next_functions)
    return names


KERNEL_NODE = "_MixedNormFunctionBackward"


def make_inputs(
    batch: int,
    tokens: int,
    dim: int,
    dtype: torch.dtype = torch.float32,
    coef_dtype: torch.dtype = torch.float32,
) -> Tensors:
    """x (B, T, D) with a per-row offset and scale (so LayerNorm has work to do), alpha, cl, cd, c0 (B, D)."""
    x = torch.randn(batch, tokens, dim, device=DEVICE) * 2.0 + torch.randn(batch, tokens, 1, device=DEVICE)
    alpha = torch.tensor(0.8, device=DEVICE)
    cl, cd, c0 = (torch.randn(batch, dim, device=DEVICE, dtype=coef_dtype) for _ in range(3))
    return x.to(dtype), alpha, cl, cd, c0


def output_and_grads(
    fn: Callable[..., torch.Tensor], inputs: Tensors, upstream: torch.Tensor, use_ln: bool
) -> tuple[torch.Tensor, list[torch.Tensor | None]]:
    leaves = [t.detach().clone().requires_grad_(True) for t in inputs]
    y = fn(*leaves, EPS, use_ln)
    grads = torch.autograd.grad((y * upstream.to(y.dtype)).sum(), leaves, allow_unused=True)
    return y.detach(), list(grads)


def float64_reference(inputs: Tensors, upstream: torch.Tensor, use_ln: bool):  # type: ignore[no-untyped-def]
    """The eager composite on the same values in float64: what the kernels approximate in float32."""
    return output_and_grads(
        mixed_norm_reference, tuple(t.double() for t in inputs), upstream.double(), use_ln
    )


def assert_matches(got, expected, rtol: float, atol: float) -> None:  # type: ignore[no-untyped-def]
    (y, grads), (y_ref, grads_ref) = got, expected
    torch.testing.assert_close(y.double(), y_ref, rtol=rtol, atol=atol)
    for name, grad, grad_ref in zip(("x", "alpha", "cl", "cd", "c0"), grads, grads_ref, strict=True):
        if grad_ref is None:
            assert grad is None, name
            continue
        assert grad is not None, name
        torch.testing.assert_close(
            grad.double(), grad_ref, rtol=rtol, atol=atol, msg=lambda m, n=name: f"{n}: {m}"
        )


@pytest.mark.parametrize("dim", [96, 128, 200])
@pytest.mark.parametrize("batch,tokens", [(3, 5), (1, 7), (4, 1)])
@pytest.mark.parametrize("use_ln", [True, False])
def test_float32_output_and_every_gradient_match_the_eager_composite_tightly(
    dim: int, batch: int, tokens: int, use_ln: bool
) -> None:
    inputs = make_inputs(batch, tokens, dim)
    upstream = torch.randn(batch, tokens, dim, device=DEVICE)
    got = output_and_grads(mixed_triton.mixed_norm_triton, inputs, upstream, use_ln)
    assert got[0].dtype == torch.float32
    assert_matches(got, float64_reference(inputs, upstream, use_ln), rtol=2e-5, atol=2e-5)
    # Same tolerance against the float32 eager composite itself.
    eager = output_and_grads(mixed_norm_reference, inputs, upstream, use_ln)
    assert_matches(got, (eager[0].double(), [g if g is None else g.double() for g in eager[1]]), 2e-5, 2e-5)


def test_a_sample_whose_tokens_span_several_programs_sums_its_partial_gradients() -> None:
    # One sample of 300 tokens: the kernels split it over several programs (partial sums + torch sum).
    batch, tokens, dim = 1, 300, 96
    block_t, _, tokens_per_program, splits, _ = mixed_triton._launch_config(
        batch, tokens, dim, mixed_triton.BACKWARD_TILE_ELEMENTS
    )
    assert splits > 1 and tokens_per_program % block_t == 0
    inputs = make_inputs(batch, tokens, dim)
    upstream = torch.randn(batch, tokens, dim, device=DEVICE)
    got = output_and_grads(mixed_triton.mixed_norm_triton, inputs, upstream, True)
    assert_matches(got, float64_reference(inputs, upstream, True), rtol=2e-5, atol=1e-4)


@pytest.mark.parametrize("coef_dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_inputs_match_the_float64_composite_loosely_in_the_eager_output_dtype(
    dtype: torch.dtype, coef_dtype: torch.dtype
) -> None:
    inputs = make_inputs(3, 6, 96, dtype=dtype, coef_dtype=coef_dtype)
    upstream = torch.randn(3, 6, 96, device=DEVICE)
    got = output_and_grads(mixed_triton.mixed_norm_triton, inputs, upstream, True)
    eager = output_and_grads(mixed_norm_reference, inputs, upstream, True)
    assert got[0].dtype == eager[0].dtype
    assert [g.dtype for g in got[1]] == [g.dtype for g in eager[1]]  # type: ignore[union-attr]
    # The kernels compute in float32 from the half-precision values; the rounding left is the
    # half-precision storage of y and of the gradients.
    assert_matches(got, float64_reference(inputs, upstream, True), rtol=2e-2, atol=3e-2)


def test_under_bf16_autocast_the_output_keeps_the_eager_dtype_and_values() -> None:
    # What a model under autocast feeds a norm: a bf16 activation and float32 coefficients.
    inputs = make_inputs(2, 9, 128, dtype=torch.bfloat16)
    upstream = torch.randn(2, 9, 128, device=DEVICE)
    with torch.autocast(DEVICE, dtype=torch.bfloat16):
        got = output_and_grads(mixed_triton.mixed_norm_triton, inputs, upstream, True)
        eager = output_and_grads(mixed_norm_reference, inputs, upstream, True)
    assert got[0].dtype == eager[0].dtype == torch.float32  # autocast runs layer_norm in float32
    assert got[1][0] is not None and got[1][0].dtype == torch.bfloat16
    assert_matches(got, float64_reference(inputs, upstream, True), rtol=2e-2, atol=3e-2)
    # The eager composite computes tanh in bf16 under autocast: close, not equal.
    torch.testing.assert_close(got[0], eager[0], rtol=2e-2, atol=2e-2)


def test_expanded_coefficients_and_a_non_contiguous_input_are_read_correctly() -> None:
    batch, tokens, dim = 3, 4, 96
    x = torch.randn(batch, dim, tokens, device=DEVICE).transpose(1, 2)  # (B, T, D), not contiguous
    alpha = torch.tensor(0.6, device=DEVICE)
    weight, bias = torch.randn(dim, device=DEVICE), torch.randn(dim, device=DEVICE)
    # DyT's coefficients: stride-0 rows.
    inputs = (
        x,
        alpha,
        torch.zeros(batch, dim, device=DEVICE),
        weight.expand(batch, -1),
        bias.expand(batch, -1),
    )
    upstream = torch.randn(batch, tokens, dim, device=DEVICE)
    for use_ln in (True, False):
        got = output_and_grads(mixed_triton.mixed_norm_triton, inputs, upstream, use_ln)
        assert_matches(got, float64_reference(inputs, upstream, use_ln), rtol=2e-5, atol=2e-5)


def test_gradients_are_bit_identical_from_run_to_run() -> None:
    # No atomics: the reductions over tokens and samples always add in the same order.
    inputs = make_inputs(2, 300, 96)
    upstream = torch.randn(2, 300, 96, device=DEVICE)
    first = output_and_grads(mixed_triton.mixed_norm_triton, inputs, upstream, True)
    second = output_and_grads(mixed_triton.mixed_norm_triton, inputs, upstream, True)
    assert torch.equal(first[0], second[0])
    assert all(torch.equal(a, b) for a, b in zip(first[1], second[1], strict=True))  # type: ignore[arg-type]


def seed_loss(norm_fn: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    """One seed's loss as a function of its parameters, input and upstream: a gate from the token mean
    folded into the coefficients, as AutoNorm does, so the gradient reaches x through the gate too."""

    def loss(params: dict[str, torch.Tensor], x: torch.Tensor, upstream: torch.Tensor) -> torch.Tensor:
        gate = torch.sigmoid(x.mean(dim=1) @ params["probe"]).unsqueeze(-1)  # (B, 1)
        cl = gate * params["ln_weight"]  # (B, D)
        cd = (1.0 - gate) * params["dyt_weight"]
        c0 = gate * params["ln_bias"] + (1.0 - gate) * params["dyt_bias"]
        return (norm_fn(x, params["alpha"], cl, cd, c0, EPS) * upstream).sum()

    return loss


def stacked_params(seeds: int, dim: int) -> dict[str, torch.Tensor]:
    names = ("ln_weight", "ln_bias", "dyt_weight", "dyt_bias", "probe")
    params = {name: torch.randn(seeds, dim, device=DEVICE) for name in names}
    params["alpha"] = torch.rand(seeds, device=DEVICE) + 0.2  # a different alpha per seed
    return params


@pytest.mark.parametrize("shared_input", [False, True])
def test_vmap_of_grad_over_stacked_seeds_matches_the_eager_composite(shared_input: bool) -> None:
    seeds, batch, tokens, dim = 3, 2, 5, 96
    params = stacked_params(seeds, dim)
    x = torch.randn(batch, tokens, dim, device=DEVICE)
    xs = x if shared_input else torch.randn(seeds, batch, tokens, dim, device=DEVICE)
    upstream = torch.randn(seeds, batch, tokens, dim, device=DEVICE)
    in_dims = (0, None if shared_input else 0, 0)

    def per_seed_grads(norm_fn):  # type: ignore[no-untyped-def]
        grad_fn = torch.func.grad(seed_loss(norm_fn), argnums=(0, 1))
        return torch.func.vmap(grad_fn, in_dims=in_dims)(params, xs, upstream)

    (param_grads, x_grads) = per_seed_grads(mixed_triton.mixed_norm_triton)
    (param_grads_ref, x_grads_ref) = per_seed_grads(mixed_norm_reference)
    for name in params:
        torch.testing.assert_close(param_grads[name], param_grads_ref[name], rtol=1e-4, atol=1e-4, msg=name)
    torch.testing.assert_close(x_grads, x_grads_ref, rtol=1e-4, atol=1e-4)
    # And against each seed on its own, outside any transform.
    for seed in range(seeds):
        one = {name: p[seed] for name, p in params.items()}
        x_one = x if shared_input else xs[seed]
        grad_alpha = torch.func.grad(seed_loss(mixed_norm_reference))(one, x_one, upstream[seed])["alpha"]
        torch.testing.assert_close(param_grads["alpha"][seed], grad_alpha, rtol=1e-4, atol=1e-4)


def test_vmap_of_the_forward_alone_matches_the_eager_composite() -> None:
    seeds, batch, tokens, dim = 2, 3, 4, 128
    params = stacked_params(seeds, dim)
    xs = torch.randn(seeds, batch, tokens, dim, device=DEVICE)

    def forward(norm_fn):  # type: ignore[no-untyped-def]
        def one_seed(p, x):  # type: ignore[no-untyped-def]
            coefficients = (p["ln_weight"].expand(batch, -1), p["dyt_weight"].expand(batch, -1), x.mean(1))
            return norm_fn(x, p["alpha"], *coefficients, EPS)

        return torch.func.vmap(one_seed)(params, xs)

    torch.testing.assert_close(forward(mixed_triton.mixed_norm_triton), forward(mixed_norm_reference))


def test_torch_func_grad_matches_autograd_of_the_eager_composite() -> None:
    x, alpha, cl, cd, c0 = make_inputs(2, 5, 96)

    def loss(norm_fn):  # type: ignore[no-untyped-def]
        return lambda a, c: norm_fn(x, a, c, cd, c0, EPS).square().sum()

    got = torch.func.grad(loss(mixed_triton.mixed_norm_triton), argnums=(0, 1))(alpha, cl)
    expected = torch.func.grad(loss(mixed_norm_reference), argnums=(0, 1))(alpha, cl)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-4)


def test_double_backward_is_refused_rather_than_silently_wrong() -> None:
    x, alpha, cl, cd, c0 = make_inputs(2, 3, 96)
    alpha.requires_grad_(True)
    (grad_alpha,) = torch.autograd.grad(
        mixed_triton.mixed_norm_triton(x, alpha, cl, cd, c0).square().sum(), alpha, create_graph=True
    )
    with pytest.raises(RuntimeError, match="no double backward"):
        grad_alpha.backward()
    second = torch.func.grad(
        torch.func.grad(lambda a: mixed_triton.mixed_norm_triton(x, a, cl, cd, c0).sum())
    )
    with pytest.raises(RuntimeError, match="no double backward"):
        second(alpha.detach())


def test_the_kernels_take_only_per_sample_coefficients_in_supported_dtypes() -> None:
    x, alpha, cl, cd, c0 = make_inputs(2, 3, 96)
    assert mixed_triton.triton_path_applies(x, alpha, cl, cd, c0)
    per_token = cl.unsqueeze(1).expand(2, 3, 96)
    assert not mixed_triton.triton_path_applies(x, alpha, per_token, per_token, per_token)
    assert not mixed_triton.triton_path_applies(x.double(), alpha, cl, cd, c0)
    assert not mixed_triton.triton_path_applies(x, torch.ones(2, device=DEVICE), cl, cd, c0)
    too_wide = torch.zeros(1, 1, mixed_triton.MAX_DIM + 1, device=DEVICE)
    assert not mixed_triton.triton_path_applies(too_wide, alpha, too_wide[0], too_wide[0], too_wide[0])


def test_mixed_norm_never_sends_cpu_inputs_to_the_triton_kernels() -> None:
    for dtype in (torch.float32, torch.bfloat16):
        x, alpha, cl, cd, c0 = (t.cpu().requires_grad_(True) for t in make_inputs(2, 3, 96, dtype=dtype))
        assert KERNEL_NODE not in autograd_node_names(mixed_norm(x, alpha, cl, cd, c0))


@needs_cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_mixed_norm_sends_per_sample_cuda_inputs_to_the_kernels_unless_switched_off(
    dtype: torch.dtype, monkeypatch: pytest.MonkeyPatch
) -> None:
    x, alpha, cl, cd, c0 = (t.requires_grad_(True) for t in make_inputs(2, 3, 96, dtype=dtype))
    # A plain eager call is host-bound: by default it keeps the composite.
    assert KERNEL_NODE not in autograd_node_names(mixed_norm(x, alpha, cl, cd, c0))
    monkeypatch.setattr(mixed_module, "TRITON_IN_PLAIN_EAGER", True)
    assert KERNEL_NODE in autograd_node_names(mixed_norm(x, alpha, cl, cd, c0))
    per_token = cl.unsqueeze(1).expand(2, 3, 96)
    assert KERNEL_NODE not in autograd_node_names(mixed_norm(x, alpha, per_token, per_token, per_token))
    monkeypatch.setattr(mixed_module, "TRITON_ON_CUDA", False)
    assert KERNEL_NODE not in autograd_node_names(mixed_norm(x, alpha, cl, cd, c0))


@needs_cuda
@pytest.mark.parametrize("layer_cls", [AutoNorm, DyT, RandomSelectorNorm, FiLMNorm])
def test_every_mixed_norm_layer_on_cuda_matches_its_eager_path_with_gradients(
    layer_cls: type[torch.nn.Module], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mixed_module, "TRITON_IN_PLAIN_EAGER", True)  # the kernels in plain eager calls too
    # AutoNorm's own whole-layer kernel would take this D = 128 layer by default (test_autonorm_triton.py)
    monkeypatch.setattr(autonorm_module, "TRITON_LAYER_ON_CUDA", False)
    layer = layer_cls(128).to(DEVICE).eval()  # eval: no Gumbel or uniform draws, the same gates twice
    with torch.no_grad():
        for param in layer.parameters():
            param.add_(0.1 * torch.randn_like(param))
    x = torch.randn(4, 65, 128, device=DEVICE)
    upstream = torch.randn(4, 65, 128, device=DEVICE)

    def run() -> list[torch.Tensor]:
        layer.zero_grad()
        leaf = x.clone().requires_grad_(True)
        y = layer(leaf)
        (y * upstream).sum().backward()
        return [y.detach(), leaf.grad] + [p.grad.clone() for p in layer.parameters()]  # type: ignore[union-attr]

    triton_run = run()
    assert KERNEL_NODE in autograd_node_names(layer(x.clone().requires_grad_(True)))
    monkeypatch.setattr(mixed_module, "TRITON_ON_CUDA", False)
    eager_run = run()
    for got, expected in zip(triton_run, eager_run, strict=True):
        torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)


@needs_cuda
def test_torch_compile_traces_autonorm_through_the_kernels_without_a_graph_break(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(mixed_module, "TRITON_IN_PLAIN_EAGER", True)  # the eager run takes the kernels too
    monkeypatch.setattr(
        autonorm_module, "TRITON_LAYER_ON_CUDA", False
    )  # the mixed-norm path, not the layer's
    layer = AutoNorm(128).to(DEVICE).eval()  # eval: the same gates in both runs
    with torch.no_grad():
        layer.selector.fc2.weight.normal_(std=0.5)
    x = torch.randn(4, 65, 128, device=DEVICE)
    upstream = torch.randn(4, 65, 128, device=DEVICE)

    def run(forward: Callable[[torch.Tensor], torch.Tensor]) -> list[torch.Tensor]:
        leaf = x.clone().requires_grad_(True)
        y = forward(leaf)
        return [y, *torch.autograd.grad(y, [leaf, *layer.parameters()], upstream)]

    compiled = run(torch.compile(layer, fullgraph=True))  # fullgraph: a graph break raises
    eager = run(layer)
    assert KERNEL_NODE in autograd_node_names(layer(x.clone().requires_grad_(True)))
    for got, expected in zip(compiled, eager, strict=True):
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


@needs_cuda
def test_a_captured_cuda_graph_replays_forward_and_backward_on_new_data() -> None:
    static = [t.requires_grad_(True) for t in make_inputs(4, 65, 128)]
    upstream = torch.randn(4, 65, 128, device=DEVICE)

    def step() -> list[torch.Tensor]:
        y = mixed_triton.mixed_norm_triton(*static)
        return [y, *torch.autograd.grad(y, static, upstream)]

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # compiles the kernels before capture, off the default stream
        step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = step()
    new_inputs = make_inputs(4, 65, 128)
    with torch.no_grad():
        for tensor, new in zip(static, new_inputs, strict=True):
            tensor.copy_(new)
    graph.replay()
    expected = output_and_grads(mixed_triton.mixed_norm_triton, new_inputs, upstream, True)
    torch.testing.assert_close(captured[0], expected[0])
    for got, want in zip(captured[1:], expected[1], strict=True):
        torch.testing.assert_close(got, want)


@needs_cuda
def test_by_default_only_traced_or_captured_cuda_calls_launch_the_kernels() -> None:
    x, alpha, cl, cd, c0 = make_inputs(4, 65, 128)
    assert KERNEL_NODE not in autograd_node_names(mixed_norm(x, alpha, cl, cd, c0.requires_grad_(True)))
    launched: list[bool] = []
    original = mixed_triton.mixed_norm_triton

    def spy(*args: object) -> torch.Tensor:
        launched.append(torch.cuda.is_current_stream_capturing())
        return original(*args)  # type: ignore[arg-type]  # the module's name is the spy by now

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # compiles the kernels before capture, off the default stream
        mixed_triton.mixed_norm_triton(x, alpha, cl, cd, c0)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    try:
        mixed_triton.mixed_norm_triton = spy  # mixed_norm imports it at call time
        with torch.cuda.graph(graph):
            captured = mixed_norm(x, alpha, cl, cd, c0)
    finally:
        mixed_triton.mixed_norm_triton = original
    graph.replay()
    assert launched == [True]
    torch.testing.assert_close(
        captured, mixed_norm_reference(x, alpha, cl, cd, c0, EPS), rtol=2e-5, atol=2e-5
    )
