"""Evidence figures as SVG: well-formed XML with one mark per datum (cells, points, whiskers, curves)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from studies.evidence import EvidenceTrial, build_evidence
from studies.records import TrialRecord
from studies.tables import build_results_table
from studies.tables.render_evidence_svg import (
    evidence_figures,
    gate_heatmap_svg,
    layer_gates_svg,
    rank_depth_svg,
    rank_scatter_svg,
    standalone_svg,
)
from studies.tables.render_html import to_html

LAYERS, EPOCHS, SEEDS = 3, 5, 3


def _gated(method: str, seed: int) -> EvidenceTrial:
    history = tuple(
        {
            "epoch": e,
            **{f"gate_dyt_weight_{i}": 0.5 - 0.1 * e * (i + 1) / LAYERS for i in range(LAYERS)},
            **{f"gate_entropy_{i}": 0.69 - 0.1 * e for i in range(LAYERS)},
        }
        for e in range(EPOCHS)
    )
    return EvidenceTrial(
        f"{method}/{seed}", method, seed, "succeeded", 0.9 + seed / 100, final=history[-1], history=history
    )


def _grid(placement: str, skip: float, seed: int, value: float | None) -> EvidenceTrial:
    init = {"epoch": 0, "init_erank_jacobian": 0.5 + skip / 4 + seed / 50}
    init.update(
        {f"init_erank_repr_{d}": 0.9 - d * (0.05 if placement == "pre" else 0.2) * skip for d in range(4)}
    )
    return EvidenceTrial(
        f"{placement}/{skip}/{seed}",
        "frozen_ln",
        seed,
        "succeeded" if value is not None else "failed",
        value,
        group=f"norm_placement={placement},skip_scale={skip}",
        placement=placement,
        history=(init,),
    )


GATED = [_gated(m, s) for m in ("autonorm_s", "autonorm") for s in range(SEEDS)]
GRID = [
    _grid(p, skip, seed, None if (p, skip, seed) == ("post", 1.0, 0) else 0.8 + seed / 100)
    for p in ("pre", "post")
    for skip in (0.5, 1.0)
    for seed in range(2)
]
EVIDENCE = build_evidence([*GATED, *GRID], dataset="fashion_mnist", metric="accuracy", higher_is_better=True)


def _parse(svg: str) -> ET.Element:
    root = ET.fromstring(svg)
    assert root.tag == "svg"
    return root


def _with_class(root: ET.Element, css: str) -> list[ET.Element]:
    return [e for e in root.iter() if css in (e.get("class") or "").split()]


@pytest.mark.parametrize("quantity", ["dyt_weight", "entropy"])
def test_a_heatmap_has_one_cell_per_layer_and_epoch_and_a_colour_legend(quantity):
    method = EVIDENCE.gates.methods[0]
    root = _parse(gate_heatmap_svg(method, quantity))
    cells = _with_class(root, "cell")
    assert len(cells) == LAYERS * EPOCHS
    assert {(c.get("data-layer"), c.get("data-epoch")) for c in cells} == {
        (str(i), str(e)) for i in range(LAYERS) for e in range(EPOCHS)
    }
    assert all(c.find("title") is not None for c in cells)  # each cell says its value on hover
    assert len(_with_class(root, "swatch")) == 11
    # Higher DyT weight is a different colour: layer 2 at epoch 4 left 0.5 furthest.
    fills = {(c.get("data-layer"), c.get("data-epoch")): c.get("fill") for c in cells}
    assert fills[("0", "0")] != fills[("2", "4")]


def test_a_missing_value_is_a_grey_cell_not_a_gap():
    trial = EvidenceTrial(
        "k",
        "autonorm",
        0,
        "succeeded",
        0.9,
        final={"gate_dyt_weight_0": 0.2, "gate_dyt_weight_1": 0.3},
        history=(
            {"epoch": 0, "gate_dyt_weight_0": 0.5},
            {"epoch": 1, "gate_dyt_weight_0": 0.2, "gate_dyt_weight_1": 0.3},
        ),
    )
    method = build_evidence(
        [trial], dataset="digits", metric="accuracy", higher_is_better=True
    ).gates.methods[0]
    root = _parse(gate_heatmap_svg(method, "dyt_weight"))
    assert len(_with_class(root, "cell")) == 4
    assert len(_with_class(root, "missing")) == 1


@pytest.mark.parametrize("quantity", ["dyt_weight", "entropy"])
def test_the_per_layer_chart_has_a_point_and_a_whisker_per_method_and_layer(quantity):
    root = _parse(layer_gates_svg(EVIDENCE.gates, quantity))
    assert len(_with_class(root, "point")) == 2 * LAYERS
    # Entropies are identical across seeds (zero-width interval, still drawn); weights too here.
    assert len(_with_class(root, "whisker")) == 2 * LAYERS
    legend = " ".join(t.text or "" for t in _with_class(root, "series")[0].iter("text"))
    assert "autonorm_s" in legend and "autonorm" in legend


def test_the_rank_depth_chart_has_a_curve_per_placement_and_per_grid_point():
    root = _parse(rank_depth_svg(EVIDENCE.ranks))
    assert len(_with_class(root, "placement-line")) == 2
    assert len(_with_class(root, "group-line")) == 4
    assert len(_with_class(root, "point")) == 2 * 4  # two placements x depths 0..3
    points = _with_class(root, "placement-line")[0].get("points").split()
    assert len(points) == 4


def test_the_scatter_has_a_dot_per_trial_with_a_value_and_a_cross_per_trial_without():
    root = _parse(rank_scatter_svg(EVIDENCE.ranks))
    assert len(_with_class(root, "point")) == len(GRID) - 1
    assert len(_with_class(root, "no-value")) == 1
    assert "Spearman" in "".join(root.itertext())


def test_evidence_figures_list_every_figure_once_and_each_parses():
    figures = evidence_figures(EVIDENCE)
    names = [f.name for f in figures]
    assert names == [
        "gate_dyt_weight_by_layer",
        "gate_entropy_by_layer",
        "gate_dyt_weight_heatmap_autonorm_s",
        "gate_entropy_heatmap_autonorm_s",
        "gate_dyt_weight_heatmap_autonorm",
        "gate_entropy_heatmap_autonorm",
        "init_rank_by_depth",
        "final_metric_vs_init_rank",
    ]
    for figure in figures:
        _parse(figure.svg)


def test_labels_with_markup_characters_are_escaped():
    trial = EvidenceTrial(
        "k",
        "autonorm",
        0,
        "succeeded",
        0.9,
        group='tau=<0.5>&"x"',
        final={"gate_dyt_weight_0": 0.2},
        history=({"epoch": 1, "gate_dyt_weight_0": 0.2},),
    )
    evidence = build_evidence([trial], dataset="digits", metric="accuracy", higher_is_better=True)
    for figure in evidence_figures(evidence):
        _parse(figure.svg)


def test_a_standalone_figure_carries_the_svg_namespace_once():
    svg = standalone_svg(evidence_figures(EVIDENCE)[0].svg)
    root = ET.fromstring(svg)
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    assert standalone_svg(svg) == svg


def test_the_html_page_shows_the_figures_below_the_table_only_when_there_is_evidence():
    records = [TrialRecord("s", t.method, t.seed, t.value, t.status) for t in GATED]
    table = build_results_table(
        records, dataset="fashion_mnist", metric="accuracy", higher_is_better=True, reference="autonorm"
    )
    with_evidence = to_html(table, evidence=EVIDENCE)
    assert with_evidence.index("<table") < with_evidence.index("Mechanism evidence")
    assert with_evidence.count('<figure class="evidence"') == len(evidence_figures(EVIDENCE))
    assert with_evidence.count("<svg") == 1 + len(evidence_figures(EVIDENCE))  # plus the forest plot
    empty = build_evidence([], dataset="fashion_mnist", metric="accuracy", higher_is_better=True)
    assert "Mechanism evidence" not in to_html(table, evidence=empty)
    assert "Mechanism evidence" not in to_html(table)
