"""The README's reproduction-catalog section states bands that come from studies/catalog/claims.yaml: every
"±N %" in a check's row of the check table is a relative band parameter of every claim with that check,
every other "±N %" in the section is one of some claim, and its accuracy-point margins and the margins it
gives as the sensitivity example are claims' margins. A band changed in one place and not the other
fails here."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from studies.catalog import Claim, load_claims

README = Path(__file__).resolve().parents[1] / "README.md"
SECTION = "## Reproduction catalog and reports"
# The check parameters that are bands relative to what they bound (a fraction: 0.04 is ±4 %), per check.
# Absolute bands (an accuracy margin in points, an exponent band) are not percentages and are left out.
RELATIVE_BANDS: dict[str, tuple[str, ...]] = {
    "width_threshold": ("tolerance", "resolution"),  # of the threshold m/d
    "difference": ("relative_margin",),  # of the reference's metric
}
PERCENT = re.compile(r"±\s?(\d+(?:\.\d+)?)\s?%")
POINTS = re.compile(r"±\s?(\d+(?:\.\d+)?) accuracy points?\b")
POINT_LIST = re.compile(r"±((?:\d+(?:\.\d+)?, )+\d+(?:\.\d+)? and \d+(?:\.\d+)?) accuracy points")
CHECK_ROW = re.compile(r"^\| `([a-z_]+)` \| (.*) \|$")


def _section() -> str:
    text = README.read_text(encoding="utf-8")
    assert SECTION in text, f"README.md has no '{SECTION}' section"
    return text.split(SECTION, 1)[1].split("\n## ", 1)[0]


def _check_rows() -> dict[str, str]:
    """check type -> its verdict rule, from the README's check table."""
    return {m.group(1): m.group(2) for line in _section().splitlines() if (m := CHECK_ROW.match(line))}


def _claims_with(check: str) -> list[Claim]:
    return [claim for claim in load_claims().values() if claim.check.type == check]


def _relative_bands(claim: Claim) -> dict[str, float]:
    names = RELATIVE_BANDS.get(claim.check.type, ())
    return {name: value for name in names if (value := getattr(claim.check, name, None)) is not None}


def _stated(percent: str) -> float:
    return float(percent) / 100


def test_the_check_table_is_found_and_names_the_catalogs_checks():
    rows = _check_rows()
    used = {claim.check.type for claim in load_claims().values()}
    assert {"difference", "width_threshold"} <= set(rows)
    assert set(rows) <= used, f"the README describes checks no claim uses: {set(rows) - used}"


def test_the_relative_band_parameters_exist_on_their_checks():
    for check, names in RELATIVE_BANDS.items():
        for claim in _claims_with(check):
            for name in names:
                assert name in type(claim.check).model_fields, f"{claim.id}: no `{name}` on `{check}`"


@pytest.mark.parametrize("check", sorted(_check_rows()))
def test_every_percent_band_in_a_checks_row_is_that_checks_parameter_in_every_claim(check):
    bands = PERCENT.findall(_check_rows()[check])
    wrong = []
    for band in bands:
        for claim in _claims_with(check):
            parameters = _relative_bands(claim)
            if not any(math.isclose(_stated(band), value) for value in parameters.values()):
                found = (
                    ", ".join(f"{name}={value:g}" for name, value in parameters.items()) or "no relative band"
                )
                wrong.append(f"README's `{check}` row states ±{band} %, but {claim.id}'s check has {found}")
    assert not wrong, "\n".join(wrong)


def test_every_other_percent_band_of_the_section_is_some_claims_parameter():
    outside_table = "\n".join(line for line in _section().splitlines() if not CHECK_ROW.match(line))
    bands = PERCENT.findall(outside_table)
    assert bands, "the section states no ±N % band outside the check table (the tabular claims' ±5 %)"
    catalog = {value for claim in load_claims().values() for value in _relative_bands(claim).values()}
    missing = [band for band in bands if not any(math.isclose(_stated(band), value) for value in catalog)]
    assert not missing, f"README states ±{', ±'.join(missing)} % but no claim has that relative band"


def test_the_accuracy_point_margins_are_claims_margins():
    section = _section()
    margins = {getattr(c.check, "margin", None) for c in load_claims().values()} - {None}
    stated = POINTS.findall(section)
    assert stated, "the section states no accuracy-point margin (MNIST's ±1 point)"
    missing = [points for points in stated if not any(math.isclose(_stated(points), m) for m in margins)]
    assert not missing, (
        f"README states ±{missing} accuracy points; the catalog's margins are {sorted(margins)}"
    )


def test_the_sensitivity_example_is_a_claims_margin_grid():
    found = POINT_LIST.search(_section())
    assert found, "the section gives no margin grid as the sensitivity example"
    stated = [_stated(n) for n in re.findall(r"\d+(?:\.\d+)?", found.group(1))]
    grids = [claim.sensitivity.get("margin") for claim in load_claims().values()]
    assert any(
        grid is not None and len(grid) == len(stated) and all(map(math.isclose, grid, stated))
        for grid in grids
    ), f"README's sensitivity example ±{found.group(1)} accuracy points is no claim's margin grid"
