"""`rank_vs_depth` tests "Pre-Norm plateaus" as a plateau: Pre-Norm's log-log exponent of rank over the
deeper half of the stack must lie inside ±plateau_band, by the interval of its mean over seeds. A rank
still falling as l^-0.19 is not a plateau, however high it ends; an interval wider than the band cannot
tell; and the collapse passes its level only when the whole interval lies below it."""

from __future__ import annotations

import pytest

from studies.claims import CONTRADICTED, INCONCLUSIVE, SUPPORTED, RankVsDepthCheck
from studies.claims.verdicts import NOT_TESTED
from tests.studies.claims.synthetic import data, law, trial

DEPTH = 64
CHECK = RankVsDepthCheck(plateau_band=0.1, plateau_from=0.5)


def _study(post_rank, pre_rank, seeds=range(6), post_full=None):
    """Post- and Pre-Norm trials whose rank at depth l follows post_rank(l) and pre_rank(l, seed);
    post_full(seed) overrides Post-Norm's full-depth value."""
    trials = []
    for seed in seeds:
        for offset, placement in enumerate(("post", "pre")):
            value = post_rank if placement == "post" else (lambda d, s=seed: pre_rank(d, s))
            init = law("init_erank_jacobian", range(1, DEPTH + 1), value, seed + 3 * offset)
            init["init_erank_jacobian"] = init[f"init_erank_jacobian_{DEPTH}"]
            if placement == "post" and post_full is not None:
                init["init_erank_jacobian"] = post_full(seed)
            trials.append(trial({"norm_placement": placement}, seed, init))
    return trials


def _collapse(depth):
    return 3.0 / depth


def _plateau(result):
    (finding,) = [f for f in result.findings if f.expected.startswith("in [")]
    return finding


def test_a_flat_pre_norm_rank_over_the_deeper_half_is_a_plateau():
    # Falling over the first 16 blocks, flat at 0.5 from there on.
    result = CHECK.evaluate(data(_study(_collapse, lambda d, s: 0.5 * max(1.0, 16 / d) ** 0.5)))
    plateau = _plateau(result)
    assert plateau.verdict == SUPPORTED and plateau.expected == "in [-0.1, 0.1]"
    assert abs(plateau.measured) < 0.03
    assert "depths >= 0.5 of the deepest" in plateau.label
    assert result.verdict == SUPPORTED
    assert any("'plateaus' is judged as a plateau" in note and "7%" in note for note in result.notes)


def test_a_rank_still_falling_as_l_to_the_minus_0_19_is_not_a_plateau():
    # High at full depth (0.6 * 64^-0.19 = 0.27 > 0.2): the level alone would pass it.
    result = CHECK.evaluate(data(_study(_collapse, lambda d, s: 0.6 * d**-0.19)))
    plateau = _plateau(result)
    assert plateau.measured == pytest.approx(-0.19, abs=0.02)
    assert plateau.ci_high is not None and plateau.ci_high < -0.1  # a tight interval, wholly outside
    assert plateau.verdict == CONTRADICTED
    assert result.findings[1].verdict == SUPPORTED  # the level 0.2 is met all the same
    assert result.verdict == CONTRADICTED


def test_an_interval_wider_than_the_band_is_inconclusive_and_says_how_many_seeds_would_tell():
    slopes = (0.25, -0.3, 0.1)  # three seeds, spread far beyond the band
    result = CHECK.evaluate(data(_study(_collapse, lambda d, s: 0.4 * (d / 32) ** slopes[s], seeds=range(3))))
    plateau = _plateau(result)
    assert plateau.verdict == INCONCLUSIVE
    assert "wider than the band (±0.1)" in plateau.note and "seeds would" in plateau.note
    needed = int(plateau.note.rsplit("about ", 1)[1].split(" ")[0])
    assert needed > 3


def test_without_the_rank_at_every_depth_the_plateau_is_not_tested():
    trials = [
        trial({"norm_placement": p}, s, {"init_erank_jacobian": v + 0.001 * s})
        for p, v in (("post", 0.05), ("pre", 0.4))
        for s in range(4)
    ]
    result = CHECK.evaluate(data(trials))
    assert _plateau(result).verdict == NOT_TESTED
    assert result.verdict == NOT_TESTED


def test_the_collapse_passes_its_level_only_with_the_whole_interval_below_and_shows_the_margin():
    by_a_hair = (0.086, 0.089, 0.092, 0.088, 0.090, 0.087)
    result = CHECK.evaluate(data(_study(_collapse, lambda d, s: 0.5, post_full=lambda s: by_a_hair[s])))
    collapse = result.findings[0]
    assert collapse.verdict == SUPPORTED and collapse.ci_high is not None and collapse.ci_high < 0.1
    assert f"the interval's upper end {collapse.ci_high:.4g} lies" in collapse.note
    straddling = (0.07, 0.12, 0.06, 0.11, 0.09, 0.10)
    result = CHECK.evaluate(data(_study(_collapse, lambda d, s: 0.5, post_full=lambda s: straddling[s])))
    assert result.findings[0].verdict == INCONCLUSIVE
    assert "is not below the level 0.1" in result.findings[0].note


def test_without_a_band_the_check_reads_as_before():
    result = RankVsDepthCheck().evaluate(data(_study(_collapse, lambda d, s: 0.6 * d**-0.19)))
    assert not any(f.expected.startswith("in [") for f in result.findings)
    assert result.verdict == SUPPORTED
