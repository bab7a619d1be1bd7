"""The whole-layer Triton AutoNorm (models/norms/autonorm_triton.py) against the eager AutoNorm module.

The reference is the layer's own eager path in float64 (the gate in torch, then the mixed-norm
composite), fed the same exponential draw as the kernel through F.gumbel_softmax's formula. Without a
GPU the kernels run under Triton's interpreter on CPU tensors (conftest.py); tests of the dispatch from
AutoNorm on a GPU and of torch.compile need CUDA and skip without it.
"""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

import models.norms.autonorm as autonorm_module
from models.norms import AutoNorm
from models.norms.mixed import token_weights

autonorm_triton = pytest.importorskip("models.norms.autonorm_triton", reason="triton is not installed")

HAS_CUDA = torch.cuda.is_available()
DEVICE = "cuda" if HAS_CUDA else "cpu"
if not HAS_CUDA and type(autonorm_triton._autonorm_forward_kernel).__name__ != "InterpretedFunction":
    pytest.skip(
        "no CUDA device and the kernels were compiled for one: set TRITON_INTERPRET=1 before "
        "models.norms.autonorm_triton is imported (tests/models/norms/conftest.py does)",
        allow_module_level=True,
    )
needs_cuda = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device")
SEED = 7


def perturbed_layer(dim: int, tau: float = 0.5, hard: bool = False, hidden: int | None = None) -> AutoNorm:
    """An AutoNorm whose every parameter is away from its init, so each gradient term is exercised
    (fc2 starts at zero, which would zero the selector's gradients)."""
    torch.manual_seed(0)
    layer = AutoNorm(dim, tau=tau, hard=hard, selector_hidden=hidden)
    with torch.no_grad():
        for name, param in layer.named_parameters():
            scale = 0.5 if "selector" in name else 0.3
            param.add_(torch.randn_like(param) * scale)
    return layer.to(DEVICE)


def exponential_draw(batch: int) -> torch.Tensor:
    """The draw the kernel path takes after torch.manual_seed(SEED)."""
    torch.manual_seed(SEED)
    return torch.empty(batch, 2, device=DEVICE).exponential_()


def kernel_run(layer: AutoNorm, x: torch.Tensor, upstream: torch.Tensor, mask: torch.Tensor | None = None):  # type: ignore[no-untyped-def]
    """(y, probs, grads of x and of every trainable parameter) through the kernels."""
    x = x.detach().clone().requires_grad_(True)
    leaves = [x, *(p for p in layer.kernel_parameters() if p.requires_grad)]
    weights = None if mask is None else token_weights(mask, torch.float32).contiguous()
    torch.manual_seed(SEED)
    y, probs = autonorm_triton.autonorm_triton(
        x, layer.kernel_parameters(), layer.training, layer.tau, layer.hard, layer.eps, token_weights=weights
    )
    return (y.detach(), probs, *torch.autograd.grad((y * upstream).sum(), leaves))


def reference_run(  # type: ignore[no-untyped-def]
    layer: AutoNorm,
    x: torch.Tensor,
    upstream: torch.Tensor,
    monkeypatch: pytest.MonkeyPatch,
    mask: torch.Tensor | None = None,
):
    """The same through the eager module in float64, with the kernel's exponential draw as Gumbel noise."""
    noise = exponential_draw(x.shape[0]).double()

    def gumbel_softmax(logits: torch.Tensor, tau: float, hard: bool, dim: int) -> torch.Tensor:
        soft = ((logits - noise.log()) / tau).softmax(dim)  # F.gumbel_softmax with this draw
        if not hard:
            return soft
        one_hot = F.one_hot(soft.argmax(dim), 2).to(soft.dtype)
        return one_hot - soft.detach() + soft

    reference = copy.deepcopy(layer).double()  # float64: the eager composite, gate in torch
    x = x.detach().double().requires_grad_(True)
    leaves = [x, *(p for p in reference.kernel_parameters() if p.requires_grad)]
    with monkeypatch.context() as patch:
        patch.setattr(autonorm_module.F, "gumbel_softmax", gumbel_softmax)
        y = reference(x, token_mask=mask)
    grads = torch.autograd.grad((y * upstream.double()).sum(), leaves)
    return (y.detach(), reference.last_probs, *grads)


def assert_all_close(got: tuple, want: tuple, atol: float = 2e-5, rtol: float = 1e-4) -> None:
    assert len(got) == len(want)
    for index, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g.dtype == torch.float32 or index == 2, f"#{index} is {g.dtype}"
        torch.testing.assert_close(
            g.double(), w.double(), atol=atol, rtol=rtol, msg=lambda m, i=index: f"#{i}: {m}"
        )


@pytest.mark.parametrize(
    ("training", "hard", "tau"),
    [(True, False, 0.5), (True, True, 0.7), (True, False, 2.0), (False, False, 0.5)],
)
def test_output_probs_and_every_gradient_match_the_float64_eager_layer(
    training: bool, hard: bool, tau: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    layer = perturbed_layer(24, tau=tau, hard=hard).train(training)
    x = torch.randn(5, 7, 24, device=DEVICE) * 1.5 + torch.randn(5, 7, 1, device=DEVICE)
    upstream = torch.randn(5, 7, 24, device=DEVICE)
    got = kernel_run(layer, x, upstream)
    assert len(got) == 2 + 1 + 9  # y, probs, then x and the nine parameters
    assert_all_close(got, reference_run(layer, x, upstream, monkeypatch))


def test_samples_of_several_row_tiles_and_a_selector_of_several_unit_tiles(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # D = 40 -> 64-wide tiles of 64 rows, so 70 tokens take two; H = 80 -> two (64, 64) fc1 tiles.
    layer = perturbed_layer(40, hidden=80).train()
    x = torch.randn(3, 70, 40, device=DEVICE)
    upstream = torch.randn(3, 70, 40, device=DEVICE)
    assert_all_close(kernel_run(layer, x, upstream), reference_run(layer, x, upstream, monkeypatch))


def test_padded_tokens_are_left_out_of_the_gate_as_on_the_eager_path(monkeypatch: pytest.MonkeyPatch) -> None:
    layer = perturbed_layer(16).train()
    x = torch.randn(3, 6, 16, device=DEVICE)
    upstream = torch.randn(3, 6, 16, device=DEVICE)
    mask = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0], [1, 0, 0, 0, 0, 0]], device=DEVICE).bool()
    got = kernel_run(layer, x, upstream, mask)
    assert_all_close(got, reference_run(layer, x, upstream, monkeypatch, mask))
    # A pad's value moves its own row's output but never the sample's gate.
    moved = x.clone()
    moved[1, 4] += 100.0
    assert torch.equal(kernel_run(layer, moved, upstream, mask)[1], got[1])


def test_half_precision_inputs_give_float32_outputs_close_to_the_float64_layer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    layer = perturbed_layer(32).train()
    x = torch.randn(4, 9, 32, device=DEVICE).bfloat16()
    upstream = torch.randn(4, 9, 32, device=DEVICE)
    got = kernel_run(layer, x, upstream)
    assert got[0].dtype == torch.float32 and got[2].dtype == torch.bfloat16
    assert_all_close(got, reference_run(layer, x, upstream, monkeypatch), atol=2e-2, rtol=2e-2)


def test_a_frozen_selector_gets_no_gradient_and_the_rest_still_matches(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    layer = perturbed_layer(24).train()
    for param in layer.selector.parameters():
        param.requires_grad_(False)
    x = torch.randn(4, 5, 24, device=DEVICE)
    upstream = torch.randn(4, 5, 24, device=DEVICE)
    got = kernel_run(layer, x, upstream)
    assert len(got) == 2 + 1 + 5  # x, alpha and the four affine vectors
    assert_all_close(got, reference_run(layer, x, upstream, monkeypatch))


def test_gradients_are_bit_identical_from_run_to_run() -> None:
    # No atomics: every reduction adds in the same order.
    layer = perturbed_layer(24).train()
    x, upstream = torch.randn(4, 30, 24, device=DEVICE), torch.randn(4, 30, 24, device=DEVICE)
    first, second = kernel_run(layer, x, upstream), kernel_run(layer, x, upstream)
    assert all(torch.equal(a, b) for a, b in zip(first, second, strict=True))


def test_double_backward_is_refused_rather_than_silently_wrong() -> None:
    layer = perturbed_layer(16).train()
    x = torch.randn(2, 3, 16, device=DEVICE, requires_grad=True)
    y, _ = autonorm_triton.autonorm_triton(x, layer.kernel_parameters(), True, layer.tau, False, layer.eps)
    (grad_x,) = torch.autograd.grad(y.square().sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match="no double backward"):
        grad_x.sum().backward()


def test_the_kernels_refuse_what_they_do_not_cover() -> None:
    layer = perturbed_layer(16)
    params = layer.kernel_parameters()
    x = torch.randn(2, 3, 16, device=DEVICE)
    assert autonorm_triton.autonorm_triton_applies(x, params)
    assert not autonorm_triton.autonorm_triton_applies(x.double(), params)
    assert not autonorm_triton.autonorm_triton_applies(x, tuple(p.double() for p in params))
    assert not autonorm_triton.autonorm_triton_applies(x[0], params)
    with pytest.raises(ValueError, match="token_weights must be float32"):
        autonorm_triton.autonorm_triton(x, params, True, 0.5, False, 1e-5, token_weights=torch.ones(2, 4))


def test_the_layer_never_sends_cpu_inputs_to_the_kernels_even_switched_on_everywhere(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(autonorm_module, "TRITON_LAYER_ON_CUDA", True)
    monkeypatch.setattr(autonorm_module, "LAYER_KERNEL_EVERYWHERE", True)
    layer = AutoNorm(16)
    calls: list[int] = []
    monkeypatch.setattr(autonorm_triton, "autonorm_triton", lambda *a, **k: calls.append(1))
    for dtype in (torch.float32, torch.float64, torch.bfloat16):
        layer.to(dtype)(torch.randn(2, 3, 16, dtype=dtype))
    assert calls == []


@needs_cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_on_cuda_the_switched_on_layer_runs_the_kernels_and_matches_its_eager_path(
    dtype: torch.dtype, monkeypatch: pytest.MonkeyPatch
) -> None:
    layer = perturbed_layer(64).train()
    x = torch.randn(8, 17, 64, device=DEVICE, dtype=dtype, requires_grad=True)
    upstream = torch.randn(8, 17, 64, device=DEVICE)

    def run() -> tuple[torch.Tensor, ...]:
        torch.manual_seed(SEED)
        y = layer(x)
        return (y, layer.last_probs, *torch.autograd.grad((y * upstream).sum(), [x, *layer.parameters()]))

    # With bf16 inputs the eager path pools and gates in bf16: off the float64 layer by up to 0.19 past
    # this tolerance in some parameter gradient (20 draws on CPU), while the kernels accumulate in float32
    # and stay within it. So bf16 is held to the float64 layer, float32 to the eager path it replaces.
    monkeypatch.setattr(autonorm_module, "TRITON_LAYER_ON_CUDA", False)  # the eager path it replaces
    want = run() if dtype == torch.float32 else reference_run(layer, x, upstream, monkeypatch)
    monkeypatch.setattr(autonorm_module, "TRITON_LAYER_ON_CUDA", True)
    monkeypatch.setattr(autonorm_module, "LAYER_KERNEL_EVERYWHERE", True)
    monkeypatch.setattr(autonorm_triton, "_direct_launch", lambda: True)
    fused = run()
    assert "_AutoNormTritonFunctionBackward" in type(layer(x).grad_fn).__name__
    tol = 1e-4 if dtype == torch.float32 else 2e-2
    for index, (got, expected) in enumerate(zip(fused, want, strict=True)):
        torch.testing.assert_close(
            got.double(), expected.double(), atol=tol, rtol=tol, msg=lambda m, i=index: f"#{i}: {m}"
        )


@needs_cuda
def test_torch_compile_traces_the_switched_on_layer_without_a_graph_break(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(autonorm_module, "TRITON_LAYER_ON_CUDA", True)
    layer = perturbed_layer(64).train()
    x = torch.randn(8, 17, 64, device=DEVICE)
    explanation = torch._dynamo.explain(layer)(x)
    assert explanation.graph_break_count == 0
    layer.eval()  # the same gates in both runs: inductor draws its own Gumbel noise
    upstream = torch.randn(8, 17, 64, device=DEVICE)

    def run(forward) -> list[torch.Tensor]:  # type: ignore[no-untyped-def]
        leaf = x.clone().requires_grad_(True)
        y = forward(leaf)
        return [y, *torch.autograd.grad(y, [leaf, *layer.parameters()], upstream)]

    compiled = run(torch.compile(layer, fullgraph=True))
    for got, want in zip(compiled, run(layer), strict=True):
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


@needs_cuda
def test_a_captured_cuda_graph_of_the_switched_on_layer_replays_on_new_data(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(autonorm_module, "TRITON_LAYER_ON_CUDA", True)
    layer = perturbed_layer(64).eval()
    static_x = torch.randn(8, 17, 64, device=DEVICE, requires_grad=True)
    upstream = torch.randn(8, 17, 64, device=DEVICE)

    def step() -> list[torch.Tensor]:
        y = layer(static_x)
        return [y, *torch.autograd.grad(y, [static_x, *layer.parameters()], upstream)]

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # compiles the kernels before capture, off the default stream
        step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = step()
    new_x = torch.randn_like(static_x)
    with torch.no_grad():
        static_x.copy_(new_x)
    graph.replay()
    expected = step()
    for got, want in zip(captured, expected, strict=True):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_the_operators_torch_compile_traces_give_what_the_direct_launch_gives(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    layer = perturbed_layer(24).train()
    x, upstream = torch.randn(3, 5, 24, device=DEVICE), torch.randn(3, 5, 24, device=DEVICE)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0], [1, 1, 1, 1, 0]], device=DEVICE).bool()
    direct = kernel_run(layer, x, upstream, mask)
    monkeypatch.setattr(autonorm_triton, "_direct_launch", lambda: False)
    through_ops = kernel_run(layer, x, upstream, mask)
    assert all(torch.equal(a, b) for a, b in zip(direct, through_ops, strict=True))


def stacked_parameters(copies: int, dim: int) -> tuple[list[AutoNorm], tuple[torch.Tensor, ...]]:
    """`copies` differently perturbed layers and their kernel parameters stacked (V, ...), as seed
    batching stacks them."""
    layers = []
    for index in range(copies):
        layer = perturbed_layer(dim)
        with torch.no_grad():
            for param in layer.parameters():
                param.add_(0.1 * (index + 1) * torch.randn_like(param))
        layers.append(layer)
    stacked = tuple(
        torch.stack(ps).detach() for ps in zip(*(layer.kernel_parameters() for layer in layers), strict=True)
    )
    return layers, stacked


def seed_loss(training: bool, hard: bool = False, weights: torch.Tensor | None = None):  # type: ignore[no-untyped-def]
    def loss(params: tuple[torch.Tensor, ...], x: torch.Tensor, upstream: torch.Tensor) -> torch.Tensor:
        y, _ = autonorm_triton.autonorm_triton(x, params, training, 0.7, hard, 1e-5, token_weights=weights)
        return (y * upstream).sum()

    return loss


@pytest.mark.parametrize(("training", "hard"), [(False, False), (True, False), (True, True)])
def test_vmap_of_grad_over_stacked_seeds_matches_each_seed_alone(training: bool, hard: bool) -> None:
    layers, stacked = stacked_parameters(3, 24)
    xs = torch.randn(3, 4, 6, 24, device=DEVICE)
    upstreams = torch.randn(3, 4, 6, 24, device=DEVICE)
    mask = torch.tensor([[1] * 6, [1, 1, 1, 0, 0, 0], [1] * 6, [1, 0, 0, 0, 0, 0]], device=DEVICE).bool()
    weights = token_weights(mask, torch.float32).contiguous()
    # randomness="same": every seed draws what a lone run draws after the same torch.manual_seed.
    torch.manual_seed(SEED)
    vmapped = torch.func.vmap(
        torch.func.grad(seed_loss(training, hard, weights), argnums=(0, 1)), randomness="same"
    )
    grads, grad_x = vmapped(stacked, xs, upstreams)
    for seed, layer in enumerate(layers):
        layer.train(training)
        layer.hard, layer.tau = hard, 0.7
        alone = kernel_run(layer, xs[seed], upstreams[seed], mask)  # y, probs, dx, then nine parameters
        torch.testing.assert_close(grad_x[seed], alone[2], atol=2e-5, rtol=1e-4)
        for index, (got, want) in enumerate(zip((g[seed] for g in grads), alone[3:], strict=True)):
            torch.testing.assert_close(
                got, want, atol=2e-5, rtol=1e-4, msg=lambda m, i=index: f"param {i}: {m}"
            )


def test_vmap_of_the_forward_over_stacked_seeds_on_one_shared_input_matches_each_seed_alone() -> None:
    layers, stacked = stacked_parameters(2, 16)
    x = torch.randn(3, 5, 16, device=DEVICE)

    def forward(params: tuple[torch.Tensor, ...], x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return autonorm_triton.autonorm_triton(x, params, False, 0.5, False, 1e-5)

    ys, probs = torch.func.vmap(forward, in_dims=(0, None))(stacked, x)  # evaluation: one batch, every seed
    for seed, layer in enumerate(layers):
        y_alone, probs_alone = forward(layer.kernel_parameters(), x)
        torch.testing.assert_close(ys[seed], y_alone, atol=1e-6, rtol=1e-5)
        torch.testing.assert_close(probs[seed], probs_alone, atol=1e-6, rtol=1e-5)


def test_torch_func_grad_matches_autograd() -> None:
    layer = perturbed_layer(16).eval()
    x, upstream = torch.randn(3, 4, 16, device=DEVICE), torch.randn(3, 4, 16, device=DEVICE)
    params = tuple(p.detach() for p in layer.kernel_parameters())
    got = torch.func.grad(seed_loss(False), argnums=(0, 1))(params, x, upstream)
    want = kernel_run(layer, x, upstream)
    torch.testing.assert_close(got[1], want[2], atol=1e-6, rtol=1e-5)
    for g, w in zip(got[0], want[3:], strict=True):
        torch.testing.assert_close(g, w, atol=1e-6, rtol=1e-5)
