"""`ratio_vs_depth` on fabricated studies: the Pre-Norm ratio decaying like l^-1/2 while Post-Norm's stays
constant supports the claim; other laws contradict it; missing measurements are `not tested`."""

from __future__ import annotations

import math

import pytest

from studies.claims import CONTRADICTED, INCONCLUSIVE, SUPPORTED, RatioVsDepthCheck, Sensitivity, parse_check
from studies.claims.verdicts import NOT_TESTED
from tests.studies.claims.synthetic import data, law, trial

DEPTH = 32
SEEDS = range(6)
CHECK = RatioVsDepthCheck()


def _study(pre_ratio, post_ratio, pre_stream=lambda d: math.sqrt(1 + d), *, scale=None, seeds=SEEDS):
    trials = []
    for placement, ratio in (("pre", pre_ratio), ("post", post_ratio)):
        for seed in seeds:
            init = law("init_branch_skip_ratio", range(DEPTH), ratio, seed)
            init |= law(
                "init_stream_rms", range(DEPTH + 1), pre_stream if placement == "pre" else lambda d: 1.0, seed
            )
            knobs = {"norm_placement": placement} | ({} if scale is None else {"init_scale": scale})
            trials.append(trial(knobs, seed, init))
    return trials


def test_pre_decaying_like_one_over_sqrt_depth_and_post_constant_supports_the_claim():
    result = CHECK.evaluate(data(_study(lambda d: 1 / math.sqrt(d + 1), lambda d: 0.7)))
    assert result.verdict == SUPPORTED
    pre, post, stream = result.findings
    assert pre.measured == pytest.approx(-0.5, abs=0.05) and pre.expected == "in [-0.65, -0.35]"
    assert post.measured == pytest.approx(0.0, abs=0.05) and post.paper == 0.0
    assert stream.measured == pytest.approx(0.5, abs=0.05) and stream.verdict == SUPPORTED


def test_a_pre_norm_ratio_that_stays_constant_contradicts_the_claim():
    result = CHECK.evaluate(data(_study(lambda d: 0.7, lambda d: 0.7, lambda d: 1.0)))
    assert result.verdict == CONTRADICTED
    assert [f.verdict for f in result.findings] == [CONTRADICTED, SUPPORTED, CONTRADICTED]


def test_a_post_norm_ratio_that_decays_contradicts_the_claim():
    result = CHECK.evaluate(data(_study(lambda d: 1 / math.sqrt(d + 1), lambda d: 1 / (d + 1))))
    assert result.verdict == CONTRADICTED
    assert result.findings[1].verdict == CONTRADICTED and result.findings[1].measured < -0.8


def test_an_exponent_on_the_edge_of_the_band_is_inconclusive():
    # l^-0.35 sits on the band's edge (-0.5 ± 0.15): the interval straddles it.
    result = CHECK.evaluate(data(_study(lambda d: max(d, 1) ** -0.35, lambda d: 0.7)))
    assert result.findings[0].verdict == INCONCLUSIVE
    assert result.verdict == INCONCLUSIVE


def test_trials_without_per_depth_ratios_leave_the_claim_not_tested():
    trials = [
        trial({"norm_placement": p}, s, {"init_erank_jacobian": 0.3}) for p in ("pre", "post") for s in SEEDS
    ]
    result = CHECK.evaluate(data(trials))
    assert result.verdict == NOT_TESTED
    assert all(f.verdict == NOT_TESTED and f.note.startswith("not tested: ") for f in result.findings)


def test_without_a_stream_measure_the_stream_growth_part_is_not_tested_not_silent():
    check = RatioVsDepthCheck(stream_metric=None)
    result = check.evaluate(data(_study(lambda d: 1 / math.sqrt(d + 1), lambda d: 0.7)))
    assert result.verdict == NOT_TESTED
    assert result.findings[2].verdict == NOT_TESTED and "stream_metric" in result.findings[2].note


def test_the_verdict_is_shown_per_init_scale_with_the_headline_at_the_registered_one():
    # Small init scale: the embedded input dominates the stream, the Pre-Norm ratio barely decays.
    trials = _study(lambda d: (d + 1) ** -0.1, lambda d: 0.1, lambda d: (d + 1) ** 0.1, scale=1.0)
    for scale in (4.0, 16.0):
        trials += _study(lambda d: 1 / math.sqrt(d + 1), lambda d: 0.7, scale=scale)
    check = RatioVsDepthCheck(sensitivity=Sensitivity(knob="init_scale", at=1.0))
    result = check.evaluate(data(trials))
    assert result.verdict == CONTRADICTED
    assert "supported for init_scale >= 4 only (grid 1 to 16)" in result.summary
    assert [n.split(":")[0] for n in result.notes[-3:]] == [
        "init_scale = 1",
        "init_scale = 4",
        "init_scale = 16",
    ]
    assert (
        RatioVsDepthCheck(sensitivity=Sensitivity(knob="init_scale", at=4)).evaluate(data(trials)).verdict
        == SUPPORTED
    )


def test_the_check_parses_from_a_claims_mapping():
    check = parse_check(
        {
            "type": "ratio_vs_depth",
            "tolerance": 0.15,
            "fit_from": 0.25,
            "sensitivity": {"knob": "init_scale", "at": 1},
        }
    )
    assert isinstance(check, RatioVsDepthCheck) and check.sensitivity == Sensitivity(
        knob="init_scale", at=1.0
    )
    with pytest.raises(ValueError):
        parse_check({"type": "ratio_vs_depth", "tolerance": 0.6})
