"""Boundaries calibrated on the paired t process: exact at one look, error at alpha over several looks with
two or three seeds at the first, where matching z boundaries look by look runs above it."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from studies.sequential.boundaries import critical_values, efficacy_boundaries
from studies.sequential.paired_t import paired_t_design
from studies.sequential.spending import spending_function

LOOKS = (3, 5, 7, 9, 10)
STUDIES = 40_000


def _t_paths(rng: np.random.Generator, shift: float = 0.0) -> np.ndarray:  # (studies, looks)
    """Paired t statistics at LOOKS of fresh simulated studies (not the design's reference paths)."""
    differences = rng.standard_normal((STUDIES, LOOKS[-1])) + shift
    columns = []
    for n in LOOKS:
        first = differences[:, :n]
        columns.append((first.mean(axis=1) - shift) / (first.std(axis=1, ddof=1) / np.sqrt(n)))
    return np.stack(columns, axis=1)


def _rejects(t: np.ndarray, boundaries: tuple[float, ...], sided: int) -> np.ndarray:
    statistic = np.abs(t) if sided == 2 else t
    return (statistic >= np.asarray(boundaries)).any(axis=1)


@pytest.mark.parametrize("sided", [1, 2])
def test_a_single_look_is_the_fixed_t_test(sided):
    design = paired_t_design([8], max_seeds=8, level=0.05, sided=sided)
    assert design.efficacy_t[0] == pytest.approx(stats.t.isf(0.05 / sided, 7), abs=1e-3)
    assert design.stagewise_p(2.1, 1) == pytest.approx(sided * stats.t.sf(2.1, 7), rel=0.02)


@pytest.mark.parametrize("spending", ["obrien_fleming", "pocock"])
def test_the_error_over_five_looks_from_three_seeds_is_alpha_where_z_matching_runs_above(spending):
    design = paired_t_design(LOOKS, max_seeds=10, level=0.05, sided=2, spending=spending)
    t = _t_paths(np.random.default_rng(11))
    error = _rejects(t, design.efficacy_t, 2).mean()
    monte_carlo_se = np.sqrt(0.05 * 0.95 / STUDIES)
    assert abs(error - 0.05) < 3 * monte_carlo_se

    z_design = efficacy_boundaries(
        [n / 10 for n in LOOKS], alpha=0.05, sided=2, spending=spending_function(spending)
    )
    matched = critical_values(z_design, [n - 1 for n in LOOKS])
    assert _rejects(t, matched, 2).mean() > error + 2 * monte_carlo_se


def test_earlier_boundaries_stay_when_a_look_is_added():
    shorter = paired_t_design(LOOKS[:3], max_seeds=10, level=0.05, sided=1)
    longer = paired_t_design(LOOKS, max_seeds=10, level=0.05, sided=1)
    assert longer.efficacy_t[:3] == shorter.efficacy_t


def test_a_first_look_with_less_error_than_the_paths_resolve_keeps_the_exact_t_boundary():
    design = paired_t_design(LOOKS, max_seeds=10, level=0.05 / 4, sided=2)
    spent_at_first = 2 * spending_function("obrien_fleming")(np.asarray([0.3]), 0.05 / 8)[0]
    assert design.efficacy_t[0] == pytest.approx(stats.t.isf(spent_at_first / 2, 2), rel=1e-6)


def test_repeated_intervals_cover_a_true_difference_at_every_look_together():
    design = paired_t_design(LOOKS, max_seeds=10, level=0.05, sided=2)
    t = _t_paths(np.random.default_rng(12), shift=0.7)  # (mean - truth) / se at each look
    coverage = 1.0 - _rejects(t, design.efficacy_t, 2).mean()
    assert coverage == pytest.approx(0.95, abs=3 * np.sqrt(0.05 * 0.95 / STUDIES))


def test_the_stagewise_p_is_at_most_the_error_spent_exactly_when_the_boundary_is_crossed():
    design = paired_t_design(LOOKS, max_seeds=10, level=0.05, sided=2)
    for look, boundary in enumerate(design.efficacy_t, start=1):
        assert design.stagewise_p(boundary * 1.001, look) <= design.spent[look - 1] + 1e-12
        assert design.stagewise_p(boundary * 0.97, look) > design.spent[look - 1]


def test_a_stop_at_an_earlier_look_is_more_extreme_than_any_later_one():
    design = paired_t_design(LOOKS, max_seeds=10, level=0.05, sided=1)
    assert design.stagewise_p(design.efficacy_t[1] * 1.01, 2) < design.stagewise_p(50.0, 3)


@pytest.mark.parametrize(
    ("seeds", "max_seeds", "problem"),
    [
        ((), 10, "at least one look"),
        ((1, 3), 10, "from at least 2"),
        ((3, 3), 10, "strictly"),
        ((3, 12), 10, "above"),
    ],
)
def test_impossible_looks_are_refused(seeds, max_seeds, problem):
    with pytest.raises(ValueError, match=problem):
        paired_t_design(seeds, max_seeds=max_seeds, level=0.05, sided=2)
