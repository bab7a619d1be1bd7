"""A `trend` judged only where it is not implied by a limit: as the skip scale beta -> 0 the stack tends to
the identity and the rank falls with beta whatever the branch does, so the skip-scale claim is judged at
the grid points whose measured branch-to-skip ratio (mean over blocks and seeds) reaches a level; the
full grid is a diagnostic, and the parts of the paper's statement the check does not test say so."""

from __future__ import annotations

import math

import pytest

from studies.claims import CONTRADICTED, SUPPORTED, TrendCheck
from studies.claims.trend import JudgedRange
from studies.claims.verdicts import NOT_TESTED
from tests.studies.claims.synthetic import data, trial

BLOCKS = 4
LEVEL = 0.15
CHECK = TrendCheck(
    x="knob.skip_scale",
    y="init_erank_jacobian",
    expect="negative",
    judged_where=JudgedRange(metric="init_branch_skip_ratio", at_least=LEVEL),
    untested=("the short-paths half: no path-length measurement",),
)


def _study(rank_of, betas, ratio_per_beta=0.6):
    """Trials whose blocks add ratio_per_beta * beta of the stream they read (the first block a little
    more, so only the mean over blocks sits exactly on the law)."""
    trials = []
    for beta in betas:
        for seed in range(3):
            ratios = {
                f"init_branch_skip_ratio_{k}": ratio_per_beta * beta * (1.1 if k == 0 else 0.9 + 0.2 / 3)
                for k in range(BLOCKS)
            }
            init = {"init_erank_jacobian": rank_of(beta) + 0.0005 * seed, **ratios}
            trials.append(trial({"skip_scale": beta}, seed, init))
    return trials


NEGLIGIBLE = (0.001, 0.003, 0.01, 0.03, 0.1, 0.2)  # ratio 0.0006-0.12: below the level
JUDGED = (0.3, 0.5, 1.0, 2.0, 3.0, 10.0)  # ratio 0.18-6


def test_the_trend_is_judged_only_where_the_branch_is_not_negligible():
    # Near the identity the rank falls with beta (the limit); past it the rank rises: contradicted,
    # though the full grid, dominated by the limit's points, falls.
    def rank(beta):
        return 1.0 - 0.1 * beta if beta in NEGLIGIBLE else 0.3 + 0.01 * beta

    result = CHECK.evaluate(data(_study(rank, NEGLIGIBLE + JUDGED)))
    assert result.verdict == CONTRADICTED
    finding = result.findings[0]
    assert finding.n == len(JUDGED) and finding.measured == pytest.approx(1.0)
    assert finding.p_value == pytest.approx(2 / math.factorial(len(JUDGED)))
    assert f"with mean init_branch_skip_ratio >= {LEVEL:g} (of 12)" in finding.label
    assert "judged on the 6 grid points" in result.notes[0] and "knob.skip_scale 0.3 to 10" in result.notes[0]
    diagnostic = result.notes[1]
    assert diagnostic.startswith("diagnostic, not judged: over all 12 grid points rho = -")


def test_a_rank_that_keeps_falling_past_the_limit_supports_the_claim():
    result = CHECK.evaluate(data(_study(lambda beta: 1.0 / (1.0 + beta), NEGLIGIBLE + JUDGED)))
    assert result.verdict == SUPPORTED
    assert result.findings[0].n == len(JUDGED)
    assert "rho = -1.000, p = 0.00278 (exact)" in result.findings[0].note


def test_too_few_points_past_the_limit_leave_the_claim_not_tested():
    # Four judged points: a perfect ordering has p = 2/4! = 0.083, so no outcome could be significant.
    result = CHECK.evaluate(data(_study(lambda beta: 1.0 / (1.0 + beta), (*NEGLIGIBLE, 0.5, 1.0, 3.0, 10.0))))
    assert result.verdict == NOT_TESTED
    assert result.reason is not None and "only 4 of 10 grid points" in result.reason
    assert "p = 0.0833" in result.reason
    assert any(note.startswith("diagnostic, not judged") for note in result.notes)


def test_trials_without_the_ratio_cannot_locate_the_range():
    trials = [
        trial({"skip_scale": beta}, seed, {"init_erank_jacobian": 1.0 / (1.0 + beta)})
        for beta in JUDGED
        for seed in range(2)
    ]
    result = CHECK.evaluate(data(trials))
    assert result.verdict == NOT_TESTED and "report no init_branch_skip_ratio" in (result.reason or "")


def test_the_untested_half_of_the_statement_is_reported_as_not_tested():
    result = CHECK.evaluate(data(_study(lambda beta: 1.0 / (1.0 + beta), NEGLIGIBLE + JUDGED)))
    assert result.notes[-1] == "not tested: the short-paths half: no path-length measurement"


def test_a_per_trial_metric_is_read_directly_and_a_per_unit_series_as_its_mean():
    first_block = _study(lambda beta: 1.0 / (1.0 + beta), (0.2,))[0]
    direct = JudgedRange(metric="init_branch_skip_ratio_0", at_least=LEVEL)
    assert direct.value(first_block) == pytest.approx(0.6 * 0.2 * 1.1)
    over_blocks = JudgedRange(metric="init_branch_skip_ratio", at_least=LEVEL)
    assert over_blocks.value(first_block) == pytest.approx(0.6 * 0.2)
