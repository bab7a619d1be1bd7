"""The per-epoch curves figure (studies.tables.render_curves_svg): well-formed SVG, one line per trial that
reported the metric, one colour and legend entry per method, a dotted line while a trial trains, every
label escaped."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from studies.tables.render_curves_svg import EpochCurve, epoch_curves_svg
from studies.tables.render_evidence_svg import standalone_svg

CURVES = [
    EpochCurve("final/dyt/seed0", "dyt", ((1, 0.6), (2, 0.7), (3, 0.8))),
    EpochCurve("final/dyt/seed1", "dyt", ((1, 0.55), (2, 0.72))),
    EpochCurve("final/frozen_ln/seed0", "frozen_ln", ((0, None), (1, 0.5), (2, 0.66)), finished=False),
    EpochCurve("final/frozen_ln/seed1", "frozen_ln", ((1, None),)),  # reported epochs, not this metric
]


def parse(svg: str) -> ET.Element:
    return ET.fromstring(standalone_svg(svg))


def by_class(root: ET.Element, css: str) -> list[ET.Element]:
    return [e for e in root.iter() if e.get("class") == css]


def texts(root: ET.Element) -> list[ET.Element]:
    return [e for e in root.iter() if e.tag.rpartition("}")[2] == "text"]


def test_each_trial_that_reported_the_metric_is_one_line_with_a_dot_per_epoch():
    root = parse(epoch_curves_svg(CURVES, metric="val_accuracy", title="final phase"))
    lines = by_class(root, "trial-curve")
    assert [line.get("data-trial") for line in lines] == [c.label for c in CURVES[:3]]
    assert [len(line.get("points", "").split()) for line in lines] == [3, 2, 2]  # None values left out
    assert len(by_class(root, "epoch-point")) == 7
    subtitle = [t.text for t in texts(root) if t.text and "trial(s)" in t.text]
    assert subtitle == ["3 of 4 trial(s) reported val_accuracy; dotted: still training (1)"]


def test_a_method_is_one_colour_and_one_legend_entry():
    root = parse(epoch_curves_svg(CURVES, metric="val_accuracy", title="final phase"))
    colours = [line.get("stroke") for line in by_class(root, "trial-curve")]
    assert colours[0] == colours[1] != colours[2]
    legend = next(e for e in root.iter() if e.get("class") == "legend series")
    assert [t.text for t in texts(legend)] == ["dyt", "frozen_ln"]


def test_a_trial_still_training_is_dotted():
    lines = by_class(parse(epoch_curves_svg(CURVES, metric="m", title="t")), "trial-curve")
    assert [line.get("stroke-dasharray") for line in lines] == [None, None, "2 2"]


def test_the_epoch_axis_has_whole_epochs_even_for_a_single_epoch():
    root = parse(epoch_curves_svg([EpochCurve("t", "dyt", ((1, 0.5),))], metric="m", title="t"))
    ticks = [t.text or "" for t in texts(root) if t.get("class") == "tick"]
    assert {"1", "2"} <= set(ticks)
    assert not {"0.5", "1.5"} & set(ticks)  # no half epochs (the y axis, around 0.5, has finer ticks)


def test_labels_and_titles_are_escaped():
    hostile = '<script>alert("x")</script>'
    svg = epoch_curves_svg([EpochCurve(hostile, hostile, ((1, 0.5),))], metric=hostile, title=hostile)
    assert "<script>" not in svg
    parse(svg)  # still well-formed


def test_no_curves_is_an_empty_figure_not_an_error():
    root = parse(epoch_curves_svg([], metric="val_accuracy", title="nothing yet"))
    assert by_class(root, "trial-curve") == []
