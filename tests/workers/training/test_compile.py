"""budget.compile: the training step under torch.compile trains like the eager one and fails soft.

Inductor's C++ code generation takes over a minute per graph on two busy cores, so the fast tests compile
through dynamo and AOTAutograd with the `aot_eager` backend (same tracing, same guards and recompiles,
eager kernels); the inductor comparison is marked slow.
"""

import functools
import warnings
from dataclasses import replace

import pytest
import torch
from pydantic import ValidationError

import workers.training.loop as loop_module
from studies.spec import Budget
from workers.training import CHECKPOINT_FILE, TrainConfig, TrainingRun, load_checkpoint, run_training
from workers.training.compiled import CompiledForward
from workers.training.whole_step import CompiledTrainStep

# Two epochs of the tiny ViT on digits at batch 512: each epoch ends with a short batch (its own static
# graph), and AutoNorm-S freezes its selectors after epoch 1 (eps_h 0: entropy never falls below it).
# Dropout is off; Gumbel gate noise stays on.
BASE = TrainConfig(
    method="frozen_ln",
    dataset="digits",
    model="vit_lite_tiny",
    knobs={"t_freeze": 1, "eps_h": 0.0},
    epochs=2,
    batch_size=512,
    lr=3e-3,
    warmup_epochs=0,
    seed=3,
)
METHODS = ("frozen_ln", "autonorm_s")


@pytest.fixture
def aot_eager(monkeypatch):
    """Runs built by the loop compile with the aot_eager backend instead of inductor."""
    monkeypatch.setattr(
        loop_module, "CompiledTrainStep", functools.partial(CompiledTrainStep, backend="aot_eager")
    )


def _losses(cfg: TrainConfig) -> tuple[list[tuple[float, float, int]], TrainingRun]:
    run = TrainingRun(cfg)
    epochs = [run.train_one_epoch() for _ in range(cfg.epochs)]
    return [(m["train_loss"], m["objective"], m["gates_frozen"]) for m in epochs], run


def _assert_same_training(compiled, eager, tol):
    (compiled_epochs, compiled_run), (eager_epochs, eager_run) = compiled, eager
    for (loss_c, objective_c, frozen_c), (loss_e, objective_e, frozen_e) in zip(
        compiled_epochs, eager_epochs, strict=True
    ):
        assert loss_c == pytest.approx(loss_e, rel=tol, abs=tol)
        assert objective_c == pytest.approx(objective_e, abs=0.02)
        assert frozen_c == frozen_e
    for (name, p_c), p_e in zip(
        compiled_run.model.named_parameters(), eager_run.model.parameters(), strict=True
    ):
        torch.testing.assert_close(p_c, p_e, rtol=tol, atol=tol, msg=name)


@pytest.mark.parametrize("method", METHODS)
def test_compiled_training_matches_eager_over_short_batches_and_the_freeze(method, aot_eager):
    cfg = replace(BASE, method=method)
    compiled = _losses(replace(cfg, compile="default"))
    assert compiled[1].train_step.active  # no silent fallback to eager
    _assert_same_training(compiled, _losses(cfg), tol=1e-4)
    if method == "autonorm_s":  # the compiled step holds the frozen selectors (the eager one drops them)
        assert compiled[1].train_step.frozen.all()


@pytest.mark.slow
@pytest.mark.parametrize("method", METHODS)
def test_inductor_on_cpu_matches_eager(method):
    cfg = replace(BASE, method=method)
    # Inductor draws its own random numbers by default; fall back to torch's so Gumbel noise matches.
    with torch._inductor.config.patch(fallback_random=True):
        compiled = _losses(replace(cfg, compile="default"))
    assert compiled[1].train_step.active
    _assert_same_training(compiled, _losses(cfg), tol=1e-3)


def test_a_run_resumes_across_a_change_of_compile_mode(tmp_path, aot_eager):
    """compile is resume-insensitive: an eager checkpoint finishes compiled, as the eager run would."""
    cfg = replace(BASE, method="autonorm_s")

    class Killed(Exception):
        pass

    def kill_after_first_epoch(metrics, directory):
        if directory is not None:
            raise Killed

    with pytest.raises(Killed):
        run_training(cfg, checkpoint_dir=tmp_path, report=kill_after_first_epoch)
    assert load_checkpoint(tmp_path / CHECKPOINT_FILE)["epoch"] == 1
    resumed = run_training(replace(cfg, compile="default"), checkpoint_dir=tmp_path)
    uninterrupted = run_training(cfg, checkpoint_dir=tmp_path / "eager")
    assert resumed["epoch"] == uninterrupted["epoch"] == 2
    assert resumed["train_loss"] == pytest.approx(uninterrupted["train_loss"], rel=1e-4)
    assert resumed["gates_frozen"] == uninterrupted["gates_frozen"] == 1


def test_without_a_compiler_training_falls_back_to_eager_with_a_warning(monkeypatch):
    monkeypatch.setattr(
        "workers.training.compiled.compiler_unavailable_reason",
        lambda device: "inductor needs a C++ compiler",
    )
    with pytest.warns(RuntimeWarning, match="default requested but inductor needs a C\\+\\+ compiler"):
        run = TrainingRun(replace(BASE, compile="default", max_steps_per_epoch=1))
    assert run.train_step is None  # the eager step
    assert run.train_one_epoch()["train_loss"] > 0


def test_a_backend_failure_warns_once_and_continues_eager():
    def broken_backend(graph_module, example_inputs):
        raise RuntimeError("no code generator")

    model = torch.nn.Linear(4, 2)
    forward = CompiledForward(model, "default", torch.device("cpu"), backend=broken_backend)
    x = torch.randn(3, 4)
    with pytest.warns(RuntimeWarning, match="the compiler failed"):
        out = forward(x)
    torch.testing.assert_close(out, model(x))
    assert not forward.active
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        forward(x)  # eager from now on, without warning again


def test_cuda_graphs_on_cpu_compile_without_them():
    with pytest.warns(UserWarning, match="need a CUDA device"):
        forward = CompiledForward(torch.nn.Linear(4, 2), "reduce-overhead", torch.device("cpu"))
    assert forward.active and not forward.cuda_graphs


def test_compile_modes_validate_in_the_spec_and_the_trial_config():
    assert Budget().compile == "none"
    assert Budget(compile="reduce-overhead").compile == "reduce-overhead"
    with pytest.raises(ValidationError) as error:
        Budget(compile="max-autotune")
    assert error.value.errors()[0]["loc"] == ("compile",)
    assert TrainConfig.from_trial_config({"compile": "default"}).compile == "default"
    with pytest.raises(ValueError, match="compile must be one of none, default, reduce-overhead"):
        TrainConfig(compile="fast")


def _gated(model):
    from models.norms import gated_norms

    return gated_norms(model)
