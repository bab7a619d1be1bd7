"""`rank_vs_depth` with the Jacobian's rank at every depth (residual MLPs report it): Post-Norm must lose
rank with depth faster than Pre-Norm, besides the levels at full depth."""

from __future__ import annotations

import pytest

from studies.claims import CONTRADICTED, SUPPORTED, RankVsDepthCheck, Sensitivity
from tests.studies.claims.synthetic import data, law, trial

DEPTH = 32


def _study(post_rank, pre_rank, scale=None, seeds=range(5)):
    trials = []
    for offset, (placement, rank) in enumerate((("post", post_rank), ("pre", pre_rank))):
        for seed in seeds:
            init = law("init_erank_jacobian", range(1, DEPTH + 1), rank, seed + 3 * offset)
            init["init_erank_jacobian"] = init[f"init_erank_jacobian_{DEPTH}"]
            knobs = {"norm_placement": placement} | ({} if scale is None else {"init_scale": scale})
            trials.append(trial(knobs, seed, init))
    return trials


CHECK = RankVsDepthCheck()


def test_post_norm_rank_collapsing_with_depth_while_pre_norm_plateaus_supports_the_claim():
    result = CHECK.evaluate(data(_study(lambda d: 2.0 / d, lambda d: 0.6 * d**-0.1)))
    assert result.verdict == SUPPORTED
    assert [f.expected for f in result.findings] == ["< 0.1", "> 0.2", "> 0", "< 0", "> 0"]
    exponent, contrast = result.findings[3:]
    assert exponent.measured == pytest.approx(-1.0, abs=0.05)
    assert contrast.measured == pytest.approx(0.9, abs=0.05)
    assert "init_erank_jacobian_<l>" in result.notes[0]


def test_post_norm_losing_rank_more_slowly_than_pre_norm_contradicts_the_claim():
    result = CHECK.evaluate(data(_study(lambda d: 0.09 * d**-0.05, lambda d: 3.0 / d)))
    assert result.verdict == CONTRADICTED
    assert result.findings[4].verdict == CONTRADICTED  # pre's exponent below post's


def test_the_collapse_verdict_is_shown_per_init_scale():
    # At init scale 1 the Post-Norm rank only reaches 0.17 at full depth; from 4 on it collapses.
    trials = _study(lambda d: 0.17 * (DEPTH / d) ** 0.8, lambda d: 0.5 * (DEPTH / d) ** 0.2, scale=1.0)
    for scale in (4.0, 16.0):
        trials += _study(lambda d: 2.5 / d, lambda d: 0.4 * (DEPTH / d) ** 0.15, scale=scale)
    check = RankVsDepthCheck(sensitivity=Sensitivity(knob="init_scale", at=1.0))
    result = check.evaluate(data(trials))
    assert result.verdict == CONTRADICTED and result.findings[0].verdict == CONTRADICTED
    assert "supported for init_scale >= 4 only (grid 1 to 16)" in result.summary
