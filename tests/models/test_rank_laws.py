"""The init measurements behind the Transforming-Rank depth and width laws, on the residual MLP (float64,
CPU, fixed seeds): branch-to-skip ratio per unit, the Jacobian at every depth, the mean the blocks add,
and the soft count of active hidden units. Thresholds come from measurements (noted) with a margin."""

import copy
import itertools
import math

import numpy as np
import pytest
import torch

from models import build_model
from models.layers import MlpBranch
from models.rank import (
    ResidualMLP,
    ResidualMLPConfig,
    branch_active_widths,
    branch_jacobian,
    branch_jacobian_ranks,
    branch_jacobian_summary,
    branch_skip_ratios,
    depth_jacobian_eranks,
    effective_rank,
    hidden_states,
    init_rank_report,
    scale_free_smin,
    spectrum_is_full_rank,
    token_jacobian,
)


def _mlp(seed: int = 0, **fields) -> ResidualMLP:
    torch.manual_seed(seed)
    return ResidualMLP(ResidualMLPConfig(**fields))


def _tokens(dim: int, count: int = 8, seed: int = 100) -> torch.Tensor:
    return torch.randn(count, dim, generator=torch.Generator().manual_seed(seed))


def _exponent(values: list[float], first: int) -> float:
    depths = np.arange(first, len(values))
    return float(np.polyfit(np.log(depths), np.log(values[first:]), 1)[0])


def test_the_ratio_is_what_each_unit_adds_over_the_stream_it_reads() -> None:
    model = _mlp(dim=16, depth=4, skip_scale=0.5, init_scale=2.0)
    tokens = _tokens(16)
    states = hidden_states(model, tokens)  # Z_0 .. Z_4; pre-norm: Z_{l+1} - Z_l is what unit l adds
    expected = [
        float((after - before).norm() / before.norm()) for before, after in itertools.pairwise(states)
    ]
    assert branch_skip_ratios(model, tokens) == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("placement", ["post", "output", "none"])
def test_the_ratio_is_measured_before_any_norm_that_follows_the_sum(placement: str) -> None:
    model = _mlp(dim=16, depth=3, norm_placement=placement, skip_scale=2.0).double().eval()
    tokens = _tokens(16).double().unsqueeze(0)
    unit = model.blocks[0].mlp
    with torch.no_grad():
        added = unit.branch(tokens)
        if placement == "output":
            added = unit.norm(added)
        expected = float((2.0 * added).norm() / tokens.norm())
    assert branch_skip_ratios(model, tokens[0])[0] == pytest.approx(expected, rel=1e-9)


def test_pre_norm_ratio_decays_like_one_over_sqrt_depth_and_post_norm_ratio_stays_constant() -> None:
    # Measured (dim 64, depth 32, init_scale 4, 8 seeds, exponents over l >= 8): pre -0.54 +- 0.06, post
    # -0.04 +- 0.07 (seed to seed), the pre stream 0.52 +- 0.05.
    exponents: dict[str, list[float]] = {"pre": [], "post": [], "stream": []}
    for seed in range(6):
        for placement in ("pre", "post"):
            model = _mlp(seed, dim=64, depth=32, init_scale=4.0, norm_placement=placement)
            exponents[placement].append(_exponent(branch_skip_ratios(model, _tokens(64)), 8))
        report = init_rank_report(_mlp(seed, dim=64, depth=32, init_scale=4.0), _tokens(64))
        exponents["stream"].append(_exponent([report[f"init_stream_rms_{d}"] for d in range(33)], 8))
    for law, target in (("pre", -0.5), ("post", 0.0), ("stream", 0.5)):
        assert max(abs(e - target) for e in exponents[law]) < 0.25, law
        assert float(np.mean(exponents[law])) == pytest.approx(target, abs=0.08), law


def test_the_jacobian_at_every_depth_ends_at_the_full_stack_jacobian() -> None:
    model = _mlp(dim=16, depth=5, norm_placement="post", init_scale=2.0)
    tokens = _tokens(16)
    eranks = depth_jacobian_eranks(model, tokens)
    assert len(eranks) == 5
    assert eranks[-1] == pytest.approx(
        effective_rank(token_jacobian(model, tokens), normalize=True), rel=1e-9
    )
    shallow = copy.deepcopy(model)
    shallow.blocks = shallow.blocks[:2]  # the same first two blocks
    assert eranks[1] == pytest.approx(
        effective_rank(token_jacobian(shallow, tokens), normalize=True), rel=1e-9
    )


def test_stacks_whose_tokens_interact_report_no_jacobian_per_depth() -> None:
    model = build_model("vit_lite_tiny", {"layer_scale_init": None})
    assert depth_jacobian_eranks(model, torch.randn(2, 1, 8, 8)) == []
    report = init_rank_report(model, torch.randn(2, 1, 8, 8))
    assert not any(k.startswith("init_erank_jacobian_") and k[-1].isdigit() for k in report)
    # Two residual units per Transformer block (attention, MLP): one ratio each.
    assert sum(k.startswith("init_branch_skip_ratio_") for k in report) == 2 * model.config.depth


def test_post_norm_jacobian_rank_falls_with_depth_much_faster_than_pre_norm() -> None:
    # Measured (dim 64, depth 32, init_scale 1): post 0.66 (l=4) -> 0.17 (l=32), pre 0.77 -> 0.50.
    post = depth_jacobian_eranks(_mlp(dim=64, depth=32, norm_placement="post"), _tokens(64))
    pre = depth_jacobian_eranks(_mlp(dim=64, depth=32), _tokens(64))
    assert post[-1] < 0.25 < 0.4 < pre[-1]
    assert _exponent([math.nan, *post], 8) < -0.5 < _exponent([math.nan, *pre], 8)


@pytest.mark.parametrize("seed", range(3))
def test_for_relu_the_soft_count_of_active_units_is_the_numerical_rank_of_the_branch_jacobian(seed) -> None:
    # One token: rank(J_f) = min(d, active units) almost surely, so the two must agree block by block.
    for ratio in (1.0, 1.5, 2.0, 3.0):
        model = _mlp(seed, dim=32, depth=3, mlp_ratio=ratio)
        token = _tokens(32, count=1, seed=seed)
        counts = branch_active_widths(model, token)
        ranks = branch_jacobian_ranks(model, token)
        assert [min(1.0, c) for c in counts] == pytest.approx(ranks, abs=1e-12)


def test_the_soft_count_crosses_the_width_at_one_over_p_by_construction() -> None:
    # A diagnostic only: its mean is (m/d) E[act'(z)^2], so it crosses 1 at 1/p whatever J_f does. Measured (dim 128, depth 4, 3 seeds, init_scale 1): relu 1.9 -> 0.97, 2.1 -> 1.05;
    # gelu 2.1 -> 0.95, 2.3 -> 1.04 (p = 0.456: 1/p = 2.19). GELU's numerical rank is full throughout.
    def count(activation: str, ratio: float) -> float:
        reports = [
            init_rank_report(_mlp(s, dim=128, depth=4, mlp_ratio=ratio, activation=activation), _tokens(128))
            for s in range(3)
        ]
        assert all(r["init_branch_rank"] == 1.0 for r in reports) or activation == "relu"
        return float(np.mean([r["init_branch_active_width"] for r in reports]))

    assert count("relu", 1.9) < 1.0 < count("relu", 2.1)
    assert count("gelu", 2.1) < 1.0 < count("gelu", 2.3)


def test_one_matrix_relu_adds_a_mean_that_grows_linearly_two_matrices_like_a_random_walk() -> None:
    # Measured (dim 64, depth 16, seeds 0-2, digits tokens): exponent 0.90 one-matrix ReLU, 0.51 two
    # matrices, 0.49 one-matrix tanh; random tokens here give the same picture.
    def exponent(branch: str, activation: str) -> float:
        report = init_rank_report(_mlp(dim=64, depth=16, branch=branch, activation=activation), _tokens(64))
        drift = [report[f"init_mean_drift_{d}"] for d in range(17)]
        assert drift[0] == 0.0
        return _exponent(drift, 1)

    assert exponent("one_matrix", "relu") > 0.8
    assert exponent("two_matrix", "relu") < 0.7
    assert exponent("one_matrix", "tanh") < 0.7


@pytest.mark.parametrize("ratio", [1.5, 1.9, 2.1, 3.0])
def test_a_relu_branch_jacobian_has_rank_min_d_k_over_its_k_active_units(ratio: float) -> None:
    # J_f = W_down[:, A] W_up[A, :]: (d x k)(k x d) Gaussian factors, rank min(d, k) almost surely. Below
    # k = d sigma_min is round-off; above it, at the square matrix's hard edge (d sigma_min / RMS ~ 0.1-1).
    dim = 32
    for seed in range(4):
        torch.manual_seed(seed)
        branch = MlpBranch(dim, ratio, "relu").double()
        x = torch.randn(dim, dtype=torch.float64)
        active = int((branch.fc_up(x) > 0).sum())
        s = torch.linalg.svdvals(branch_jacobian(branch, x, "relu").detach())
        assert int((s > s[0] * dim * torch.finfo(s.dtype).eps).sum()) == min(dim, active)
        assert spectrum_is_full_rank(s) == (active >= dim)
        if active < dim:
            assert scale_free_smin(s) < 1e-10
        elif active > dim + 2:
            assert scale_free_smin(s) > 1e-3


def test_the_branch_jacobian_summary_steps_for_relu_at_2_and_is_full_for_gelu_as_the_gaussian_null() -> None:
    # Measured (dim 64, depth 4, seed 0, 4 tokens): relu full-rank fraction 0 at m/d 1.5, 1 at 3; gelu 1
    # at 1.5; the effective rank within 0.01 of the null's, d sigma_min / RMS 0.15-0.45 when full rank.
    def summary(activation: str, ratio: float) -> dict[str, float]:
        return branch_jacobian_summary(
            _mlp(dim=64, depth=4, mlp_ratio=ratio, activation=activation), _tokens(64)
        )

    narrow, wide, gelu = summary("relu", 1.5), summary("relu", 3.0), summary("gelu", 1.5)
    assert narrow["init_branch_jacobian_full_rank"] == 0.0 == narrow["init_branch_jacobian_full_rank_null"]
    assert narrow["init_branch_jacobian_smin"] < 1e-10
    assert wide["init_branch_jacobian_full_rank"] == 1.0 == wide["init_branch_jacobian_full_rank_null"]
    assert wide["init_branch_jacobian_smin"] > 0.05
    assert gelu["init_branch_jacobian_full_rank"] == 1.0 == gelu["init_branch_jacobian_full_rank_null"]
    for report in (narrow, wide, gelu):
        assert report["init_branch_jacobian_erank"] == pytest.approx(
            report["init_branch_jacobian_erank_null"], abs=0.02
        )
        assert 0.0 < report["init_branch_jacobian_erank"] < 1.0


def test_the_gaussian_null_is_deterministic_and_leaves_the_global_rng_alone() -> None:
    model, tokens = _mlp(dim=32, depth=2, mlp_ratio=2.0), _tokens(32)
    state = torch.get_rng_state()
    first = branch_jacobian_summary(model, tokens)
    assert torch.equal(state, torch.get_rng_state())
    assert branch_jacobian_summary(model, tokens) == first
    other = branch_jacobian_summary(_mlp(1, dim=32, depth=2, mlp_ratio=2.0), tokens)
    assert other["init_branch_jacobian_smin_null"] != first["init_branch_jacobian_smin_null"]
    assert set(first) <= set(init_rank_report(model, tokens))
