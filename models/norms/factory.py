"""`build_norm(kind, dim, **options)`: the one place norm kinds are named."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from torch import nn

from models.norms.adanorm import AdaNorm
from models.norms.autonorm import AutoNorm
from models.norms.dyt import DyT
from models.norms.film import FiLMNorm
from models.norms.layernorm import LayerNorm
from models.norms.random_selector import RandomSelectorNorm

__all__ = ["NORM_KINDS", "build_norm", "norm_factory"]

NORM_KINDS: dict[str, type[nn.Module]] = {
    "layernorm": LayerNorm,
    "dyt": DyT,
    "adanorm": AdaNorm,
    "film": FiLMNorm,
    "random": RandomSelectorNorm,
    "autonorm": AutoNorm,
}


def build_norm(kind: str, dim: int, **options: Any) -> nn.Module:
    """A norm layer mapping (..., dim) -> (..., dim); unknown kinds or options raise ValueError."""
    if kind not in NORM_KINDS:
        raise ValueError(f"unknown norm kind {kind!r}; choose one of {sorted(NORM_KINDS)}")
    cls = NORM_KINDS[kind]
    accepted = set(inspect.signature(cls.__init__).parameters) - {"self", "dim"}
    unknown = set(options) - accepted
    if unknown:
        raise ValueError(
            f"norm {kind!r} does not take options {sorted(unknown)}; it takes {sorted(accepted)}"
        )
    return cls(dim, **options)


def norm_factory(kind: str, options: dict[str, Any] | None = None) -> Callable[[int], nn.Module]:
    """A `norm_layer(dim)` callable for blocks (timm style: layer classes passed in as arguments)."""
    frozen_options = dict(options or {})
    build_norm(kind, 8, **frozen_options)  # fail at model build time, not deep inside a block

    def make(dim: int) -> nn.Module:
        return build_norm(kind, dim, **frozen_options)

    return make
