"""POST /studies takes the media types its OpenAPI document lists; anything else is the documented 415."""

from __future__ import annotations

import pytest

from tests.factories import QUICK_SPEC_YAML
from tests.service.conftest import AUTH


@pytest.mark.parametrize("content_type", ["text/plain", "text/plain; charset=utf-8", "TEXT/PLAIN"])
def test_a_spec_labelled_text_plain_is_a_415_naming_the_types_that_work(client, content_type):
    response = client.post(
        "/studies", content=QUICK_SPEC_YAML, headers={"Content-Type": content_type, **AUTH}
    )
    assert response.status_code == 415
    assert "application/json or application/yaml" in response.json()["detail"]


def test_the_documented_types_are_exactly_the_ones_accepted(app, client):
    documented = set(app.openapi()["paths"]["/studies"]["post"]["requestBody"]["content"])
    assert documented == {"application/json", "application/yaml"}
    for content_type in documented:
        body = '{"name": "x"}' if content_type == "application/json" else "name: x"
        assert (
            client.post("/studies", content=body, headers={"Content-Type": content_type, **AUTH}).status_code
            == 422
        )
