"""GET /results/{dataset}?reference=: a reference that picks no single row of the table is a 422 at the
query parameter naming the rows that can be the reference, not a 200 whose every row carries a warning."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.factories import QUICK_SPEC_YAML
from tests.service.api.routes.test_results import _record, finished_study  # noqa: F401 (the fixture, shared)
from tests.service.conftest import AUTH


@pytest.mark.usefixtures("finished_study")
@pytest.mark.parametrize("fmt", ["json", "csv", "md", "html"])
def test_an_unknown_reference_is_a_422_at_the_query_naming_the_rows(client, fmt):
    response = client.get("/results/digits", params={"reference": "frozen_lnn", "format": fmt})
    assert response.status_code == 422
    [error] = response.json()["detail"]
    assert error["type"] == "unknown_reference"
    assert error["loc"] == ["query", "reference"] and error["input"] == "frozen_lnn"
    assert "unknown reference 'frozen_lnn'" in error["msg"]
    assert "choose one of autonorm_s, frozen_ln, dyt," in error["msg"]  # the rows, in the table's order


@pytest.mark.usefixtures("finished_study")
def test_a_known_reference_and_the_default_still_build_the_table(client):
    assert client.get("/results/digits", params={"reference": "dyt"}).json()["reference"] == "dyt"
    rows = client.get("/results/digits").json()["rows"]
    assert [row["method"] for row in rows if row["is_reference"]] == ["frozen_ln"]


@pytest.fixture
def grid_study(client, app_engine) -> str:
    spec = {
        **yaml.safe_load(QUICK_SPEC_YAML),
        "kind": "grid",
        "methods": ["frozen_ln"],
        "search": {"skip_scale": {"type": "grid", "values": [0.5, 1.0]}},
        "method_search": {},
    }
    spec.pop("num_samples")
    response = client.post(
        "/studies", content=json.dumps(spec), headers={"Content-Type": "application/json", **AUTH}
    )
    study_id = response.json()["id"]
    for group, base in (("skip_scale=0.5", 0.8), ("skip_scale=1.0", 0.9)):
        for seed in (0, 1, 2):
            _record(app_engine, study_id, "frozen_ln", seed, base + seed / 100, phase="grid", group=group)
    return study_id


def test_a_method_with_several_rows_is_a_422_naming_its_row_labels(client, grid_study):
    response = client.get("/results/digits", params={"reference": "frozen_ln"})
    assert response.status_code == 422
    [error] = response.json()["detail"]
    assert error["type"] == "ambiguous_reference" and error["loc"] == ["query", "reference"]
    assert "frozen_ln [skip_scale=0.5], frozen_ln [skip_scale=1.0]" in error["msg"]
    # A row label picks one row.
    chosen = client.get("/results/digits", params={"reference": "frozen_ln [skip_scale=1.0]"})
    assert chosen.status_code == 200
    assert [row["group"] for row in chosen.json()["rows"] if row["is_reference"]] == ["skip_scale=1.0"]


def test_the_default_reference_of_a_grid_is_not_the_clients_mistake(client, grid_study):
    # The spec's own reference (frozen_ln, two rows here) keeps the table's warning: nothing was asked.
    assert client.get("/results/digits").status_code == 200
