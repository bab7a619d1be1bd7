"""User norm layers ("plugins"): the conformance checks they must pass (`check_norm_layer`, here), and an
isolated runner for them in a process of their own (`models.plugins.isolated`, imported where it is used:
`python -m models.plugins.isolated` runs it, and a package that imported it would load it twice)."""

from __future__ import annotations

from models.plugins.conformance import CHECKS, CheckResult, ConformanceReport, check_norm_layer

__all__ = ["CHECKS", "CheckResult", "ConformanceReport", "check_norm_layer"]
