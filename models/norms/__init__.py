"""Normalization layers: FrozenLN, DyT, AdaNorm, FiLM, Random Selector, AutoNorm (+ AutoNorm-S freeze)."""

from models.norms.adanorm import AdaNorm
from models.norms.autonorm import AutoNorm, NormSelector, gate_entropy
from models.norms.conditioning import TokenConditionedNorm, apply_norm, zero_init_conditioning
from models.norms.dyt import DyT
from models.norms.factory import NORM_KINDS, build_norm, norm_factory
from models.norms.film import FiLMNorm
from models.norms.freeze import GateFreezer, gate_summary, gated_norms, mean_gate_entropy, selector_parameters
from models.norms.layernorm import LayerNorm
from models.norms.mixed import mixed_norm, mixed_norm_reference
from models.norms.random_selector import RandomSelectorNorm

__all__ = [
    "NORM_KINDS",
    "AdaNorm",
    "AutoNorm",
    "DyT",
    "FiLMNorm",
    "GateFreezer",
    "LayerNorm",
    "NormSelector",
    "RandomSelectorNorm",
    "TokenConditionedNorm",
    "apply_norm",
    "build_norm",
    "gate_entropy",
    "gate_summary",
    "gated_norms",
    "mean_gate_entropy",
    "mixed_norm",
    "mixed_norm_reference",
    "norm_factory",
    "selector_parameters",
    "zero_init_conditioning",
]
