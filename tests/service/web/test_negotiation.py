"""Which requests get a page: only those whose Accept header ranks HTML above JSON and above any
wildcard. Every other client (the CLI, httpx, curl, a request without Accept) keeps the JSON API."""

from __future__ import annotations

import pytest

from service.web.negotiation import prefers_html


@pytest.mark.parametrize(
    "accept",
    [
        "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8",  # Chrome
        "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",  # Firefox
        "text/html",
        "application/xhtml+xml",
        "TEXT/HTML; charset=utf-8",
        "application/json;q=0.5, text/html",
    ],
)
def test_a_browser_prefers_html(accept):
    assert prefers_html(accept)


@pytest.mark.parametrize(
    "accept",
    [
        None,
        "",
        "*/*",  # httpx, curl
        "application/json",
        "application/*",
        "text/html, application/json",  # a tie stays JSON: the API's answer is the default
        "text/html, */*",
        "text/html;q=0.5, application/json",
        "text/html;q=0",
        "text/html;q=oops",  # a malformed weight is no preference for HTML
        "text/plain",
    ],
)
def test_anything_else_keeps_the_json_api(accept):
    assert not prefers_html(accept)
