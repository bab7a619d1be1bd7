"""Every cpu comparison is fair to the treatment: each arm gets the same tuning effort, and some (a recipe
tuned for the reference and applied unchanged to the treatment would favour the reference)."""

from __future__ import annotations

import pytest
import yaml

from studies.catalog import CATALOG_DIR, claim_ids, spec_path, study_claim
from studies.report.tuning_effort import tuning_effort

CPU_COMPARISONS = sorted(
    {
        study_claim(claim, "cpu")
        for claim in claim_ids()
        if spec_path(claim, "cpu").exists()
        and yaml.safe_load(spec_path(claim, "cpu").read_text()).get("kind", "compare") == "compare"
    }
)


def test_there_are_cpu_comparisons_to_check():
    assert len(CPU_COMPARISONS) >= 5


@pytest.mark.parametrize("claim", CPU_COMPARISONS)
def test_every_arm_of_a_cpu_comparison_is_tuned_with_the_same_effort(claim):
    effort = tuning_effort(yaml.safe_load((CATALOG_DIR / claim / "cpu.yaml").read_text()))
    assert effort is not None
    assert effort.tuned, f"{claim}: no arm is tuned, so the recipe may favour the reference"
    assert effort.equal, effort.sentence()
    assert all("lr" in arm.searched for arm in effort.arms), effort.sentence()
