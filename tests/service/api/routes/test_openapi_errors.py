"""The OpenAPI document names every status a route answers, with its body, so clients and schema-driven
tests (tests/service/api/test_api_fuzz.py) know what to expect."""

from __future__ import annotations

import pytest

from studies.spec import KNOWN_DATASETS, METHODS


@pytest.fixture
def document(app) -> dict:
    return app.openapi()


@pytest.mark.parametrize(
    ("method", "path", "statuses"),
    [
        # 503 (with Retry-After): the database is busy past its queue timeout (service.api.load_shedding),
        # or unreachable, read-only, damaged; 507: a write found the database's disk full.
        ("post", "/studies", {"200", "201", "401", "403", "413", "415", "422", "503", "507"}),
        ("get", "/studies", {"200", "422", "503"}),
        ("get", "/studies/{study_id}", {"200", "404", "422", "503"}),
        ("get", "/studies/{study_id}/trials", {"200", "404", "422", "503"}),
        ("post", "/studies/{study_id}/cancel", {"200", "401", "404", "409", "422", "503", "507"}),
        ("get", "/results/{dataset}", {"200", "404", "422", "503"}),
        ("get", "/studies/{study_id}/report", {"200", "404", "422", "503"}),
        ("get", "/readyz", {"200", "503"}),
    ],
)
def test_every_route_documents_each_status_it_can_answer(document, method, path, statuses):
    assert set(document["paths"][path][method]["responses"]) == statuses


def test_message_errors_document_a_detail_string_and_validation_errors_a_list_of_field_errors(document):
    responses = document["paths"]["/studies"]["post"]["responses"]
    schemas = document["components"]["schemas"]

    def schema_of(status: str) -> dict:
        ref = responses[status]["content"]["application/json"]["schema"]["$ref"]
        return schemas[ref.rsplit("/", 1)[-1]]

    assert schema_of("401")["properties"]["detail"]["type"] == "string"
    field_error = schema_of("422")["properties"]["detail"]["items"]["$ref"].rsplit("/", 1)[-1]
    assert {"type", "loc", "msg"} <= set(schemas[field_error]["required"])


def test_the_spec_schema_lists_the_datasets_and_methods_the_validator_accepts(document):
    properties = document["components"]["schemas"]["StudySpec"]["properties"]
    assert properties["dataset"]["enum"] == list(KNOWN_DATASETS)
    assert properties["methods"]["items"]["enum"] == list(METHODS)


def test_ids_and_filters_that_reach_the_database_document_that_nul_is_not_allowed(document):
    parameter = document["paths"]["/studies/{study_id}"]["get"]["parameters"][0]
    assert parameter["schema"]["pattern"] == "^[^\\u0000]*$"
