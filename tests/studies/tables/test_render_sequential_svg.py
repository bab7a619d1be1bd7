"""The monitoring figure: every comparison's statistic at each of its looks against its boundaries, with
where and why it stopped."""

from __future__ import annotations

import numpy as np

from studies.sequential import SequentialMonitor
from studies.spec.sections import SequentialDesign
from studies.tables.render_sequential_svg import sequential_figure


def _looks(test: str = "superiority", **design) -> tuple[SequentialMonitor, list[dict]]:
    spec = SequentialDesign(test=test, **design)
    monitor = SequentialMonitor(spec, methods=["a", "b", "ref"], reference="ref", higher_is_better=True)
    rng = np.random.default_rng(1)
    values: dict[str, dict[int, float]] = {m: {} for m in monitor.methods}
    arms, seeds = list(monitor.methods), spec.seeds_added_at(0)
    while seeds:
        for seed in seeds:
            shared = rng.normal(0.9, 0.01)
            for arm in arms:
                values[arm][seed] = shared + (0.05 if arm == "a" else 0.0) + rng.normal(0.0, 0.01)
        monitor.look(values)
        arms, seeds = monitor.open_arms(), monitor.next_seeds()
    return monitor, [r.to_json() for r in monitor.records]


def test_each_look_of_each_comparison_is_a_point_and_each_stop_is_filled_and_labelled():
    monitor, looks = _looks(effect=0.02)
    figure = sequential_figure(looks, test="superiority", max_seeds=10)
    assert figure is not None and figure.name == "sequential_monitoring"
    points = sum(len(c.points) for c in monitor.comparisons.values())
    assert figure.svg.count('class="look-point"') == points
    for method, state in monitor.comparisons.items():
        assert f'data-method="{method}" data-decision="{state.decision}"' in figure.svg
    assert "differs" in figure.svg  # a's stop, labelled
    # two-sided: each efficacy boundary drawn above and below 0
    assert figure.svg.count('class="efficacy-boundary"') == 2 * len(monitor.comparisons)


def test_an_equivalence_design_draws_one_sided_boundaries_and_no_futility():
    _, looks = _looks("equivalence", margin=0.1)
    figure = sequential_figure(looks, test="equivalence", max_seeds=10)
    assert figure is not None
    assert 'class="futility-boundary"' not in figure.svg
    assert figure.svg.count('class="efficacy-boundary"') == 2


def test_no_figure_before_the_first_look():
    assert sequential_figure([], test="superiority", max_seeds=10) is None
