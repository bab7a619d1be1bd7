"""How a spec rule reports a problem: fail(loc, error type, message, offending value) records one, with
its field path, and every rule's problems go out together in one 422 (studies.spec.rules)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["Fail"]

Fail = Callable[[tuple[str | int, ...], str, str, Any], None]
