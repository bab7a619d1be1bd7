"""The Transforming-Rank claims' specs at every size: they train the residual-MLP classifier (the paper
states its rank results for residual MLP branches), sweep the branch init scale so the verdict can be
shown across it, and (width threshold) hold a grid that resolves each threshold it tests."""

from __future__ import annotations

import pytest
import yaml

from studies.catalog import CATALOG_DIR
from studies.claims import WidthThresholdCheck, parse_check
from studies.claims.width_threshold import grid_resolves
from studies.limits import StudyLimits
from studies.spec import load_spec, validate_spec_data

RANK_CLAIMS = (
    "rank_post_norm_collapse",
    "mean_spike_one_matrix_relu",
    "width_expansion_threshold",
    "skip_scale_lowers_rank",
    "init_rank_predicts_trainability",
)
SIZES = ("smoke", "cpu", "paper")
# The width claim's check as in studies/catalog/claims.yaml (the fraction of blocks whose J_f is numerically
# full rank, judged against 0.5, widths within ±4 % of a threshold not judged, each located to ±5 %).
WIDTH_CHECK = parse_check(
    {"type": "width_threshold", "metric": "init_branch_jacobian_full_rank", "activations": ["relu", "gelu"],
     "full_level": 0.5, "tolerance": 0.04, "resolution": 0.05, "sensitivity": {"knob": "init_scale", "at": 1.0}}
)  # fmt: skip


def _spec(claim: str, size: str):
    path = CATALOG_DIR / claim / f"{size}.yaml"
    spec = load_spec(path)
    assert validate_spec_data(yaml.safe_load(path.read_text()), limits=StudyLimits()).claim == claim
    return spec


@pytest.mark.parametrize("claim", RANK_CLAIMS)
@pytest.mark.parametrize("size", SIZES)
def test_rank_specs_train_the_residual_mlp_classifier(claim, size):
    spec = _spec(claim, size)
    assert spec.claim == claim and spec.kind == "grid"
    assert spec.model.preset in {"mlp_classifier_tiny", "mlp_classifier_paper"}
    assert spec.model.preset == ("mlp_classifier_paper" if size == "paper" else "mlp_classifier_tiny")
    assert spec.dataset == ("cifar10" if size == "paper" else "digits")


@pytest.mark.parametrize("claim", RANK_CLAIMS)
@pytest.mark.parametrize("size", ("cpu", "paper"))
def test_rank_specs_sweep_the_branch_init_scale_around_the_registered_value(claim, size):
    init_scale = _spec(claim, size).search["init_scale"]
    assert init_scale.type == "grid" and len(init_scale.values) >= 4
    assert 1.0 in init_scale.values  # the headline verdict's value: the fan-in init


@pytest.mark.parametrize("claim", RANK_CLAIMS)
def test_only_the_trainability_claim_trains_more_than_one_epoch(claim):
    for size in SIZES:
        epochs = _spec(claim, size).budget.epochs
        assert (epochs > 1) == (claim == "init_rank_predicts_trainability"), size


@pytest.mark.parametrize("size", SIZES)
def test_the_width_grids_resolve_both_thresholds(size):
    grid = _spec("width_expansion_threshold", size).search["width_expansion"].values
    assert isinstance(WIDTH_CHECK, WidthThresholdCheck)
    assert grid_resolves(WIDTH_CHECK, grid) is None
    assert grid_resolves(WIDTH_CHECK, [1.0, 1.5, 3.0, 4.0]) is not None  # the grid the review rejected
