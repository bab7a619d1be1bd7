"""A real browser for the page tests: the system's Chromium driven by Playwright for Python, as a pytest
plugin every test directory sees (tests/conftest.py loads it; the page tests of the service and the
end-to-end test of the whole stack use it).

Playwright's own browser download cannot run everywhere (it fetches a build from its CDN), so the
browser is the system's: NORMLAB_CHROMIUM when set, else the first of CHROMIUM_NAMES on PATH (Debian's
`chromium` package: `apt-get install chromium`, which .ci/run does as root through
scripts/install_browser.sh). Without Playwright or a Chromium the browser tests skip, saying which is
missing and how to get it. A test that asks for `chromium` (or `browser_page`) is marked `browser`,
`process` and `serial` by tests/conftest.py.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin, urlsplit

import pytest

CHROMIUM_ENV = "NORMLAB_CHROMIUM"
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome-stable", "google-chrome", "chrome")


def find_chromium() -> str | None:
    """The Chromium (or Chrome) executable to drive, or None where there is none."""
    chosen = os.environ.get(CHROMIUM_ENV)
    if chosen:
        return chosen if os.access(chosen, os.X_OK) else None
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    """One headless Chromium per module (a fresh context per test keeps tests apart). Not per session:
    while Playwright's sync API is started it keeps an event loop running in this thread, so every later
    test of the process that calls asyncio.run (uvicorn servers, the burst test) would fail."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("no Playwright for Python: install the dev extra (pip install -e '.[dev]')")
    executable = find_chromium()
    chosen = os.environ.get(CHROMIUM_ENV)
    if executable is None and chosen:
        pytest.skip(f"{CHROMIUM_ENV}={chosen} is no executable: point it at a Chromium or Chrome")
    if executable is None:
        pytest.skip(
            f"no Chromium: install it (Debian: apt-get install chromium) or set {CHROMIUM_ENV} to a "
            f"Chromium or Chrome executable; looked for {', '.join(CHROMIUM_NAMES)} on PATH"
        )
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, headless=True)
        try:
            yield browser
        finally:
            browser.close()


@dataclass
class BrowserPage:
    """A page in a fresh browser context, with what its console and scripts reported."""

    page: Any  # playwright.sync_api.Page
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)

    def problems(self, *, allow: Callable[[str], bool] = lambda message: False) -> list[str]:
        """Console errors (`allow` keeps out the expected ones) and uncaught script errors."""
        return [m for m in self.console_errors if not allow(m)] + self.page_errors

    def mark_loaded(self) -> None:
        """Leave a mark in the page's window: it survives until the page reloads or navigates."""
        self.page.evaluate("window.__normlabNotReloaded = true")

    def was_reloaded(self) -> bool:
        return self.page.evaluate("window.__normlabNotReloaded !== true")

    def internal_links(self) -> list[str]:
        """Every link of the page (hidden ones too) that points at the page's own server, absolute."""
        base = self.page.url
        origin = urlsplit(base)[:2]
        hrefs = self.page.eval_on_selector_all("a[href]", "links => links.map(a => a.getAttribute('href'))")
        absolute = [urljoin(base, href) for href in hrefs if not href.startswith("#")]
        return sorted({url.split("#", 1)[0] for url in absolute if urlsplit(url)[:2] == origin})

    def broken_links(self) -> dict[str, int]:
        """{link: HTTP status} for the internal links that answer 4xx or 5xx (asked for as a browser
        following them would: HTML preferred)."""
        broken = {}
        for url in self.internal_links():
            response = self.page.request.get(url, headers={"Accept": "text/html,*/*;q=0.8"})
            if response.status >= 400:
                broken[url] = response.status
        return broken


@pytest.fixture
def browser_page(chromium: Any) -> Iterator[BrowserPage]:
    context = chromium.new_context()
    context.set_default_timeout(15_000)
    page = context.new_page()
    watched = BrowserPage(page)
    page.on("console", lambda message: _record_console(watched, message))
    page.on("pageerror", lambda error: watched.page_errors.append(str(error)))
    try:
        yield watched
    finally:
        context.close()


def _record_console(watched: BrowserPage, message: Any) -> None:
    if message.type == "error":
        watched.console_errors.append(f"{message.text} ({message.location.get('url', '')})")
