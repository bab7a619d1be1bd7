"""The methods table (studies.methods): every method trains with a norm layer that `models` builds, and
only AutoNorm-S runs the freeze schedule."""

from __future__ import annotations

import pytest
import torch

from models import build_model
from models.norms import NORM_KINDS
from studies.methods import FREEZING_METHODS, GATED_METHODS, METHODS, norm_for_method


@pytest.mark.parametrize("method", METHODS)
def test_every_method_maps_to_a_buildable_norm(method: str) -> None:
    choice = norm_for_method(method)
    assert choice.kind in NORM_KINDS
    assert choice.gate_freeze is (method == "autonorm_s")
    model = build_model("tabular_tiny", {"norm": choice.kind, "num_features": 3})
    assert model(torch.randn(2, 3)).shape == (2, 1)


def test_unknown_method_is_rejected() -> None:
    with pytest.raises(ValueError, match="autonorm_s"):
        norm_for_method("batchnorm")


def test_the_gated_and_the_freezing_methods_come_from_the_table() -> None:
    assert GATED_METHODS == ("autonorm_s", "autonorm")
    assert FREEZING_METHODS == ("autonorm_s",)
