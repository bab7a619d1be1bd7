"""`build_norm(kind, dim, **options)`: norm layers by kind, from the registry.

Each norm layer's module registers its kind with `normlab.plugin.norm_layer`, exactly as a plugin does;
importing models.norms registers the built-ins.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from torch import nn

from models.norms.adanorm import AdaNorm
from models.norms.autonorm import AutoNorm
from models.norms.dyt import DyT
from models.norms.film import FiLMNorm
from models.norms.layernorm import LayerNorm
from models.norms.random_selector import RandomSelectorNorm
from normlab import REGISTRY

__all__ = ["BUILTIN_NORMS", "NORM_KINDS", "build_norm", "norm_factory"]

# The built-in layers (importing them above registered them); NORM_KINDS also holds a plugin's.
BUILTIN_NORMS: tuple[type[nn.Module], ...] = (LayerNorm, DyT, AdaNorm, FiLMNorm, RandomSelectorNorm, AutoNorm)


class _NormKinds(Mapping[str, Callable[..., nn.Module]]):
    """Kind -> layer class or factory, of every registered norm whose code this process has."""

    def __getitem__(self, kind: str) -> Callable[..., nn.Module]:
        record = REGISTRY.norms.find(kind)
        if record is None or record.layer is None:
            raise KeyError(kind)
        return record.layer

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter([r.name for r in REGISTRY.norms if r.layer is not None])

    def __len__(self) -> int:
        return sum(1 for r in REGISTRY.norms if r.layer is not None)


NORM_KINDS: Mapping[str, Callable[..., nn.Module]] = _NormKinds()


def build_norm(kind: str, dim: int, **options: Any) -> nn.Module:
    """A norm layer mapping (..., dim) -> (..., dim); unknown kinds or options raise ValueError."""
    record = REGISTRY.norms.find(kind)
    if record is None:
        raise ValueError(f"unknown norm kind {kind!r}; choose one of {sorted(REGISTRY.norms.names())}")
    if record.layer is None:
        raise ValueError(f"norm kind {kind!r} is {record.source}'s, whose code this process has not imported")
    unknown = set(options) - set(record.options)
    if unknown:
        raise ValueError(
            f"norm {kind!r} does not take options {sorted(unknown)}; it takes {sorted(record.options)}"
        )
    return record.layer(dim, **options)  # type: ignore[no-any-return]


def norm_factory(kind: str, options: dict[str, Any] | None = None) -> Callable[[int], nn.Module]:
    """A `norm_layer(dim)` callable for blocks (timm style: layer classes passed in as arguments)."""
    frozen_options = dict(options or {})
    build_norm(kind, 8, **frozen_options)  # fail at model build time, not deep inside a block

    def make(dim: int) -> nn.Module:
        return build_norm(kind, dim, **frozen_options)

    return make
