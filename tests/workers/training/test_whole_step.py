"""The whole training step compiled (workers.training.whole_step, and the stacked step of
workers.training.seed_step): forward, backward, gate entropy, the AutoNorm-S freeze's per-step part,
clipping and AdamW run inside compiled code, train as the eager step does, and never recompile for the
freeze or for a new learning rate.

As in test_compile.py, the fast tests compile with dynamo and AOTAutograd through the `aot_eager` backend
(the same traced graphs, guards and recompiles, eager kernels and torch's own random numbers, so the
Gumbel noise is the eager run's); the inductor runs are marked slow.

Tolerance. Compiled and eager steps do the same arithmetic in another order, not bit for bit: on CPU the
eager AutoNorm layer is the fused C kernel and the compiled one its composite; the clipping norm adds the
per-tensor norms in the optimizer's parameter order, not the model's; the compiled AdamW is torch's
capturable form, which folds the step size into the denominator and reads its lr as a float32 tensor
where the eager one multiplies by a Python double. Each differs by float32 rounding (~1e-7 relative) per
step. Measured on CPU over the nine steps below (the freeze after the third, lr 3e-3, clipping at 1.0),
the largest parameter difference from the eager run was 7e-7 (post_freeze_gate "sample") and 1.1e-6
("hard"), with aot_eager and with inductor alike; 9e-7 for two stacked seeds over six steps. The bound,
1e-4 absolute and relative (test_compile.py's), is two orders above that and an order below what one
missing, doubled or misplaced update, clip or freeze moves a parameter at this lr (>= 1e-3).
"""

import functools
from dataclasses import replace

import pytest
import torch
from torch._dynamo.testing import CompileCounterWithBackend

import workers.training.loop as loop_module
import workers.training.seed_batch as seed_batch_module
from models.norms import selector_parameters
from workers.training import TrainConfig, TrainingRun
from workers.training.optim import GraphAdamW, build_optimizer
from workers.training.schedule import build_warmup_cosine
from workers.training.seed_batch import SeedBatchedRun
from workers.training.seed_step import SeedBatchedStep
from workers.training.whole_step import CompiledTrainStep

TOL = 1e-4

# The tiny ViT on digits, 3 epochs of 3 steps at batch 64: nine optimizer steps. The freeze is forced
# after epoch 1: it fires when the gate entropy has NOT fallen below eps_h by t_freeze, so eps_h 0 freezes
# every selector (global scope). A warmup epoch and the cosine change the lr at every step.
BASE = TrainConfig(
    method="autonorm_s",
    dataset="digits",
    model="vit_lite_tiny",
    model_overrides={"dropout": 0.0, "drop_path": 0.0},
    knobs={"t_freeze": 1, "eps_h": 0.0},
    epochs=3,
    batch_size=64,
    max_steps_per_epoch=3,
    lr=3e-3,
    warmup_epochs=1,
    seed=5,
)


@pytest.fixture
def counted(monkeypatch):
    """Runs compile through aot_eager; `counted.frame_count` is how many graphs dynamo compiled."""
    counter = CompileCounterWithBackend("aot_eager")
    monkeypatch.setattr(
        loop_module, "CompiledTrainStep", functools.partial(CompiledTrainStep, backend=counter)
    )
    monkeypatch.setattr(
        seed_batch_module, "SeedBatchedStep", functools.partial(SeedBatchedStep, compile_backend=counter)
    )
    return counter


def _train(cfg: TrainConfig, counter=None) -> tuple[list[dict], TrainingRun, list[int]]:
    run = TrainingRun(cfg)
    epochs, graphs = [], []
    for _ in range(cfg.epochs):
        epochs.append(run.train_one_epoch())
        graphs.append(counter.frame_count if counter is not None else 0)
    return epochs, run, graphs


def _max_abs_difference(a: torch.nn.Module, b: torch.nn.Module) -> float:
    return max(
        float((p - q).detach().abs().max()) for p, q in zip(a.parameters(), b.parameters(), strict=True)
    )


@pytest.mark.parametrize("post_freeze_gate", ["sample", "hard"])
def test_the_compiled_step_trains_as_the_eager_one_across_the_freeze_and_never_recompiles_for_it(
    post_freeze_gate, counted
):
    cfg = replace(BASE, knobs={**BASE.knobs, "post_freeze_gate": post_freeze_gate})
    compiled, run, graphs = _train(replace(cfg, compile="default"), counted)
    eager, eager_run, _ = _train(cfg)

    assert run.train_step is not None and run.train_step.active  # no silent fallback to eager
    assert [m["gates_frozen"] for m in compiled] == [m["gates_frozen"] for m in eager] == [1, 1, 1]
    for ours, theirs in zip(compiled, eager, strict=True):
        for key in ("train_loss", "objective", "train_gate_entropy_mean", "gate_entropy_mean", "lr"):
            assert ours[key] == pytest.approx(theirs[key], rel=TOL, abs=TOL), key
        # selector_grad_var: epoch 1 only (after the freeze no selector trains, and the key is absent)
        assert (ours.get("selector_grad_var") is None) == (theirs.get("selector_grad_var") is None)
    # the variance is a difference of two close sums: a looser relative bound
    assert compiled[0]["selector_grad_var"] == pytest.approx(eager[0]["selector_grad_var"], rel=1e-2)
    assert _max_abs_difference(run.model, eager_run.model) < TOL
    # One forward graph (no short batch at 3 steps of 64) and one update graph, compiled in epoch 1: the
    # freeze after it, and a new lr at every step, compiled nothing more.
    assert graphs == [2, 2, 2]


def test_a_frozen_selector_keeps_its_weights_moments_and_step_count_as_the_eager_run_does(counted):
    _, run, _ = _train(replace(BASE, compile="default"), counted)
    _, eager_run, _ = _train(BASE)

    assert run.train_step is not None and bool(run.train_step.frozen.all())
    eager_state, state = eager_run.state_dict(), run.state_dict()
    # Frozen after epoch 1 (3 steps): AdamW counted 3 steps of every selector in both runs, 9 of the rest.
    selectors = {id(p) for p in selector_parameters(run.model)}
    steps = [
        (id(param) in selectors, float(state["optimizer"]["state"][index]["step"]))
        for index, param in enumerate(p for group in run.optimizer.param_groups for p in group["params"])
    ]
    assert {count for is_selector, count in steps if is_selector} == {3.0}
    assert {count for is_selector, count in steps if not is_selector} == {9.0}
    for key, value in eager_state["model"].items():
        if ".selector." in key:
            torch.testing.assert_close(state["model"][key], value, rtol=TOL, atol=TOL)
    # The checkpoint is an eager run's: the same optimizer groups (float lr, eager flags) and keys.
    assert state["optimizer"]["param_groups"] == eager_state["optimizer"]["param_groups"]
    assert state["scheduler"] == eager_state["scheduler"]


def test_a_compiled_checkpoint_resumes_eagerly_as_the_eager_run_continues(counted):
    compiled_run = TrainingRun(replace(BASE, compile="default"))
    for _ in range(2):  # the freeze fires after the first
        compiled_run.train_one_epoch()
    state = compiled_run.state_dict()
    eager_run = TrainingRun(BASE)
    for _ in range(3):
        theirs = eager_run.train_one_epoch()
    resumed = TrainingRun(BASE)
    resumed.load_state_dict(state)  # model, optimizer, schedule, freeze, every RNG
    ours = resumed.train_one_epoch()
    assert ours["train_loss"] == pytest.approx(theirs["train_loss"], rel=TOL)
    assert _max_abs_difference(resumed.model, eager_run.model) < TOL


def test_the_stacked_step_is_one_graph_that_the_freeze_does_not_recompile(counted):
    cfg = replace(BASE, epochs=2)
    run = SeedBatchedRun(replace(cfg, compile="default"), (5, 6))
    graphs = []
    for _ in range(cfg.epochs):
        metrics = run.train_one_epoch()
        graphs.append(counted.frame_count)
    assert run.step.compiled
    assert [m["gates_frozen"] for m in metrics] == [1, 1]
    assert graphs == [1, 1]  # forward, backward, clipping and AdamW of both seeds: one graph, compiled once


def test_graph_adamw_is_torchs_adamw_step_and_a_new_lr_recompiles_nothing():
    def model() -> torch.nn.Module:
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.GELU(), torch.nn.Linear(8, 3))

    x, y = torch.randn(16, 6), torch.randn(16, 3)
    eager_model, compiled_model = model(), model()
    eager = build_optimizer(eager_model, lr=1e-2, weight_decay=0.05)
    optimizer = build_optimizer(compiled_model, lr=1e-2, weight_decay=0.05)
    schedules = [build_warmup_cosine(o, warmup_steps=2, total_steps=6) for o in (eager, optimizer)]
    graph = GraphAdamW(optimizer, torch.device("cpu"))
    counter = CompileCounterWithBackend("aot_eager")

    def update() -> None:
        graph.step_([[p.grad for p in params] for params in graph.params])

    compiled_update = torch.compile(update, backend=counter, fullgraph=True, dynamic=False)
    for _ in range(6):
        for m, o in ((eager_model, eager), (compiled_model, optimizer)):
            o.zero_grad(set_to_none=True)
            torch.nn.functional.mse_loss(m(x), y).backward()
        eager.step()
        if graph.tensors is None:
            graph.prepare(lambda p: p.grad is not None)
        graph.sync_lr()
        with torch.no_grad():
            compiled_update()
        graph.note_step()
        for schedule in schedules:
            schedule.step()

    assert counter.frame_count == 1  # six learning rates, one graph: the lr is a tensor the graph reads
    # The same update to float32 rounding: capturable AdamW orders its arithmetic differently (the step
    # size folded into the denominator) and takes the lr as a float32 tensor, not a Python double.
    for p, q in zip(compiled_model.parameters(), eager_model.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)
    assert optimizer.state_dict()["param_groups"] == eager.state_dict()["param_groups"]


def test_run_uncompiled_on_cpu_graph_adamw_takes_the_optimizers_own_flags_and_lr():
    # Where capturable cannot run eagerly (CPU), a step dynamo leaves eager (a frame past its recompile
    # limit, or a compiler failure) is optimizer.step() itself.
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    twin = torch.nn.Linear(4, 2)
    twin.load_state_dict(model.state_dict())
    optimizers = [build_optimizer(m, lr=1e-2, weight_decay=0.05) for m in (model, twin)]
    graph = GraphAdamW(optimizers[0], torch.device("cpu"))
    for _ in range(3):
        for m in (model, twin):
            m.zero_grad(set_to_none=True)
            m(torch.ones(3, 4)).square().sum().backward()
        if graph.tensors is None:
            graph.prepare(lambda p: p.grad is not None)
        with torch.no_grad():
            graph.step_([[p.grad for p in params] for params in graph.params])
        optimizers[1].step()
    assert graph.graph_safe  # still the compiled form's object; this call just ran eagerly
    for p, q in zip(model.parameters(), twin.parameters(), strict=True):
        assert torch.equal(p, q)


def test_after_a_compiler_failure_the_step_warns_once_and_goes_on_eagerly_as_the_eager_step(monkeypatch):
    def broken_backend(graph_module, example_inputs):
        raise RuntimeError("no code generator")

    monkeypatch.setattr(
        loop_module, "CompiledTrainStep", functools.partial(CompiledTrainStep, backend=broken_backend)
    )
    cfg = replace(BASE, epochs=2)
    run = TrainingRun(replace(cfg, compile="default"))
    with pytest.warns(RuntimeWarning, match="the compiler failed"):
        ours = [run.train_one_epoch() for _ in range(cfg.epochs)]
    assert run.train_step is not None and not run.train_step.forward.active
    assert not run.train_step.update.active and not run.train_step.adamw.graph_safe  # eager AdamW flags
    eager_run = TrainingRun(cfg)
    theirs = [eager_run.train_one_epoch() for _ in range(cfg.epochs)]
    for a, b in zip(ours, theirs, strict=True):
        assert a["train_loss"] == pytest.approx(b["train_loss"], rel=1e-6)
    assert _max_abs_difference(run.model, eager_run.model) < 1e-6


def test_without_compile_the_step_is_the_eager_one():
    run = TrainingRun(replace(BASE, epochs=2, max_steps_per_epoch=1))
    assert run.train_step is None
    assert run.train_one_epoch()["train_loss"] > 0


@pytest.mark.slow
def test_inductor_compiles_the_whole_step_on_cpu_and_trains_as_eager(monkeypatch):
    counter = CompileCounterWithBackend("inductor")
    monkeypatch.setattr(
        loop_module, "CompiledTrainStep", functools.partial(CompiledTrainStep, backend=counter)
    )
    # Inductor draws torch's random numbers only with fallback_random, so the Gumbel noise matches.
    with torch._inductor.config.patch(fallback_random=True):
        compiled, run, graphs = _train(replace(BASE, compile="default"), counter)
    eager, eager_run, _ = _train(BASE)
    assert run.train_step is not None and run.train_step.active
    assert graphs == [2, 2, 2]  # the freeze after epoch 1 compiled nothing
    for ours, theirs in zip(compiled, eager, strict=True):
        assert ours["train_loss"] == pytest.approx(theirs["train_loss"], rel=TOL, abs=TOL)
    assert _max_abs_difference(run.model, eager_run.model) < TOL
