"""POST /studies with a sequential design: a design a statistician would not sign is a 422 at the field to
fix, and nothing is stored; a sound one is stored with its seeds derived from the design."""

from __future__ import annotations

import json

import pytest
import yaml

from studies.store import list_studies, session_scope
from tests.factories import QUICK_SPEC_YAML
from tests.service.conftest import AUTH

JSON = {"Content-Type": "application/json", **AUTH}
# The test server allows 5 seeds per study: looks at 3, 4 and 5 seeds.
DESIGN = {"first_seeds": 3, "seeds_per_look": 1, "max_seeds": 5, "effect": 0.01}
SPEC = {key: value for key, value in yaml.safe_load(QUICK_SPEC_YAML).items() if key != "seeds"}


def _submit(client, **changes):
    return client.post(
        "/studies", content=json.dumps({**SPEC, "sequential": DESIGN, **changes}), headers=JSON
    )


def _errors(response) -> dict[tuple, str]:
    return {tuple(e["loc"]): e["msg"] for e in response.json()["detail"]}


def _stored_count(app_engine) -> int:
    with session_scope(app_engine) as session:
        return len(list_studies(session))


def test_a_sound_sequential_design_is_stored_with_the_seeds_its_looks_can_take(client, app_engine):
    response = _submit(client)
    assert response.status_code == 201, response.text
    spec = response.json()["spec"]
    assert spec["sequential"]["max_seeds"] == 5 and spec["seeds"] == [0, 1, 2, 3, 4]
    assert _stored_count(app_engine) == 1


@pytest.mark.parametrize(
    ("design", "loc", "fragment"),
    [
        (
            {**DESIGN, "first_seeds": 5, "max_seeds": 4},
            ("sequential", "max_seeds"),
            "max_seeds (4) is below first_seeds (5): raise max_seeds or lower first_seeds",
        ),
        ({**DESIGN, "max_seeds": 3}, ("sequential", "max_seeds"), "single look"),
        ({"test": "equivalence", "margin": 0}, ("sequential", "margin"), "margin must be positive"),
        ({"test": "equivalence"}, ("sequential", "margin"), "test: equivalence needs margin"),
        ({**DESIGN, "margin": 0.01}, ("sequential", "margin"), "remove margin"),
        ({**DESIGN, "alpha": 0.6}, ("sequential", "alpha"), "must lie in (0, 0.5)"),
        ({**DESIGN, "power": 1}, ("sequential", "power"), "must lie in (0.5, 1)"),
        ({**DESIGN, "effect": None}, ("sequential", "effect"), "superiority test needs effect"),
        ({**DESIGN, "effect": 2}, ("sequential", "effect"), "write 0.02"),
        ({**DESIGN, "max_seeds": 6}, ("sequential", "max_seeds"), "at most 5 seeds"),
    ],
)
def test_a_bad_design_is_a_422_at_its_field_and_stores_nothing(client, app_engine, design, loc, fragment):
    response = _submit(client, sequential=design)
    assert response.status_code == 422, response.text
    errors = _errors(response)
    assert ("body", *loc) in errors, errors
    assert fragment in errors[("body", *loc)]
    assert _stored_count(app_engine) == 0


def test_an_explicit_seed_list_beside_a_design_is_a_422_at_seeds(client, app_engine):
    response = _submit(client, seeds=[0, 1, 2])
    assert response.status_code == 422
    assert "remove seeds" in _errors(response)[("body", "seeds")]
    assert _stored_count(app_engine) == 0


def test_a_claim_whose_check_reads_every_seed_is_a_422_beside_a_design(client, app_engine):
    response = _submit(client, claim="vision_gates_collapse_to_ln")
    assert response.status_code == 422
    message = _errors(response)[("body", "sequential")]
    assert "cannot be judged on a sequential design's looks" in message and "gate_pattern" in message
    assert "Remove claim" in message and "repeated confidence intervals" in message
    assert _stored_count(app_engine) == 0


def test_a_comparison_claim_beside_a_design_raises_no_sequential_error(client, app_engine):
    response = _submit(client, claim="mnist_autonorm_s_level_with_frozen_ln")
    assert ("body", "sequential") not in (_errors(response) if response.status_code == 422 else {})


def test_a_design_with_one_method_is_a_422_because_it_has_nothing_to_compare(client, app_engine):
    response = _submit(client, methods=["frozen_ln"])
    assert response.status_code == 422
    assert "has none: add the methods to compare" in _errors(response)[("body", "sequential")]
    assert _stored_count(app_engine) == 0
