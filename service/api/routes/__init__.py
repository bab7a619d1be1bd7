"""One router per resource."""

from service.api.routes.figures import router as figures_router
from service.api.routes.health import router as health_router
from service.api.routes.reports import router as reports_router
from service.api.routes.results import router as results_router
from service.api.routes.studies import router as studies_router

__all__ = ["figures_router", "health_router", "reports_router", "results_router", "studies_router"]
