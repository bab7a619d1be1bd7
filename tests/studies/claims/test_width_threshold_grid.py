"""`width_threshold`: a grid must resolve the threshold it tests, the soft count of active units makes
GELU's 2.19 expressible, and the verdict is shown per branch init scale (GELU's p moves with it)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from studies.claims import CONTRADICTED, SUPPORTED, Sensitivity, WidthThresholdCheck, parse_check
from studies.claims.verdicts import NOT_TESTED
from studies.claims.width_threshold import activation_survival, crossing, grid_resolves, theoretical_threshold
from tests.studies.claims.synthetic import data, trial

GRID = (1.5, 1.75, 1.9, 2.1, 2.3, 2.5, 3.0, 4.0)
CHECK = WidthThresholdCheck(
    metric="init_branch_active_width", full_level=1.0, tolerance=0.04, resolution=0.05
)


def test_the_catalog_grid_resolves_both_thresholds():
    assert grid_resolves(CHECK, list(GRID)) is None


def test_a_grid_with_a_wide_gap_around_the_threshold_is_rejected_with_the_reason():
    reason = grid_resolves(CHECK, [1.0, 1.5, 3.0, 4.0])
    assert reason is not None
    assert "relu's threshold 2" in reason and "1.5 and 3: any threshold between them would pass" in reason
    assert "gelu's threshold 2.19" in reason


def test_a_grid_that_resolves_relu_but_not_gelu_names_gelu():
    reason = grid_resolves(CHECK, [1.5, 1.75, 1.9, 2.1, 2.5, 3.0])
    assert reason is not None and "relu" not in reason and "gelu's threshold 2.19" in reason
    assert "no width above" in (grid_resolves(CHECK, [1.0, 1.5, 1.9]) or "")


def test_the_resolution_must_exceed_the_unjudged_band():
    with pytest.raises(ValidationError, match="resolution"):
        WidthThresholdCheck(tolerance=0.05, resolution=0.05)
    assert WidthThresholdCheck(tolerance=0.1).resolution_or_default == pytest.approx(0.2)


def test_the_crossing_is_interpolated_between_grid_widths():
    assert crossing({1.9: 0.95, 2.1: 1.05}, 1.0) == pytest.approx(2.0)
    assert crossing({1.5: 1.2, 2.0: 1.3}, 1.0) == 1.5
    assert crossing({1.5: 0.5, 2.0: 0.6}, 1.0) is None


def _study(count_of, scales=(1.0,)):
    return data(
        [
            trial(
                {"width_expansion": width, "activation": activation, "init_scale": scale},
                seed,
                {"init_branch_active_width": count_of(activation, width, scale) + 0.003 * (seed - 1),
                 "init_branch_rank": 1.0 if activation == "gelu" else min(1.0, 0.5 * width)},
            )
            for scale in scales
            for activation in ("relu", "gelu")
            for width in GRID
            for seed in range(3)
        ]
    )  # fmt: skip


def _count(activation, width, scale):
    # GELU's squared gain E[gelu'(s z)²] grows with the pre-activations' spread s: ~0.456 at s = 1, closer to
    # ReLU's 0.5 at s = 2 (measured 0.50), ~0.35 at s = 0.5.
    p = (
        activation_survival(activation)
        if activation == "relu" or scale == 1.0
        else {2.0: 0.5, 0.5: 0.35}[scale]
    )
    return p * width


def test_the_soft_count_supports_gelus_threshold_where_the_numerical_rank_contradicts_it():
    study = _study(_count)
    assert CHECK.evaluate(study).verdict == SUPPORTED
    numerical = WidthThresholdCheck(
        metric="init_branch_rank", full_level=0.99, tolerance=0.04, resolution=0.05
    )
    result = numerical.evaluate(study)
    assert result.verdict == CONTRADICTED  # GELU's numerical rank is full at every m >= d
    gelu = next(f for f in result.findings if f.label == "gelu: full-rank width threshold")
    assert gelu.verdict == CONTRADICTED and gelu.measured == 1.5


def test_the_width_verdict_is_shown_per_init_scale():
    study = _study(_count, scales=(0.5, 1.0, 2.0))
    check = CHECK.model_copy(update={"sensitivity": Sensitivity(knob="init_scale", at=1.0)})
    result = check.evaluate(study)
    assert result.verdict == SUPPORTED
    assert "supported for init_scale = 1 only (grid 0.5 to 2)" in result.summary
    assert [n.split(":")[1].strip() for n in result.notes[1:]] == [CONTRADICTED, SUPPORTED, CONTRADICTED]


def test_an_unresolving_grid_in_the_data_leaves_the_threshold_not_tested():
    coarse = data(
        [
            trial(
                {"width_expansion": w, "activation": "relu"},
                s,
                {"init_branch_active_width": 0.5 * w + 0.01 * s},
            )
            for w in (1.0, 1.5, 3.0, 4.0)
            for s in range(3)
        ]
    )
    result = CHECK.model_copy(update={"activations": ["relu"]}).evaluate(coarse)
    assert result.verdict == NOT_TESTED
    assert theoretical_threshold("relu") == pytest.approx(2.0, abs=1e-5)


def test_the_catalog_parameters_parse():
    check = parse_check(
        {"type": "width_threshold", "metric": "init_branch_active_width", "full_level": 1.0, "tolerance": 0.04,
         "resolution": 0.05, "sensitivity": {"knob": "init_scale", "at": 1.0}}
    )  # fmt: skip
    assert isinstance(check, WidthThresholdCheck) and check.resolution == 0.05
