"""One definition of a finite number for every layer."""

import math

import numpy as np
import pytest

from studies.numbers import finite_or_none, is_finite_number


@pytest.mark.parametrize("value", [0, 1, -2.5, 1e300, np.float32(0.5), np.int64(3)])
def test_finite_ints_and_floats_are_numbers(value):
    assert is_finite_number(value)
    assert finite_or_none(value) == pytest.approx(float(value)) and type(finite_or_none(value)) is float


@pytest.mark.parametrize(
    "value", [True, False, None, math.nan, math.inf, -math.inf, np.float64("nan"), "1", [1]]
)
def test_bools_missing_values_and_non_finite_values_are_not(value):
    assert not is_finite_number(value)
    assert finite_or_none(value) is None


def test_json_safe_gives_strict_json_for_non_finite_numbers_numpy_scalars_and_keys():
    import json

    import numpy as np

    from studies.numbers import json_safe

    value = {"z": float("inf"), 1: [float("nan"), np.float32(0.5)], "t": (2, "x")}
    assert json_safe(value) == {"z": None, "1": [None, 0.5], "t": [2, "x"]}
    json.dumps(json_safe(value), allow_nan=False)
