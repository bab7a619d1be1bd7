"""The pages at a desk and on a phone, in a real browser (headless Chromium, tests/browser.py) against a live
API: the home page, a finished study's page, its results table and its report fit a 1280 px and a 390 px
wide window without the page scrolling sideways (a wide table scrolls inside its own box), and the column a
reader looks for first (the verdict of the results and the report) can be brought into view. Each page
leaves a screenshot under the test's tmp_path, named in the assertion messages.

Also the phase beside a running study's progress, which the study page's script keeps current."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.service.web.store_rows import finish, record, start

DESK, PHONE = 1280, 390
HEIGHT = {DESK: 900, PHONE: 844}  # a laptop's window; a phone's (390 x 844 CSS px)

# Each page with the header cell a reader looks for first: it must be in view, once scrolled to.
PAGES = {
    "home": ("/", '#studies th:text-is("status")'),
    "study": ("/studies/{id}", '#trials th:text-is("final metric")'),
    "results": ("/results/digits?study={id}&format=html", 'th:text-is("verdict")'),
    "report": ("/studies/{id}/report?format=html", 'th:text-is("verdict")'),
}

# The elements that stick out of the window to the right, innermost first (where a failure starts).
_STICKING_OUT = """() => {
  const width = window.innerWidth;
  return [...document.body.querySelectorAll("*")]
    .filter((element) => element.getBoundingClientRect().right > width + 0.5)
    .filter((element) => ![...element.children].some((child) => child.getBoundingClientRect().right > width + 0.5))
    .slice(0, 8)
    .map((element) => `${element.tagName.toLowerCase()}${element.id ? "#" + element.id : ""}`
      + `${element.className && typeof element.className === "string" ? "." + element.className : ""}`
      + ` right=${Math.round(element.getBoundingClientRect().right)}`);
}"""


@pytest.fixture
def finished_study(live_api) -> str:
    """A grid study that ran to the end with every trial it planned: 2 methods at its one grid point
    (`base`) x 3 seeds, each trial with 3 epochs of curves."""
    study_id = live_api.submit(name="a finished study whose name is long enough to wrap on a phone")
    start(live_api.engine, study_id)
    for method, base in (("frozen_ln", 0.60), ("dyt", 0.66)):
        for seed in range(3):
            accuracy = base + 0.01 * seed
            epochs = {1: accuracy - 0.1, 2: accuracy - 0.04, 3: accuracy}
            record(live_api.engine, study_id, method, seed, epochs=epochs, finished=True, name="base")
    finish(live_api.engine, study_id)
    return study_id


@pytest.mark.parametrize("width", [DESK, PHONE], ids=["1280px", "390px"])
@pytest.mark.parametrize("name", list(PAGES))
def test_the_page_fits_the_window_and_its_first_column_of_interest_comes_into_view(
    live_api, browser_page, finished_study, tmp_path, name, width
):
    path, header = PAGES[name]
    page = browser_page.page
    page.set_viewport_size({"width": width, "height": HEIGHT[width]})
    response = page.goto(f"{live_api.url}{path.format(id=finished_study)}")
    assert response is not None and response.status == 200, path
    shot = _screenshot(page, tmp_path / f"{name}-{width}px.png")

    page_width = page.evaluate("document.documentElement.scrollWidth")
    inner = page.evaluate("window.innerWidth")
    assert inner == width
    assert page_width <= inner, (
        f"{name} at {width} px scrolls sideways: {page_width} px wide; "
        f"sticking out: {page.evaluate(_STICKING_OUT)}; see {shot}"
    )

    cell = page.locator(header).first
    cell.scroll_into_view_if_needed()  # scrolls the table's own box, where it has one
    box = cell.bounding_box()
    assert box is not None, f"{name}: no {header} shown; see {shot}"
    assert box["x"] >= 0 and box["x"] + box["width"] <= inner, (
        f"{name} at {width} px: {header} at x={box['x']:.0f}..{box['x'] + box['width']:.0f}, "
        f"outside the {inner} px window; see {shot}"
    )
    assert page.evaluate("document.documentElement.scrollWidth") <= inner  # scrolling it there moved no page
    # The results and the report are self-contained documents without an icon: the browser asks for one.
    assert browser_page.problems(allow=lambda message: "/favicon.ico" in message) == []


def test_the_study_page_shows_the_phase_beside_the_progress_and_follows_it(live_api, browser_page):
    study_id = live_api.submit(name="running")
    page = browser_page.page
    page.set_viewport_size({"width": PHONE, "height": HEIGHT[PHONE]})
    page.goto(f"{live_api.url}/studies/{study_id}")
    phase = page.locator('#study-head [data-field="phase"]')
    assert phase.is_hidden()  # queued: nothing runs yet
    browser_page.mark_loaded()

    start(live_api.engine, study_id)
    record(live_api.engine, study_id, "dyt", 0, epochs={1: 0.7}, finished=True)
    page.wait_for_function(
        "document.querySelector('#study-head [data-field=\"phase\"]').textContent === 'grid'"
    )
    assert phase.is_visible()
    finish(live_api.engine, study_id)
    page.wait_for_selector('#study-head [data-field="status"].succeeded')
    assert phase.is_hidden()
    assert not browser_page.was_reloaded()
    assert browser_page.problems() == []


def _screenshot(page, path: Path) -> Path:
    page.screenshot(path=str(path), full_page=True)
    return path
