"""The built-in methods a study compares, and the norm layer each one trains with.

Each is a `normlab.records.Method`, registered exactly as a plugin registers its own (normlab.plugin.method):
adding a built-in method is one line here (plus its norm layer's file in models.norms, which registers the
norm kind). Plain Python (no pydantic, no torch): studies.spec validates a spec's methods against the
registry, and the training path (workers.training) builds each trial's model from it on machines that
have only torch installed. A method is a study's notion; models knows norm layers only, by their kind.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import NamedTuple

from normlab import REGISTRY
from normlab.plugin import method

__all__ = [
    "FREEZING_METHODS",
    "GATED_METHODS",
    "GATED_NORM",
    "METHODS",
    "NormChoice",
    "freezes",
    "is_gated",
    "known_methods",
    "norm_for_method",
]

# The norm kind whose layers hold a gate (a Gumbel temperature, gate statistics to show).
GATED_NORM = "autonorm"

method("autonorm_s", norm=GATED_NORM, gate_freeze=True, description="AutoNorm with the gate-freeze schedule")
method("autonorm", norm=GATED_NORM, description="AutoNorm, its gates never frozen")
method("frozen_ln", norm="layernorm", description="LayerNorm everywhere (the reference)")
method("dyt", norm="dyt", description="Dynamic Tanh everywhere")
method("random_selector", norm="random", description="a random fixed LayerNorm/DyT choice per layer")
method("adanorm", norm="adanorm", description="AdaNorm")
method("film", norm="film", description="FiLM-conditioned LayerNorm")


class NormChoice(NamedTuple):
    kind: str  # the models.norms kind of every norm layer of the trial's model
    gate_freeze: bool  # True: run the AutoNorm-S GateFreezer schedule (models.norms.freeze)
    options: Mapping[str, object] = MappingProxyType({})  # the method's fixed norm options


# The built-in methods, in the order the API lists them (a plugin's come after, from the registry).
METHODS: tuple[str, ...] = REGISTRY.methods.builtin_names()
# Built-in methods whose norm is the gated AutoNorm, and those that run the freeze schedule (its knobs
# apply to them alone). is_gated / freezes answer for any registered method, a plugin's too.
GATED_METHODS: tuple[str, ...] = tuple(m for m in METHODS if REGISTRY.methods.get(m).norm == GATED_NORM)
FREEZING_METHODS: tuple[str, ...] = tuple(m for m in METHODS if REGISTRY.methods.get(m).gate_freeze)


def known_methods() -> tuple[str, ...]:
    """Every method a spec may name here and now: the built-ins, then registered or overlaid plugins'."""
    return REGISTRY.methods.names()


def norm_for_method(name: str) -> NormChoice:
    if name not in REGISTRY.methods:
        raise ValueError(f"unknown method {name!r}; choose one of {list(known_methods())}")
    record = REGISTRY.methods.get(name)
    return NormChoice(record.norm, record.gate_freeze, dict(record.norm_options))


def is_gated(name: str) -> bool:
    return name in REGISTRY.methods and REGISTRY.methods.get(name).norm == GATED_NORM


def freezes(name: str) -> bool:
    return name in REGISTRY.methods and REGISTRY.methods.get(name).gate_freeze
