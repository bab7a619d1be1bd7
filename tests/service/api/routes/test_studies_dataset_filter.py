"""GET /studies?dataset=: an unknown dataset is a 422 at the query naming the known ones, not an empty list
that reads as "no studies"; the OpenAPI document lists the choices."""

from __future__ import annotations

from studies.spec import KNOWN_DATASETS


def test_an_unknown_dataset_filter_is_a_422_naming_the_datasets(client):
    response = client.get("/studies", params={"dataset": "imagenet"})
    assert response.status_code == 422
    [error] = response.json()["detail"]
    assert error["type"] == "unknown_dataset"
    assert error["loc"] == ["query", "dataset"] and error["input"] == "imagenet"
    assert error["msg"] == f"unknown dataset 'imagenet'; choose one of {', '.join(KNOWN_DATASETS)}"


def test_a_known_dataset_without_studies_is_an_empty_list(client):
    assert client.get("/studies", params={"dataset": "digits"}).json() == []


def test_the_schema_lists_the_datasets(app):
    parameters = app.openapi()["paths"]["/studies"]["get"]["parameters"]
    [dataset] = [p for p in parameters if p["name"] == "dataset"]
    assert {"type": "string", "enum": list(KNOWN_DATASETS)} in dataset["schema"]["anyOf"]
