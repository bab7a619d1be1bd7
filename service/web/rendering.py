"""The pages' Jinja2 environment (FastAPI's Jinja2Templates over service/web/templates) and its filters.

Autoescaping is on for every template, whatever its name: study names, specs, errors and trial keys are
user content. The only markup passed through unescaped is the SVG of studies.tables, which escapes every
text it draws (views.CurveFigure). StrictUndefined makes a misspelt variable an error in the tests
instead of an empty cell in production.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import jinja2
from fastapi import Request
from fastapi.templating import Jinja2Templates
from starlette.responses import Response

__all__ = ["TEMPLATES_DIR", "render", "templates"]

TEMPLATES_DIR = Path(__file__).resolve().parent / "templates"

# A page shows the study as it is now: a browser's back button must not bring back a stale copy, and a
# cache must not hand a page's HTML to a JSON client of the same URL (or the other way round).
_HEADERS = {"Cache-Control": "no-store", "Vary": "Accept"}


def when(iso: str | None) -> str:
    """An ISO 8601 moment as the pages print it (the page's script prints the same form): UTC, seconds."""
    if not iso:
        return "–"
    moment = datetime.fromisoformat(iso)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def number(value: float | None) -> str:
    """A metric as the pages print it (4 significant digits, like the figures' tooltips)."""
    return "–" if value is None else f"{value:.4g}"


def duration(seconds: float | None) -> str:
    """A time left as the pages print it (the page's script prints the same): "about 40 s", "about 3 min",
    "about 1.5 h"; "" without an estimate."""
    if seconds is None:
        return ""
    if seconds < 90:
        return f"about {max(1, round(seconds))} s"
    if seconds < 90 * 60:
        return f"about {round(seconds / 60)} min"
    return f"about {seconds / 3600:.1f} h"


def _environment() -> jinja2.Environment:
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES_DIR),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters["when"] = when
    environment.filters["number"] = number
    environment.filters["duration"] = duration
    return environment


templates = Jinja2Templates(env=_environment())


def render(request: Request, name: str, context: Mapping[str, Any], *, status_code: int = 200) -> Response:
    return templates.TemplateResponse(request, name, dict(context), status_code=status_code, headers=_HEADERS)
