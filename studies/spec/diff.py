"""What two study specs set differently, setting by setting: the compare view shows it, and /results
refuses to pool studies that differ in anything but their seeds (unless asked)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["SpecDifference", "spec_differences"]


@dataclass(frozen=True)
class SpecDifference:
    key: str  # dotted path into the spec, e.g. budget.epochs
    a: str  # the value in study a, as JSON ("–" where a does not set it)
    b: str


_ABSENT = "–"


def _flatten(spec: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in spec.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            flat.update(_flatten(value, f"{path}."))
        else:
            flat[path] = value
    return flat


def _shown(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def spec_differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[SpecDifference]:
    """Every setting the two specs give differently (nested sections by dotted key; lists as a whole),
    in key order; `name` and `description` left out, as every study has its own."""
    flat_a, flat_b = _flatten(a), _flatten(b)
    differences = []
    for key in sorted(set(flat_a) | set(flat_b)):
        if key in ("name", "description"):
            continue
        in_a, in_b = key in flat_a, key in flat_b
        if in_a and in_b and flat_a[key] == flat_b[key]:
            continue
        differences.append(
            SpecDifference(
                key=key,
                a=_shown(flat_a[key]) if in_a else _ABSENT,
                b=_shown(flat_b[key]) if in_b else _ABSENT,
            )
        )
    return differences
