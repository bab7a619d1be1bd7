"""Content negotiation between the pages and the JSON API on the same paths (`/studies/{id}`).

A browser names text/html first (`text/html,application/xhtml+xml,...,*/*;q=0.8`); the CLI, httpx,
curl and the tests send `*/*`, `application/json` or no Accept at all. Only a request that ranks HTML
above JSON and above any wildcard gets a page: everyone else keeps exactly the JSON answer they had
before the pages existed, because the page route does not even match their request (`HtmlRoute`), so
the JSON route of the same path answers as it always did.
"""

from __future__ import annotations

from fastapi.routing import APIRoute
from starlette.datastructures import Headers
from starlette.routing import Match
from starlette.types import Scope

__all__ = ["HtmlRoute", "prefers_html"]

_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
_JSON_TYPES = frozenset({"application/json", "application/*", "*/*"})


def prefers_html(accept: str | None) -> bool:
    """Whether an Accept header ranks HTML strictly above JSON (a tie, or a bare `*/*`, is JSON: the
    API's answer stays the default)."""
    html_q = json_q = 0.0
    for media_range in (accept or "").split(","):
        media_type, _, params = media_range.partition(";")
        media_type = media_type.strip().lower()
        q = _quality(params)
        if media_type in _HTML_TYPES:
            html_q = max(html_q, q)
        elif media_type in _JSON_TYPES:
            json_q = max(json_q, q)
    return html_q > json_q


def _quality(params: str) -> float:
    for param in params.split(";"):
        name, _, value = param.partition("=")
        if name.strip().lower() == "q":
            try:
                return min(1.0, max(0.0, float(value)))
            except ValueError:
                return 0.0  # a malformed weight counts as "not acceptable", never as preferred
    return 1.0


class HtmlRoute(APIRoute):
    """A route that matches only requests preferring HTML; for any other request it is not there, and
    Starlette goes on to the next route of the same path. Its router must be included before the JSON
    routes it shares paths with."""

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        match, child_scope = super().matches(scope)
        if match is not Match.NONE and not prefers_html(Headers(scope=scope).get("accept")):
            return Match.NONE, {}
        return match, child_scope
