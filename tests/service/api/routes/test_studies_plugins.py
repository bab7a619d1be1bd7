"""POST /studies with plugins: off unless the operator allows them, then only with the plugin token; the
plugin is imported and checked in a child process, and a failure is a 422 naming it that stores nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from service.api.app import create_app
from service.auth import ensure_plugin_token
from studies.spec import StudySpec
from studies.store import get_study, list_studies, session_scope
from tests.service.conftest import AUTH

EXAMPLE = Path(__file__).resolve().parents[4] / "examples" / "plugins" / "rmsnorm.py"
SPEC = {
    "name": "rmsnorm vs the baselines",
    "dataset": "digits",
    "model": "vit_lite_tiny",
    "methods": ["rmsnorm", "frozen_ln", "dyt"],
    "method_search": {"rmsnorm": {"rms_eps": {"type": "loguniform", "low": 1e-7, "high": 1e-3}}},
    "num_samples": 2,
    "seeds": [0, 1, 2],
    "budget": {"epochs": 2, "batch_size": 32},
    "plugins": [{"path": "rmsnorm.py", "files": {"__init__.py": EXAMPLE.read_text()}}],
}


@pytest.fixture
def plugin_settings(settings):
    return settings.model_copy(update={"allow_plugins": True})


@pytest.fixture
def plugin_client(plugin_settings, dispatcher):
    with TestClient(create_app(settings=plugin_settings, dispatcher=dispatcher)) as client:
        yield client


def _post(client, spec, token_headers):
    return client.post(
        "/studies", content=json.dumps(spec), headers={"Content-Type": "application/json", **token_headers}
    )


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _stored(client) -> int:
    with session_scope(client.app.state.engine) as session:
        return len(list_studies(session))


def test_a_server_that_does_not_allow_plugins_refuses_them_with_403_naming_the_setting(client):
    response = _post(client, SPEC, AUTH)
    assert response.status_code == 403
    assert "NORMLAB_ALLOW_PLUGINS=true" in response.json()["detail"]
    assert _stored(client) == 0


def test_the_api_token_alone_does_not_grant_running_code(plugin_client):
    response = _post(plugin_client, SPEC, AUTH)
    assert response.status_code == 403
    assert "plugin token" in response.json()["detail"]
    assert _stored(plugin_client) == 0


def test_with_the_plugin_token_the_study_is_stored_with_its_source_hash_and_records(
    plugin_client, plugin_settings
):
    response = _post(plugin_client, SPEC, _bearer(ensure_plugin_token(plugin_settings)))
    assert response.status_code == 201, response.text
    with session_scope(plugin_client.app.state.engine) as session:
        stored = get_study(session, study_id=response.json()["id"]).spec
    (plugin,) = stored["plugins"]
    assert plugin["files"] == {"__init__.py": EXAMPLE.read_text()}
    assert len(plugin["sha256"]) == 64 and plugin["package"].startswith("normlab_plugin_rmsnorm_")
    assert [m["name"] for m in plugin["provides"]["methods"]] == ["rmsnorm"]
    assert [k["norm_option"] for k in plugin["provides"]["knobs"]] == ["eps"]
    assert plugin["checks"][0]["ok"] is True
    # The stored spec reads back anywhere from its own facts, without the plugin's code.
    assert StudySpec.model_validate(stored).methods == ["rmsnorm", "frozen_ln", "dyt"]


def test_a_plugin_knob_is_checked_against_its_range_like_a_built_in(plugin_client, plugin_settings):
    spec = {**SPEC, "method_search": {"rmsnorm": {"rms_eps": 0.5}}}
    response = _post(plugin_client, spec, _bearer(ensure_plugin_token(plugin_settings)))
    assert response.status_code == 422
    assert "rms_eps" in response.text and "[1e-08, 0.01]" in response.text


@pytest.mark.slow
def test_a_plugin_knob_on_a_method_it_does_not_apply_to_is_refused(plugin_client, plugin_settings):
    spec = {**SPEC, "method_search": {"frozen_ln": {"rms_eps": 1e-5}}}
    response = _post(plugin_client, spec, _bearer(ensure_plugin_token(plugin_settings)))
    assert response.status_code == 422
    assert "rms_eps" in response.text


BROKEN_LAYER = """
import torch
from torch import nn
from normlab.plugin import method, norm_layer

@norm_layer("halfnorm")
class HalfNorm(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return (x * self.weight)[..., : x.shape[-1] // 2]  # drops half the features

method("halfnorm", norm="halfnorm")
"""


@pytest.mark.slow  # a child process per case and database: about 20 s
@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (BROKEN_LAYER, ["plugin halfnorm.py", "checks failed", "shape"]),
        (
            "import torch\nraise RuntimeError('needs a GPU')\n",
            ["plugin halfnorm.py", "import failed", "line 2", "needs a GPU"],
        ),
        ("x = 1\n", ["registered nothing"]),
        (
            BROKEN_LAYER.replace('method("halfnorm"', 'method("dyt"'),
            ["'dyt' is already registered (by builtin)"],
        ),
    ],
    ids=["fails-the-shape-check", "import-error", "registers-nothing", "takes-a-built-in-name"],
)
def test_a_plugin_that_fails_its_check_is_a_422_naming_it_and_nothing_is_stored(
    plugin_client, plugin_settings, source, expected
):
    spec = {
        **SPEC,
        "methods": ["frozen_ln"],
        "method_search": {},
        "plugins": [{"path": "halfnorm.py", "files": {"__init__.py": source}}],
    }
    response = _post(plugin_client, spec, _bearer(ensure_plugin_token(plugin_settings)))
    assert response.status_code == 422, response.text
    (error,) = response.json()["detail"]
    assert error["loc"][-2:] == ["plugins", 0]
    for words in expected:
        assert words in error["msg"]
    assert _stored(plugin_client) == 0


def test_a_method_of_no_plugin_is_still_unknown(plugin_client, plugin_settings):
    spec = {key: value for key, value in SPEC.items() if key != "plugins"}
    response = _post(
        plugin_client, {**spec, "method_search": {}}, _bearer(ensure_plugin_token(plugin_settings))
    )
    assert response.status_code == 422
    assert "unknown method(s) rmsnorm" in response.text


def _npz(path, *, rows=120, label_rows=None):
    import numpy as np

    rng = np.random.default_rng(0)
    np.savez(
        path,
        x=rng.uniform(size=(rows, 1, 8, 8)).astype("float32"),
        y=rng.integers(0, 3, size=label_rows or rows),
    )
    return str(path)


def _user_spec(path: str) -> dict:
    return {
        "name": "my images",
        "dataset": "my_images",
        "model": "vit_lite_tiny",
        "methods": ["frozen_ln", "dyt"],
        "num_samples": 1,
        "seeds": [0, 1],
        "budget": {"epochs": 2, "batch_size": 32},
        "user_datasets": [{"name": "my_images", "path": path, "task": "image_classification"}],
    }


def test_a_user_dataset_is_checked_in_the_child_and_stored_with_what_its_files_hold(
    plugin_client, plugin_settings, tmp_path
):
    spec = _user_spec(_npz(tmp_path / "images.npz"))
    assert _post(plugin_client, spec, AUTH).status_code == 403  # reading the cluster's files is a right too
    response = _post(plugin_client, spec, _bearer(ensure_plugin_token(plugin_settings)))
    assert response.status_code == 201, response.text
    (declared,) = response.json()["spec"]["user_datasets"]
    assert declared["format"] == "npz"
    assert declared["facts"]["classes"] == 3 and declared["facts"]["image_side"] == 8


@pytest.mark.slow
def test_a_bad_user_file_is_a_422_at_its_path_before_anything_is_stored(
    plugin_client, plugin_settings, tmp_path
):
    spec = _user_spec(_npz(tmp_path / "bad.npz", rows=120, label_rows=100))
    response = _post(plugin_client, spec, _bearer(ensure_plugin_token(plugin_settings)))
    assert response.status_code == 422, response.text
    (error,) = response.json()["detail"]
    assert error["loc"][-3:] == ["user_datasets", 0, "path"]
    assert "bad.npz" in error["msg"]
    assert _stored(plugin_client) == 0


@pytest.mark.slow
def test_a_user_dataset_declaration_is_checked_at_its_fields_first(plugin_client, plugin_settings, tmp_path):
    spec = _user_spec(_npz(tmp_path / "images.npz"))
    spec["user_datasets"][0]["metric"] = "rmse"
    response = _post(plugin_client, spec, _bearer(ensure_plugin_token(plugin_settings)))
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"][-3:] == ["user_datasets", 0, "metric"]


def test_the_study_says_which_plugins_it_runs_in_its_json_and_on_its_page(plugin_client, plugin_settings):
    created = _post(plugin_client, SPEC, _bearer(ensure_plugin_token(plugin_settings))).json()
    study = plugin_client.get(f"/studies/{created['id']}").json()
    (plugin,) = study["plugins"]
    assert plugin["provides"] == {"norms": ["rmsnorm"], "methods": ["rmsnorm"], "knobs": ["rms_eps"]}
    assert plugin["changed_on_disk"] is None  # sent inline: no path on this machine to compare with
    page = plugin_client.get(f"/studies/{created['id']}", headers={"Accept": "text/html"}).text
    assert "<h2>Plugins</h2>" in page and plugin["sha256"][:12] in page and "methods rmsnorm" in page
