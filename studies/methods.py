"""The methods a study compares, and the norm layer each one trains with: the one table of methods.

Plain Python (no pydantic, no torch): studies.spec validates a spec's methods against it, and the
training path (workers.training) builds each trial's model from it on machines that have only torch
installed. A method is a study's notion; models knows norm layers only, by their kind (a
models.norms.NORM_KINDS name, which tests/models checks every method's kind against).
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["FREEZING_METHODS", "GATED_METHODS", "METHODS", "NormChoice", "norm_for_method"]


class NormChoice(NamedTuple):
    kind: str  # the models.norms kind of every norm layer of the trial's model
    gate_freeze: bool  # True: run the AutoNorm-S GateFreezer schedule (models.norms.freeze)


_METHOD_NORMS: dict[str, NormChoice] = {
    "autonorm_s": NormChoice("autonorm", True),
    "autonorm": NormChoice("autonorm", False),
    "frozen_ln": NormChoice("layernorm", False),
    "dyt": NormChoice("dyt", False),
    "random_selector": NormChoice("random", False),
    "adanorm": NormChoice("adanorm", False),
    "film": NormChoice("film", False),
}
METHODS: tuple[str, ...] = tuple(_METHOD_NORMS)
# Methods whose norm is the gated AutoNorm (a Gumbel temperature, gate statistics to show).
GATED_METHODS: tuple[str, ...] = tuple(m for m, choice in _METHOD_NORMS.items() if choice.kind == "autonorm")
# The methods that run the freeze schedule (its knobs apply to them alone).
FREEZING_METHODS: tuple[str, ...] = tuple(m for m, choice in _METHOD_NORMS.items() if choice.gate_freeze)


def norm_for_method(method: str) -> NormChoice:
    if method not in _METHOD_NORMS:
        raise ValueError(f"unknown method {method!r}; choose one of {list(METHODS)}")
    return _METHOD_NORMS[method]
