"""The methods a study compares, and the norm each one uses."""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["METHODS", "NormChoice", "norm_for_method"]


class NormChoice(NamedTuple):
    kind: str  # models.norms kind
    gate_freeze: bool  # True: run the AutoNorm-S GateFreezer schedule


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


def norm_for_method(method: str) -> NormChoice:
    if method not in _METHOD_NORMS:
        raise ValueError(f"unknown method {method!r}; choose one of {list(METHODS)}")
    return _METHOD_NORMS[method]
