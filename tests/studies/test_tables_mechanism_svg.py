"""The AutoNorm mechanism figures (studies.tables.render_mechanism_svg): well-formed XML, one line per seed,
eps_H and T_freeze drawn where the trials ran with them, a ring per seed that froze."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from studies.evidence import mechanism_summary
from studies.tables.render_evidence_svg import standalone_svg
from studies.tables.render_mechanism_svg import (
    entropy_trajectory_svg,
    mechanism_figures,
    selector_grad_var_svg,
)
from tests.studies.test_evidence_mechanism import DIPPED, FROZE, PLAIN, history, trial

THIRD = trial(
    "autonorm_s",
    2,
    history([0.69, 0.69, 0.6, 0.6], [3e-5, 2e-5, None, None], freeze_epoch=2),
    knobs={"t_freeze": 2, "eps_h": 0.1},
)
SUMMARY = mechanism_summary([FROZE, DIPPED, THIRD, PLAIN])
AUTONORM_S, AUTONORM = SUMMARY.methods


def parse(svg: str) -> ET.Element:
    return ET.fromstring(standalone_svg(svg))


def by_class(root: ET.Element, css: str) -> list[ET.Element]:
    return [e for e in root.iter() if e.get("class") == css]


def test_the_entropy_figure_has_one_line_per_seed_the_eps_h_line_t_freeze_and_the_freezes():
    root = parse(entropy_trajectory_svg(AUTONORM_S))
    lines = by_class(root, "seed-line")
    assert [line.get("data-seed") for line in lines] == ["0", "1", "2"]
    assert all(len(line.get("points", "").split()) == 4 for line in lines)  # epochs 1..4 (train reading)
    (eps,) = by_class(root, "eps-line")
    assert eps.get("y1") == eps.get("y2") and "eps_H = 0.1" in "".join(eps.itertext())
    (t_freeze,) = by_class(root, "t-freeze-line")
    assert t_freeze.get("x1") == t_freeze.get("x2") and "T_freeze = 2" in "".join(t_freeze.itertext())
    # T_freeze sits at epoch 2, between the epoch-1 and epoch-3 points of any seed.
    xs = [float(p.split(",")[0]) for p in lines[0].get("points", "").split()]
    assert xs[0] < float(t_freeze.get("x1", "nan")) < xs[2]
    assert [m.get("data-seed") for m in by_class(root, "freeze-marker")] == ["0", "2"]
    text = " ".join(root.itertext())
    assert "2 of 3 seed(s) froze" in text and "seed 1, not frozen" in text


def test_the_eps_h_line_lies_at_eps_h_on_the_entropy_axis():
    root = parse(entropy_trajectory_svg(AUTONORM_S))
    (eps,) = by_class(root, "eps-line")
    y_ticks = [t for t in by_class(root, "tick") if t.get("text-anchor") == "end"]  # x ticks are centred
    ticks = {t.text: float(t.get("y", "nan")) for t in y_ticks if t.text in ("0", "0.2")}
    zero, two = ticks["0"] - 4, ticks["0.2"] - 4  # tick labels sit 4 px below their grid line
    assert float(eps.get("y1", "nan")) == pytest.approx(zero + (two - zero) * 0.5, abs=0.2)


def test_the_selector_variance_figure_has_one_line_per_seed_ending_at_the_freeze():
    root = parse(selector_grad_var_svg(AUTONORM_S))
    lines = by_class(root, "seed-line")
    assert [line.get("data-seed") for line in lines] == ["0", "1", "2"]
    assert [len(line.get("points", "").split()) for line in lines] == [2, 4, 2]
    assert len(by_class(root, "t-freeze-line")) == 1
    labels = [t.text for t in by_class(root, "tick")]
    assert "1e−5" in labels and "1e−2" in labels  # the decades the values span (3e-5 .. 2e-3)


def test_plain_autonorm_has_no_freeze_lines():
    root = parse(entropy_trajectory_svg(AUTONORM))
    assert len(by_class(root, "seed-line")) == 1
    assert by_class(root, "eps-line") == [] and by_class(root, "t-freeze-line") == []
    assert "no freeze schedule" in " ".join(root.itertext())


def test_a_seed_without_values_draws_no_line_and_an_empty_figure_still_renders():
    silent = trial("autonorm_s", 5, ({"epoch": 0, "gates_frozen": 0, "freeze_epoch": -1},), {"t_freeze": 2})
    (method,) = mechanism_summary([silent]).methods
    for figure in (entropy_trajectory_svg(method), selector_grad_var_svg(method)):
        assert by_class(parse(figure), "seed-line") == []


def test_mechanism_figures_lists_both_figures_per_gated_method():
    figures = mechanism_figures(SUMMARY)
    assert [f.name for f in figures] == [
        "gate_entropy_trajectory_autonorm_s",
        "selector_grad_var_autonorm_s",
        "gate_entropy_trajectory_autonorm",
        "selector_grad_var_autonorm",
    ]
    for figure in figures:
        parse(figure.svg)
        assert figure.caption
