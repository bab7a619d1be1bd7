"""The HTTP API: the FastAPI app, its routes and middleware, and what a request reads (results, reports)."""
