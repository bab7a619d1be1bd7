"""The study page's interactive charts in a real browser (headless Chromium, tests/browser.py) against a live
API over a real SQLite store: a finished tuned study draws its per-epoch curves with uPlot, the metric
picker switches what they show, pointing at a point shows that trial's values, pointing at a line of the
parallel coordinates shows its knobs, the knob importance is drawn as bars, and every request the page
makes goes to the test server (uPlot is served by the service: nothing comes from a CDN)."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from tests.factories import add_epochs, add_trial
from tests.service.web.store_rows import finish, start

# A compare study: 4 tune trials of autonorm_s over eps_h x t_freeze, then 3 final seeds of each method.
TUNED = {
    "name": "explored",
    "kind": "compare",
    "methods": ["autonorm_s", "frozen_ln"],
    "num_samples": 4,
    "search": {"lr": 0.005},
    "method_search": {
        "autonorm_s": {
            "eps_h": {"type": "uniform", "low": 0.05, "high": 0.2},
            "t_freeze": {"type": "int", "low": 1, "high": 2},
        }
    },
}
TUNE_KNOBS = [(0.05, 1), (0.1, 2), (0.15, 1), (0.2, 2)]


def _loss(number: int, epoch: int) -> float:
    """Trial `number`'s train loss at `epoch`: the lines are well apart, so one point is easy to single out."""
    return round(2.0 - 0.3 * epoch + 0.5 * number, 3)


def _record_tuned_study(engine, study_id: str) -> None:
    start(engine, study_id)
    for number, (eps_h, t_freeze) in enumerate(TUNE_KNOBS):
        key = f"{study_id}/tune/autonorm_s/{number}"
        add_epochs(
            engine,
            study_id,
            key,
            {
                epoch: {
                    "val_accuracy": 0.5 + 0.05 * epoch + 0.01 * number,
                    "train_loss": _loss(number, epoch),
                    "gate_entropy": 0.7 - 0.1 * epoch,
                }
                for epoch in (1, 2, 3)
            },
        )
        add_trial(
            engine,
            study_id,
            key,
            phase="tune",
            method="autonorm_s",
            seed=0,
            config={
                "method": "autonorm_s",
                "seed": 0,
                "knobs": {"eps_h": eps_h, "t_freeze": t_freeze, "lr": 0.005},
            },
            metrics={"epoch": 3},
            metric_value=0.9 - (eps_h - 0.1) ** 2,
        )
    for method in ("autonorm_s", "frozen_ln"):
        for seed in (0, 1, 2):
            key = f"{study_id}/final/{method}/seed{seed}"
            add_epochs(engine, study_id, key, {1: {"val_accuracy": 0.7, "test_accuracy": 0.8 + seed / 100}})
            add_trial(
                engine, study_id, key, phase="final", method=method, seed=seed, metric_value=0.8 + seed / 100
            )
    finish(engine, study_id)


def _point_of_epoch_chart(page, epoch: int, value: float) -> tuple[float, float]:
    """Where uPlot draws (epoch, value), in the viewport's coordinates (the chart scrolled into view)."""
    page.locator("#epoch-chart").scroll_into_view_if_needed()
    return tuple(
        page.evaluate(
            """([epoch, value]) => {
                const plot = document.getElementById("epoch-chart").uplot;
                const over = plot.over.getBoundingClientRect();
                return [over.left + plot.valToPos(epoch, "x"), over.top + plot.valToPos(value, "y")];
            }""",
            [epoch, value],
        )
    )


def _first_vertex(page, trial_key: str) -> tuple[float, float]:
    """Where a parallel-coordinates line meets its first axis, in the viewport's coordinates (the chart
    scrolled into view)."""
    page.locator("#parallel-chart").scroll_into_view_if_needed()
    return tuple(
        page.evaluate(
            """(key) => {
                const line = document.querySelector(`g.pc-trial[data-trial-key="${key}"] path.pc-hit`);
                const point = line.getPointAtLength(0);
                const m = line.getScreenCTM();
                return [m.a * point.x + m.c * point.y + m.e, m.b * point.x + m.d * point.y + m.f];
            }""",
            trial_key,
        )
    )


@pytest.fixture
def requests_made(browser_page) -> list[str]:
    """Every URL the page asks for, from the moment the test starts."""
    made: list[str] = []
    browser_page.page.on("request", lambda request: made.append(request.url))
    return made


def test_a_finished_study_can_be_explored_by_pointing_at_its_charts(live_api, browser_page, requests_made):
    study_id = live_api.submit(**TUNED)
    _record_tuned_study(live_api.engine, study_id)
    page = browser_page.page
    page.goto(f"{live_api.url}/studies/{study_id}")
    page.wait_for_selector('#interactive[data-ready="true"]')

    # The curves: uPlot's canvas, the validation metric first, every per-epoch metric in the picker.
    assert page.locator("#epoch-chart .uplot canvas").count() == 1
    picker = page.locator("#epoch-metric")
    assert picker.input_value() == "val_accuracy"
    assert picker.locator("option").all_inner_texts() == [
        "gate_entropy",
        "test_accuracy",
        "train_loss",
        "val_accuracy",
    ]
    assert page.locator("#method-legend .plot-legend-entry").all_inner_texts() == ["autonorm_s", "frozen_ln"]

    picker.select_option("train_loss")
    page.wait_for_selector('#epoch-chart[data-metric="train_loss"] .uplot')
    # uPlot draws its axes on the canvas: their labels are read from the chart.
    assert page.evaluate("document.getElementById('epoch-chart').uplot.axes[1].label") == "train_loss"

    # Pointing at trial 2's point at epoch 2 names it with its value, seed and epoch.
    x, y = _point_of_epoch_chart(page, 2, _loss(2, 2))
    page.mouse.move(x - 30, y - 30)
    page.mouse.move(x, y)
    tooltip = page.locator("#epoch-tooltip")
    tooltip.wait_for(state="visible")
    assert tooltip.locator("div").all_inner_texts() == [
        "tune/autonorm_s/2",
        f"train_loss {_loss(2, 2):g}",
        "autonorm_s · seed 0 · epoch 2",
    ]

    # The parallel coordinates: an axis per searched knob (lr is fixed) and the objective; one line per
    # tune trial, and pointing at one brings it forward with its knobs.
    axes = page.locator("#parallel-chart .pc-axis-name").all_text_contents()
    assert axes == ["eps_h", "t_freeze", "val_accuracy"]
    assert page.locator("#parallel-chart .pc-axis-note").all_text_contents() == ["(higher is better)"]
    assert page.locator("#parallel-chart g.pc-trial").count() == len(TUNE_KNOBS)
    key = f"{study_id}/tune/autonorm_s/1"
    page.mouse.move(*_first_vertex(page, key))
    knobs = page.locator("#parallel-tooltip")
    knobs.wait_for(state="visible")
    assert knobs.locator("div").all_inner_texts() == [
        "tune/autonorm_s/1",
        "autonorm_s · seed 0",
        "eps_h 0.1",
        "t_freeze 2",
        "val_accuracy 0.9",
    ]
    assert page.locator(f'g.pc-trial[data-trial-key="{key}"]').get_attribute("class") == "pc-trial pc-active"
    assert tooltip.is_hidden()

    # The knob importance as bars, per evaluator of the tuned method.
    bars = page.locator('#importance-chart figure[data-method="autonorm_s"] svg[data-evaluator="fanova"]')
    assert sorted(bars.locator(".importance-bar").evaluate_all("bars => bars.map(b => b.dataset.knob)")) == [
        "eps_h",
        "t_freeze",
    ]

    # Nothing came from elsewhere: every request went to the test server.
    server = urlsplit(live_api.url).netloc
    assert requests_made and {urlsplit(url).netloc for url in requests_made} == {server}
    assert any(url.endswith("/static/vendor/uplot/uPlot.iife.min.js") for url in requests_made)
    assert browser_page.problems() == []


def test_a_running_study_s_curves_gain_the_epochs_recorded_after_the_page_loaded(live_api, browser_page):
    study_id = live_api.submit(**TUNED)
    start(live_api.engine, study_id)
    key = f"{study_id}/tune/autonorm_s/0"
    config = {"knobs": {"eps_h": 0.1, "t_freeze": 1}}
    add_epochs(live_api.engine, study_id, key, {1: {"val_accuracy": 0.5}})
    add_trial(
        live_api.engine, study_id, key, phase="tune", method="autonorm_s", status="running", config=config
    )
    page = browser_page.page
    page.goto(f"{live_api.url}/studies/{study_id}")
    page.wait_for_selector('#interactive[data-ready="true"]')
    assert page.evaluate("document.getElementById('epoch-chart').uplot.data[0]") == [1]
    browser_page.mark_loaded()

    add_epochs(live_api.engine, study_id, key, {2: {"val_accuracy": 0.6}})
    page.wait_for_function(
        "document.getElementById('epoch-chart').uplot.data[0].length === 2", timeout=20_000
    )
    assert page.evaluate("document.getElementById('epoch-chart').uplot.data[1]") == [0.5, 0.6]
    assert not browser_page.was_reloaded()
    assert browser_page.problems() == []
