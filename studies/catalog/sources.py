"""Where the numbers a catalog study relies on come from, when the claim itself does not say.

A claim's own `sources` cover its check's margins and thresholds. The knob values its specs fix (the
AutoNorm-S schedule, the rank knobs, the optimiser) are shared by many claims, so their sources live
here once; a claim's `sources` entry for a knob overrides this one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from studies.catalog.claims import Claim, Source

__all__ = ["KNOB_SOURCES", "UNSOURCED_CHECK_FIELDS", "check_numbers", "source_for"]


def _ours(text: str) -> Source:
    return Source(origin="normlab", text=text)


KNOB_SOURCES: dict[str, Source] = {
    "t_freeze": _ours(
        "the source summaries give no T_freeze. NormLab's default 10 is for the paper size; smaller sizes "
        "put the freeze decision mid-training (T_freeze must stay below the epoch budget)"
    ),
    "eps_h": _ours(
        "the summaries give no eps_H. 0.1 nats is about a 98:2 gate, a layer that has clearly chosen"
    ),
    "tau": _ours("the summaries give no Gumbel temperature; 0.5 is a common soft-gate value"),
    "post_freeze_gate": _ours("the summaries do not say what the gate does after the freeze"),
    "init_scale": _ours(
        "branch init scale alpha; the paper states its claims for branches not negligible against the "
        "skip, and the verdict is shown across a range of it"
    ),
    "skip_scale": _ours("the branch-to-skip ratio beta; 1 is the usual residual block"),
    "lr": _ours("AdamW peak learning rate, chosen where the reference converges at this size"),
    "weight_decay": _ours("Compact-Transformers' 3e-2 for ViT-Lite; kept for every backbone"),
    "label_smoothing": _ours("0.1 as in the AutoNorm backbones' common recipe (science.md section 2)"),
}

# Check fields that carry no choice of NormLab's: the paper's own difference (sourced by the claim's
# `reported.text`) and the selectors of rows and metrics.
UNSOURCED_CHECK_FIELDS = frozenset({"type", "paper_difference", "method", "reference", "metric", "expect"})


def check_numbers(claim: Claim) -> dict[str, Any]:
    """The numbers the claim's check was given explicitly (field -> value): each needs a source. The
    default alpha of 0.05 is the field's convention and needs none."""
    check = claim.check
    numbers: dict[str, Any] = {}
    for name in sorted(check.model_fields_set - UNSOURCED_CHECK_FIELDS):
        value = getattr(check, name)
        if name == "alpha" and value == 0.05:
            continue
        if name == "pairs":  # an ordering's pairs: their margins, by the margin's own name
            for pair in value:
                for field in sorted(pair.model_fields_set - UNSOURCED_CHECK_FIELDS):
                    if _has_number(getattr(pair, field)):
                        numbers.setdefault(field, getattr(pair, field))
        elif _has_number(value):
            numbers[name] = value
    return numbers


def _has_number(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return True
    if isinstance(value, Mapping):
        return any(_has_number(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_has_number(v) for v in value)
    return False


def source_for(claim: Claim | None, name: str) -> Source | None:
    """A number's source: the claim's own entry, else the shared knob table."""
    if claim is not None and name in claim.sources:
        return claim.sources[name]
    return KNOB_SOURCES.get(name)
