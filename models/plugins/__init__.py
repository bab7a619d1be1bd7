"""User norm layers ("plugins"): the conformance checks they must pass, and an isolated runner for them."""

from __future__ import annotations

from typing import Any

from models.plugins.conformance import CHECKS, CheckResult, ConformanceReport, check_norm_layer

__all__ = ["CHECKS", "CheckResult", "ConformanceReport", "IsolatedResult", "check_norm_layer", "run_isolated"]

_ISOLATED = frozenset({"IsolatedResult", "run_isolated"})


def __getattr__(name: str) -> Any:
    # Imported on first use: `python -m models.plugins.isolated` imports this package first, and an
    # eager import would load the module twice (runpy warns).
    if name in _ISOLATED:
        from models.plugins import isolated

        return getattr(isolated, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
