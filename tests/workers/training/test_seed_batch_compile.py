"""budget.compile with stacked seeds: the vmap(grad) of k seeds under torch.compile trains like the eager
stacked step, keeps each seed's own noise, and falls back to eager when the compiler fails.

As in test_compile.py, the fast tests compile through dynamo and AOTAutograd with the `aot_eager` backend
(the same trace of vmap(grad) and the same graph, eager kernels and torch's own random numbers); the
inductor comparison is marked slow.
"""

import functools
import warnings
from dataclasses import replace

import pytest
import torch
from torch._dynamo.backends.registry import lookup_backend

import workers.training.seed_batch as seed_batch_module
from models import build_model
from models.layers import Attention
from models.norms import autonorm, mixed
from tests.workers.training.test_compile import BASE
from workers.training import TrainConfig
from workers.training.compiled import RECOMPILE_LIMIT
from workers.training.metrics import TaskLoss
from workers.training.schedule import build_warmup_cosine
from workers.training.seed_batch import SeedBatchedRun
from workers.training.seed_step import SeedBatchedStep, build_stacked_optimizer
from workers.training.stacked import StackedModels

# test_compile's run (the tiny ViT on digits, short last batches, the AutoNorm-S freeze after epoch 1,
# Gumbel noise on); a seed batch replaces its seed with each of SEEDS.
SEEDS = (3, 4)


@pytest.fixture
def aot_eager(monkeypatch):
    """Seed batches built by SeedBatchedRun compile with the aot_eager backend instead of inductor."""
    monkeypatch.setattr(
        seed_batch_module, "SeedBatchedStep", functools.partial(SeedBatchedStep, compile_backend="aot_eager")
    )


def _train(cfg: TrainConfig) -> tuple[list[list[dict]], SeedBatchedRun]:
    run = SeedBatchedRun(cfg, SEEDS)
    return [run.train_one_epoch() for _ in range(cfg.epochs)], run


def _assert_same_training(compiled, eager, tol):
    (compiled_epochs, compiled_run), (eager_epochs, eager_run) = compiled, eager
    for compiled_seeds, eager_seeds in zip(compiled_epochs, eager_epochs, strict=True):
        for ours, theirs in zip(compiled_seeds, eager_seeds, strict=True):
            assert ours["train_loss"] == pytest.approx(theirs["train_loss"], rel=tol, abs=tol)
            assert ours["objective"] == pytest.approx(theirs["objective"], abs=0.02)
            assert ours["gates_frozen"] == theirs["gates_frozen"]
    for name, stacked in compiled_run.stacked.params.items():
        torch.testing.assert_close(stacked, eager_run.stacked.params[name], rtol=tol, atol=tol, msg=name)


@pytest.mark.parametrize(
    "method, post_freeze_gate", [("frozen_ln", None), ("autonorm_s", None), ("autonorm_s", "hard")]
)
def test_a_compiled_seed_batch_trains_as_the_eager_one_over_short_batches_and_the_freeze(
    method, post_freeze_gate, aot_eager
):
    cfg = replace(BASE, method=method)
    if post_freeze_gate is not None:  # the per-seed frozen flags ride into the compiled vmap(grad)
        cfg = replace(cfg, knobs={**cfg.knobs, "post_freeze_gate": post_freeze_gate})
    compiled = _train(replace(cfg, compile="default"))
    run = compiled[1]
    assert run.step.compiled  # no silent fallback to eager
    _assert_same_training(compiled, _train(cfg), tol=1e-4)
    if method == "autonorm_s":
        assert all(seed["gates_frozen"] == 1 for seed in compiled[0][-1])
        assert all(norm.last_probs is None for norm in run.step.gated)  # nothing vmap-wrapped left behind


def _identical_models(norm: str, dropout: float, k: int = 2) -> list[torch.nn.Module]:
    models = []
    for _ in range(k):
        torch.manual_seed(0)  # the same init for every seed: only the noise can tell them apart
        models.append(build_model("vit_lite_tiny", {"norm": norm, "dropout": dropout, "drop_path": 0.0}))
    return models


def _step(models, **compile_options) -> SeedBatchedStep:
    stacked = StackedModels(models)
    optimizer, _ = build_stacked_optimizer(stacked, lr=1e-3, weight_decay=0.05)
    return SeedBatchedStep(
        stacked,
        loss_fn=TaskLoss("image_classification"),
        optimizer=optimizer,
        scheduler=build_warmup_cosine(optimizer, warmup_steps=0, total_steps=10),
        grad_clip=1.0,
        device=torch.device("cpu"),
        amp=False,
        **compile_options,
    )


def _same_batch_for_every_seed(k: int = 2) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(5)
    x = torch.randn(1, 16, 1, 8, 8, generator=generator).expand(k, -1, -1, -1, -1).contiguous()
    y = torch.randint(0, 10, (1, 16), generator=generator).expand(k, -1).contiguous()
    return x, y  # (k, B, 1, 8, 8), (k, B)


@pytest.mark.parametrize(
    "norm, dropout, seeds_differ",
    [
        ("layernorm", 0.2, True),  # dropout masks
        ("autonorm", 0.0, True),  # Gumbel gate noise
        ("layernorm", 0.0, False),  # the control: no noise, so identical seeds stay identical
    ],
)
def test_under_compile_every_seed_draws_its_own_noise(norm, dropout, seeds_differ):
    step = _step(_identical_models(norm, dropout), compile="default", compile_backend="aot_eager")
    loss, _ = step(*_same_batch_for_every_seed())
    assert step.compiled
    assert torch.allclose(loss[0], loss[1]) is not seeds_differ


def test_a_compiler_failure_warns_once_and_the_stacked_step_continues_eager():
    def broken_backend(graph_module, example_inputs):
        raise RuntimeError("no code generator")

    x, y = _same_batch_for_every_seed()
    broken = _step(_identical_models("layernorm", 0.0), compile="default", compile_backend=broken_backend)
    eager = _step(_identical_models("layernorm", 0.0))
    with pytest.warns(RuntimeWarning, match="the compiler failed"):
        loss, _ = broken(x, y)
    assert not broken.compiled
    torch.testing.assert_close(loss, eager(x, y)[0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        broken(x, y)  # eager from now on, without warning again
    eager(x, y)
    for name, param in broken.stacked.params.items():  # the failed compile left no half-applied update
        torch.testing.assert_close(param, eager.stacked.params[name], msg=name)


def test_the_step_compiles_in_the_compilable_forms_and_evaluation_keeps_the_fused_kernels(monkeypatch):
    monkeypatch.setattr(autonorm, "TRITON_LAYER_ON_CUDA", True)  # switched on, and still off in the trace
    aot_eager = lookup_backend("aot_eager")
    seen = []

    def recording_backend(graph_module, example_inputs):
        attention = [m for m in step.stacked.template.modules() if isinstance(m, Attention)]
        seen.append(
            (mixed.TRITON_ON_CUDA or autonorm.TRITON_LAYER_ON_CUDA, [m.explicit_math for m in attention])
        )
        return aot_eager(graph_module, example_inputs)

    step = _step(_identical_models("autonorm", 0.0), compile="default", compile_backend=recording_backend)
    step(*_same_batch_for_every_seed())
    assert step.compiled
    assert seen == [(False, [True, True])]  # vit_lite_tiny: two blocks
    # After the call: the fused SDPA kernels and, on CUDA, the Triton mixed norm, for evaluation.
    attention = [m for m in step.stacked.template.modules() if isinstance(m, Attention)]
    assert mixed.TRITON_ON_CUDA and autonorm.TRITON_LAYER_ON_CUDA
    assert not any(m.explicit_math for m in attention)


def test_a_trial_process_keeps_many_compiled_graphs_of_the_step():
    # Every seed-batched step compiles one shared code object (torch.func's vmap wrapper): a warm trial
    # process running its ninth configuration must not drop to eager at dynamo's default limit of 8.
    _step(_identical_models("layernorm", 0.0), compile="default", compile_backend="aot_eager")
    assert torch._dynamo.config.recompile_limit >= RECOMPILE_LIMIT >= 64


@pytest.mark.slow
def test_inductor_compiles_the_stacked_step_on_cpu_and_trains_as_eager():
    # Full batches only (one graph, one C++ compile); inductor draws torch's random numbers so that the
    # Gumbel noise matches the eager run.
    cfg = replace(BASE, method="autonorm_s", batch_size=256, max_steps_per_epoch=2)
    with torch._inductor.config.patch(fallback_random=True):
        compiled = _train(replace(cfg, compile="default"))
    assert compiled[1].step.compiled
    _assert_same_training(compiled, _train(cfg), tol=1e-3)
