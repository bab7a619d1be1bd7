"""The web pages a browser sees: the studies (`/`), a study (`/studies/{id}` with Accept text/html) and the
catalog's verdicts (`/catalog`), server-rendered from Jinja2 templates with the studies' SVG figures and a
little inline script that keeps a running study's page current. No front-end build step.

The router must be included before the JSON routes of the paths it shares (service.api.app does).
"""

from service.web.pages import router

__all__ = ["router"]
