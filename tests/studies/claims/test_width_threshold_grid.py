"""`width_threshold`: the verdict judges the rank of the branch Jacobian J_f itself (rank-deficient below
1/p and full rank above supports the claim, full rank below contradicts it), the soft count of active
units and J_f's conditioning are notes that never decide it, a grid must resolve the threshold it tests,
and the verdict is shown per branch init scale."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from studies.claims import CONTRADICTED, SUPPORTED, Sensitivity, WidthThresholdCheck, parse_check
from studies.claims.verdicts import INCONCLUSIVE, NOT_TESTED
from studies.claims.width_threshold import activation_survival, crossing, grid_resolves, theoretical_threshold
from tests.studies.claims.synthetic import data, trial

GRID = (1.5, 1.75, 1.9, 2.1, 2.3, 2.5, 3.0, 4.0)
CHECK = WidthThresholdCheck(
    metric="init_branch_jacobian_full_rank", full_level=0.5, tolerance=0.04, resolution=0.05
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


def _study(full_rank_of, scales=(1.0,), with_null=True):
    """Every grid width, both activations, three seeds; the null is the law itself, the measurement wobbles."""
    trials = []
    for scale in scales:
        for activation in ("relu", "gelu"):
            for width in GRID:
                for seed in range(3):
                    law = full_rank_of(activation, width, scale)
                    init = {
                        "init_branch_jacobian_full_rank": min(1.0, max(0.0, law + 0.03 * (seed - 1))),
                        "init_branch_jacobian_smin": 0.2 * law + 0.01 * seed,
                        "init_branch_jacobian_erank": 0.6 + 0.01 * seed,
                        "init_branch_active_width": activation_survival(activation) * width,
                    }
                    if with_null:
                        init |= {
                            "init_branch_jacobian_full_rank_null": law,
                            "init_branch_jacobian_smin_null": 0.2 * law,
                        }
                    trials.append(
                        trial(
                            {"width_expansion": width, "activation": activation, "init_scale": scale},
                            seed,
                            init,
                        )
                    )
    return data(trials)  # fmt: skip


def _steps_at_one_over_p(activation, width, scale):
    """What the paper states: J_f is rank-deficient below 1/p and full rank above it."""
    return 0.0 if width < theoretical_threshold(activation) else 1.0


def _gelu_full_everywhere(activation, width, scale):
    """What random-matrix theory says: ReLU steps at 2; GELU' never vanishes, so J_f is always full rank."""
    return 1.0 if activation == "gelu" else _steps_at_one_over_p(activation, width, scale)


def test_rank_deficient_below_and_full_rank_above_one_over_p_is_supported():
    result = CHECK.evaluate(_study(_steps_at_one_over_p))
    assert result.verdict == SUPPORTED
    relu = _threshold(result, "relu")
    assert (
        relu.verdict == SUPPORTED and 1.9 < relu.measured < 2.1 and relu.paper == pytest.approx(2.0, abs=1e-5)
    )
    judged = [f for f in result.findings if f.label.startswith("relu, m/d")]
    assert [f.label.split(":")[0] for f in judged] == [
        f"relu, m/d = {w:g}" for w in GRID
    ]  # 1.9, 2.1 outside ±4 %
    assert all(f.n == 3 and f.ci_low is not None and f.ci_low <= f.measured <= f.ci_high for f in judged)


def test_gelus_full_rank_below_2_19_contradicts_it_while_relu_stays_supported():
    result = CHECK.evaluate(_study(_gelu_full_everywhere))
    assert result.verdict == CONTRADICTED
    assert _threshold(result, "relu").verdict == SUPPORTED
    gelu = _threshold(result, "gelu")
    assert gelu.verdict == CONTRADICTED and gelu.measured == 1.5
    assert "null model of the same shapes crosses at m/d 1.5" in gelu.note
    below = [f for f in result.findings if f.label.startswith("gelu, m/d") and f.expected.startswith("<")]
    assert [f.verdict for f in below] == [CONTRADICTED] * 4  # 1.5, 1.75, 1.9, 2.1
    assert all("Gaussian null model of the same shapes: 1" in f.note for f in below)


def test_full_rank_below_the_threshold_contradicts_even_relu():
    result = CHECK.model_copy(update={"activations": ["relu"]}).evaluate(_study(lambda *_: 1.0))
    assert result.verdict == CONTRADICTED
    assert _threshold(result, "relu").measured == 1.5


def test_a_fraction_straddling_the_level_is_inconclusive():
    straddling = data(
        [
            trial({"width_expansion": w, "activation": "relu"}, s,
                  {"init_branch_jacobian_full_rank": (0.2 if w < 2 else 0.8) if s < 2 else (0.8 if w < 2 else 0.2)})
            for w in GRID
            for s in range(3)
        ]
    )  # fmt: skip
    result = CHECK.model_copy(update={"activations": ["relu"]}).evaluate(straddling)
    assert result.verdict == INCONCLUSIVE
    assert all(f.note.startswith("the interval straddles") for f in result.findings[:-1])


def test_the_diagnostics_are_notes_with_intervals_and_never_change_the_verdict():
    study = _study(_steps_at_one_over_p)
    result = CHECK.evaluate(study)
    smin = next(
        n for n in result.notes if n.startswith("relu, diagnostic") and "init_branch_jacobian_smin" in n
    )
    assert "1.5: 0.01 [" in smin and "(n = 3, null 0)" in smin and "4: 0.21 [" in smin
    count = next(n for n in result.notes if "init_branch_active_width" in n and n.startswith("gelu"))
    assert "crosses 1 at m/d 2.19" in count and "does not measure J_f's rank" in count
    # The soft count crosses 1 at 1/p by construction, so it says nothing about J_f: a study whose J_f is
    # full rank everywhere is contradicted whatever the count does.
    assert CHECK.evaluate(_study(lambda *_: 1.0)).verdict == CONTRADICTED
    without_null = CHECK.evaluate(_study(_steps_at_one_over_p, with_null=False))
    assert without_null.verdict == SUPPORTED and "null" not in _threshold(without_null, "relu").note


def test_the_width_verdict_is_shown_per_init_scale():
    def gelu_full_at_large_scale(activation, width, scale):
        return (
            1.0 if activation == "gelu" and scale == 2.0 else _steps_at_one_over_p(activation, width, scale)
        )

    study = _study(gelu_full_at_large_scale, scales=(0.5, 1.0, 2.0))
    check = CHECK.model_copy(update={"sensitivity": Sensitivity(knob="init_scale", at=1.0)})
    result = check.evaluate(study)
    assert result.verdict == SUPPORTED
    assert "supported for init_scale <= 1 only (grid 0.5 to 2)" in result.summary
    header = next(i for i, n in enumerate(result.notes) if n.startswith("headline verdict"))
    assert [n.split(":")[1].strip() for n in result.notes[header + 1 :]] == [
        SUPPORTED,
        SUPPORTED,
        CONTRADICTED,
    ]


def test_an_unresolving_grid_in_the_data_leaves_the_threshold_not_tested():
    coarse = data(
        [
            trial(
                {"width_expansion": w, "activation": "relu"},
                s,
                {"init_branch_jacobian_full_rank": (0.0 if w < 2 else 1.0) + 0.01 * s * (1 if w < 2 else -1)},
            )
            for w in (1.0, 1.5, 3.0, 4.0)
            for s in range(3)
        ]
    )
    result = CHECK.model_copy(update={"activations": ["relu"]}).evaluate(coarse)
    assert result.verdict == NOT_TESTED
    assert theoretical_threshold("relu") == pytest.approx(2.0, abs=1e-5)


def _threshold(result, activation):
    return next(f for f in result.findings if f.label == f"{activation}: full-rank width threshold")


def test_the_catalog_parameters_parse():
    check = parse_check(
        {"type": "width_threshold", "metric": "init_branch_jacobian_full_rank", "full_level": 0.5, "tolerance": 0.04,
         "resolution": 0.05, "sensitivity": {"knob": "init_scale", "at": 1.0}}
    )  # fmt: skip
    assert isinstance(check, WidthThresholdCheck) and check.resolution == 0.05
    assert check.diagnostics == ["init_branch_jacobian_smin", "init_branch_jacobian_erank"]
