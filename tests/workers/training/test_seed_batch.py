"""Seed-batched training: k stacked seeds behave like k single-seed TrainingRuns.

With dropout, drop-path and Gumbel gate noise off, every seed's parameters, losses and metrics match the
single-seed run with that seed to float tolerance (the stacked matmuls sum in another order). The gate
noise is switched off by making the Gumbel noise zero in both runs (`noise_free_gates`), so the gates
still train at temperature tau: AutoNorm has no deterministic training gate of its own, and comparing
eval-mode gates would not test training.
"""

import math
import subprocess
import sys
from dataclasses import replace

import pytest
import torch
from torch import nn

from models import build_model
from models.norms import gated_norms
from models.norms.autonorm import POST_FREEZE_GATES
from models.norms.mixed import _fast_path_applies
from workers.training import TrainConfig, TrainingRun, load_checkpoint, save_checkpoint
from workers.training.metrics import SELECTOR_GRAD_VAR, TaskLoss, layer_entropies
from workers.training.optim import build_optimizer
from workers.training.schedule import build_warmup_cosine
from workers.training.seed_batch import SeedBatchedRun
from workers.training.seed_step import SeedBatchedStep, build_stacked_optimizer, clip_grad_norm_per_seed_
from workers.training.stacked import StackedModels

TIMING_KEYS = {"epoch_time_s", "epoch_cpu_s", "samples_per_s"}
SEEDS = (0, 1, 2)

# The tiny ViT on real 8x8 digits, a few optimizer steps per epoch, clipping on (grad_clip 1.0 binds at
# lr 3e-3), every noise source off.
NOISE_FREE = TrainConfig(
    method="frozen_ln",
    dataset="digits",
    model="vit_lite_tiny",
    model_overrides={"dropout": 0.0, "drop_path": 0.0},
    epochs=2,
    batch_size=32,
    lr=3e-3,
    warmup_epochs=1,
    max_steps_per_epoch=3,
    device="cpu",
)


@pytest.fixture
def noise_free_gates(monkeypatch):
    """Gumbel gate noise off: every standard exponential draw E is 1, so the Gumbel noise -log(E) is 0 and
    the training gate is softmax(logits / tau). Both AutoNorm paths draw their noise this way
    (torch.nn.functional.gumbel_softmax in the eager composite, `autonorm_fused` on CPU), so the
    single-seed runs (fused kernel) and the stacked seeds (eager under vmap) train the same gates."""

    def exponential_(self, lambd=1.0, *, generator=None):
        return self.fill_(1.0)

    monkeypatch.setattr(torch.Tensor, "exponential_", exponential_)


def _single_runs(cfg, seeds, epochs):
    runs = [TrainingRun(replace(cfg, seed=seed)) for seed in seeds]
    histories = [[run.train_one_epoch() for _ in range(epochs)] for run in runs]
    return runs, histories


def _batched(cfg, seeds, epochs):
    run = SeedBatchedRun(cfg, seeds)
    epochs_metrics = [run.train_one_epoch() for _ in range(epochs)]
    return run, [[epoch[i] for epoch in epochs_metrics] for i in range(len(seeds))]


def _assert_histories_close(batched, single):
    assert len(batched) == len(single)
    for ours, theirs in zip(batched, single, strict=True):
        assert set(ours) == set(theirs)
        for key, value in theirs.items():
            if key not in TIMING_KEYS:
                assert ours[key] == pytest.approx(value, rel=1e-5, abs=1e-6), key


# AdamW divides by the root of the second moment, so a rounding-size difference in a gradient near zero
# moves a weight by up to a fraction of lr: weight tolerances scale with the learning rate.
def _assert_states_close(ours, theirs, atol=2e-6, rtol=1e-4):
    torch.testing.assert_close(_without_key_bias(ours), _without_key_bias(theirs), rtol=rtol, atol=atol)


def _assert_models_close(run, index, model, atol=2e-6):
    _assert_states_close(run.stacked.seed_state_dict(index), model.state_dict(), atol=atol)


def _without_key_bias(state):
    """The key bias of attention has an exactly zero gradient (softmax ignores a shift shared by all keys),
    so what it receives is rounding noise, which AdamW normalises into lr-sized steps: it follows no
    computation that two implementations share. Every other weight is compared."""
    kept = {}
    for key, value in state.items():
        if key.endswith("attn.branch.qkv.bias"):
            dim = value.shape[0] // 3
            value = torch.cat([value[:dim], value[2 * dim :]])  # query and value biases
        kept[key] = value
    return kept


def _without_timing(history):
    return [{k: v for k, v in metrics.items() if k not in TIMING_KEYS} for metrics in history]


# ----- the acceptance test: k stacked seeds = k single-seed runs --------------------------------------


@pytest.mark.parametrize("method", ["frozen_ln", "dyt", "autonorm"])
def test_stacked_seeds_match_single_seed_runs_step_for_step(method, noise_free_gates):
    cfg = replace(NOISE_FREE, method=method)
    batched, batched_histories = _batched(cfg, SEEDS, epochs=2)
    runs, single_histories = _single_runs(cfg, SEEDS, epochs=2)

    for index, (run, history) in enumerate(zip(runs, single_histories, strict=True)):
        _assert_histories_close(batched_histories[index], history)
        _assert_models_close(batched, index, run.model)
    # The comparison means something: seeds differ from each other, and training moved the weights.
    first, second = batched.stacked.seed_state_dict(0), batched.stacked.seed_state_dict(1)
    assert not torch.allclose(first["head.weight"], second["head.weight"])
    untrained = TrainingRun(replace(cfg, seed=SEEDS[0])).model.state_dict()
    assert not torch.allclose(first["head.weight"], untrained["head.weight"])
    if method == "autonorm":
        assert "train_gate_entropy_mean" in batched_histories[0][-1]
        assert "gate_dyt_weight_0" in batched_histories[0][-1]


@pytest.mark.parametrize("post_freeze_gate", POST_FREEZE_GATES)
def test_each_seed_takes_its_own_autonorm_s_freeze_decision(post_freeze_gate, noise_free_gates):
    # Epoch 1 of AutoNorm-S is plain AutoNorm: read each seed's epoch-1 gate entropy, then put eps_H
    # between the seeds so that some seeds saw an entropy below it (they keep training their selectors)
    # and the others did not (frozen after epoch 1). In epoch 2 the frozen seeds' gates follow
    # post_freeze_gate while the others keep their (noise-free) sampled gate at temperature tau, a
    # different gate for "expected" and "hard": the stacked seeds must choose per seed as a single run
    # chooses for itself.
    # A large learning rate, so that a few steps already move the gates away from entropy ln 2.
    base = replace(NOISE_FREE, lr=1e-2, max_steps_per_epoch=4)
    _, probe = _batched(replace(base, method="autonorm", epochs=1), SEEDS, epochs=1)
    entropies = [sum(layer_entropies(h[0], "train")) / len(layer_entropies(h[0], "train")) for h in probe]
    ordered = sorted(entropies)
    # The stacked and single-seed entropies agree to ~1e-7; the threshold sits well clear of every seed.
    assert max(ordered[1] - ordered[0], ordered[2] - ordered[1]) > 4e-6
    gap = max(range(2), key=lambda i: ordered[i + 1] - ordered[i])
    eps_h = (ordered[gap] + ordered[gap + 1]) / 2
    expected_frozen = [int(h >= eps_h) for h in entropies]
    assert 0 < sum(expected_frozen) < len(SEEDS)

    knobs = {"t_freeze": 1, "eps_h": eps_h, "post_freeze_gate": post_freeze_gate}
    cfg = replace(base, method="autonorm_s", knobs=knobs)
    batched = SeedBatchedRun(cfg, SEEDS)
    after_epoch_1 = batched.train_one_epoch()
    selectors_at_freeze = [batched.stacked.seed_state_dict(i) for i in range(len(SEEDS))]
    after_epoch_2 = batched.train_one_epoch()
    runs, single_histories = _single_runs(cfg, SEEDS, epochs=2)

    assert [m["gates_frozen"] for m in after_epoch_1] == expected_frozen
    # The frozen seeds measured no selector gradient in epoch 2; the others did.
    assert [SELECTOR_GRAD_VAR not in m for m in after_epoch_2] == [bool(f) for f in expected_frozen]
    for index, run in enumerate(runs):
        _assert_histories_close([after_epoch_1[index], after_epoch_2[index]], single_histories[index])
        _assert_models_close(batched, index, run.model, atol=1e-5)  # lr 1e-2
        selector_keys = [k for k in selectors_at_freeze[index] if ".selector." in k]
        kept = all(
            torch.equal(batched.stacked.seed_state_dict(index)[k], selectors_at_freeze[index][k])
            for k in selector_keys
        )
        assert kept == bool(expected_frozen[index])
        # The per-seed AdamW state is the single run's, step counts of frozen selectors included.
        ours, theirs = batched.state_dict()[index]["optimizer"], run.state_dict()["optimizer"]
        assert ours["param_groups"] == theirs["param_groups"]
        assert ours["state"].keys() == theirs["state"].keys()
        for param_index, values in theirs["state"].items():
            assert float(ours["state"][param_index]["step"]) == float(values["step"])
            torch.testing.assert_close(
                ours["state"][param_index]["exp_avg"], values["exp_avg"], rtol=1e-3, atol=1e-7
            )


# ----- one step, seed by seed --------------------------------------------------------------------------

STEP_LR = 1e-2
# The step-level tests run in float64. In float32 some gradients sum to ~1e-8 through cancellation, the
# size of AdamW's eps, where the update g / (|g| + eps) turns the rounding of two summation orders into
# weight differences of 1e-4 * lr that grow step by step (seen on some CPUs and not others). In float64
# the stacked and single-seed weights agree to ~1e-14, the attention key bias included, so tolerances of
# 1e-10 (absolute) and 1e-9 (relative) still catches any real difference in the update.
STEP_DTYPE = torch.float64
STEP_ATOL, STEP_RTOL = 1e-10, 1e-9


def _tiny_models(norm, seeds):
    models = []
    for seed in seeds:
        torch.manual_seed(seed)
        model = build_model("vit_lite_tiny", {"norm": norm, "dropout": 0.0, "drop_path": 0.0})
        models.append(model.to(STEP_DTYPE))
    return models


def _stacked_step(models, grad_clip=1.0):
    stacked = StackedModels(models)
    optimizer, _ = build_stacked_optimizer(stacked, lr=STEP_LR, weight_decay=0.05)
    scheduler = build_warmup_cosine(optimizer, warmup_steps=0, total_steps=100)
    return SeedBatchedStep(
        stacked,
        loss_fn=TaskLoss("image_classification"),
        optimizer=optimizer,
        scheduler=scheduler,
        grad_clip=grad_clip,
        device=torch.device("cpu"),
        amp=False,
    )


class _SingleSeedReference:
    """One model trained the way TrainingRun trains it: AdamW groups, schedule, global-norm clipping, and
    an AutoNorm-S freeze as GateFreezer applies it (requires_grad False, grad None)."""

    def __init__(self, model, grad_clip=1.0):
        self.model, self.grad_clip = model, grad_clip
        self.optimizer = build_optimizer(model, lr=STEP_LR, weight_decay=0.05)
        self.scheduler = build_warmup_cosine(self.optimizer, warmup_steps=0, total_steps=100)
        self.loss_fn = TaskLoss("image_classification")

    def step(self, x, y):
        self.optimizer.zero_grad(set_to_none=True)
        self.loss_fn(self.model(x), y).backward()
        norm = nn.utils.clip_grad_norm_(self.model.parameters(), self.grad_clip)
        self.optimizer.step()
        self.scheduler.step()
        return float(norm)

    def freeze_selectors(self):
        for _, norm in gated_norms(self.model):
            for param in norm.selector.parameters():
                param.requires_grad_(False)
                param.grad = None


def _batches(steps, seeds=2, batch=16):
    generator = torch.Generator().manual_seed(123)
    return [
        (
            torch.randn(seeds, batch, 1, 8, 8, generator=generator, dtype=STEP_DTYPE),
            torch.randint(0, 10, (seeds, batch), generator=generator),
        )
        for _ in range(steps)
    ]


def test_gradient_clipping_takes_each_seeds_own_norm():
    grads = [torch.randn(3, 4, 5), torch.randn(3, 7)]
    grads[0][1] *= 1e4  # seed 1 alone has huge gradients
    expected = []
    for seed in range(3):
        params = [nn.Parameter(torch.zeros_like(g[seed])) for g in grads]
        for param, g in zip(params, grads, strict=True):
            param.grad = g[seed].clone()
        norm = nn.utils.clip_grad_norm_(params, 1.0)
        expected.append((float(norm), [p.grad for p in params]))

    norms = clip_grad_norm_per_seed_(grads, 1.0)

    for seed, (norm, seed_grads) in enumerate(expected):
        assert float(norms[seed]) == pytest.approx(norm, rel=1e-6)
        for g, reference in zip(grads, seed_grads, strict=True):
            torch.testing.assert_close(g[seed], reference)
    assert float(norms[1]) > 1e3 * float(norms[0])


def test_a_seed_with_huge_gradients_does_not_change_another_seeds_update():
    batches = _batches(steps=2)
    models = _tiny_models("layernorm", seeds=(0, 1))
    with torch.no_grad():
        models[0].head.weight.mul_(1e4)  # seed 0's logits, and with them its gradients, explode
    references = [_SingleSeedReference(_tiny_models("layernorm", seeds=(seed,))[0]) for seed in (0, 1)]
    references[0].model.load_state_dict(models[0].state_dict())
    step = _stacked_step(models)
    calm = _stacked_step(_tiny_models("layernorm", seeds=(0, 1)))  # the same seed 1 next to a calm seed 0

    for x, y in batches:
        step(x, y)
        calm(x, y)
        reference_norms = [reference.step(x[i], y[i]) for i, reference in enumerate(references)]
        torch.testing.assert_close(
            step.last_grad_norms, torch.tensor(reference_norms, dtype=STEP_DTYPE), rtol=STEP_RTOL, atol=0.0
        )

    assert float(step.last_grad_norms[0]) > 100 * float(step.last_grad_norms[1])
    _assert_states_close(
        step.stacked.seed_state_dict(1), calm.stacked.seed_state_dict(1), atol=STEP_ATOL, rtol=STEP_RTOL
    )
    for i, reference in enumerate(references):
        _assert_states_close(
            step.stacked.seed_state_dict(i), reference.model.state_dict(), atol=STEP_ATOL, rtol=STEP_RTOL
        )


def test_freezing_one_seeds_selectors_leaves_the_other_seed_training_them(noise_free_gates):
    batches = _batches(steps=4)
    step = _stacked_step(_tiny_models("autonorm", seeds=(0, 1)))
    references = [_SingleSeedReference(model) for model in _tiny_models("autonorm", seeds=(0, 1))]
    layers = range(len(step.freezes.layer_params))
    for x, y in batches[:2]:  # both train their selectors (fc2 leaves zero, so fc1 gets gradients)
        step(x, y)
        for i, reference in enumerate(references):
            reference.step(x[i], y[i])
    step.freezes.set_frozen_layers(0, layers)
    references[0].freeze_selectors()
    names = [name for layer in step.freezes.layer_params for name in layer]
    frozen_values = {name: step.stacked.params[name][0].clone() for name in names}
    frozen_moments = {
        name: step.optimizer.state[step.stacked.params[name]]["exp_avg"][0].clone() for name in names
    }
    seed_1_before = {name: step.stacked.params[name][1].clone() for name in names}

    for x, y in batches[2:]:
        step(x, y)
        for i, reference in enumerate(references):
            reference.step(x[i], y[i])

    for name in names:
        assert torch.equal(step.stacked.params[name][0], frozen_values[name])
        assert torch.equal(
            step.optimizer.state[step.stacked.params[name]]["exp_avg"][0], frozen_moments[name]
        )
    assert any(not torch.equal(step.stacked.params[name][1], seed_1_before[name]) for name in names)
    for i, reference in enumerate(references):
        _assert_states_close(
            step.stacked.seed_state_dict(i), reference.model.state_dict(), atol=STEP_ATOL, rtol=STEP_RTOL
        )


# ----- checkpoint state -----------------------------------------------------------------------------


def test_each_seeds_state_continues_as_a_single_seed_training_run(noise_free_gates):
    cfg = replace(NOISE_FREE, method="autonorm")
    batched = SeedBatchedRun(cfg, SEEDS)
    batched.train_one_epoch()
    states = batched.state_dict()
    continued = batched.train_one_epoch()

    for index, seed in enumerate(SEEDS):
        single = TrainingRun(replace(cfg, seed=seed))
        single.load_state_dict(states[index])
        assert single.epoch == 1
        metrics = single.train_one_epoch()
        _assert_histories_close([continued[index]], [metrics])
        _assert_models_close(batched, index, single.model)


def test_a_seed_batch_resumes_from_single_seed_checkpoints(noise_free_gates):
    cfg = replace(NOISE_FREE, method="autonorm")
    runs = [TrainingRun(replace(cfg, seed=seed)) for seed in SEEDS]
    for run in runs:
        run.train_one_epoch()
    batched = SeedBatchedRun(cfg, SEEDS)
    batched.load_state_dict([run.state_dict() for run in runs])

    continued = batched.train_one_epoch()

    for index, run in enumerate(runs):
        _assert_histories_close([continued[index]], [run.train_one_epoch()])
        _assert_models_close(batched, index, run.model)
        assert len(batched.histories[index]) == 2


def test_resuming_from_saved_seed_checkpoints_equals_the_uninterrupted_batch(tmp_path):
    # Every noise source on: dropout, drop-path, Gumbel gates, MixUp/CutMix, data order.
    cfg = replace(
        NOISE_FREE,
        method="autonorm_s",
        model_overrides={"dropout": 0.1, "drop_path": 0.1},
        knobs={"t_freeze": 1, "eps_h": 0.0, "tau": 0.5},
        mixup=0.8,
        cutmix=1.0,
    )
    straight = SeedBatchedRun(cfg, SEEDS[:2])
    for _ in range(2):
        straight.train_one_epoch()

    first = SeedBatchedRun(cfg, SEEDS[:2])
    first.train_one_epoch()
    paths = [tmp_path / f"seed{seed}" / "checkpoint.pt" for seed in SEEDS[:2]]
    for path, state in zip(paths, first.state_dict(), strict=True):
        save_checkpoint(path, state)
    del first
    resumed = SeedBatchedRun(cfg, SEEDS[:2])
    resumed.load_state_dict([load_checkpoint(path) for path in paths])
    resumed.train_one_epoch()

    for index in range(2):
        assert _without_timing(resumed.histories[index]) == _without_timing(straight.histories[index])
        assert resumed.histories[index][0]["gates_frozen"] == 1
        for key, value in straight.stacked.seed_state_dict(index).items():
            assert torch.equal(resumed.stacked.seed_state_dict(index)[key], value), key
    assert straight.histories[0][-1]["train_loss"] != straight.histories[1][-1]["train_loss"]


def test_seed_states_from_different_epochs_are_refused(noise_free_gates):
    cfg = replace(NOISE_FREE, method="frozen_ln")
    batched = SeedBatchedRun(cfg, SEEDS[:2])
    at_zero = batched.state_dict()
    batched.train_one_epoch()
    with pytest.raises(ValueError, match="different epochs"):
        batched.load_state_dict([at_zero[0], batched.state_dict()[1]])
    with pytest.raises(ValueError, match="2 seeds"):
        batched.load_state_dict(at_zero[:1])
    with pytest.raises(ValueError, match="config differs in \\['seed'\\]"):
        batched.load_state_dict(list(reversed(at_zero)))


@pytest.mark.parametrize("seeds", [[], [1, 1], [0, 1.5]])
def test_seeds_must_be_distinct_integers(seeds):
    with pytest.raises(ValueError, match="seed"):
        SeedBatchedRun(NOISE_FREE, seeds)


# ----- the epoch-0 report and what runs under torch.func -------------------------------------------------


def test_initial_report_gives_every_seed_its_own_ranks_and_untrained_metric():
    batched = SeedBatchedRun(replace(NOISE_FREE, method="autonorm"), SEEDS[:2])
    reports = batched.initial_report()
    single = TrainingRun(replace(NOISE_FREE, method="autonorm", seed=SEEDS[1])).initial_report()

    assert [r["epoch"] for r in reports] == [0, 0]
    assert set(reports[1]) == set(single)
    for key, value in single.items():
        if key not in TIMING_KEYS:
            assert reports[1][key] == pytest.approx(value, rel=1e-4, abs=1e-6), key
    assert reports[0]["init_erank_jacobian"] != reports[1]["init_erank_jacobian"]


def test_the_fused_autonorm_kernel_steps_aside_under_vmap():
    seen = []

    def probe(x):
        seen.append(_fast_path_applies(x))
        return x.sum()

    torch.func.vmap(probe)(torch.randn(2, 4, 3, 8))
    assert seen == [False]


def test_attention_trains_under_vmap_grad_on_cpu():
    models = _tiny_models("layernorm", seeds=(0, 1))
    step = _stacked_step(models)
    x, y = _batches(steps=1)[0]
    loss, _ = step(x, y)
    assert loss.shape == (2,) and bool(torch.isfinite(loss).all())
    qkv = step.stacked.params["blocks.0.attn.branch.qkv.weight"]
    assert not torch.equal(qkv[0], models[0].blocks[0].attn.branch.qkv.weight)


# ----- the GPU benchmark path ---------------------------------------------------------------------------


def test_the_seed_batched_path_imports_without_the_orchestration_stack():
    script = (
        "import sys, json\n"
        "import workers.training.seed_batch, benchmarks.gpu_seed_batch\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    loaded = set(__import__("json").loads(out.stdout))
    assert not loaded & {"ray", "mlflow", "optuna", "sqlalchemy", "fastapi"}


def test_the_seed_batched_path_imports_without_pydantic():
    # A GPU machine may have torch and numpy only: the knob table lives in the pure-Python studies.knobs.
    script = (
        "import sys\n"
        "import workers.training.seed_batch, benchmarks.gpu_seed_batch\n"
        "print(' '.join(m for m in ('pydantic', 'yaml') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_measure_seed_batched_reports_a_throughput():
    from benchmarks.gpu_seed_batch import measure_seed_batched

    rate = measure_seed_batched("vit_lite_tiny", "autonorm_s", 2, 1, "cpu", 8)
    assert math.isfinite(rate) and rate > 0
    with pytest.raises(ValueError, match="ViT-Lite preset"):
        measure_seed_batched("encoder_tiny", "frozen_ln", 2, 1, "cpu", 8)
