"""POST /studies with plugins: off unless the operator allows them, then only with the plugin token; the
plugin is imported and checked in a child process, and a failure is a 422 naming it that stores nothing."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient

from service.api.app import create_app
from service.auth import ensure_plugin_token
from studies.spec import StudySpec
from studies.store import get_study, list_studies, session_scope
from tests.service.api.routes.tuning_studies import finals, record
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


def test_a_plugin_method_s_knob_shows_in_the_results_knob_importance_like_a_built_in(
    plugin_client, plugin_settings
):
    rms_eps = {"type": "loguniform", "low": 1e-7, "high": 1e-3}
    lr = {"type": "loguniform", "low": 1e-4, "high": 1e-2}
    spec = {**SPEC, "num_samples": 8, "method_search": {"rmsnorm": {"rms_eps": rms_eps, "lr": lr}}}
    study_id = _post(plugin_client, spec, _bearer(ensure_plugin_token(plugin_settings))).json()["id"]
    engine = plugin_client.app.state.engine
    rng = np.random.default_rng(0)
    for i in range(8):
        knobs = {"rms_eps": float(10 ** rng.uniform(-7, -3)), "lr": float(10 ** rng.uniform(-4, -2))}
        value = 0.9 - 0.02 * (np.log10(knobs["rms_eps"]) + 5) ** 2  # rms_eps drives the objective, lr not
        record(
            engine, study_id, f"tune/{i}", phase="tune", method="rmsnorm", seed=0, knobs=knobs, value=value
        )
    finals(engine, study_id, ["rmsnorm", "frozen_ln", "dyt"])

    [tuning] = plugin_client.get("/results/digits").json()["tuning"]
    [method] = tuning["methods"]  # frozen_ln and dyt have nothing to tune here
    assert method["method"] == "rmsnorm"
    importance = method["importance"]
    assert importance["trials"] == 8 and importance["reason"] is None
    fanova = next(e for e in importance["evaluators"] if e["evaluator"] == "fanova")
    assert fanova["knobs"][0]["knob"] == "rms_eps"  # the plugin's knob ranks first, as it should
    assert {k["knob"] for k in fanova["knobs"]} == {"rms_eps", "lr"}
    page = plugin_client.get("/results/digits", params={"format": "html"}).text
    assert f'id="{study_id}_knob_importance_rmsnorm"' in page


@pytest.fixture
def installed_rmsnorm(tmp_path, monkeypatch):
    """The example RMSNorm plugin as an installed distribution `rmsnorm-plugin 1.0` (a package and its
    dist-info on PYTHONPATH, which the check's child process inherits), announcing `rmsnorm` in the
    normlab.methods entry-point group."""
    package = tmp_path / "rmsnorm_plugin"
    package.mkdir()
    (package / "__init__.py").write_text(EXAMPLE.read_text())
    info = tmp_path / "rmsnorm_plugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: rmsnorm-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[normlab.methods]\nrmsnorm = rmsnorm_plugin\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))


def test_an_installed_distribution_s_entry_point_is_checked_and_stored_with_its_files(
    plugin_client, plugin_settings, installed_rmsnorm
):
    spec = {**SPEC, "plugins": [{"entry_point": "rmsnorm"}]}
    response = _post(plugin_client, spec, _bearer(ensure_plugin_token(plugin_settings)))
    assert response.status_code == 201, response.text
    study = plugin_client.get(f"/studies/{response.json()['id']}").json()
    (plugin,) = study["plugins"]
    assert plugin["ref"] == "entry_point:rmsnorm"
    assert plugin["distribution"] == "rmsnorm-plugin 1.0"
    assert plugin["provides"]["methods"] == ["rmsnorm"]
    with session_scope(plugin_client.app.state.engine) as session:
        (stored,) = get_study(session, study_id=study["id"]).spec["plugins"]
    assert stored["files"] == {"__init__.py": EXAMPLE.read_text()}  # kept for the record


def test_an_entry_point_no_installed_distribution_announces_is_a_422_at_the_entry(
    plugin_client, plugin_settings, installed_rmsnorm
):
    spec = {**SPEC, "plugins": [{"entry_point": "nope"}]}
    response = _post(plugin_client, spec, _bearer(ensure_plugin_token(plugin_settings)))
    assert response.status_code == 422
    (problem,) = response.json()["detail"]
    assert problem["loc"][-2:] == ["plugins", 0]
    assert problem["msg"].startswith("plugin entry_point:nope: ")
    assert "rmsnorm" in problem["msg"]  # it lists what is installed
    assert _stored(plugin_client) == 0


def test_the_study_list_filters_on_a_plugin_method_and_a_user_dataset_that_stored_studies_brought(
    plugin_client, plugin_settings, tmp_path
):
    token = _bearer(ensure_plugin_token(plugin_settings))
    assert plugin_client.get("/studies", params={"method": "rmsnorm"}).status_code == 422  # no study yet
    plugin_study = _post(plugin_client, SPEC, token).json()["id"]
    user_study = _post(plugin_client, _user_spec(_npz(tmp_path / "images.npz")), token).json()["id"]

    listed = plugin_client.get("/studies", params={"method": "rmsnorm"})
    assert [s["id"] for s in listed.json()] == [plugin_study]
    listed = plugin_client.get("/studies", params={"dataset": "my_images"})
    assert [s["id"] for s in listed.json()] == [user_study]
    # A name nothing knows is still a 422, and its message offers the stored studies' names too.
    response = plugin_client.get("/studies", params={"method": "rms_norm"})
    assert response.status_code == 422
    [error] = response.json()["detail"]
    assert error["loc"] == ["query", "method"] and error["msg"].endswith(", rmsnorm")

    page = plugin_client.get("/", params={"method": "rmsnorm"}).text
    assert "<option selected>rmsnorm</option>" in page and "left out" not in page


def test_two_plugin_studies_compare_row_by_row_with_the_plugin_method_among_the_rows(
    plugin_client, plugin_settings
):
    token = _bearer(ensure_plugin_token(plugin_settings))
    engine = plugin_client.app.state.engine
    ids = []
    for epochs, base in ((2, 0.80), (3, 0.85)):
        spec = {**SPEC, "name": f"rmsnorm {epochs} epochs", "budget": {"epochs": epochs, "batch_size": 32}}
        study_id = _post(plugin_client, spec, token).json()["id"]
        finals(engine, study_id, SPEC["methods"], seeds=(0, 1, 2), value=base, per_seed=0.01)
        ids.append(study_id)

    response = plugin_client.get("/compare", params={"study": ids})
    assert response.status_code == 200, response.text
    paired = {row["row"]: row for row in response.json()["studies"][1]["paired"]}
    assert set(paired) == {"rmsnorm", "frozen_ln", "dyt"}
    assert paired["rmsnorm"]["seeds"] == 3 and paired["rmsnorm"]["difference"] == pytest.approx(0.05)
