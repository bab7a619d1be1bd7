"""The Transforming-Rank grid on the real ViT-Lite backbone at init (float64, CPU, fixed seeds).

What a rank study sees depends on two settings the AutoNorm recipe ships with: LayerScale 1e-4 makes every
block start as the identity, and timm's branch init (std 0.02) keeps the branches tiny next to the skip.
Either hides the placement effect. Thresholds come from measurements (in the comments) with a margin.
"""

import pytest
import torch

from models import build_model
from models.rank import init_rank_report

# std 0.02 * 5 = 0.1 ~ 1/sqrt(128): branches as large as the skip path, as in the paper's analysis.
PAPER_BRANCH_SCALE = 5.0


def _report(
    depth: int, placement: str, *, layer_scale_init: float | None, init_scale: float
) -> dict[str, float]:
    torch.manual_seed(0)
    model = build_model(
        "vit_lite_paper",
        {
            "depth": depth,
            "norm_placement": placement,
            "layer_scale_init": layer_scale_init,
            "init_scale": init_scale,
            "image_size": 28,
            "in_channels": 1,
            "num_classes": 10,
            "dropout": 0.0,
            "drop_path": 0.0,
        },
    )
    return init_rank_report(model, torch.randn(8, 1, 28, 28))


@pytest.mark.parametrize("depth", [8, 16])
def test_without_layer_scale_post_norm_representations_collapse_below_pre_norm(depth: int) -> None:
    # Measured (seed 0/1): depth 8 post 0.18-0.22 vs pre 0.50; depth 24 post 0.02 vs pre 0.40.
    pre = _report(depth, "pre", layer_scale_init=None, init_scale=PAPER_BRANCH_SCALE)
    post = _report(depth, "post", layer_scale_init=None, init_scale=PAPER_BRANCH_SCALE)
    assert post["init_erank_repr_last"] < 0.6 * pre["init_erank_repr_last"]
    # The collapse is towards one shared direction: the mean token dominates post-norm's last layer.
    assert post["init_mean_spike_last"] > 0.95


def test_post_norm_rank_falls_with_depth_while_pre_norm_plateaus() -> None:
    shallow = {
        p: _report(2, p, layer_scale_init=None, init_scale=PAPER_BRANCH_SCALE) for p in ("pre", "post")
    }
    deep = {p: _report(16, p, layer_scale_init=None, init_scale=PAPER_BRANCH_SCALE) for p in ("pre", "post")}
    # Measured: post 0.62 -> ~0.05, pre 0.61 -> ~0.45 (representation erank / width, last layer).
    assert deep["post"]["init_erank_repr_last"] < 0.3 * shallow["post"]["init_erank_repr_last"]
    assert deep["pre"]["init_erank_repr_last"] > 0.5 * shallow["pre"]["init_erank_repr_last"]


def test_layer_scale_hides_the_placement_effect_on_the_jacobian() -> None:
    # Measured at depth 8: pre 1.000, post 0.984 with LayerScale 1e-4 (every block ~ identity).
    pre = _report(8, "pre", layer_scale_init=1e-4, init_scale=PAPER_BRANCH_SCALE)
    post = _report(8, "post", layer_scale_init=1e-4, init_scale=PAPER_BRANCH_SCALE)
    assert pre["init_erank_jacobian"] > 0.95
    assert post["init_erank_jacobian"] > 0.95
