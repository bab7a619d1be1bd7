"""The Transforming-Rank claims, reproduced numerically at init (float64, CPU, fixed seeds).
Thresholds were set from measurements (noted per test) with a margin."""

import math

import pytest
import torch

from models import build_model
from models.layers import MlpBranch
from models.rank import (
    ResidualMLP,
    ResidualMLPConfig,
    activation_derivative_power,
    branch_jacobian,
    branch_jacobian_ranks,
    effective_rank,
    hidden_states,
    init_rank_report,
    input_output_jacobian,
    mean_spike_ratio,
    representation_eranks,
    scale_free_smin,
    spectrum_is_full_rank,
    token_jacobian,
)


def test_effective_rank_uses_l1_normalised_singular_values() -> None:
    assert effective_rank(torch.eye(5)) == pytest.approx(5.0)
    assert effective_rank(torch.diag(torch.tensor([1.0, 0.0, 0.0]))) == pytest.approx(1.0)
    s = torch.tensor([3.0, 1.0])
    p = s / s.sum()
    expected = math.exp(-(p * p.log()).sum().item())  # 1.7548; softmax or s^2 would give other values
    assert effective_rank(torch.diag(s)) == pytest.approx(expected)
    assert effective_rank(torch.eye(4), normalize=True) == pytest.approx(1.0)


def test_mean_spike_ratio_is_one_for_identical_tokens_and_zero_for_centred_ones() -> None:
    assert mean_spike_ratio(torch.ones(5, 3)) == pytest.approx(1.0)
    z = torch.randn(6, 4)
    assert mean_spike_ratio(z - z.mean(0)) == pytest.approx(0.0, abs=1e-6)


def test_activation_derivative_power_matches_the_papers_constants() -> None:
    assert activation_derivative_power("relu") == pytest.approx(0.5, abs=1e-3)
    assert activation_derivative_power("gelu") == pytest.approx(0.456, abs=2e-3)


def test_closed_form_branch_jacobian_equals_autograd() -> None:
    branch = MlpBranch(6, 2.0, "gelu").double()
    x = torch.randn(6, dtype=torch.float64)
    torch.testing.assert_close(branch_jacobian(branch, x, "gelu"), input_output_jacobian(branch, x))


@pytest.mark.parametrize("seed", range(4))
def test_relu_branch_jacobian_is_rank_deficient_at_m_over_d_1_and_full_rank_at_4(seed: int) -> None:
    # Measured ranks for d = 32 at m/d = 1: 9..18 (about half the units are active); at m/d = 4: 32.
    torch.manual_seed(seed)
    dim = 32
    x = torch.randn(dim, dtype=torch.float64)
    narrow = branch_jacobian(MlpBranch(dim, 1.0, "relu").double(), x, "relu")
    wide = branch_jacobian(MlpBranch(dim, 4.0, "relu").double(), x, "relu")
    assert torch.linalg.matrix_rank(narrow) <= 0.75 * dim
    assert torch.linalg.matrix_rank(wide) == dim


def test_scale_free_smin_is_round_off_when_singular_and_order_one_for_a_square_gaussian() -> None:
    # d sigma_min / RMS sigma: a full-rank square Gaussian matrix sits at the hard edge, about RMS / d, at
    # every size (measured medians 0.4-0.6 at d = 64, 128, 256), so the factor d makes sizes comparable.
    generator = torch.Generator().manual_seed(0)
    for dim in (32, 128):
        values = [
            scale_free_smin(
                torch.linalg.svdvals(torch.randn(dim, dim, generator=generator, dtype=torch.float64))
            )
            for _ in range(20)
        ]
        assert 0.2 < sorted(values)[10] < 1.5
    singular = torch.randn(16, 15, dtype=torch.float64) @ torch.randn(15, 16, dtype=torch.float64)
    s = torch.linalg.svdvals(singular)
    assert scale_free_smin(s) < 1e-10 and not spectrum_is_full_rank(s)
    assert scale_free_smin(torch.ones(4, dtype=torch.float64)) == pytest.approx(4.0)
    assert spectrum_is_full_rank(torch.ones(4, dtype=torch.float64))


def _jacobian_erank(placement: str, depth: int, seed: int) -> float:
    torch.manual_seed(seed)
    model = ResidualMLP(ResidualMLPConfig(dim=32, depth=depth, norm_placement=placement, activation="relu"))
    return effective_rank(token_jacobian(model, torch.randn(16, 32)), normalize=True)


def test_post_norm_jacobian_rank_collapses_with_depth_while_pre_norm_plateaus() -> None:
    # Measured (d = 32, seeds 0-2): pre 0.57-0.63 at depth 16, 0.48-0.51 at 48;
    # post 0.25-0.28 at depth 16, 0.09-0.10 at 48.
    pre16, pre48 = _jacobian_erank("pre", 16, 0), _jacobian_erank("pre", 48, 0)
    post16, post48 = _jacobian_erank("post", 16, 0), _jacobian_erank("post", 48, 0)
    assert post48 < 0.2 and post48 < 0.6 * post16  # keeps collapsing
    assert pre48 > 0.4 and pre48 > 0.7 * pre16  # plateaus
    assert pre48 > 2.5 * post48


def _spikes(branch: str, activation: str, seed: int = 0) -> tuple[float, float, float]:
    torch.manual_seed(seed)
    config = ResidualMLPConfig(dim=64, depth=32, activation=activation, branch=branch, norm_placement="pre")
    states = hidden_states(ResidualMLP(config), torch.randn(64, 64))
    growth = float(states[32].mean(0).norm() / states[4].mean(0).norm())
    return growth, mean_spike_ratio(states[4]), mean_spike_ratio(states[32])


def test_one_matrix_relu_branch_grows_a_mean_spike_linearly_and_two_matrix_does_not() -> None:
    # Measured (seeds 0-2): the mean component grows 7.9x from depth 4 to 32 with one matrix (linear: 8x)
    # and 3.0-3.2x with two (random walk: sqrt(8) = 2.8x); spike ratio at depth 32: 0.96-0.97 vs 0.70-0.73.
    one_growth, _, one_last = _spikes("one_matrix", "relu")
    two_growth, _, two_last = _spikes("two_matrix", "relu")
    assert one_growth > 7.0 and two_growth < 4.5
    assert one_last > 0.9 and two_last < 0.85


def test_tanh_one_matrix_branch_grows_no_mean_spike() -> None:
    # Measured: spike ratio 0.10-0.13 at every depth (tanh is centred).
    _, _, last = _spikes("one_matrix", "tanh")
    assert last < 0.25


@pytest.mark.parametrize(
    ("preset", "example", "overrides"),
    [
        ("vit_lite_tiny", torch.randn(2, 1, 8, 8), {}),
        ("encoder_tiny", torch.randint(1, 50, (2, 12)), {"vocab_size": 50, "head": "lm"}),
        ("tabular_tiny", torch.randn(2, 8), {}),
    ],
)
@pytest.mark.parametrize("norm", ["layernorm", "autonorm"])
def test_init_rank_report_works_on_every_backbone_without_touching_the_model(
    preset: str, example: torch.Tensor, overrides: dict, norm: str
) -> None:
    model = build_model(preset, {**overrides, "norm": norm, "layer_scale_init": None})
    before = {k: v.clone() for k, v in model.state_dict().items()}
    report = init_rank_report(model, example)
    assert {"init_erank_jacobian", "init_erank_repr_last", "init_mean_spike_last"} <= set(report)
    branch_keys = {
        "init_branch_jacobian_full_rank",
        "init_branch_jacobian_smin_null",
        "init_branch_jacobian_erank",
    }
    assert branch_keys <= set(report)  # every backbone here has MLP branches
    assert all(isinstance(v, float) and math.isfinite(v) for v in report.values())
    assert 0.0 < report["init_erank_jacobian"] <= 1.0 + 1e-9
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert next(model.parameters()).dtype == torch.float32


def test_representation_eranks_has_one_value_per_depth_including_the_input() -> None:
    model = ResidualMLP(ResidualMLPConfig(dim=16, depth=5))
    values = representation_eranks(model, torch.randn(20, 16))
    assert len(values) == 6 and all(0.0 < v <= 1.0 for v in values)


def test_init_rank_report_gives_the_rank_and_mean_spike_at_every_depth() -> None:
    model = build_model("vit_lite_tiny", {"layer_scale_init": None})
    example = torch.randn(2, 1, 8, 8)
    report = init_rank_report(model, example)
    depths = model.config.depth + 1  # Z_0 (embedded tokens) .. Z_L
    assert [report[f"init_erank_repr_{d}"] for d in range(depths)] == pytest.approx(
        representation_eranks(model, example)
    )
    assert f"init_erank_repr_{depths}" not in report
    assert report["init_mean_spike_0"] == report["init_mean_spike_first"]
    assert report[f"init_mean_spike_{depths - 1}"] == report["init_mean_spike_last"]


@pytest.mark.parametrize(("mlp_ratio", "low", "high"), [(1.0, 0.4, 0.6), (1.5, 0.6, 0.8), (4.0, 1.0, 1.0)])
def test_relu_branch_rank_on_vit_lite_crosses_full_rank_near_m_over_d_2(
    mlp_ratio: float, low: float, high: float
) -> None:
    # Measured on vit_lite_paper (depth 4, seed 0): m/d 1 -> 0.46-0.53, 1.5 -> 0.69-0.73, 2 -> 0.94-1.0, 4 -> 1.
    torch.manual_seed(0)
    model = build_model(
        "vit_lite_paper",
        {"depth": 4, "layer_scale_init": None, "mlp_ratio": mlp_ratio, "activation": "relu",
         "image_size": 28, "in_channels": 1, "num_classes": 10, "dropout": 0.0, "drop_path": 0.0},
    )  # fmt: skip
    ranks = branch_jacobian_ranks(model, torch.randn(2, 1, 28, 28))
    assert len(ranks) == 4 and all(low <= r <= high for r in ranks)
    report = init_rank_report(model, torch.randn(2, 1, 28, 28))
    assert low <= report["init_branch_rank"] <= high
